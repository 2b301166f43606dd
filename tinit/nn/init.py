"""A full replacement for ``torch.nn.init`` whose random fills run on tinit's stream.

The seven random initialisers ``uniform_``, ``normal_``, ``trunc_normal_``,
``xavier_uniform_``, ``xavier_normal_``, ``kaiming_uniform_`` and
``kaiming_normal_`` keep torch's signatures, formulas (fans, gains, absolute
bounds), argument checks, no-grad writes and return value, and fill the
tensor in one native pass of tinit's transform (``tinit.dispatch``: the CPU,
CUDA or Triton kernel).

The stream rule (docs/stream.md), the same for all seven: a call that writes
something draws exactly one Philox key from torch's RNG (``tinit.trunc_normal_``
is this module's ``trunc_normal_``: a uniform int64 on [0, 2**63) from ``generator``
on its device, or from the default CPU generator when it is None, whatever
the default device), and element i of the tensor (row-major over its logical
shape, whatever its strides or sharding) takes stream index i of stream id 0
under that key. So ``torch.manual_seed`` makes a model reproducible, on every
backend and device, and a DTensor gets the values of the unsharded tensor
whatever its layout (every rank must seed its generator identically). A call
that writes nothing (a tensor on the meta device, of no elements, or one of
torch's fake tensors under ``FakeTensorMode``) draws nothing, as torch's fills
draw nothing then. Refused arguments raise before
anything is drawn or written.

The values follow the same distribution as torch's and are not torch's values
(a different generator). ``calculate_gain`` and the deterministic
initialisers ``constant_``, ``zeros_``, ``ones_``, ``eye_`` and ``dirac_`` are
torch's own functions, re-exported so the module replaces ``torch.nn.init``
as a whole; so are ``orthogonal_`` and ``sparse_``, which draw from torch's
RNG exactly as torch does (a QR of a torch normal, a torch ``randperm``), and
``constant``, ``eye``, ``dirac``, ``orthogonal`` and ``sparse``, torch's deprecated
aliases of them. The deprecated aliases of the random fills (``uniform``,
``normal``, ``xavier_uniform``, ...) are this module's own: a FutureWarning with
torch's words, then the tinit fill.

Routing: ``KEYED`` maps each random initialiser's name to a function with the
same positional arguments plus keyword-only ``seed`` (a Philox key in
[0, 2**64), or None to draw one as above) and ``stream`` (the stream id), so
a caller can give a call its key without touching torch's RNG, and
``block``: None, or ``(view, offset, global_shape, shard_offsets)`` when the
tensor is part of a larger logical tensor (``tinit.patch_torch_init`` routes
a slice of a parameter so): ``view`` is the tensor itself or a view of it
holding the same elements in the logical tensor's dim order, written with
its element 0 at stream index ``offset`` (a row-major range of the logical
tensor; ``global_shape`` and ``shard_offsets`` None) or as the block at
``shard_offsets`` (its start, or a ``tinit.sharding.ShardLayout``) of a
logical tensor of ``global_shape`` (``offset`` 0); the arguments' checks and
the fans still come from the tensor given.
"""

from __future__ import annotations

import functools
import math
import warnings

import torch
from torch.nn.init import (
    calculate_gain,
    constant,
    constant_,
    dirac,
    dirac_,
    eye,
    eye_,
    ones_,
    orthogonal,
    orthogonal_,
    sparse,
    sparse_,
    zeros_,
)
from torch.overrides import handle_torch_function, has_torch_function_variadic

from tinit._plan import Item, Plan, eager_under_compile
from tinit.params import DtypeError, as_real, trunc_normal_record, uniform_record

