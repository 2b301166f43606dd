"""DeepNet's DeepNorm: alpha for the residual, beta-scaled weights (the paper's and torchscale's)."""

from __future__ import annotations

import math

from tinit.schemes._core import (
    Context,
    InitSpec,
    Scheme,
    normal_spec,
    role_constants,
)

_VARIANTS = ("paper", "torchscale")


def deepnorm_constants(
    n_layers: int | None = None,
    *,
    stack: str | None = None,
    encoder_layers: int | None = None,
    decoder_layers: int | None = None,
    variant: str = "paper",
) -> tuple[float, float]:
    """DeepNorm's (alpha, beta) (Wang et al., "DeepNet", arXiv:2203.00555, 2022, Figure 2).

        encoder-only (N layers) / decoder-only (M layers):
            alpha = (2 N)^(1/4),                beta = (8 N)^(-1/4)
        encoder-decoder, encoder:
            alpha = 0.81 (N^4 M)^(1/16),        beta = 0.87 (N^4 M)^(-1/16)
        encoder-decoder, decoder:
            alpha = (3 M)^(1/4),                beta = (12 M)^(-1/4)

    ``variant="torchscale"`` gives the constants of microsoft/torchscale 0.3.0
    (the authors' library: ``torchscale.architecture.encoder.Encoder.__init__``
    and ``EncoderLayer.__init__``, ``decoder.Decoder.__init__`` and
    ``DecoderLayer.__init__``), where beta is 1 / ``init_scale``: the same
    alphas and the same betas except the encoder of an encoder-decoder model,
    whose ``init_scale = (N**4 * M) ** 0.0625 / 1.15`` makes beta
    1.15 (N^4 M)^(-1/16), 1.32 times the paper's 0.87 (N^4 M)^(-1/16)
    (1.15 is 1 / 0.87: the constant enters inverted).

    The project's design document (not shipped) gives (2N)^(1/4), (8N)^(-1/4) for
    the encoder and (2M)^(1/4), (8M)^(-1/4) for the decoder of an
    encoder-decoder model; that is the single-stack formula, neither the
    paper's nor torchscale's, and tinit does not use it.

    Args:
        n_layers: depth of a single-stack model (used when ``encoder_layers``
            and ``decoder_layers`` are not both given).
        stack: "encoder" or "decoder" for an encoder-decoder model.
        encoder_layers, decoder_layers: N and M of an encoder-decoder model.
        variant: "paper" (default) or "torchscale".

    Returns:
        (alpha, beta).

    Raises:
        ValueError: missing or non-positive depths, an encoder-decoder model
            without ``stack``, or an unknown variant.
    """

    def depth(name, value):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"deepnorm needs {name} (an int >= 1), got {value!r}")
        return value

    if variant not in _VARIANTS:
        raise ValueError(f"deepnorm: variant must be one of {_VARIANTS}, got {variant!r}")
    if encoder_layers is not None and decoder_layers is not None:
        n, m = depth("encoder_layers", encoder_layers), depth("decoder_layers", decoder_layers)
        if stack == "encoder":
            alpha = 0.81 * (n**4 * m) ** (1 / 16)
            if variant == "torchscale":
                return alpha, 1.0 / ((n**4 * m) ** 0.0625 / 1.15)
            return alpha, 0.87 * (n**4 * m) ** (-1 / 16)
        if stack == "decoder":
            return (3 * m) ** 0.25, (12 * m) ** -0.25
        raise ValueError(f"deepnorm in an encoder-decoder model needs stack 'encoder' or 'decoder', got {stack!r}")
    n = depth("n_layers", n_layers)
    return (2 * n) ** 0.25, (8 * n) ** -0.25


