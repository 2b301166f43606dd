"""GPU suite for the ``cuda`` and ``triton`` backends (marker ``gpu``; skipped without CUDA).

    python -m pytest -m gpu tests/test_gpu.py
    TINIT_GPU_REQUIRE=1 ...    a GPU backend that cannot run fails instead of skipping
                               (bench/gpu_check.sh sets it)

- the uint32 stream words equal the CPU kernel's (offsets past 2^32 blocks too);
- values equal the CPU kernel's: bit for bit for ``cuda`` in fp32/bf16/fp16
  (fp64 within 2 ulp: the device's libdevice ``log`` may differ from glibc's
  in the last bit), within 2 fp32 ulp (relative to max(|x|, std)) or one
  bf16/fp16 ulp for ``triton``;
- bounds (fp32/fp64), KS against scipy.stats.truncnorm (skipped without scipy:
  this module imports only torch, triton, numpy and pytest), moments against
  the closed form (bf16/fp16);
- the same tensor for any sharding (offsets), a different one for another stream;
- a bf16 tensor of 2^31 + 2^20 elements: its last 2^20 values are the CPU
  kernel's values from offset 2^31 and not a copy of its first 2^20; the fill
  allocates less than 1 MiB beyond the tensor;
- the fill is captured in a CUDA graph and replays (no host sync), and runs
  under ``torch.cuda.set_sync_debug_mode("error")``;
- ``torch.library.opcheck`` on the CUDA ops;
- the CUDA ``trunc_normal_grouped_`` (mixed dtypes, every mode, misaligned
  views) equals the CPU op (the convention above) and, bit for bit in every
  dtype, one CUDA ``trunc_normal_`` per tensor; ``trunc_normal_runs_`` and
  ``philox_runs_`` equal the CPU ops on shard layouts; 2,000 tensors take at
  most one kernel per dtype, an 8,192-row shard one kernel; neither syncs the
  host; bad arguments raise before anything is written; both, captured in
  one CUDA graph, replay the eager values bit for bit, also after other
  grouped calls have run between capture and replay.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
import torch
from helpers import assert_within_ulp

import tinit
from tinit import dispatch, ops
from tinit.params import transform_constants

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU visible")]

REQUIRE = os.environ.get("TINIT_GPU_REQUIRE", "0") == "1"
INF = math.inf
SEED, STREAM = 2**63 + 2024, 2**40 + 3
WINDOWS = {
    "central_2sigma": (0.0, 1.0, -2.0, 2.0),
    "gpt2": (0.0, 0.02, -0.04, 0.04),
    "two_sided_4sigma": (0.0, 1.0, -4.0, 4.0),
    "full_line": (0.0, 1.0, -INF, INF),
    "far_tail_8_100": (0.0, 1.0, 8.0, 100.0),
    "tail_neginf_-15": (0.0, 1.0, -INF, -15.0),
    "shifted": (3.0, 2.0, -1.0, 4.0),
}
WINDOW_PARAMS = [pytest.param(w, id=name) for name, w in WINDOWS.items()]
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16, "f64": torch.float64}
DTYPE_PARAMS = [pytest.param(d, id=name) for name, d in DTYPES.items()]
BITS = {torch.float32: torch.int32, torch.float64: torch.int64, torch.bfloat16: torch.int16, torch.float16: torch.int16}


@pytest.fixture(params=["cuda", "triton"])
def backend(request) -> str:
    """A GPU backend that can fill a CUDA tensor here (skip, or fail under TINIT_GPU_REQUIRE=1)."""
    reason = dispatch.BACKENDS[request.param].why_not(torch.empty(4, device="cuda"))
    if reason is not None:
        (pytest.fail if REQUIRE else pytest.skip)(f"backend {request.param!r} unavailable: {reason}")
    return request.param


def _skip_unsupported(backend: str, dtype: torch.dtype) -> None:
    reason = dispatch.BACKENDS[backend].why_not(torch.empty(1, dtype=dtype, device="cuda"))
    if reason is not None:
        pytest.skip(f"{backend} cannot fill {dtype}: {reason}")


def _fillable(window, dtype) -> tuple:
    try:
        return transform_constants(*window, dtype)
    except ValueError as exc:
        pytest.skip(f"window not representable in {dtype}: {exc}")


def _fill(device: str, backend: str, numel: int, dtype, window, *, seed=SEED, stream=STREAM, offset=0):
    x = torch.empty(numel, dtype=dtype, device=device)
    return tinit.trunc_normal_at_(x, *window, seed=seed, stream=stream, offset=offset, backend=backend)


def _gpu_words(backend: str, numel: int, seed: int, stream: int, offset: int) -> torch.Tensor:
    if backend == "cuda":
        return ops.philox_words(numel, seed, stream, offset, device="cuda")
    module = dispatch._triton_module()[0]
    return module.philox_words_triton(numel, seed, stream, offset, "cuda")


def assert_same_bits(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    """Bit equality, reporting the first differing element and both values."""
    got, want = got.cpu().reshape(-1), want.cpu().reshape(-1)
    assert got.dtype == want.dtype and got.numel() == want.numel(), what
    bits = BITS[got.dtype]
    diff = got.view(bits) != want.view(bits)
    if bool(diff.any()):
        where = torch.nonzero(diff)[:, 0]
        i = int(where[0])
        raise AssertionError(
            f"{what}: {where.numel()} of {got.numel()} values differ in their bits; "
            f"first at {i}: got {got[i].item()!r}, CPU kernel {want[i].item()!r}"
        )


def assert_matches_cpu(backend: str, got: torch.Tensor, want: torch.Tensor, std: float, what: str) -> None:
    """The backend's agreement with the CPU kernel (see the module docstring)."""
    dtype = got.dtype
    if backend == "cuda" and dtype != torch.float64:
        assert_same_bits(got, want, what)
        return
    ulps = {torch.float32: 2.0, torch.float64: 2.0, torch.bfloat16: 1.0, torch.float16: 1.0}[dtype]
    assert_within_ulp(got.cpu(), want.double().numpy(), scale=std, dtype=dtype, max_ulp=ulps, what=what)