__all__ = [
    "KEYED",
    "ArgumentError",
    "DtypeError",
    "calculate_gain",
    "constant",
    "constant_",
    "dirac",
    "dirac_",
    "eye",
    "eye_",
    "kaiming_normal",
    "kaiming_normal_",
    "kaiming_uniform",
    "kaiming_uniform_",
    "normal",
    "normal_",
    "ones_",
    "orthogonal",
    "orthogonal_",
    "sparse",
    "sparse_",
    "trunc_normal_",
    "uniform",
    "uniform_",
    "xavier_normal",
    "xavier_normal_",
    "xavier_uniform",
    "xavier_uniform_",
    "zeros_",
]


class ArgumentError(ValueError, RuntimeError):
    """A bound, mean or std the fill cannot take (e.g. ``uniform_`` with a > b, ``normal_`` with std < 0).

    A ValueError like tinit's other refusals, and a RuntimeError like the
    error torch's ``Tensor.uniform_`` / ``Tensor.normal_`` raise for the same
    arguments, so code written against ``torch.nn.init`` still catches it.
    """


_FAN_MODES = ["fan_in", "fan_out"]
# DtypeError is tinit.params.DtypeError, which the plan's one dtype check raises (tinit._plan.Plan.build).


def _calculate_fan_in_and_fan_out(tensor: torch.Tensor) -> tuple[int, int]:
    """(fan_in, fan_out) of a weight laid out (out, in, *receptive field), as torch computes them.

    fan_in = size(1) * prod(size(2:)), fan_out = size(0) * prod(size(2:))
    (torch.nn.init._calculate_fan_in_and_fan_out; a conv kernel's spatial
    dims are its receptive field). A DTensor's sizes are its logical ones.

    Raises:
        ValueError: fewer than 2 dims (torch's message).
    """
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive_field = math.prod(tensor.shape[2:])
    return tensor.size(1) * receptive_field, tensor.size(0) * receptive_field


