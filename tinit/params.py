"""Argument checks and the per-tensor constants of the truncated-normal transform.

This is the single host-side source of the constants every backend uses, so
the CPU, CUDA and Triton kernels see the same fp32 (or fp64) bits. The record
is ``TruncNormalParams`` (the same name and field order as the C++ struct
``tinit::TruncNormalParams``, beside which the algorithm is described; the
specification is ``docs/stream.md``). Bounds ``a`` and ``b`` are absolute (in
tensor units, as in ``torch.nn.init.trunc_normal_``), not in units of std.

The transcendental values (Phi, erf, the Mills ratio and the tail's interpolant) come from
``tinit._constants``, which uses no libm: correctly rounded functions, so the record is
the same on every host and CPython ("Host constants" in ``docs/stream.md``).
"""

from __future__ import annotations

import enum
import functools
import math
import numbers
import sys
from typing import NamedTuple

import torch

from tinit import _constants

__all__ = [
    "PARAM_COUNT",
    "STREAM_VERSION",
    "SUPPORTED_DTYPES",
    "DtypeError",
    "InferenceTensorError",
    "InternalOverlapError",
    "Mode",
    "TruncNormalParams",
    "transform_constants",
    "uniform_constants",
]

SUPPORTED_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
_SUPPORTED = frozenset(SUPPORTED_DTYPES)
_DTYPE_NAMES = "float32, float64, bfloat16 or float16"

# The version of the values: stream index -> value. Version 1 is release
# v0.1.0, version 2 v0.2.0; version 3 (this one: fp64 values changed, fp32,
# bf16 and fp16 as in version 2) is documented in docs/stream.md.
STREAM_VERSION = 3
# Windows whose upper edge (after mirroring) lies this many std below the
# mean take the tail mode (the excursion from the nearer bound): from here on
# the two-sided modes' mean + std z would lose digits next to a bound near 0,
# and the continued fraction of ``tinit::mills_ratio`` (fp64) has converged.
_TAIL_EDGE = {torch.float32: 8.0, torch.float64: 8.0}
# No deviate of the transform exceeds this (min uniform 2^-33 -> 6.4 sigma).
_REACH_SIGMAS = 8.3
_LAST_EXACT_LOWER_WORD = 0xFFFFFF7F
# std outside [2^-100, 2^100] is carried scaled by a power of two (fp32
# cannot hold 1e39, nor 7e-46 exactly); so are mean and the tail's bound.
_SCALE_RANGE = 2.0**100
# The precise two-sided mode is used where |z| std > this many max(|x|, std).
_CANCELLATION = 2.0
# A window is linear (uniform mode) when its inverse CDF is within this
# fraction of an ulp of the linear-density one (see _linear_window).
_LINEAR_ULP = 1.0 / 64.0


class Mode(enum.IntEnum):
    """``tinit::TransformMode``: how a window is sampled."""

    UNIFORM = 0
    TWO_SIDED = 1
    TWO_SIDED_PRECISE = 2
    TAIL = 3


class TruncNormalParams(NamedTuple):
    """The per-tensor constants of the transform, in the order of the C++ record.

    Every field is an fp64 value; the kernels read it as the compute type
    (fp32 for fp32/bf16/fp16 tensors, fp64 for fp64). The packed form passed
    to the ops is this tuple itself. Field meanings: the C++ ``tinit::TruncNormalParams``.
    """

    mode: float
    sign: float
    split: float
    a_cdf: float
    b_sf: float
    a_half: float
    b_half: float
    step: float
    mean: float
    sd_hi: float
    sd_lo: float
    scale: float
    lo: float
    hi: float
    edge: float
    width: float
    slope: float
    b0: float
    ratio: float
    l1: float
    l2: float
    l3: float
    l4: float
    l5: float


