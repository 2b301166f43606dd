"""OLMo-core's ``InitMethod`` recipes: ``llama``, ``llama_depth``, ``fan_in`` and ``normalized`` (nGPT).

The reference is ``olmo_core/nn/transformer/init.py`` of ai2-olmo-core 3.0.0
(``InitMethod.init_embeddings``, ``init_final_w_out``, ``init_feed_forward``,
``init_feed_forward_moe``, ``init_linear``) with the attention's own
``Attention.init_weights`` / ``FusedAttention.init_weights``
(``olmo_core/nn/attention/__init__.py``), called by
``Transformer.init_weights`` (``olmo_core/nn/transformer/model.py``) with
``std = init_std`` (0.02). Every linear weight is drawn by ``init_linear``:
``nn.init.trunc_normal_(std=s, a=-3 s, b=3 s)``, +-3 std without rescaling
(realised std 0.9866 s), tinit's default; embeddings by ``nn.init.normal_``,
untruncated.
"""

from __future__ import annotations

import math

from tinit.schemes._core import (
    OUTPUT_ROLES,
    Context,
    InitSpec,
    Scheme,
    normal_spec,
    positive,
    role_constants,
)


class _OlmoCore(Scheme):
    """The shared frame: constants, truncation; subclasses implement ``_std``."""

    needs_role = True
    default_trunc = 3.0
    # OLMo-core's Transformer.init_weights: init_embeddings, then _tie_weights, and init_final_w_out
    # only "if self.lm_head is not None and not self.tie_word_embeddings"
    tied = "embedding"

    def rule(self, ctx: Context, **options) -> InitSpec:
        if ctx.base not in ("embedding", "head") and ctx.role != "attn_sink":
            constant = role_constants(ctx.base)
            if constant is not None:
                return constant
        return normal_spec(self._std(ctx, **options))

    def reference_trunc(self, ctx: Context, spec: InitSpec) -> float:
        """Embeddings and attention sinks untruncated (``nn.init.normal_``), every linear +-3 std."""
        return math.inf if ctx.base == "embedding" or ctx.role == "attn_sink" else 3.0

    def _std(self, ctx: Context, **options) -> float:
        raise NotImplementedError


class OlmoLlama(_OlmoCore):
    """``olmo_llama``: OLMo-core's ``InitMethod.llama``.

        embedding                               N(0, 1), untruncated
        q, k, v (or fused qkv), MLP gate w1     std
        attn_out (w_out)                        std / sqrt(2 L)
        MLP up w3 (mlp_up), down w2 (mlp_out)   std / sqrt(2 L)
        MoE router                              std / sqrt(2 L)
        head (lm_head.w_out)                    d^-1/2
        attention sinks                         N(0, (std / sqrt(2 L))^2), untruncated
        norms 1, biases 0

    std = 0.02 (``TransformerConfig.init_std``); every linear at +-3 std
    without rescaling. ``init_feed_forward`` scales w3 and then draws w2 with
    the same (already scaled) std; tinit follows the code. Routed experts:
    ``init_feed_forward_moe`` scales w1 too (unlike the dense MLP's), which
    roles alone do not tell apart: pass an override with ``options`` for them.

    Options:
        std: float > 0, default 0.02.
    """

    name = "olmo_llama"

    def _scale(self, ctx: Context) -> float:
        return 1.0 / math.sqrt(2.0 * ctx.need("n_layers"))

    def _std(self, ctx: Context, std: float = 0.02) -> float:
        std = positive(self.name, "std", std)
        if ctx.base == "embedding":
            return 1.0
        if ctx.base == "head":
            return ctx.need("d_model") ** -0.5  # init_final_w_out
        if ctx.base in OUTPUT_ROLES or ctx.role in ("mlp_up", "router", "attn_sink"):
            return std * self._scale(ctx)
        return std


class OlmoLlamaDepth(OlmoLlama):
    """``olmo_llama_depth``: OLMo-core's ``InitMethod.llama_depth``: ``olmo_llama`` with
    1 / sqrt(2 (l + 1)) for block l (0-based) in place of 1 / sqrt(2 L).

    Options:
        std: float > 0, default 0.02.
    """

    name = "olmo_llama_depth"
    depth_dependent = True

    def _scale(self, ctx: Context) -> float:
        return 1.0 / math.sqrt(2.0 * (ctx.need("layer_idx") + 1))


