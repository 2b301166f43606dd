"""Fan-based recipes (Glorot, He, LeCun): every weight alike through its fans, no role needed."""

from __future__ import annotations

import math
import operator
from dataclasses import replace

from tinit.schemes._core import (
    Context,
    InitSpec,
    Scheme,
    normal_spec,
    positive,
    role_constants,
)


class _FanScheme(Scheme):
    """Schemes that treat every weight alike through its fans (no role needed)."""

    needs_role = False

    def rule(self, ctx: Context, **options) -> InitSpec:
        constant = role_constants(ctx.base)
        if constant is not None:
            return constant
        if len(ctx.shape) == 1 and ctx.fan_in is None and ctx.fan_out is None and ctx.base == "embedding":
            # A drawn vector has no fans of its own (torch.nn.init refuses one). A learned token
            # (CLIP's class_embedding): fans of its width n, so Xavier and LeCun give n^-1/2, CLIP's own
            # std (CLIPPreTrainedModel._init_weights: embed_dim ** -0.5). A vector of no elements has
            # the fans of an (n, n) weight: Context.fans refuses n = 0 as for nn.Linear(0, d), and
            # Scheme.spec turns that into nothing written.
            fan_in, fan_out = replace(ctx, shape=(ctx.shape[0], ctx.shape[0])).fans()
            return self.weight(ctx, fan_in, fan_out, **options)
        return self.weight(ctx, *ctx.fans(), **options)

    def weight(self, ctx: Context, fan_in: int, fan_out: int, **options) -> InitSpec:
        raise NotImplementedError


class XavierNormal(_FanScheme):
    """``xavier_normal``: std = gain * sqrt(2 / (fan_in + fan_out)).

    Glorot & Bengio, "Understanding the difficulty of training deep
    feedforward neural networks" (AISTATS 2010), eq. 12 (Var = 2 / (n_in +
    n_out)), in its normal form (``torch.nn.init.xavier_normal_``; the paper
    writes the uniform of ``xavier_uniform``). Applied to every weight with >=
    2 dims, embeddings and head included; norms 1, biases 0. Untruncated, as
    ``torch.nn.init.xavier_normal_`` draws it (``tensor.normal_(0, std)``).

    Options:
        gain: float > 0, default 1.
    """

    name = "xavier_normal"
    default_trunc = math.inf

    def weight(self, ctx: Context, fan_in: int, fan_out: int, gain: float = 1.0) -> InitSpec:
        return normal_spec(positive(self.name, "gain", gain) * math.sqrt(2.0 / (fan_in + fan_out)))


class XavierUniform(_FanScheme):
    """``xavier_uniform``: U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out)).

    Glorot & Bengio (2010), eq. 16 ("normalized initialization"); std =
    a / sqrt(3) = gain * sqrt(2 / (fan_in + fan_out)). A uniform, so ``trunc``
    and ``variance_preserving`` do not apply (bounds are sqrt(3) std).

    Options:
        gain: float > 0, default 1.
    """

    name = "xavier_uniform"

    def weight(self, ctx: Context, fan_in: int, fan_out: int, gain: float = 1.0) -> InitSpec:
        std = positive(self.name, "gain", gain) * math.sqrt(2.0 / (fan_in + fan_out))
        return InitSpec(std=std, distribution="uniform")


def _kaiming_fan(scheme: str, mode: str, fan_in: int, fan_out: int) -> int:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"scheme {scheme!r}: mode must be 'fan_in' or 'fan_out', got {mode!r}")
    return fan_in if mode == "fan_in" else fan_out


