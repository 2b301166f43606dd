"""The Triton kernel in the Triton interpreter, on small CPU tensors.

Layers as in tests/test_philox.py: the Philox rounds against the published
vectors, the uint32 stream against the CPU kernel, then the values (stream
version 2): bit-identical to the CPU kernel in every mode (tinit.params.Mode)
and dtype, at odd offsets and for every BLOCK (the interpreter's tl.fma is a
true fused multiply-add), changed by seed and stream; and the sm_90 code,
compiled without a GPU, uses only IEEE fp32 operations (no fp64 at all) and
exactly the fmas of tinit::trunc_normal_value.

The interpreter is chosen once per pytest session (tests/conftest.py, before
tinit's kernels and this module's test kernels are created); the tests that run
kernels in-process skip with the reason in a session that compiles Triton. The
checks that need the other mode (tl.philox interpreted; the module without
triton; the sm_90 code compiled) run in a subprocess and run in any session
(marker ``own_process``).
"""

from __future__ import annotations

import functools
import importlib
import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

try:
    import triton
    import triton.language as tl
except ImportError:
    pytest.skip(
        "triton is not installed (pip install triton): the triton backend is not tested", allow_module_level=True
    )
import torch
from helpers import place_words

import tinit
from tinit import ops
from tinit.params import (
    PARAM_COUNT,
    Mode,
    TruncNormalParams,
    transform_constants,
    uniform_constants,
)

_MODULE = "tinit.triton_kernels.trunc_normal"
tk = importlib.import_module(_MODULE)
philox = importlib.import_module("tinit.triton_kernels.philox")
transform = importlib.import_module("tinit.triton_kernels.transform")
host = importlib.import_module("tinit.triton_kernels._host")

needs_native = pytest.mark.skipif(
    not ops.native_available(),
    reason=f"the CPU kernel is the reference here and is not built ({ops.native_load_error()}); {ops.BUILD_HINT}",
)

KAT = json.loads((Path(__file__).parent / "data" / "philox4x32_10_kat.json").read_text())["vectors"]
KAT_PARAMS = [pytest.param(v, id=f"kat{i}") for i, v in enumerate(KAT)]

DTYPES = [
    pytest.param(torch.float32, id="f32"),
    pytest.param(torch.bfloat16, id="bf16"),
    pytest.param(torch.float16, id="f16"),
]
# (mean, std, a, b), absolute bounds, and the mode each selects for every
# dtype (checked below): together they reach every tinit.params.Mode.
WINDOWS = {
    "linear": (0.0, 1.0, 0.5, 0.5001),  # UNIFORM with a linear-density slope
    "two_sided": (0.0, 1.0, -2.0, 2.0),  # +-2 sigma: the central rows
    "narrow_std": (0.0, 0.02, -2.0, 2.0),  # +-100 sigma: deep rows of the table
    "untruncated": (0.0, 1.0, -math.inf, math.inf),
    "mirrored": (0.0, 1.0, -1.0, 4.0),  # sign -1, complement words, split < 2^32 - 1
    "precise": (1.0, 1.0 / 7.0, -math.inf, 0.0),  # mean + std z cancels next to 0
    "tail": (0.0, 1.0, 8.0, 100.0),  # beyond 8 sigma, mirrored
    "tail_lower": (0.0, 1.0, -math.inf, -15.0),
}
WINDOW_MODES = {
    "linear": Mode.UNIFORM,
    "two_sided": Mode.TWO_SIDED,
    "narrow_std": Mode.TWO_SIDED,
    "untruncated": Mode.TWO_SIDED,
    "mirrored": Mode.TWO_SIDED,
    "precise": Mode.TWO_SIDED_PRECISE,
    "tail": Mode.TAIL,
    "tail_lower": Mode.TAIL,
}
WINDOW_PARAMS = [pytest.param(name, id=name) for name in WINDOWS]
# U(-3, 5) of tinit.params.uniform_constants: the flat UNIFORM record.
FLAT = (-3.0, 5.0)
SEED, STREAM = 0x9E3779B97F4A7C15, 0xD1B54A32D192ED03  # both >= 2**63
OFFSET = 2**32 + 4097 * 4 + 3  # past 2**32, odd
NUMEL = 4099  # prime
INT_VIEW = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16}


