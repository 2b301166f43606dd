"""Width-based recipes: GPT-NeoX's small_init and wang_init, OLMo's mitchell, the design documents' modern table."""

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


def _small_std(ctx: Context) -> float:
    return math.sqrt(2.0 / (5.0 * ctx.need("d_model")))


class SmallInit(Scheme):
    """``small_init``: std = sqrt(2 / (5 d)) for every matrix.

    The "small init" GPT-NeoX attributes to Nguyen & Salazar, "Transformers
    without Tears" (arXiv:1910.05895, 2019): GPT-NeoX's
    ``small_init_init_method(hidden_size)``, written sqrt(2 / (d + 4 d)) in
    the GPT-NeoX-20B paper (Xavier's 2 / (fan_in + fan_out) for a d x 4d MLP
    matrix). d = d_model for every matrix (MLP down projections included),
    norms 1, biases 0; no role needed. Untruncated, as GPT-NeoX draws it
    (``megatron/model/init_functions.py`` ``small_init_init_method``:
    ``torch.nn.init.normal_(tensor, mean=0.0, std=std)``).
    """

    name = "small_init"
    needs_role = False
    default_trunc = math.inf

    def rule(self, ctx: Context) -> InitSpec:
        return role_constants(ctx.base) or normal_spec(_small_std(ctx))


class WangInit(Scheme):
    """``wang_init``: GPT-NeoX's pairing, output projections std = 2 / (L sqrt(d)).

    attn_out and mlp_out from GPT-NeoX's ``wang_init_method(n_layers, dim)``
    (after Ben Wang's mesh-transformer-jax), every other matrix from
    ``small_init``'s sqrt(2 / (5 d)) (Black et al., "GPT-NeoX-20B",
    arXiv:2204.06745, 2022, on initialisation; GPT-NeoX's code applies
    ``output_layer_init_method`` to both output projections, as here).
    Norms 1, biases 0. Untruncated, as GPT-NeoX's ``wang_init_method`` draws
    it (``torch.nn.init.normal_``).
    """

    name = "wang_init"
    needs_role = True
    default_trunc = math.inf

    def rule(self, ctx: Context) -> InitSpec:
        if ctx.base in OUTPUT_ROLES:
            return normal_spec(2.0 / (ctx.need("n_layers") * math.sqrt(ctx.need("d_model"))))
        return role_constants(ctx.base) or normal_spec(_small_std(ctx))


class Mitchell(Scheme):
    """``mitchell``: OLMo's ``InitFnType.mitchell`` (after Mitchell Wortsman).

    std = 1 / sqrt(d_in), and for the output projections of block l (0-based)
    a further 1 / sqrt(2 (l + 1)), truncated at +-3 std without rescaling
    (realised std 0.9866 of it; ``olmo/initialization.py`` ``init_normal``:
    ``nn.init.trunc_normal_(std=std, a=-3 * std, b=3 * std)``; Groeneveld et
    al., "OLMo", arXiv:2402.00838, 2024). d_in is d_model for embeddings, q/k/v, MLP in, attention output
    and head, and the MLP hidden width (the down projection's fan_in) for
    mlp_out:
        attn_out: 1 / sqrt(2 d (l + 1));  mlp_out: 1 / sqrt(2 d_ff (l + 1)).
    """

    name = "mitchell"
    needs_role = True
    depth_dependent = True
    default_trunc = 3.0
    tied = "embedding"  # OLMo.reset_parameters: wte drawn, ff_out only exists without weight_tying

    def rule(self, ctx: Context) -> InitSpec:
        constant = role_constants(ctx.base)
        if constant is not None:
            return constant
        d_in = ctx.fans()[0] if ctx.base == "mlp_out" else ctx.need("d_model")
        std = 1.0 / math.sqrt(d_in)
        if ctx.base in OUTPUT_ROLES:
            std /= math.sqrt(2.0 * (ctx.need("layer_idx") + 1))
        return normal_spec(std)


class Modern(Scheme):
    """``modern``: the recipe table of the design documents, truncated at +-3 std.

        embeddings                    0.02
        attn q/k/v (fused), mlp_in    base
        attn_out, mlp_out             base / sqrt(2 L)
        head                          base (a hidden-width matrix)
        norm weights 1, biases 0

    base = sqrt(2 / (5 d)) (``small_init``, Nguyen & Salazar 2019) or
    1 / sqrt(d); the 1 / sqrt(2 L) factor is GPT-2's/Megatron's. The table of
    the project's design document (not shipped) writes sqrt(2/d) for q/k/v and gate/up, but the same
    document's text and code use sqrt(2/(5d)) or 1/sqrt(d) (sqrt(2/d) is He's
    ReLU init for fan_in d); tinit follows the text, the code and the cited
    source. The table does not list the head; tinit gives it the base std, as
    the document's code does for every Linear that is not an output
    projection.

    Options:
        base: "small" (sqrt(2 / (5 d)), default), "inv_sqrt_d" (1 / sqrt(d))
            or a float std.
        embedding_std: default 0.02.
    """

    name = "modern"
    needs_role = True
    default_trunc = 3.0
    tied = "embedding"  # no reference: tinit's choice, the embedding's 0.02 as GPT-2's tied wte

    def rule(self, ctx: Context, base: str | float = "small", embedding_std: float = 0.02) -> InitSpec:
        constant = role_constants(ctx.base)
        if constant is not None:
            return constant
        if ctx.base == "embedding":
            return normal_spec(positive(self.name, "embedding_std", embedding_std))
        if base == "small":
            std = _small_std(ctx)
        elif base == "inv_sqrt_d":
            std = 1.0 / math.sqrt(ctx.need("d_model"))
        elif isinstance(base, str):
            raise ValueError(f"scheme 'modern': base must be 'small', 'inv_sqrt_d' or a float, got {base!r}")
        else:
            std = positive(self.name, "base", base)
        if ctx.base in OUTPUT_ROLES:
            std /= math.sqrt(2.0 * ctx.need("n_layers"))
        return normal_spec(std)
