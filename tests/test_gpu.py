"""GPU suite: what only a CUDA device has (marker ``gpu``; skipped without CUDA).

    python -m pytest -m gpu tests/test_gpu.py tests/test_backends.py tests/test_stream_contract.py
    TINIT_GPU_REQUIRE=1 ...    a GPU backend that cannot run fails instead of skipping
                               (bench/gpu_check.sh sets it)

The per-backend kernel properties (words and values against the CPU kernel, bounds, KS, moments,
views and shards, grouped against per-tensor) run on every backend, the CUDA ones included, in
test_backends and test_stream_contract; this module keeps the rest, on the ``cuda`` and ``triton``
cases of the ``backend`` fixture or on the CUDA ops directly:

- a bf16 tensor of 2^31 + 2^20 elements: its last 2^20 values are the CPU
  kernel's values from offset 2^31 and not a copy of its first 2^20; the fill
  allocates less than 1 MiB beyond the tensor;
- the fill is captured in a CUDA graph and replays (no host sync), and runs
  under ``torch.cuda.set_sync_debug_mode("error")``;
- ``torch.library.opcheck`` on the CUDA ops;
- the CUDA ``trunc_normal_grouped_`` (mixed dtypes, every mode, misaligned
  views) equals the CPU op (``helpers.assert_matches_cpu``) and, bit for bit in every
  dtype, one CUDA ``trunc_normal_`` per tensor; ``trunc_normal_runs_`` and
  ``philox_runs_`` equal the CPU ops on shard layouts; 2,000 tensors take at
  most one kernel per dtype, an 8,192-row shard one kernel; neither syncs the
  host; bad arguments raise before anything is written; both, captured in
  one CUDA graph, replay the eager values bit for bit, also after other
  grouped calls have run between capture and replay; graphs captured in
  each capture mode and destroyed in turn leave the later calls right;
- every GPU fill of the cuda and triton backends (one tensor, a shard's runs,
  a grouped list, grouped shards where a backend has them, the raw stream
  words) runs under ``set_sync_debug_mode("error")`` and, all captured in one
  CUDA graph, replays the eager values bit for bit, also after other calls
  made new tables; the Triton ndtri table, first asked for inside a capture,
  is refused before anything is captured.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
import torch
from helpers import DTYPE_PARAMS, DTYPES, WINDOWS, assert_matches_cpu, assert_same_bits, fillable

import tinit
from tinit import dispatch, ops
from tinit.params import transform_constants

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU visible")]

REQUIRE = os.environ.get("TINIT_GPU_REQUIRE", "0") == "1"
INF = math.inf
SEED, STREAM = 2**63 + 2024, 2**40 + 3


def _require_gpu_backend(backend) -> None:
    """The ``backend`` fixture's CUDA cases only: the properties below are those of a CUDA device."""
    if backend.device != "cuda":
        pytest.skip(f"{backend} fills CPU tensors; this property is a CUDA device's")


def _fill(device: str, backend: str, numel: int, dtype, window, *, seed=SEED, stream=STREAM, offset=0):
    x = torch.empty(numel, dtype=dtype, device=device)
    return tinit.trunc_normal_at_(x, *window, seed=seed, stream=stream, offset=offset, backend=backend)


HUGE = 2**31 + 2**20
TAIL = 2**20


def test_huge_bf16_tail_and_memory(backend):
    _require_gpu_backend(backend)
    free, _ = torch.cuda.mem_get_info()
    if free < 2 * HUGE + 2**30:
        pytest.skip(f"needs {(2 * HUGE + 2**30) / 2**30:.1f} GiB free on the GPU, {free / 2**30:.1f} GiB free")
    window = WINDOWS["gpt2"]
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    x = torch.empty(HUGE, dtype=torch.bfloat16, device="cuda")
    before = torch.cuda.memory_allocated()
    tinit.trunc_normal_at_(x, *window, seed=SEED, stream=STREAM, backend=backend.name)
    torch.cuda.synchronize()
    extra = torch.cuda.max_memory_allocated() - before
    head, tail = x[:TAIL].cpu(), x[-TAIL:].cpu()
    del x
    torch.cuda.empty_cache()
    assert extra < 2**20, f"{backend}: the fill allocated {extra} bytes beyond the tensor"
    want = _fill("cpu", "cpu", TAIL, torch.bfloat16, window, offset=2**31)
    assert_matches_cpu(backend.id, tail, want, window[1], f"{backend}: last 2^20 of 2^31 + 2^20")
    same = float((head == tail).float().mean())
    assert same < 0.05, f"{backend}: the last 2^20 values repeat the first ones ({same:.1%} equal)"


