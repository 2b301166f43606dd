"""The grouped Triton kernel (tinit.triton_kernels.trunc_normal_grouped) in the Triton interpreter.

Grouped fills and shard row runs must give exactly the CPU ops' bits
(``tinit::trunc_normal_grouped_``, ``tinit::trunc_normal_runs_``, which equal
one ``trunc_normal_`` per tensor), whatever the program size or batching, in
one launch per dtype (grouped) or one launch (runs), and must refuse bad
input before writing anything; their tables reach a GPU through a pinned
host buffer and a non-blocking copy (``_host.upload``, checked with a fake
device here, on a GPU by test_gpu). The sm_90 code is compiled without a GPU; the
compiled kernels on a GPU are checked by ``test_compiled_on_gpu`` (skipped
without CUDA).

The interpreter is the session's (tests/conftest.py): the tests that run
kernels in-process skip with the reason in a session that compiles Triton; the
subprocess checks (marker ``own_process``) run in any session.
"""

from __future__ import annotations

import importlib
import itertools
import json
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

try:
    import triton  # noqa: F401
except ImportError:
    pytest.skip(
        "triton is not installed (pip install triton): the triton backend is not tested", allow_module_level=True
    )
import torch

import tinit
from tinit import ops
from tinit.params import PARAM_COUNT, Mode, transform_constants
from tinit.sharding import ShardLayout

tk = importlib.import_module("tinit.triton_kernels.trunc_normal")
tg = importlib.import_module("tinit.triton_kernels.trunc_normal_grouped")

needs_native = pytest.mark.skipif(
    not ops.native_available(),
    reason=f"the CPU ops are the reference here and are not built ({ops.native_load_error()}); {ops.BUILD_HINT}",
)

DTYPES = (torch.float32, torch.bfloat16, torch.float16)
DTYPE_PARAMS = [
    pytest.param(torch.float32, id="f32"),
    pytest.param(torch.bfloat16, id="bf16"),
    pytest.param(torch.float16, id="f16"),
]
INT_VIEW = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16}
# (mean, std, a, b), absolute bounds, one per tinit.params.Mode, in Mode order
# (checked below): UNIFORM (a linear window), TWO_SIDED (+-2 sigma),
# TWO_SIDED_PRECISE (mean + std z cancels next to 0), TAIL (beyond 8 sigma).
WINDOWS = ((0.0, 1.0, 0.5, 0.5001), (0.0, 1.0, -2.0, 2.0), (1.0, 1.0 / 7.0, -math.inf, 0.0), (0.0, 1.0, 8.0, 100.0))
SIZES = (0, 1, 3, 4, 5, 257, 4097)
SEED = 0x9E3779B97F4A7C15  # >= 2**63
STREAM = 0xD1B54A32D192ED03  # >= 2**63
FAR = 2**34 + 5  # an offset past 2**34 (odd: its counter block starts before it)


@pytest.fixture(autouse=True)
def _interpreter(request):
    """Every test but those marked ``own_process`` runs kernels in this process: the session's interpreter."""
    if request.node.get_closest_marker("own_process") is None:
        request.getfixturevalue("triton_interpreter")


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
    for d in DTYPES:
        modes = [Mode(int(transform_constants(*w, d).mode)) for w in WINDOWS]
        assert modes == list(Mode), f"{d}: the test windows select modes {modes}"


def test_constants_row_holds_the_record_fields_by_name():
    """_const_row packs ROW_FIELDS: the fp32 bits of each named field, then mode, flip, split."""
    import numpy as np

    p = transform_constants(0.0, 1.0, -1.0, 4.0, torch.float32)  # mirrored: flip ~0, split < 2^32 - 1
    row = tg._const_row(p)
    assert row.dtype == np.int32 and row.size == 2 * tg._CONST_WORDS == len(tg.ROW_FIELDS)
    for k, name in enumerate(tg.ROW_FIELDS):
        if name == "mode":
            assert row[k] == int(p.mode)
        elif name == "flip":
            assert row[k] == -1
        elif name == "split":
            assert int(row[k]) & 0xFFFFFFFF == int(p.split)
        else:
            assert row[k] == np.float32(getattr(p, name)).view(np.int32), name


# ------------------------------------------------------------------ grouped


