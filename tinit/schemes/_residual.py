"""Recipes that start residual branches at or near zero: ReZero, Fixup."""

from __future__ import annotations

import math

from tinit import schemes as _registry  # the registry imports this module: read at call time
from tinit.schemes._core import (
    OUTPUT_ROLES,
    QKV_PARTS,
    Context,
    InitSpec,
    Scheme,
    fans,
    normal_spec,
    positive,
    role_constants,
)


class ReZero(Scheme):
    """``rezero``: residual gates 0, everything else from a base scheme.

    Bachlechner et al., "ReZero is All You Need: Fast Convergence at Large
    Depth" (arXiv:2003.04887, 2020): x_{l+1} = x_l + a_l F(x_l) with the
    learnable a_l initialised to 0, so the network starts as the identity.
    Parameters with role residual_gate (names like ``resweight``,
    ``res_gate``, ``attn_gate``; see ``tinit.roles``) are set to 0; the model
    must have them (``init_model_`` refuses a model without any). The paper
    fixes no recipe for the other weights. The authors' code
    (github.com/majumderb/rezero, commit e2c94a8, ``rezero/transformer/rztx.py``:
    ``RZTXEncoderLayer``, ``RZTXDecoderLayer``) sets one ``resweight`` per
    layer to 0 and leaves every other weight at PyTorch's module defaults:
    ``nn.MultiheadAttention``'s Xavier-uniform ``in_proj_weight`` with zero
    biases, ``nn.Linear``'s U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for the rest
    (its weights are ``base="kaiming_uniform", gain=3 ** -0.5``; its biases,
    which tinit writes 0, are not). tinit's default base is "normal".

    Options:
        base: name of the scheme for every other parameter, default "normal".
        **options: passed to the base scheme (with its truncation default).
    """

    name = "rezero"
    needs_role = True
    required_roles = ("residual_gate",)

    def spec(self, *, role: str | None = None, base: str = "normal", **kwargs) -> InitSpec:
        if base == self.name:
            raise ValueError("scheme 'rezero': base must be another scheme")
        if role == "residual_gate":
            return InitSpec(constant=0.0)
        if role is None:
            return Scheme.spec(self, role=role, **kwargs)
        return _registry.get(base).spec(role=role, **kwargs)

    def tied_role(self, roles: tuple[str, ...], *, base: str = "normal", **options) -> str | None:
        """The base scheme's rule for a tied tensor."""
        return None if base == self.name else _registry.get(base).tied_role(roles, **options)

    def depends_on_depth(self, *, base: str = "normal", **options) -> bool:
        """The base scheme's answer (``base="depth_init"`` or ``"mitchell"`` scale by block)."""
        return base != self.name and _registry.get(base).depends_on_depth(**options)

    def multipliers(self, *, base: str = "normal", **kwargs) -> dict[str, float]:
        """The base scheme's multipliers (the gates themselves are parameters)."""
        return _registry.get(base).multipliers(**kwargs)