def _calculate_correct_fan(tensor: torch.Tensor, mode: str) -> int:
    mode = mode.lower()  # torch's check: any case, and an AttributeError for a non-string
    if mode not in _FAN_MODES:
        raise ValueError(f"Mode {mode} not supported, please use one of {_FAN_MODES}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _finite_in(value: float, dtype: torch.dtype, what: str, name: str) -> None:
    if not (math.isfinite(value) and abs(value) <= torch.finfo(dtype).max):
        raise ArgumentError(f"tinit.nn.init.{name}: {what} {value!r} is not a finite value of {dtype}")


def _uniform_record(low, high, name: str, labels: tuple[str, str], dtype: torch.dtype):
    """The transform record of U(low, high), or the float ``low`` when low == high (a constant fill);
    ``labels`` name the bounds in errors (uniform_'s are its arguments a and b)."""
    if not (type(low) is float and type(high) is float):
        low, high = as_real("a", low), as_real("b", high)
    _finite_in(low, dtype, labels[0], name)
    _finite_in(high, dtype, labels[1], name)
    if low > high:
        raise ArgumentError(f"tinit.nn.init.{name} needs a <= b, got a={low}, b={high}")
    fmax = torch.finfo(dtype).max
    if high - low > fmax:  # torch's uniform_ check, b - a in float64 against the dtype's largest value
        raise ArgumentError(
            f"tinit.nn.init.{name} needs {labels[1]} - {labels[0]} <= {fmax!r} (the largest {dtype} value, as "
            f"torch's uniform_), got {labels[0]}={low!r}, {labels[1]}={high!r}"
        )
    if low == high:
        return low
    try:
        return uniform_record(low, high, dtype)
    except ValueError as exc:  # e.g. no value of a bf16 tensor inside [a, b]
        raise ArgumentError(f"tinit.nn.init.{name}: {exc}") from None


def _normal_record(mean, std, name: str, dtype: torch.dtype):
    """The transform record of N(mean, std^2) on (-inf, inf), or the float ``mean`` when std == 0."""
    if not (type(mean) is float and type(std) is float):
        mean, std = as_real("mean", mean), as_real("std", std)
    if not std >= 0:  # NaN included, as torch refuses it
        raise ArgumentError(f"tinit.nn.init.{name} needs std >= 0, got std={std}")
    _finite_in(mean, dtype, "mean", name)
    _finite_in(std, torch.float64, "std", name)
    if std == 0:
        return mean
    try:
        return trunc_normal_record(mean, std, -math.inf, math.inf, dtype)
    except ValueError as exc:
        raise ArgumentError(f"tinit.nn.init.{name}: {exc}") from None


def _trunc_normal_record(mean, std, a, b, dtype: torch.dtype):
    """The transform record of N(mean, std^2) on [a, b] (|std|: the sign does not matter), or the float
    ``a`` when a == b."""
    if not (type(mean) is float and type(std) is float and type(a) is float and type(b) is float):
        mean, std, a, b = as_real("mean", mean), as_real("std", std), as_real("a", a), as_real("b", b)
    if math.isnan(a) or math.isnan(b):
        raise ArgumentError(f"tinit.nn.init.trunc_normal_: a bound is NaN, got a={a}, b={b}")
    if a > b:
        raise ArgumentError(f"tinit.nn.init.trunc_normal_ needs a <= b, got a={a}, b={b}")
    if a == b:
        _finite_in(a, dtype, "bound", "trunc_normal_")
        return a
    try:
        return trunc_normal_record(mean, abs(std), a, b, dtype)
    except ValueError as exc:
        raise ArgumentError(f"tinit.nn.init.trunc_normal_: {exc}") from None


def _one(tensor, what, generator, seed, stream, block=None) -> torch.Tensor:
    """Write ``what`` (a record hook of the dtype, ``tinit._plan.Item``) into ``tensor`` by a one-item plan.

    The key is ``seed``, or when None one draw from ``generator`` made only
    when something is written, a constant included (one key per writing
    call); every check precedes it. ``block`` (``KEYED``): (the view of
    ``tensor`` written, the stream offset of its element 0, the logical
    shape, its offsets or ``tinit.sharding.ShardLayout``) when ``tensor`` is
    part of a larger logical tensor; ``what`` still reads the fans from ``tensor``.
    """
    if block is None:
        item = Item(tensor, what, stream)
    else:
        target, offset, global_shape, shard_offsets = block
        item = Item(target, what, stream, offset, None, global_shape, shard_offsets)
    Plan.build((item,), seed=seed, generator=generator, where=None, draw_on_write=True).run()
    return tensor


_eager = eager_under_compile


@_eager
def _uniform(tensor, a=0.0, b=1.0, generator=None, *, seed=None, stream=0, block=None):
    return _one(
        tensor, functools.partial(_uniform_record, a, b, "uniform_", ("a", "b")), generator, seed, stream, block
    )


@_eager
def _normal(tensor, mean=0.0, std=1.0, generator=None, *, seed=None, stream=0, block=None):
    return _one(tensor, functools.partial(_normal_record, mean, std, "normal_"), generator, seed, stream, block)


def _warn_negative_std(std) -> None:
    """torch's ``trunc_normal_`` samples a negative std as |std| (its density is in std^2), where its
    ``normal_`` refuses one: so does this drop-in, with a UserWarning that the sign is dropped
    (tinit's own entry points refuse it)."""
    if type(std) is float or type(std) is int:
        negative = std < 0
    else:
        try:
            negative = as_real("std", std) < 0
        except (TypeError, ValueError):  # refused with its message by the fill's own check
            return
    if negative:
        warnings.warn(
            f"tinit.nn.init.trunc_normal_: std={std!r} is negative; sampling with |std| = {abs(float(std))!r} as "
            "torch.nn.init.trunc_normal_ does (torch's normal_ refuses a negative std; tinit.trunc_normal_at_ "
            "and fill_ too)",
            UserWarning,
            stacklevel=5,  # the caller of tinit.nn.init.trunc_normal_ (through _eager's wrapper)
        )


@_eager
def _trunc_normal(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None, *, seed=None, stream=0, block=None):
    if not (type(std) is float and std >= 0):  # the common float std costs no call (the hot path's frames)
        _warn_negative_std(std)
    return _one(tensor, functools.partial(_trunc_normal_record, mean, std, a, b), generator, seed, stream, block)


def _xavier_std(tensor, gain, fill: str) -> float | None:
    """gain * sqrt(2 / (fan_in + fan_out)), or None for a tensor of no elements (nothing to write)."""
    gain = as_real("gain", gain)
    if not math.isfinite(gain) or gain < 0:
        raise ArgumentError(f"tinit.nn.init.{fill}: gain must be finite and >= 0, got {gain}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    if tensor.numel() == 0:
        return None
    return gain * math.sqrt(2.0 / float(fan_in + fan_out))


def _xavier_record(tensor, gain, fill: str, dtype: torch.dtype):
    """Glorot's U(-sqrt(3) std, sqrt(3) std) or N(0, std^2) by ``fill``; 0.0 (nothing is written) for a
    tensor of no elements."""
    std = _xavier_std(tensor, gain, fill)
    if std is None:
        return 0.0
    if fill == "xavier_normal_":
        return _normal_record(0.0, std, fill, dtype)
    bound = math.sqrt(3.0) * std
    return _uniform_record(-bound, bound, fill, ("lower bound", "upper bound"), dtype)


@_eager
def _xavier_uniform(tensor, gain=1.0, generator=None, *, seed=None, stream=0, block=None):
    return _one(
        tensor, functools.partial(_xavier_record, tensor, gain, "xavier_uniform_"), generator, seed, stream, block
    )


@_eager
def _xavier_normal(tensor, gain=1.0, generator=None, *, seed=None, stream=0, block=None):
    return _one(
        tensor, functools.partial(_xavier_record, tensor, gain, "xavier_normal_"), generator, seed, stream, block
    )


def _kaiming_std(tensor, a, mode, nonlinearity, fill: str) -> float:
    """gain / sqrt(fan) with gain = calculate_gain(nonlinearity, a), fan = fan_in or fan_out."""
    fan = _calculate_correct_fan(tensor, mode)
    gain = calculate_gain(nonlinearity, a)  # torch's own checks of a and nonlinearity, and its errors
    if not math.isfinite(gain):
        raise ArgumentError(f"tinit.nn.init.{fill}: a must be finite, got {a}")
    return gain / math.sqrt(fan)


def _kaiming_record(tensor, a, mode, nonlinearity, fill: str, dtype: torch.dtype):
    """He's U(-sqrt(3) std, sqrt(3) std) or N(0, std^2) by ``fill``."""
    std = _kaiming_std(tensor, a, mode, nonlinearity, fill)
    if fill == "kaiming_normal_":
        return _normal_record(0.0, std, fill, dtype)
    bound = math.sqrt(3.0) * std
    return _uniform_record(-bound, bound, fill, ("lower bound", "upper bound"), dtype)


@_eager
def _kaiming_uniform(
    tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None, *, seed=None, stream=0, block=None
):
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return tensor
    what = functools.partial(_kaiming_record, tensor, a, mode, nonlinearity, "kaiming_uniform_")
    return _one(tensor, what, generator, seed, stream, block)


@_eager
def _kaiming_normal(
    tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None, *, seed=None, stream=0, block=None
):
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return tensor
    what = functools.partial(_kaiming_record, tensor, a, mode, nonlinearity, "kaiming_normal_")
    return _one(tensor, what, generator, seed, stream, block)


_STREAM_NOTE = """
    Stream: one Philox key drawn from ``generator`` (or torch's default CPU
    generator) when something is written, none for a meta, fake or 0-element
    tensor; element i (row-major, logical) takes stream index i of stream 0
    (``tinit.nn.init`` module docstring, docs/stream.md). Values differ from
    torch's (same distribution, another generator)."""


def uniform_(
    tensor: torch.Tensor, a: float = 0.0, b: float = 1.0, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Fill ``tensor`` with U(a, b), in place, as ``torch.nn.init.uniform_``.

    Value of stream word w: a + (b - a) u, u = (w + 1/2) 2^-32 (the
    transform's uniform mode, ``tinit.params.uniform_constants``), kept inside
    [a, b] after rounding to the dtype; a == b fills with a (one key drawn).

    Args:
        tensor: float32/float64/bfloat16/float16 tensor, Parameter or
            DTensor, any shape (views are written in place).
        a, b: bounds in tensor units, finite values of the dtype, a <= b.
        generator: the ``torch.Generator`` the key is drawn from, or None.

    Returns:
        ``tensor``.

    Raises:
        DtypeError: a dtype other than float32, float64, bfloat16, float16
            (a TypeError and a NotImplementedError, as torch's for integers).
        ArgumentError: a > b, a bound that is not a finite value of the
            dtype, or b - a above the dtype's largest value (a ValueError
            and a RuntimeError, as torch's; torch refuses the same bounds).
        TypeError: not a tensor, a sparse or nested tensor, a non-real
            bound, a ``generator`` that is not a ``torch.Generator``.
        tinit.params.InternalOverlapError: an expanded or otherwise
            self-overlapping view (a ValueError and a RuntimeError).
        tinit.params.InferenceTensorError: an inference tensor outside
            ``torch.inference_mode`` (the same).
        RuntimeError: no tinit backend can fill the tensor.
    All checks precede the draw and the write.
    """
    if has_torch_function_variadic(tensor):
        return handle_torch_function(uniform_, (tensor,), tensor=tensor, a=a, b=b, generator=generator)
    return _uniform(tensor, a, b, generator)


def normal_(
    tensor: torch.Tensor, mean: float = 0.0, std: float = 1.0, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Fill ``tensor`` with N(mean, std^2), in place, as ``torch.nn.init.normal_``.

    The truncated-normal transform on the infinite window (-inf, inf)
    (``tinit.params.transform_constants``, as the schemes' ``trunc=inf``):
    the inverse normal CDF of the stream word's uniform, so no value lies
    beyond about 6.4 std (the smallest uniform is 2^-33). std == 0 fills with
    mean (one key drawn), as torch does.

    Args:
        tensor: as for ``uniform_``.
        mean: finite, tensor units.
        std: >= 0, finite, tensor units.
        generator: as for ``uniform_``.

    Returns:
        ``tensor``.

    Raises:
        ArgumentError: std < 0 or NaN, an infinite std or mean, a mean that
            is not a finite value of the dtype.
        DtypeError, TypeError, RuntimeError: as ``uniform_``.
    """
    if has_torch_function_variadic(tensor):
        return handle_torch_function(normal_, (tensor,), tensor=tensor, mean=mean, std=std, generator=generator)
    return _normal(tensor, mean, std, generator)


def trunc_normal_(
    tensor: torch.Tensor,
    mean: float = 0.0,
    std: float = 1.0,
    a: float = -2.0,
    b: float = 2.0,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Fill ``tensor`` with N(mean, std^2) truncated to [a, b], in place, as ``torch.nn.init.trunc_normal_``.

    The one implementation behind both ``tinit.trunc_normal_`` and ``tinit.nn.init.trunc_normal_`` (the
    same function object): same signature, semantics and return value as torch's, one fused pass, no
    host sync, written under ``torch.no_grad()``.

    a and b are absolute bounds (tensor units, as torch's and timm's
    ``trunc_normal_``), not multiples of std; -inf/+inf are allowed. The
    values are exact inverse-CDF samples of the truncated normal, for any
    window: torch's warning about a mean far from [a, b] does not apply and
    is not raised. As in torch, the sign of std does not matter (the density
    depends on std^2; a negative std warns, UserWarning), and a == b fills
    with a (one key drawn).

    What is drawn from torch's RNG: exactly one int64 when something is
    written, via ``torch.empty((), dtype=torch.int64, device=d).random_(generator=generator)``
    (a uniform integer on [0, 2**63) from ``generator`` on its device d, or
    from torch's default CPU generator on the CPU when it is None, whatever
    the default device). It is the Philox key; the stream id is 0 and the
    offset 0, so the values are ``tinit.trunc_normal_at_(tensor, mean, |std|, a, b, seed=key)``'s.
    ``torch.manual_seed`` makes calls reproducible, the same seed gives the
    same values on every device, and consecutive calls give different
    tensors. Nothing is drawn for a tensor of no elements or on the meta
    device (it is returned unchanged, as by torch), nor when the arguments
    are refused. A DTensor is filled shard by shard as by
    ``trunc_normal_at_`` and counts its logical elements: a rank whose local
    shard is empty still draws, so the ranks' generators stay in step; every
    rank must seed its generator identically (``torch.manual_seed(s)`` on
    all ranks), as for any replicated init. For a fixed key use
    ``tinit.trunc_normal_at_`` or ``KEYED["trunc_normal_"]``.

    Args:
        tensor: as for ``uniform_``.
        mean, std: the parent normal, tensor units; std != 0.
        a, b: absolute bounds, a <= b.
        generator: as for ``uniform_``.

    Returns:
        ``tensor``.

    Raises:
        ArgumentError: a > b, a NaN bound, std == 0, a window holding no
            value of the dtype (``tinit.params.transform_constants``); a
            ValueError and a RuntimeError.
        DtypeError, TypeError, RuntimeError: as ``uniform_``.
        tinit.params.InternalOverlapError: an expanded or otherwise
            self-overlapping view.
    All checks precede the draw and the write.
    """
    return _trunc_normal(tensor, mean, std, a, b, generator)


def xavier_uniform_(tensor: torch.Tensor, gain: float = 1.0, generator: torch.Generator | None = None) -> torch.Tensor:
    """Glorot uniform, as ``torch.nn.init.xavier_uniform_``: U(-bound, bound).

    bound = sqrt(3) * gain * sqrt(2 / (fan_in + fan_out)) (Glorot & Bengio,
    AISTATS 2010, eq. 16; torch's formula), fans as torch's
    ``_calculate_fan_in_and_fan_out`` (dims 2: are the receptive field).
    A tensor of no elements is returned unchanged (torch divides by zero for
    a (0, 0) tensor); gain 0 fills zeros.

    Args:
        tensor: as for ``uniform_``, at least 2 dims.
        gain: scaling factor, >= 0 (``calculate_gain``).
        generator: as for ``uniform_``.

    Returns:
        ``tensor``.

    Raises:
        ValueError: fewer than 2 dims (torch's message).
        ArgumentError: a negative gain (torch raises a RuntimeError too).
        DtypeError, TypeError, RuntimeError: as ``uniform_``.
    """
    return _xavier_uniform(tensor, gain, generator)


def xavier_normal_(tensor: torch.Tensor, gain: float = 1.0, generator: torch.Generator | None = None) -> torch.Tensor:
    """Glorot normal, as ``torch.nn.init.xavier_normal_``: N(0, std^2), std = gain * sqrt(2 / (fan_in + fan_out)).

    Glorot & Bengio (2010); torch's formula and fans (see ``xavier_uniform_``);
    the normal is drawn as by ``normal_``.

    Args:
        tensor: as for ``uniform_``, at least 2 dims.
        gain: scaling factor, >= 0.
        generator: as for ``uniform_``.

    Returns:
        ``tensor``.

    Raises:
        ValueError: fewer than 2 dims (torch's message).
        ArgumentError: a negative gain (torch raises a RuntimeError too).
        DtypeError, TypeError, RuntimeError: as ``uniform_``.
    """
    return _xavier_normal(tensor, gain, generator)


def kaiming_uniform_(
    tensor: torch.Tensor,
    a: float = 0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """He uniform, as ``torch.nn.init.kaiming_uniform_``: U(-bound, bound), bound = sqrt(3) * gain / sqrt(fan).

    He et al., "Delving deep into rectifiers", ICCV 2015, eq. 10 (torch's
    formula): gain = ``calculate_gain(nonlinearity, a)``, fan = fan_in or
    fan_out by ``mode`` (any case). ``nn.Linear`` and ``nn.Conv*d`` call this
    with a = sqrt(5). A tensor with a 0 in its shape warns "Initializing
    zero-element tensors is a no-op" and is returned, as by torch.

    Args:
        tensor: as for ``uniform_``, at least 2 dims.
        a: negative slope of the rectifier (used by "leaky_relu"); None means 0.01.
        mode: "fan_in" (default) or "fan_out".
        nonlinearity: an ``nn.functional`` name ``calculate_gain`` knows.
        generator: as for ``uniform_``.

    Returns:
        ``tensor``.

    Raises:
        ValueError: fewer than 2 dims, an unknown mode or nonlinearity, a
            bad negative slope (torch's messages).
        AttributeError: a mode that is not a string (as torch).
        DtypeError, TypeError, RuntimeError: as ``uniform_``.
    """
    if has_torch_function_variadic(tensor):
        return handle_torch_function(
            kaiming_uniform_,
            (tensor,),
            tensor=tensor,
            a=a,
            mode=mode,
            nonlinearity=nonlinearity,
            generator=generator,
        )
    return _kaiming_uniform(tensor, a, mode, nonlinearity, generator)


def kaiming_normal_(
    tensor: torch.Tensor,
    a: float = 0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """He normal, as ``torch.nn.init.kaiming_normal_``: N(0, std^2), std = gain / sqrt(fan).

    He et al. (2015), eq. 10; gain and fan as in ``kaiming_uniform_``, the
    normal drawn as by ``normal_``. A tensor with a 0 in its shape warns and
    is returned, as by torch.

    Args:
        tensor: as for ``uniform_``, at least 2 dims.
        a, mode, nonlinearity: as for ``kaiming_uniform_``.
        generator: as for ``uniform_``.

    Returns:
        ``tensor``.

    Raises:
        ValueError, AttributeError: as ``kaiming_uniform_``.
        DtypeError, TypeError, RuntimeError: as ``uniform_``.
    """
    return _kaiming_normal(tensor, a, mode, nonlinearity, generator)


for _fn in (uniform_, normal_, trunc_normal_, xavier_uniform_, xavier_normal_, kaiming_uniform_, kaiming_normal_):
    if _fn.__doc__:  # None under python -OO
        _fn.__doc__ = _fn.__doc__.replace("\n    Args:", _STREAM_NOTE + "\n\n    Args:", 1)
del _fn

# The random initialisers by torch.nn.init name, each with keyword-only ``seed`` and ``stream``:
# ``seed`` a Philox key in [0, 2**64) (None: one draw from the generator, as the public function),
# ``stream`` a stream id in [0, 2**64), ``block`` None or (view written, offset, global shape, offsets or
# layout) (module docstring). They skip torch's __torch_function__ dispatch.
KEYED = {
    "uniform_": _uniform,
    "normal_": _normal,
    "trunc_normal_": _trunc_normal,
    "xavier_uniform_": _xavier_uniform,
    "xavier_normal_": _xavier_normal,
    "kaiming_uniform_": _kaiming_uniform,
    "kaiming_normal_": _kaiming_normal,
}


def _deprecated(fn):
    """torch.nn.init's deprecated alias of ``fn`` (its name without the trailing underscore): a FutureWarning,
    then ``fn``."""
    old, new = fn.__name__[:-1], fn.__name__

    @functools.wraps(fn)
    def alias(*args, **kwargs):
        warnings.warn(f"`nn.init.{old}` is now deprecated in favor of `nn.init.{new}`.", FutureWarning, stacklevel=2)
        return fn(*args, **kwargs)

    alias.__name__ = alias.__qualname__ = old
    alias.__doc__ = f"Deprecated alias of ``{new}`` (as in torch.nn.init)."
    return alias


uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