@pytest.mark.parametrize(
    "numel,offset",
    [
        pytest.param(1, 0, id="n1"),
        pytest.param(7, 3, id="n7-offset3"),
        pytest.param(4099, 1, id="n4099-offset1"),
        pytest.param(2**20 + 3, 2**32 - 2, id="1M-offset2^32"),
        pytest.param(1000, 2**34 - 6, id="across-2^32-blocks"),
        pytest.param(2**22 + 1, 2**62 + 5, id="4M-offset2^62"),
    ],
)
def test_words_equal_cpu(backend, numel, offset):
    got = _gpu_words(backend, numel, SEED, STREAM, offset)
    want = ops.philox_words(numel, SEED, STREAM, offset)
    assert got.device.type == "cuda"
    torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0, msg=lambda m: f"{backend} words, offset {offset}: {m}")


@pytest.mark.parametrize("dtype", DTYPE_PARAMS)
@pytest.mark.parametrize("window", WINDOW_PARAMS)
@pytest.mark.parametrize(
    "numel,offset",
    [
        pytest.param(1, 0, id="n1"),
        pytest.param(1023, 3, id="n1023-offset3"),
        pytest.param(2**22 + 5, 2**33 + 2, id="4M-offset2^33+2"),
    ],
)
def test_values_equal_cpu(backend, dtype, window, numel, offset):
    _skip_unsupported(backend, dtype)
    _fillable(window, dtype)
    got = _fill("cuda", backend, numel, dtype, window, offset=offset)
    want = _fill("cpu", "cpu", numel, dtype, window, offset=offset)
    assert_matches_cpu(backend, got, want, window[1], f"{backend} {dtype} {window} offset {offset}")


def test_misaligned_view_and_sharding(backend):
    window = WINDOWS["central_2sigma"]
    whole = _fill("cuda", backend, 10_007, torch.float32, window, offset=5)
    base = torch.empty(10_010, device="cuda")
    view = base[3:]  # contiguous, storage offset 3: scalar stores
    tinit.trunc_normal_at_(view, *window, seed=SEED, stream=STREAM, offset=5, backend=backend)
    assert_same_bits(view, whole, f"{backend}: misaligned output")
    shards = [
        _fill("cuda", backend, n, torch.float32, window, offset=5 + start)
        for start, n in ((0, 4001), (4001, 3), (4004, 6003))
    ]
    assert_same_bits(torch.cat(shards), whole, f"{backend}: three shards vs one call")
    other = _fill("cuda", backend, 10_007, torch.float32, window, stream=STREAM + 1, offset=5)
    assert float((other == whole).float().mean()) < 0.01, "another stream gave (nearly) the same tensor"
    again = _fill("cuda", backend, 10_007, torch.float32, window, offset=5)
    assert_same_bits(again, whole, f"{backend}: second call")


