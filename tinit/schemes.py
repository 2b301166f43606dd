"""The scheme registry: per-parameter std, bounds and architectural multipliers.

A scheme maps what is known about one parameter (its role, its block index,
the depth L of its stack, d_model, its logical shape and layout) to an
``InitSpec``: a truncated normal (mean, std, bounds ``trunc`` in units of
std), a uniform, a constant, or, for a fused projection whose slices follow
different rules, one spec per slice. Where a recipe also changes the forward
pass (DeepNorm's alpha on the residual branch, muP's readout multiplier) the
scheme's ``multipliers`` returns the numbers the model must apply.

Conventions shared by every scheme:
    std      standard deviation in tensor units. For a truncated normal it is
             the std of the parent normal unless ``variance_preserving=True``.
    trunc    bounds in units of std around the mean (JAX/TensorFlow
             convention), not absolute bounds (``torch.nn.init.trunc_normal_``).
             Default +-2 std unless the recipe fixes another value (``modern``
             and ``mitchell``: +-3); ``trunc=math.inf`` gives the untruncated
             normal that most papers write.
    variance_preserving
             divide std by the truncated normal's std factor
             (``truncation_factor``), so the realised std equals the target,
             as JAX/Keras ``variance_scaling`` does (0.87962566 at +-2).
    fans     fan_in / fan_out come from the parameter's LOGICAL (unsharded)
             shape and its layout: ``"out_in"`` for ``nn.Linear`` and
             ``nn.Embedding`` weights (out_features, in_features), ``"in_out"``
             for Hugging Face's ``Conv1D`` (GPT-2). Tensors with more than two
             dims follow ``torch.nn.init`` (dims 0 and 1 times the receptive
             field). A fused q/k/v projection counts a third of its output dim
             as fan_out, the fan of each of q, k and v.
    L        ``n_layers``, the number of blocks of the parameter's stack; a
             block holds two residual branches (attention, MLP).
    d        ``d_model``, the residual stream width.

Roles (``tinit.roles.ROLES``): embedding, attn_q, attn_k, attn_v, attn_qkv
(fused), attn_out, mlp_in (gate/up/fc1), mlp_out (down/fc2), norm (norm
weight), bias, head (output/LM head), residual_gate (a learnable scalar or
vector multiplying a residual branch). Unless a scheme says otherwise, norm
weights are 1, biases 0 and residual gates 1.
"""

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
)
OUTPUT_ROLES = ("attn_out", "mlp_out")  # write straight into the residual stream
HIDDEN_ROLES = ("attn_q", "attn_k", "attn_v", "attn_qkv", "attn_out", "mlp_in", "mlp_out")
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
    """The shared constants: norm weights 1, biases 0, residual gates 1 (the branch passes unchanged)."""
    if role == "norm":
        return InitSpec(constant=1.0)
    if role == "bias":
        return InitSpec(constant=0.0)
    if role == "residual_gate":
        return InitSpec(constant=1.0)
    return None


def _normal(std: float) -> InitSpec:
    return InitSpec(std=std)