@triton.jit
def _kat_kernel(out_ptr, c0, c1, c2, c3, k0, k1):
    """One call of the kernel's Philox rounds on explicit words (int32 bit patterns)."""
    zero = tl.full([1], 0, tl.uint32)
    r0, r1, r2, r3 = philox.philox4x32_10(
        zero + philox.u32(c0),
        zero + philox.u32(c1),
        zero + philox.u32(c2),
        zero + philox.u32(c3),
        zero + philox.u32(k0),
        zero + philox.u32(k1),
    )
    lane = tl.arange(0, 1)
    tl.store(out_ptr + lane, r0.to(tl.int32, bitcast=True))
    tl.store(out_ptr + 1 + lane, r1.to(tl.int32, bitcast=True))
    tl.store(out_ptr + 2 + lane, r2.to(tl.int32, bitcast=True))
    tl.store(out_ptr + 3 + lane, r3.to(tl.int32, bitcast=True))


@pytest.fixture(autouse=True)
def _interpreter(request):
    """Every test but those marked ``own_process`` runs kernels in this process: the session's interpreter."""
    if request.node.get_closest_marker("own_process") is None:
        request.getfixturevalue("triton_interpreter")


def test_kernels_run_in_the_interpreter():
    assert tk.interpreted(), "TRITON_INTERPRET=1 was not in effect when the kernels were created"


# ------------------------------------------------------------------ Philox


def _kat_words(kernel, vector) -> list[int]:
    args = [host.i32_bits(int(w, 16)) for w in vector["counter"] + vector["key"]]
    out = torch.zeros(4, dtype=torch.int32)
    kernel[(1,)](out, *args)
    return [w & 0xFFFFFFFF for w in out.tolist()]


@pytest.mark.parametrize("vector", KAT_PARAMS)
def test_philox_rounds_known_answers(vector):
    expected = [int(w, 16) for w in vector["output"]]
    assert _kat_words(_kat_kernel, vector) == expected, "Triton Philox rounds vs published vector"