class KaimingNormal(_FanScheme):
    """``kaiming_normal``: std = gain / sqrt(fan), gain = sqrt(2) (ReLU).

    He et al., "Delving Deep into Rectifiers" (arXiv:1502.01852, 2015), eq. 10:
    Var = 2 / n_l with n_l = fan_in (forward) or eq. 14 with fan_out
    (backward). ``torch.nn.init.kaiming_normal_`` with nonlinearity "relu",
    untruncated as torch draws it (``tensor.normal_(0, std)``).

    Options:
        gain: float > 0, default sqrt(2); sqrt(2 / (1 + a^2)) for leaky ReLU.
        mode: "fan_in" (default) or "fan_out".
    """

    name = "kaiming_normal"
    default_trunc = math.inf

    def weight(
        self, ctx: Context, fan_in: int, fan_out: int, gain: float = math.sqrt(2.0), mode: str = "fan_in"
    ) -> InitSpec:
        fan = _kaiming_fan(self.name, mode, fan_in, fan_out)
        return normal_spec(positive(self.name, "gain", gain) / math.sqrt(fan))


class KaimingUniform(_FanScheme):
    """``kaiming_uniform``: U(-b, b), b = gain * sqrt(3 / fan); std = gain / sqrt(fan).

    He et al. (2015) in uniform form (``torch.nn.init.kaiming_uniform_``).
    ``gain=1/sqrt(3)`` gives PyTorch's default ``nn.Linear`` init,
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)).

    Options:
        gain: float > 0, default sqrt(2).
        mode: "fan_in" (default) or "fan_out".
    """

    name = "kaiming_uniform"

    def weight(
        self, ctx: Context, fan_in: int, fan_out: int, gain: float = math.sqrt(2.0), mode: str = "fan_in"
    ) -> InitSpec:
        fan = _kaiming_fan(self.name, mode, fan_in, fan_out)
        return InitSpec(std=positive(self.name, "gain", gain) / math.sqrt(fan), distribution="uniform")


class LecunNormal(_FanScheme):
    """``lecun_normal``: realised std = 1 / sqrt(fan_in), truncated at +-2 std and rescaled.

    LeCun, Bottou, Orr & Mueller, "Efficient BackProp" (1998), section 4.6
    (Var = 1 / fan_in); Klambauer et al., "Self-Normalizing Neural Networks"
    (2017). The reference is JAX's ``jax.nn.initializers.lecun_normal``
    (``jax/_src/nn/initializers.py``: ``variance_scaling(1.0, "fan_in",
    "truncated_normal")``), which Keras' ``lecun_normal`` and Flax share:
    a normal truncated at +-2 of its std, that std divided by .87962566103423978
    (the truncated normal's std factor) so that the realised std is
    1 / sqrt(fan_in). PyTorch has no ``lecun_normal`` (its SELU note
    suggests the untruncated ``kaiming_normal_(nonlinearity="linear")``:
    ``trunc=math.inf``). tinit follows JAX: trunc 2, variance-preserving by
    default; ``variance_preserving=False`` gives the unrescaled draw.

    ``d_head`` adds T5X's query scaling: Flaxformer's
    ``MultiHeadDotProductAttention`` (and MaxText's ``query_projection``
    before it moved the factor to the activations) draws the query kernel
    with ``query_init = kernel_init(...) / sqrt(head_dim)``, T5's 1/sqrt(d_head)
    logit scale folded into the weights, on T5X's default kernel init
    ``variance_scaling(1.0, "fan_in", "truncated_normal")``, i.e. this
    recipe. The query (attn_q, or the q rows of a fused attn_qkv) then has
    realised std 1 / sqrt(fan_in * d_head).

    Options:
        d_head: int >= 1 or None (default): the head width the query is scaled by.
    """

    name = "lecun_normal"
    reference_variance_preserving = True

    def weight(self, ctx: Context, fan_in: int, fan_out: int, d_head: int | None = None) -> InitSpec:
        std = 1.0 / math.sqrt(fan_in)
        if d_head is None:
            return normal_spec(std)
        if isinstance(d_head, bool) or not hasattr(type(d_head), "__index__") or operator.index(d_head) < 1:
            raise ValueError(f"scheme 'lecun_normal': d_head must be an int >= 1 or None, got {d_head!r}")
        query = normal_spec(std / math.sqrt(operator.index(d_head)))
        if ctx.base == "attn_q":
            return query
        if ctx.base == "attn_qkv":
            return ctx.qkv_parts(query, normal_spec(std), normal_spec(std))
        return normal_spec(std)