@needs_native
def test_grouped_equals_cpu_op_in_one_launch_per_dtype(launches):
    tensors, streams, offsets, packed = _mixed_list()
    expected = _cpu_grouped(tensors, streams, offsets, packed)
    tg.trunc_normal_grouped_(tensors, SEED, streams, offsets, packed)
    for t, (got, want) in enumerate(zip(tensors, expected, strict=True)):
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
        for t, (got, want) in enumerate(zip(out, expected, strict=True)):
            _assert_bits_equal(got, want, f"block {block}, tensor {t}")
    alone = torch.empty_like(tensors[-1])  # the same tensor in a group of one
    tg.trunc_normal_grouped_([alone], SEED, streams[-1:], offsets[-1:], packed[-1:])
    _assert_bits_equal(alone, expected[-1], "a group of one")


@needs_native
def test_unaligned_views_bit_identical():
    """Views whose addresses are not aligned for a 4-element store (fp32 at +4 bytes, bf16 at
    +2) or only for the 8-byte one of bf16/fp16 (+8 bytes), with offsets % 4 == 0 and full
    programs: the vector path is taken only where it is aligned, and nothing outside is written."""
    dtypes, firsts = (torch.float32, torch.bfloat16, torch.float16, torch.float32), (1, 1, 4, 4)
    storages = [torch.full((600,), 7.0, dtype=d) for d in dtypes]
    views = [storage[first : first + 512] for storage, first in zip(storages, firsts, strict=True)]
    streams, offsets = [STREAM, STREAM + 1, 5, 6], [0, 64, 2**34, 8]
    packed = [transform_constants(*WINDOWS[k % 4], v.dtype) for k, v in enumerate(views)]
    expected = _cpu_grouped(views, streams, offsets, packed)
    tg.trunc_normal_grouped_(views, SEED, streams, offsets, packed, block=16)
    for t, (got, want) in enumerate(zip(views, expected, strict=True)):
        _assert_bits_equal(got, want, f"view {t} ({got.dtype}, address % 16 = {got.data_ptr() % 16})")
    for t, (storage, first) in enumerate(zip(storages, firsts, strict=True)):
        outside = torch.cat([storage[:first], storage[first + 512 :]])
        assert bool((outside == 7.0).all()), f"storage {t}: written outside its view"


def test_grouped_equals_single_tensor_kernel():
    constants = transform_constants(*WINDOWS[1], torch.bfloat16)
    single = torch.empty(1031, dtype=torch.bfloat16)
    tk.trunc_normal_triton_(single, SEED, STREAM, FAR, constants)
    grouped = torch.empty(1031, dtype=torch.bfloat16)
    tg.trunc_normal_grouped_([grouped], SEED, [STREAM], [FAR], [constants])
    _assert_bits_equal(grouped, single, "grouped vs trunc_normal_triton_")


def test_nothing_to_fill_launches_nothing(launches):
    tg.trunc_normal_grouped_([], SEED, [], [], [])
    empty = [torch.empty(0, dtype=d) for d in DTYPES]
    tg.trunc_normal_grouped_(empty, SEED, [0, 1, 2], [0, 1, 2], [transform_constants(*WINDOWS[0], d) for d in DTYPES])
    tg.trunc_normal_grouped_(
        [torch.empty(5, device="meta")], SEED, [0], [0], [transform_constants(*WINDOWS[0], torch.float32)]
    )
    assert launches == []


def _good():
    return [torch.full((9,), 7.0), torch.full((5,), 7.0, dtype=torch.float16)]


GOOD_CONSTANTS = [transform_constants(*WINDOWS[0], torch.float32), transform_constants(*WINDOWS[0], torch.float16)]