class Scheme:
    """Base of every scheme: argument checks, truncation and variance preservation.

    Subclasses set ``name``, ``needs_role`` (whether the role changes the
    result, so an unclassified parameter must be refused), ``default_trunc``,
    ``depth_dependent`` (whether the block index ``layer_idx`` changes the
    result; ``init_model_`` computes one spec per distinct input otherwise;
    ``depends_on_depth`` answers for given options)
    and implement ``rule(ctx, **options)``, which returns the target
    distribution (std = the std the recipe asks for).
    """

    name = ""
    needs_role = True
    depth_dependent = False
    default_trunc = 2.0
    required_roles: tuple[str, ...] = ()

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
        variance_preserving: bool = False,
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
            trunc: bounds in units of std (> 0, may be inf); scheme default when None.
            variance_preserving: scale std so the realised std is the target.
            **options: the scheme's own options (see its docstring).

        Returns:
            An ``InitSpec``.

        Raises:
            UnknownNameError: unknown role (a KeyError and a ValueError).
            ValueError: a needed value (role, n_layers, d_model, layer_idx) is
                missing, or an option is out of range.
            TypeError: an option this scheme does not take.
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
        given = self.default_trunc if trunc is None else trunc
        trunc = _float_or_none(given)
        if trunc is None or not trunc > 0:
            raise ValueError(
                f"scheme {self.name!r}: trunc (bounds in units of std) must be a number > 0 "
                f"(math.inf for none), got {given!r}"
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
        return _finish(spec, trunc, bool(variance_preserving), ctx)

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


def _finish(spec: InitSpec, trunc: float, variance_preserving: bool, ctx: Context) -> InitSpec:
    if spec.constant is not None:
        return spec
    if spec.parts is not None:
        split_dim = 0 if ctx.layout == "out_in" or len(ctx.shape) != 2 else 1
        return replace(
            spec, parts=tuple(_finish(p, trunc, variance_preserving, ctx) for p in spec.parts), split_dim=split_dim
        )
    if not (math.isfinite(spec.std) and spec.std > 0):
        raise ValueError(f"scheme {ctx.scheme!r} gave std {spec.std} for role {ctx.role!r}")
    if spec.distribution == "uniform":
        return replace(spec, trunc=math.sqrt(3.0))
    std = spec.std / truncation_factor(trunc) if variance_preserving else spec.std
    return replace(spec, std=std, trunc=trunc)


class Normal(Scheme):
    """``normal``: every matrix and embedding from N(0, std^2), truncated at +-trunc std.

    std = 0.02 by default: GPT-2's and BERT's ``initializer_range`` (Radford
    et al., 2019; Devlin et al., 2019). Norm weights 1, biases 0, residual
    gates 1. Needs no role: a parameter tinit cannot classify gets the same
    N(0, std^2) as any matrix.

    Options:
        std: float > 0, default 0.02.
    """

    name = "normal"
    needs_role = False

    def rule(self, ctx: Context, std: float = 0.02) -> InitSpec:
        std = _positive(self.name, "std", std)
        return _constants(ctx.role) or _normal(std)


class GPT2(Normal):
    """``gpt2``: ``normal`` plus residual output projections scaled by depth.

    std_out = std / sqrt(multiplier * L) for attn_out and mlp_out (HF GPT-2
    ``attn.c_proj``/``mlp.c_proj``), std elsewhere; multiplier = 2 because each
    of the L blocks adds two branches to the residual stream. Radford et al.,
    "Language Models are Unsupervised Multitask Learners" (2019), section 2.3,
    scale "the weights of residual layers at initialization by a factor of
    1/sqrt(N) where N is the number of residual layers"; Hugging Face's
    ``GPT2PreTrainedModel._init_weights`` and nanoGPT take N = 2L, as here.
    Both draw from an untruncated normal (``trunc=math.inf`` reproduces it).

    Options:
        std: float > 0, default 0.02.
        multiplier: residual branches per block, default 2.
    """

    name = "gpt2"
    needs_role = True

    def rule(self, ctx: Context, std: float = 0.02, multiplier: float = 2.0) -> InitSpec:
        std = _positive(self.name, "std", std)
        multiplier = _positive(self.name, "multiplier", multiplier)
        if ctx.role in OUTPUT_ROLES:
            return _normal(std / math.sqrt(multiplier * ctx.need("n_layers")))
        return _constants(ctx.role) or _normal(std)


class Megatron(GPT2):
    """``megatron``: Megatron-LM's ``init_method_normal`` / ``scaled_init_method_normal``.

    Every matrix (embeddings, q/k/v, MLP in, output layer) from N(0, std^2)
    with std = ``init_method_std`` (0.02); the output projections (attention
    ``dense``/``linear_proj``, MLP ``dense_4h_to_h``/``linear_fc2``) from
    N(0, std^2 / (multiplier * L)) with multiplier = 2.0 (Shoeybi et al.,
    "Megatron-LM", arXiv:1909.08053, 2019; ``megatron/core/utils.py``). The
    same numbers as ``gpt2``; Megatron also draws untruncated normals.

    Options:
        std: float > 0, default 0.02.
        multiplier: default 2.0 (Megatron's ``scaled_init_method_normal``).
    """

    name = "megatron"


class DepthInit(Normal):
    """``depth_init``: output projections scaled by their own depth.

    std_out(l) = std / sqrt(2 * (l + 1)) for attn_out and mlp_out of block l
    (0-based), std elsewhere: torchtitan's Llama ``depth_init=True``
    (``weight_init_std = 0.02 / (2 * (layer_id + 1)) ** 0.5``) and OLMo-core's
    ``InitMethod.llama_depth``. Where those codebases differ: both also
    scale the MLP up projection (``w3``), which tinit cannot tell from the
    gate (both are mlp_in; an override with per-layer ``options`` can); both
    draw embeddings from N(0, 1) and the untied output head with std d^-1/2
    at +-3 std (options ``embedding_std``, ``head_std``); torchtitan passes
    absolute bounds of +-2 to ``trunc_normal_``, i.e. an effectively
    untruncated normal (``trunc=math.inf``).

    Options:
        std: float > 0, default 0.02.
        embedding_std: std of embeddings, default ``std`` (torchtitan: 1.0).
        head_std: std of the output head, default ``std`` (torchtitan: d^-1/2).
    """

    name = "depth_init"
    needs_role = True
    depth_dependent = True

    def rule(
        self, ctx: Context, std: float = 0.02, embedding_std: float | None = None, head_std: float | None = None
    ) -> InitSpec:
        std = _positive(self.name, "std", std)
        if ctx.role in OUTPUT_ROLES:
            return _normal(std / math.sqrt(2.0 * (ctx.need("layer_idx") + 1)))
        if ctx.role == "embedding" and embedding_std is not None:
            return _normal(_positive(self.name, "embedding_std", embedding_std))
        if ctx.role == "head" and head_std is not None:
            return _normal(_positive(self.name, "head_std", head_std))
        return _constants(ctx.role) or _normal(std)


class _FanScheme(Scheme):
    """Schemes that treat every weight alike through its fans (no role needed)."""

    needs_role = False

    def rule(self, ctx: Context, **options) -> InitSpec:
        constant = _constants(ctx.role)
        if constant is not None:
            return constant
        return self.weight(ctx, *ctx.fans(), **options)

    def weight(self, ctx: Context, fan_in: int, fan_out: int, **options) -> InitSpec:
        raise NotImplementedError


class XavierNormal(_FanScheme):
    """``xavier_normal``: std = gain * sqrt(2 / (fan_in + fan_out)).

    Glorot & Bengio, "Understanding the difficulty of training deep
    feedforward neural networks" (AISTATS 2010), eq. 12 (Var = 2 / (n_in +
    n_out)), in its normal form (``torch.nn.init.xavier_normal_``; the paper
    writes the uniform of ``xavier_uniform``). Applied to every weight with >=
    2 dims, embeddings and head included; norms 1, biases 0.

    Options:
        gain: float > 0, default 1.
    """

    name = "xavier_normal"

    def weight(self, ctx: Context, fan_in: int, fan_out: int, gain: float = 1.0) -> InitSpec:
        return _normal(_positive(self.name, "gain", gain) * math.sqrt(2.0 / (fan_in + fan_out)))


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
        std = _positive(self.name, "gain", gain) * math.sqrt(2.0 / (fan_in + fan_out))
        return InitSpec(std=std, distribution="uniform")


def _kaiming_fan(scheme: str, mode: str, fan_in: int, fan_out: int) -> int:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"scheme {scheme!r}: mode must be 'fan_in' or 'fan_out', got {mode!r}")
    return fan_in if mode == "fan_in" else fan_out


