"""The grouped Triton kernel (tinit.triton_kernels.trunc_normal_grouped) in the Triton interpreter.

Grouped fills and shard row runs must give exactly the CPU ops' bits
(``tinit::trunc_normal_grouped_``, ``tinit::trunc_normal_runs_``, which equal
one ``trunc_normal_`` per tensor), whatever the program size or batching, in
one launch per dtype (grouped) or one launch (runs), and must refuse bad
input before writing anything. The sm_90 code is compiled without a GPU; the
compiled kernels on a GPU are checked by ``test_compiled_on_gpu`` (skipped
without CUDA).

TRITON_INTERPRET=1 is set, and both kernel modules are reloaded into the
interpreter when they were compiled, while this module's tests run; afterwards
the variable and, if they were reloaded, compiled kernels are restored.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import textwrap

import pytest

try:
    import triton  # noqa: F401
except ImportError:
    pytest.skip("triton is not installed (pip install triton): the triton backend is not tested",
                allow_module_level=True)
import torch
from conftest import triton_interpreted

import tinit
from tinit import ops
from tinit.params import transform_constants
from tinit.sharding import ShardLayout

tk = importlib.import_module("tinit.triton_kernels.trunc_normal")
tg = importlib.import_module("tinit.triton_kernels.trunc_normal_grouped")

needs_native = pytest.mark.skipif(
    not ops.native_available(),
    reason=f"the CPU ops are the reference here and are not built ({ops.native_load_error()}); {ops.BUILD_HINT}",
)

DTYPES = (torch.float32, torch.bfloat16, torch.float16)
DTYPE_PARAMS = [pytest.param(torch.float32, id="f32"), pytest.param(torch.bfloat16, id="bf16"),
                pytest.param(torch.float16, id="f16")]
INT_VIEW = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16}
# (mean, std, a, b), absolute bounds, one per TransformMode (tinit/params.py):
# kTwoSided (+-1000 sigma), kTail (log space), kTwoSidedFar (AS 241 far
# branch), kCentral (+-2 sigma, ndtri_central).
WINDOWS = ((0.0, 0.002, -2.0, 2.0), (0.0, 1.0, 20.0, 25.0), (0.0, 1.0, -9.0, -5.0), (0.0, 1.0, -2.0, 2.0))
SIZES = (0, 1, 3, 4, 5, 257, 4097)
SEED = 0x9E3779B97F4A7C15  # >= 2**63
STREAM = 0xD1B54A32D192ED03  # >= 2**63
FAR = 2**34 + 5  # an offset past 2**34 (odd: its counter block starts before it)


@pytest.fixture(scope="module", autouse=True)
def _interpreter():
    """TRITON_INTERPRET=1 and interpreted kernels while this module's tests run."""
    with triton_interpreted():
        yield


@pytest.fixture
def launches(monkeypatch):
    """Every launch of the grouped and the single-tensor kernel, as ("grouped", DTYPE code) or ("single", None)."""
    seen = []
    for name, kernel in (("grouped", tg._grouped_kernel), ("single", tk._trunc_normal_kernel)):
        def counted(*args, _name=name, _run=kernel.run, **kwargs):
            seen.append((_name, kwargs.get("DTYPE")))
            return _run(*args, **kwargs)

        monkeypatch.setattr(kernel, "run", counted)
    return seen


