"""Normal-family recipes: one std for every matrix, output projections scaled by depth."""

from __future__ import annotations

import math

from tinit.schemes._core import (
    OUTPUT_ROLES,
    Context,
    InitSpec,
    Scheme,
    _constants,
    _normal,
    _positive,
)


class Normal(Scheme):
    """``normal``: every matrix and embedding from N(0, std^2), truncated at +-trunc std.

    std = 0.02 by default: GPT-2's and BERT's ``initializer_range`` (Radford
    et al., 2019; Devlin et al., 2019). Norm weights 1, biases 0, residual
    gates 1. Needs no role: a parameter tinit cannot classify gets the same
    N(0, std^2) as any matrix.

    Options:
        std: float > 0, default 0.02.
    """

    name = "normal"
    needs_role = False

    def rule(self, ctx: Context, std: float = 0.02) -> InitSpec:
        std = _positive(self.name, "std", std)
        return _constants(ctx.base) or _normal(std)


class GPT2(Normal):
    """``gpt2``: ``normal`` plus residual output projections scaled by depth.

    std_out = std / sqrt(multiplier * L) for attn_out and mlp_out (HF GPT-2
    ``attn.c_proj``/``mlp.c_proj``), std elsewhere; multiplier = 2 because each
    of the L blocks adds two branches to the residual stream. Radford et al.,
    "Language Models are Unsupervised Multitask Learners" (2019), section 2.3,
    scale "the weights of residual layers at initialization by a factor of
    1/sqrt(N) where N is the number of residual layers"; Hugging Face's
    ``GPT2PreTrainedModel._init_weights`` and nanoGPT take N = 2L, as here.
    Both draw from an untruncated normal (``trunc=math.inf`` reproduces it).

    Options:
        std: float > 0, default 0.02.
        multiplier: residual branches per block, default 2.
    """

    name = "gpt2"
    needs_role = True

    def rule(self, ctx: Context, std: float = 0.02, multiplier: float = 2.0) -> InitSpec:
        std = _positive(self.name, "std", std)
        multiplier = _positive(self.name, "multiplier", multiplier)
        if ctx.base in OUTPUT_ROLES:
            return _normal(std / math.sqrt(multiplier * ctx.need("n_layers")))
        return _constants(ctx.base) or _normal(std)


class Megatron(GPT2):
    """``megatron``: Megatron-LM's ``init_method_normal`` / ``scaled_init_method_normal``.

    Every matrix (embeddings, q/k/v, MLP in, output layer) from N(0, std^2)
    with std = ``init_method_std`` (0.02); the output projections (attention
    ``dense``/``linear_proj``, MLP ``dense_4h_to_h``/``linear_fc2``) from
    N(0, std^2 / (multiplier * L)) with multiplier = 2.0 (Shoeybi et al.,
    "Megatron-LM", arXiv:1909.08053, 2019; ``megatron/core/utils.py``). The
    same numbers as ``gpt2``; Megatron also draws untruncated normals.

    Options:
        std: float > 0, default 0.02.
        multiplier: default 2.0 (Megatron's ``scaled_init_method_normal``).
    """

    name = "megatron"


class DepthInit(Normal):
    """``depth_init``: output projections scaled by their own depth.

    std_out(l) = std / sqrt(2 * (l + 1)) for attn_out and mlp_out of block l
    (0-based), std elsewhere: torchtitan's Llama ``depth_init=True``
    (``weight_init_std = 0.02 / (2 * (layer_id + 1)) ** 0.5``) and OLMo-core's
    ``InitMethod.llama_depth``. Where those codebases differ: both also
    scale the MLP up projection (``w3``), which tinit cannot tell from the
    gate (both are mlp_in; an override with per-layer ``options`` can); both
    draw embeddings from N(0, 1) and the untied output head with std d^-1/2
    at +-3 std (options ``embedding_std``, ``head_std``); torchtitan passes
    absolute bounds of +-2 to ``trunc_normal_``, i.e. an effectively
    untruncated normal (``trunc=math.inf``).

    Options:
        std: float > 0, default 0.02.
        embedding_std: std of embeddings, default ``std`` (torchtitan: 1.0).
        head_std: std of the output head, default ``std`` (torchtitan: d^-1/2).
    """

    name = "depth_init"
    needs_role = True
    depth_dependent = True

    def rule(
        self, ctx: Context, std: float = 0.02, embedding_std: float | None = None, head_std: float | None = None
    ) -> InitSpec:
        std = _positive(self.name, "std", std)
        if ctx.base in OUTPUT_ROLES:
            return _normal(std / math.sqrt(2.0 * (ctx.need("layer_idx") + 1)))
        if ctx.base == "embedding" and embedding_std is not None:
            return _normal(_positive(self.name, "embedding_std", embedding_std))
        if ctx.base == "head" and head_std is not None:
            return _normal(_positive(self.name, "head_std", head_std))
        return _constants(ctx.base) or _normal(std)
