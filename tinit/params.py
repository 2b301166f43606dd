"""Argument checks and the per-tensor constants of the truncated-normal transform.

This is the single host-side source of the constants every backend uses, so
the CPU, CUDA and Triton kernels see the same fp32 (or fp64) bits. The layout
of the packed tuple is ``TruncNormalParams`` in ``csrc/include/tinit/transform.h``;
the algorithm is described there. Bounds ``a`` and ``b`` are absolute (in
tensor units, as in ``torch.nn.init.trunc_normal_``), not in units of std.
"""

from __future__ import annotations

import functools
import math
import numbers

import torch

SUPPORTED_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)

# Windows whose upper edge (after mirroring) is this many std below the mean
# are sampled in log space (tail mode): past it Phi underflows or the window's
# mass has no digits left in the compute type. For fp32 the edge also keeps
# every probability the two-sided mode inverts above 1e-35, so the float log
# of transform.h never sees a subnormal.
_TAIL_EDGE = {torch.float32: -10.4, torch.float64: -37.0}
# No deviate of the transform exceeds this (min uniform 2^-33 -> 6.4 sigma).
_REACH_SIGMAS = 8.3
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
# AS 241 switches to its far-tail branch below this probability (r > 5).
_FAR_TAIL_S = 2e-11
_LAST_EXACT_LOWER_WORD = 0xFFFFFF7F
MODE_TWO_SIDED, MODE_TAIL, MODE_TWO_SIDED_FAR, MODE_CENTRAL = 0, 1, 2, 3  # TransformMode, transform.h
# ndtri_central covers s(1 - s) >= e^-6.25 / 4 (|z| <= ~3.3); float compute only
# (fp32 tensors finish it in fp64, transform.h central_finish_f64).
_CENTRAL_S = 0.5 * (1.0 - math.sqrt(-math.expm1(-6.25)))


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """fp64 for fp64 tensors, fp32 for every other supported dtype."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def ndtr(x: float) -> float:
    """Standard normal CDF Phi(x) in fp64 (via erfc, accurate in the lower tail)."""
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def _pdf(x: float) -> float:
    return math.exp(-0.5 * x * x - _HALF_LOG_2PI)


def _mills_series(y: float) -> float:
    """y Q(y) / phi(y) for large y (Abramowitz & Stegun 26.2.12)."""
    t = 1.0 / (y * y)
    m = 10395.0
    for c in (-945.0, 105.0, -15.0, 3.0, -1.0, 1.0):
        m = m * t + c
    return m


def log_ndtr(x: float) -> float:
    """log Phi(x) in fp64 for any x, including far below the underflow of Phi."""
    if x == -math.inf:
        return -math.inf
    if x > -30.0:
        return math.log(ndtr(x)) if x < 5.0 else math.log1p(-ndtr(-x))
    y = -x
    return -0.5 * y * y - math.log(y) - _HALF_LOG_2PI + math.log(_mills_series(y))


def _real(name: str, value) -> float:
    if type(value) is float:  # the common case, without the ABC checks below
        return value
    if isinstance(value, torch.Tensor):
        if value.numel() != 1 or value.is_complex():
            raise TypeError(f"{name} must be a real scalar, got a tensor of shape {tuple(value.shape)}")
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    return float(value)


def check_dtype(tensor: torch.Tensor) -> None:
    """Raise TypeError unless ``tensor`` has a dtype tinit can fill."""
    if tensor.dtype not in SUPPORTED_DTYPES:
        raise TypeError(
            f"tinit fills floating tensors of dtype float32, float64, bfloat16 or float16; "
            f"got {tensor.dtype}"
        )


def _step_up(value: float, dtype: torch.dtype) -> float:
    """The next value of ``dtype`` above ``value`` (``value`` representable in dtype)."""
    int_dtype = {16: torch.int16, 32: torch.int32, 64: torch.int64}[torch.finfo(dtype).bits]
    if value == 0.0:  # +0 and -0 step to the smallest positive subnormal
        bits = torch.ones(1, dtype=int_dtype)
    else:  # sign-magnitude: away from zero above it, towards zero below it
        bits = torch.tensor([value], dtype=dtype).view(int_dtype)
        bits += 1 if value > 0 else -1
    return float(bits.view(dtype)[0])


def representable_inside(a: float, b: float, dtype: torch.dtype) -> tuple[float, float]:
    """[lo, hi]: the smallest and largest values of ``dtype`` inside [a, b]."""
    fmax = torch.finfo(dtype).max

    def ceil(v: float) -> float:
        if v == -math.inf or v < -fmax:
            return -fmax
        r = float(torch.tensor(v, dtype=torch.float64).to(dtype))
        return _step_up(r, dtype) if r < v else r

    lo = ceil(a)
    hi = -ceil(-b)
    return lo, hi


def transform_constants(mean, std, a, b, dtype: torch.dtype) -> tuple[float, ...]:
    """Check the arguments and return the packed transform constants.

    Args:
        mean, std: the parent normal N(mean, std^2) in tensor units (floats).
        a, b: absolute truncation bounds, a < b; a may be -inf and b +inf.
        dtype: the dtype of the tensor to fill (one of SUPPORTED_DTYPES).

    Returns:
        14 floats in the order of ``TruncNormalParams`` (transform.h):
        (mode, sign, Phi(alpha'), 1 - Phi(beta'), Phi(beta') - Phi(alpha'),
        log Phi(beta'), Phi(alpha')/Phi(beta'), split word, mean, std, lo, hi,
        Phi(alpha') - 1/2, 1/2 - Phi(beta')).

    Raises:
        TypeError: a non-real argument or an unsupported dtype.
        ValueError: NaN or infinite mean/std, std <= 0, NaN bounds, a >= b,
            a window with no value representable in ``dtype``, one that the
            dtype cannot hold without overflow, or one so far in a tail
            (beyond 1e6 std) that the fp32 deviate would lose all precision.
    """
    mean, std, a, b = (_real(n, v) for n, v in (("mean", mean), ("std", std), ("a", a), ("b", b)))
    if dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"unsupported dtype {dtype}; expected one of {SUPPORTED_DTYPES}")
    return _packed_constants(mean, std, a, b, dtype)


# A model's thousands of tensors share a handful of (std, bounds): computing
# the constants once each keeps per-tensor Python cost small.
@functools.lru_cache(maxsize=4096)
def _packed_constants(mean: float, std: float, a: float, b: float, dtype: torch.dtype) -> tuple[float, ...]:
    if not (math.isfinite(mean) and math.isfinite(std)):
        raise ValueError(f"mean and std must be finite, got mean={mean}, std={std}")
    if std <= 0.0:
        raise ValueError(f"std must be > 0, got {std}")
    if math.isnan(a) or math.isnan(b):
        raise ValueError(f"bounds must not be NaN, got a={a}, b={b}")
    if not a < b:
        raise ValueError(f"need a < b (absolute bounds), got a={a}, b={b}")
    alpha = (a - mean) / std
    beta = (b - mean) / std
    if not alpha < beta or alpha == math.inf or beta == -math.inf:
        raise ValueError(f"window [{a}, {b}] is empty at std={std} (alpha={alpha}, beta={beta})")
    if min(abs(alpha), abs(beta)) > 1e6 and alpha * beta > 0:
        raise ValueError(f"window [{a}, {b}] lies more than 1e6 std from mean={mean}; refusing to sample it")

    fmax = torch.finfo(dtype).max
    reach_lo = max(a, min(b, mean) - _REACH_SIGMAS * std)
    reach_hi = min(b, max(a, mean) + _REACH_SIGMAS * std)
    if not (-fmax <= reach_lo <= fmax and -fmax <= reach_hi <= fmax):
        raise ValueError(
            f"values of N({mean}, {std}^2) on [{a}, {b}] overflow {dtype} (max {fmax:g})"
        )
    lo, hi = representable_inside(a, b, dtype)
    if lo > hi:
        raise ValueError(f"no {dtype} value lies inside [{a}, {b}]")

    sign = 1.0
    if alpha > -beta:  # mirror: make the lower tail the heavy side
        alpha, beta, sign = -beta, -alpha, -1.0
    tail = beta < _TAIL_EDGE[compute_dtype(dtype)]
    a_cdf = ndtr(alpha)
    b_cdf = ndtr(beta)
    b_sf = ndtr(-beta)
    if beta - alpha < 1e-3:  # narrow: Simpson's rule keeps the digits a difference loses
        mid = 0.5 * (alpha + beta)
        mass = (beta - alpha) * (_pdf(alpha) + 4.0 * _pdf(mid) + _pdf(beta)) / 6.0
    elif beta <= 0.0:
        mass = b_cdf - a_cdf
    else:
        mass = 1.0 - a_cdf - b_sf
    log_b_cdf = log_ndtr(beta)
    ratio = math.exp(log_ndtr(alpha) - log_b_cdf)
    split = _lower_side_split(a_cdf, b_sf, mass)
    if tail:
        mode = MODE_TAIL
    elif compute_dtype(dtype) == torch.float32 and min(a_cdf, b_sf) >= _CENTRAL_S:
        mode = MODE_CENTRAL
    elif min(a_cdf, b_sf) + 2.0**-33 * mass < _FAR_TAIL_S:
        mode = MODE_TWO_SIDED_FAR
    else:
        mode = MODE_TWO_SIDED
    # Phi(alpha') - 1/2 and 1/2 - Phi(beta') via erf: exact near the centre,
    # where the difference of the CDFs above would have lost every digit.
    a_half = 0.5 * math.erf(alpha / math.sqrt(2.0))
    b_half = -0.5 * math.erf(beta / math.sqrt(2.0))
    return (float(mode), sign, a_cdf, b_sf, mass, log_b_cdf, ratio, float(split), mean, std, lo, hi,
            a_half, b_half)


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
