"""The Triton kernel in the Triton interpreter, on small CPU tensors.

Layers as in tests/test_philox.py: the Philox rounds against the published
vectors, the uint32 stream against the CPU kernel, then the values:
bit-identical to the CPU kernel (the interpreter's tl.fma is a true fused
multiply-add), within the backend contract of issue 3 (2 fp32 ulp of
max(|x|, std); bf16/fp16 equal except across a rounding boundary),
independent of BLOCK, changed by seed and stream; and the sm_90 code, compiled
without a GPU, uses only IEEE operations and exactly transform.h's fmas.

The interpreter is chosen when a kernel is decorated, so TRITON_INTERPRET=1 is
set while tinit's kernels (tinit.triton_kernels.trunc_normal, reloaded if it
was imported before) and this module's test kernels are created, and while its
tests run; afterwards the variable and compiled kernels are restored. triton
itself is imported before the variable is set, so that triton.language's own
@triton.jit helpers stay compiled for the rest of the process (tinit's kernels
use none of them); the check of tl.philox, which is one, runs in a subprocess.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

try:
    import triton
    import triton.language as tl
except ImportError:
    pytest.skip("triton is not installed (pip install triton): the triton backend is not tested",
                allow_module_level=True)
import torch
from conftest import assert_within_ulp, oracle, place_words, ulp

import tinit
from tinit import ops
from tinit.params import transform_constants

_MODULE = "tinit.triton_kernels.trunc_normal"
_PREVIOUS_INTERPRET = os.environ.get("TRITON_INTERPRET")


def _restore_interpret_env() -> None:
    if _PREVIOUS_INTERPRET is None:
        os.environ.pop("TRITON_INTERPRET", None)
    else:
        os.environ["TRITON_INTERPRET"] = _PREVIOUS_INTERPRET


os.environ["TRITON_INTERPRET"] = "1"  # until the test kernels below are defined
tk = importlib.import_module(_MODULE)
if not tk.interpreted():  # imported earlier outside the interpreter: re-create its kernels in it
    tk = importlib.reload(tk)

needs_native = pytest.mark.skipif(
    not ops.native_available(),
    reason=f"the CPU kernel is the reference here and is not built ({ops.native_load_error()}); {ops.BUILD_HINT}",
)

KAT = json.loads((Path(__file__).parent / "data" / "philox4x32_10_kat.json").read_text())["vectors"]
KAT_PARAMS = [pytest.param(v, id=f"kat{i}") for i, v in enumerate(KAT)]

DTYPES = [pytest.param(torch.float32, id="f32"), pytest.param(torch.bfloat16, id="bf16"),
          pytest.param(torch.float16, id="f16")]
# (mean, std, a, b), absolute bounds; together they select every TransformMode
# (checked below; "central" is kCentral for bf16/fp16 and kTwoSided for fp32).
WINDOWS = {
    "central": (0.0, 1.0, -2.0, 2.0),         # +-2 sigma: ndtri_central
    "two_sided": (0.0, 0.002, -2.0, 2.0),     # +-1000 sigma: AS 241 without the far branch
    "mirrored": (0.0, 1.0, -1.0, 4.0),        # sign -1, complement words
    "far": (0.0, 1.0, -9.0, -5.0),            # AS 241 far-tail branch
    "tail": (0.0, 1.0, 20.0, 25.0),           # log-space tail mode, mirrored
}
WINDOW_PARAMS = [pytest.param(name, id=name) for name in WINDOWS]
SEED, STREAM = 0x9E3779B97F4A7C15, 0xD1B54A32D192ED03  # both >= 2**63
OFFSET = 2**32 + 4097 * 4 + 3  # past 2**32, odd
NUMEL = 4099                   # prime
INT_VIEW = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16}


@triton.jit
def _kat_kernel(out_ptr, c0, c1, c2, c3, k0, k1):
    """One call of the kernel's Philox rounds on explicit words (int32 bit patterns)."""
    zero = tl.full([1], 0, tl.uint32)
    r0, r1, r2, r3 = tk._philox4x32_10(zero + tk._u32(c0), zero + tk._u32(c1), zero + tk._u32(c2),
                                       zero + tk._u32(c3), zero + tk._u32(k0), zero + tk._u32(k1))
    lane = tl.arange(0, 1)
    tl.store(out_ptr + lane, r0.to(tl.int32, bitcast=True))
    tl.store(out_ptr + 1 + lane, r1.to(tl.int32, bitcast=True))
    tl.store(out_ptr + 2 + lane, r2.to(tl.int32, bitcast=True))
    tl.store(out_ptr + 3 + lane, r3.to(tl.int32, bitcast=True))