def test_cuda_graph_capture_and_no_sync(backend):
    _require_gpu_backend(backend)
    window = WINDOWS["gpt2"]
    x = torch.empty(1_000_003, device="cuda")
    tinit.trunc_normal_at_(x, *window, seed=5, backend=backend.name)  # warm-up (compiles Triton kernels)
    want = x.clone()
    torch.cuda.set_sync_debug_mode("error")
    try:
        x.zero_()
        tinit.trunc_normal_at_(x, *window, seed=5, backend=backend.name)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert_same_bits(x, want, f"{backend}: fill under sync debug mode")
    x.zero_()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        tinit.trunc_normal_at_(x, *window, seed=5, backend=backend.name)
    graph.replay()
    torch.cuda.synchronize()
    assert_same_bits(x, want, f"{backend}: CUDA graph replay")
    x.fill_(7.0)
    graph.replay()
    torch.cuda.synchronize()
    assert_same_bits(x, want, f"{backend}: second replay")


def _require_cuda_backend() -> None:
    reason = dispatch.BACKENDS["cuda"].why_not(torch.empty(1, device="cuda"))
    if reason is not None:
        (pytest.fail if REQUIRE else pytest.skip)(f"backend 'cuda' unavailable: {reason}")


@pytest.mark.parametrize("dtype", DTYPE_PARAMS)
@pytest.mark.parametrize(
    "window",
    [
        pytest.param(WINDOWS["central_2sigma"], id="central"),
        pytest.param(WINDOWS["far_tail_8_100"], id="far_tail"),
        pytest.param(WINDOWS["tail_neginf_-15"], id="tail_mode"),
    ],
)
def test_opcheck_cuda_trunc_normal(dtype, window):
    _require_cuda_backend()
    constants = list(fillable(window, dtype))
    tensor = torch.empty(5, 37, dtype=dtype, device="cuda")
    torch.library.opcheck(torch.ops.tinit.trunc_normal_.default, (tensor, 3, -5, 2**40 + 1, constants))


def test_opcheck_cuda_philox():
    _require_cuda_backend()
    tensor = torch.empty(1029, dtype=torch.int32, device="cuda")
    torch.library.opcheck(torch.ops.tinit.philox_.default, (tensor, -7, 2**62, 3))


def test_compute_only_stores_nothing():
    _require_cuda_backend()
    constants = transform_constants(0.0, 1.0, -2.0, 2.0, torch.float32)
    x = torch.full((1_000_001,), 7.0, device="cuda")
    ops.trunc_normal_compute_only(x, 1, 2, 3, constants)
    torch.cuda.synchronize()
    assert bool((x == 7.0).all()), "the compute-only fill wrote to the tensor"


def test_auto_picks_cuda_for_cuda_tensors():
    _require_cuda_backend()
    assert dispatch.select(torch.empty(4, device="cuda")).name == "cuda"
    np.testing.assert_array_equal(dispatch.auto_order("cuda"), ["cuda", "triton", "torch"])


# ---- grouped and runs ops on CUDA (tinit::trunc_normal_grouped_ and tinit::trunc_normal_runs_) ----

