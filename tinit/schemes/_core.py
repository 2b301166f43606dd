"""The record a scheme returns (``InitSpec``), fans, truncation and the ``Scheme`` base class."""

from __future__ import annotations

import difflib
import functools
import inspect
import math
import operator
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from tinit.families import FusedQKV, positive_int

ROLES = (
    "embedding",
    "attn_q",
    "attn_k",
    "attn_v",
    "attn_qkv",
    "attn_out",
    "mlp_in",
    "mlp_out",
    "norm",
    "bias",
    "head",
    "residual_gate",
    "mlp_up",
    "router",
    "attn_q_down",
    "attn_kv_down",
    "attn_kv",
    "attn_sink",
    "token",
    "patch_embed",
    "linear",
    "mlp_gate_up",
    # state-space and linear-attention mixers (Mamba, Mamba-2, gated delta nets)
    "ssm_in",
    "ssm_conv",
    "ssm_a",
    "ssm_d",
    "ssm_dt",
)
# The role a recipe's table is written in for each finer role of modern blocks
# (``Context.base``): a scheme that does not single a finer role out treats it as
# its base, e.g. the up projection of a gated MLP as any MLP input projection.
BASE_ROLE = {
    "mlp_up": "mlp_in",
    "router": "mlp_in",
    "attn_q_down": "attn_q",
    "attn_kv_down": "attn_k",
    "attn_kv": "attn_k",
    "token": "embedding",
    "patch_embed": "embedding",
    "linear": "mlp_in",
    "mlp_gate_up": "mlp_in",
    "ssm_in": "mlp_in",
    "ssm_conv": "mlp_in",
}
# A state-space mixer's state parameters: A_log, D, dt_bias. Every recipe writes the model's own
# values (``Scheme.spec``'s ``model_spec``) and scales none of them: they set the recurrence's
# time constants, not a matrix's variance.
STATE_ROLES = ("ssm_a", "ssm_d", "ssm_dt")
OUTPUT_ROLES = ("attn_out", "mlp_out")  # write straight into the residual stream
HIDDEN_ROLES = ("attn_q", "attn_k", "attn_v", "attn_qkv", "attn_out", "mlp_in", "mlp_out")  # base roles
# How a weight's dims map to (fan_out, fan_in); ``fans`` gives the rule of each.
EXPERT_LAYOUTS = ("expert_out_in", "expert_in_out")  # (E, out, in), (E, in, out): one matrix per expert
GROUPED_LAYOUTS = ("grouped_in_out", "stacked_in_out", "stacked_out_in")  # 2-D: (in, E*out), (E*in, out), (E*out, in)
LAYOUTS = ("out_in", "in_out", *EXPERT_LAYOUTS, *GROUPED_LAYOUTS)
_OUT_DIM_1 = ("in_out", "grouped_in_out", "stacked_in_out")  # 2-D layouts whose output dim is dim 1
QKV_PARTS = 3


@dataclass(frozen=True)
class InitSpec:
    """What to write into one parameter.

    Attributes:
        std: for ``"trunc_normal"`` the std of the parent normal; for
            ``"uniform"`` the std of the uniform itself; tensor units.
        trunc: half-width of the support in units of std: bounds are
            ``mean -/+ trunc * std`` (for a uniform, sqrt(3)).
        mean: mean of the parent normal (of the uniform).
        constant: when not None the parameter is filled with this value.
        distribution: "trunc_normal" or "uniform".
        parts: for fused tensors, one spec per part (e.g. DeepNorm's q, k, v
            of a fused qkv); ``std`` is then unused.
        split_dim: the tensor dim the parts divide (the logical output dim:
            0 for an (out, in) weight, 1 for an (in, out) one).
        segments: how the parts lie along ``split_dim``: ((part index,
            length), ...) in order, covering the dim exactly, each part at
            least once (a GQA fused qkv: ((0, h*hd), (1, kv*hd), (2, kv*hd));
            per head: ((0, hd), (1, hd), (2, hd)) * h). None: equal
            consecutive slices, one per part. Segment j takes stream indices
            from ``offset`` + the numel of segments 0..j-1, row-major within
            the segment (docs/stream.md, "Fused tensors").
        map: None, or (name, *args): a per-element function applied to the
            values drawn (a spec without parts, not a constant) before they
            are stored. The draw is made in float64 at the parameter's
            stream indices, the function computed in float64 on the host and
            the result rounded to the tensor's dtype (docs/stream.md, "Mapped
            draws"). "log": log x (the draw's support must be > 0);
            "softplus_inverse_exp", floor: with t = max(exp x, floor),
            t + log(-expm1(-t)), the inverse softplus of t (HF
            ``Mamba2Mixer.init_mamba2_weights``' dt_bias). ``bounds`` and
            ``realised_std`` describe the draw before the map.
    """

    std: float = 0.0
    trunc: float = 2.0
    mean: float = 0.0
    constant: float | None = None
    distribution: str = "trunc_normal"
    parts: tuple[InitSpec, ...] | None = None
    split_dim: int = 0
    segments: tuple[tuple[int, int], ...] | None = None
    map: tuple | None = None

    @property
    def bounds(self) -> tuple[float, float] | None:
        """Absolute bounds (mean -/+ trunc * std); None for constants and parts."""
        if self.constant is not None or self.parts is not None:
            return None
        return self.mean - self.trunc * self.std, self.mean + self.trunc * self.std

    @property
    def realised_std(self) -> float:
        """Std of the values this spec writes (0 for a constant).

        Truncated normal: std * truncation_factor(trunc). Uniform: std. Parts
        (zero means): the root mean square of the parts' stds, each weighted
        by its share of the split dim (equal shares without ``segments``).
        """
        if self.constant is not None:
            return 0.0
        if self.parts is not None:
            shares = [(i, 1) for i in range(len(self.parts))] if self.segments is None else self.segments
            total = sum(length for _, length in shares)
            return math.sqrt(sum(length * self.parts[i].realised_std ** 2 for i, length in shares) / total)
        if self.distribution == "uniform":
            return self.std
        return self.std * truncation_factor(self.trunc)