def test_inner_dim_shards_equal_cpu_slices(backend):
    """Column blocks of a (300, 70) weight (row runs): the CPU fill's slices, fp32 bits."""
    window = WINDOWS["gpt2"]
    whole = tinit.trunc_normal_at_(torch.empty(300, 70), *window, seed=SEED, stream=STREAM, backend="cpu")
    for start, width in ((0, 18), (18, 18), (36, 34), (69, 1)):
        shard = torch.empty(300, width, device="cuda")
        tinit.trunc_normal_at_(
            shard, *window, seed=SEED, stream=STREAM, backend=backend, global_shape=(300, 70), shard_offsets=(0, start)
        )
        assert_same_bits(shard.cpu(), whole[:, start : start + width], f"{backend}: column block at {start}")


def test_grouped_fill_on_cuda_equals_per_tensor(backend):
    from tinit import schemes
    from tinit.fill import write_spec_
    from tinit.grouped import FillItem, write_grouped_

    tensors = [torch.empty(n, device="cuda") for n in (1, 3, 4097, 10**5)]
    spec = schemes.InitSpec(std=0.02, trunc=2.0)
    items = [FillItem(t, spec, stream=i, offset=7 * i) for i, t in enumerate(tensors)]
    write_grouped_(items, seed=SEED, backend=backend)
    for item in items:
        want = write_spec_(
            torch.empty(item.tensor.shape), spec, seed=SEED, stream=item.stream, offset=item.offset, backend="cpu"
        )
        assert_same_bits(item.tensor.cpu(), want, f"{backend}: grouped item {item.stream}")


KS_WINDOWS = ["central_2sigma", "gpt2", "full_line", "far_tail_8_100", "tail_neginf_-15", "shifted"]
KS_PARAMS = [pytest.param(torch.float32, id="f32"), pytest.param(torch.float64, id="f64")]


def two_sided_moments(mean: float, std: float, a: float, b: float) -> tuple[float, float]:
    """Mean and std of N(mean, std^2) truncated to [a, b], closed form (Johnson, Kotz &
    Balakrishnan, Continuous Univariate Distributions, 13.10; for windows with a mass of
    at least ~1e-3, where Phi(beta) - Phi(alpha) keeps its digits)."""
    alpha, beta = (a - mean) / std, (b - mean) / std
    pdf = [math.exp(-0.5 * t * t) / math.sqrt(2 * math.pi) for t in (alpha, beta)]
    z = 0.5 * (math.erf(beta / math.sqrt(2)) - math.erf(alpha / math.sqrt(2)))
    m = (pdf[0] - pdf[1]) / z
    var = 1 + (alpha * pdf[0] - beta * pdf[1]) / z - m * m
    return mean + std * m, std * math.sqrt(var)


@pytest.mark.parametrize("dtype", KS_PARAMS)
@pytest.mark.parametrize("name", KS_WINDOWS)
def test_finite_and_inside_bounds(backend, name, dtype):
    _skip_unsupported(backend, dtype)
    window = WINDOWS[name]
    constants = _fillable(window, dtype)
    values = _fill("cuda", backend, 2**20, dtype, window, seed=77).cpu()
    lo, hi = constants.lo, constants.hi
    assert bool(torch.isfinite(values).all()), f"{backend} {name}: non-finite values"
    assert float(values.min()) >= lo and float(values.max()) <= hi, (
        f"{backend} {name}: values in [{float(values.min())}, {float(values.max())}], bounds [{lo}, {hi}]"
    )


