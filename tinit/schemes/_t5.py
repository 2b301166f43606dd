"""T5's per-matrix init (Mesh TensorFlow, Hugging Face ``T5PreTrainedModel._init_weights``)."""

from __future__ import annotations

import math
import operator
from types import MappingProxyType

from tinit.schemes._core import Context, InitSpec, Scheme, normal_spec, positive, role_constants


class T5(Scheme):
    """``t5``: Hugging Face T5's ``_init_weights``, every draw an untruncated normal.

        shared token embedding       factor * 1
        untied lm_head               factor * 1
        attn_q (q)                   factor * (d * d_kv)^-1/2
        attn_k, attn_v (k, v)        factor * d^-1/2
        attn_out (o)                 factor * (h * d_kv)^-1/2   (its fan_in)
        mlp_in (wi, wi_0, wi_1)      factor * d^-1/2
        mlp_out (wo)                 factor * d_ff^-1/2          (its fan_in)
        relative_attention_bias      factor * d^-1/2
        norms (T5LayerNorm) factor * 1, biases 0
        a fused q/k/v (not T5's own)  q's rows as q, k's and v's as k and v

    transformers 5.24, ``models/t5/modeling_t5.py``
    ``T5PreTrainedModel._init_weights`` (``init.normal_(mean=0.0, std=...)``),
    after Mesh TensorFlow's T5 (Raffel et al., "Exploring the Limits of
    Transfer Learning with a Unified Text-to-Text Transformer", JMLR 2020).
    The query's extra d_kv^-1/2 is the attention's 1/sqrt(d_head) logit
    scale folded into the weights (T5 computes unscaled logits); T5X/Flaxformer
    and MaxText do the same (query kernel init divided by sqrt(d_head)), so
    this recipe is also theirs for the query. d_kv (the head width) is not
    in a parameter's shape: pass ``d_kv`` (``init_model_`` reads it, and
    ``factor``, from a model's config when not passed: ``d_kv`` or ``head_dim``,
    ``initializer_factor``). The relative-position bias
    (``nn.Embedding(num_buckets, n_heads)``) has role embedding in tinit; the
    scheme tells it from the token embedding by its width (not d_model).

    Options:
        d_kv: int >= 1, the head width (T5Config.d_kv); needed for attn_q.
        factor: float > 0, T5Config.initializer_factor, default 1.
    """

    name = "t5"
    needs_role = True
    default_trunc = math.inf
    tied = "embedding"  # T5PreTrainedModel._init_weights draws lm_head only "not tie_word_embeddings"
    # what HF T5's _init_weights reads from its config; init_model_ fills them from a model's config
    config_options = MappingProxyType({"d_kv": ("d_kv", "head_dim"), "factor": ("initializer_factor",)})

    def rule(self, ctx: Context, d_kv: int | None = None, factor: float = 1.0) -> InitSpec:
        factor = positive(self.name, "factor", factor)
        if d_kv is not None:
            if isinstance(d_kv, bool) or not hasattr(type(d_kv), "__index__") or operator.index(d_kv) < 1:
                raise ValueError(f"scheme 't5': d_kv must be an int >= 1, got {d_kv!r}")
            d_kv = operator.index(d_kv)
        base = ctx.base
        if base == "norm":
            return InitSpec(constant=factor)
        constant = role_constants(base)
        if constant is not None:
            return constant
        if base == "embedding":
            if len(ctx.shape) == 2 and ctx.shape[1] != ctx.need("d_model"):  # relative_attention_bias
                return normal_spec(factor * ctx.need("d_model") ** -0.5)
            return normal_spec(factor)
        if base == "head":
            return normal_spec(factor)
        if base in ("attn_q", "attn_qkv"):
            if d_kv is None:
                raise ValueError(f"scheme 't5' needs d_kv (the head width, T5Config.d_kv) for role {ctx.role!r}")
            query = normal_spec(factor * (ctx.need("d_model") * d_kv) ** -0.5)
            if base == "attn_q":
                return query
            key_value = normal_spec(factor * ctx.need("d_model") ** -0.5)
            return ctx.qkv_parts(query, key_value, key_value)  # a fused q/k/v: each part its own row
        if base in ("attn_out", "mlp_out"):
            return normal_spec(factor * ctx.fans()[0] ** -0.5)
        return normal_spec(factor * ctx.need("d_model") ** -0.5)
