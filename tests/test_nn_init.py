"""tinit.nn.init against torch.nn.init: the same fans, gains, bounds, errors and RNG use, tinit's stream.

Oracles: torch's own functions (``torch.nn.init._calculate_fan_in_and_fan_out``,
``calculate_gain``, the exceptions torch raises for the same bad input, its
RNG state after one ``_draw_key``), scipy's exact distributions (KS), and
the documented stream rule (one key per call, element i at stream index i of
stream 0: ``tinit.trunc_normal_at_`` and the uniform-mode record).
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from helpers import DTYPE_PARAMS, FLOAT_DTYPE_PARAMS
from torch.torch_version import TorchVersion

import tinit
import tinit.nn.init as tnn
from tinit import dispatch
from tinit._plan import _draw_key
from tinit.params import uniform_constants

scipy_stats = pytest.importorskip("scipy.stats")

NAMES = [
    "uniform_",
    "normal_",
    "trunc_normal_",
    "xavier_uniform_",
    "xavier_normal_",
    "kaiming_uniform_",
    "kaiming_normal_",
]
FAN_NAMES = NAMES[3:]
# Arguments beyond the tensor for each function's distribution tests.
ARGS = {
    "uniform_": {"a": -0.3, "b": 0.7},
    "normal_": {"mean": 0.25, "std": 0.02},
    "trunc_normal_": {"mean": 0.1, "std": 1.0, "a": -0.5, "b": 1.5},
    "xavier_uniform_": {"gain": 1.3},
    "xavier_normal_": {"gain": 0.7},
    "kaiming_uniform_": {"a": math.sqrt(5)},
    "kaiming_normal_": {"mode": "fan_out", "nonlinearity": "relu"},
}
# torch >= 2.12 samples trunc_normal_ by rejection with its own argument checks; 2.11's inverse-erf
# algorithm raises for other inputs, so comparisons with torch's trunc_normal_ need the newer one.
TORCH_212 = TorchVersion(torch.__version__) >= "2.12"
BACKENDS = [pytest.param("cpu", id="cpu"), pytest.param("torch", id="torch_ref")]


@pytest.fixture(params=BACKENDS)
def backend(request, monkeypatch):
    monkeypatch.setenv("TINIT_BACKEND", request.param)
    if dispatch.BACKENDS[request.param].install_reason() is not None:
        pytest.skip(f"backend {request.param} unavailable")
    return request.param


def target(name: str, shape, kwargs: dict) -> tuple[str, float, float, float, float]:
    """(kind, mean, std, low, high) of the distribution torch's ``name`` fills ``shape`` with,
    from torch's own fan and gain functions; kind "uniform" (low, high) or "normal" (truncated to [low, high])."""
    probe = torch.empty(shape, device="meta")
    if name == "uniform_":
        return "uniform", 0.0, 0.0, kwargs.get("a", 0.0), kwargs.get("b", 1.0)
    if name == "normal_":
        return "normal", kwargs.get("mean", 0.0), kwargs.get("std", 1.0), -math.inf, math.inf
    if name == "trunc_normal_":
        k = {"mean": 0.0, "std": 1.0, "a": -2.0, "b": 2.0, **kwargs}
        return "normal", k["mean"], k["std"], k["a"], k["b"]
    fan_in, fan_out = torch.nn.init._calculate_fan_in_and_fan_out(probe)
    if name.startswith("xavier"):
        std = kwargs.get("gain", 1.0) * math.sqrt(2.0 / float(fan_in + fan_out))
    else:
        fan = fan_in if kwargs.get("mode", "fan_in").lower() == "fan_in" else fan_out
        std = torch.nn.init.calculate_gain(kwargs.get("nonlinearity", "leaky_relu"), kwargs.get("a", 0)) / math.sqrt(
            fan
        )
    if name.endswith("uniform_"):
        bound = math.sqrt(3.0) * std
        return "uniform", 0.0, std, -bound, bound
    return "normal", 0.0, std, -math.inf, math.inf


def stream_fill(name: str, shape, dtype, kwargs: dict, key: int, stream: int = 0) -> torch.Tensor:
    """The documented stream rule: element i at stream index i of (key, stream), from ``target``'s distribution."""
    kind, mean, std, low, high = target(name, shape, kwargs)
    out = torch.empty(shape, dtype=dtype)
    if kind == "normal":
        return tinit.trunc_normal_at_(out, mean, std, low, high, seed=key, stream=stream)
    dispatch.select(out).fill(out, key, stream, 0, uniform_constants(low, high, dtype))
    return out


