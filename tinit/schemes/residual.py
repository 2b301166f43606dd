"""Recipes that start residual branches at or near zero: ReZero, Fixup."""

from __future__ import annotations

import math

from tinit import schemes as _registry  # the registry imports this module: read at call time
from tinit.schemes._core import (
    OUTPUT_ROLES,
    Context,
    InitSpec,
    Scheme,
    _constants,
    _normal,
    _positive,
)


class ReZero(Scheme):
    """``rezero``: residual gates 0, everything else from a base scheme.

    Bachlechner et al., "ReZero is All You Need: Fast Convergence at Large
    Depth" (arXiv:2003.04887, 2020): x_{l+1} = x_l + a_l F(x_l) with the
    learnable a_l initialised to 0, so the network starts as the identity.
    Parameters with role residual_gate (names like ``resweight``,
    ``res_gate``, ``attn_gate``; see ``tinit.roles``) are set to 0; the model
    must have them (``init_model_`` refuses a model without any). The paper
    fixes no recipe for the other weights; PyTorch's default ``nn.Linear``
    init is ``base="kaiming_uniform", gain=3 ** -0.5``.

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

    def depends_on_depth(self, *, base: str = "normal", **options) -> bool:
        """The base scheme's answer (``base="depth_init"`` or ``"mitchell"`` scale by block)."""
        return base != self.name and _registry.get(base).depends_on_depth(**options)

    def multipliers(self, *, base: str = "normal", **kwargs) -> dict[str, float]:
        """The base scheme's multipliers (the gates themselves are parameters)."""
        return _registry.get(base).multipliers(**kwargs)


class Fixup(Scheme):
    """``fixup``: Fixup's rules applied to transformer branches.

    Zhang, Dauphin & Ma, "Fixup Initialization: Residual Learning Without
    Normalization" (arXiv:1901.09321, 2019), section 3: (1) the last layer of
    each residual branch and the classification layer start at 0; (2) the
    other layers inside residual branches get a standard init (He et al.)
    scaled by L_b^(-1/(2m-2)), L_b the number of residual branches and m the
    layers per branch; (3) scalar multipliers start at 1, scalar biases at 0.
    For a transformer, L_b = branches_per_layer * L and m = 2:
        attn_out, mlp_out, head:          0
        attn_q/k/v/qkv, mlp_in:           gain / sqrt(fan_in) * L_b^(-1/(2m-2))
        residual_gate (scalar multiplier) 1, norms 1, biases 0
        embedding:                        N(0, 1/d) (d^-1/2 std, fairseq's
                                          embedding init; Fixup leaves it open)

    Options:
        gain: He gain, default sqrt(2).
        m: layers per branch, int >= 2, default 2.
        branches_per_layer: residual branches per block, default 2.
    """

    name = "fixup"
    needs_role = True

    def rule(self, ctx: Context, gain: float = math.sqrt(2.0), m: int = 2, branches_per_layer: int = 2) -> InitSpec:
        constant = _constants(ctx.base)
        if constant is not None:
            return constant
        if ctx.base in (*OUTPUT_ROLES, "head"):
            return InitSpec(constant=0.0)
        if ctx.base == "embedding":
            width = ctx.d_model if ctx.d_model else ctx.fans()[0]
            return _normal(width**-0.5)
        if not isinstance(m, int) or m < 2:
            raise ValueError(f"scheme 'fixup': m (layers per branch) must be an int >= 2, got {m!r}")
        branches = _positive(self.name, "branches_per_layer", branches_per_layer) * ctx.need("n_layers")
        he = _positive(self.name, "gain", gain) / math.sqrt(ctx.fans()[0])
        return _normal(he * branches ** (-1.0 / (2 * m - 2)))