@pytest.mark.parametrize(
    ("extra", "seed", "stream", "offset", "constants", "error"),
    [
        pytest.param(torch.empty(4, 4).t(), SEED, 1, 0, None, (ValueError, "contiguous"), id="non-contiguous"),
        pytest.param(torch.empty(4, dtype=torch.float64), SEED, 1, 0, None, (TypeError, "float64"), id="float64"),
        pytest.param(torch.empty(4, device="meta"), SEED, 1, 0, None, (ValueError, "device"), id="two-devices"),
        pytest.param("x", SEED, 1, 0, None, (TypeError, "Tensor"), id="not-a-tensor"),
        pytest.param(torch.empty(4), SEED, 1, -1, None, (ValueError, "offsets"), id="negative-offset"),
        pytest.param(torch.empty(4), SEED, 1, 2**63 - 3, None, (ValueError, "2\\*\\*63"), id="past-2^63"),
        pytest.param(torch.empty(4), SEED, 2**64, 0, None, (ValueError, "streams"), id="stream-2^64"),
        pytest.param(torch.empty(4), -1, 1, 0, None, (ValueError, "seed"), id="negative-seed"),
        pytest.param(
            torch.empty(4), SEED, 1, 0, (7.0,) + (0.0,) * (PARAM_COUNT - 1), (ValueError, "mode"), id="bad-mode"
        ),
        pytest.param(
            torch.empty(4), SEED, 1, 0, (0.0,) * (PARAM_COUNT - 1), (ValueError, str(PARAM_COUNT)), id="short-constants"
        ),
        pytest.param(
            torch.empty(4),
            SEED,
            1,
            0,
            transform_constants(*WINDOWS[1], torch.float32)._replace(a_cdf=2.0),
            (ValueError, "outside their range"),
            id="a_cdf-past-table",
        ),
    ],
)
def test_bad_input_raises_before_writing(extra, seed, stream, offset, constants, error, launches):
    tensors = [*_good(), extra]
    constants = constants or transform_constants(*WINDOWS[0], torch.float32)
    with pytest.raises(error[0], match=error[1]):
        tg.trunc_normal_grouped_(tensors, seed, [1, 2, stream], [0, 0, offset], [*GOOD_CONSTANTS, constants])
    for t, tensor in enumerate(tensors[:2]):
        torch.testing.assert_close(
            tensor,
            torch.full_like(tensor, 7.0),
            rtol=0,
            atol=0,
            msg=lambda m, t=t: f"tensor {t} written before the error: {m}",
        )
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
    constants = transform_constants(*WINDOWS[1], dtype)
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
    window = WINDOWS[1]
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
    _assert_bits_equal(shard, whole[:, 21:28], "backend='triton' shard vs CPU whole")
    assert launches == [("grouped", 0)], "one launch for all 40 row runs"


@needs_native
def test_write_grouped_uses_the_triton_table(launches, monkeypatch):
    """tinit.write_grouped_ (init_model_'s path) on the triton backend: small truncated normals
    in one launch per dtype, a tensor above the backend's table_max_numel in a launch of its own, a
    constant by fill_; every value the CPU backend's."""
    import dataclasses

    from tinit import FillItem, dispatch, schemes, write_grouped_

    triton = dispatch.BACKENDS["triton"]
    monkeypatch.setitem(dispatch.BACKENDS, "triton", dataclasses.replace(triton, table_max_numel=100))
    specs = [schemes.InitSpec(std=0.02), schemes.InitSpec(std=1.0, trunc=3.0), schemes.InitSpec(constant=1.0)]
    shapes = [(7, 5), (3,), (101,), (4, 4), (64,)]
    dtypes = [torch.float32, torch.bfloat16, torch.float16, torch.bfloat16, torch.float32]
    items = [
        FillItem(torch.full(shape, 9.0, dtype=dtype), specs[i % 2], stream=STREAM - i, offset=3 * i)
        for i, (shape, dtype) in enumerate(zip(shapes, dtypes, strict=True))
    ]
    items.append(FillItem(torch.full((5,), 9.0), specs[2], stream=0))
    expected = [torch.empty_like(item.tensor) for item in items]
    write_grouped_([item._replace(tensor=t) for item, t in zip(items, expected, strict=True)], seed=SEED, backend="cpu")
    write_grouped_(items, seed=SEED, backend="triton")
    for item, want in zip(items, expected, strict=True):
        _assert_bits_equal(item.tensor, want, f"triton grouped item {tuple(item.tensor.shape)} {item.tensor.dtype}")
    # f32 (7, 5) and (64,) in one launch, bf16 (3,) and (4, 4) in another, f16 (101,) alone
    assert sorted(launches, key=str) == sorted([("grouped", 0), ("grouped", 1), ("single", None)], key=str), launches


@pytest.mark.parametrize(
    ("tensor", "layout", "error"),
    [
        pytest.param(torch.full((40, 8), 7.0), ((40, 30), (40, 7), (0, 21)), "elements", id="wrong-size"),
        pytest.param(torch.full((7, 40), 7.0).t(), ((40, 30), (40, 7), (0, 21)), "contiguous", id="non-contiguous"),
    ],
)
def test_runs_bad_input_raises_before_writing(tensor, layout, error, launches):
    runs = ShardLayout.from_offsets(*layout).runs(0)
    with pytest.raises(ValueError, match=error):
        tg.trunc_normal_runs_(tensor, SEED, STREAM, runs, transform_constants(*WINDOWS[1], torch.float32))
    torch.testing.assert_close(tensor, torch.full_like(tensor, 7.0), rtol=0, atol=0)
    assert launches == []