@pytest.mark.parametrize("dtype", KS_PARAMS)
@pytest.mark.parametrize("name", KS_WINDOWS)
def test_ks(backend, name, dtype):
    stats = pytest.importorskip("scipy.stats", reason="the KS test needs scipy")
    _skip_unsupported(backend, dtype)
    window = WINDOWS[name]
    _fillable(window, dtype)
    values = _fill("cuda", backend, 2**20, dtype, window, seed=77).cpu()
    mean, std, a, b = window
    dist = stats.truncnorm((a - mean) / std, (b - mean) / std, loc=mean, scale=std)
    result = stats.kstest(values.double().numpy(), dist.cdf)
    assert result.pvalue > 1e-4, f"{backend} {name} {dtype}: KS statistic {result.statistic:.3g}, p {result.pvalue:.3g}"


@pytest.mark.parametrize("dtype", [pytest.param(torch.bfloat16, id="bf16"), pytest.param(torch.float16, id="f16")])
@pytest.mark.parametrize("name", ["central_2sigma", "gpt2", "shifted"])
def test_low_precision_moments_and_bounds(backend, name, dtype):
    _skip_unsupported(backend, dtype)
    window = WINDOWS[name]
    constants = _fillable(window, dtype)
    n = 2**22
    values = _fill("cuda", backend, n, dtype, window, seed=78).double().cpu().numpy()
    lo, hi = constants.lo, constants.hi
    assert values.min() >= lo and values.max() <= hi, f"{backend} {name}: outside [{lo}, {hi}]"
    mean, std = two_sided_moments(*window)
    # Rounding to the dtype moves each value by at most half an ulp of the window's largest magnitude.
    half_ulp = 0.5 * torch.finfo(dtype).eps * 2.0 ** math.floor(math.log2(max(abs(lo), abs(hi))))
    assert abs(values.mean() - mean) <= 6 * std / math.sqrt(n) + half_ulp, f"{backend} {name}: mean {values.mean()}"
    assert abs(values.std() - std) <= 6 * std / math.sqrt(n) + half_ulp, f"{backend} {name}: std {values.std()}"


HUGE = 2**31 + 2**20
TAIL = 2**20


def test_huge_bf16_tail_and_memory(backend):
    free, _ = torch.cuda.mem_get_info()
    if free < 2 * HUGE + 2**30:
        pytest.skip(f"needs {(2 * HUGE + 2**30) / 2**30:.1f} GiB free on the GPU, {free / 2**30:.1f} GiB free")
    window = WINDOWS["gpt2"]
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    x = torch.empty(HUGE, dtype=torch.bfloat16, device="cuda")
    before = torch.cuda.memory_allocated()
    tinit.trunc_normal_at_(x, *window, seed=SEED, stream=STREAM, backend=backend)
    torch.cuda.synchronize()
    extra = torch.cuda.max_memory_allocated() - before
    head, tail = x[:TAIL].cpu(), x[-TAIL:].cpu()
    del x
    torch.cuda.empty_cache()
    assert extra < 2**20, f"{backend}: the fill allocated {extra} bytes beyond the tensor"
    want = _fill("cpu", "cpu", TAIL, torch.bfloat16, window, offset=2**31)
    assert_matches_cpu(backend, tail, want, window[1], f"{backend}: last 2^20 of 2^31 + 2^20")
    same = float((head == tail).float().mean())
    assert same < 0.05, f"{backend}: the last 2^20 values repeat the first ones ({same:.1%} equal)"


def test_cuda_graph_capture_and_no_sync(backend):
    window = WINDOWS["gpt2"]
    x = torch.empty(1_000_003, device="cuda")
    tinit.trunc_normal_at_(x, *window, seed=5, backend=backend)  # warm-up (compiles Triton kernels)
    want = x.clone()
    torch.cuda.set_sync_debug_mode("error")
    try:
        x.zero_()
        tinit.trunc_normal_at_(x, *window, seed=5, backend=backend)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert_same_bits(x, want, f"{backend}: fill under sync debug mode")
    x.zero_()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        tinit.trunc_normal_at_(x, *window, seed=5, backend=backend)
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
    constants = list(_fillable(window, dtype))
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


def test_cuda_errors_are_reported():
    _require_cuda_backend()
    with pytest.raises(RuntimeError, match="contiguous"):
        torch.ops.tinit.trunc_normal_(
            torch.empty(4, 4, device="cuda").t(), 1, 0, 0, list(transform_constants(0.0, 1.0, -2.0, 2.0, torch.float32))
        )
    with pytest.raises(RuntimeError, match="transform mode"):
        torch.ops.tinit.trunc_normal_(torch.empty(4, device="cuda"), 1, 0, 0, [9.0] + [0.0] * 13)
    with pytest.raises(RuntimeError, match="int32"):
        torch.ops.tinit.philox_(torch.empty(4, device="cuda"), 1, 0, 0)


