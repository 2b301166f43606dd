"""DeepNet's DeepNorm: alpha for the residual, beta-scaled Xavier weights."""

from __future__ import annotations

import math

from tinit.schemes._core import (
    Context,
    InitSpec,
    Scheme,
    _constants,
    _normal,
)


def deepnorm_constants(
    n_layers: int | None = None,
    *,
    stack: str | None = None,
    encoder_layers: int | None = None,
    decoder_layers: int | None = None,
) -> tuple[float, float]:
    """DeepNorm's (alpha, beta) (Wang et al., "DeepNet", arXiv:2203.00555, 2022, Figure 2).

        encoder-only (N layers) / decoder-only (M layers):
            alpha = (2 N)^(1/4),                beta = (8 N)^(-1/4)
        encoder-decoder, encoder:
            alpha = 0.81 (N^4 M)^(1/16),        beta = 0.87 (N^4 M)^(-1/16)
        encoder-decoder, decoder:
            alpha = (3 M)^(1/4),                beta = (12 M)^(-1/4)

    The encoder-decoder rows are the paper's (its alpha/beta table beside the
    pseudocode of Figure 2). Microsoft's torchscale, the authors' code, uses
    the same alphas (``0.81 * (N**4 * M) ** 0.0625``, ``(3 * M) ** 0.25``) and
    divides its own Xavier-uniform weights by ``(12 * M) ** 0.25`` (decoder)
    and ``(N**4 * M) ** 0.0625 / 1.15`` (encoder), i.e. gains relative to a
    different base init; tinit follows the paper's Xavier-normal with gain
    beta = 0.87 (N^4 M)^(-1/16). The design document ``shared/seeds/003``
    gives (2N)^(1/4), (8N)^(-1/4) for the encoder and (2M)^(1/4), (8M)^(-1/4)
    for the decoder of an encoder-decoder model; that is the single-stack
    formula, not the paper's, and tinit does not use it.

    Args:
        n_layers: depth of a single-stack model (used when ``encoder_layers``
            and ``decoder_layers`` are not both given).
        stack: "encoder" or "decoder" for an encoder-decoder model.
        encoder_layers, decoder_layers: N and M of an encoder-decoder model.

    Returns:
        (alpha, beta).

    Raises:
        ValueError: missing or non-positive depths, or an encoder-decoder
            model without ``stack``.
    """

    def depth(name, value):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"deepnorm needs {name} (an int >= 1), got {value!r}")
        return value

    if encoder_layers is not None and decoder_layers is not None:
        n, m = depth("encoder_layers", encoder_layers), depth("decoder_layers", decoder_layers)
        if stack == "encoder":
            return 0.81 * (n**4 * m) ** (1 / 16), 0.87 * (n**4 * m) ** (-1 / 16)
        if stack == "decoder":
            return (3 * m) ** 0.25, (12 * m) ** -0.25
        raise ValueError(f"deepnorm in an encoder-decoder model needs stack 'encoder' or 'decoder', got {stack!r}")
    n = depth("n_layers", n_layers)
    return (2 * n) ** 0.25, (8 * n) ** -0.25


class DeepNorm(Scheme):
    """``deepnorm``: DeepNet's initialisation; alpha exposed for the residual.

    Wang et al., "DeepNet: Scaling Transformers to 1,000 Layers"
    (arXiv:2203.00555, 2022), Figure 2: x_{l+1} = LN(alpha x_l + G(x_l)) and
    Xavier-normal weights, with gain beta for v_proj, out_proj and the FFN
    matrices and gain 1 for q_proj and k_proj:
        attn_q, attn_k:              std = sqrt(2 / (fan_in + fan_out))
        attn_v, attn_out, mlp_in, mlp_out:  beta * sqrt(2 / (fan_in + fan_out))
        attn_qkv (fused):            the three thirds of the output dim as q, k, v
    alpha and beta from ``deepnorm_constants`` (encoder-decoder constants from
    the paper). Embeddings and an untied head: N(0, d^-1/2), torchscale's
    choice (the paper does not set them); norms 1, biases 0. The paper draws
    untruncated normals; tinit's default truncation is +-2 std.

    ``multipliers`` returns {"residual_alpha": alpha, "beta": beta} (per stack
    of an encoder-decoder model, or both stacks prefixed "encoder_" /
    "decoder_" when no stack is given): the block must compute
    ``norm(alpha * x + sublayer(x))``.
    """

    name = "deepnorm"
    needs_role = True

    def rule(self, ctx: Context) -> InitSpec:
        constant = _constants(ctx.base)
        if constant is not None:
            return constant
        if ctx.base in ("embedding", "head"):
            width = ctx.d_model if ctx.d_model else ctx.fans()[0]
            return _normal(width**-0.5)
        fan_in, fan_out = ctx.fans()
        xavier = math.sqrt(2.0 / (fan_in + fan_out))
        if ctx.base in ("attn_q", "attn_k"):
            return _normal(xavier)
        _, beta = deepnorm_constants(
            ctx.n_layers, stack=ctx.stack, encoder_layers=ctx.encoder_layers, decoder_layers=ctx.decoder_layers
        )
        if ctx.base == "attn_qkv":
            return ctx.qkv_parts(_normal(xavier), _normal(xavier), _normal(beta * xavier))
        return _normal(beta * xavier)

    def multipliers(
        self, *, n_layers=None, d_model=None, stack=None, encoder_layers=None, decoder_layers=None, **options
    ) -> dict[str, float]:
        """DeepNorm's alpha (and beta) for the residual branch.

        Returns:
            {"residual_alpha", "beta"} for a single stack or a given stack;
            {"encoder_residual_alpha", "encoder_beta", "decoder_residual_alpha",
            "decoder_beta"} for an encoder-decoder model without ``stack``.
        """
        if encoder_layers is not None and decoder_layers is not None and stack is None:
            out = {}
            for part in ("encoder", "decoder"):
                alpha, beta = deepnorm_constants(
                    stack=part, encoder_layers=encoder_layers, decoder_layers=decoder_layers
                )
                out.update({f"{part}_residual_alpha": alpha, f"{part}_beta": beta})
            return out
        alpha, beta = deepnorm_constants(
            n_layers, stack=stack, encoder_layers=encoder_layers, decoder_layers=decoder_layers
        )
        return {"residual_alpha": alpha, "beta": beta}