class OlmoFanIn(_OlmoCore):
    """``olmo_fan_in``: OLMo-core's ``InitMethod.fan_in``: std = fan_in^-1/2 per matrix.

    q, k, v, MLP w1/w3: their fan_in^-1/2 (d_model); attn_out: its fan_in
    (heads x head_dim)^-1/2; mlp_out (w2): d_ff^-1/2; the router d^-1/2;
    embedding N(0, (1 / embed_scale)^2) untruncated (N(0, 1) without an
    ``embed_scale``); head d^-1/2; attention sinks N(0, 1/d) untruncated
    (OLMo-core: w_out's fan_in^-1/2, equal to d^-1/2 when heads x head_dim
    = d). No depth factor. Linears at +-3 std without rescaling.

    Options:
        embed_scale: float > 0 or None (OLMo-core's ``TransformerConfig.embed_scale``).
    """

    name = "olmo_fan_in"

    def _std(self, ctx: Context, embed_scale: float | None = None) -> float:
        if embed_scale is not None:
            embed_scale = positive(self.name, "embed_scale", embed_scale)
        if ctx.base == "embedding":
            return 1.0 if embed_scale is None else 1.0 / embed_scale
        if ctx.base == "head" or ctx.role in ("router", "attn_sink"):
            return ctx.need("d_model") ** -0.5
        return ctx.fans()[0] ** -0.5


class OlmoNormalized(_OlmoCore):
    """``olmo_normalized``: OLMo-core's ``InitMethod.normalized`` (nGPT), the draws before
    ``NormalizedTransformer.normalize_matrices``.

        embedding                         N(0, 1/d), untruncated
        q, k, v, MLP w1 and w3            d^-1/2
        attn_out, mlp_out (w2)            d^-1/2 / sqrt(2 L)
        head                              d^-1/2
        MoE router                        std (``init_feed_forward_moe`` has no nGPT branch)
        linears at +-3 std without rescaling; norms 1, biases 0

    Loshchilov et al., "nGPT: Normalized Transformer with Representation
    Learning on the Hypersphere" (arXiv:2410.01131, 2024). OLMo-core's
    ``NormalizedTransformer.init_weights`` then scales every matrix to unit
    norm along its embedding dim; that is the model's step, not a
    distribution: call ``model.normalize_matrices()`` after ``init_model_``,
    as OLMo-core's ``init_weights`` does. nGPT's scaling vectors (``sq``,
    ``suv``, ``alpha``s) are set by the model's own ``reset_parameters``;
    tinit has no role for them (pass an override).

    Options:
        std: float > 0, default 0.02 (the router's only).
    """

    name = "olmo_normalized"
    tied = None  # OLMo-core's TransformerConfig refuses tie_word_embeddings for the normalized transformer

    def _std(self, ctx: Context, std: float = 0.02) -> float:
        std = positive(self.name, "std", std)
        base = ctx.need("d_model") ** -0.5
        if ctx.role == "router":
            return std
        if ctx.base in OUTPUT_ROLES or ctx.role == "attn_sink":
            return base / math.sqrt(2.0 * ctx.need("n_layers"))
        return base


class OlmoFullMegatron(_OlmoCore):
    """``olmo_full_megatron``: OLMo's ``InitFnType.full_megatron`` (the OLMo 1 codebase).

        embedding (wte, wpe)                  std (emb_init_std when given), +-3 std
        q, k, v (fused att_proj), mlp_in      std
        attn_out, mlp_out                     std / sqrt(2 L)
        head (ff_out)                         d^-1/2
        every weight at +-3 std without rescaling; norms 1, biases 0

    ai2-olmo 0.6.0, ``olmo/model.py``: ``OLMo.reset_parameters`` (wte, wpe,
    ``ff_out``), ``OLMoBlock.reset_parameters`` (``attn_out``, ``ff_out``),
    ``OLMoSequentialBlock`` / ``OLMoLlamaBlock.reset_parameters`` (``att_proj``,
    ``ff_proj``, q/k/v), each through ``olmo/initialization.py``
    ``init_normal`` (``trunc_normal_`` at +-3 std, ``init_cutoff_factor``
    defaulting to 3). std = ``init_std`` (0.02). OLMo's ``scale_emb_init``
    (embedding std times sqrt(d)) is ``embedding_std=std * sqrt(d)``.

    Options:
        std: float > 0, default 0.02.
        embedding_std: float > 0 or None (``emb_init_std``; default ``std``).
    """

    name = "olmo_full_megatron"
    tied = "embedding"  # OLMo.reset_parameters: wte drawn, ff_out only exists without weight_tying

    def reference_trunc(self, ctx: Context, spec: InitSpec) -> float:
        """Every weight +-3 std, embeddings included (``init_normal`` with a cutoff)."""
        return 3.0

    def _std(self, ctx: Context, std: float = 0.02, embedding_std: float | None = None) -> float:
        std = positive(self.name, "std", std)
        if ctx.base == "embedding":
            return std if embedding_std is None else positive(self.name, "embedding_std", embedding_std)
        if ctx.base == "head":
            return ctx.need("d_model") ** -0.5
        if ctx.base in OUTPUT_ROLES:
            return std / math.sqrt(2.0 * ctx.need("n_layers"))
        return std
