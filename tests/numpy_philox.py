"""A small numpy Philox4x32-10, written from the paper, independent of tinit.

Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3"
(SC'11), section 3.3. Each round computes the two 32x32 -> 64-bit products
with numpy uint64 arithmetic and permutes the words; the key is bumped by the
Weyl constants between rounds. ``stream_words`` lays the stream out as the
comment at the top of ``csrc/include/tinit/philox.h`` defines it.
"""

from __future__ import annotations

import numpy as np

M0 = np.uint64(0xD2511F53)
M1 = np.uint64(0xCD9E8D57)
W0 = 0x9E3779B9
W1 = 0xBB67AE85
_LOW32 = np.uint64(0xFFFFFFFF)
_SHIFT32 = np.uint64(32)


def philox4x32_10(counter, key) -> np.ndarray:
    """Philox4x32-10 on a batch of counters.

    Args:
        counter: array-like of shape (..., 4), uint32 words (c0, c1, c2, c3).
        key: two uint32 words (k0, k1), shared by the batch.

    Returns:
        uint32 array of shape (..., 4): the output words in order.
    """
    ctr = np.asarray(counter, dtype=np.uint64)
    x0, x1, x2, x3 = (ctr[..., i] for i in range(4))
    k0, k1 = int(key[0]), int(key[1])
    for _ in range(10):
        hi_lo0 = M0 * x0  # exact: both factors < 2**32
        hi_lo1 = M1 * x2
        hi0, lo0 = hi_lo0 >> _SHIFT32, hi_lo0 & _LOW32
        hi1, lo1 = hi_lo1 >> _SHIFT32, hi_lo1 & _LOW32
        x0, x1, x2, x3 = hi1 ^ x1 ^ np.uint64(k0), lo1, hi0 ^ x3 ^ np.uint64(k1), lo0
        k0 = (k0 + W0) & 0xFFFFFFFF
        k1 = (k1 + W1) & 0xFFFFFFFF
    return np.stack([x0, x1, x2, x3], axis=-1).astype(np.uint32)


def stream_words(numel: int, seed: int, stream: int, offset: int = 0) -> np.ndarray:
    """uint32 words of stream indices [offset, offset + numel) of (seed, stream).

    Index i uses counter (i // 4 as two words, stream as two words), key
    (seed low, seed high) and lane i % 4; all integers are unsigned 64-bit.
    """
    first, last = offset // 4, (offset + numel + 3) // 4
    blocks = np.uint64(first) + np.arange(last - first, dtype=np.uint64)
    counter = np.empty((last - first, 4), dtype=np.uint64)
    counter[:, 0] = blocks & _LOW32
    counter[:, 1] = blocks >> _SHIFT32
    counter[:, 2] = stream & 0xFFFFFFFF
    counter[:, 3] = stream >> 32
    words = philox4x32_10(counter, (seed & 0xFFFFFFFF, seed >> 32)).reshape(-1)
    start = offset - 4 * first
    return words[start : start + numel]


def _inverse_mod_2_32(m: int) -> int:
    return pow(m, -1, 2**32)


def philox4x32_10_inverse(output, key) -> tuple[int, int, int, int]:
    """The counter that Philox4x32-10 maps to ``output`` under ``key``.

    Each round is a bijection of the counter (the multipliers are odd, so the
    low product words determine the inputs), which lets tests place chosen
    words, such as 0 and 2**32 - 1, at a known stream position.

    Args:
        output: four uint32 words (Python ints).
        key: two uint32 words (k0, k1).

    Returns:
        The four counter words (Python ints).
    """
    m0, m1 = int(M0), int(M1)
    inv0, inv1 = _inverse_mod_2_32(m0), _inverse_mod_2_32(m1)
    y0, y1, y2, y3 = (int(v) for v in output)
    for r in reversed(range(10)):
        k0 = (int(key[0]) + r * W0) & 0xFFFFFFFF
        k1 = (int(key[1]) + r * W1) & 0xFFFFFFFF
        x2 = (y1 * inv1) & 0xFFFFFFFF
        x0 = (y3 * inv0) & 0xFFFFFFFF
        x1 = y0 ^ ((m1 * x2) >> 32) ^ k0
        x3 = y2 ^ ((m0 * x0) >> 32) ^ k1
        y0, y1, y2, y3 = x0, x1, x2, x3
    return y0, y1, y2, y3