def next_key(generator: torch.Generator | None = None) -> int:
    """The key the next call will draw, without drawing it."""
    if generator is None:
        state = torch.get_rng_state()
        key = _draw_key(None)
        torch.set_rng_state(state)
        return key
    state = generator.get_state()
    key = _draw_key(generator)
    generator.set_state(state)
    return key


def call(name: str, tensor, **extra):
    return getattr(tnn, name)(tensor, **{**ARGS[name], **extra})


def rng_after_one_draw() -> torch.Tensor:
    state = torch.get_rng_state()
    _draw_key(None)
    after = torch.get_rng_state()
    torch.set_rng_state(state)
    return after


@pytest.mark.parametrize("dtype", FLOAT_DTYPE_PARAMS)
@pytest.mark.parametrize("name", NAMES)
def test_distribution_ks(name, dtype, backend):
    """KS against the exact target: U(low, high), N(mean, std^2) or the truncated normal, with
    xavier/kaiming std from torch's fan and gain functions on a conv-shaped weight."""
    shape = (96, 16, 2, 2)
    torch.manual_seed(11)
    x = call(name, torch.empty(shape, dtype=dtype)).double().flatten().numpy()
    kind, mean, std, low, high = target(name, shape, ARGS[name])
    if kind == "uniform":
        dist = scipy_stats.uniform(loc=low, scale=high - low)
    else:
        dist = scipy_stats.truncnorm((low - mean) / std, (high - mean) / std, loc=mean, scale=std)
    assert low <= x.min() and x.max() <= high
    result = scipy_stats.kstest(x, dist.cdf)
    assert result.pvalue > 1e-3, f"{name} {dtype}: KS D={result.statistic:.4g}, p={result.pvalue:.3g}"


SHAPES = [
    pytest.param((1,), id="1"),
    pytest.param((7,), id="prime"),
    pytest.param((1, 1), id="1x1"),
    pytest.param((13, 17), id="13x17"),
    pytest.param((5, 3, 2), id="5x3x2"),
]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", DTYPE_PARAMS)
@pytest.mark.parametrize("name", NAMES)
def test_stream_rule(name, dtype, shape, backend):
    """One key from torch's RNG, element i at stream index i of stream 0, std from torch's formulas (bits)."""
    if name in FAN_NAMES and len(shape) < 2:
        pytest.skip("fans need 2 dims")
    torch.manual_seed(5)
    key = next_key()
    got = call(name, torch.empty(shape, dtype=dtype))
    torch.testing.assert_close(got, stream_fill(name, shape, dtype, ARGS[name], key), rtol=0, atol=0)


FAN_CASES = [
    pytest.param("xavier_uniform_", {}, id="xu"),
    pytest.param("xavier_normal_", {"gain": 5 / 3}, id="xn-tanh"),
    pytest.param("kaiming_uniform_", {}, id="ku-default"),
    pytest.param("kaiming_uniform_", {"a": 0.2, "mode": "fan_out"}, id="ku-leaky0.2-fan_out"),
    pytest.param("kaiming_uniform_", {"a": None, "mode": "FAN_IN"}, id="ku-aNone-upper"),
    pytest.param("kaiming_uniform_", {"nonlinearity": "tanh"}, id="ku-tanh"),
    pytest.param("kaiming_normal_", {"nonlinearity": "selu"}, id="kn-selu"),
    pytest.param("kaiming_normal_", {"nonlinearity": "conv2d", "mode": "fan_out"}, id="kn-conv2d-fan_out"),
    pytest.param("kaiming_normal_", {"a": 3, "nonlinearity": "leaky_relu"}, id="kn-leaky3"),
]
FAN_SHAPES = [
    pytest.param((48, 64), id="linear"),
    pytest.param((8, 4, 3, 3), id="conv2d"),
    pytest.param((6, 5, 7), id="conv1d"),
    pytest.param((2, 3, 2, 2, 2), id="conv3d"),
]


@pytest.mark.parametrize("shape", FAN_SHAPES)
@pytest.mark.parametrize("name, kwargs", FAN_CASES)
def test_fans_and_gains(name, kwargs, shape):
    """Every mode / nonlinearity / slope and receptive field gives torch's std (bit-exact stream fill)."""
    torch.manual_seed(2)
    key = next_key()
    got = getattr(tnn, name)(torch.empty(shape), **kwargs)
    torch.testing.assert_close(got, stream_fill(name, shape, torch.float32, kwargs, key), rtol=0, atol=0)
    probe = torch.empty(shape, device="meta")
    assert tnn._calculate_fan_in_and_fan_out(probe) == torch.nn.init._calculate_fan_in_and_fan_out(probe)


