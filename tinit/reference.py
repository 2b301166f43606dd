"""Pure-torch reference backend: the same stream, fp64 math.

Its other backends, callers, tests and benchmarks: CONTRIBUTING.md, "Where each op lives".

Used by the tests and as the fallback when the C++ extension is not built.
The Philox4x32-10 stream is the native ``tinit::philox4x32_10``'s; the transform
takes the same modes and constants as ``tinit::trunc_normal_value``
(``tinit.params.TruncNormalParams``) but
computes each in fp64 from the exact uniform (w + 1/2) 2^-32, with
``torch.special.ndtri`` and a continued-fraction Mills ratio, so it is an
independent implementation of the same mathematical function (fp32 tensors:
within 2 fp32 ulp of the native backends; fp64: a few fp64 ulp).
Runs on any device torch supports; it allocates a few fp64/int64 temporaries
of the tensor's size.
"""

from __future__ import annotations

import contextlib

import torch

from tinit.params import Mode, TruncNormalParams

__all__ = ["philox4x32_10", "stream_words", "transform", "trunc_normal_", "trunc_normal_runs_", "words_at"]

_MASK32 = 0xFFFFFFFF
_M0, _M1 = 0xD2511F53, 0xCD9E8D57
_W0, _W1 = 0x9E3779B9, 0xBB67AE85


def philox4x32_10(c0, c1, c2, c3, k0: int, k1: int):
    """Philox4x32-10 on int64 tensors holding uint32 counter words.

    Args:
        c0..c3: int64 tensors (same shape) with values in [0, 2**32).
        k0, k1: key words, ints in [0, 2**32).

    Returns:
        Four int64 tensors of output words in [0, 2**32).
    """
    for _ in range(10):
        p0 = c0 * _M0  # < 2**64: wraps in int64 but keeps all 64 bits
        p1 = c2 * _M1
        hi0 = (p0 >> 32) & _MASK32
        hi1 = (p1 >> 32) & _MASK32
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, p1 & _MASK32, hi0 ^ c3 ^ k1, p0 & _MASK32
        k0 = (k0 + _W0) & _MASK32
        k1 = (k1 + _W1) & _MASK32
    return c0, c1, c2, c3


def stream_words(
    numel: int, seed: int, stream: int, offset: int = 0, device: torch.device | str = "cpu"
) -> torch.Tensor:
    """Stream words for indices [offset, offset + numel): int64 tensor in [0, 2**32).

    Args:
        numel: number of words; seed, stream: unsigned 64-bit; offset: >= 0.
    """
    first = offset // 4
    nblk = (offset + numel + 3) // 4 - first
    blk = torch.arange(first, first + nblk, dtype=torch.int64, device=device)
    c0 = blk & _MASK32
    c1 = (blk >> 32) & _MASK32
    c2 = torch.full_like(blk, stream & _MASK32)
    c3 = torch.full_like(blk, (stream >> 32) & _MASK32)
    words = torch.stack(philox4x32_10(c0, c1, c2, c3, seed & _MASK32, (seed >> 32) & _MASK32), dim=1)
    skip = offset - 4 * first
    return words.reshape(-1)[skip : skip + numel]


def words_at(indices: torch.Tensor, seed: int, stream: int) -> torch.Tensor:
    """Stream words at arbitrary stream indices (int64 tensor, values >= 0): int64 in [0, 2**32), same shape."""
    blk = indices >> 2
    c0 = blk & _MASK32
    c1 = (blk >> 32) & _MASK32
    c2 = torch.full_like(blk, stream & _MASK32)
    c3 = torch.full_like(blk, (stream >> 32) & _MASK32)
    words = torch.stack(philox4x32_10(c0, c1, c2, c3, seed & _MASK32, (seed >> 32) & _MASK32), dim=-1)
    return words.gather(-1, (indices & 3).unsqueeze(-1)).squeeze(-1)