class KaimingNormal(_FanScheme):
    """``kaiming_normal``: std = gain / sqrt(fan), gain = sqrt(2) (ReLU).

    He et al., "Delving Deep into Rectifiers" (arXiv:1502.01852, 2015), eq. 10:
    Var = 2 / n_l with n_l = fan_in (forward) or eq. 14 with fan_out
    (backward). ``torch.nn.init.kaiming_normal_`` with nonlinearity "relu".

    Options:
        gain: float > 0, default sqrt(2); sqrt(2 / (1 + a^2)) for leaky ReLU.
        mode: "fan_in" (default) or "fan_out".
    """

    name = "kaiming_normal"

    def weight(
        self, ctx: Context, fan_in: int, fan_out: int, gain: float = math.sqrt(2.0), mode: str = "fan_in"
    ) -> InitSpec:
        fan = _kaiming_fan(self.name, mode, fan_in, fan_out)
        return _normal(_positive(self.name, "gain", gain) / math.sqrt(fan))


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
        return InitSpec(std=_positive(self.name, "gain", gain) / math.sqrt(fan), distribution="uniform")


class LecunNormal(_FanScheme):
    """``lecun_normal``: std = 1 / sqrt(fan_in).

    LeCun, Bottou, Orr & Mueller, "Efficient BackProp" (1998), section 4.6;
    Klambauer et al., "Self-Normalizing Neural Networks" (2017), as
    ``jax.nn.initializers.lecun_normal`` (which also truncates at +-2 and
    preserves the variance: pass ``variance_preserving=True`` for that).
    """

    name = "lecun_normal"

    def weight(self, ctx: Context, fan_in: int, fan_out: int) -> InitSpec:
        return _normal(1.0 / math.sqrt(fan_in))