_restore_interpret_env()


@pytest.fixture(scope="module", autouse=True)
def _interpreter():
    """TRITON_INTERPRET=1 while this module's tests run; afterwards the previous
    value and, unless the interpreter was on before, compiled kernels again."""
    os.environ["TRITON_INTERPRET"] = "1"
    yield
    _restore_interpret_env()
    if _PREVIOUS_INTERPRET != "1":
        importlib.reload(tk)


def test_kernels_run_in_the_interpreter():
    assert tk.interpreted(), "TRITON_INTERPRET=1 was not in effect when the kernels were created"


# ------------------------------------------------------------------ Philox

def _kat_words(kernel, vector) -> list[int]:
    args = [tk._i32_bits(int(w, 16)) for w in vector["counter"] + vector["key"]]
    out = torch.zeros(4, dtype=torch.int32)
    kernel[(1,)](out, *args)
    return [w & 0xFFFFFFFF for w in out.tolist()]


@pytest.mark.parametrize("vector", KAT_PARAMS)
def test_philox_rounds_known_answers(vector):
    expected = [int(w, 16) for w in vector["output"]]
    assert _kat_words(_kat_kernel, vector) == expected, "Triton Philox rounds vs published vector"


def test_tl_philox_has_the_same_convention():
    """tl.philox(seed, c0..c3) keys with (seed mod 2^32, seed >> 32) and takes the counter
    in philox.h's order: it also meets the published vectors (interpreted, in a subprocess)."""
    code = textwrap.dedent("""
        import json, sys
        import torch
        import triton
        import triton.language as tl
        from tinit.triton_kernels import trunc_normal as tk

        @triton.jit
        def kat(out_ptr, c0, c1, c2, c3, k0, k1):
            zero = tl.full([1], 0, tl.uint32)
            r0, r1, r2, r3 = tl.philox(tk._join_u64(k0, k1), zero + tk._u32(c0), zero + tk._u32(c1),
                                       zero + tk._u32(c2), zero + tk._u32(c3))
            words = tl.reshape(tl.join(tl.join(r0, r2), tl.join(r1, r3)), [4])
            tl.store(out_ptr + tl.arange(0, 4), words.to(tl.int32, bitcast=True))

        result = []
        for vector in json.loads(sys.argv[1]):
            out = torch.zeros(4, dtype=torch.int32)
            kat[(1,)](out, *[tk._i32_bits(int(w, 16)) for w in vector["counter"] + vector["key"]])
            result.append([w & 0xFFFFFFFF for w in out.tolist()])
        print(json.dumps(result))
    """)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    result = subprocess.run([sys.executable, "-c", code, json.dumps(KAT)], check=False, capture_output=True,
                            text=True, env=env, timeout=120)
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
@pytest.mark.parametrize(("seed", "stream", "offset", "numel"), [
    pytest.param(0, 0, 0, 1031, id="zero"),
    pytest.param(SEED, STREAM, 1, 1031, id="odd-offset"),
    pytest.param(2**32 - 1, 2**31 + 1, 2**32 - 3, 1031, id="offset-across-2^32"),
    pytest.param(2**64 - 1, 2**64 - 1, 2**34 - 7, 1031, id="block-across-2^32"),
    pytest.param(1, 2**32, 2**62 + 5, 517, id="offset-2^62"),
])
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

