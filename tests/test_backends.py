"""Kernel properties written once and run on every backend (the ``backend`` fixture: cpu, torch,
triton-interpreter, cuda, triton; the CUDA ones are marked ``gpu`` and skip without a GPU).

- the uint32 stream words equal the CPU kernel's (offsets past 2^32 blocks too);
- values equal the CPU kernel's by each backend's convention (``helpers.assert_matches_cpu``);
- every value is finite and inside the window's bounds (fp32/fp64), the sample passes a KS test
  against scipy.stats.truncnorm (skipped without scipy: the GPU machine has none), and bf16/fp16
  moments match the closed form;
- a misaligned view, three shards and a second call give the one call's bits, another stream
  another tensor; column blocks of a weight equal the CPU fill's slices; a grouped fill equals one
  fill per tensor.

The slow backends (``BackendCase.small``) take fewer elements; the stream contract itself lives in
test_stream_contract, the fp64 oracle of each value in test_accuracy.
"""

from __future__ import annotations

import math

import pytest
import torch
from helpers import (
    DTYPE_PARAMS,
    FLOAT_DTYPE_PARAMS,
    LOW_DTYPE_PARAMS,
    WINDOWS,
    assert_matches_cpu,
    assert_same_bits,
    fillable,
    stream_words,
)

import tinit
from tinit import ops

INF = math.inf
SEED, STREAM = 2**63 + 2024, 2**40 + 3
WINDOW_PARAMS = [pytest.param(w, id=name) for name, w in WINDOWS.items()]
# The slow backends take up to this many elements a fill.
SMALL_NUMEL = 2**14


def _numel(backend, gpu: int, cpu: int) -> int:
    """``gpu`` elements on a CUDA device, ``cpu`` on the CPU kernel, at most SMALL_NUMEL on the slow backends."""
    if backend.device == "cuda":
        return gpu
    return min(cpu, SMALL_NUMEL) if backend.small else cpu


def _fill(backend, numel, dtype, window, *, seed=SEED, stream=STREAM, offset=0) -> torch.Tensor:
    x = torch.empty(numel, dtype=dtype, device=backend.device)
    return tinit.trunc_normal_at_(x, *window, seed=seed, stream=stream, offset=offset, backend=backend.name)


def _cpu_fill(numel, dtype, window, *, seed=SEED, stream=STREAM, offset=0) -> torch.Tensor:
    return tinit.trunc_normal_at_(
        torch.empty(numel, dtype=dtype), *window, seed=seed, stream=stream, offset=offset, backend="cpu"
    )


def _against_cpu(backend) -> None:
    """Skip the CPU kernel (the reference itself) and the torch backend (held to it, with its own fp64
    tolerance, by test_accuracy's ``test_reference_backend_matches_cpu``)."""
    if backend.id == "cpu":
        pytest.skip("the CPU kernel is the reference these values are compared with")
    if backend.id == "torch":
        pytest.skip("the torch backend is held to the CPU kernel by test_accuracy.test_reference_backend_matches_cpu")


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
    _against_cpu(backend)
    if backend.small and numel > SMALL_NUMEL:
        pytest.skip(f"{numel} words are too many for {backend} (it takes up to {SMALL_NUMEL})")
    got = stream_words(backend, numel, SEED, STREAM, offset)
    want = ops.philox_words(numel, SEED, STREAM, offset)
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
    _against_cpu(backend)
    backend.skip_unless(dtype)
    if backend.small and numel > SMALL_NUMEL:
        pytest.skip(f"{numel} elements are too many for {backend} (it takes up to {SMALL_NUMEL})")
    fillable(window, dtype)
    got = _fill(backend, numel, dtype, window, offset=offset)
    want = _cpu_fill(numel, dtype, window, offset=offset)
    assert_matches_cpu(backend.id, got, want, window[1], f"{backend} {dtype} {window} offset {offset}")


def test_misaligned_view_and_sharding(backend):
    window = WINDOWS["central_2sigma"]
    whole = _fill(backend, 10_007, torch.float32, window, offset=5)
    base = torch.empty(10_010, device=backend.device)
    view = base[3:]  # contiguous, storage offset 3: scalar stores
    tinit.trunc_normal_at_(view, *window, seed=SEED, stream=STREAM, offset=5, backend=backend.name)
    assert_same_bits(view, whole, f"{backend}: misaligned output")
    shards = [
        _fill(backend, n, torch.float32, window, offset=5 + start) for start, n in ((0, 4001), (4001, 3), (4004, 6003))
    ]
    assert_same_bits(torch.cat(shards), whole, f"{backend}: three shards vs one call")
    other = _fill(backend, 10_007, torch.float32, window, stream=STREAM + 1, offset=5)
    assert float((other == whole).float().mean()) < 0.01, "another stream gave (nearly) the same tensor"
    again = _fill(backend, 10_007, torch.float32, window, offset=5)
    assert_same_bits(again, whole, f"{backend}: second call")