# Windows reaching modes two-sided, tail, far two-sided and central (fp64:
# 0, 1, 2, 0; tinit/params.py).
GROUP_WINDOWS = [WINDOWS["two_sided_4sigma"], (0.0, 1.0, -INF, -40.0), WINDOWS["far_tail_8_100"], (1.0, 2.0, 3.0, 5.0)]
GROUP_SIZES = [(0, 5), (1, 3), (3, 2), (4, 1), (5, 0), (4097, 2**34 + 3), (10**5, 2**34 - 4099)]


def _require_cuda_op(name: str) -> None:
    _require_cuda_backend()
    if not ops.has_kernel(name, "CUDA"):
        (pytest.fail if REQUIRE else pytest.skip)(f"the extension has no CUDA kernel for tinit::{name}; rebuild it")


def _mixed_group(device: str):
    """Every dtype interleaved in one list, every offset % 4, misaligned views on CUDA, every mode."""
    tensors, streams, offsets, constants, stds = [], [], [], [], []
    for i, (numel, offset) in enumerate(GROUP_SIZES):
        for d, dtype in enumerate(DTYPES.values()):
            shift = (3 * i + d) % 4 if device == "cuda" else 0
            tensors.append(torch.empty(numel + shift, dtype=dtype, device=device)[shift:])
            streams.append(STREAM + 7 * len(streams))
            offsets.append(offset + 4 * d)
            window = GROUP_WINDOWS[(i + d) % 4]
            constants.append(transform_constants(*window, dtype))
            stds.append(window[1])
    return tensors, streams, offsets, constants, stds


def test_grouped_op_cuda_equals_cpu_and_per_tensor_fills():
    _require_cuda_op("trunc_normal_grouped_")
    gpu, streams, offsets, constants, stds = _mixed_group("cuda")
    cpu = _mixed_group("cpu")[0]
    ops.trunc_normal_grouped_native(gpu, SEED, streams, offsets, constants)
    ops.trunc_normal_grouped_native(cpu, SEED, streams, offsets, constants)
    for t, (g, c) in enumerate(zip(gpu, cpu, strict=True)):
        if c.numel() == 0:
            continue
        what = f"grouped tensor {t}: {c.dtype} n={c.numel()} offset {offsets[t]} mode {int(constants[t][0])}"
        assert_matches_cpu("cuda", g, c, stds[t], what)
        alone = torch.empty_like(g)
        ops.trunc_normal_native(alone, SEED, streams[t], offsets[t], constants[t])
        assert_same_bits(g, alone, f"{what}: grouped vs trunc_normal_ on CUDA")


def test_grouped_op_leaves_neighbours_alone():
    _require_cuda_op("trunc_normal_grouped_")
    base = torch.full((3 * 1031,), 7.0, device="cuda")
    middle = base[1031:2062]
    constants = transform_constants(*WINDOWS["gpt2"], torch.float32)
    ops.trunc_normal_grouped_native([middle[1:-2]], SEED, [STREAM], [3], [constants])
    assert bool((base[:1032] == 7.0).all()) and bool((base[2060:] == 7.0).all()), "wrote outside the view"


RUNS_LAYOUTS = [
    pytest.param((300, 70), (300, 34), (0, 18), id="shard1-of-2d"),
    pytest.param((6, 40, 33), (6, 15, 33), (0, 8, 0), id="middle-dim-of-3d"),
    pytest.param((4, 10, 12), (3, 5, 6), (1, 2, 3), id="block-of-3d"),
]