class Fixup(Scheme):
    """``fixup``: Fixup for transformers, as the authors' Transformer code initialises it.

    Zhang, Dauphin & Ma, "Fixup Initialization: Residual Learning Without
    Normalization" (arXiv:1901.09321, 2019). Default ``form="reference"``: the
    authors' fairseq Transformer (github.com/hongyi-zhang/Fixup, commit
    f3fa449, ``fairseq/fairseq/models/transformer_zero.py``: ``Linear``,
    ``Embedding``, ``TransformerZeroEncoderLayer``/``DecoderLayer``;
    ``fairseq/fairseq/modules/multihead_attention_zero.py``:
    ``MultiheadAttentionZero.reset_parameters``). With B the model's total
    count of residual branches (``num_blocks`` there: 2 N + 3 M for N encoder
    and M decoder layers, one count for both stacks) and Xavier-uniform
    weights:
        attn_qkv (fused in_proj, (q+k+v) x d):  Xavier over the fused tensor * B^(-1/6)
        attn_q/k/v (separate):                  the same, fan_out = 3 x the
                                                tensor's (a slice of the fused
                                                MHA projection; for GQA pass
                                                fan_out = the q + k + v rows)
        attn_out (out_proj), mlp_out (fc2), head (embed_out):  0
        mlp_in (fc1):                           Xavier(d, d_ff) * B^(-1/2)
        embedding:                              N(0, 1/d) (``Embedding``; its padding row 0)
        residual_gate (``LayerScale``) 1, biases (``LayerShift``) 0, norms 1.
    At L = 12, d = 768 (B = 24): q/k/v rows 0.0150, mlp_in 0.0047.

    The paper (section 3) says: He init scaled by B^(-1/(2m-2)) for a branch
    of m layers. The code differs: Xavier instead of He; attention treated as
    m = 4 (exponent -1/6) and the MLP as m = 2 (-1/2); one count for the whole
    encoder-decoder model. tinit follows the code by default, because the
    paper's Transformer results come from it; ``form="paper"`` gives the
    paper's rule (``gain / sqrt(fan_in) * B^(-1/(2m-2))``, normal,
    ``m`` and ``gain`` options) for every q/k/v/mlp_in weight.

    A decoder-only model: the reference's language-model path does not run
    (``TransformerZeroDecoderLayer`` reads ``args.encoder_layers``, which the
    ``transformer_zero_lm`` architectures never set); tinit counts its
    residual branches, ``branches_per_layer * L`` (2 L). The reference's
    decoder cross-attention (``encoder_attn``) is built without
    ``num_blocks`` and so uses the default 12 whatever the depth; tinit gives
    it the model's count unless an override passes ``options={"branches": 12}``.

    Options:
        form: "reference" (default) or "paper".
        distribution: "uniform" (default for the reference form, as
            ``nn.init.xavier_uniform_``) or "normal" (the paper form's; then
            ``trunc`` applies, default untruncated).
        branches: the total residual-branch count B; default 2 N + 3 M for an
            encoder-decoder model, else ``branches_per_layer * n_layers``.
        branches_per_layer: residual branches per block of a single stack, default 2.
        gain, m: the paper form's He gain (default sqrt(2)) and layers per
            branch (int >= 2, default 2).
    """

    name = "fixup"
    needs_role = True
    default_trunc = math.inf
    # TransformerZeroDecoder: the zero embed_out exists only without share_input_output_embed; shared,
    # the logits are F.linear(x, embed_tokens.weight), the Embedding's N(0, 1/d)
    tied = "embedding"

    def rule(
        self,
        ctx: Context,
        form: str = "reference",
        distribution: str | None = None,
        branches: int | None = None,
        branches_per_layer: int = 2,
        gain: float = math.sqrt(2.0),
        m: int = 2,
    ) -> InitSpec:
        if form not in _FIXUP_FORMS:
            raise ValueError(f"scheme 'fixup': form must be one of {_FIXUP_FORMS}, got {form!r}")
        if distribution is None:
            distribution = "uniform" if form == "reference" else "normal"
        if distribution not in ("uniform", "normal"):
            raise ValueError(f"scheme 'fixup': distribution must be 'uniform' or 'normal', got {distribution!r}")
        if not isinstance(m, int) or isinstance(m, bool) or m < 2:
            raise ValueError(f"scheme 'fixup': m (layers per branch) must be an int >= 2, got {m!r}")
        gain = positive(self.name, "gain", gain)
        constant = role_constants(ctx.base)
        if constant is not None:
            return constant
        if ctx.base in (*OUTPUT_ROLES, "head"):
            return InitSpec(constant=0.0)
        if ctx.base == "embedding":
            width = ctx.d_model if ctx.d_model else ctx.fans()[0]
            return normal_spec(width**-0.5)
        count = self._branches(ctx, branches, branches_per_layer)
        if form == "paper":
            std = gain / math.sqrt(ctx.fans()[0]) * count ** (-1.0 / (2 * m - 2))
        elif ctx.base in ("attn_q", "attn_k", "attn_v", "attn_qkv"):
            std = math.sqrt(2.0 / sum(self._fused_fans(ctx))) * count ** (-1.0 / 6.0)
        else:
            std = math.sqrt(2.0 / sum(ctx.fans())) * count**-0.5
        return InitSpec(std=std, distribution="uniform") if distribution == "uniform" else normal_spec(std)

    def _branches(self, ctx: Context, branches, branches_per_layer) -> int:
        if branches is not None:
            if not isinstance(branches, int) or isinstance(branches, bool) or branches < 1:
                raise ValueError(f"scheme 'fixup': branches must be an int >= 1, got {branches!r}")
            return branches
        if ctx.encoder_layers is not None and ctx.decoder_layers is not None:
            return 2 * ctx.encoder_layers + 3 * ctx.decoder_layers
        return positive(self.name, "branches_per_layer", branches_per_layer) * ctx.need("n_layers")

    @staticmethod
    def _fused_fans(ctx: Context) -> tuple[int, int]:
        """Fans of the fused in-projection the reference's Xavier sees: explicit fans win; a fused
        tensor's whole output dim; a separate q, k or v as one of three equal slices."""
        if ctx.fan_in is not None and ctx.fan_out is not None:
            return ctx.fan_in, ctx.fan_out
        fan_in, fan_out = fans(ctx.shape, ctx.layout)
        if ctx.base != "attn_qkv":
            fan_out *= QKV_PARTS
        return (ctx.fan_in or fan_in), (ctx.fan_out or fan_out)


_FIXUP_FORMS = ("reference", "paper")