def _fill_triton(dtype, window, *, numel=NUMEL, seed=SEED, stream=STREAM, offset=OFFSET, block=2048):
    out = torch.empty(numel, dtype=dtype)
    tk.trunc_normal_triton_(out, seed, stream, offset, transform_constants(*window, dtype), block=block)
    return out


def _fill_cpu(dtype, window, *, numel=NUMEL, seed=SEED, stream=STREAM, offset=OFFSET):
    out = torch.empty(numel, dtype=dtype)
    ops.trunc_normal_native(out, seed, stream, offset, transform_constants(*window, dtype))
    return out


@functools.cache
def _pair(dtype, name):
    """(triton, cpu) fills of WINDOWS[name] at (SEED, STREAM, OFFSET), computed once."""
    return _fill_triton(dtype, WINDOWS[name]), _fill_cpu(dtype, WINDOWS[name])


def _bit_mismatches(got: torch.Tensor, expected: torch.Tensor) -> torch.Tensor:
    return torch.nonzero(got.view(INT_VIEW[got.dtype]) != expected.view(INT_VIEW[got.dtype])).flatten()


def assert_equal_or_boundary(got, expected, exact, *, dtype, std, what):
    """Low-precision values equal, or one ulp apart where the exact value sits on the
    rounding boundary between them (within 8 fp32 ulp of max(|x|, std) of the midpoint)."""
    g, e = got.double().numpy(), expected.double().numpy()
    differ = g != e
    if not differ.any():
        return
    one_ulp = np.abs(g - e) <= ulp(np.minimum(np.abs(g), np.abs(e)), dtype)
    mid = 0.5 * (g + e)
    near = np.abs(np.asarray(exact) - mid) <= 8 * ulp(np.maximum(np.abs(mid), std), torch.float32)
    bad = np.flatnonzero(differ & ~(one_ulp & near))
    assert bad.size == 0, (
        f"{what}: {bad.size} of {g.size} values differ beyond a rounding boundary; first at index {bad[0]}: "
        f"got {g[bad[0]]!r}, expected {e[bad[0]]!r}, exact {float(np.asarray(exact)[bad[0]])!r}"
    )


def test_windows_cover_every_mode():
    modes = {int(transform_constants(*window, dtype)[0])
             for window in WINDOWS.values() for dtype in (torch.float32, torch.bfloat16, torch.float16)}
    assert modes == set(tk._MODES), f"the test windows select modes {sorted(modes)} only"


