"""Shared test helpers: dtype tables, ulp distances, the fp64 oracle of the
transform, and stream positions holding chosen words (``from helpers import ...``;
tests/ is on ``sys.path`` through pytest's rootdir conftest).

scipy is imported by the helpers that use it (``oracle``, ``exact_moments``),
not here: the GPU suites (test_gpu, test_backends) collect on machines without it."""

from __future__ import annotations

import math

import numpy as np
import numpy_philox
import pytest
import torch

import tinit

# one argument tuple per random initialiser of torch.nn.init, torch's positional order after the tensor
INIT_ARGS = {
    "uniform_": (-0.3, 0.7),
    "normal_": (0.1, 0.02),
    "trunc_normal_": (0.0, 0.02, -0.03, 0.05),
    "xavier_uniform_": (1.5,),
    "xavier_normal_": (0.8,),
    "kaiming_uniform_": (math.sqrt(5),),
    "kaiming_normal_": (0.0, "fan_out", "relu"),
}
DTYPES = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16, "f16": torch.float16}
DTYPE_PARAMS = [pytest.param(dtype, id=name) for name, dtype in DTYPES.items()]
FLOAT_DTYPE_PARAMS = [pytest.param(torch.float32, id="f32"), pytest.param(torch.float64, id="f64")]
LOW_DTYPE_PARAMS = [pytest.param(torch.bfloat16, id="bf16"), pytest.param(torch.float16, id="f16")]
WORD_COUNT = 2**32
# Named (mean, std, a, b) windows, absolute bounds, of the backend suites (test_backends, test_gpu): every
# transform mode, the far tails, a window off the mean.
WINDOWS = {
    "central_2sigma": (0.0, 1.0, -2.0, 2.0),
    "gpt2": (0.0, 0.02, -0.04, 0.04),
    "two_sided_4sigma": (0.0, 1.0, -4.0, 4.0),
    "full_line": (0.0, 1.0, -math.inf, math.inf),
    "far_tail_8_100": (0.0, 1.0, 8.0, 100.0),
    "tail_neginf_-15": (0.0, 1.0, -math.inf, -15.0),
    "shifted": (3.0, 2.0, -1.0, 4.0),
}


def fill_at(shape, dtype, mean, std, a, b, *, seed, stream=0, offset=0, backend="auto"):
    """A fresh tensor filled by ``tinit.trunc_normal_at_``.

    ``backend`` is a ``backend=`` name (the tensor is a CPU one) or a ``BackendCase`` of the ``backend``
    fixture: then the tensor is filled on the case's device by its backend and returned on the CPU.
    """
    device = getattr(backend, "device", "cpu")
    name = getattr(backend, "name", backend)
    tensor = torch.empty(shape, dtype=dtype, device=device)
    tinit.trunc_normal_at_(tensor, mean, std, a, b, seed=seed, stream=stream, offset=offset, backend=name)
    return tensor.cpu()


def fillable(window, dtype):
    """``window``'s transform record in ``dtype``; skips the test when the window is not representable there."""
    from tinit.params import transform_constants

    try:
        return transform_constants(*window, dtype)
    except ValueError as exc:
        pytest.skip(f"window not representable in {dtype}: {exc}")