@pytest.mark.parametrize("dtype", [*DTYPE_PARAMS, pytest.param(torch.int32, id="words")])
@pytest.mark.parametrize("global_shape,local_shape,shard_offsets", RUNS_LAYOUTS)
def test_runs_ops_cuda_equal_cpu(global_shape, local_shape, shard_offsets, dtype):
    from tinit.sharding import ShardLayout

    _require_cuda_op("trunc_normal_runs_")
    runs = ShardLayout.from_offsets(global_shape, local_shape, shard_offsets).runs(2**34 + 3)
    args = (
        ops.as_int64(SEED),
        ops.as_int64(STREAM),
        runs.base,
        runs.run,
        list(runs.outer_sizes),
        list(runs.outer_starts),
    )
    got, want = torch.empty(local_shape, dtype=dtype, device="cuda"), torch.empty(local_shape, dtype=dtype)
    if dtype == torch.int32:
        torch.ops.tinit.philox_runs_(got, *args)
        torch.ops.tinit.philox_runs_(want, *args)
        torch.testing.assert_close(
            got.cpu(), want, rtol=0, atol=0, msg=lambda m: f"philox_runs_ {local_shape} of {global_shape}: {m}"
        )
        return
    window = WINDOWS["gpt2"]
    constants = list(transform_constants(*window, dtype))
    torch.ops.tinit.trunc_normal_runs_(got, *args, constants)
    torch.ops.tinit.trunc_normal_runs_(want, *args, constants)
    assert_matches_cpu("cuda", got, want, window[1], f"trunc_normal_runs_ {dtype} {local_shape} of {global_shape}")


def _kernels(fn) -> list[str]:
    """Names of the CUDA kernels `fn` launches (copies and memsets left out)."""
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return [
        e.name
        for e in prof.events()
        if e.device_type == torch.autograd.DeviceType.CUDA
        and not any(word in e.name.lower() for word in ("memcpy", "memset"))
    ]


def test_grouped_fill_of_2000_tensors_is_one_kernel_per_dtype():
    _require_cuda_op("trunc_normal_grouped_")
    dtypes = (torch.float32, torch.bfloat16)
    tensors = [
        torch.empty(n, dtype=dtypes[i % 2], device="cuda") for i, n in enumerate([1, 7, 64, 768, 3, 2304] * 334)
    ][:2000]
    streams, offsets = list(range(2000)), [3 * i for i in range(2000)]
    constants = [transform_constants(*WINDOWS["gpt2"], t.dtype) for t in tensors]

    def fill():
        ops.trunc_normal_grouped_native(tensors, SEED, streams, offsets, constants)

    fill()  # warm-up: the first launch loads the module
    names = _kernels(fill)
    assert len(names) <= len(dtypes), f"{len(names)} kernels for 2,000 tensors of 2 dtypes: {names[:8]}"
    cpu = [torch.empty(t.shape, dtype=t.dtype) for t in tensors]
    ops.trunc_normal_grouped_native(cpu, SEED, streams, offsets, constants)
    for t, (g, c) in enumerate(zip(tensors, cpu, strict=True)):
        assert_same_bits(g, c, f"tensor {t} of 2,000")


def _row_parallel_shard():
    """Rank 3 of 8 of a (8192, 4096) weight split on dim 1: 8,192 rows of 512."""
    from tinit.sharding import ShardLayout

    runs = ShardLayout.from_offsets((8192, 4096), (8192, 512), (0, 3 * 512)).runs(5)
    assert runs.rows == 8192
    return runs, list(transform_constants(*WINDOWS["gpt2"], torch.float32))


def test_row_parallel_shard_is_one_kernel_and_equals_cpu():
    _require_cuda_op("trunc_normal_runs_")
    runs, constants = _row_parallel_shard()
    args = (ops.as_int64(SEED), 11, runs.base, runs.run, list(runs.outer_sizes), list(runs.outer_starts), constants)
    got = torch.empty(8192, 512, device="cuda")
    torch.ops.tinit.trunc_normal_runs_(got, *args)
    names = _kernels(lambda: torch.ops.tinit.trunc_normal_runs_(got, *args))
    assert len(names) == 1, f"{len(names)} kernels for one 8,192-row shard: {names[:8]}"
    want = torch.empty(8192, 512)
    torch.ops.tinit.trunc_normal_runs_(want, *args)
    assert_same_bits(got, want, "8,192-row shard")