@pytest.mark.own_process
def test_tl_philox_has_the_same_convention():
    """tl.philox(seed, c0..c3) keys with (seed mod 2^32, seed >> 32) and takes the counter
    in tinit::philox4x32_10's order: it also meets the published vectors (interpreted, in a subprocess)."""
    code = textwrap.dedent("""
        import json, sys
        import torch
        import triton
        import triton.language as tl
        from tinit.triton_kernels import philox
        from tinit.triton_kernels._host import i32_bits

        @triton.jit
        def kat(out_ptr, c0, c1, c2, c3, k0, k1):
            zero = tl.full([1], 0, tl.uint32)
            r0, r1, r2, r3 = tl.philox(philox.join_u64(k0, k1), zero + philox.u32(c0), zero + philox.u32(c1),
                                       zero + philox.u32(c2), zero + philox.u32(c3))
            words = tl.reshape(tl.join(tl.join(r0, r2), tl.join(r1, r3)), [4])
            tl.store(out_ptr + tl.arange(0, 4), words.to(tl.int32, bitcast=True))

        result = []
        for vector in json.loads(sys.argv[1]):
            out = torch.zeros(4, dtype=torch.int32)
            kat[(1,)](out, *[i32_bits(int(w, 16)) for w in vector["counter"] + vector["key"]])
            result.append([w & 0xFFFFFFFF for w in out.tolist()])
        print(json.dumps(result))
    """)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    result = subprocess.run(
        [sys.executable, "-c", code, json.dumps(KAT)], check=False, capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    expected = [[int(w, 16) for w in vector["output"]] for vector in KAT]
    assert json.loads(result.stdout) == expected, "tl.philox vs published vectors"


def _assert_words_equal(got: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    bad = torch.nonzero(got != expected).flatten()
    assert bad.numel() == 0, (
        f"{what}: {bad.numel()} of {expected.numel()} words differ; first at position {int(bad[0])}: "
        f"got {int(got[bad[0]]):#010x}, expected {int(expected[bad[0]]):#010x}"
    )


@needs_native
@pytest.mark.parametrize(
    ("seed", "stream", "offset", "numel"),
    [
        pytest.param(0, 0, 0, 1031, id="zero"),
        pytest.param(SEED, STREAM, 1, 1031, id="odd-offset"),
        pytest.param(2**32 - 1, 2**31 + 1, 2**32 - 3, 1031, id="offset-across-2^32"),
        pytest.param(2**64 - 1, 2**64 - 1, 2**34 - 7, 1031, id="block-across-2^32"),
        pytest.param(1, 2**32, 2**62 + 5, 517, id="offset-2^62"),
    ],
)
def test_words_match_cpu_kernel(seed, stream, offset, numel):
    got = tk.philox_words_triton(numel, seed, stream, offset, device="cpu", block=256)
    _assert_words_equal(got, ops.philox_words(numel, seed, stream, offset), "philox_words_triton vs tinit.ops")


@needs_native
def test_words_do_not_depend_on_block():
    expected = ops.philox_words(1001, SEED, STREAM, OFFSET)
    for block in (1, 8, 512):
        got = tk.philox_words_triton(1001, SEED, STREAM, OFFSET, device="cpu", block=block)
        _assert_words_equal(got, expected, f"philox_words_triton block={block}")


# ------------------------------------------------------------------ values


def _constants(dtype, window) -> TruncNormalParams:
    """The record of a WINDOWS entry, or of FLAT (uniform_constants)."""
    return uniform_constants(*window, dtype) if window == FLAT else transform_constants(*window, dtype)


def _fill_triton(dtype, window, *, numel=NUMEL, seed=SEED, stream=STREAM, offset=OFFSET, block=2048):
    out = torch.empty(numel, dtype=dtype)
    tk.trunc_normal_triton_(out, seed, stream, offset, _constants(dtype, window), block=block)
    return out


def _fill_cpu(dtype, window, *, numel=NUMEL, seed=SEED, stream=STREAM, offset=OFFSET):
    out = torch.empty(numel, dtype=dtype)
    ops.trunc_normal_native(out, seed, stream, offset, _constants(dtype, window))
    return out


@functools.cache
def _pair(dtype, name):
    """(triton, cpu) fills of WINDOWS[name] at (SEED, STREAM, OFFSET), computed once."""
    return _fill_triton(dtype, WINDOWS[name]), _fill_cpu(dtype, WINDOWS[name])


def _bit_mismatches(got: torch.Tensor, expected: torch.Tensor) -> torch.Tensor:
    return torch.nonzero(got.view(INT_VIEW[got.dtype]) != expected.view(INT_VIEW[got.dtype])).flatten()


def _assert_bits_equal(got: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    bad = _bit_mismatches(got, expected)
    assert bad.numel() == 0, (
        f"{what}: {bad.numel()} of {expected.numel()} values differ in bits from the CPU kernel; "
        f"first at index {int(bad[0])}: got {float(got[bad[0]])!r}, expected {float(expected[bad[0]])!r}. "
        "tinit.triton_kernels.transform and tinit::trunc_normal_value are out of step, or the "
        "native extension was built from an older tinit::trunc_normal_value (rebuild it)"
    )


@pytest.mark.parametrize("dtype", DTYPES)
def test_windows_cover_every_mode(dtype):
    modes = {name: Mode(int(transform_constants(*window, dtype).mode)) for name, window in WINDOWS.items()}
    assert modes == WINDOW_MODES, f"{dtype}: the windows select {modes}"
    assert set(modes.values()) == set(Mode)
    assert Mode(int(uniform_constants(*FLAT, dtype).mode)) == Mode.UNIFORM


@needs_native
@pytest.mark.parametrize("name", WINDOW_PARAMS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_values_bit_identical_to_cpu_kernel(dtype, name):
    """The kernel mirrors tinit::trunc_normal_value op for op, so every value has the CPU kernel's bits."""
    got, expected = _pair(dtype, name)
    _assert_bits_equal(got, expected, f"{dtype}, window {name}")
    a, b = WINDOWS[name][2:]
    assert bool(((got >= a) & (got <= b)).all()), f"{dtype}, window {name}: values outside [{a}, {b}]"


@needs_native
@pytest.mark.parametrize("dtype", DTYPES)
def test_flat_uniform_bit_identical_to_cpu_kernel(dtype):
    got, expected = _fill_triton(dtype, FLAT, numel=1031), _fill_cpu(dtype, FLAT, numel=1031)
    _assert_bits_equal(got, expected, f"{dtype}, uniform_constants{FLAT}")


@needs_native
@pytest.mark.parametrize(
    ("offset", "numel", "block"),
    [
        pytest.param(0, 1, 1, id="one-element"),
        pytest.param(1, 6, 1, id="offset1-block1"),
        pytest.param(2, 1030, 16, id="offset2-block16"),
        pytest.param(3, 517, 64, id="offset3-block64"),
        pytest.param(4, 1024, 64, id="aligned-full-programs"),
        pytest.param(2**34 + 5, 257, 2, id="offset-past-2^34"),
    ],
)
@pytest.mark.parametrize("name", [pytest.param(name, id=name) for name in ("linear", "mirrored", "precise", "tail")])
@pytest.mark.parametrize("dtype", DTYPES)
def test_offsets_and_blocks_bit_identical(dtype, name, offset, numel, block):
    """Every offset % 4 (a program's first and last counter blocks straddle the tensor's
    ends; offset % 4 == 0 takes the unmasked vector store) and several BLOCKs."""
    got = _fill_triton(dtype, WINDOWS[name], numel=numel, offset=offset, block=block)
    _assert_bits_equal(
        got,
        _fill_cpu(dtype, WINDOWS[name], numel=numel, offset=offset),
        f"{dtype}, window {name}, offset {offset}, block {block}",
    )


@needs_native
@pytest.mark.parametrize("offset", [8, 9, 10, 11])
@pytest.mark.parametrize("shift", [1, 2, 3])
@pytest.mark.parametrize("dtype", DTYPES)
def test_unaligned_view_bit_identical(dtype, shift, offset):
    """A view that starts 1-3 elements into its storage, at every offset % 4: the vector store
    where the counter blocks are aligned (shift == offset % 4), element stores elsewhere; no
    store may assume an alignment the view lacks, none may write outside it."""
    storage = torch.full((1100,), 7.0, dtype=dtype)
    view = storage[shift : shift + 1025]
    constants = transform_constants(*WINDOWS["two_sided"], dtype)
    tk.trunc_normal_triton_(view, SEED, STREAM, offset, constants, block=16)
    expected = torch.empty(1025, dtype=dtype)
    ops.trunc_normal_native(expected, SEED, STREAM, offset, constants)
    _assert_bits_equal(view, expected, f"{dtype}, view at element {shift}, offset {offset}")
    assert bool((storage[:shift] == 7.0).all()) and bool((storage[shift + 1025 :] == 7.0).all()), (
        "wrote outside the view"
    )


def test_ndtri_rows_are_the_table_rows_last_first():
    """The backend's table holds ``tinit::ndtri_table``'s rows, each unchanged, in reverse order
    (``transform.ndtri_row`` reads row 255 - seg at bits >> 22)."""
    from tinit._ndtri_table import COEFFICIENTS, ROW, SEGMENTS

    rows = torch.tensor(host.ndtri_rows()).view(torch.int32).reshape(SEGMENTS, ROW)
    expected = torch.tensor(COEFFICIENTS, dtype=torch.float32).view(torch.int32).reshape(SEGMENTS, ROW)
    torch.testing.assert_close(rows, expected.flip(0), rtol=0, atol=0)


EXTREME_WORDS = [0, 1, 2, 2**31 - 1, 2**31, 2**31 + 1, 2**32 - 129, 2**32 - 128, 2**32 - 3, 2**32 - 2, 2**32 - 1]


@needs_native
@pytest.mark.parametrize("name", WINDOW_PARAMS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_extreme_and_split_words_bit_identical(dtype, name):
    """Words at both ends of the range and either side of the split word take the
    deepest tails, the last rows of the table and both sides of every select."""
    split = int(transform_constants(*WINDOWS[name], dtype).split)
    words = EXTREME_WORDS + [max(split - 1, 0), split, min(split + 1, 2**32 - 1)]
    for seed, stream, offset, block_words in place_words(words):
        got = _fill_triton(dtype, WINDOWS[name], numel=4, seed=seed, stream=stream, offset=offset, block=1)
        expected = _fill_cpu(dtype, WINDOWS[name], numel=4, seed=seed, stream=stream, offset=offset)
        bad = _bit_mismatches(got, expected)
        assert bad.numel() == 0, (
            f"{dtype}, window {name}: word {block_words[int(bad[0])]:#010x} gives {float(got[bad[0]])!r}, "
            f"CPU kernel {float(expected[bad[0]])!r}"
        )


@pytest.mark.parametrize("name", WINDOW_PARAMS)
def test_values_do_not_depend_on_block(name):
    window = WINDOWS[name]
    small = _fill_triton(torch.float32, window, numel=1031, block=16)
    large = _fill_triton(torch.float32, window, numel=1031, block=1024)
    assert _bit_mismatches(small, large).numel() == 0, f"window {name}: BLOCK 16 and 1024 differ"


def test_inner_dim_shard_through_the_backend_equals_cpu():
    """A column block of a (40, 30) weight via backend="triton" (one launch for all row runs): the CPU kernel's bits."""
    window = WINDOWS["two_sided"]
    whole = tinit.trunc_normal_at_(torch.empty(40, 30), *window, seed=SEED, stream=STREAM, backend="cpu")
    shard = tinit.trunc_normal_at_(
        torch.empty(40, 7),
        *window,
        seed=SEED,
        stream=STREAM,
        backend="triton",
        global_shape=(40, 30),
        shard_offsets=(0, 21),
    )
    assert _bit_mismatches(shard, whole[:, 21:28]).numel() == 0


def test_registered_op_matches_direct_launch():
    via_op = torch.empty(1031, dtype=torch.float16)
    tk.trunc_normal_triton_(via_op, SEED, STREAM, OFFSET, transform_constants(*WINDOWS["tail"], torch.float16))
    direct = _fill_triton(torch.float16, WINDOWS["tail"], numel=1031, block=64)
    torch.testing.assert_close(via_op, direct, rtol=0, atol=0)


def test_kernel_arguments_are_the_record_fields():
    """The kernel takes TruncNormalParams<float> by field name: every float field but sign
    (which only gives flip), and split; the mode is the MODE constexpr. Its arguments flip ... l5
    are, in order, the fields of the KernelParams record it passes to the transform."""
    constants = transform_constants(*WINDOWS["mirrored"], torch.float32)
    args = transform.kernel_constants(constants)
    assert set(transform.FLOAT_FIELDS) | {"mode", "sign", "split"} == set(TruncNormalParams._fields)
    assert args["MODE"] == Mode.TWO_SIDED and args["flip"] == -1
    assert args["split"] == host.i32_bits(int(constants.split))
    for name in transform.FLOAT_FIELDS:
        assert args[name] == host.f32(getattr(constants, name)), name
    assert set(transform.FLOAT_FIELDS) <= set(tk._trunc_normal_kernel.arg_names)
    fields = transform.KernelParams._fields
    assert fields == ("flip", "split", *transform.FLOAT_FIELDS)
    names = tk._trunc_normal_kernel.arg_names
    assert tuple(names[names.index("flip") : names.index("flip") + len(fields)]) == fields, names


# ------------------------------------------------------------- the op, errors


def test_opcheck():
    tensor = torch.empty(37, dtype=torch.bfloat16)
    args = (
        tensor,
        ops.as_int64(SEED),
        ops.as_int64(STREAM),
        3,
        list(transform_constants(*WINDOWS["two_sided"], torch.bfloat16)),
    )
    torch.library.opcheck(torch.ops.tinit.trunc_normal_triton_, args)


def test_zero_elements():
    out = torch.empty(0)
    tk.trunc_normal_triton_(out, 1, 2, 3, transform_constants(0.0, 1.0, -2.0, 2.0, torch.float32))
    assert tk.philox_words_triton(0, 1, 2, 3, device="cpu").shape == (0,)


def test_float64_is_refused():
    out = torch.empty(8, dtype=torch.float64)
    with pytest.raises(TypeError, match="float64"):
        tk.trunc_normal_triton_(out, 1, 2, 3, transform_constants(0.0, 1.0, -2.0, 2.0, torch.float64))
    assert "float64" in tk.why_not(out)


_GOOD = transform_constants(0.0, 1.0, -2.0, 2.0, torch.float32)


@pytest.mark.parametrize(
    ("tensor", "offset", "constants", "error"),
    [
        pytest.param(torch.empty(4, 4).t(), 0, None, "contiguous", id="non-contiguous"),
        pytest.param(torch.empty(4), -1, None, "offset", id="negative-offset"),
        pytest.param(
            torch.empty(4), 0, (0.0,) * (PARAM_COUNT - 1), f"{PARAM_COUNT} transform constants", id="short-constants"
        ),
        pytest.param(torch.empty(4), 0, (7.0,) + (0.0,) * (PARAM_COUNT - 1), "mode", id="bad-mode"),
        pytest.param(torch.empty(4), 0, (math.nan,) + (0.0,) * (PARAM_COUNT - 1), "mode", id="nan-mode"),
        pytest.param(torch.empty(4), 0, _GOOD._replace(split=2.0**32), "split", id="split-2^32"),
        pytest.param(torch.empty(4), 0, _GOOD._replace(a_cdf=0.9), "outside their range", id="a_cdf-past-table"),
        pytest.param(torch.empty(4), 0, _GOOD._replace(step=2.0**-31), "outside their range", id="step-past-table"),
        pytest.param(torch.empty(4), 0, _GOOD._replace(b_sf=math.nan), "outside their range", id="nan-b_sf"),
    ],
)
def test_bad_arguments_raise(tensor, offset, constants, error):
    constants = constants or _GOOD
    with pytest.raises(ValueError, match=error):
        tk.trunc_normal_triton_(tensor, 1, 2, offset, constants)


@pytest.mark.own_process
def test_module_imports_without_triton():
    """Without triton the module imports, says why, and raises ImportError only when called."""
    code = textwrap.dedent("""
        import sys

        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "triton" or name.startswith("triton."):
                    raise ImportError("triton blocked for this test")

        sys.meta_path.insert(0, Block())
        import torch
        from tinit.params import transform_constants
        from tinit.triton_kernels import trunc_normal as tk

        assert not tk.triton_available()
        assert "triton" in tk.why_not(torch.empty(1))
        try:
            tk.trunc_normal_triton_(torch.empty(1), 1, 2, 3, transform_constants(0.0, 1.0, -2.0, 2.0, torch.float32))
        except ImportError as exc:
            assert "pip install triton" in str(exc), exc
        else:
            raise AssertionError("no ImportError")
    """)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    result = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]


@pytest.mark.own_process
def test_stream_arguments_do_not_specialize():
    """Seed, stream and offset halves (and numel, flip, split) are not specialised, so a new
    seed, stream or offset value reuses the compiled kernel (checked on the compiled kernels)."""
    code = textwrap.dedent("""
        import json
        from tinit.triton_kernels import trunc_normal as tk
        from tinit.triton_kernels import trunc_normal_grouped as tg

        print(json.dumps({k.__name__: [p.name for p in k.params if p.do_not_specialize]
                          for k in (tk._trunc_normal_kernel, tk._philox_kernel, tg._grouped_kernel)}))
    """)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    result = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    found = {name: set(params) for name, params in json.loads(result.stdout).items()}
    stream = {f"{n}_{half}" for n in ("seed", "stream", "offset") for half in ("lo", "hi")}
    assert found["_trunc_normal_kernel"] >= stream | {"numel", "flip", "split"}, found
    assert found["_philox_kernel"] >= stream | {"numel"}, found
    assert found["_grouped_kernel"] >= {"seed_lo", "seed_hi", "n_entries", "entry_base", "const_base"}, found


# fp32 fused multiply-adds per element of each mode, counted from tinit::trunc_normal_value:
# UNIFORM: uniform_open 1, g 1, width g + edge 1. TWO_SIDED: two_sided_s's q and
# s 2, ndtri_poly 6 (horner 5 + the c0 step), mean + std z 2. TWO_SIDED_PRECISE:
# 2, ndtri_poly with p_lo 7, z_lo 1, main and small 2. TAIL: two uniforms 2,
# the log argument 1, log_pos 11, the square root's argument 1, two Newton
# steps of 10 (slope 4, l(e) 4, f 2), edge - std e 2. Any other fma would be
# a contraction of a separate multiply and add.
PTX_FMAS = {Mode.UNIFORM: 3, Mode.TWO_SIDED: 10, Mode.TWO_SIDED_PRECISE: 12, Mode.TAIL: 37}
# Word -> fp32 conversions (cvt.rn.f32.u32) per element: one per uniform_open or two_sided_s.
PTX_CONVERSIONS = {Mode.UNIFORM: 1, Mode.TWO_SIDED: 1, Mode.TWO_SIDED_PRECISE: 1, Mode.TAIL: 2}
# Correctly rounded divisions and square roots per element (tail_value's start and Newton steps).
PTX_DIV_SQRT = {Mode.UNIFORM: (0, 0), Mode.TWO_SIDED: (0, 0), Mode.TWO_SIDED_PRECISE: (0, 0), Mode.TAIL: (3, 1)}


@pytest.mark.own_process
def test_gpu_code_is_ieee_fp32_and_uncontracted():
    """Compiled for sm_90 (no GPU needed), every dtype and mode: no fp64 instruction, only
    correctly rounded division and square root, no approximate or flush-to-zero arithmetic,
    and exactly the fmas of tinit::trunc_normal_value (once per copy of the computation: the compiler may
    compute a cheap mode once for each of the two store paths)."""
    code = textwrap.dedent("""
        import json, re, sys
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
        from tinit.triton_kernels import trunc_normal as tk
        from tinit.triton_kernels.transform import FLOAT_FIELDS
        from triton.backends import backends

        if "nvidia" not in backends:
            sys.exit(3)  # a triton without its NVIDIA backend: nothing to compile with

        ints = ("seed_lo", "seed_hi", "stream_lo", "stream_hi", "offset_lo", "offset_hi", "flip", "split")
        result = {}
        for dtype, mode in json.loads(sys.argv[1]):
            types = {"out_ptr": "*" + dtype, "table_ptr": "*fp32", "numel": "i32", **{n: "i32" for n in ints},
                     **{n: "fp32" for n in FLOAT_FIELDS}, "MODE": "constexpr", "BLOCK": "constexpr"}
            sig = {n: types[n] for n in tk._trunc_normal_kernel.arg_names}
            attrs = {(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]]}
            src = ASTSource(tk._trunc_normal_kernel, sig, constexprs={"MODE": mode, "BLOCK": tk.DEFAULT_BLOCK},
                            attrs=attrs)
            ptx = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=tk.LAUNCH_OPTIONS).asm["ptx"]
            body = ptx[ptx.index(".entry"):]
            ops = re.findall(r"\\b((?:fma|div|sqrt|rcp|mul|add|sub|lg2|ex2|cvt|min|max)\\.[a-z0-9.]+)", body)
            result[f"{dtype},{mode}"] = {"ops": ops, "f64": len(re.findall(r"\\.f64\\b|%fd", body))}
        print(json.dumps(result))
    """)
    cases = [[dtype, int(mode)] for dtype in ("fp32", "bf16", "fp16") for mode in Mode]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    result = subprocess.run(
        [sys.executable, "-c", code, json.dumps(cases)],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    if result.returncode == 3:
        pytest.skip("this triton has no NVIDIA backend: nothing compiles for sm_90")
    assert result.returncode == 0, f"compiling the kernel for sm_90 failed:\n{result.stderr[-3000:]}"
    per_thread = 4 * tk.DEFAULT_BLOCK // (32 * tk.LAUNCH_OPTIONS["num_warps"])  # elements per thread
    found = json.loads(result.stdout)
    assert len(found) == len(cases)
    for key, info in found.items():
        mode, insts = Mode(int(key.split(",")[1])), info["ops"]
        assert info["f64"] == 0, f"{key}: {info['f64']} fp64 instructions or registers"
        inexact = sorted({i for i in insts if any(t in i for t in ("approx", "full", "ftz", "rcp", "lg2", "ex2"))})
        assert not inexact, f"{key}: inexact instructions {inexact}"
        assert all(".rn" in i for i in insts if i.startswith(("div.", "sqrt."))), f"{key}: {sorted(set(insts))}"
        copies = insts.count("cvt.rn.f32.u32") / (per_thread * PTX_CONVERSIONS[mode])
        assert copies in (1, 2), f"{key}: {copies} copies of the uniform conversions"
        fmas = insts.count("fma.rn.f32") / (per_thread * copies)
        assert fmas == PTX_FMAS[mode], f"{key}: {fmas} fmas per element, tinit::trunc_normal_value has {PTX_FMAS[mode]}"
        div_sqrt = (
            insts.count("div.rn.f32") / (per_thread * copies),
            insts.count("sqrt.rn.f32") / (per_thread * copies),
        )
        assert div_sqrt == PTX_DIV_SQRT[mode], f"{key}: (div, sqrt) per element {div_sqrt}"