@pytest.mark.parametrize("name", NAMES)
def test_non_contiguous_views(name):
    """A view gets the values of a contiguous tensor of its shape, in logical order; the rest is untouched."""
    for make in (lambda b: b.t(), lambda b: b[:, ::3], lambda b: b[2:9].permute(1, 0)):
        base = torch.full((12, 10), math.nan)
        view = make(base)
        torch.manual_seed(4)
        key = next_key()
        assert call(name, view) is view
        torch.testing.assert_close(
            view, stream_fill(name, tuple(view.shape), torch.float32, ARGS[name], key), rtol=0, atol=0
        )
        assert int(base.isnan().sum()) == base.numel() - view.numel()


@pytest.mark.parametrize("name", NAMES)
def test_one_key_per_call(name):
    """Exactly one 64-bit key is consumed: torch's state equals the one after a single ``_draw_key``."""
    torch.manual_seed(9)
    expected = rng_after_one_draw()
    call(name, torch.empty(6, 5))
    assert torch.equal(torch.get_rng_state(), expected)


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: torch.empty(6, 5, device="meta"), id="meta"),
        pytest.param(lambda: torch.empty(0, 5), id="0x5"),
        pytest.param(lambda: torch.empty(0, 0), id="0x0"),
        pytest.param(lambda: torch.empty(3, 0, 2), id="3x0x2"),
    ],
)
@pytest.mark.parametrize("name", NAMES)
def test_nothing_written_draws_nothing(name, make):
    tensor = make()
    torch.manual_seed(9)
    before = torch.get_rng_state()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert call(name, tensor) is tensor
    assert torch.equal(torch.get_rng_state(), before)
    if name.startswith("kaiming") and tensor.numel() == 0:
        # torch warns for a 0 in the shape and returns (checked against torch itself)
        with pytest.warns(UserWarning, match="zero-element"):
            getattr(torch.nn.init, name)(torch.empty(tensor.shape))
        assert any("zero-element" in str(w.message) for w in caught)


@pytest.mark.parametrize("name", NAMES)
def test_generator_is_used_and_advanced(name):
    g, twin = torch.Generator().manual_seed(123), torch.Generator().manual_seed(123)
    torch.manual_seed(0)
    default_before = torch.get_rng_state()
    key = _draw_key(twin)
    got = call(name, torch.empty(9, 4), generator=g)
    assert torch.equal(g.get_state(), twin.get_state())
    assert torch.equal(torch.get_rng_state(), default_before)
    torch.testing.assert_close(got, stream_fill(name, (9, 4), torch.float32, ARGS[name], key), rtol=0, atol=0)


@pytest.mark.parametrize("name", NAMES)
def test_manual_seed_reproduces(name):
    torch.manual_seed(31)
    first, second = call(name, torch.empty(8, 8)), call(name, torch.empty(8, 8))
    torch.manual_seed(31)
    torch.testing.assert_close(call(name, torch.empty(8, 8)), first, rtol=0, atol=0)
    torch.testing.assert_close(call(name, torch.empty(8, 8)), second, rtol=0, atol=0)
    assert not torch.equal(first, second)


@pytest.mark.parametrize("name", NAMES)
def test_parameter_requires_grad(name):
    p = torch.nn.Parameter(torch.empty(5, 4))
    out = call(name, p)
    assert out is p and p.requires_grad and p.grad_fn is None and p.is_leaf
    assert bool(torch.isfinite(p).all())


def test_trunc_normal_is_tinit_trunc_normal():
    """One implementation under two names, its values those of ``trunc_normal_at_`` at the drawn key."""
    assert tinit.trunc_normal_ is tnn.trunc_normal_
    torch.manual_seed(8)
    key = int(torch.empty((), dtype=torch.int64).random_())
    torch.manual_seed(8)
    got = tnn.trunc_normal_(torch.empty(40, 3), 0.0, 0.02, -0.04, 0.04)
    want = tinit.trunc_normal_at_(torch.empty(40, 3), 0.0, 0.02, -0.04, 0.04, seed=key)
    torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.parametrize("name", NAMES)