def test_inner_dim_shards_equal_cpu_slices(backend):
    """Column blocks of a (rows, 70) weight (row runs): the CPU fill's slices, fp32 bits (the slow
    backends launch once per row run: 6 rows)."""
    window = WINDOWS["gpt2"]
    rows = 6 if backend.small else 300
    whole = tinit.trunc_normal_at_(torch.empty(rows, 70), *window, seed=SEED, stream=STREAM, backend="cpu")
    for start, width in ((0, 18), (18, 18), (36, 34), (69, 1)):
        shard = torch.empty(rows, width, device=backend.device)
        tinit.trunc_normal_at_(
            shard,
            *window,
            seed=SEED,
            stream=STREAM,
            backend=backend.name,
            global_shape=(rows, 70),
            shard_offsets=(0, start),
        )
        want = whole[:, start : start + width]
        if backend.id in ("cpu", "triton-interpreter", "cuda"):
            assert_same_bits(shard, want, f"{backend}: column block at {start}")
        else:
            assert_matches_cpu(backend.id, shard.cpu(), want, window[1], f"{backend}: column block at {start}")


def test_grouped_fill_equals_per_tensor(backend):
    """One grouped fill of four tensors equals each tensor filled alone by the same backend and, by the
    backend's convention, the CPU kernel's fill."""
    from tinit import FillItem, schemes, write_grouped_, write_spec_

    sizes = (1, 3, 4097, SMALL_NUMEL) if backend.small else (1, 3, 4097, 10**5)
    tensors = [torch.empty(n, device=backend.device) for n in sizes]
    spec = schemes.InitSpec(std=0.02, trunc=2.0)
    items = [FillItem(t, spec, stream=i, offset=7 * i) for i, t in enumerate(tensors)]
    write_grouped_(items, seed=SEED, backend=backend.name)
    for item in items:
        alone = torch.empty(item.tensor.shape, device=backend.device)
        write_spec_(alone, spec, seed=SEED, stream=item.stream, offset=item.offset, backend=backend.name)
        assert_same_bits(item.tensor, alone, f"{backend}: grouped item {item.stream}")
        if backend.id not in ("cpu", "torch"):
            cpu = write_spec_(
                torch.empty(item.tensor.shape), spec, seed=SEED, stream=item.stream, offset=item.offset, backend="cpu"
            )
            assert_matches_cpu(backend.id, item.tensor.cpu(), cpu, spec.std, f"{backend}: grouped item {item.stream}")


KS_WINDOWS = ["central_2sigma", "gpt2", "full_line", "far_tail_8_100", "tail_neginf_-15", "shifted"]


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


@pytest.mark.parametrize("dtype", FLOAT_DTYPE_PARAMS)
@pytest.mark.parametrize("name", KS_WINDOWS)
def test_finite_and_inside_bounds(backend, name, dtype):
    backend.skip_unless(dtype)
    window = WINDOWS[name]
    constants = fillable(window, dtype)
    values = _fill(backend, _numel(backend, 2**20, 2**16), dtype, window, seed=77).cpu()
    lo, hi = constants.lo, constants.hi
    assert bool(torch.isfinite(values).all()), f"{backend} {name}: non-finite values"
    assert float(values.min()) >= lo and float(values.max()) <= hi, (
        f"{backend} {name}: values in [{float(values.min())}, {float(values.max())}], bounds [{lo}, {hi}]"
    )


@pytest.mark.parametrize("dtype", FLOAT_DTYPE_PARAMS)
@pytest.mark.parametrize("name", KS_WINDOWS)
def test_ks(backend, name, dtype):
    stats = pytest.importorskip("scipy.stats", reason="the KS test needs scipy")
    backend.skip_unless(dtype)
    window = WINDOWS[name]
    fillable(window, dtype)
    values = _fill(backend, _numel(backend, 2**20, 2**16), dtype, window, seed=77).cpu()
    mean, std, a, b = window
    dist = stats.truncnorm((a - mean) / std, (b - mean) / std, loc=mean, scale=std)
    result = stats.kstest(values.double().numpy(), dist.cdf)
    assert result.pvalue > 1e-4, f"{backend} {name} {dtype}: KS statistic {result.statistic:.3g}, p {result.pvalue:.3g}"


@pytest.mark.parametrize("dtype", LOW_DTYPE_PARAMS)
@pytest.mark.parametrize("name", ["central_2sigma", "gpt2", "shifted"])
def test_low_precision_moments_and_bounds(backend, name, dtype):
    backend.skip_unless(dtype)
    window = WINDOWS[name]
    constants = fillable(window, dtype)
    n = _numel(backend, 2**22, 2**18)
    values = _fill(backend, n, dtype, window, seed=78).double().cpu().numpy()
    lo, hi = constants.lo, constants.hi
    assert values.min() >= lo and values.max() <= hi, f"{backend} {name}: outside [{lo}, {hi}]"
    mean, std = two_sided_moments(*window)
    # Rounding to the dtype moves each value by at most half an ulp of the window's largest magnitude.
    half_ulp = 0.5 * torch.finfo(dtype).eps * 2.0 ** math.floor(math.log2(max(abs(lo), abs(hi))))
    assert abs(values.mean() - mean) <= 6 * std / math.sqrt(n) + half_ulp, f"{backend} {name}: mean {values.mean()}"
    assert abs(values.std() - std) <= 6 * std / math.sqrt(n) + half_ulp, f"{backend} {name}: std {values.std()}"