PARAM_COUNT = len(TruncNormalParams._fields)  # tinit::kParamCount
_ZERO = TruncNormalParams(*([0.0] * PARAM_COUNT))


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """fp64 for fp64 tensors, fp32 for every other supported dtype."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def as_real(name: str, value) -> float:
    """``value`` as a Python float: real numbers (numpy's and 1-element real tensors included).

    Args:
        name: the argument's name, for the messages.
        value: the value to check.

    Returns:
        ``float(value)``.

    Raises:
        TypeError: a bool, a complex, a string, a tensor of more than one
            element (or a complex or meta one), anything else not real.
        ValueError: an int beyond float64's range.
    """
    if type(value) is float:  # the common case, without the ABC checks below
        return value
    if isinstance(value, torch.Tensor):
        if value.numel() != 1 or value.is_complex() or value.is_meta:
            raise TypeError(
                f"{name} must be a real scalar, got a tensor of shape {tuple(value.shape)} on {value.device}"
            )
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    try:
        return float(value)
    except OverflowError:  # an int beyond fp64's range
        raise ValueError(
            f"{name} must be a finite real number, got an int of {int(value).bit_length()} bits, beyond float64's range"
        ) from None


class InternalOverlapError(ValueError, RuntimeError):
    """A tensor to be written has elements that share memory (an expanded view, a partially
    overlapping ``as_strided`` view): the result would depend on the write order.

    A ValueError like tinit's other refusals, and a RuntimeError like the
    error torch's in-place ops raise for the same tensor, so either ``except``
    catches it.
    """


class InferenceTensorError(ValueError, RuntimeError):
    """A tensor made under ``torch.inference_mode`` is to be written outside it, which torch
    refuses (with a RuntimeError, after the data is written, for a kernel's in-place write):
    refused here before anything is written or drawn. A ValueError and a RuntimeError."""


class UninitializedError(ValueError, RuntimeError):
    """An uninitialized parameter or buffer of a lazy module (``nn.LazyLinear`` before its first forward).

    A ValueError like tinit's other refusals, and a RuntimeError like the
    error torch raises for reading its shape, so either ``except`` catches it.
    """

    @classmethod
    def of(cls, name: str) -> UninitializedError:
        """The error for the tensor ``name`` (e.g. "tensor", "parameter 0.weight"), with torch's advice."""
        return cls(
            f"{name} is an uninitialized parameter or buffer (torch.nn.parameter.UninitializedParameter, of a "
            "lazy module such as nn.LazyLinear): it has no shape yet. When using LazyModules, call `forward` "
            "with a dummy batch to initialize the parameters, then initialise them"
        )


def is_uninitialized(tensor) -> bool:
    """Whether ``tensor`` is a lazy module's uninitialized parameter or buffer (no shape, no storage)."""
    return isinstance(tensor, torch.nn.parameter.UninitializedTensorMixin)


class DtypeError(TypeError, NotImplementedError):
    """A tensor whose dtype tinit does not fill (integers, bool, complex, float8).

    A TypeError, and a NotImplementedError (a RuntimeError) like the error
    torch's fills raise for integer and bool tensors. torch also fills
    complex tensors; tinit does not. ``DtypeError.of`` holds the one message.
    """

    @classmethod
    def of(cls, dtype, name: str = "tensor") -> DtypeError:
        """The refusal of ``dtype`` for the tensor called ``name`` in the message."""
        return cls(f"{name}: tinit fills floating tensors of dtype {_DTYPE_NAMES}; got {dtype}")


# The exact overlap check of an irregular layout lists every element's offset;
# beyond this many elements such a layout is refused instead.
_EXACT_OVERLAP_MAX_NUMEL = 1 << 24


def _has_internal_overlap(tensor: torch.Tensor) -> bool:
    """Whether two elements of ``tensor`` address the same memory.

    Every view that slicing, narrowing, transposing and permuting a dense
    tensor gives is decided from its strides alone (each dim's stride, in
    increasing order, steps past everything the smaller ones reach);
    layouts that fail that test (``as_strided``) are checked element by
    element. Exact, unlike ``torch._debug_has_internal_overlap``, which
    answers "too hard" for partial overlaps.

    Raises:
        InternalOverlapError: an irregular layout of more than 2**24
            elements, which is not checked.
    """
    dims = sorted((stride, size) for size, stride in zip(tensor.shape, tensor.stride(), strict=True) if size > 1)
    reach = 0
    for stride, size in dims:
        if stride <= reach:
            break
        reach += (size - 1) * stride
    else:
        return False
    if dims[0][0] == 0:  # an expanded dim
        return True
    numel = tensor.numel()
    if numel > _EXACT_OVERLAP_MAX_NUMEL:
        raise InternalOverlapError(
            f"cannot prove that the {numel} elements of a tensor of shape "
            f"{tuple(tensor.shape)} and strides {tuple(tensor.stride())} do not share "
            "memory; write into a contiguous tensor or a plain view"
        )
    offsets = torch.zeros((), dtype=torch.int64, device="cpu")
    for stride, size in dims:
        offsets = (offsets.unsqueeze(-1) + torch.arange(size, dtype=torch.int64, device="cpu") * stride).reshape(-1)
    return int(offsets.unique().numel()) != numel


# torch's fake tensors (FakeTensorMode, the tracer of memory estimates and torch.compile): looked up, never
# imported (a fake tensor exists only once it is)
_FAKE_TENSOR_MODULE = "torch._subclasses.fake_tensor"


def is_fake(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` is one of torch's fake tensors (no data: a ``FakeTensor``, or a functional or
    other wrapper of one), on which torch's fills write nothing and draw nothing."""
    module = sys.modules.get(_FAKE_TENSOR_MODULE)
    return module is not None and bool(module.is_fake(tensor))


def check_tensor(tensor, name: str = "tensor") -> None:
    """Raise unless tinit can write ``tensor`` in place: a dense strided tensor of a supported dtype
    whose elements do not share memory.

    Args:
        tensor: the (local) tensor to be written.
        name: how the messages name it, e.g. "tensor" or "parameter h.0.mlp.weight".

    Raises:
        TypeError: not a tensor; a sparse, nested or other non-strided
            tensor; a negative-bit view (``torch._neg_view``).
        DtypeError: an unsupported dtype (a TypeError): the one dtype check
            of every write (``tinit._plan.Plan.build`` calls this).
        InternalOverlapError: elements that share memory (an expanded view);
            not checked on the meta device, where nothing is written.
        InferenceTensorError: an inference tensor outside ``torch.inference_mode``.
        UninitializedError: a lazy module's uninitialized parameter (a ValueError and a RuntimeError).
    """
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    if is_uninitialized(tensor):
        raise UninitializedError.of(name)
    if tensor.is_nested or tensor.layout != torch.strided:
        kind = "a nested tensor" if tensor.is_nested else f"layout {tensor.layout}"
        raise TypeError(f"{name}: tinit writes dense strided tensors, got {kind}")
    if tensor.dtype not in _SUPPORTED:
        raise DtypeError.of(tensor.dtype, name)
    if tensor.is_neg():
        raise TypeError(f"{name} is a negative-bit view (torch._neg_view); write into the tensor it views")
    if tensor.is_inference() and not torch.is_inference_mode_enabled():
        raise InferenceTensorError(
            f"{name} is an inference tensor (made under torch.inference_mode); it can be written only "
            "inside torch.inference_mode()"
        )
    if not tensor.is_meta and not tensor.is_contiguous() and _has_internal_overlap(tensor):
        raise InternalOverlapError(
            f"{name} (shape {tuple(tensor.shape)}, strides {tuple(tensor.stride())}) has elements that share "
            "memory (e.g. an expanded view); write into the tensor it was made from, or clone() it"
        )


def _step_up(value: float, dtype: torch.dtype) -> float:
    """The next value of ``dtype`` above ``value`` (``value`` representable in dtype)."""
    int_dtype = {16: torch.int16, 32: torch.int32, 64: torch.int64}[torch.finfo(dtype).bits]
    if value == 0.0:  # +0 and -0 step to the smallest positive subnormal
        bits = torch.ones(1, dtype=int_dtype, device="cpu")
    else:  # sign-magnitude: away from zero above it, towards zero below it
        bits = torch.tensor([value], dtype=dtype, device="cpu").view(int_dtype)
        bits += 1 if value > 0 else -1
    return float(bits.view(dtype)[0])


def _representable_inside(a: float, b: float, dtype: torch.dtype) -> tuple[float, float]:
    """[lo, hi]: the smallest and largest values of ``dtype`` inside [a, b]."""
    fmax = torch.finfo(dtype).max

    def ceil(v: float) -> float:
        if v == -math.inf or v < -fmax:
            return -fmax
        r = float(torch.tensor(v, dtype=torch.float64, device="cpu").to(dtype))
        return _step_up(r, dtype) if r < v else r

    lo = ceil(a)
    hi = -ceil(-b)
    return lo, hi


def transform_constants(mean, std, a, b, dtype: torch.dtype) -> TruncNormalParams:
    """Check the arguments of a truncated normal and return its transform constants.

    Args:
        mean, std: the parent normal N(mean, std^2) in tensor units (real numbers).
        a, b: absolute truncation bounds, a < b; a may be -inf and b +inf.
        dtype: the dtype of the tensor to fill (one of SUPPORTED_DTYPES).

    Returns:
        The ``TruncNormalParams`` record (fp64 values; see ``tinit::TruncNormalParams`` and
        ``tinit::TransformMode`` for the meaning of each field and the four modes).

    Raises:
        TypeError: a non-real argument; ``DtypeError`` (a TypeError) for an unsupported dtype.
        ValueError: NaN or infinite mean/std, std <= 0, NaN bounds, a >= b,
            a window with no value representable in ``dtype``, one that the
            dtype cannot hold without overflow, or one so far in a tail
            (beyond 1e6 std) that the fp32 deviate would lose all precision.
    """
    if not (type(mean) is float and type(std) is float and type(a) is float and type(b) is float):
        mean, std, a, b = as_real("mean", mean), as_real("std", std), as_real("a", a), as_real("b", b)
    if dtype not in _SUPPORTED:
        raise DtypeError(f"unsupported dtype {dtype}; expected one of {SUPPORTED_DTYPES}")
    return trunc_normal_record(mean, std, a, b, dtype)


def uniform_constants(low, high, dtype: torch.dtype) -> TruncNormalParams:
    """The transform constants of U(low, high) (the uniform mode, flat density).

    Args:
        low, high: finite bounds in tensor units, low < high.
        dtype: the dtype of the tensor to fill (one of SUPPORTED_DTYPES).

    Returns:
        A ``TruncNormalParams`` record of mode ``Mode.UNIFORM``: the value of
        word w is low + (high - low) u(w), u = (w + 1/2) 2^-32 in the compute
        type, clamped to the dtype's values inside [low, high].

    Raises:
        TypeError: a non-real argument; ``DtypeError`` (a TypeError) for an unsupported dtype.
        ValueError: NaN or infinite bounds, low >= high, bounds beyond the
            largest finite value of ``dtype`` (the values would overflow), or
            no value of ``dtype`` inside [low, high].
    """
    low, high = as_real("low", low), as_real("high", high)
    if dtype not in _SUPPORTED:
        raise DtypeError(f"unsupported dtype {dtype}; expected one of {SUPPORTED_DTYPES}")
    return uniform_record(low, high, dtype)


# The smallest subnormal fp64: a product with it is 0 only while this thread flushes subnormals.
_SUBNORMAL = 5e-324


def _with_gradual_underflow(fn):
    """``fn`` run with FTZ/DAZ off: ``torch.set_flush_denormal(True)`` sets this thread's MXCSR/FPCR,
    under which CPython's float compares and products treat subnormal stds, bounds and constants
    as 0 (and a record computed so would move values). The caller's setting, read with one
    float product, is restored after; the cache (``fn``'s lru_cache) holds only correct records."""

    @functools.wraps(fn)
    def call(*args):
        if _SUBNORMAL * 1.0 != 0.0:
            return fn(*args)
        torch.set_flush_denormal(False)
        try:
            return fn(*args)
        finally:
            torch.set_flush_denormal(True)

    call.cache_info, call.cache_clear = fn.cache_info, fn.cache_clear
    return call


@_with_gradual_underflow
@functools.lru_cache(maxsize=4096)
def uniform_record(low: float, high: float, dtype: torch.dtype) -> TruncNormalParams:
    """``uniform_constants`` of arguments already checked (floats, a dtype of ``SUPPORTED_DTYPES``), cached.

    The engine (``tinit._plan.Plan.build``) checks the dtype once per write and calls this directly.

    Raises:
        ValueError: as ``uniform_constants``.
    """
    if not (math.isfinite(low) and math.isfinite(high)):
        raise ValueError(f"uniform bounds must be finite, got low={low}, high={high}")
    if not low < high:
        raise ValueError(f"need low < high, got low={low}, high={high}")
    fmax = torch.finfo(dtype).max
    if max(abs(low), abs(high)) > fmax:
        raise ValueError(f"values of U({low}, {high}) overflow {dtype} (max {fmax:g})")
    return _linear_params(low, high, 0.0, dtype)


def _linear_params(a: float, b: float, slope: float, dtype: torch.dtype) -> TruncNormalParams:
    """The uniform-mode record of [a, b] with the given linear-density term."""
    lo, hi = _representable_inside(a, b, dtype)
    if lo > hi:
        raise ValueError(f"no {dtype} value lies inside [{a}, {b}]")
    width, scale = b - a, 1.0
    if width > torch.finfo(_compute_dtype(dtype)).max:  # U(-fmax, fmax): halve everything
        # b / 2 - a / 2, not (b - a) / 2: b - a is inf in float64 for an fp64 window that wide
        width, scale = b / 2.0 - a / 2.0, 2.0
    return _canonical(
        _ZERO._replace(
            mode=float(Mode.UNIFORM),
            sign=1.0,
            scale=scale,
            lo=lo,
            hi=hi,
            edge=a / scale,
            width=width,
            slope=slope,
        )
    )


def _window_checked(mean: float, std: float, a: float, b: float, dtype: torch.dtype) -> tuple[float, float]:
    """[lo, hi], the values of ``dtype`` inside [a, b], after checking that N(mean, std^2) on [a, b] can
    be sampled into ``dtype``; raises ValueError as ``transform_constants``."""
    if not (math.isfinite(mean) and math.isfinite(std)):
        raise ValueError(f"mean and std must be finite, got mean={mean}, std={std}")
    if std <= 0.0:
        raise ValueError(f"std must be > 0, got {std}")
    if math.isnan(a) or math.isnan(b):
        raise ValueError(f"bounds must not be NaN, got a={a}, b={b}")
    if not a < b:
        raise ValueError(f"need a < b (absolute bounds), got a={a}, b={b}")
    fmax = torch.finfo(dtype).max
    reach_lo = max(a, min(b, mean) - _REACH_SIGMAS * std)
    reach_hi = min(b, max(a, mean) + _REACH_SIGMAS * std)
    if not (-fmax <= reach_lo <= fmax and -fmax <= reach_hi <= fmax):
        raise ValueError(f"values of N({mean}, {std}^2) on [{a}, {b}] overflow {dtype} (max {fmax:g})")
    lo, hi = _representable_inside(a, b, dtype)
    if lo > hi:
        raise ValueError(f"no {dtype} value lies inside [{a}, {b}]")
    return lo, hi


# A model's thousands of tensors share a handful of (std, bounds): computing
# the constants once each keeps per-tensor Python cost small, and a cache hit
# is a C call (no Python frame on the path of ``tinit.trunc_normal_``).
@_with_gradual_underflow
@functools.lru_cache(maxsize=4096)
def trunc_normal_record(mean: float, std: float, a: float, b: float, dtype: torch.dtype) -> TruncNormalParams:
    """``transform_constants`` of arguments already checked (floats, a dtype of ``SUPPORTED_DTYPES``), cached.

    The engine (``tinit._plan.Plan.build``) checks the dtype once per write and calls this directly.

    Raises:
        ValueError: as ``transform_constants``.
    """
    lo, hi = _window_checked(mean, std, a, b, dtype)
    slope = _linear_window(mean, std, a, b, lo, hi, _compute_dtype(dtype))
    if slope is not None:
        return _linear_params(a, b, slope, dtype)
    alpha = (a - mean) / std
    beta = (b - mean) / std
    if min(abs(alpha), abs(beta)) > 1e6 and alpha * beta > 0:
        raise ValueError(f"window [{a}, {b}] lies more than 1e6 std from mean={mean}; refusing to sample it")

    sign = 1.0
    if alpha > -beta:  # mirror: make the lower tail the heavy side
        alpha, beta, sign = -beta, -alpha, -1.0
    cdt = _compute_dtype(dtype)
    if beta <= -_TAIL_EDGE[cdt]:
        return _tail_params(mean, std, a, b, alpha, beta, sign, lo, hi, cdt)
    # Phi(alpha'), Q(beta'), the mass between (Simpson's rule when narrow) and
    # Phi(alpha') - 1/2, 1/2 - Phi(beta') via erf (exact near the centre).
    a_cdf, b_sf, mass, a_half, b_half = _constants.two_sided(alpha, beta)
    z_lo = max(alpha, -_REACH_SIGMAS)
    z_hi = min(beta, _REACH_SIGMAS)
    scale = _scale_for(std, (mean,), cdt)
    precise = scale != 1.0 or _cancels(mean / std, sign * z_lo, sign * z_hi)
    sd_hi, sd_lo = _split(sign * std / scale, cdt)
    # s = s0 + step w (``tinit::two_sided_s``): word w's uniform is (w + 1/2) 2^-32.
    step = mass * 2.0**-32
    return _canonical(
        _ZERO._replace(
            mode=float(Mode.TWO_SIDED_PRECISE if precise else Mode.TWO_SIDED),
            sign=sign,
            split=float(_lower_side_split(a_cdf, b_sf, mass)),
            a_cdf=a_cdf + 0.5 * step,
            b_sf=b_sf + 0.5 * step,
            a_half=a_half + 0.5 * step,
            b_half=b_half + 0.5 * step,
            step=step,
            mean=mean / scale,
            sd_hi=sd_hi,
            sd_lo=sd_lo,
            scale=scale,
            lo=lo,
            hi=hi,
        )
    )


def _canonical(p: TruncNormalParams) -> TruncNormalParams:
    """Every -0.0 field as +0.0 (``tinit::clamp_to`` relies on it)."""
    return TruncNormalParams(*(v + 0.0 for v in p))


def _split(value: float, cdt: torch.dtype) -> tuple[float, float]:
    """value as hi + lo in the compute type (lo = 0 for fp64)."""
    if cdt == torch.float64:
        return value, 0.0
    hi = _to_f32(value)
    return hi, _to_f32(value - hi)


def _to_f32(value: float) -> float:
    return float(torch.tensor(value, dtype=torch.float64, device="cpu").to(torch.float32))


def _scale_for(std: float, anchors: tuple[float, ...], cdt: torch.dtype) -> float:
    """1, or the power of two near std when std lies outside [2^-100, 2^100].

    The power stays inside fp32's range, [2^-149, 2^127] (std 1e39 is carried
    as 6 x 2^127, std 1e-46 as 0.07 x 2^-149). Not when an anchor (mean,
    bound) divided by it would leave [2^-100, 2^100]: then the spread is far
    below the anchor's ulp and plain arithmetic is already within an ulp.
    """
    if _SCALE_RANGE**-1 <= std <= _SCALE_RANGE:
        return 1.0
    scale = math.ldexp(1.0, min(127, max(-149, _constants.floor_log2(std))))
    if any(abs(v) / scale > _SCALE_RANGE for v in anchors):
        return 1.0
    return scale


def _cancels(mu: float, z_lo: float, z_hi: float) -> bool:
    """Whether |z| > _CANCELLATION max(|mu + z|, 1) somewhere on [z_lo, z_hi] (any order)."""
    lo, hi = min(z_lo, z_hi), max(z_lo, z_hi)
    points = [lo, hi] + [z for z in (-mu - 1.0, -mu + 1.0, -mu) if lo < z < hi]
    return any(abs(z) > _CANCELLATION * max(abs(mu + z), 1.0) for z in points)


def _linear_window(mean: float, std: float, a: float, b: float, lo: float, hi: float, cdt: torch.dtype) -> float | None:
    """The uniform mode's slope if [a, b] is linear against N(mean, std^2), else None.

    With t in [0, 1] across the window, the log density is
    -(zm + D (t - 1/2))^2 / 2, zm the midpoint and D the width in std: the
    linear term lam = -zm D and the quadratic kappa = D^2. The first-order
    inverse u - (lam/2)(u^2 - u) is off by about (lam^2 + kappa) / 4 of the
    width; it is used when that is below _LINEAR_ULP of the smallest ulp in
    [lo, hi] (or of std's, whose ulp bounds the error, where the window holds
    0) in the compute type ``cdt``, and below 2^-14 of the width.
    """
    if not (math.isfinite(a) and math.isfinite(b)):
        return None
    width = b - a
    d = width / std
    if d > 1e-2:
        return None
    zm = ((0.5 * a + 0.5 * b) - mean) / std
    lam = -zm * d
    err = 0.25 * (lam * lam + d * d)
    nearest = 0.0 if lo <= 0.0 <= hi else min(abs(lo), abs(hi))
    ulp = math.ulp(max(nearest, std)) * (1.0 if cdt == torch.float64 else 2.0**29)
    if err > 2.0**-14 or err * width > _LINEAR_ULP * ulp:
        return None
    return -0.5 * lam


def _tail_params(mean, std, a, b, alpha, beta, sign, lo, hi, cdt) -> TruncNormalParams:
    """The tail-mode record (``tinit::tail_value``) of the mirrored window [alpha, beta]."""
    b0 = -beta
    edge = b if sign > 0 else a
    # r = Q(a0) / Q(b0) = exp(-(a0 - b0)(a0 + b0) / 2) R(a0) / R(b0): the width a0 - b0
    # from the tensor-unit window, so a narrow window far out keeps its digits
    # (a difference of two log Phi of -5e5 would not).
    if alpha == -math.inf:
        ratio = 0.0
    else:
        a0, width = -alpha, (b - a) / std
        ratio = _constants.tail_ratio(a0, b0, width)
    scale = _scale_for(std, (edge,), cdt)
    sd_hi, sd_lo = _split(sign * std / scale, cdt)
    coefs = _constants.tail_poly(b0, -alpha) if cdt == torch.float32 else (0.0,) * 5
    return _canonical(
        _ZERO._replace(
            mode=float(Mode.TAIL),
            sign=sign,
            sd_hi=sd_hi,
            sd_lo=sd_lo,
            scale=scale,
            lo=lo,
            hi=hi,
            edge=edge / scale,
            b0=b0,
            ratio=ratio,
            **dict(zip(("l1", "l2", "l3", "l4", "l5"), coefs, strict=True)),
        )
    )


def valid_params(p: TruncNormalParams) -> bool:
    """``tinit::valid_params``: what the kernels need for memory safety.

    A known mode and, in the two-sided modes, s = s0 + step w inside [0, 1.75]
    for every word (so ndtri_segment's row is in the table); the upper side's
    s0 counts only when a word can take it (split < 2^32 - 1). NaN fails.
    Every op checks it (the C++ ops in C++, the Triton launcher here) before
    writing.
    """
    if p.mode not in tuple(float(m) for m in Mode):
        return False
    if p.mode not in (Mode.TWO_SIDED, Mode.TWO_SIDED_PRECISE):
        return True
    upper_ok = p.split == 2**32 - 1 or 0.0 <= p.b_sf <= 0.75
    return upper_ok and 0.0 <= p.a_cdf <= 0.75 and 0.0 <= p.step <= 2.0**-32


def _lower_side_split(a_cdf: float, b_sf: float, mass: float) -> int:
    """Largest word w whose p = a_cdf + u(w) mass is <= q = b_sf + (1 - u(w)) mass.

    With u(w) = (w + 1/2) / 2^32, p <= q iff u <= (b_sf - a_cdf + mass) / (2 mass),
    which is >= 1/2 after mirroring (a_cdf <= b_sf). Clipped to [2^31 - 1, 2^32 - 1].
    """
    u_star = (b_sf - a_cdf + mass) / (2.0 * mass) if mass > 0.0 else math.inf
    split = 2**32 - 1 if u_star >= 1.0 else max(2**31 - 1, math.floor(u_star * 2.0**32 - 0.5))
    if b_sf <= 0.5:
        # The fp32 uniform of words >= 0xFFFFFF80 rounds to 1.0; the upper side
        # (1 - u from ~word) keeps them off the window's edge. It is usable
        # whenever q stays <= 1/2 + 2^-25, i.e. when b_sf <= 1/2.
        split = min(split, _LAST_EXACT_LOWER_WORD)
    return split
