"""The Philox4x32-10 stream: known answers, bit-exact words, and determinism.

Layers as in Triton's test_random.py: the engine against the published
vectors, the uint32 stream against an independent numpy Philox
(tests/numpy_philox.py), then the filled values' invariance to the thread
count. Chunking, views and the dependence on seed and stream are checked per
backend in tests/test_stream_contract.py.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import numpy_philox
import pytest
import torch
from helpers import DTYPE_PARAMS, fill_at, stream_words

from tinit import reference
from tinit.ops import philox_words

KAT = json.loads((Path(__file__).parent / "data" / "philox4x32_10_kat.json").read_text())["vectors"]
KAT_PARAMS = [pytest.param(v, id=f"kat{i}") for i, v in enumerate(KAT)]
U64_MAX = 2**64 - 1


def _hex_words(words) -> list[int]:
    return [int(w, 16) for w in words]


def assert_words_equal(actual, expected, what: str) -> None:
    """Bit-exact comparison of uint32 word arrays, reporting the first mismatch."""
    got = np.asarray(actual, dtype=np.int64).reshape(-1)
    ref = np.asarray(expected, dtype=np.int64).reshape(-1)
    assert got.shape == ref.shape, f"{what}: {got.shape[0]} words, expected {ref.shape[0]}"
    bad = np.flatnonzero(got != ref)
    assert bad.size == 0, (
        f"{what}: {bad.size} of {ref.size} words differ; first at position {bad[0]}: "
        f"got {got[bad[0]]:#010x}, expected {ref[bad[0]]:#010x}"
    )


@pytest.mark.parametrize("vector", KAT_PARAMS)
def test_numpy_philox_known_answers(vector):
    out = numpy_philox.philox4x32_10([_hex_words(vector["counter"])], _hex_words(vector["key"]))
    assert_words_equal(out, _hex_words(vector["output"]), "numpy Philox vs published vector")


@pytest.mark.parametrize("vector", KAT_PARAMS)
def test_native_philox_known_answers(vector):
    out = torch.ops.tinit.philox4x32_10(_hex_words(vector["counter"]), _hex_words(vector["key"]))
    assert_words_equal(
        [w & 0xFFFFFFFF for w in out], _hex_words(vector["output"]), "torch.ops.tinit.philox4x32_10 vs published vector"
    )


@pytest.mark.parametrize("vector", KAT_PARAMS)
def test_native_philox_accepts_signed_words(vector):
    """Words >= 2**31 given as negative (int32 two's complement) ints mean the same."""

    def signed(w):
        return w - 2**32 if w >= 2**31 else w

    out = torch.ops.tinit.philox4x32_10(
        [signed(w) for w in _hex_words(vector["counter"])], [signed(w) for w in _hex_words(vector["key"])]
    )
    assert_words_equal(
        [w & 0xFFFFFFFF for w in out], _hex_words(vector["output"]), "torch.ops.tinit.philox4x32_10 with signed words"
    )


@pytest.mark.parametrize("vector", KAT_PARAMS)
def test_reference_philox_known_answers(vector):
    counter = [torch.tensor([w], dtype=torch.int64) for w in _hex_words(vector["counter"])]
    out = reference.philox4x32_10(*counter, *_hex_words(vector["key"]))
    assert_words_equal(torch.cat(out), _hex_words(vector["output"]), "tinit.reference.philox4x32_10")


def test_numpy_philox_inverse_round_trips():
    rng = random.Random(0)
    for _ in range(50):
        out = [rng.getrandbits(32) for _ in range(4)]
        key = [rng.getrandbits(32) for _ in range(2)]
        counter = numpy_philox.philox4x32_10_inverse(out, key)
        assert_words_equal(numpy_philox.philox4x32_10([counter], key), out, f"inverse under key {key}")


# (seed, stream, offset, numel): element offsets around every place the counter
# carries (2**32 elements, 2**34 = block index 2**32 where counter word c1
# changes, larger multiples) and near the end of the index range; numel spans
# several SIMD groups and 1024-element chunks so vector and scalar paths both run.
STREAM_CASES = [
    pytest.param(0, 0, 0, 4099, id="origin"),
    pytest.param(12345, 7, 1, 1029, id="odd_offset_1"),
    pytest.param(12345, 7, 3, 517, id="odd_offset_3"),
    pytest.param(2**32 + 5, 2**32 + 9, 1001, 3000, id="seed_stream_high_words"),
    pytest.param(99, 1, 2**32 - 5, 4096, id="offset_2^32"),
    pytest.param(99, 1, 2**34 - 1, 9, id="offset_2^34_cross_scalar"),
    pytest.param(99, 1, 2**34 - 401, 9000, id="offset_2^34_cross_simd"),
    pytest.param(99, 1, 2**34 - 4 * 64, 4 * 64, id="offset_2^34_end_exact"),
    pytest.param(99, 1, 2**34, 4097, id="offset_2^34_start"),
    pytest.param(5, 3, 3 * 2**34 - 4 * 37 - 2, 5003, id="offset_3x2^34_cross"),
    pytest.param(5, 3, 2**62 - 2003, 4006, id="offset_2^62_cross"),
    pytest.param(5, 3, 2**62 + 77, 1111, id="offset_past_2^62"),
    pytest.param(5, 3, 2**63 - 4103, 4103, id="offset_end_2^63"),
    pytest.param(2**63, 2**63 + 1, 2**40 + 3, 2048, id="seed_stream_2^63"),
    pytest.param(U64_MAX, U64_MAX, 2**35 - 999, 2100, id="seed_stream_max"),
]


@pytest.mark.parametrize("seed,stream,offset,numel", STREAM_CASES)
def test_words_match_numpy(backend, seed, stream, offset, numel):
    """Every backend's words (the reference backend's too, hence its uniforms) are the numpy Philox's."""
    expected = numpy_philox.stream_words(numel, seed, stream, offset)
    assert_words_equal(
        stream_words(backend, numel, seed, stream, offset),
        expected,
        f"{backend} words (seed={seed}, stream={stream}, offset={offset})",
    )


def test_words_of_large_range_match_numpy():
    """2**20 words: many threads' ranges and chunks at once."""
    numel, seed, stream, offset = 2**20 + 3, 2024, 11, 2**33 + 1
    expected = numpy_philox.stream_words(numel, seed, stream, offset)
    assert_words_equal(philox_words(numel, seed, stream, offset), expected, "2**20 words")


def test_reference_uniforms_are_exact():
    words = torch.tensor([0, 1, 2**31 - 1, 2**31, 2**32 - 2, 2**32 - 1], dtype=torch.int64)
    u, uc = reference.uniforms(words)
    exact = (words.double() + 0.5) / 2**32
    torch.testing.assert_close(u, exact, rtol=0, atol=0)
    torch.testing.assert_close(uc, 1.0 - exact, rtol=0, atol=0)
    assert float(u.min()) > 0.0 and float(u.max()) < 1.0, "uniforms must lie in the open interval (0, 1)"


WINDOW = (0.0, 1.0, -2.0, 2.0)


@pytest.fixture
def restore_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("dtype", DTYPE_PARAMS)
def test_thread_count_invariance(dtype, restore_threads):
    numel = 2**19 + 77
    torch.set_num_threads(1)
    one = fill_at(numel, dtype, *WINDOW, seed=8, stream=2, offset=3)
    words_one = philox_words(numel, 8, 2, 3)
    torch.set_num_threads(2)
    two = fill_at(numel, dtype, *WINDOW, seed=8, stream=2, offset=3)
    words_two = philox_words(numel, 8, 2, 3)
    torch.testing.assert_close(two, one, rtol=0, atol=0)
    assert_words_equal(words_two, words_one, "philox_words with 2 threads vs 1")


@pytest.mark.slow
def test_int64_indices_past_2_31():
    """One bf16 tensor of 2**31 + 2**16 + 9 elements (4 GiB): elements past
    index 2**31 hold the same values as a fill at that offset."""
    numel = 2**31 + 2**16 + 9
    big = fill_at(numel, torch.bfloat16, *WINDOW, seed=5, stream=1)
    for start in (0, 2**31 - 2048, numel - 4096):
        piece = fill_at(4096, torch.bfloat16, *WINDOW, seed=5, stream=1, offset=start)
        torch.testing.assert_close(
            big[start : start + 4096], piece, rtol=0, atol=0, msg=lambda m, start=start: f"elements from {start}: {m}"
        )
