"""The record a scheme returns (``InitSpec``), fans, truncation and the ``Scheme`` base class."""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, replace

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
}
OUTPUT_ROLES = ("attn_out", "mlp_out")  # write straight into the residual stream
HIDDEN_ROLES = ("attn_q", "attn_k", "attn_v", "attn_qkv", "attn_out", "mlp_in", "mlp_out")  # base roles
LAYOUTS = ("out_in", "in_out")
_QKV_PARTS = 3


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
        parts: for fused tensors, one spec per equal slice along ``split_dim``
            (e.g. DeepNorm's q, k, v of a fused qkv); ``std`` is then unused.
        split_dim: the tensor dim the parts divide (the logical output dim:
            0 for an (out, in) weight, 1 for an (in, out) one).
    """

    std: float = 0.0
    trunc: float = 2.0
    mean: float = 0.0
    constant: float | None = None
    distribution: str = "trunc_normal"
    parts: tuple[InitSpec, ...] | None = None
    split_dim: int = 0

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
        (equal slices, zero means): the root mean square of the parts' stds.
        """
        if self.constant is not None:
            return 0.0
        if self.parts is not None:
            return math.sqrt(sum(p.realised_std**2 for p in self.parts) / len(self.parts))
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


def fans(shape: tuple[int, ...], layout: str = "out_in", parts: int = 1) -> tuple[int, int]:
    """(fan_in, fan_out) of a weight from its logical shape.

    Args:
        shape: the full (unsharded) shape, >= 2 dims.
        layout: "out_in" (``nn.Linear``, ``nn.Embedding``: fan_in = shape[1])
            or "in_out" (HF ``Conv1D``: fan_in = shape[0]); ignored beyond 2
            dims, where ``torch.nn.init``'s receptive-field rule applies.
        parts: equal slices of a fused output dim (3 for a fused qkv);
            fan_out is that of one slice.

    Returns:
        (fan_in, fan_out).

    Raises:
        ValueError: fewer than 2 dims, unknown layout, a zero fan, or an
            output dim that does not split into ``parts``.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if len(shape) < 2:
        raise ValueError(f"fan_in/fan_out need a weight with >= 2 dims, got shape {tuple(shape)}")
    if len(shape) == 2:
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
            "(a fused projection with unequal q/k/v widths: pass fan_out explicitly)"
        )
    return fan_in, fan_out // parts


class UnknownNameError(KeyError, ValueError):
    """An unknown scheme or role name: a KeyError (a failed lookup in ``SCHEMES`` or ``ROLES``)
    and a ValueError (a bad argument), so either ``except`` catches it."""

    def __str__(self) -> str:  # the message as written, not KeyError's repr of it
        return str(self.args[0]) if self.args else ""


class _NoFanError(ValueError):
    """A fan of zero: the weight has no elements, so a fan-based std is undefined (and unneeded)."""


def _count(name: str, value, low: int):
    """``value`` with integer scalars (numpy's) as ints; anything else unchanged for the scheme's own checks."""
    if value is None or type(value) is int or isinstance(value, bool) or not hasattr(type(value), "__index__"):
        return value
    return operator.index(value)


def _fan(name: str, value) -> int | None:
    """An explicit fan: None, or an int >= 1 (numpy integers included)."""
    if value is None:
        return None
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(f"{name} must be an int >= 1 or None, got {type(value).__name__} {value!r}")
    value = operator.index(value)
    if value < 1:
        raise ValueError(f"{name} must be an int >= 1 or None, got {value}")
    return value


@dataclass(frozen=True)
class Context:
    """What a scheme may know about one parameter (see ``Scheme.spec``)."""

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

    @property
    def base(self) -> str | None:
        """The role the recipe tables are written in: ``role`` itself, or ``BASE_ROLE[role]`` for a
        finer role of a modern block (router, MLA projection, gated MLP's up projection, ...)."""
        return BASE_ROLE.get(self.role, self.role)

    def qkv_parts(self, q: InitSpec, k: InitSpec, v: InitSpec) -> InitSpec:
        """The spec of a fused q/k/v projection (role attn_qkv) from one spec per part: the
        tensor's q, k and v rows each get their part's spec (equal thirds of the output dim)."""
        return InitSpec(parts=(q, k, v))

    def fans(self) -> tuple[int, int]:
        """(fan_in, fan_out): explicit values win, else ``fans(shape, layout)``."""
        if self.fan_in is not None and self.fan_out is not None:
            return self.fan_in, self.fan_out
        parts = _QKV_PARTS if self.role == "attn_qkv" else 1
        fan_in, fan_out = fans(self.shape, self.layout, parts)
        return (self.fan_in or fan_in), (self.fan_out or fan_out)

    def need(self, what: str) -> int:
        """The positive int ``what`` ("n_layers", "d_model", "layer_idx"), or a ValueError naming the scheme."""
        value = getattr(self, what)
        low = 0 if what == "layer_idx" else 1
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            role = f" for role {self.role!r}" if self.role else ""
            raise ValueError(f"scheme {self.scheme!r} needs {what} (an int >= {low}){role}, got {value!r}")
        return value


def _positive(scheme: str, name: str, value) -> float:
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


def _constants(role: str | None) -> InitSpec | None:
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


def _normal(std: float) -> InitSpec:
    return InitSpec(std=std)


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
    distribution (std = the std the recipe asks for).
    """

    name = ""
    needs_role = True
    depth_dependent = False
    default_trunc = 2.0
    reference_variance_preserving = False
    required_roles: tuple[str, ...] = ()

    def reference_trunc(self, ctx: Context, spec: InitSpec) -> float:
        """The truncation (units of std, > 0, may be inf) the recipe's reference applies to the
        truncated normal ``spec`` of the parameter ``ctx``; ``default_trunc`` unless a scheme
        says otherwise (absolute bounds, as ``torch.nn.init.trunc_normal_``'s, are ``b / spec.std``)."""
        return self.default_trunc

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
        trunc: float | None = None,
        variance_preserving: bool | None = None,
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
            layout: "out_in" (``nn.Linear``) or "in_out" (HF ``Conv1D``).
            stack: "encoder" or "decoder" in an encoder-decoder model, else None.
            encoder_layers, decoder_layers: N and M of an encoder-decoder model.
            trunc: bounds in units of std (> 0, may be inf); when None, the
                reference's truncation (``reference_trunc``).
            variance_preserving: scale std so the realised std is the target.
                None (default): as the reference does
                (``reference_variance_preserving``), and also True when
                ``trunc`` truncates a recipe whose reference is untruncated,
                so that truncating keeps the reference's std; True/False
                are honoured as given.
            **options: the scheme's own options (see its docstring).

        Returns:
            An ``InitSpec``.

        Raises:
            UnknownNameError: unknown role (a KeyError and a ValueError).
            ValueError: a needed value (role, n_layers, d_model, layer_idx) is
                missing, or an option is out of range.
            TypeError: an option this scheme does not take, or a
                ``variance_preserving`` that is not a bool or None.
        """
        if role is not None and role not in ROLES:
            raise UnknownNameError(f"unknown role {role!r}; known: {list(ROLES)}")
        if role is None and self.needs_role:
            raise ValueError(
                f"scheme {self.name!r} needs the parameter's role (one of {list(ROLES)}); "
                "pass role=, a classifiable name=, or an override pattern"
            )
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
        if stack not in (None, "encoder", "decoder"):
            raise ValueError(f"stack must be None, 'encoder' or 'decoder', got {stack!r}")
        if trunc is not None:
            given, trunc = trunc, _float_or_none(trunc)
            if trunc is None or not trunc > 0:
                raise ValueError(
                    f"scheme {self.name!r}: trunc (bounds in units of std) must be a number > 0 "
                    f"(math.inf for none), got {given!r}"
                )
        if variance_preserving is not None and not isinstance(variance_preserving, bool):
            raise TypeError(
                f"scheme {self.name!r}: variance_preserving must be True, False or None, "
                f"got {type(variance_preserving).__name__} {variance_preserving!r}"
            )
        shape = tuple(_count("shape", size, 0) for size in shape)
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
        )
        try:
            spec = self.rule(ctx, **options)
        except _NoFanError:
            # A weight with no elements (nn.Linear(0, d)): nothing is written,
            # as torch.nn.init does for it; its options are checked all the
            # same, and every one of its (no) elements is 0.
            self.rule(replace(ctx, fan_in=1, fan_out=1), **options)
            return InitSpec(constant=0.0)
        return _finish(spec, trunc, variance_preserving, ctx, self)

    def rule(self, ctx: Context, **options) -> InitSpec:
        raise NotImplementedError

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


def _finish(
    spec: InitSpec, trunc: float | None, variance_preserving: bool | None, ctx: Context, scheme: Scheme
) -> InitSpec:
    if spec.constant is not None:
        return spec
    if spec.parts is not None:
        split_dim = 0 if ctx.layout == "out_in" or len(ctx.shape) != 2 else 1
        return replace(
            spec,
            parts=tuple(_finish(p, trunc, variance_preserving, ctx, scheme) for p in spec.parts),
            split_dim=split_dim,
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