def test_grouped_and_runs_fills_do_not_sync():
    _require_cuda_op("trunc_normal_grouped_")
    gpu, streams, offsets, constants, _ = _mixed_group("cuda")
    runs, shard_constants = _row_parallel_shard()
    shard = torch.empty(8192, 512, device="cuda")
    shard_args = (1, 2, runs.base, runs.run, list(runs.outer_sizes), list(runs.outer_starts))

    def fill():
        ops.trunc_normal_grouped_native(gpu, SEED, streams, offsets, constants)
        torch.ops.tinit.trunc_normal_runs_(shard, *shard_args, shard_constants)

    fill()
    want = [t.clone() for t in gpu] + [shard.clone()]
    for t in [*gpu, shard]:
        t.zero_()
    torch.cuda.set_sync_debug_mode("error")
    try:
        fill()
    finally:
        torch.cuda.set_sync_debug_mode(0)
    for t, (g, w) in enumerate(zip([*gpu, shard], want, strict=True)):
        assert_same_bits(g, w, f"output {t} filled under sync debug mode")


def test_grouped_and_runs_fills_replay_in_a_cuda_graph():
    """Both ops captured in one graph replay the eager values bit for bit; each call copies its table
    from pinned host memory, so other grouped calls between capture and replay must not change them."""
    _require_cuda_op("trunc_normal_grouped_")
    _require_cuda_op("trunc_normal_runs_")
    gpu, streams, offsets, constants, _ = _mixed_group("cuda")
    runs, shard_constants = _row_parallel_shard()
    shard = torch.empty(8192, 512, device="cuda")
    shard_args = (
        ops.as_int64(SEED),
        11,
        runs.base,
        runs.run,
        list(runs.outer_sizes),
        list(runs.outer_starts),
        shard_constants,
    )
    outputs = [*gpu, shard]

    def fill():
        torch.ops.tinit.trunc_normal_grouped_(
            gpu, ops.as_int64(SEED), [ops.as_int64(s) for s in streams], offsets, [v for c in constants for v in c]
        )
        torch.ops.tinit.trunc_normal_runs_(shard, *shard_args)

    fill()  # eager: the reference, and the warm-up before capture
    torch.cuda.synchronize()
    want = [t.clone() for t in outputs]
    for t in outputs:
        t.fill_(7.0)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fill()
    torch.cuda.synchronize()
    assert all(bool((t == 7.0).all()) for t in outputs), "capturing the fills wrote to the tensors"
    graph.replay()
    torch.cuda.synchronize()
    for t, (g, w) in enumerate(zip(outputs, want, strict=True)):
        assert_same_bits(g, w, f"output {t} after a replay")
    for t in outputs:
        t.fill_(7.0)
    others = [torch.empty(n, device="cuda") for n in (5, 4099, 10**5)]
    other_constants = [transform_constants(*WINDOWS["shifted"], torch.float32)] * len(others)
    for k in range(4):  # new tables through the pinned pool (TableStaging), whose graph-owned blocks stay out
        ops.trunc_normal_grouped_native(others, SEED + 1 + k, [1, 2, 3], [0, 0, 0], other_constants)
        torch.ops.tinit.trunc_normal_runs_(shard, *shard_args[:1], 12 + k, *shard_args[2:])
    graph.replay()
    torch.cuda.synchronize()
    for t, (g, w) in enumerate(zip(outputs, want, strict=True)):
        assert_same_bits(g, w, f"output {t} replayed after other grouped and runs calls")


@pytest.mark.parametrize("mode", ["global", "thread_local", "relaxed"])
def test_grouped_tables_of_destroyed_graphs_serve_later_calls(mode):
    """A captured grouped call's pinned table is its graph's until the graph is destroyed, then the pool's
    again: graphs captured (in each capture mode) and destroyed in turn, eager calls between capture and
    replay, each replay its own seed's values; the eager calls after a graph is gone get theirs."""
    _require_cuda_op("trunc_normal_grouped_")
    gpu, streams, offsets, constants, _ = _mixed_group("cuda")
    flat = [v for c in constants for v in c]

    def fill(seed):
        torch.ops.tinit.trunc_normal_grouped_(
            gpu, ops.as_int64(seed), [ops.as_int64(s) for s in streams], offsets, flat
        )

    seeds = [SEED + k for k in range(3)]
    want = {}
    for seed in [*seeds, SEED + 10]:
        fill(seed)
        torch.cuda.synchronize()
        want[seed] = [t.clone() for t in gpu]
    for seed in seeds:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, capture_error_mode=mode):
            fill(seed)
        for k in range(3):  # eager tables while the graph holds its own
            fill(SEED + 20 + k)
        graph.replay()
        torch.cuda.synchronize()
        for t, (g, w) in enumerate(zip(gpu, want[seed], strict=True)):
            assert_same_bits(g, w, f"{mode} capture of seed {seed}: output {t} after a replay")
        del graph
        fill(SEED + 10)
        torch.cuda.synchronize()
        for t, (g, w) in enumerate(zip(gpu, want[SEED + 10], strict=True)):
            assert_same_bits(g, w, f"eager call after the {mode} graph of seed {seed} is gone: output {t}")


