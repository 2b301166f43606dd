"""The stream contract, written once and run on every backend (the ``backend`` fixture).

A value depends only on (seed, stream, flat index): one call over n elements
equals consecutive calls at the matching offsets (so a shard is the slice of
the whole), the tensor's shape or view does not change it, and a different
seed or stream (either 32-bit half of either) gives a different tensor. Each
backend (cpu, torch, triton-interpreter, cuda, triton) is held to the same
property; the backends' values against each other and the oracle are checked
elsewhere (test_backends, test_triton, test_accuracy).
"""

from __future__ import annotations

import pytest
import torch
from helpers import DTYPE_PARAMS

import tinit

WINDOW = (0.0, 1.0, -2.0, 2.0)
HIGH_SEED, HIGH_STREAM = 0x9E3779B97F4A7C15, 0xD1B54A32D192ED03  # both >= 2**63
BASE = 2**34 - 3 * 2**15 - 3
PIECES = [
    pytest.param((1, 2, 3, 5, 7, 11, 13, 4096 - 42), (31337, 5, BASE), id="small_odd"),
    # past 2**32 and odd, seed and stream >= 2**63
    pytest.param((999, 1001), (HIGH_SEED, HIGH_STREAM, 2**32 + 4097 * 4 + 3), id="slice_of_whole"),
    pytest.param((1023, 1025, 32767, 32769, 65536), (31337, 5, BASE), id="chunk_and_grain_edges"),
    pytest.param((3 * 2**16 + 1, 2**15 - 1), (31337, 5, BASE), id="two_large"),
]
# The slow backends (the Triton interpreter runs each program in Python) take the pieces up to 4,096.
SMALL_NUMEL = 4096


def _fill(backend, shape, dtype, *, seed, stream, offset=0, out=None):
    out = torch.empty(shape, dtype=dtype, device=backend.device) if out is None else out
    return tinit.trunc_normal_at_(out, *WINDOW, seed=seed, stream=stream, offset=offset, backend=backend.name)


@pytest.mark.parametrize("dtype", DTYPE_PARAMS)
@pytest.mark.parametrize(("pieces", "key"), PIECES)
def test_chunking_invariance(backend, dtype, pieces, key):
    """One call over n elements equals consecutive calls with offsets (a shard equals the slice of the whole)."""
    backend.skip_unless(dtype)
    numel = sum(pieces)
    if backend.small and numel > SMALL_NUMEL:
        pytest.skip(f"{numel} elements are too many for {backend.id} (it takes up to {SMALL_NUMEL})")
    seed, stream, base = key
    whole = _fill(backend, numel, dtype, seed=seed, stream=stream, offset=base)
    parts = torch.empty(numel, dtype=dtype, device=backend.device)
    start = 0
    for size in pieces:
        _fill(backend, size, dtype, seed=seed, stream=stream, offset=base + start, out=parts[start : start + size])
        start += size
    torch.testing.assert_close(parts, whole, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPE_PARAMS)
def test_shape_does_not_change_values(backend, dtype):
    """Values depend on the flat index only, not on the shape or the view."""
    backend.skip_unless(dtype)
    flat = _fill(backend, 30 * 17, dtype, seed=4, stream=1)
    shaped = _fill(backend, (30, 17), dtype, seed=4, stream=1)
    torch.testing.assert_close(shaped.reshape(-1), flat, rtol=0, atol=0)
    view = torch.empty(17, 30, dtype=dtype, device=backend.device).t()
    _fill(backend, None, dtype, seed=4, stream=1, out=view)
    torch.testing.assert_close(view.reshape(-1), flat, rtol=0, atol=0)


BASES = [
    pytest.param({"seed": 2**40 + 1, "stream": 2**33 + 2}, id="low"),
    pytest.param({"seed": HIGH_SEED, "stream": HIGH_STREAM}, id="high"),
]
CHANGES = {
    "seed": ("seed", 1),
    "stream": ("stream", 1),
    "seed_high_word": ("seed", 2**32),
    "stream_high_word": ("stream", 2**32),
}


@pytest.mark.parametrize("dtype", DTYPE_PARAMS)
@pytest.mark.parametrize("change", list(CHANGES))
@pytest.mark.parametrize("base", BASES)
def test_different_seed_or_stream_differs(backend, dtype, change, base):
    backend.skip_unless(dtype)
    key, bump = CHANGES[change]
    other = {**base, key: (base[key] + bump) % 2**64}
    numel = 512 if backend.small else 4096
    x = _fill(backend, numel, dtype, **base)
    y = _fill(backend, numel, dtype, **other)
    same = int((x == y).sum())
    # Independent draws coincide only by rounding to the same value: about
    # 0.2 % of pairs in bf16 (~2**10 values on +-2), far fewer in wider dtypes.
    limit = max(4, {torch.bfloat16: 0.01, torch.float16: 0.005}.get(dtype, 0.001) * numel)
    assert same <= limit, f"changing {change} left {same} of {numel} values identical"
