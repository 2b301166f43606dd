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
Runs on any device torch supports; its temporaries (int64 words, fp64 values)
are of one step's size (``_chunk``: 2**18 elements on the CPU), not the tensor's.
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
        hi0 = (p0 >> 32).bitwise_and_(_MASK32)
        hi1 = (p1 >> 32).bitwise_and_(_MASK32)
        # in place on the new temporaries only: the callers' c0..c3 stay as given
        c0, c1, c2, c3 = (
            hi1.bitwise_xor_(c1).bitwise_xor_(k0),
            p1.bitwise_and_(_MASK32),
            hi0.bitwise_xor_(c3).bitwise_xor_(k1),
            p0.bitwise_and_(_MASK32),
        )
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
    sd = p.sd_hi + p.sd_lo
    if mode == Mode.UNIFORM:
        u, _ = uniforms(words)
        x = (p.edge + p.width * (u + p.slope * u * (u - 1.0))) * p.scale
    elif mode == Mode.TAIL:
        x = (p.edge - sd * _tail_excursion(*uniforms(words), p.b0, p.ratio)) * p.scale
    else:
        # s = s0 + step w' (``tinit::two_sided_s``): the lower side's s from w, the upper side's from
        # ~w; one ndtri for both sides, negated on the upper one
        lower = words <= int(p.split)
        w = words.to(torch.float64)
        s = torch.where(lower, p.a_cdf + p.step * w, p.b_sf + p.step * (_MASK32 - w))
        z = torch.special.ndtri(s)
        x = (p.mean + sd * torch.where(lower, z, -z)) * p.scale
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


# Elements per step of the fills: the temporaries (int64 words, fp64 values, about 60 bytes an
# element at the peak) of 2**18 elements stay in a core's L2/L3 on the CPU, where one pass over
# a whole 16 M-element tensor's temporaries ran 9x slower, memory-bound; on a GPU a step that
# small would be launch-bound.
_CHUNK = {"cpu": 1 << 18}
_CHUNK_OTHER = 1 << 24


def _chunk(device: torch.device) -> int:
    return _CHUNK.get(device.type, _CHUNK_OTHER)


def trunc_normal_(tensor: torch.Tensor, seed: int, stream: int, offset: int, constants: tuple[float, ...]) -> None:
    """Fill contiguous ``tensor`` in place (same contract as the native op).

    ``_chunk`` elements a step: the temporaries are of a step's size, not the tensor's."""
    flat = tensor.view(-1)
    step = _chunk(tensor.device)
    with _gradual_underflow(tensor.device):
        for start in range(0, flat.numel(), step):
            piece = flat[start : start + step]
            piece.copy_(transform(stream_words(piece.numel(), seed, stream, offset + start, tensor.device), constants))


def trunc_normal_runs_(tensor: torch.Tensor, seed: int, stream: int, runs, constants: tuple[float, ...]) -> None:
    """Fill contiguous ``tensor`` laid out as ``runs`` (``tinit.sharding.StreamRuns``), like the native op.

    Whole runs a step (a run longer than a step: its pieces)."""
    flat = tensor.view(-1)
    step = _chunk(tensor.device)
    run = runs.run
    starts = runs.row_starts()
    with _gradual_underflow(tensor.device):
        if run >= step:
            for row, start in enumerate(starts.tolist()):
                for k in range(0, run, step):
                    piece = flat[row * run + k : row * run + min(k + step, run)]
                    words = stream_words(piece.numel(), seed, stream, start + k, tensor.device)
                    piece.copy_(transform(words, constants))
            return
        rows = max(1, step // max(run, 1))
        within = torch.arange(run, dtype=torch.int64)
        for first in range(0, starts.numel(), rows):
            indices = (starts[first : first + rows, None] + within).reshape(-1).to(tensor.device)
            piece = flat[first * run : first * run + indices.numel()]
            piece.copy_(transform(words_at(indices, seed, stream), constants))
