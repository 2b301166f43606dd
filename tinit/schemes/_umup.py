"""u-μP, the unit-scaled maximal update parametrisation: unit init, learning-rate rules, residual taus."""

from __future__ import annotations

import math

from tinit.schemes._core import (
    BASE_ROLE,
    ROLES,
    Context,
    InitSpec,
    Scheme,
    UnknownNameError,
    fans,
    group_settings,
    normal_spec,
    positive,
    role_constants,
)

_READOUT_CONSTRAINTS = (None, "to_output_scale")
# tinit role -> unit_scaling's ``MupType`` (``unit_scaling.parameter``): the matrices of every
# ``uu.Linear``/``uu.Embedding``/``uu.Conv1d`` are "weight", ``uu.LinearReadout``'s "output", a norm's
# gain "norm", a bias "bias". Roles u-μP has no module for (a residual gate, an attention sink) are
# per-channel or scalar parameters: the bias rule.
_VECTOR_TYPES = {"norm": "norm", "bias": "bias", "residual_gate": "bias", "attn_sink": "bias"}


class UnitMuP(Scheme):
    """``u_mup``: u-μP, unit-scaled muP: every weight N(0, 1), the scales in the ops.

    Blake et al., "u-μP: The Unit-Scaled Maximal Update Parametrization"
    (arXiv:2407.17465, 2024), as graphcore-research/unit-scaling 0.3.5
    implements it (``unit_scaling._modules``): ``uu.Linear``,
    ``uu.LinearReadout`` and ``uu.Conv1d`` ``reset_parameters`` draw
    ``nn.init.normal_(weight)``, N(0, 1) untruncated, and zero their biases;
    ``uu.Embedding`` keeps ``nn.Embedding``'s N(0, 1) (its padding row 0);
    ``uu.LayerNorm`` and ``uu.RMSNorm`` gains are 1, biases 0. So:
        embedding, hidden matrices, head:  N(0, 1), untruncated
        norms 1, biases 0, residual gates 1, attention sinks 0.
    The scales live in the forward pass, which tinit cannot change: the
    model must be built from unit-scaled ops (``unit_scaling.functional``:
    a linear's output times fan_in^-1/2, the readout's times 1/fan_in,
    unit-scaled attention, activations and loss, and its own backward
    scales) and combine each residual branch with ``residual_split`` /
    ``residual_add``: x + f(x) becomes
    (tau f(x) + x) / sqrt(1 + tau^2), with one tau per branch that
    ``multipliers`` returns (``unit_scaling.core.functional.
    transformer_residual_scaling_rule``, the paper's Appendix G). A plain
    ``nn.Linear`` model initialised this way has activations that grow by
    sqrt(fan_in) per layer.

    Learning rates (``param_group``; ``unit_scaling.optim``'s
    ``lr_scale_func_adam`` and ``lr_scale_func_sgd``, weight decay as
    ``scaled_parameters``): with ``lr`` the global u-μP learning rate,
    fan_in a matrix's logical input width (an embedding's: its hidden
    width d) and L the number of blocks of the stack a block's parameter is
    in (``uu.DepthSequential``'s ``mup_scaling_depth``; parameters outside
    the blocks get no depth factor):
        Adam/AdamW  weight (embedding, hidden):  lr * fan_in^-1/2 (* L^-1/2 in a block)
                    output (head):               lr
                    norm, bias:                  lr (* L^-1/2 in a block)
        SGD         readout_constraint None: as Adam (unit-scaled gradients);
                    "to_output_scale": weight lr * fan_in^1/2, output lr,
                    norm and bias lr * (their length), each * L^-1/2 in a block.
    ``independent_weight_decay=True`` (unit-scaling's default): each
    parameter's weight decay is divided by its learning rate, so that
    AdamW's per-step decay lr * wd is the given wd whatever the lr.
    u-μP does not scale Adam's eps. The rules are absolute (no base model).
    A head tied to the embedding is one tensor with the embedding's role:
    the "weight" rule (unit-scaling's readout is its own, untied tensor).

    Options:
        residual_mult: the paper's alpha_res, the residual branches' total
            contribution relative to the embedding's, default 1.
        residual_attn_ratio: alpha_res-attn-ratio, the attention branches'
            contribution relative to the MLP branches', default 1.
        readout_constraint: SGD's rule: None (default, as Adam) or
            "to_output_scale" (the readout's ``constraint``).
        independent_weight_decay: divide weight decay by each lr, default True.
    """

    name = "u_mup"
    needs_role = True
    default_trunc = math.inf

    def rule(
        self,
        ctx: Context,
        residual_mult: float = 1.0,
        residual_attn_ratio: float = 1.0,
        readout_constraint: str | None = None,
        independent_weight_decay: bool = True,
    ) -> InitSpec:
        _check_options(residual_mult, residual_attn_ratio, readout_constraint, independent_weight_decay)
        constant = role_constants(ctx.base)
        if constant is not None:
            return constant
        return normal_spec(1.0)

    @staticmethod
    def mup_type(role: str, shape: tuple[int, ...] = ()) -> str:
        """unit-scaling's ``MupType`` of a parameter of ``role``: "weight", "output", "norm" or "bias".

        The head is "output" (``uu.LinearReadout``); every other matrix, the embeddings included,
        "weight" (``uu.Linear``, ``uu.Embedding``, ``uu.Conv1d``); norm gains "norm"; biases, residual
        gates and attention sinks "bias"; a 1-D parameter of a matrix role "bias" too (a router's bias).

        Raises:
            UnknownNameError: unknown role. ValueError: a role of None.
        """
        if role not in ROLES:
            raise (ValueError if role is None else UnknownNameError)(f"u_mup needs a known role, got {role!r}")
        base = BASE_ROLE.get(role, role)
        if base in _VECTOR_TYPES:
            return _VECTOR_TYPES[base]
        if len(shape) == 1:
            return "bias"
        return "output" if base == "head" else "weight"

    def param_group(
        self,
        role: str | None,
        *,
        width_mults: tuple[float | None, ...] | None = None,
        ndim: int = 2,
        shape: tuple[int, ...] = (),
        layout: str = "out_in",
        experts: int | None = None,
        layer_idx: int | None = None,
        n_layers: int | None = None,
        d_model: int | None = None,
        lr: float = 1.0,
        weight_decay: float = 0.0,
        eps: float | None = None,
        optimizer: str = "adam",
        residual_mult: float = 1.0,
        residual_attn_ratio: float = 1.0,
        readout_constraint: str | None = None,
        independent_weight_decay: bool = True,
    ) -> dict[str, float]:
        """u-μP's learning rate and weight decay of one parameter (``Scheme.param_group``).

        ``unit_scaling.optim.lr_scale_func_adam`` / ``lr_scale_func_sgd(readout_constraint)`` and
        ``scaled_parameters`` (unit-scaling 0.3.5), with the parameter's type from its role
        (``mup_type``), its fan_in from its logical shape and layout (``tinit.schemes.fans``: an
        ``nn.Linear``'s in_features, an embedding's hidden width, one expert's input width; a 1-D
        parameter's length, as ``_get_fan_in``) and the depth factor L^-1/2 for a parameter inside a
        block (``layer_idx`` not None) of a stack of ``n_layers`` blocks.

        Args:
            role: one of ``ROLES``.
            width_mults, ndim, d_model: unused (u-μP's rules are absolute).
            shape, layout, experts: the parameter's logical shape, its layout (``LAYOUTS``) and, for a
                2-D grouped layout, the expert count.
            layer_idx, n_layers: the block index (None outside the blocks) and the blocks L of its stack.
            lr, weight_decay: the global learning rate (> 0 with independent weight decay) and weight decay.
            eps: Adam's eps, passed on unscaled (None: the optimiser's default).
            optimizer: "adam" (Adam, AdamW) or "sgd".
            residual_mult, residual_attn_ratio: as for the init (checked, unused here).
            readout_constraint, independent_weight_decay: see the class docstring.

        Returns:
            As ``Scheme.param_group``; "lr_multiplier" is unit-scaling's lr scale.

        Raises:
            UnknownNameError: unknown role. ValueError: a role of None, an unknown optimizer or
            readout_constraint, lr <= 0 with independent weight decay, a block parameter without
            n_layers, a tensor of more than 3 dims of type "weight" (as ``_get_fan_in``).
            TypeError: independent_weight_decay not a bool.
        """
        kind = self.mup_type(role, tuple(shape))
        if optimizer not in ("adam", "sgd"):
            raise ValueError(f"u_mup: optimizer must be 'adam' or 'sgd', got {optimizer!r}")
        _check_options(residual_mult, residual_attn_ratio, readout_constraint, independent_weight_decay)
        if independent_weight_decay and not (isinstance(lr, (int, float)) and lr > 0):
            raise ValueError(
                f"u_mup: lr must be > 0 with independent_weight_decay=True (weight decay is divided by it), got {lr!r}"
            )
        scale = 1.0
        if layer_idx is not None:
            if isinstance(n_layers, bool) or not isinstance(n_layers, int) or n_layers < 1:
                raise ValueError(f"u_mup: a block's parameter needs n_layers (an int >= 1), got {n_layers!r}")
            scale = n_layers**-0.5  # ``lr_scale_for_depth``: mup_scaling_depth ** -0.5
        sgd_output_scale = optimizer == "sgd" and readout_constraint == "to_output_scale"
        if kind == "output":
            mult = scale
        elif kind in ("norm", "bias"):
            mult = scale * (shape[0] if sgd_output_scale and len(shape) == 1 else 1)
        else:
            fan_in = _fan_in(tuple(shape), layout, experts)
            mult = scale * fan_in ** (0.5 if sgd_output_scale else -0.5)
        decay = weight_decay / (lr * mult) if independent_weight_decay else weight_decay
        return group_settings(lr, mult, decay, eps)

    def multipliers(
        self,
        *,
        n_layers: int | None = None,
        d_model: int | None = None,
        residual_mult: float = 1.0,
        residual_attn_ratio: float = 1.0,
        readout_constraint: str | None = None,
        independent_weight_decay: bool = True,
        **context,
    ) -> dict[str, float]:
        """The residual tau of every branch: {"attn_tau.<l>": tau, "mlp_tau.<l>": tau} for blocks l = 0..L-1.

        ``unit_scaling.core.functional.transformer_residual_scaling_rule(residual_mult,
        residual_attn_ratio)`` (the paper's Appendix G), as ``uu.TransformerStack`` applies it:
        branch i of the 2L (attention 2l, MLP 2l + 1) gets
            tau_i = a_i / sqrt(L + n_attn(i) a_attn^2 + n_mlp(i) a_mlp^2),
        a_mlp = residual_mult sqrt(2 / (1 + residual_attn_ratio^2)), a_attn = residual_attn_ratio a_mlp,
        a_i the branch's own, n_attn(i) = (i + 1) // 2 and n_mlp(i) = i // 2 the branches before it.
        The model combines branch f with ``residual_add(f(x), x, tau)``: (tau f(x) + x) / sqrt(1 + tau^2).
        ``context`` (the stack of an encoder-decoder model) is not read: the rule is a decoder's.

        Raises:
            ValueError: n_layers missing or < 1, an option out of range.
        """
        _check_options(residual_mult, residual_attn_ratio, readout_constraint, independent_weight_decay)
        if isinstance(n_layers, bool) or not isinstance(n_layers, int) or n_layers < 1:
            raise ValueError(f"u_mup: multipliers need n_layers (an int >= 1), got {n_layers!r}")
        a_mlp = residual_mult * math.sqrt(2.0 / (1.0 + residual_attn_ratio**2))
        a_attn = residual_attn_ratio * a_mlp
        out = {}
        for i in range(2 * n_layers):
            before = n_layers + (i + 1) // 2 * a_attn**2 + i // 2 * a_mlp**2
            kind = "mlp" if i % 2 else "attn"
            out[f"{kind}_tau.{i // 2}"] = (a_mlp if i % 2 else a_attn) / math.sqrt(before)
        return out


def _fan_in(shape: tuple[int, ...], layout: str, experts: int | None) -> int:
    """A "weight"'s fan_in: its logical input width (``fans``); a 1-D one's length; 1 when it has no elements."""
    if 0 in shape:
        return 1
    if len(shape) == 1:
        return shape[0]
    if len(shape) > 3:
        raise ValueError(f"u_mup: a weight of shape {shape} has more than 3 dims (unit-scaling's _get_fan_in)")
    return fans(shape, layout, experts=experts)[0]


def _check_options(residual_mult, residual_attn_ratio, readout_constraint, independent_weight_decay) -> None:
    """u-μP's options, checked before anything is written (ValueError/TypeError naming them)."""
    positive("u_mup", "residual_mult", residual_mult)
    positive("u_mup", "residual_attn_ratio", residual_attn_ratio)
    if readout_constraint not in _READOUT_CONSTRAINTS:
        raise ValueError(
            f"scheme 'u_mup': readout_constraint must be one of {_READOUT_CONSTRAINTS}, got {readout_constraint!r}"
        )
    if not isinstance(independent_weight_decay, bool):
        raise TypeError(
            f"scheme 'u_mup': independent_weight_decay must be a bool, got {type(independent_weight_decay).__name__}"
        )