def _small_std(ctx: Context) -> float:
    return math.sqrt(2.0 / (5.0 * ctx.need("d_model")))


class SmallInit(Scheme):
    """``small_init``: std = sqrt(2 / (5 d)) for every matrix.

    The "small init" GPT-NeoX attributes to Nguyen & Salazar, "Transformers
    without Tears" (arXiv:1910.05895, 2019): GPT-NeoX's
    ``small_init_init_method(hidden_size)``, written sqrt(2 / (d + 4 d)) in
    the GPT-NeoX-20B paper (Xavier's 2 / (fan_in + fan_out) for a d x 4d MLP
    matrix). d = d_model for every matrix (MLP down projections included),
    norms 1, biases 0; no role needed.
    """

    name = "small_init"
    needs_role = False

    def rule(self, ctx: Context) -> InitSpec:
        return _constants(ctx.role) or _normal(_small_std(ctx))


class WangInit(Scheme):
    """``wang_init``: GPT-NeoX's pairing, output projections std = 2 / (L sqrt(d)).

    attn_out and mlp_out from GPT-NeoX's ``wang_init_method(n_layers, dim)``
    (after Ben Wang's mesh-transformer-jax), every other matrix from
    ``small_init``'s sqrt(2 / (5 d)) (Black et al., "GPT-NeoX-20B",
    arXiv:2204.06745, 2022, on initialisation; GPT-NeoX's code applies
    ``output_layer_init_method`` to both output projections, as here).
    Norms 1, biases 0.
    """

    name = "wang_init"
    needs_role = True

    def rule(self, ctx: Context) -> InitSpec:
        if ctx.role in OUTPUT_ROLES:
            return _normal(2.0 / (ctx.need("n_layers") * math.sqrt(ctx.need("d_model"))))
        return _constants(ctx.role) or _normal(_small_std(ctx))


class Mitchell(Scheme):
    """``mitchell``: OLMo's ``InitFnType.mitchell`` (after Mitchell Wortsman).

    std = 1 / sqrt(d_in), and for the output projections of block l (0-based)
    a further 1 / sqrt(2 (l + 1)), truncated at +-3 std
    (``olmo/initialization.py``; Groeneveld et al., "OLMo", arXiv:2402.00838,
    2024). d_in is d_model for embeddings, q/k/v, MLP in, attention output
    and head, and the MLP hidden width (the down projection's fan_in) for
    mlp_out:
        attn_out: 1 / sqrt(2 d (l + 1));  mlp_out: 1 / sqrt(2 d_ff (l + 1)).
    """

    name = "mitchell"
    needs_role = True
    depth_dependent = True
    default_trunc = 3.0

    def rule(self, ctx: Context) -> InitSpec:
        constant = _constants(ctx.role)
        if constant is not None:
            return constant
        if ctx.role == "mlp_out":
            d_in = ctx.fans()[0]
        else:
            d_in = ctx.need("d_model")
        std = 1.0 / math.sqrt(d_in)
        if ctx.role in OUTPUT_ROLES:
            std /= math.sqrt(2.0 * (ctx.need("layer_idx") + 1))
        return _normal(std)