def test_keyed_seed_and_stream(name):
    """``KEYED[name]`` takes the key and stream id from its arguments and leaves torch's RNG alone."""
    torch.manual_seed(1)
    before = torch.get_rng_state()
    got = tnn.KEYED[name](torch.empty(7, 6), **ARGS[name], seed=2**64 - 5, stream=77)
    assert torch.equal(torch.get_rng_state(), before)
    want = stream_fill(name, (7, 6), torch.float32, ARGS[name], 2**64 - 5, stream=77)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    with pytest.raises(ValueError, match="seed"):
        tnn.KEYED[name](torch.empty(7, 6), seed=2**64)


# (name, args after the tensor, kwargs, shape, dtype): bad input on which torch raises.
BAD = [
    ("uniform_", (1.0, 0.0), {}, (3,), torch.float32),
    ("uniform_", (0.0, math.inf), {}, (3,), torch.float32),
    ("uniform_", (math.nan, 1.0), {}, (3,), torch.float32),
    ("uniform_", (-1e5, 1e5), {}, (3,), torch.float16),
    ("uniform_", (-1e308, 1e308), {}, (3,), torch.float64),  # b - a overflows: torch's to-from check
    ("uniform_", (-2e38, 2e38), {}, (3,), torch.float32),
    ("uniform_", (-2e38, 2e38), {}, (3,), torch.bfloat16),
    ("uniform_", (-40000.0, 40000.0), {}, (3,), torch.float16),
    ("xavier_uniform_", (1e308,), {}, (3, 4), torch.float64),
    ("uniform_", (0.0, 5.0), {}, (3,), torch.int64),
    ("normal_", (0.0, -1.0), {}, (3,), torch.float32),
    ("normal_", (0.0, math.nan), {}, (3,), torch.float32),
    ("normal_", ("a",), {}, (3,), torch.float32),
    ("normal_", (), {}, (3,), torch.bool),
    ("normal_", (), {"generator": 3}, (3,), torch.float32),
    ("trunc_normal_", (0.0, 1.0, 1.0, 0.0), {}, (3,), torch.float32),
    ("trunc_normal_", (), {}, (3,), torch.int64),
    ("xavier_uniform_", (), {}, (3,), torch.float32),
    ("xavier_uniform_", (), {}, (), torch.float32),
    ("xavier_uniform_", (-1.0,), {}, (3, 4), torch.float32),
    ("xavier_normal_", (-1.0,), {}, (3, 4), torch.float32),
    ("xavier_uniform_", ("x",), {}, (3, 4), torch.float32),
    ("xavier_normal_", (), {}, (0,), torch.float32),
    ("kaiming_uniform_", (), {"mode": "fan_avg"}, (3, 4), torch.float32),
    ("kaiming_uniform_", (), {"mode": 3}, (3, 4), torch.float32),
    ("kaiming_uniform_", (), {"nonlinearity": "gelu"}, (3, 4), torch.float32),
    ("kaiming_uniform_", (), {}, (3, 4), torch.int32),
    ("kaiming_normal_", (), {"a": "x"}, (3, 4), torch.float32),
    ("kaiming_normal_", (), {}, (5,), torch.float32),
]


@pytest.mark.parametrize(
    "name, args, kwargs, shape, dtype", [pytest.param(*case, id=f"{case[0]}-{i}") for i, case in enumerate(BAD)]
)
def test_errors_match_torch(name, args, kwargs, shape, dtype):
    """tinit raises an instance of the exception type torch raises, before touching the RNG or the tensor."""
    if name == "trunc_normal_" and not TORCH_212:
        pytest.skip("torch < 2.12 samples trunc_normal_ by another algorithm with other checks")
    with pytest.raises(Exception) as torch_error:
        getattr(torch.nn.init, name)(torch.zeros(shape, dtype=dtype), *args, **kwargs)
    tensor = torch.zeros(shape, dtype=dtype)
    torch.manual_seed(0)
    before = torch.get_rng_state()
    with pytest.raises(type(torch_error.value)):
        getattr(tnn, name)(tensor, *args, **kwargs)
    assert torch.equal(torch.get_rng_state(), before)
    assert not tensor.any()