@needs_native
@pytest.mark.parametrize("name", WINDOW_PARAMS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_values_within_contract_of_cpu_kernel(dtype, name):
    """Issue 3: fp32 within 2 ulp of max(|x|, std); bf16/fp16 equal but at rounding boundaries."""
    got, expected = _pair(dtype, name)
    mean, std, a, b = WINDOWS[name]
    what = f"triton vs CPU kernel, {dtype}, window {name}"
    if dtype == torch.float32:
        assert_within_ulp(got, expected.double().numpy(), scale=std, dtype=dtype, max_ulp=2, what=what)
    elif _bit_mismatches(got, expected).numel():
        words = ops.philox_words(NUMEL, SEED, STREAM, OFFSET).numpy()
        assert_equal_or_boundary(got, expected, oracle(words, mean, std, a, b), dtype=dtype, std=std, what=what)
    assert bool(((got >= a) & (got <= b)).all()), f"{what}: values outside [{a}, {b}]"


@needs_native
@pytest.mark.parametrize("name", WINDOW_PARAMS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_values_bit_identical_to_cpu_kernel(dtype, name):
    """The kernel mirrors transform.h op for op, so every value has the CPU kernel's bits."""
    got, expected = _pair(dtype, name)
    bad = _bit_mismatches(got, expected)
    assert bad.numel() == 0, (
        f"{bad.numel()} of {NUMEL} values ({dtype}, window {name}) differ in bits from the CPU kernel; "
        f"first at index {int(bad[0])}: got {float(got[bad[0]])!r}, expected {float(expected[bad[0]])!r}. "
        "triton_kernels/trunc_normal.py and csrc/include/tinit/transform.h are out of step, or the "
        "native extension was built from an older transform.h (rebuild it)"
    )


EXTREME_WORDS = [0, 1, 2, 2**31 - 1, 2**31, 2**31 + 1, 2**32 - 3, 2**32 - 2, 2**32 - 1]


@needs_native
@pytest.mark.parametrize("name", WINDOW_PARAMS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_extreme_and_split_words_bit_identical(dtype, name):
    """Words at both ends of the range and either side of the split word take the
    deepest tails and both sides of every select."""
    constants = transform_constants(*WINDOWS[name], dtype)
    split = int(constants[7])
    words = EXTREME_WORDS + [split - 1, split, min(split + 1, 2**32 - 1)]
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


def test_shard_equals_slice_of_whole():
    whole = _fill_triton(torch.bfloat16, WINDOWS["central"], numel=2000)
    shard = _fill_triton(torch.bfloat16, WINDOWS["central"], numel=1001, offset=OFFSET + 999)
    torch.testing.assert_close(shard, whole[999:], rtol=0, atol=0)


def test_inner_dim_shard_through_the_backend_equals_cpu():
    """A column block of a (40, 30) weight via backend="triton" (one launch for all row runs): the CPU kernel's bits."""
    window = WINDOWS["central"]
    whole = tinit.trunc_normal_at_(torch.empty(40, 30), *window, seed=SEED, stream=STREAM, backend="cpu")
    shard = tinit.trunc_normal_at_(torch.empty(40, 7), *window, seed=SEED, stream=STREAM, backend="triton",
                                   global_shape=(40, 30), shard_offsets=(0, 21))
    assert _bit_mismatches(shard, whole[:, 21:28]).numel() == 0


def test_registered_op_matches_direct_launch():
    via_op = torch.empty(1031, dtype=torch.float16)
    tk.trunc_normal_triton_(via_op, SEED, STREAM, OFFSET, transform_constants(*WINDOWS["far"], torch.float16))
    direct = _fill_triton(torch.float16, WINDOWS["far"], numel=1031, block=64)
    torch.testing.assert_close(via_op, direct, rtol=0, atol=0)


@pytest.mark.parametrize(("seed", "stream"), [pytest.param(SEED + 1, STREAM, id="seed"),
                                              pytest.param(SEED, STREAM + 1, id="stream"),
                                              pytest.param(SEED, STREAM + 2**32, id="stream-high-word")])
def test_seed_and_stream_change_values(seed, stream):
    base = _fill_triton(torch.float32, WINDOWS["central"], numel=512)
    other = _fill_triton(torch.float32, WINDOWS["central"], numel=512, seed=seed, stream=stream)
    assert int((base == other).sum()) < 8, "a different seed or stream should give a different tensor"


# ------------------------------------------------------------- the op, errors

def test_opcheck():
    tensor = torch.empty(37, dtype=torch.bfloat16)
    args = (tensor, ops.as_int64(SEED), ops.as_int64(STREAM), 3,
            list(transform_constants(*WINDOWS["central"], torch.bfloat16)))
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


@pytest.mark.parametrize(("tensor", "offset", "constants", "error"), [
    pytest.param(torch.empty(4, 4).t(), 0, None, "contiguous", id="non-contiguous"),
    pytest.param(torch.empty(4), -1, None, "offset", id="negative-offset"),
    pytest.param(torch.empty(4), 0, (0.0,) * 13, "14 transform constants", id="short-constants"),
    pytest.param(torch.empty(4), 0, (7.0,) + (0.0,) * 13, "mode", id="bad-mode"),
])
def test_bad_arguments_raise(tensor, offset, constants, error):
    constants = constants or transform_constants(0.0, 1.0, -2.0, 2.0, torch.float32)
    with pytest.raises(ValueError, match=error):
        tk.trunc_normal_triton_(tensor, 1, 2, offset, constants)


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
        from tinit.triton_kernels import trunc_normal as tk

        assert not tk.triton_available()
        assert "triton" in tk.why_not(torch.empty(1))
        try:
            tk.trunc_normal_triton_(torch.empty(1), 1, 2, 3, (0.0,) * 12)
        except ImportError as exc:
            assert "pip install triton" in str(exc), exc
        else:
            raise AssertionError("no ImportError")
    """)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    result = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]


# Fused multiply-adds per element of the fill, counted from transform.h as
# (fp32, fp64): uniform_open 1, the s and q of two_sided_s 2, log_pos 11, the AS 241
# rationals 1 + 4 * 7 (fp64 for fp32 tensors), ndtri_central 1 + 11 + 12 + 1,
# tail mode 2 uniforms and 5 log_pos, and mean + std z 1. Any other fma would
# be a contraction of a separate multiply and add.
PTX_FMAS = {
    ("fp32", 0): (14, 30), ("fp32", 1): (101, 1), ("fp32", 2): (14, 30),
    ("bf16", 0): (44, 0), ("bf16", 1): (102, 0), ("bf16", 3): (29, 0),
}


def test_gpu_code_is_ieee_and_uncontracted():
    """Compiled for sm_90 (no GPU needed): only correctly rounded division and square
    root, no approximate or flush-to-zero arithmetic, and exactly the fmas of transform.h."""
    code = textwrap.dedent("""
        import json, re, sys
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
        from tinit.triton_kernels import trunc_normal as tk
        from triton.backends import backends

        if "nvidia" not in backends:
            sys.exit(3)  # a triton without its NVIDIA backend: nothing to compile with

        ints = ("seed_lo", "seed_hi", "stream_lo", "stream_hi", "offset_lo", "offset_hi", "flip", "split")
        floats = ("sign", "a_cdf", "b_sf", "mass", "log_b_cdf", "ratio", "mean", "std", "lo", "hi", "a_half",
                  "b_half")
        result = {}
        for dtype, mode in json.loads(sys.argv[1]):
            sig = {"out_ptr": "*" + dtype, "numel": "i64", **{n: "i32" for n in ints},
                   **{n: "fp32" for n in floats}, "MODE": "constexpr", "BLOCK": "constexpr"}
            src = ASTSource(tk._trunc_normal_kernel, sig, constexprs={"MODE": mode, "BLOCK": tk.DEFAULT_BLOCK})
            ptx = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=tk.LAUNCH_OPTIONS).asm["ptx"]
            ops = re.findall(r"\\b((?:fma|div|sqrt|rcp|mul|add|sub|lg2|ex2)\\.[a-z0-9.]+)", ptx)
            result[f"{dtype},{mode}"] = ops
        print(json.dumps(result))
    """)
    cases = [list(key) for key in PTX_FMAS]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    result = subprocess.run([sys.executable, "-c", code, json.dumps(cases)], check=False, capture_output=True,
                            text=True, env=env, timeout=300)
    if result.returncode == 3:
        pytest.skip("this triton has no NVIDIA backend: nothing compiles for sm_90")
    assert result.returncode == 0, f"compiling the kernel for sm_90 failed:\n{result.stderr[-3000:]}"
    per_thread = 4 * tk.DEFAULT_BLOCK // (32 * tk.LAUNCH_OPTIONS["num_warps"])  # elements per thread
    for key, insts in json.loads(result.stdout).items():
        dtype, mode = key.split(",")
        inexact = sorted({i for i in insts if any(t in i for t in ("approx", "full", "ftz", "rcp", "lg2", "ex2"))})
        assert not inexact, f"{key}: inexact instructions {inexact}"
        assert all(".rn" in i for i in insts if i.startswith(("div.", "sqrt."))), f"{key}: {sorted(set(insts))}"
        fmas = (insts.count("fma.rn.f32") / per_thread, insts.count("fma.rn.f64") / per_thread)
        assert fmas == PTX_FMAS[(dtype, int(mode))], f"{key}: fmas per element (f32, f64) {fmas}"