class Modern(Scheme):
    """``modern``: the recipe table of the design documents, truncated at +-3 std.

        embeddings                    0.02
        attn q/k/v (fused), mlp_in    base
        attn_out, mlp_out             base / sqrt(2 L)
        head                          base (a hidden-width matrix)
        norm weights 1, biases 0

    base = sqrt(2 / (5 d)) (``small_init``, Nguyen & Salazar 2019) or
    1 / sqrt(d); the 1 / sqrt(2 L) factor is GPT-2's/Megatron's. The table of
    ``shared/seeds/003`` writes sqrt(2/d) for q/k/v and gate/up, but the same
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

    def rule(self, ctx: Context, base: str | float = "small", embedding_std: float = 0.02) -> InitSpec:
        constant = _constants(ctx.role)
        if constant is not None:
            return constant
        if ctx.role == "embedding":
            return _normal(_positive(self.name, "embedding_std", embedding_std))
        if base == "small":
            std = _small_std(ctx)
        elif base == "inv_sqrt_d":
            std = 1.0 / math.sqrt(ctx.need("d_model"))
        elif isinstance(base, str):
            raise ValueError(f"scheme 'modern': base must be 'small', 'inv_sqrt_d' or a float, got {base!r}")
        else:
            std = _positive(self.name, "base", base)
        if ctx.role in OUTPUT_ROLES:
            std /= math.sqrt(2.0 * ctx.need("n_layers"))
        return _normal(std)


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
        constant = _constants(ctx.role)
        if constant is not None:
            return constant
        if ctx.role in ("embedding", "head"):
            width = ctx.d_model if ctx.d_model else ctx.fans()[0]
            return _normal(width**-0.5)
        fan_in, fan_out = ctx.fans()
        xavier = math.sqrt(2.0 / (fan_in + fan_out))
        if ctx.role in ("attn_q", "attn_k"):
            return _normal(xavier)
        _, beta = deepnorm_constants(
            ctx.n_layers, stack=ctx.stack, encoder_layers=ctx.encoder_layers, decoder_layers=ctx.decoder_layers
        )
        if ctx.role == "attn_qkv":
            return InitSpec(parts=(_normal(xavier), _normal(xavier), _normal(beta * xavier)))
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
        return get(base).spec(role=role, **kwargs)

    def depends_on_depth(self, *, base: str = "normal", **options) -> bool:
        """The base scheme's answer (``base="depth_init"`` or ``"mitchell"`` scale by block)."""
        return base != self.name and get(base).depends_on_depth(**options)

    def multipliers(self, *, base: str = "normal", **kwargs) -> dict[str, float]:
        """The base scheme's multipliers (the gates themselves are parameters)."""
        return get(base).multipliers(**kwargs)


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
        constant = _constants(ctx.role)
        if constant is not None:
            return constant
        if ctx.role in (*OUTPUT_ROLES, "head"):
            return InitSpec(constant=0.0)
        if ctx.role == "embedding":
            width = ctx.d_model if ctx.d_model else ctx.fans()[0]
            return _normal(width**-0.5)
        if not isinstance(m, int) or m < 2:
            raise ValueError(f"scheme 'fixup': m (layers per branch) must be an int >= 2, got {m!r}")
        branches = _positive(self.name, "branches_per_layer", branches_per_layer) * ctx.need("n_layers")
        he = _positive(self.name, "gain", gain) / math.sqrt(ctx.fans()[0])
        return _normal(he * branches ** (-1.0 / (2 * m - 2)))


_READOUTS = ("zero", "scaled", "multiplier")
_OPTIMIZERS = ("adam", "sgd")