@pytest.mark.parametrize(
    "name, args, dtype",
    [
        pytest.param("normal_", (math.inf, 1.0), torch.float32, id="normal-inf-mean"),
        pytest.param("uniform_", (0.0, 1.0), torch.complex64, id="uniform-complex"),
        pytest.param("trunc_normal_", (0.0, 0.0), torch.float32, id="trunc-std0"),
    ],
)
def test_refusals_beyond_torch(name, args, dtype):
    """Inputs torch fills with inf/NaN, complex values or a ZeroDivisionError: refused with a ValueError/TypeError."""
    torch.manual_seed(0)
    before = torch.get_rng_state()
    with pytest.raises((ValueError, TypeError)):
        getattr(tnn, name)(torch.zeros(4, dtype=dtype), *args)
    assert torch.equal(torch.get_rng_state(), before)


@pytest.mark.parametrize(
    "name, kwargs, match",
    [
        pytest.param(
            "xavier_uniform_", {"gain": math.nan}, "gain must be finite and >= 0, got nan", id="xavier-gain-nan"
        ),
        pytest.param(
            "xavier_normal_", {"gain": math.inf}, "gain must be finite and >= 0, got inf", id="xavier-gain-inf"
        ),
        pytest.param("xavier_uniform_", {"gain": "x"}, "gain must be a real number", id="xavier-gain-str"),
        pytest.param("kaiming_uniform_", {"a": math.nan}, "a must be finite, got nan", id="kaiming-a-nan"),
        pytest.param("kaiming_normal_", {"a": math.nan}, "a must be finite, got nan", id="kaiming-normal-a-nan"),
        pytest.param("uniform_", {"a": math.nan}, "uniform_: a nan", id="uniform-a-nan"),
        pytest.param("uniform_", {"b": math.inf}, "uniform_: b inf", id="uniform-b-inf"),
    ],
)
def test_refusals_name_the_argument(name, kwargs, match):
    """Where torch would write NaN (or fail somewhere inside), the refusal names the argument."""
    tensor = torch.zeros(4, 3)
    torch.manual_seed(0)
    before = torch.get_rng_state()
    with pytest.raises((ValueError, TypeError), match=match):
        getattr(tnn, name)(tensor, **kwargs)
    assert torch.equal(torch.get_rng_state(), before) and not tensor.any()


@pytest.mark.parametrize(
    "name, args, value",
    [
        pytest.param("uniform_", (0.5, 0.5), 0.5, id="uniform-a==b"),
        pytest.param("normal_", (2.0, 0.0), 2.0, id="normal-std0"),
        pytest.param("trunc_normal_", (0.0, 1.0, 1.0, 1.0), 1.0, id="trunc-a==b"),
        pytest.param("xavier_normal_", (0.0,), 0.0, id="xavier-gain0"),
    ],
)
def test_degenerate_fills_like_torch(name, args, value):
    """A zero-width window fills the constant torch fills, and still draws one key."""
    if name == "trunc_normal_" and not TORCH_212:
        pytest.skip("compared with torch >= 2.12's trunc_normal_")
    torch.testing.assert_close(getattr(torch.nn.init, name)(torch.empty(3, 4), *args), torch.full((3, 4), value))
    torch.manual_seed(0)
    expected = rng_after_one_draw()
    got = getattr(tnn, name)(torch.empty(3, 4), *args)
    torch.testing.assert_close(got, torch.full((3, 4), value), rtol=0, atol=0)
    assert torch.equal(torch.get_rng_state(), expected)