class DeepNorm(Scheme):
    """``deepnorm``: DeepNet's initialisation; alpha exposed for the residual.

    Wang et al., "DeepNet: Scaling Transformers to 1,000 Layers"
    (arXiv:2203.00555, 2022), Figure 2: x_{l+1} = LN(alpha x_l + G(x_l)).

    ``variant="paper"`` (default), the pseudocode of Figure 2: Xavier-normal
    weights (``xavier_normal_``, untruncated), gain beta for v_proj, out_proj
    and the FFN matrices, gain 1 for q_proj and k_proj:
        attn_q, attn_k:                      sqrt(2 / (fan_in + fan_out))
        attn_v, attn_out, mlp_in, mlp_out:   beta * sqrt(2 / (fan_in + fan_out))

    ``variant="torchscale"``: what microsoft/torchscale 0.3.0 (the authors'
    library) writes with ``deepnorm=True``. Its ``MultiheadAttention`` defines
    a ``reset_parameters`` (Xavier-uniform, gain 2^(-1/2) for q/k/v) that
    nothing calls, so every projection keeps ``nn.Linear``'s default
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (std 1/sqrt(3 fan_in)); then
    ``Decoder.__init__`` / ``Encoder.__init__`` divide every parameter whose
    name holds ``v_proj``, ``out_proj``, ``fc1`` or ``fc2`` by ``init_scale``
    = 1 / beta:
        attn_q, attn_k:                      U, std 1 / sqrt(3 fan_in)
        attn_v, attn_out, mlp_in, mlp_out:   U, std beta / sqrt(3 fan_in)
    with beta from ``deepnorm_constants(variant="torchscale")`` (its encoder
    beta in an encoder-decoder model is 1.15 (N^4 M)^(-1/16)). So torchscale
    departs from its paper in three ways: q/k std 1/sqrt(3 d) where the paper
    has 1/sqrt(d) for a d x d projection (a factor 3^(-1/2), not a different
    gain on the same base); the FFN's base std depends on fan_in only (fc2 of
    a 4d-wide FFN gets half of fc1's); the encoder beta. It also leaves the
    biases of q/k/v/fc1/fc2 at nn.Linear's U(+-1/sqrt(fan_in)) (scaled by
    beta for v/out/fc1/fc2); tinit writes every bias 0.

    tinit keeps the paper as the default: it is the published recipe, and
    torchscale's realised init differs from its own ``reset_parameters`` and,
    for the encoder, from the paper's constant. A fused qkv gets q, k and v
    their parts' rules (``Context.qkv_parts``). Embeddings and an untied head:
    N(0, d^-1/2), torchscale's ``Decoder.build_output_projection`` (the paper
    does not set them); norms 1, biases 0. The default is untruncated
    (``trunc`` applies to the paper variant's normals).

    ``multipliers`` returns {"residual_alpha": alpha, "beta": beta} (per stack
    of an encoder-decoder model, or both stacks prefixed "encoder_" /
    "decoder_" when no stack is given): the block must compute
    ``norm(alpha * x + sublayer(x))``.

    Options:
        variant: "paper" (default) or "torchscale".
    """

    name = "deepnorm"
    needs_role = True
    default_trunc = math.inf

    def rule(self, ctx: Context, variant: str = "paper") -> InitSpec:
        if variant not in _VARIANTS:
            raise ValueError(f"scheme 'deepnorm': variant must be one of {_VARIANTS}, got {variant!r}")
        constant = role_constants(ctx.base)
        if constant is not None:
            return constant
        if ctx.base in ("embedding", "head"):
            width = ctx.d_model if ctx.d_model else ctx.fans()[0]
            return normal_spec(width**-0.5)
        fan_in, fan_out = ctx.fans()
        # "paper": Xavier's; else nn.Linear's default U(+-1/sqrt(fan_in))
        unscaled = math.sqrt(2.0 / (fan_in + fan_out)) if variant == "paper" else 1.0 / math.sqrt(3.0 * fan_in)

        def draw(std: float) -> InitSpec:
            return normal_spec(std) if variant == "paper" else InitSpec(std=std, distribution="uniform")

        if ctx.base in ("attn_q", "attn_k"):
            return draw(unscaled)
        _, beta = deepnorm_constants(
            ctx.n_layers,
            stack=ctx.stack,
            encoder_layers=ctx.encoder_layers,
            decoder_layers=ctx.decoder_layers,
            variant=variant,
        )
        if ctx.base == "attn_qkv":
            return ctx.qkv_parts(draw(unscaled), draw(unscaled), draw(beta * unscaled))
        return draw(beta * unscaled)

    def multipliers(
        self,
        *,
        n_layers=None,
        d_model=None,
        stack=None,
        encoder_layers=None,
        decoder_layers=None,
        variant="paper",
        **options,
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
                    stack=part, encoder_layers=encoder_layers, decoder_layers=decoder_layers, variant=variant
                )
                out.update({f"{part}_residual_alpha": alpha, f"{part}_beta": beta})
            return out
        alpha, beta = deepnorm_constants(
            n_layers, stack=stack, encoder_layers=encoder_layers, decoder_layers=decoder_layers, variant=variant
        )
        return {"residual_alpha": alpha, "beta": beta}
