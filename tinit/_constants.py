"""The numeric core of the host constants, without the platform's libm.

``tinit.params`` builds the per-tensor record ``TruncNormalParams``; the values in it that
need a transcendental function (Phi, erf, the Mills ratio, the tail's interpolant) come from
here. libm's ``erf``, ``erfc``, ``exp`` and ``log`` differ by an ulp between platforms and
CPU variants (glibc's ``erf``/``erfc`` on aarch64 against x86, its FMA and non-FMA ``exp``),
and ``sum()`` changed in CPython 3.12, so this module uses neither. Its ``exp``, ``log``,
``log2``, ``erf``, ``erfc`` and ``cos`` return the correctly rounded fp64 value (round to
nearest even) of the exact function at the fp64 argument, a value defined by IEEE 754 and
the function alone; everything else is IEEE basic arithmetic on Python floats (``+ - * /``,
``math.sqrt``, exact ``frexp`` / ``ldexp`` / ``floor``) in a fixed order. The constants are
therefore the same bits on every host and every CPython from 3.10 on.

Method (Ziv's strategy): each function is evaluated in ``decimal`` (libmpdec's integer
arithmetic: its ``exp``, ``ln`` and ``sqrt`` are correctly rounded to the context
precision) at 30 significant digits, with a proved bound on the error; if the interval
value +- bound rounds to one fp64 value, that value is the correctly rounded result,
otherwise the precision is doubled. erf uses its Taylor series in the form
erf(x) = 2/sqrt(pi) exp(-x^2) sum 2^n x^(2n+1) / (1 3 5 ... (2n+1)) (positive terms, for
|x| < 3); erfc, for x >= 3, Laplace's continued fraction
sqrt(pi) exp(x^2) erfc(x) = 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))), whose successive
convergents bracket the value; pi from Machin's formula in integers.

This module imports only the standard library (no torch, no numpy), so it can be loaded
and checked by itself under any CPython (``tests/test_constants.py`` does, by file path).
"""

from __future__ import annotations

import decimal
import functools
import math
from decimal import Decimal
from fractions import Fraction

__all__ = [
    "HALF_LOG_2PI",
    "clear_caches",
    "cos",
    "erf",
    "erfc",
    "exp",
    "floor_log2",
    "log",
    "log2",
    "log_mills",
    "ndtr",
    "pdf",
    "tail_poly",
    "tail_ratio",
    "two_sided",
]

# First working precision (decimal digits, ~100 bits against fp64's 53), and the last one
# tried before giving up (the arguments here never need more than a few hundred).
_START_DIGITS = 30
_MAX_DIGITS = 4000
# erf by its series below this |x|, erfc by the continued fraction from here on (about
# where the two cost the same; 1 - erf(3) loses 5 of the 30 digits).
_CF_FROM = 3.0
# erf(x) rounds to +-1 and erfc(-x) to 2 for |x| >= 6 (erfc(6) = 2.2e-17 < 2^-54);
# erfc(x) rounds to 0 for x >= 27.3 (erfc(27.3) < 2^-1080 < 2^-1075, half the least subnormal).
_ERF_ONE = 6.0
_ERFC_ZERO = 27.3
# exp(x) rounds to 0 below -746 (e^-746 < 2^-1075) and overflows above 710.
_EXP_ZERO = -746.0
_EXP_INF = 710.0
_SQRT2 = math.sqrt(2.0)
_INF = math.inf


def _context(digits: int) -> decimal.Context:
    return decimal.Context(
        prec=digits,
        rounding=decimal.ROUND_HALF_EVEN,
        Emin=-(10**7),
        Emax=10**7,
        traps=[decimal.InvalidOperation, decimal.DivisionByZero, decimal.Overflow],
    )


def _square(x: Decimal) -> Decimal:
    """x^2 exactly (the decimal of a double has at most ~770 digits, its square twice that).

    Only context methods compute here (``ctx.multiply``, never ``*``): an operator would
    round to the caller's thread-local decimal context."""
    exact = _context(2 * len(x.as_tuple().digits) + 2)
    exact.traps[decimal.Inexact] = True
    return exact.multiply(x, x)


def _directed(digits: int, rounding: str) -> decimal.Context:
    ctx = _context(digits)
    ctx.rounding = rounding
    return ctx