def test_runs_past_2_63_raise():
    runs = ShardLayout.from_offsets((40, 30), (40, 7), (0, 21)).runs(2**63 - 1000)
    with pytest.raises(ValueError, match="2\\*\\*63"):
        tg.trunc_normal_runs_(torch.empty(40, 7), SEED, STREAM, runs, transform_constants(*WINDOWS[1], torch.float32))


# --------------------------------------------------------------- the ops


def test_opcheck_grouped_and_runs():
    """The custom ops' fake kernels and mutation declarations (the interpreter is fine here:
    custom_op bodies are opaque to fake tensors, unlike triton_op's)."""
    tensors = [torch.empty(37, dtype=torch.bfloat16), torch.empty(5), torch.empty(0, dtype=torch.float16)]
    packed = [transform_constants(*WINDOWS[i], t.dtype) for i, t in enumerate(tensors)]
    args = (tensors, ops.as_int64(SEED), [ops.as_int64(STREAM), 1, 2], [3, 0, 1], [c for p in packed for c in p])
    torch.library.opcheck(torch.ops.tinit.trunc_normal_grouped_triton_, args)
    runs = ShardLayout.from_offsets((6, 10), (6, 3), (0, 4)).runs(FAR)
    args = (
        torch.empty(6, 3),
        ops.as_int64(SEED),
        ops.as_int64(STREAM),
        runs.base,
        runs.run,
        list(runs.outer_sizes),
        list(runs.outer_starts),
        list(transform_constants(*WINDOWS[1], torch.float32)),
    )
    torch.library.opcheck(torch.ops.tinit.trunc_normal_runs_triton_, args)


# fp32 fmas and word -> fp32 conversions per element of each mode (tinit::trunc_normal_value;
# the derivation is beside test_triton.PTX_FMAS).
MODE_FMAS = {Mode.UNIFORM: 3, Mode.TWO_SIDED: 10, Mode.TWO_SIDED_PRECISE: 12, Mode.TAIL: 37}
MODE_CONVERSIONS = {Mode.UNIFORM: 1, Mode.TWO_SIDED: 1, Mode.TWO_SIDED_PRECISE: 1, Mode.TAIL: 2}


@pytest.mark.own_process
def test_gpu_code_compiles_without_inexact_math():
    """Compiled for sm_90 (no GPU needed), every dtype: the address casts and the run-time
    mode branch lower, only IEEE fp32 operations appear (no fp64), and the kernel holds
    exactly the fmas of the four modes, each computed once or twice (once per store path)."""
    code = textwrap.dedent("""
        import json, re, sys
        import triton
        from triton.backends import backends
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
        from tinit.triton_kernels import trunc_normal as tk
        from tinit.triton_kernels import trunc_normal_grouped as tg

        if "nvidia" not in backends:
            sys.exit(3)  # a triton without its NVIDIA backend: nothing to compile with
        sig = {"table_ptr": "*i32", "ndtri_ptr": "*fp32", "n_entries": "i32", "entry_base": "i64",
               "const_base": "i64", "seed_lo": "i32", "seed_hi": "i32", "DTYPE": "constexpr", "LOG": "constexpr",
               "REPS": "constexpr", "BLOCK": "constexpr"}
        assert list(sig) == tg._grouped_kernel.arg_names, tg._grouped_kernel.arg_names
        found = {}
        for dtype in range(3):
            src = ASTSource(tg._grouped_kernel, sig, constexprs={"DTYPE": dtype, "LOG": 8, "REPS": tg._REPS,
                                                                   "BLOCK": tk.DEFAULT_BLOCK},
                            attrs={(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]]})
            ptx = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=tk.LAUNCH_OPTIONS).asm["ptx"]
            body = ptx[ptx.index(".entry"):]
            found[dtype] = {"ops": re.findall(r"\\b((?:fma|div|sqrt|rcp|lg2|ex2|cvt)\\.[a-z0-9.]+)", body),
                            "f64": len(re.findall(r"\\.f64\\b|%fd", body)),
                            "vector_stores": len(re.findall(r"st\\.global\\.v[24]", body))}
        print(json.dumps(found))
    """)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    result = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, env=env, timeout=600
    )
    if result.returncode == 3:
        pytest.skip("this triton has no NVIDIA backend: nothing compiles for sm_90")
    assert result.returncode == 0, f"compiling the grouped kernel for sm_90 failed:\n{result.stderr[-3000:]}"
    per_thread = 4 * tk.DEFAULT_BLOCK // (32 * tk.LAUNCH_OPTIONS["num_warps"])
    for dtype, info in json.loads(result.stdout).items():
        insts = info["ops"]
        assert info["f64"] == 0, f"DTYPE {dtype}: {info['f64']} fp64 instructions or registers"
        assert info["vector_stores"] > 0, f"DTYPE {dtype}: no vector store (the aligned path lost its alignment)"
        inexact = sorted({i for i in insts if any(t in i for t in ("approx", "full", "ftz", "rcp", "lg2", "ex2"))})
        assert not inexact, f"DTYPE {dtype}: inexact instructions {inexact}"
        assert all(".rn" in i for i in insts if i.startswith(("div.", "sqrt."))), sorted(set(insts))
        # bf16 stores round in hardware when compiled (transform.store_values): to nearest even,
        # as tinit::float_to_bf16_bits, never truncating.
        to_bf16 = [i for i in insts if i.startswith("cvt.") and ".bf16" in i]
        assert (len(to_bf16) > 0) == (int(dtype) == tg._DTYPE_CODES[torch.bfloat16]), (dtype, sorted(set(insts)))
        assert all(i.startswith(("cvt.rn.bf16.f32", "cvt.rn.bf16x2.f32")) for i in to_bf16), sorted(set(to_bf16))
        fmas = insts.count("fma.rn.f32") / per_thread
        conversions = insts.count("cvt.rn.f32.u32") / per_thread
        copies = [
            c
            for c in itertools.product((1, 2), repeat=len(Mode))
            if fmas == sum(MODE_FMAS[m] * k for m, k in zip(Mode, c, strict=True))
            and conversions == sum(MODE_CONVERSIONS[m] * k for m, k in zip(Mode, c, strict=True))
        ]
        assert copies, (
            f"DTYPE {dtype}: {fmas} fmas and {conversions} conversions per element are not the "
            f"modes' {MODE_FMAS} and {MODE_CONVERSIONS}, once or twice each"
        )


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.own_process
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
    result = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, env=env, timeout=600
    )
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr[-4000:]