def uniforms(words: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(u, 1 - u) in fp64, exactly (w + 1/2) / 2**32 and (~w + 1/2) / 2**32."""
    w = words.to(torch.float64)
    u = w * 2.0**-32 + 2.0**-33
    uc = (_MASK32 - w) * 2.0**-32 + 2.0**-33
    return u, uc


def _log_mills(y: torch.Tensor) -> torch.Tensor:
    """log R(y), R = Q / phi, for y >= 8 in fp64, by Laplace's continued fraction (40 terms).

    log_ndtr(-y) + y^2/2 would cancel: at y = 1000 it loses 11 digits.
    """
    t = torch.zeros_like(y)
    for k in range(40, 0, -1):
        t = k / (y + t)
    return -torch.log(y + t)


def _tail_excursion(u: torch.Tensor, uc: torch.Tensor, b0: float, ratio: float) -> torch.Tensor:
    """e >= 0 with Q(b0 + e) = Q(b0) (u + ratio uc), by Newton's method on the exact equation."""
    big_l = -torch.log(u + ratio * uc)
    e = 2.0 * big_l / (b0 + torch.sqrt(b0 * b0 + 2.0 * big_l))
    base = _log_mills(torch.tensor(b0, dtype=torch.float64))
    for _ in range(6):
        y = b0 + e
        f = e * (0.5 * e + b0) + (base - _log_mills(y)) - big_l
        slope = torch.exp(-_log_mills(y)) - y  # l'(e) = 1/R(y) - y
        e = e - f / (b0 + e + slope)
        e = e.clamp_min(0.0)
    return e


def transform(words: torch.Tensor, constants) -> torch.Tensor:
    """fp64 truncated-normal values for stream words, clamped to [lo, hi].

    Args:
        words: int64 tensor of uint32 words.
        constants: a ``tinit.params.TruncNormalParams`` (or its packed tuple).

    Returns:
        fp64 tensor shaped like ``words``.
    """
    p = TruncNormalParams(*constants)
    mode = Mode(int(p.mode))
    if p.sign < 0:  # the mirrored frame takes the complement word (``tinit::TruncNormalParams::flip``)
        words = _MASK32 - words
    u, uc = uniforms(words)
    sd = p.sd_hi + p.sd_lo
    if mode == Mode.UNIFORM:
        x = (p.edge + p.width * (u + p.slope * u * (u - 1.0))) * p.scale
    elif mode == Mode.TAIL:
        x = (p.edge - sd * _tail_excursion(u, uc, p.b0, p.ratio)) * p.scale
    else:
        lower = words <= int(p.split)
        w = words.to(torch.float64)  # s = s0 + step w' (``tinit::two_sided_s``)
        z = torch.where(
            lower, torch.special.ndtri(p.a_cdf + p.step * w), -torch.special.ndtri(p.b_sf + p.step * (_MASK32 - w))
        )
        x = (p.mean + sd * z) * p.scale
    return x.clamp_(p.lo, p.hi)


_SMALLEST_NORMAL = 2.0**-126


@contextlib.contextmanager
def _gradual_underflow(device: torch.device):
    """FTZ/DAZ off for the fill, as the native CPU fill's DenormalGuard: ``torch.set_flush_denormal(True)``
    (this thread's MXCSR/FPCR) would flush subnormal fp32/fp64 values and the casts to them. The
    caller's setting is read with one scalar product and restored on exit; CUDA fills are not
    affected by it."""
    flushed = device.type == "cpu" and (torch.tensor(_SMALLEST_NORMAL) * 0.5).item() == 0.0
    if flushed:
        torch.set_flush_denormal(False)
    try:
        yield
    finally:
        if flushed:
            torch.set_flush_denormal(True)


def trunc_normal_(tensor: torch.Tensor, seed: int, stream: int, offset: int, constants: tuple[float, ...]) -> None:
    """Fill contiguous ``tensor`` in place (same contract as the native op)."""
    with _gradual_underflow(tensor.device):
        words = stream_words(tensor.numel(), seed, stream, offset, device=tensor.device)
        tensor.copy_(transform(words, constants).view(tensor.shape))


def trunc_normal_runs_(tensor: torch.Tensor, seed: int, stream: int, runs, constants: tuple[float, ...]) -> None:
    """Fill contiguous ``tensor`` laid out as ``runs`` (``tinit.sharding.StreamRuns``), like the native op."""
    with _gradual_underflow(tensor.device):
        words = words_at(runs.stream_indices().to(tensor.device), seed, stream)
        tensor.copy_(transform(words, constants).view(tensor.shape))