def truncation_factor(trunc: float) -> float:
    """Std of N(0, 1) truncated to [-trunc, trunc].

    sqrt(1 - 2 t phi(t) / (2 Phi(t) - 1)) (Johnson, Kotz & Balakrishnan,
    Continuous Univariate Distributions vol. 1, 2nd ed., eq. 13.134 with
    symmetric bounds); 0.8796257 at t = 2, 0.9866824 at t = 3, 1 at t = inf.

    Args:
        trunc: half-width in units of std, > 0 (may be math.inf).

    Returns:
        The factor in (0, 1].
    """
    if math.isinf(trunc):
        return 1.0
    if trunc < 1e-2:
        # The closed form below subtracts two numbers within trunc^2/3 of 1:
        # its digits vanish as trunc -> 0 (and it divides by zero at 1e-9).
        # Series of the variance: t^2/3 (1 - 2t^2/15 + 2t^4/315 + O(t^6)).
        t2 = trunc * trunc
        return trunc / math.sqrt(3.0) * math.sqrt(1.0 - 2.0 * t2 / 15.0 + 2.0 * t2 * t2 / 315.0)
    pdf = math.exp(-0.5 * trunc * trunc) / math.sqrt(2.0 * math.pi)
    mass = math.erf(trunc / math.sqrt(2.0))
    return math.sqrt(1.0 - 2.0 * trunc * pdf / mass)