# Error bounds are rounded up, with a few digits (they only need to be bounds).
_UP = _directed(6, decimal.ROUND_CEILING)


def _round(value: Decimal, err: Decimal, digits: int, shift: int, sign: int) -> float | None:
    """The fp64 value nearest to every point of shift + sign [value - err, value + err], or None.

    The interval's ends are rounded outwards (floor below, ceiling above: each step only
    widens it), then each to the nearest double (``float`` of a Decimal goes through its
    exact decimal string: correctly rounded); one double for both ends is the one for all.
    """
    down, up = _directed(digits + 5, decimal.ROUND_FLOOR), _directed(digits + 5, decimal.ROUND_CEILING)
    centre = value if sign > 0 else value.copy_negate()
    lo = float(down.subtract(down.add(shift, centre), err))
    hi = float(up.add(up.add(shift, centre), err))
    if lo == hi and math.copysign(1.0, lo) == math.copysign(1.0, hi):
        return lo
    return None


def _ziv(approx, x: float, shift: int = 0, sign: int = 1) -> float:
    """shift + sign f(x) rounded to fp64, ``approx(x, digits)`` giving f(x) and a bound on its
    error (Decimals); the precision is doubled until the rounding is decided."""
    digits = _START_DIGITS
    while digits <= _MAX_DIGITS:
        got = _round(*approx(x, digits), digits, shift, sign)
        if got is not None:
            return got
        digits *= 2
    raise ArithmeticError(f"{approx.__name__}({x!r}): rounding not decided at {_MAX_DIGITS} digits")


def _ulps(value: Decimal, count: int, digits: int) -> Decimal:
    """A bound on ``count`` roundings' worth of relative error in ``value`` (one rounding to
    ``digits`` digits moves a value by at most 1/2 10^(1 - digits) of itself; this takes twice that)."""
    return _UP.multiply(value.copy_abs(), Decimal(count).scaleb(1 - digits, _UP))