def test_opcheck_cuda_grouped_and_runs():
    _require_cuda_op("trunc_normal_grouped_")
    tensors = [
        torch.empty(5, 37, device="cuda"),
        torch.empty(9, dtype=torch.bfloat16, device="cuda"),
        torch.empty(0, dtype=torch.float64, device="cuda"),
        torch.empty(33, dtype=torch.float64, device="cuda"),
    ]
    flat = [v for t in tensors for v in transform_constants(*WINDOWS["central_2sigma"], t.dtype)]
    torch.library.opcheck(
        torch.ops.tinit.trunc_normal_grouped_.default, (tensors, 3, [1, -2, 2**40, 5], [0, 5, 7, 2**34 + 1], flat)
    )
    from tinit.sharding import ShardLayout

    runs = ShardLayout.from_offsets((40, 30), (40, 12), (0, 9)).runs(3)
    layout = (runs.base, runs.run, list(runs.outer_sizes), list(runs.outer_starts))
    torch.library.opcheck(
        torch.ops.tinit.trunc_normal_runs_.default,
        (
            torch.empty(40, 12, device="cuda"),
            3,
            5,
            *layout,
            list(transform_constants(*WINDOWS["tail_neginf_-15"], torch.float32)),
        ),
    )
    torch.library.opcheck(
        torch.ops.tinit.philox_runs_.default, (torch.empty(40, 12, dtype=torch.int32, device="cuda"), -3, 5, *layout)
    )


def test_cuda_grouped_refuses_a_tensor_off_its_device_before_any_write():
    """What only a CUDA list can get wrong; the checks both native bindings share are test_native_refusals'."""
    _require_cuda_op("trunc_normal_grouped_")
    c = list(transform_constants(*WINDOWS["central_2sigma"], torch.float32))
    good = torch.full((8,), 7.0, device="cuda")
    with pytest.raises(RuntimeError, match="tensor 1 is on cpu; expected a CUDA tensor"):
        torch.ops.tinit.trunc_normal_grouped_([good, torch.empty(4)], 1, [0, 0], [0, 0], c + c)
    torch.cuda.synchronize()
    assert bool((good == 7.0).all()), "a refused grouped call wrote to its first tensor"


# ---- every GPU op without a host sync, and in a CUDA graph (cuda and triton backends) ----