# --- the tables' upload: no host sync, capture-safe (the GPU half is test_gpu's) ----------------------

th = importlib.import_module("tinit.triton_kernels._host")
CUDA0 = torch.device("cuda", 0)


def _fake_cuda_upload(monkeypatch, *, capturing: bool = False) -> dict:
    """``_host.upload`` to CUDA on this CPU-only torch: the staging tensor's ``pin_memory`` and the
    copy's ``non_blocking`` are recorded, the copy returns a CPU clone (what the device would hold)."""
    seen: dict = {}
    empty_like = torch.empty_like

    def staging(source, *, pin_memory=False, **kwargs):
        seen["pin_memory"] = pin_memory
        seen["staging"] = empty_like(source, **kwargs)  # no pinned allocator without CUDA
        return seen["staging"]

    def to(self, device, *, non_blocking=False):
        seen["copy"] = (self, torch.device(device), non_blocking)
        return self.clone()

    monkeypatch.setattr(torch, "empty_like", staging)
    monkeypatch.setattr(torch.Tensor, "to", to)
    monkeypatch.setattr(th, "capturing", lambda device: capturing)
    return seen


@pytest.mark.parametrize("dtype", [np.int64, np.float32], ids=["int64", "f32"])
def test_cuda_table_goes_through_pinned_memory_and_a_non_blocking_copy(monkeypatch, dtype):
    table = (np.arange(1, 42, dtype=np.int64) * 0x1_0000_0001).astype(dtype)
    with monkeypatch.context() as patch:
        seen = _fake_cuda_upload(patch)
        got = th.upload(table, CUDA0, "test")
    assert seen["pin_memory"] is True, "the staging tensor is not pinned: the copy would block the host"
    source, device, non_blocking = seen["copy"]
    assert source is seen["staging"] and device == CUDA0 and non_blocking is True, seen["copy"]
    assert source.data_ptr() != table.ctypes.data, "the copy reads the numpy table, not the pinned stage"
    torch.testing.assert_close(got, torch.from_numpy(table), rtol=0, atol=0)