@functools.lru_cache(maxsize=16)
def _sqrt_pi(digits: int) -> Decimal:
    """sqrt(pi) to ``digits`` digits, within 2 roundings of it: pi = 16 atan(1/5) - 4 atan(1/239)
    in integers scaled by 10^g (each truncated term off by < 1, fewer than 2g terms)."""
    g = digits + 10
    one = 10**g

    def atan_inv(n: int) -> int:
        total = term = one // n
        k, n2 = 1, n * n
        while term:
            term //= n2
            total += (-1) ** k * (term // (2 * k + 1))
            k += 1
        return total

    pi = 16 * atan_inv(5) - 4 * atan_inv(239)  # |pi - pi_true 10^g| < 40 g << 10^(g - digits)
    exact = _context(g + 2)
    return _context(digits).sqrt(exact.scaleb(Decimal(pi), -g))


def _exp_approx(x: float, digits: int) -> tuple[Decimal, Decimal]:
    v = Decimal(x).exp(_context(digits))
    return v, _ulps(v, 1, digits)


def exp(x: float) -> float:
    """e^x, correctly rounded. Raises OverflowError beyond fp64's range, as ``math.exp``."""
    if math.isnan(x) or x == _INF:
        return x
    if x < _EXP_ZERO:
        return 0.0
    if x > _EXP_INF:
        raise OverflowError("math range error")
    if x == 0.0:
        return 1.0
    value = _ziv(_exp_approx, x)
    if value == _INF:  # e^x between the largest double and e^710
        raise OverflowError("math range error")
    return value


def _log_approx(x: float, digits: int) -> tuple[Decimal, Decimal]:
    v = Decimal(x).ln(_context(digits))
    return v, _ulps(v, 1, digits)


def log(x: float) -> float:
    """The natural logarithm, correctly rounded. Raises ValueError for x <= 0, as ``math.log``."""
    if math.isnan(x) or x == _INF:
        return x
    if x <= 0.0:
        raise ValueError("math domain error")
    if x == 1.0:
        return 0.0
    return _ziv(_log_approx, x)


def _log2_approx(x: float, digits: int) -> tuple[Decimal, Decimal]:
    ctx = _context(digits)
    v = ctx.divide(Decimal(x).ln(ctx), Decimal(2).ln(ctx))
    return v, _ulps(v, 3, digits)


def log2(x: float) -> float:
    """log2(x), correctly rounded (exact at powers of two). Raises ValueError for x <= 0."""
    if math.isnan(x) or x == _INF:
        return x
    if x <= 0.0:
        raise ValueError("math domain error")
    mantissa, exponent = math.frexp(x)
    if mantissa == 0.5:
        return float(exponent - 1)
    return _ziv(_log2_approx, x)


def floor_log2(x: float) -> int:
    """floor(log2(x)) of the correctly rounded log2 (``math.floor(math.log2(x))`` with glibc's
    log2, which is correctly rounded: just below a power of two 2^k with |k| > 1 it rounds to k)."""
    return math.floor(log2(x))


def _erf_series(x: float, digits: int) -> tuple[Decimal, Decimal]:
    """erf(x) for 0 < |x| < 3 and a bound on its error.

    S = sum t_n, t_0 = x, t_n = t_(n-1) 2x^2 / (2n + 1): N terms of one sign, each within 3n
    roundings (2n of its own, n of the rounded 2x^2), the sum within N more; stopped when
    t_n < 10^-digits S and the ratio 2x^2 / (2n + 3) <= 1/2 (the rest is below t_n).
    exp(-x^2) (x^2 exact) and sqrt(pi) add 3.
    """
    ctx = _context(digits)
    xd = Decimal(x)
    y = _square(xd)
    y2 = ctx.multiply(y, 2)  # rounded: t_n = x y2^n / (3 5 ... (2n+1)) carries n roundings of it
    n_decreasing = math.ceil(4 * Fraction(y))  # the ratio 2x^2 / (2n + 3) is <= 1/2 from 2n + 3 >= 4x^2 on
    term = total = xd
    n = 0
    while True:
        n += 1
        term = ctx.divide(ctx.multiply(term, y2), 2 * n + 1)
        total = ctx.add(total, term)
        # |term| < 10^(adjusted + 1) and |total| >= 10^adjusted: a test on exponents only.
        if 2 * n + 3 >= n_decreasing and term.adjusted() + 1 <= total.adjusted() - digits:
            break
    scale = ctx.divide(ctx.multiply(2, ctx.exp(y.copy_negate())), _sqrt_pi(digits))
    v = ctx.multiply(total, scale)
    return v, _ulps(v, 4 * n + 12, digits)


def _erfc_cf(x: float, digits: int) -> tuple[Decimal, Decimal]:
    """erfc(x) for x >= 3 and a bound on its error.

    f_n, the continued fraction cut after n partial numerators, evaluated from the bottom
    up: every step a/(x + t) of positive numbers adds 2 roundings to t's relative error, so
    f_n is within 2n + 2; the value lies between f_n and f_(n+1). exp(-x^2) and sqrt(pi)
    add 4.
    """
    ctx = _context(digits)
    xd = Decimal(x)
    # Enough terms for a bracket of about 10^-(digits - 6) of the value (fitted: the cut's
    # error falls like exp(-2 x sqrt(2n))); the bracket below is the proof, this only sizes it.
    target = digits - 6
    n = int(0.8 * target * target / (x * x)) + target // 2 + 4

    def convergent(depth: int) -> Decimal:
        t = Decimal(0)
        for k in range(depth, 0, -1):
            t = ctx.divide(ctx.divide(k, 2), ctx.add(xd, t))  # k/2 exact
        return ctx.divide(1, ctx.add(xd, t))

    f_n, f_next = convergent(n), convergent(n + 1)
    scale = ctx.divide(ctx.exp(_square(xd).copy_negate()), _sqrt_pi(digits))
    v = ctx.multiply(f_n, scale)
    # |f_n - f_(n+1)| exactly (both have `digits` digits), times the scale and a margin.
    gap = _context(2 * digits + 2).subtract(f_n, f_next).copy_abs()
    bracket = _UP.multiply(_UP.multiply(gap, scale), Decimal("1.000001"))
    return v, _UP.add(bracket, _ulps(v, 2 * n + 12, digits))


def erf(x: float) -> float:
    """The error function, correctly rounded (erf(-0.0) = -0.0, erf(+-inf) = +-1, as ``math.erf``)."""
    if math.isnan(x) or x == 0.0:
        return x
    if abs(x) >= _ERF_ONE:
        return math.copysign(1.0, x)
    return math.copysign(_erf_positive(abs(x)), x)  # odd, and so is rounding to nearest


@functools.lru_cache(maxsize=4096)
def _erf_positive(x: float) -> float:
    if x < _CF_FROM:
        return _ziv(_erf_series, x)
    return _ziv(_erfc_cf, x, 1, -1)  # 1 - erfc(x)


def erfc(x: float) -> float:
    """The complementary error function 1 - erf(x), correctly rounded (no cancellation in
    either tail; erfc(inf) = 0, erfc(-inf) = 2, as ``math.erfc``)."""
    if math.isnan(x):
        return x
    if x >= _ERFC_ZERO:
        return 0.0
    if x <= -_ERF_ONE:
        return 2.0
    if x == 0.0:
        return 1.0
    return _erfc_finite(x)


@functools.lru_cache(maxsize=4096)
def _erfc_finite(x: float) -> float:
    if x >= _CF_FROM:
        return _ziv(_erfc_cf, x)
    if x <= -_CF_FROM:
        return _ziv(_erfc_cf, -x, 2, -1)  # 2 - erfc(-x)
    return _ziv(_erf_series, x, 1, -1)  # 1 - erf(x)


def _cos_approx(x: float, digits: int) -> tuple[Decimal, Decimal]:
    """cos(x) for |x| <= 4 by its Taylor series: each term within 2n roundings, the partial sums
    within n more; stopped when |t_n| < 10^-digits (past the largest term, |x| <= 4: the rest
    alternates and decreases, so it is below that)."""
    ctx = _context(digits)
    y = _square(Decimal(x))
    term = total = size = Decimal(1)
    n = 0
    while True:
        n += 1
        term = ctx.divide(ctx.multiply(term.copy_negate(), y), (2 * n - 1) * (2 * n))
        total = ctx.add(total, term)
        size = ctx.add(size, term.copy_abs())
        if term.adjusted() + 1 <= -digits:  # |term| < 10^-digits
            break
    # size (a sum of |terms|, itself within n roundings) bounds every rounding's scale.
    err = _UP.add(_ulps(size, 2 * (3 * n + 2), digits), Decimal(1).scaleb(-digits, _UP))
    return total, err


def cos(x: float) -> float:
    """cos(x) for |x| <= 4, correctly rounded (the Chebyshev nodes of ``tail_poly``).

    Raises:
        ValueError: |x| > 4 (no argument reduction here).
    """
    if not abs(x) <= 4.0:
        raise ValueError(f"cos: |x| <= 4 expected, got {x}")
    if x == 0.0:
        return 1.0
    return _ziv(_cos_approx, x)


def clear_caches() -> None:
    """Empty every cache of this module (tests that swap the functions underneath use it)."""
    for cached in _CACHES:
        cached.cache_clear()


# 1/2 log(2 pi): log of the double 2 pi (2.0 * math.pi is exact), halved exactly.
HALF_LOG_2PI = 0.5 * log(2.0 * math.pi)
_LOG_2 = log(2.0)


def ndtr(x: float) -> float:
    """Phi(x), the standard normal CDF, in fp64: erfc(-x / sqrt(2)) / 2 (accurate in the lower tail)."""
    return 0.5 * erfc(-x / _SQRT2)


def pdf(x: float) -> float:
    """phi(x), the standard normal density, in fp64: exp(-x^2/2 - log(2 pi)/2)."""
    return exp(-0.5 * x * x - HALF_LOG_2PI)


# The functions tinit.params calls are cached on their exact arguments: a model's tensors
# share a handful of windows in units of std, and a cold call costs a few hundred µs
# (0.0 and -0.0 share an entry; the only result they change is the sign of a zero half,
# which the record writes as +0).
@functools.lru_cache(maxsize=4096)
def two_sided(alpha: float, beta: float) -> tuple[float, float, float, float, float]:
    """(Phi(alpha), Q(beta), mass, erf(alpha/sqrt 2)/2, -erf(beta/sqrt 2)/2) of the mirrored
    window [alpha, beta] (alpha <= -beta, beta > -8), all fp64.

    mass = Phi(beta) - Phi(alpha): Simpson's rule when beta - alpha < 1e-3 (a difference would
    lose the digits), else the difference on the side that keeps them. The two halves are
    Phi(alpha) - 1/2 and 1/2 - Phi(beta) from erf: exact near the centre, where the CDFs'
    difference would have lost every digit.
    """
    a_cdf = ndtr(alpha)
    b_sf = ndtr(-beta)
    if beta - alpha < 1e-3:
        mid = 0.5 * (alpha + beta)
        mass = (beta - alpha) * (pdf(alpha) + 4.0 * pdf(mid) + pdf(beta)) / 6.0
    elif beta <= 0.0:
        mass = ndtr(beta) - a_cdf
    else:
        mass = 1.0 - a_cdf - b_sf
    a_half = 0.5 * erf(alpha / _SQRT2)
    b_half = -0.5 * erf(beta / _SQRT2)
    return a_cdf, b_sf, mass, a_half, b_half


def log_mills(y: float) -> float:
    """log R(y), R(y) = Q(y) / phi(y), for y >= 8 in fp64: Laplace's continued fraction
    (``tinit::mills_ratio``, to 40 terms here), no cancellation."""
    t = 0.0
    for k in range(40, 0, -1):
        t = k / (y + t)
    return -log(y + t)


@functools.lru_cache(maxsize=4096)
def tail_ratio(a0: float, b0: float, width: float) -> float:
    """r = Q(a0) / Q(b0) = exp(-width (a0 + b0) / 2) R(a0) / R(b0), width = a0 - b0 (given
    from the tensor-unit window, so a narrow window far out keeps its digits), b0 >= 8."""
    return exp(-0.5 * width * (a0 + b0) + log_mills(a0) - log_mills(b0))


def _power(x: float, j: int) -> float:
    """x^j correctly rounded (what a correctly rounded ``pow`` gives; exact rationals, not libm)."""
    return float(Fraction(x) ** j)


@functools.lru_cache(maxsize=16)
def _chebyshev_nodes(n: int) -> tuple[float, ...]:
    """1 - cos(pi (k + 1/2) / n), k < n: the nodes of [0, 2], halved by the caller's width."""
    return tuple(1.0 - cos(math.pi * (k + 0.5) / n) for k in range(n))


@functools.lru_cache(maxsize=256)
def tail_poly(b0: float, a0: float) -> tuple[float, float, float, float, float]:
    """l1..l5 with l(e) = log R(b0) - log R(b0 + e) ~ e (l1 + l2 e + ... + l5 e^4), b0 >= 8.

    Interpolated at 5 Chebyshev nodes of [0, e_max], e_max the excursion of the smallest
    uniform (2^-33) or the window's far edge a0 - b0: Gaussian elimination with partial
    pivoting, then back substitution summing left to right (as CPython 3.11's ``sum()`` did;
    3.12's compensated sum gives other last bits).
    """
    big_l = 33.0 * _LOG_2
    e_max = min(2.0 * big_l / (b0 + math.sqrt(b0 * b0 + 2.0 * big_l)), a0 - b0)
    e_max = max(e_max, 1e-6)
    base = log_mills(b0)

    def g(e: float) -> float:  # l(e) / e, its limit at 0 is l'(0) = 1/R(b0) - b0
        return (base - log_mills(b0 + e)) / e

    n = 5
    nodes = [0.5 * e_max * c for c in _chebyshev_nodes(n)]
    rows = [[_power(e, j) for j in range(n)] + [g(e)] for e in nodes]
    for col in range(n):
        piv = max(range(col, n), key=lambda r: abs(rows[r][col]))
        rows[col], rows[piv] = rows[piv], rows[col]
        for r in range(col + 1, n):
            f = rows[r][col] / rows[col][col]
            rows[r] = [x - f * y for x, y in zip(rows[r], rows[col], strict=True)]
    coefs = [0.0] * n
    for r in range(n - 1, -1, -1):
        acc = 0.0
        for j in range(r + 1, n):
            acc += rows[r][j] * coefs[j]
        coefs[r] = (rows[r][n] - acc) / rows[r][r]
    return tuple(coefs)


# Bound once, so that clear_caches reaches them even while a test has replaced the names.
_CACHES = (_sqrt_pi, _erf_positive, _erfc_finite, two_sided, tail_ratio, _chebyshev_nodes, tail_poly)