def _same(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    if got.dtype == torch.int32:  # stream words
        torch.testing.assert_close(got, want, rtol=0, atol=0, msg=lambda m: f"{what}: {m}")
    else:
        assert_same_bits(got, want, what)


def _every_fill(backend):
    """(what, fill, outputs) for every GPU fill of ``backend``: one tensor, a shard's runs, a grouped list
    (every dtype it fills, misaligned views), grouped shards where it has that op, and the raw stream words."""
    from tinit.sharding import ShardLayout

    impl = dispatch.BACKENDS[backend.name]
    window = WINDOWS["gpt2"]
    dtypes = [d for d in DTYPES.values() if backend.supports(d)]
    fills = []
    single = torch.empty(1_000_003, device="cuda")
    constants = transform_constants(*window, torch.float32)
    fills.append(("single", lambda: impl.fill(single, SEED, STREAM, 5, constants), [single]))
    runs = ShardLayout.from_offsets((300, 70), (300, 34), (0, 18)).runs(2**34 + 3)
    shard = torch.empty(300, 34, dtype=torch.bfloat16, device="cuda")
    shard_constants = transform_constants(*window, torch.bfloat16)
    fills.append(("runs", lambda: impl.fill_runs(shard, SEED, STREAM, runs, shard_constants), [shard]))
    tensors, streams, offsets, packed = [], [], [], []
    for i, numel in enumerate((1, 5, 4099, 10**5)):
        for d, dtype in enumerate(dtypes):
            shift = (i + d) % 4
            tensors.append(torch.empty(numel + shift, dtype=dtype, device="cuda")[shift:])
            streams.append(STREAM + len(streams))
            offsets.append(3 * i + d)
            packed.append(transform_constants(*GROUP_WINDOWS[(i + d) % 4], dtype))
    fills.append(("grouped", lambda: impl.fill_grouped(tensors, SEED, streams, offsets, packed), tensors))
    if impl.fill_grouped_runs is not None:
        shards = [torch.empty(300, 34, dtype=dtype, device="cuda") for dtype in dtypes]
        shard_packed = [transform_constants(*window, dtype) for dtype in dtypes]
        shard_streams = [STREAM + 100 + k for k in range(len(shards))]
        fills.append(
            (
                "grouped runs",
                lambda: impl.fill_grouped_runs(shards, SEED, shard_streams, [runs] * len(shards), shard_packed),
                shards,
            )
        )
    words = torch.empty(4099, dtype=torch.int32, device="cuda")
    word_shard = torch.empty(300, 34, dtype=torch.int32, device="cuda")
    if backend.name == "cuda":
        layout = (runs.base, runs.run, list(runs.outer_sizes), list(runs.outer_starts))
        fills.append(("philox_", lambda: torch.ops.tinit.philox_(words, 3, ops.as_int64(STREAM), 7), [words]))
        fills.append(
            (
                "philox_runs_",
                lambda: torch.ops.tinit.philox_runs_(word_shard, 3, ops.as_int64(STREAM), *layout),
                [word_shard],
            )
        )
    else:
        from tinit.triton_kernels.trunc_normal import philox_words_triton

        fills.append(
            (
                "philox_words_triton",
                lambda: words.copy_(philox_words_triton(4099, 3, STREAM, 7, device="cuda").to(torch.int32)),
                [words],
            )
        )
    return fills


def test_every_gpu_fill_runs_without_a_host_sync(backend):
    """Each fill, after a warm-up (Triton compiles, the ndtri table uploads), under
    ``set_sync_debug_mode("error")``: any blocking copy or synchronisation raises; the values are the eager ones."""
    _require_gpu_backend(backend)
    for what, fill, outputs in _every_fill(backend):
        fill()
        torch.cuda.synchronize()
        want = [t.clone() for t in outputs]
        for t in outputs:
            t.zero_()
        torch.cuda.set_sync_debug_mode("error")
        try:
            fill()
        finally:
            torch.cuda.set_sync_debug_mode(0)
        torch.cuda.synchronize()
        for k, (got, w) in enumerate(zip(outputs, want, strict=True)):
            _same(got, w, f"{backend} {what}, output {k}, under sync debug mode")


def test_every_gpu_fill_replays_in_a_cuda_graph(backend):
    """All fills of a backend captured in one graph: the capture writes nothing, a replay gives the eager
    values bit for bit, and so does a replay after other grouped and runs calls made new tables (whose
    pinned host blocks must not be the ones the graph copies from)."""
    _require_gpu_backend(backend)
    fills = _every_fill(backend)
    outputs = [t for _, _, ts in fills for t in ts]
    for _, fill, _ in fills:
        fill()  # eager: the reference, and the warm-up before capture
    torch.cuda.synchronize()
    want = [t.clone() for t in outputs]
    for t in outputs:
        t.fill_(7)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _, fill, _ in fills:
            fill()
    torch.cuda.synchronize()
    assert all(bool((t == 7).all()) for t in outputs), f"{backend}: capturing the fills wrote to the tensors"
    graph.replay()
    torch.cuda.synchronize()
    for k, (got, w) in enumerate(zip(outputs, want, strict=True)):
        _same(got, w, f"{backend}: output {k} after a replay")
    for t in outputs:
        t.fill_(7)
    impl = dispatch.BACKENDS[backend.name]
    others = [torch.empty(n, device="cuda") for n in (5, 4099, 10**5)]
    other_constants = [transform_constants(*WINDOWS["shifted"], torch.float32)] * len(others)
    from tinit.sharding import ShardLayout

    runs = ShardLayout.from_offsets((300, 70), (300, 34), (0, 36)).runs(11)
    shard = torch.empty(300, 34, device="cuda")
    for k in range(4):  # new tables through other pinned blocks (tinit's pool, or torch's host allocator)
        impl.fill_grouped(others, SEED + 1 + k, [1, 2, 3], [0, 0, 0], other_constants)
        impl.fill_runs(shard, SEED + 1 + k, 12 + k, runs, other_constants[0])
    graph.replay()
    torch.cuda.synchronize()
    for k, (got, w) in enumerate(zip(outputs, want, strict=True)):
        _same(got, w, f"{backend}: output {k} replayed after other grouped and runs calls")


def test_triton_ndtri_table_first_used_inside_a_capture_raises(backend, monkeypatch):
    """The Triton fills' ndtri table is uploaded on a device's first eager fill; asked for first inside a
    capture it is refused before anything is captured, saying what to do."""
    import importlib

    _require_gpu_backend(backend)
    if backend.name != "triton":
        pytest.skip("the ndtri table is the Triton backend's")
    host = importlib.import_module("tinit.triton_kernels._host")
    x = torch.empty(4099, device="cuda")
    window = WINDOWS["gpt2"]
    tinit.trunc_normal_at_(x, *window, seed=5, backend="triton")  # compiles the kernel
    torch.cuda.synchronize()
    monkeypatch.delitem(host._NDTRI_TABLES, x.device)
    x.fill_(7.0)
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="before capturing"), torch.cuda.graph(graph):
        tinit.trunc_normal_at_(x, *window, seed=5, backend="triton")
    assert x.device not in host._NDTRI_TABLES, "a table was cached from inside the capture"
    torch.cuda.synchronize()
    assert bool((x == 7.0).all()), "the refused capture wrote to the tensor"