def test_capture_refused_where_the_host_allocator_may_recycle_the_table(monkeypatch):
    table = np.arange(8, dtype=np.int64)
    with monkeypatch.context() as patch:
        _fake_cuda_upload(patch, capturing=True)
        patch.setattr(th, "_CAPTURE_SAFE_TORCH", False)
        with pytest.raises(RuntimeError, match="cannot be captured in a CUDA graph with torch"):
            th.upload(table, CUDA0, "test")
    with monkeypatch.context() as patch:
        seen = _fake_cuda_upload(patch, capturing=True)
        patch.setattr(th, "_CAPTURE_SAFE_TORCH", True)
        th.upload(table, CUDA0, "test")
    assert seen["copy"][2] is True, "a capture on a safe torch copies as eagerly"


def test_safe_torch_is_decided_by_version():
    from torch.torch_version import TorchVersion

    assert th._CAPTURE_SAFE_TORCH is (TorchVersion(torch.__version__) >= (2, 11))


def test_ndtri_table_first_used_inside_a_capture_raises(monkeypatch):
    device = torch.device("cuda", 7)  # never filled in this process
    monkeypatch.setattr(th, "capturing", lambda d: True)
    with pytest.raises(RuntimeError, match="run one triton fill on this device .* before capturing"):
        th.ndtri_table_on(device)
    assert device not in th._NDTRI_TABLES
    made = torch.zeros(3)
    monkeypatch.setitem(th._NDTRI_TABLES, device, made)
    assert th.ndtri_table_on(device) is made, "a table made before the capture is used inside it"


def test_ndtri_table_on_the_cpu_equals_the_traced_one():
    """The cached table (numpy fp32 rounding, the upload path) and the traced one (torch.tensor) agree."""
    cached, traced = th.ndtri_table_on(torch.device("cpu")), th.ndtri_table_made_on(torch.device("cpu"))
    assert cached.dtype == traced.dtype == torch.float32
    torch.testing.assert_close(cached.view(torch.int32), traced.view(torch.int32), rtol=0, atol=0)


@needs_native
def test_grouped_fill_uploads_each_plan_table(monkeypatch):
    """Each launch's table goes through ``_host.upload`` (whose CUDA path pins it, above): the plan's
    table, holding its entries' addresses; the values stay the CPU op's."""
    plans, uploads = [], []
    real_launch, real_upload = tg._launch, tg.upload

    def launch(plan, dtype, device, seed):
        plans.append(plan)
        return real_launch(plan, dtype, device, seed)

    def upload(table, device, what):
        uploads.append((table, device))
        return real_upload(table, device, what)

    monkeypatch.setattr(tg, "_launch", launch)
    monkeypatch.setattr(tg, "upload", upload)
    tensors, streams, offsets, packed = (column[4:12] for column in _mixed_list())
    tg.trunc_normal_grouped_(tensors, SEED, streams, offsets, packed)
    assert len(plans) == len({t.dtype for t in tensors if t.numel()}) == len(uploads)
    addresses = set()
    for (table, entries, _, _), (uploaded, device) in zip(plans, uploads, strict=True):
        assert uploaded is table and device == torch.device("cpu")
        addresses |= {int(table[entries + 5 * e]) for e in range(entries)}
    assert addresses == {t.data_ptr() for t in tensors if t.numel()}
    for t, (got, want) in enumerate(zip(tensors, _cpu_grouped(tensors, streams, offsets, packed), strict=True)):
        _assert_bits_equal(got, want, f"tensor {t}")


def test_ndtri_upload_is_waited_for_until_seen_complete(monkeypatch):
    """A fill after the first on a device waits (GPU-side) for the table's pending upload, drops the
    event once it has completed, and inside a capture neither queries nor waits (not capturable)."""
    device = torch.device("cuda", 7)
    done, waits, queries = [False], [], []

    class Event:
        def query(self):
            queries.append(1)
            return done[0]

    class Stream:
        def wait_event(self, event):
            waits.append(event)

    event, table, capture = Event(), torch.zeros(3), [False]
    monkeypatch.setitem(th._NDTRI_TABLES, device, table)
    monkeypatch.setitem(th._NDTRI_UPLOADS, device, event)
    monkeypatch.setattr(th, "capturing", lambda d: capture[0])
    monkeypatch.setattr(torch.cuda, "current_stream", lambda d=None: Stream())
    assert th.ndtri_table_on(device) is table and waits == [event] and th._NDTRI_UPLOADS[device] is event
    capture[0] = True
    assert th.ndtri_table_on(device) is table and waits == [event] and len(queries) == 1
    capture[0], done[0] = False, True
    assert th.ndtri_table_on(device) is table and waits == [event] and device not in th._NDTRI_UPLOADS