def ulp(values: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    """The spacing of ``dtype`` at each |value| (fp64 array in, fp64 array out).

    For v with 2**e <= |v| < 2**(e+1) this is eps * 2**e, never less than the
    smallest subnormal of ``dtype``.
    """
    info = torch.finfo(dtype)
    _, exponent = np.frexp(np.abs(np.asarray(values, dtype=np.float64)))  # |v| = m 2**e, m in [0.5, 1)
    return np.maximum(np.ldexp(info.eps, exponent - 1), info.smallest_normal * info.eps)


def assert_within_ulp(
    actual, expected, *, scale: float, dtype: torch.dtype, max_ulp: float, what: str, words=None
) -> float:
    """Check |actual - expected| <= max_ulp ulp of ``dtype`` at max(|expected|, scale).

    Args:
        actual: values under test (tensor or array, any float dtype).
        expected: fp64 reference values, same shape.
        scale: the floor of the magnitude whose ulp is the unit (e.g. std).
        what: a label for the failure message.
        words: the stream words the values came from, reported on failure.

    Returns:
        The largest distance found, in ulp.
    """
    got = torch.as_tensor(actual).double().numpy().reshape(-1)
    ref = np.asarray(expected, dtype=np.float64).reshape(-1)
    err = np.abs(got - ref) / ulp(np.maximum(np.abs(ref), scale), dtype)
    err = np.where(np.isnan(err), np.inf, err)
    worst = int(np.argmax(err))
    if err[worst] > max_ulp:
        where = f"index {worst}" + (
            "" if words is None else f" (stream word {int(np.asarray(words).reshape(-1)[worst])})"
        )
        raise AssertionError(
            f"{what}: {int(np.sum(err > max_ulp))} of {err.size} values differ by more than "
            f"{max_ulp} ulp; worst at {where}: got {got[worst]!r}, expected {ref[worst]!r}, "
            f"{err[worst]:.3f} ulp of max(|expected|, {scale})"
        )
    return float(err[worst])


def window_frame(mean: float, std: float, a: float, b: float) -> tuple[float, float, float]:
    """(alpha', beta', sign) of the standardised window in the frame tinit samples in.

    When alpha > -beta tinit samples -X on [-beta, -alpha] (sign -1), so that
    the window's heavier side is the lower tail (transform.h); that frame
    takes the complement uniform 1 - u, so the value is F^-1(u) either way.
    """
    alpha, beta = (a - mean) / std, (b - mean) / std
    if alpha > -beta:
        return -beta, -alpha, -1.0
    return alpha, beta, 1.0


def uniforms_of(words) -> np.ndarray:
    """u = (w + 1/2) / 2**32 in fp64 (exact) for uint32 words."""
    return (np.asarray(words, dtype=np.float64) + 0.5) / WORD_COUNT


def frame_uniforms_of(words, sign: float) -> np.ndarray:
    """The uniform of the sampling frame: u, or 1 - u = (~w + 1/2) / 2**32 when mirrored."""
    words = np.asarray(words, dtype=np.int64)
    return uniforms_of(words if sign > 0 else (WORD_COUNT - 1) - words)


def oracle(words, mean: float, std: float, a: float, b: float) -> np.ndarray:
    """fp64 value of each stream word: mean + std * F^-1(u), F the truncated normal cdf.

    Computed with scipy.stats.truncnorm's ppf in the sampling frame (see
    ``window_frame``), from the exact u or 1 - u, so a tail window keeps its
    digits; against an 80-digit mpmath inversion this is within ~4 fp64 ulp
    of max(|z|, 1) for every window in these tests (test_accuracy checks it).
    """
    import scipy.stats

    alpha, beta, sign = window_frame(mean, std, a, b)
    z = scipy.stats.truncnorm.ppf(frame_uniforms_of(words, sign), alpha, beta)
    return mean + std * (sign * z)


def place_words(words, seed: int = 1) -> list[tuple[int, int, int, list[int]]]:
    """Stream positions whose words are exactly ``words``, four per counter block.

    Philox is a bijection of the counter for a fixed key, so the counter that
    yields a chosen block of four words can be computed; its high half is the
    stream id and its low half the block index (seeds are tried upwards from
    ``seed`` until the block index keeps offsets below 2**63).

    Returns:
        One (seed, stream, offset, block_words) per block of four words
        (``words`` is padded with 2**31 to a multiple of 4).
    """
    words = [int(w) for w in words]
    words += [2**31] * (-len(words) % 4)
    placed = []
    for start in range(0, len(words), 4):
        block = words[start : start + 4]
        key = seed
        while True:
            c0, c1, c2, c3 = numpy_philox.philox4x32_10_inverse(block, (key & 0xFFFFFFFF, key >> 32))
            if c1 < 2**29:
                break
            key += 1
        placed.append((key, c2 | (c3 << 32), 4 * (c0 | (c1 << 32)), block))
    return placed


def exact_moments(mean: float, std: float, a: float, b: float) -> tuple[float, float]:
    """Mean and standard deviation of N(mean, std^2) truncated to [a, b] (scipy)."""
    import scipy.stats

    alpha, beta = (a - mean) / std, (b - mean) / std
    m, v = scipy.stats.truncnorm.stats(alpha, beta, loc=mean, scale=std, moments="mv")
    return float(m), math.sqrt(float(v))


BITS = {torch.float32: torch.int32, torch.float64: torch.int64, torch.bfloat16: torch.int16, torch.float16: torch.int16}


def assert_same_bits(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    """Bit equality of two float tensors (any devices), reporting the first differing element and both values."""
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.shape, want.shape, got.dtype, want.dtype)
    got, want = got.detach().cpu().reshape(-1), want.detach().cpu().reshape(-1)
    diff = got.view(BITS[got.dtype]) != want.view(BITS[got.dtype])
    if bool(diff.any()):
        where = torch.nonzero(diff)[:, 0]
        i = int(where[0])
        raise AssertionError(
            f"{what}: {where.numel()} of {got.numel()} values differ in their bits; "
            f"first at flat index {i}: got {got[i].item()!r}, expected {want[i].item()!r}"
        )


def assert_matches_cpu(backend: str, got: torch.Tensor, want: torch.Tensor, std: float, what: str) -> None:
    """A backend's values against the CPU kernel's for the same (seed, stream, offset), by its convention.

    ``backend`` is a fixture id (``cuda``, ``triton``, ``triton-interpreter``). ``cuda`` is bit for bit in
    fp32/bf16/fp16 and within 2 ulp in fp64 (the device's libdevice ``log`` may differ from glibc's in the
    last bit); the interpreter is bit for bit (its ``tl.fma`` is a true fused multiply-add, as the CPU's);
    compiled ``triton`` is within 2 fp32 ulp (relative to max(|x|, std)) or one bf16/fp16 ulp.
    """
    dtype = got.dtype
    if backend == "triton-interpreter" or (backend == "cuda" and dtype != torch.float64):
        assert_same_bits(got, want, what)
        return
    ulps = {torch.float32: 2.0, torch.float64: 2.0, torch.bfloat16: 1.0, torch.float16: 1.0}[dtype]
    assert_within_ulp(got.cpu(), want.double().numpy(), scale=std, dtype=dtype, max_ulp=ulps, what=what)


def stream_words(backend, numel: int, seed: int, stream: int, offset: int = 0) -> torch.Tensor:
    """The uint32 stream words [offset, offset + numel) as ``backend`` (a ``BackendCase``) computes them,
    on the CPU: the native ``philox_words`` (cpu, cuda), ``reference.stream_words`` (torch), Triton's
    ``philox_words_triton`` (triton, triton-interpreter)."""
    from tinit import dispatch, ops, reference

    if backend.name in ("cpu", "cuda"):
        words = ops.philox_words(numel, seed, stream, offset, device=backend.device)
    elif backend.name == "torch":
        words = reference.stream_words(numel, seed, stream, offset, device=backend.device)
    else:
        module = dispatch._triton_module()[0]
        words = module.philox_words_triton(numel, seed, stream, offset, backend.device)
    assert words.device.type == backend.device, f"{backend} words on {words.device}"
    return words.cpu()