def test_triton_ndtri_table_uploaded_on_one_stream_serves_another(backend, monkeypatch):
    """The ndtri table's upload is a non-blocking copy on the first fill's stream: a fill on another
    stream, launched while that copy still waits behind a sleep, waits for it and gets the same values."""
    import importlib

    _require_gpu_backend(backend)
    if backend.name != "triton":
        pytest.skip("the ndtri table is the Triton backend's")
    host = importlib.import_module("tinit.triton_kernels._host")
    window = WINDOWS["gpt2"]
    want = torch.empty(4099, device="cuda")
    tinit.trunc_normal_at_(want, *window, seed=5, backend="triton")
    torch.cuda.synchronize()
    monkeypatch.delitem(host._NDTRI_TABLES, want.device)
    monkeypatch.delitem(host._NDTRI_UPLOADS, want.device, raising=False)
    first, second = torch.cuda.Stream(), torch.cuda.Stream()
    with torch.cuda.stream(first):
        x = torch.empty_like(want)
        torch.cuda._sleep(100_000_000)  # the upload below queues behind ~50 ms of GPU time
        tinit.trunc_normal_at_(x, *window, seed=5, backend="triton")
    with torch.cuda.stream(second):
        y = torch.empty_like(want)
        tinit.trunc_normal_at_(y, *window, seed=5, backend="triton")
    torch.cuda.synchronize()
    assert_same_bits(x, want, "fill on the uploading stream")
    assert_same_bits(y, want, "fill on another stream while the upload was pending")