@pytest.mark.parametrize("name", NAMES)
def test_torch_function_modes_see_the_same_calls(name):
    """The functions torch dispatches through ``__torch_function__`` (uniform_, normal_, kaiming_uniform_) are the
    ones tinit's do: a TorchFunctionMode sees tinit's function exactly where it sees torch's."""

    class Record(torch.overrides.TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.funcs = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            self.funcs.append(func)
            return func(*args, **(kwargs or {}))

    seen = {}
    for module in (torch.nn.init, tnn):
        with Record() as mode:
            call(name, torch.empty(4, 3)) if module is tnn else getattr(module, name)(torch.empty(4, 3), **ARGS[name])
        seen[module.__name__] = getattr(module, name) in mode.funcs
    assert seen["tinit.nn.init"] == seen["torch.nn.init"]


def test_reexports_are_torch_functions():
    for name in ("calculate_gain", "constant_", "zeros_", "ones_", "eye_", "dirac_", "orthogonal_", "sparse_"):
        assert getattr(tnn, name) is getattr(torch.nn.init, name)
    assert set(tnn.KEYED) == set(NAMES)
    assert set(torch.nn.init.__all__) <= set(tnn.__all__)
    for name in torch.nn.init.__all__:
        assert callable(getattr(tnn, name)), name


@pytest.mark.parametrize("name", [n for n in NAMES if n != "trunc_normal_"])
def test_deprecated_aliases_warn_and_fill(name):
    alias = name[:-1]
    with pytest.warns(FutureWarning, match=f"nn.init.{alias}`"):
        getattr(torch.nn.init, alias)(torch.empty(4, 3))
    torch.manual_seed(3)
    with pytest.warns(FutureWarning, match=f"nn.init.{alias}`"):
        got = getattr(tnn, alias)(torch.empty(4, 3), **ARGS[name])
    torch.manual_seed(3)
    torch.testing.assert_close(got, call(name, torch.empty(4, 3)), rtol=0, atol=0)


@pytest.mark.parametrize("name", NAMES)
def test_triton_interpreted_equals_cpu(name, monkeypatch, triton_interpreter):
    """The Triton kernel (interpreter, a tiny tensor) writes the CPU kernel's bits for the same key."""
    if dispatch.BACKENDS["cpu"].install_reason() is not None:
        pytest.skip("the CPU kernel is the reference here")
    torch.manual_seed(3)
    want = call(name, torch.empty(5, 7))
    monkeypatch.setenv("TINIT_BACKEND", "triton")
    torch.manual_seed(3)
    got = call(name, torch.empty(5, 7))
    torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.parametrize("name", ["normal_", "kaiming_uniform_", "trunc_normal_"])
def test_torch_compile(name):
    """Under torch.compile (graph breaks allowed) the drop-in draws the same key and writes the same bits."""
    torch._dynamo.reset()
    compiled = torch.compile(lambda t: call(name, t), backend="eager")
    torch.manual_seed(6)
    got = compiled(torch.empty(16, 8))
    torch.manual_seed(6)
    torch.testing.assert_close(got, call(name, torch.empty(16, 8)), rtol=0, atol=0)


@pytest.mark.parametrize("name", ["normal_", "trunc_normal_", "xavier_uniform_", "kaiming_normal_"])
def test_dtensor_values_are_the_unsharded_ones(name):
    """Real DTensors on torch's fake process group (one process plays each rank): every rank's shard of a
    Shard(0) or Shard(1) DTensor holds its chunk of the unsharded tensor, fans from the logical shape."""
    import torch.distributed as dist

    fake_pg = pytest.importorskip("torch.testing._internal.distributed.fake_pg")
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import DTensor, Replicate, Shard

    if dist.is_initialized():
        pytest.skip("a process group is already initialised in this process")
    shape, world = (9, 6), 3
    torch.manual_seed(21)
    full = call(name, torch.empty(shape))
    for placement, dim in ((Shard(0), 0), (Shard(1), 1), (Replicate(), None)):
        for rank in range(world):
            dist.init_process_group("fake", rank=rank, world_size=world, store=fake_pg.FakeStore())
            try:
                mesh = DeviceMesh("cpu", list(range(world)))
                chunk = full if dim is None else full.chunk(world, dim)[rank]
                tensor = DTensor.from_local(
                    torch.empty(chunk.shape), mesh, [placement], run_check=False, shape=full.shape, stride=(6, 1)
                )
                torch.manual_seed(21)
                expected_rng = rng_after_one_draw()
                assert call(name, tensor) is tensor
                assert torch.equal(torch.get_rng_state(), expected_rng)
                torch.testing.assert_close(
                    tensor.to_local(), chunk, rtol=0, atol=0, msg=lambda m, p=placement: f"{p}: {m}"
                )
            finally:
                dist.destroy_process_group()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("name", NAMES)
def test_cuda_equals_cpu(name):
    """The key comes from the CPU generator whatever the tensor's device, and the CUDA kernels compute
    the CPU kernel's fp32 bits: a CUDA tensor gets the CPU tensor's values."""
    torch.manual_seed(12)
    want = call(name, torch.empty(33, 65))
    torch.manual_seed(12)
    got = call(name, torch.empty(33, 65, device="cuda"))
    torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0)


@pytest.mark.parametrize("name", ["xavier_uniform_", "xavier_normal_"])
def test_a_negative_xavier_gain_is_named(name):
    tensor = torch.zeros(4, 4)
    with pytest.raises(tnn.ArgumentError, match="gain must be finite and >= 0, got -1.0"):
        getattr(tnn, name)(tensor, gain=-1.0)
    assert (tensor == 0).all()