def test_auto_picks_cuda_for_cuda_tensors():
    _require_cuda_backend()
    assert dispatch.select(torch.empty(4, device="cuda")).name == "cuda"
    np.testing.assert_array_equal(dispatch.auto_order("cuda"), ["cuda", "triton", "torch"])


# ---- grouped and runs ops on CUDA (csrc/cuda/trunc_normal_grouped.cpp) ----

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
    for t, (g, c) in enumerate(zip(gpu, cpu)):
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
    for t, (g, c) in enumerate(zip(tensors, cpu)):
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
    for t, (g, w) in enumerate(zip([*gpu, shard], want)):
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
    for t, (g, w) in enumerate(zip(outputs, want)):
        assert_same_bits(g, w, f"output {t} after a replay")
    for t in outputs:
        t.fill_(7.0)
    others = [torch.empty(n, device="cuda") for n in (5, 4099, 10**5)]
    other_constants = [transform_constants(*WINDOWS["shifted"], torch.float32)] * len(others)
    for k in range(4):  # new tables through the host allocator's pinned blocks
        ops.trunc_normal_grouped_native(others, SEED + 1 + k, [1, 2, 3], [0, 0, 0], other_constants)
        torch.ops.tinit.trunc_normal_runs_(shard, *shard_args[:1], 12 + k, *shard_args[2:])
    graph.replay()
    torch.cuda.synchronize()
    for t, (g, w) in enumerate(zip(outputs, want)):
        assert_same_bits(g, w, f"output {t} replayed after other grouped and runs calls")


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


def test_cuda_grouped_and_runs_errors_are_reported_before_any_write():
    _require_cuda_op("trunc_normal_grouped_")
    c = list(transform_constants(*WINDOWS["central_2sigma"], torch.float32))
    good = torch.full((8,), 7.0, device="cuda")
    grouped = torch.ops.tinit.trunc_normal_grouped_
    bad = [
        ("one stream and one offset", ([good], 1, [0, 1], [0], c)),
        ("14 transform constants per tensor", ([good], 1, [0], [0], c[:13])),
        ("tensor 1 is on cpu", ([good, torch.empty(4)], 1, [0, 0], [0, 0], c + c)),
        ("tensor 1 is not contiguous", ([good, torch.empty(4, 4, device="cuda").t()], 1, [0, 0], [0, 0], c + c)),
        ("tensor 1: offset must be >= 0", ([good, good[:2]], 1, [0, 0], [0, -1], c + c)),
        ("tensor 1: offset \\+ numel", ([good, good[:2]], 1, [0, 0], [0, 2**63 - 1], c + c)),
        ("tensor 1: transform mode", ([good, good[:2]], 1, [0, 0], [0, 0], c + [9.0] + c[1:])),
        ("unsupported dtype", ([good, torch.empty(4, dtype=torch.int32, device="cuda")], 1, [0, 0], [0, 0], c + c)),
    ]
    for message, args in bad:
        with pytest.raises(RuntimeError, match=message):
            grouped(*args)
    torch.cuda.synchronize()
    assert bool((good == 7.0).all()), "a refused grouped call wrote to its first tensor"
    x = torch.empty(6, 4, device="cuda")
    with pytest.raises(RuntimeError, match="do not cover"):
        torch.ops.tinit.trunc_normal_runs_(x, 1, 0, 0, 4, [5], [0, 8, 16, 24, 32], c)
    with pytest.raises(RuntimeError, match="expected 6 outer starts"):
        torch.ops.tinit.trunc_normal_runs_(x, 1, 0, 0, 4, [6], [0, 8], c)
    with pytest.raises(RuntimeError, match="must not exceed 2\\^63 - 1"):
        torch.ops.tinit.trunc_normal_runs_(x, 1, 0, 0, 4, [6], [0, 8, 16, 24, 32, 2**63 - 2], c)
    with pytest.raises(RuntimeError, match="int32"):
        torch.ops.tinit.philox_runs_(x, 1, 0, 0, 4, [6], [0, 8, 16, 24, 32, 40])