def fans(shape: tuple[int, ...], layout: str = "out_in", parts: int = 1, experts: int | None = None) -> tuple[int, int]:
    """(fan_in, fan_out) of a weight from its logical shape.

    Args:
        shape: the full (unsharded) shape, >= 2 dims.
        layout: how the dims map to the fans (``LAYOUTS``):
            "out_in" (``nn.Linear``, ``nn.Embedding``: fan_in = shape[1]) or
            "in_out" (HF ``Conv1D``: fan_in = shape[0]); beyond 2 dims these
            follow ``torch.nn.init``'s receptive-field rule (convolutions:
            dims 0 and 1 times the product of the others).
            Expert stacks give the fans of ONE expert's matrix:
            "expert_out_in" (E, out, in), "expert_in_out" (E, in, out), and
            the 2-D grouped forms of ``experts`` = E matrices (in, out)
            "grouped_in_out" (in, E * out), "stacked_in_out" (E * in, out)
            and "stacked_out_in" (E * out, in).
        parts: equal slices of a fused output dim (3 for a fused qkv of
            equal thirds); fan_out is that of one slice.
        experts: the expert count E of a 2-D grouped layout (ignored otherwise).

    Returns:
        (fan_in, fan_out).

    Raises:
        ValueError: fewer than 2 dims, unknown layout, a zero fan, an
            output dim that does not split into ``parts``, an expert layout
            on a shape of the wrong rank, or a grouped layout without an
            ``experts`` count dividing its stacked dim.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if len(shape) < 2:
        raise ValueError(f"fan_in/fan_out need a weight with >= 2 dims, got shape {tuple(shape)}")
    if layout in EXPERT_LAYOUTS:
        if len(shape) != 3:
            raise ValueError(f"layout {layout!r} is a stack (experts, ., .) of 3 dims, got shape {tuple(shape)}")
        fan_out, fan_in = shape[1:] if layout == "expert_out_in" else shape[:0:-1]
    elif layout in GROUPED_LAYOUTS:
        fan_in, fan_out = _grouped_fans(tuple(shape), layout, experts)
    elif len(shape) == 2:
        fan_out, fan_in = shape if layout == "out_in" else shape[::-1]
    else:
        field_size = math.prod(shape[2:])
        fan_out, fan_in = shape[0] * field_size, shape[1] * field_size
    if not fan_in or not fan_out:
        raise _NoFanError(
            f"shape {tuple(shape)} has fan_in {fan_in} and fan_out {fan_out}: a fan-based std is "
            "undefined for a weight with no elements (pass fan_in and fan_out explicitly)"
        )
    if fan_out % parts:
        raise ValueError(
            f"output dim {fan_out} of shape {tuple(shape)} does not split into {parts} equal parts "
            "(a fused projection with unequal q/k/v widths: pass its layout, qkv=tinit.families.FusedQKV, "
            "or fan_out explicitly)"
        )
    return fan_in, fan_out // parts


def _grouped_fans(shape: tuple[int, ...], layout: str, experts) -> tuple[int, int]:
    """(fan_in, fan_out) of one expert of a 2-D grouped stack (Megatron-Core ``GroupedMLP``, DBRX)."""
    if len(shape) != 2:
        raise ValueError(f"layout {layout!r} is a 2-D stack of expert matrices, got shape {shape}")
    if experts is None:
        raise ValueError(f"layout {layout!r} needs experts= (the number of expert matrices in the stack)")
    stacked = 1 if layout == "grouped_in_out" else 0
    if shape[stacked] % experts:
        raise ValueError(f"dim {stacked} of shape {shape} (layout {layout!r}) does not hold {experts} experts")
    one = list(shape)
    one[stacked] //= experts
    return (one[0], one[1]) if layout != "stacked_out_in" else (one[1], one[0])


class UnknownNameError(KeyError, ValueError):
    """An unknown scheme or role name: a KeyError (a failed lookup in ``SCHEMES`` or ``ROLES``)
    and a ValueError (a bad argument), so either ``except`` catches it."""

    def __str__(self) -> str:  # the message as written, not KeyError's repr of it
        return str(self.args[0]) if self.args else ""

    @classmethod
    def of(cls, kind: str, name, known, where: str = "", note: str = "") -> UnknownNameError:
        """The error for an unknown ``name`` of ``kind`` ("tinit scheme", "role"), with the closest
        known name (``difflib``, as the CLI's argparse choices suggest) and the list of known ones.

        Args:
            kind: what the name names, as the message says it.
            name: the name given.
            known: the known names, in the order to list them.
            where: a prefix naming the argument ("override 'lm_head': ").
            note: text after the name (a hint of why it is not one).

        Returns:
            An ``UnknownNameError`` (raise it).
        """
        known = list(known)
        close = difflib.get_close_matches(name, known, n=1) if isinstance(name, str) else []
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return cls(f"{where}unknown {kind} {name!r}{note}{hint}; known: {known}")


class _NoFanError(ValueError):
    """A fan of zero: the weight has no elements, so a fan-based std is undefined (and unneeded)."""


def _count(name: str, value, low: int):
    """``value`` with integer scalars (numpy's) as ints; anything else unchanged for the scheme's own checks."""
    if value is None or type(value) is int or isinstance(value, bool) or not hasattr(type(value), "__index__"):
        return value
    return operator.index(value)


def _fan(name: str, value) -> int | None:
    """An explicit fan: None, or an int >= 1 (numpy integers included)."""
    return None if value is None else positive_int(name, value)


@dataclass(frozen=True)
class Context:
    """What a scheme may know about one parameter (see ``Scheme.spec``).

    ``qkv`` is the layout of a fused q/k/v projection (None: equal thirds),
    ``experts`` the expert count of a 2-D grouped stack. ``part`` is set while
    ``Scheme.spec`` evaluates one part (0 = q, 1 = k, 2 = v) of a fused
    projection: ``fans`` then gives that part's fans and ``qkv_parts`` picks
    that part's spec. ``model_spec`` is the spec the model's own code gives
    the parameter where tinit knows it (``Scheme.spec``'s ``model_spec``), for
    a recipe whose rule is to follow it (``normal``).
    """

    scheme: str
    role: str | None
    layer_idx: int | None
    n_layers: int | None
    shape: tuple[int, ...]
    d_model: int | None
    fan_in: int | None
    fan_out: int | None
    layout: str
    stack: str | None
    encoder_layers: int | None
    decoder_layers: int | None
    qkv: FusedQKV | None = None
    experts: int | None = None
    part: int | None = None
    model_spec: InitSpec | None = None

    @property
    def base(self) -> str | None:
        """The role the recipe tables are written in: ``role`` itself, or ``BASE_ROLE[role]`` for a
        finer role of a modern block (router, MLA projection, gated MLP's up projection, ...)."""
        if self.role == "router" and len(self.shape) == 1:
            return "bias"  # a router's bias vector (GPT-OSS): a bias wherever the recipe has no rule for it
        return BASE_ROLE.get(self.role, self.role)

    @property
    def out_dim(self) -> int:
        """The dim of ``shape`` that holds the outputs (a fused projection's parts split it)."""
        return 1 if len(self.shape) == 2 and self.layout in _OUT_DIM_1 else 0

    def fused_qkv(self) -> FusedQKV | None:
        """The q/k/v layout of a fused projection (role attn_qkv, 2 dims): ``qkv``, else equal thirds
        when the output dim divides by 3; None for any other parameter.

        Raises:
            ValueError: ``qkv`` spans another width than the output dim.
        """
        if self.role != "attn_qkv" or len(self.shape) != 2:
            return None
        width = self.shape[self.out_dim]
        if self.qkv is not None:
            if self.qkv.width != width:
                raise ValueError(
                    f"fused q/k/v layout {self.qkv} spans {self.qkv.width} (q, k, v widths {self.qkv.widths}) "
                    f"but the parameter's output dim (dim {self.out_dim} of shape {self.shape}) is {width}"
                )
            return self.qkv
        if width < QKV_PARTS or width % QKV_PARTS:
            return None
        return FusedQKV(1, width // QKV_PARTS, width // QKV_PARTS, width // QKV_PARTS)

    def qkv_parts(self, q: InitSpec, k: InitSpec, v: InitSpec) -> InitSpec:
        """The spec of a fused q/k/v projection (role attn_qkv) from one spec per part.

        Under ``Scheme.spec`` each part is evaluated in a context of its own
        (``part`` set), and this returns that part's spec; ``Scheme.spec``
        assembles the parts along the output dim by the projection's layout
        (``qkv``). Called outside (``part`` None): the three parts, with the
        layout's segments (equal thirds without ``qkv``); one spec when all three are equal.
        """
        if self.part is not None:
            return (q, k, v)[self.part]
        if q == k == v:
            return q
        fused = self.fused_qkv()
        segments = None if fused is None or fused.equal_thirds else fused.segments()
        return InitSpec(parts=(q, k, v), segments=segments)

    def fans(self) -> tuple[int, int]:
        """(fan_in, fan_out): explicit values win, else ``fans(shape, layout, experts=experts)``;
        for a fused q/k/v projection, those of one part as a separate matrix (fan_out of q =
        h * head_dim, of k and v = kv * head_dim): of part ``part``, or of any part when all three
        widths are equal.

        Raises:
            ValueError: as ``fans``; a fused projection of unequal widths outside a part's context.
        """
        if self.fan_in is not None and self.fan_out is not None:
            return self.fan_in, self.fan_out
        fused = self.fused_qkv()
        if fused is None:
            parts = QKV_PARTS if self.role == "attn_qkv" else 1
            fan_in, fan_out = fans(self.shape, self.layout, parts, self.experts)
        else:
            fan_in, _ = fans(self.shape, self.layout)
            widths = fused.widths
            if self.part is not None:
                fan_out = widths[self.part]
            elif widths[0] == widths[1] == widths[2]:
                fan_out = widths[0]
            else:
                raise ValueError(
                    f"a fused q/k/v projection of unequal widths {widths} has no single fan_out: "
                    "evaluate it through Scheme.spec (one context per part) or pass fan_out explicitly"
                )
        return (self.fan_in or fan_in), (self.fan_out or fan_out)

    def need(self, what: str) -> int:
        """The positive int ``what`` ("n_layers", "d_model", "layer_idx"), or a ValueError naming the scheme."""
        value = getattr(self, what)
        low = 0 if what == "layer_idx" else 1
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            role = f" for role {self.role!r}" if self.role else ""
            raise ValueError(f"scheme {self.scheme!r} needs {what} (an int >= {low}){role}, got {value!r}")
        return value


def positive(scheme: str, name: str, value) -> float:
    number = _float_or_none(value)
    if number is None or not (math.isfinite(number) and number > 0):
        raise ValueError(f"scheme {scheme!r}: {name} must be a finite number > 0, got {value!r}")
    return number


def _float_or_none(value) -> float | None:
    """``value`` as a float when it is a real number (not a bool) a float can hold, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:  # an int beyond float's range
        return None


def role_constants(role: str | None) -> InitSpec | None:
    """The shared constants: norm weights 1, biases 0, residual gates 1 (the branch passes unchanged),
    attention sinks 0."""
    if role == "norm":
        return InitSpec(constant=1.0)
    if role == "bias":
        return InitSpec(constant=0.0)
    if role == "residual_gate":
        return InitSpec(constant=1.0)
    if role == "attn_sink":  # a per-head logit with no fan: 0 unless the recipe gives it a std
        return InitSpec(constant=0.0)
    return None


def normal_spec(std: float) -> InitSpec:
    return InitSpec(std=std)


@functools.cache
def _option_names(kind: type) -> tuple[str, ...] | None:
    """``Scheme.option_names`` of a scheme class (signatures read once per class)."""
    names = []
    for method in ("rule", "weight", "_std"):
        function = getattr(kind, method, None)
        if function is None:
            continue
        params = list(inspect.signature(function).parameters.values())[1:]  # self
        names += [
            p.name
            for p in params
            if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name not in ("ctx", "fan_in", "fan_out")
        ]
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            return tuple(dict.fromkeys(names))
    return None


class Scheme:
    """Base of every scheme: argument checks, truncation and variance preservation.

    Subclasses set ``name``, ``needs_role`` (whether the role changes the
    result, so an unclassified parameter must be refused), ``default_trunc``
    (the truncation of the recipe's reference, in units of std; math.inf for
    an untruncated one; ``reference_trunc`` refines it per parameter where the
    reference truncates roles differently), ``reference_variance_preserving``
    (whether the reference rescales its truncated normal to the target std, as
    JAX's ``variance_scaling`` does), ``depth_dependent`` (whether the block
    index ``layer_idx`` changes the result; ``init_model_`` computes one spec
    per distinct input otherwise; ``depends_on_depth`` answers for given
    options) and implement ``rule(ctx, **options)``, which returns the target
    distribution (std = the std the recipe asks for). ``tied`` is the role
    whose rule the recipe's reference gives one tensor shared by parameters of
    several roles (tied input embeddings and output head), None where it says
    none (``tied_role``).
    """

    name = ""
    needs_role = True
    depth_dependent = False
    default_trunc = 2.0
    reference_variance_preserving = False
    required_roles: tuple[str, ...] = ()
    # option -> the model-config fields ``init_model_`` reads it from when the caller does not pass
    # it (the first field the config has), e.g. T5's head width d_kv from ``T5Config.d_kv``
    config_options: Mapping[str, tuple[str, ...]] = MappingProxyType({})
    # the role whose rule writes a tensor tied between roles the recipe initialises differently
    # (``tied_role``); None: the reference gives none, and ``init_model_`` refuses such a tensor
    tied: str | None = None

    def tied_role(self, roles: tuple[str, ...], **options) -> str | None:
        """The role whose rule writes one tensor shared by parameters of ``roles`` (two or more
        distinct roles, e.g. ("embedding", "head") for tied word embeddings) when this recipe's
        rules for them differ: the rule the recipe's reference applies to such a tensor
        (torchtitan's tied Llama 3.2 flavours: the head's). ``tied`` when it is one of ``roles``,
        else None: the reference says nothing, and ``init_model_`` refuses the tensor naming
        its roles.

        Args:
            roles: the distinct roles of the tensor's names, the first name's first.
            **options: the recipe's options (a recipe whose rule depends on its variant).

        Returns:
            One of ``roles``, or None.
        """
        return self.tied if self.tied in roles else None

    def reference_trunc(self, ctx: Context, spec: InitSpec) -> float:
        """The truncation (units of std, > 0, may be inf) the recipe's reference applies to the
        truncated normal ``spec`` of the parameter ``ctx``; ``default_trunc`` unless a scheme
        says otherwise (absolute bounds, as ``torch.nn.init.trunc_normal_``'s, are ``b / spec.std``)."""
        return self.default_trunc

    def option_names(self) -> tuple[str, ...] | None:
        """The options ``spec`` takes (the keyword parameters of ``rule`` and of the methods it hands
        its ``**options`` to: ``weight``, ``_std``); None where a scheme forwards them further
        (``rezero`` to its base, which checks them).

        Returns:
            The option names, in signature order, or None.
        """
        return _option_names(type(self))

    def _check_options(self, options) -> None:
        """TypeError for an option ``option_names`` does not list, with the closest name."""
        names = self.option_names()
        unknown = [key for key in options if names is not None and key not in names]
        if unknown:
            close = difflib.get_close_matches(unknown[0], [*names, "trunc", "variance_preserving"], n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise TypeError(
                f"scheme {self.name!r} has no option {unknown[0]!r}{hint}; its options: {list(names) or 'none'}"
            )

    def depends_on_depth(self, **options) -> bool:
        """Whether ``layer_idx`` can change ``spec(**options)``'s result (``init_model_`` then
        computes one spec per block instead of sharing one between blocks)."""
        return self.depth_dependent

    def spec(
        self,
        *,
        role: str | None = None,
        layer_idx: int | None = None,
        n_layers: int | None = None,
        shape: tuple[int, ...] = (),
        d_model: int | None = None,
        fan_in: int | None = None,
        fan_out: int | None = None,
        layout: str = "out_in",
        stack: str | None = None,
        encoder_layers: int | None = None,
        decoder_layers: int | None = None,
        qkv: FusedQKV | None = None,
        experts: int | None = None,
        gate_up: str = "halves",
        trunc: float | None = None,
        variance_preserving: bool | None = None,
        model_spec: InitSpec | None = None,
        **options,
    ) -> InitSpec:
        """The ``InitSpec`` of one parameter.

        Args:
            role: one of ``ROLES``, or None when unknown (refused by schemes
                with ``needs_role``).
            layer_idx: 0-based block index (depth-dependent schemes).
            n_layers: blocks L in the parameter's stack.
            shape: logical (unsharded) shape of the parameter.
            d_model: residual width d (schemes written in d).
            fan_in, fan_out: override the fans computed from shape and layout.
            layout: one of ``LAYOUTS`` (see ``fans``): "out_in" (``nn.Linear``),
                "in_out" (HF ``Conv1D``), or an expert stack's layout, whose
                fans are one expert's.
            stack: "encoder" or "decoder" in an encoder-decoder model, else None.
            encoder_layers, decoder_layers: N and M of an encoder-decoder model.
            qkv: the layout of a fused q/k/v projection (role attn_qkv), a
                ``tinit.families.FusedQKV`` spanning its output dim; None
                means equal thirds. Each part is specified as a matrix of its
                own (its own fans; ``Context.qkv_parts`` picks the scheme's
                spec for it) and the parts are laid out by ``qkv``; when all
                three come out equal the result is that one spec.
            experts: the expert count E of a 2-D grouped layout.
            gate_up: how a fused gate+up projection (role mlp_gate_up) holds
                its two parts along the output dim: "halves" (gate rows, then
                up rows: HF Phi-3, Mixtral's experts) or "interleaved"
                (alternating: GPT-OSS). Each part is specified as a matrix of
                its own (role mlp_in for the gate, mlp_up for the up
                projection, half the fan_out); equal parts give one spec.
            trunc: bounds in units of std (> 0, may be inf); when None, the
                reference's truncation (``reference_trunc``).
            variance_preserving: scale std so the realised std is the target.
                None (default): as the reference does
                (``reference_variance_preserving``), and also True when
                ``trunc`` truncates a recipe whose reference is untruncated,
                so that truncating keeps the reference's std; True/False
                are honoured as given.
            model_spec: the spec the model's own code gives this parameter,
                where known (``init_model_`` passes a ``tinit.families.Family``'s
                ``inits`` and the state-space defaults). A state role
                (``STATE_ROLES``: ssm_a, ssm_d, ssm_dt) gets it under every
                recipe, unscaled and untruncated, and without it the defaults of
                HF's Mamba-2 (``Mamba2Mixer.init_mamba2_weights``): ssm_a
                log(1..n) along the last dim, ssm_d 1, ssm_dt the inverse
                softplus of dt log-uniform in [0.001, 0.1] floored at 1e-4 (a
                mapped uniform, ``InitSpec.map``); other roles see it as
                ``Context.model_spec``, which ``normal`` follows.
            **options: the scheme's own options (see its docstring); a state
                role reads none.

        Returns:
            An ``InitSpec``.

        Raises:
            UnknownNameError: unknown role (a KeyError and a ValueError).
            ValueError: a needed value (role, n_layers, d_model, layer_idx) is
                missing, an option is out of range, or ``qkv`` does not span
                the output dim.
            TypeError: an option this scheme does not take, a
                ``variance_preserving`` that is not a bool or None, a
                ``model_spec`` that is not an ``InitSpec`` or None.
        """
        if role is not None and role not in ROLES:
            raise UnknownNameError.of("role", role, ROLES)
        self._check_options(options)
        if role is None and self.needs_role:
            raise ValueError(
                f"scheme {self.name!r} needs the parameter's role (one of {list(ROLES)}); "
                "pass role=, a classifiable name=, or an override pattern"
            )
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
        if stack not in (None, "encoder", "decoder"):
            raise ValueError(f"stack must be None, 'encoder' or 'decoder', got {stack!r}")
        trunc = _checked_truncation(self.name, trunc, variance_preserving)
        if gate_up not in _GATE_UP_ORDERS:
            raise ValueError(f"gate_up must be one of {_GATE_UP_ORDERS}, got {gate_up!r}")
        if qkv is not None and not isinstance(qkv, FusedQKV):
            raise TypeError(f"qkv must be a tinit.families.FusedQKV or None, got {type(qkv).__name__}")
        if experts is not None:
            experts = _fan("experts", experts)
        if model_spec is not None and not isinstance(model_spec, InitSpec):
            raise TypeError(f"model_spec must be a tinit.schemes.InitSpec or None, got {type(model_spec).__name__}")
        shape = tuple(_count("shape", size, 0) for size in shape)
        if role in STATE_ROLES:  # the model's own values whatever the recipe (no option changes them)
            from tinit.schemes._ssm import state_spec  # _ssm builds on this module's InitSpec

            return model_spec if model_spec is not None else state_spec(role, shape)
        ctx = Context(
            self.name,
            role,
            _count("layer_idx", layer_idx, 0),
            _count("n_layers", n_layers, 1),
            shape,
            _count("d_model", d_model, 1),
            _fan("fan_in", fan_in),
            _fan("fan_out", fan_out),
            layout,
            stack,
            _count("encoder_layers", encoder_layers, 1),
            _count("decoder_layers", decoder_layers, 1),
            qkv,
            experts,
            model_spec=model_spec,
        )
        try:
            if role == "mlp_gate_up":
                return self._gate_up_spec(ctx, gate_up, trunc, variance_preserving, options)
            fused = ctx.fused_qkv()
            if fused is not None:
                return self._fused_spec(ctx, fused, trunc, variance_preserving, options)
            spec = self.rule(ctx, **options)
        except _NoFanError:
            # A weight with no elements (nn.Linear(0, d)): nothing is written,
            # as torch.nn.init does for it; its options are checked all the
            # same, and every one of its (no) elements is 0.
            self.rule(replace(ctx, fan_in=1, fan_out=1), **options)
            return InitSpec(constant=0.0)
        return _finish(spec, trunc, variance_preserving, ctx, self)

    def _fused_spec(
        self, ctx: Context, fused: FusedQKV, trunc: float | None, variance_preserving: bool | None, options
    ) -> InitSpec:
        """A fused q/k/v projection: each part's spec as a matrix of its own, laid out by ``fused``."""
        parts = []
        for part in range(QKV_PARTS):
            one = replace(ctx, part=part)
            parts.append(_finish(self.rule(one, **options), trunc, variance_preserving, one, self))
        if parts[0] == parts[1] == parts[2]:
            return parts[0]  # one spec, one native pass (of an (out, in) weight: the values of its three parts)
        segments = None if fused.equal_thirds else fused.segments()
        return InitSpec(parts=tuple(parts), split_dim=ctx.out_dim, segments=segments)

    def _gate_up_spec(
        self, ctx: Context, order: str, trunc: float | None, variance_preserving: bool | None, options
    ) -> InitSpec:
        """A fused gate+up projection: the gate's spec (role mlp_in) and the up projection's
        (role mlp_up), each as a matrix of its own with half the output width, along the output dim
        of the layout (for an expert stack, of each expert's matrix)."""
        split = _GATE_UP_SPLIT_DIM.get((ctx.layout, len(ctx.shape)))
        explicit = ctx.fan_in is not None and ctx.fan_out is not None
        if split is None or ctx.shape[split] % 2:  # a layout without one output dim: one matrix
            whole = replace(ctx, role="mlp_in")
            return _finish(self.rule(whole, **options), trunc, variance_preserving, whole, self)
        fan_in, fan_out = ctx.fans()
        parts = []
        for role in ("mlp_in", "mlp_up"):
            one = replace(ctx, role=role, fan_in=fan_in, fan_out=fan_out if explicit else max(1, fan_out // 2))
            parts.append(_finish(self.rule(one, **options), trunc, variance_preserving, one, self))
        if parts[0] == parts[1]:
            return parts[0]
        width = ctx.shape[split]
        segments = None if order == "halves" else tuple((i % 2, 1) for i in range(width))
        return InitSpec(parts=tuple(parts), split_dim=split, segments=segments)

    def rule(self, ctx: Context, **options) -> InitSpec:
        raise NotImplementedError

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
        lr: float = 1.0,
        weight_decay: float = 0.0,
        eps: float | None = None,
        optimizer: str = "adam",
        **options,
    ) -> dict[str, float]:
        """The optimiser settings of one parameter under this recipe, from the base model's.

        A recipe with learning-rate rules overrides this (``MuP``, ``UnitMuP``, ``CompleteP``);
        ``tinit.mup_param_groups`` asks it for every parameter, with the parameter's context. The
        default is neutral: every parameter gets the base learning rate, weight decay and eps.

        Args:
            role: the parameter's role (``ROLES``).
            width_mults: per dim, this model's size over the base model's for a dim that scales
                with width, None for a fixed one (mup's ``InfShape``); None: decided from the role.
            ndim: the parameter's number of dims.
            shape, layout, experts: its logical shape, layout (``LAYOUTS``) and a 2-D grouped
                stack's expert count, as for ``spec`` (u-μP's fan_in).
            layer_idx, n_layers: its block index (None outside the blocks) and the blocks L of its
                stack (depth rules).
            lr, weight_decay: the base model's learning rate and weight decay.
            eps: the base model's Adam eps; None leaves it to the optimiser.
            optimizer: "adam" (Adam, AdamW) or "sgd".
            **options: d_model and the recipe's own (``MuP``: base_width, readout, reference).

        Returns:
            {"lr": float, "lr_multiplier": float (lr over the base lr), "weight_decay": float},
            and "eps" when ``eps`` is given: the keys of a torch optimiser's param group.
        """
        return group_settings(lr, 1.0, weight_decay, eps)

    def multipliers(
        self,
        *,
        n_layers: int | None = None,
        d_model: int | None = None,
        stack: str | None = None,
        encoder_layers: int | None = None,
        decoder_layers: int | None = None,
        **options,
    ) -> dict[str, float]:
        """Numbers the model's forward pass must apply for this recipe (none by default).

        Returns:
            A dict, empty for schemes that only set initial values.
        """
        return {}


def group_settings(lr: float, multiplier: float, weight_decay: float, eps: float | None) -> dict[str, float]:
    """A param group's settings (``Scheme.param_group``): lr * multiplier, the multiplier, the weight
    decay and (when given) eps, in a torch param group's keys."""
    found = {"lr": lr * multiplier, "lr_multiplier": multiplier, "weight_decay": weight_decay}
    if eps is not None:
        found["eps"] = eps
    return found


_GATE_UP_ORDERS = ("halves", "interleaved")
# (layout, dims) -> the output dim a fused gate+up projection's parts split
_GATE_UP_SPLIT_DIM = {("out_in", 2): 0, ("in_out", 2): 1, ("expert_out_in", 3): 1, ("expert_in_out", 3): 2}


def _checked_truncation(scheme: str, trunc, variance_preserving) -> float | None:
    """``trunc`` as a float > 0 (or None), with ``variance_preserving`` checked; ValueError, TypeError."""
    if trunc is not None:
        given, trunc = trunc, _float_or_none(trunc)
        if trunc is None or not trunc > 0:
            raise ValueError(
                f"scheme {scheme!r}: trunc (bounds in units of std) must be a number > 0 "
                f"(math.inf for none), got {given!r}"
            )
    if variance_preserving is not None and not isinstance(variance_preserving, bool):
        raise TypeError(
            f"scheme {scheme!r}: variance_preserving must be True, False or None, "
            f"got {type(variance_preserving).__name__} {variance_preserving!r}"
        )
    return trunc


def _finish(
    spec: InitSpec, trunc: float | None, variance_preserving: bool | None, ctx: Context, scheme: Scheme
) -> InitSpec:
    if spec.constant is not None:
        return spec
    if spec.parts is not None:
        return replace(
            spec,
            parts=tuple(_finish(p, trunc, variance_preserving, ctx, scheme) for p in spec.parts),
            split_dim=ctx.out_dim,
        )
    if not (math.isfinite(spec.std) and spec.std > 0):
        raise ValueError(f"scheme {ctx.scheme!r} gave std {spec.std} for role {ctx.role!r}")
    if spec.distribution == "uniform":
        return replace(spec, trunc=math.sqrt(3.0))
    reference = scheme.reference_trunc(ctx, spec)
    if variance_preserving is None:
        # A reference bounded so far out that its std is the parent's (truncation_factor is
        # 1.0 in float: torchtitan's absolute +-2 on std 0.02 is +-100 std) counts as untruncated.
        untruncated = truncation_factor(reference) == 1.0
        variance_preserving = scheme.reference_variance_preserving or (trunc is not None and untruncated)
    if trunc is None:
        trunc = reference
    std = spec.std / truncation_factor(trunc) if variance_preserving else spec.std
    return replace(spec, std=std, trunc=trunc)