def _mixed_list():
    """Tensors of every size in SIZES at every offset % 4, cycling dtypes and modes (all 12 pairs)."""
    tensors, streams, offsets, packed = [], [], [], []
    for i, (size, residue) in enumerate((s, r) for s in SIZES for r in range(4)):
        dtype = DTYPES[i % 3]
        tensors.append(torch.full((size,), 7.0, dtype=dtype))
        streams.append(STREAM + i if i % 5 else 2**64 - 1 - i)
        offsets.append((FAR - 5 if size == 4097 else 4 * i) + residue)
        packed.append(transform_constants(*WINDOWS[(i // 3) % 4], dtype))
    return tensors, streams, offsets, packed


def _assert_bits_equal(got: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    view = INT_VIEW[got.dtype]
    bad = torch.nonzero(got.reshape(-1).view(view) != expected.reshape(-1).view(view)).flatten()
    assert bad.numel() == 0, (
        f"{what}: {bad.numel()} of {got.numel()} values differ in bits; first at flat index {int(bad[0])}: "
        f"got {float(got.reshape(-1)[bad[0]])!r}, expected {float(expected.reshape(-1)[bad[0]])!r}"
    )


def _cpu_grouped(tensors, streams, offsets, packed, seed=SEED):
    out = [torch.empty_like(t) for t in tensors]
    ops.trunc_normal_grouped_native(out, seed, streams, offsets, packed)
    return out


def test_windows_cover_every_mode():
    modes = {int(transform_constants(*w, d)[0]) for w in WINDOWS for d in DTYPES}
    assert modes == {0, 1, 2, 3}, f"the test windows select modes {sorted(modes)} only"


# ------------------------------------------------------------------ grouped

@needs_native
def test_grouped_equals_cpu_op_in_one_launch_per_dtype(launches):
    tensors, streams, offsets, packed = _mixed_list()
    expected = _cpu_grouped(tensors, streams, offsets, packed)
    tg.trunc_normal_grouped_(tensors, SEED, streams, offsets, packed)
    for t, (got, want) in enumerate(zip(tensors, expected)):
        _assert_bits_equal(got, want, f"tensor {t} ({got.dtype}, {got.numel()} elements, offset {offsets[t]})")
    assert sorted(launches) == [("grouped", 0), ("grouped", 1), ("grouped", 2)], launches


@needs_native
def test_values_do_not_depend_on_block_or_batching():
    tensors, streams, offsets, packed = _mixed_list()
    keep = [t for t, x in enumerate(tensors) if x.numel() <= 257]  # small: BLOCK 4 means many programs
    tensors = [tensors[t] for t in keep]
    streams, offsets, packed = ([v[t] for t in keep] for v in (streams, offsets, packed))
    expected = _cpu_grouped(tensors, streams, offsets, packed)
    for block in (4, 64):
        out = [torch.empty_like(x) for x in tensors]
        tg.trunc_normal_grouped_(out, SEED, streams, offsets, packed, block=block)
        for t, (got, want) in enumerate(zip(out, expected)):
            _assert_bits_equal(got, want, f"block {block}, tensor {t}")
    alone = torch.empty_like(tensors[-1])  # the same tensor in a group of one
    tg.trunc_normal_grouped_([alone], SEED, streams[-1:], offsets[-1:], packed[-1:])
    _assert_bits_equal(alone, expected[-1], "a group of one")


def test_grouped_equals_single_tensor_kernel():
    constants = transform_constants(*WINDOWS[3], torch.bfloat16)
    single = torch.empty(1031, dtype=torch.bfloat16)
    tk.trunc_normal_triton_(single, SEED, STREAM, FAR, constants)
    grouped = torch.empty(1031, dtype=torch.bfloat16)
    tg.trunc_normal_grouped_([grouped], SEED, [STREAM], [FAR], [constants])
    _assert_bits_equal(grouped, single, "grouped vs trunc_normal_triton_")


def test_nothing_to_fill_launches_nothing(launches):
    tg.trunc_normal_grouped_([], SEED, [], [], [])
    empty = [torch.empty(0, dtype=d) for d in DTYPES]
    tg.trunc_normal_grouped_(empty, SEED, [0, 1, 2], [0, 1, 2], [transform_constants(*WINDOWS[0], d) for d in DTYPES])
    tg.trunc_normal_grouped_([torch.empty(5, device="meta")], SEED, [0], [0],
                             [transform_constants(*WINDOWS[0], torch.float32)])
    assert launches == []


def _good():
    return [torch.full((9,), 7.0), torch.full((5,), 7.0, dtype=torch.float16)]


GOOD_CONSTANTS = [transform_constants(*WINDOWS[0], torch.float32), transform_constants(*WINDOWS[0], torch.float16)]


@pytest.mark.parametrize(("extra", "seed", "stream", "offset", "constants", "error"), [
    pytest.param(torch.empty(4, 4).t(), SEED, 1, 0, None, (ValueError, "contiguous"), id="non-contiguous"),
    pytest.param(torch.empty(4, dtype=torch.float64), SEED, 1, 0, None, (TypeError, "float64"), id="float64"),
    pytest.param(torch.empty(4, device="meta"), SEED, 1, 0, None, (ValueError, "device"), id="two-devices"),
    pytest.param("x", SEED, 1, 0, None, (TypeError, "Tensor"), id="not-a-tensor"),
    pytest.param(torch.empty(4), SEED, 1, -1, None, (ValueError, "offsets"), id="negative-offset"),
    pytest.param(torch.empty(4), SEED, 1, 2**63 - 3, None, (ValueError, "2\\*\\*63"), id="past-2^63"),
    pytest.param(torch.empty(4), SEED, 2**64, 0, None, (ValueError, "streams"), id="stream-2^64"),
    pytest.param(torch.empty(4), -1, 1, 0, None, (ValueError, "seed"), id="negative-seed"),
    pytest.param(torch.empty(4), SEED, 1, 0, (7.0,) + (0.0,) * 13, (ValueError, "mode"), id="bad-mode"),
    pytest.param(torch.empty(4), SEED, 1, 0, (0.0,) * 13, (ValueError, "14"), id="short-constants"),
])
def test_bad_input_raises_before_writing(extra, seed, stream, offset, constants, error, launches):
    tensors = [*_good(), extra]
    constants = constants or transform_constants(*WINDOWS[0], torch.float32)
    with pytest.raises(error[0], match=error[1]):
        tg.trunc_normal_grouped_(tensors, seed, [1, 2, stream], [0, 0, offset], [*GOOD_CONSTANTS, constants])
    for t, tensor in enumerate(tensors[:2]):
        torch.testing.assert_close(tensor, torch.full_like(tensor, 7.0), rtol=0, atol=0,
                                   msg=lambda m, t=t: f"tensor {t} written before the error: {m}")
    assert launches == []


def test_mismatched_lengths_raise():
    with pytest.raises(ValueError, match="one constants tuple per tensor"):
        tg.trunc_normal_grouped_(_good(), SEED, [1, 2], [0, 0], GOOD_CONSTANTS[:1])
    with pytest.raises(ValueError, match="one stream and one offset"):
        tg.trunc_normal_grouped_(_good(), SEED, [1, 2], [0], GOOD_CONSTANTS)


# -------------------------------------------------------------------- runs

RUN_LAYOUTS = [
    pytest.param((40, 30), (40, 7), (0, 21), id="shard1-2d"),
    pytest.param((5, 12, 9), (5, 4, 9), (0, 4, 0), id="middle-dim-3d"),
    pytest.param((4, 6, 10), (4, 3, 5), (0, 2, 5), id="two-outer-dims-3d"),
]


@needs_native
@pytest.mark.parametrize("dtype", DTYPE_PARAMS)
@pytest.mark.parametrize(("global_shape", "local_shape", "offsets"), RUN_LAYOUTS)
def test_runs_equal_cpu_op_in_one_launch(global_shape, local_shape, offsets, dtype, launches):
    runs = ShardLayout.from_offsets(global_shape, local_shape, offsets).runs(FAR)
    assert not runs.contiguous
    constants = transform_constants(*WINDOWS[3], dtype)
    expected = torch.empty(local_shape, dtype=dtype)
    ops.trunc_normal_runs_native(expected, SEED, STREAM, runs, constants)
    got = torch.empty(local_shape, dtype=dtype)
    tg.trunc_normal_runs_(got, SEED, STREAM, runs, constants)
    _assert_bits_equal(got, expected, f"runs of {local_shape} in {global_shape} at {offsets}")
    assert launches == [("grouped", tg._DTYPE_CODES[dtype])]
    if dtype == torch.bfloat16:  # rows at 2-byte-aligned addresses, several programs per row
        small = torch.empty(local_shape, dtype=dtype)
        tg.trunc_normal_runs_(small, SEED, STREAM, runs, constants, block=2)
        _assert_bits_equal(small, expected, "runs with block 2")


@needs_native
def test_inner_dim_shard_through_the_backend_is_one_launch(launches):
    window = WINDOWS[3]
    whole = tinit.trunc_normal_at_(torch.empty(40, 30), *window, seed=SEED, stream=STREAM, backend="cpu")
    shard = tinit.trunc_normal_at_(torch.empty(40, 7), *window, seed=SEED, stream=STREAM, backend="triton",
                                   global_shape=(40, 30), shard_offsets=(0, 21))
    _assert_bits_equal(shard, whole[:, 21:28], "backend='triton' shard vs CPU whole")
    assert launches == [("grouped", 0)], "one launch for all 40 row runs"


@needs_native
def test_write_grouped_uses_the_triton_table(launches, monkeypatch):
    """tinit.write_grouped_ (init_model_'s path) on the triton backend: small truncated normals
    in one launch per dtype, a tensor above GPU_TABLE_MAX_NUMEL in a launch of its own, a
    constant by fill_; every value the CPU backend's."""
    from tinit import grouped, schemes

    monkeypatch.setattr(grouped, "GPU_TABLE_MAX_NUMEL", 100)
    specs = [schemes.InitSpec(std=0.02), schemes.InitSpec(std=1.0, trunc=3.0), schemes.InitSpec(constant=1.0)]
    shapes = [(7, 5), (3,), (101,), (4, 4), (64,)]
    dtypes = [torch.float32, torch.bfloat16, torch.float16, torch.bfloat16, torch.float32]
    items = [grouped.FillItem(torch.full(shape, 9.0, dtype=dtype), specs[i % 2], stream=STREAM - i, offset=3 * i)
             for i, (shape, dtype) in enumerate(zip(shapes, dtypes))]
    items.append(grouped.FillItem(torch.full((5,), 9.0), specs[2], stream=0))
    expected = [torch.empty_like(item.tensor) for item in items]
    grouped.write_grouped_([item._replace(tensor=t) for item, t in zip(items, expected)], seed=SEED, backend="cpu")
    grouped.write_grouped_(items, seed=SEED, backend="triton")
    for item, want in zip(items, expected):
        _assert_bits_equal(item.tensor, want, f"triton grouped item {tuple(item.tensor.shape)} {item.tensor.dtype}")
    # f32 (7, 5) and (64,) in one launch, bf16 (3,) and (4, 4) in another, f16 (101,) alone
    assert sorted(launches, key=str) == sorted([("grouped", 0), ("grouped", 1), ("single", None)], key=str), launches


@pytest.mark.parametrize(("tensor", "layout", "error"), [
    pytest.param(torch.full((40, 8), 7.0), ((40, 30), (40, 7), (0, 21)), "elements", id="wrong-size"),
    pytest.param(torch.full((7, 40), 7.0).t(), ((40, 30), (40, 7), (0, 21)), "contiguous", id="non-contiguous"),
])
def test_runs_bad_input_raises_before_writing(tensor, layout, error, launches):
    runs = ShardLayout.from_offsets(*layout).runs(0)
    with pytest.raises(ValueError, match=error):
        tg.trunc_normal_runs_(tensor, SEED, STREAM, runs, transform_constants(*WINDOWS[3], torch.float32))
    torch.testing.assert_close(tensor, torch.full_like(tensor, 7.0), rtol=0, atol=0)
    assert launches == []


def test_runs_past_2_63_raise():
    runs = ShardLayout.from_offsets((40, 30), (40, 7), (0, 21)).runs(2**63 - 1000)
    with pytest.raises(ValueError, match="2\\*\\*63"):
        tg.trunc_normal_runs_(torch.empty(40, 7), SEED, STREAM, runs, transform_constants(*WINDOWS[3], torch.float32))


# --------------------------------------------------------------- the ops

def test_opcheck_grouped_and_runs():
    """The custom ops' fake kernels and mutation declarations (the interpreter is fine here:
    custom_op bodies are opaque to fake tensors, unlike triton_op's)."""
    tensors = [torch.empty(37, dtype=torch.bfloat16), torch.empty(5), torch.empty(0, dtype=torch.float16)]
    packed = [transform_constants(*WINDOWS[i], t.dtype) for i, t in enumerate(tensors)]
    args = (tensors, ops.as_int64(SEED), [ops.as_int64(STREAM), 1, 2], [3, 0, 1],
            [c for p in packed for c in p])
    torch.library.opcheck(torch.ops.tinit.trunc_normal_grouped_triton_, args)
    runs = ShardLayout.from_offsets((6, 10), (6, 3), (0, 4)).runs(FAR)
    args = (torch.empty(6, 3), ops.as_int64(SEED), ops.as_int64(STREAM), runs.base, runs.run,
            list(runs.outer_sizes), list(runs.outer_starts), list(transform_constants(*WINDOWS[3], torch.float32)))
    torch.library.opcheck(torch.ops.tinit.trunc_normal_runs_triton_, args)


def test_gpu_code_compiles_without_inexact_math():
    """Compiled for sm_90 (no GPU needed): the address casts and the run-time mode
    branch lower, only IEEE operations appear, and the bf16 kernel holds exactly
    the fmas of the single-tensor kernel's four modes together."""
    code = textwrap.dedent("""
        import json, re
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
        from tinit.triton_kernels import trunc_normal as tk
        from tinit.triton_kernels import trunc_normal_grouped as tg

        def insts(src):
            ptx = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=tk.LAUNCH_OPTIONS).asm["ptx"]
            return re.findall(r"\\b((?:fma|div|sqrt|rcp|lg2|ex2)\\.[a-z0-9.]+)", ptx)

        sig = {"table_ptr": "*i32", "n_entries": "i32", "entry_base": "i64", "const_base": "i64",
               "seed_lo": "i32", "seed_hi": "i32", "DTYPE": "constexpr", "LOG": "constexpr", "BLOCK": "constexpr"}
        grouped = insts(ASTSource(tg._grouped_kernel, sig, constexprs={"DTYPE": 1, "LOG": 8, "BLOCK": tk.DEFAULT_BLOCK}))
        ints = ("seed_lo", "seed_hi", "stream_lo", "stream_hi", "offset_lo", "offset_hi", "flip", "split")
        floats = ("sign", "a_cdf", "b_sf", "mass", "log_b_cdf", "ratio", "mean", "std", "lo", "hi", "a_half", "b_half")
        sig = {"out_ptr": "*bf16", "numel": "i64", **{n: "i32" for n in ints}, **{n: "fp32" for n in floats},
               "MODE": "constexpr", "BLOCK": "constexpr"}
        single = [i for mode in range(4) for i in insts(
            ASTSource(tk._trunc_normal_kernel, sig, constexprs={"MODE": mode, "BLOCK": tk.DEFAULT_BLOCK}))]
        print(json.dumps({"grouped": grouped, "single": single}))
    """)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    result = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, env=env,
                            timeout=300)
    if result.returncode != 0:
        pytest.skip(f"this triton cannot compile for sm_90 here: {result.stderr.strip().splitlines()[-1:]}")
    found = json.loads(result.stdout)
    grouped, single = found["grouped"], found["single"]
    inexact = sorted({i for i in grouped if any(t in i for t in ("approx", "full", "ftz", "rcp", "lg2", "ex2"))})
    assert not inexact, f"inexact instructions {inexact}"
    assert all(".rn" in i for i in grouped if i.startswith(("div.", "sqrt."))), sorted(set(grouped))
    for kind in ("fma.rn.f32", "fma.rn.f64"):
        assert grouped.count(kind) == single.count(kind), f"{kind}: grouped {grouped.count(kind)}, " \
                                                          f"single-tensor modes together {single.count(kind)}"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_compiled_on_gpu():
    """On a GPU, compiled (in a subprocess without TRITON_INTERPRET): opcheck of both ops,
    grouped and runs fills bit-identical to the single-tensor Triton kernel."""
    code = textwrap.dedent(f"""
        import torch
        from tinit import ops
        from tinit.params import transform_constants
        from tinit.sharding import ShardLayout
        from tinit.triton_kernels import trunc_normal as tk
        from tinit.triton_kernels import trunc_normal_grouped as tg

        assert not tg.interpreted()
        windows = {WINDOWS!r}
        sizes = {SIZES!r}
        tensors, streams, offsets, packed = [], [], [], []
        for i, (size, r) in enumerate((s, r) for s in sizes for r in range(4)):
            dtype = (torch.float32, torch.bfloat16, torch.float16)[i % 3]
            tensors.append(torch.empty(size, dtype=dtype, device="cuda"))
            streams.append({STREAM} + i)
            offsets.append(({FAR} if size == 4097 else 4 * i) + r)
            packed.append(transform_constants(*windows[(i // 3) % 4], dtype))
        tg.trunc_normal_grouped_(tensors, {SEED}, streams, offsets, packed)
        for t, x in enumerate(tensors):
            ref = torch.empty_like(x)
            tk.trunc_normal_triton_(ref, {SEED}, streams[t], offsets[t], packed[t])
            assert torch.equal(x, ref), f"tensor {{t}} ({{x.dtype}}, {{x.numel()}} elements) differs"
        runs = ShardLayout.from_offsets((4096, 3000), (4096, 375), (0, 750)).runs({FAR})
        shard = torch.empty(4096, 375, dtype=torch.bfloat16, device="cuda")
        tg.trunc_normal_runs_(shard, {SEED}, {STREAM}, runs, packed[1])
        whole = torch.empty(4096, 3000, dtype=torch.bfloat16, device="cuda")
        tk.trunc_normal_triton_(whole, {SEED}, {STREAM}, {FAR}, packed[1])
        assert torch.equal(shard, whole[:, 750:1125]), "runs differ from the whole fill"
        args = (tensors[:6], ops.as_int64({SEED}), [ops.as_int64(s) for s in streams[:6]], offsets[:6],
                [c for p in packed[:6] for c in p])
        torch.library.opcheck(torch.ops.tinit.trunc_normal_grouped_triton_, args)
        args = (shard, ops.as_int64({SEED}), ops.as_int64({STREAM}), runs.base, runs.run, list(runs.outer_sizes),
                list(runs.outer_starts), list(packed[1]))
        torch.library.opcheck(torch.ops.tinit.trunc_normal_runs_triton_, args)
        torch.cuda.synchronize()
        print("ok")
    """)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    result = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, env=env,
                            timeout=600)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr[-4000:]