class MuP(Scheme):
    """``mup``: maximal update parametrisation against a base width.

    Yang et al., "Tensor Programs V: Tuning Large Neural Networks via
    Zero-Shot Hyperparameter Transfer" (arXiv:2203.03466, 2022), Table 3 and
    its equivalent form with a 1/fan_in output multiplier (the one the
    ``mup`` package implements), written relative to a base model of width
    ``base_width`` whose tuned
    std is ``std``; m = d_model / base_width is the width multiplier (every
    hidden width scales by m, so base_fan_in / fan_in = 1 / m):
        embedding (input weights):       std
        hidden matrices (attn, mlp):     std * sqrt(base_fan_in / fan_in) = std / sqrt(m)
        head (readout), readout="zero":  0 (the paper's recommended zero readout;
                                          a head tied to the embedding is
                                          written once, as the embedding)
                        readout="scaled": std / m (Table 3: Var ~ 1/fan_in^2)
                        readout="multiplier": std, and the model multiplies the
                                          logits by 1/m (``multipliers``)
        norms 1, biases 0, residual gates 1.
    The attention logits must use 1/d_head instead of 1/sqrt(d_head) (muP's
    attention rule); tinit cannot do that for the model. Per-parameter
    learning-rate multipliers: ``lr_multiplier`` and
    ``tinit.mup_param_groups``.

    Options:
        std: the base model's std, default 0.02.
        base_width: the base model's d_model; None means m = 1.
        readout: "zero" (default), "scaled" or "multiplier".
        zero_query: also start the query projection at 0 (the paper's
            appendix recommends zero-initialising the output and query
            layers; for a fused qkv, its first third), default False.
    """

    name = "mup"
    needs_role = True

    def rule(
        self,
        ctx: Context,
        std: float = 0.02,
        base_width: int | None = None,
        readout: str = "zero",
        zero_query: bool = False,
    ) -> InitSpec:
        std = _positive(self.name, "std", std)
        _check_readout(readout)
        constant = _constants(ctx.role)
        if constant is not None:
            return constant
        m = self.width_mult(ctx.d_model, base_width)
        if ctx.role == "embedding":
            return _normal(std)
        if ctx.role == "head":
            return {"zero": InitSpec(constant=0.0), "scaled": _normal(std / m), "multiplier": _normal(std)}[readout]
        hidden = _normal(std / math.sqrt(m))
        if zero_query and ctx.role == "attn_q":
            return InitSpec(constant=0.0)
        if zero_query and ctx.role == "attn_qkv":
            return InitSpec(parts=(InitSpec(constant=0.0), hidden, hidden))
        return hidden

    @staticmethod
    def width_mult(d_model: int | None, base_width: int | None) -> float:
        """m = d_model / base_width (1 when base_width is None).

        Raises:
            ValueError: base_width given without d_model, or not positive.
        """
        if base_width is None:
            return 1.0
        _positive("mup", "base_width", base_width)
        if not isinstance(d_model, int) or d_model < 1:
            raise ValueError(f"scheme 'mup' with base_width needs d_model (an int >= 1), got {d_model!r}")
        return d_model / base_width

    def lr_multiplier(
        self,
        role: str | None,
        *,
        d_model: int | None = None,
        base_width: int | None = None,
        optimizer: str = "adam",
        readout: str = "zero",
    ) -> float:
        """Learning-rate multiplier of one parameter relative to the base model's lr.

        TP5 Table 3 (readout "zero"/"scaled") and its output-multiplier
        form (readout "multiplier") at width multiplier m:
            Adam: embeddings, norms, biases, gates 1; hidden 1/m; head 1/m
                  (multiplier form: 1).
            SGD:  embeddings, norms, biases, gates m; hidden 1; head 1/m
                  (multiplier form: m).
        The multiplier form follows from Table 3: with logits W x / m, an
        Adam step on W moves W / m by lr / m, an SGD step by lr / m^2.

        Args:
            role: one of ``ROLES``.
            d_model, base_width: as for the init.
            optimizer: "adam" (also AdamW) or "sgd".
            readout: as for the init.

        Returns:
            The multiplier (> 0).

        Raises:
            UnknownNameError: unknown role. ValueError: unknown optimizer or readout,
            or a role of None.
        """
        if role not in ROLES:
            raise (ValueError if role is None else UnknownNameError)(
                f"mup lr_multiplier needs a known role, got {role!r}"
            )
        if optimizer not in _OPTIMIZERS:
            raise ValueError(f"mup: optimizer must be one of {_OPTIMIZERS}, got {optimizer!r}")
        _check_readout(readout)
        m = self.width_mult(d_model, base_width)
        if role in HIDDEN_ROLES:
            return 1.0 / m if optimizer == "adam" else 1.0
        if role == "head":
            if readout == "multiplier":
                return 1.0 if optimizer == "adam" else m
            return 1.0 / m
        return 1.0 if optimizer == "adam" else m

    def multipliers(self, *, d_model=None, base_width=None, readout="zero", **options) -> dict[str, float]:
        """{"width_mult": m, "output": logits multiplier} (1/m for readout "multiplier", else 1)."""
        _check_readout(readout)
        m = self.width_mult(d_model, base_width)
        return {"width_mult": m, "output": 1.0 / m if readout == "multiplier" else 1.0}


def _check_readout(readout: str) -> None:
    if readout not in _READOUTS:
        raise ValueError(f"scheme 'mup': readout must be one of {_READOUTS}, got {readout!r}")


SCHEMES = {
    s.name: s
    for s in (
        Normal(),
        GPT2(),
        Megatron(),
        DepthInit(),
        XavierUniform(),
        XavierNormal(),
        KaimingNormal(),
        KaimingUniform(),
        LecunNormal(),
        SmallInit(),
        WangInit(),
        Mitchell(),
        Modern(),
        DeepNorm(),
        ReZero(),
        Fixup(),
        MuP(),
    )
}


def get(name: str) -> Scheme:
    """The scheme called ``name``.

    Raises:
        UnknownNameError: unknown name (the message lists the known ones); a KeyError
            and a ValueError.
    """
    try:
        return SCHEMES[name]
    except KeyError:
        raise UnknownNameError(f"unknown tinit scheme {name!r}; known: {sorted(SCHEMES)}") from None


def multipliers(name: str, **context) -> dict[str, float]:
    """``get(name).multipliers(**context)``: forward-pass multipliers of a recipe.

    Example: ``multipliers("deepnorm", n_layers=80)["residual_alpha"]`` is
    (2 * 80) ** 0.25 = 3.557.
    """
    return get(name).multipliers(**context)
