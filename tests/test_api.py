"""The Python API: nn.init semantics, views, RNG use, schemes, errors and op checks."""

from __future__ import annotations

import inspect
import math

import pytest
import scipy.stats
import torch
from helpers import DTYPE_PARAMS, fill_at

import tinit
from tinit.params import transform_constants

SHAPES = [
    pytest.param((1,), id="1"),
    pytest.param((7,), id="7"),
    pytest.param((13, 17), id="13x17"),
    pytest.param((3, 5, 11), id="3x5x11"),
    pytest.param((1021,), id="1021"),
    pytest.param((0,), id="0"),
    pytest.param((4, 0, 3), id="4x0x3"),
]
# Two-sigma truncation shrinks the std by this factor.
STD_FACTOR_2SIGMA = float(scipy.stats.truncnorm(-2.0, 2.0).std())


def test_signature_matches_nn_init():
    ours = inspect.signature(tinit.trunc_normal_).parameters
    theirs = inspect.signature(torch.nn.init.trunc_normal_).parameters
    assert list(ours) == list(theirs), f"parameters {list(ours)} vs torch's {list(theirs)}"
    for name, param in theirs.items():
        assert ours[name].default == param.default, f"default of {name}: {ours[name].default} vs {param.default}"


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", DTYPE_PARAMS)
def test_returns_the_tensor_filled_in_bounds(dtype, shape):
    tensor = torch.empty(shape, dtype=dtype)
    out = tinit.trunc_normal_(tensor, mean=0.5, std=0.25, a=0.1, b=0.8)
    assert out is tensor
    assert out.shape == torch.Size(shape) and out.dtype == dtype
    values = out.double()
    assert torch.isfinite(values).all(), "non-finite values"
    assert ((values >= 0.1) & (values <= 0.8)).all(), (
        f"values outside [0.1, 0.8]: {values[(values < 0.1) | (values > 0.8)]}"
    )


def test_bounds_are_absolute():
    """As in torch.nn.init: a and b are values, not multiples of std."""
    values = fill_at(10_000, torch.float32, 5.0, 2.0, 4.0, 6.0, seed=3).double()
    assert float(values.min()) >= 4.0 and float(values.max()) <= 6.0, (
        f"range [{float(values.min())}, {float(values.max())}] is not inside [4, 6]"
    )


@pytest.mark.parametrize("dtype", DTYPE_PARAMS)
def test_parameter_without_autograd(dtype):
    param = torch.nn.Parameter(torch.zeros(31, 17, dtype=dtype))
    with torch.enable_grad():
        out = tinit.trunc_normal_(param, std=0.02, a=-0.04, b=0.04)
    assert out is param
    assert param.requires_grad and param.is_leaf and param.grad_fn is None and param.grad is None
    assert (param.detach() != 0).any(), "the Parameter was not filled"
    with torch.enable_grad():
        tinit.fill_(param, "normal", seed=1)
    assert param.requires_grad and param.is_leaf and param.grad_fn is None


def _views():
    """(id, base shape, function making a non-contiguous view of the base)."""
    return [
        pytest.param((20, 30), lambda t: t.t(), id="transposed"),
        pytest.param((20, 30), lambda t: t[::2, 1::3], id="strided_slice"),
        pytest.param((20, 30), lambda t: t[:, 7], id="column"),
        pytest.param((6, 7, 8), lambda t: t.permute(2, 0, 1)[1:, ::3], id="permuted_3d"),
        pytest.param((40,), lambda t: t[5::7], id="1d_step7"),
    ]


@pytest.mark.parametrize("base_shape,make_view", _views())
@pytest.mark.parametrize("dtype", DTYPE_PARAMS)
def test_non_contiguous_view(backend, dtype, base_shape, make_view):
    """Only the view's elements change; they hold the stream in the view's row-major order."""
    backend.skip_unless(dtype)
    sentinel = 100.0
    base = torch.full(base_shape, sentinel, dtype=dtype, device=backend.device)
    view = make_view(base)
    assert not view.is_contiguous()
    out = tinit.trunc_normal_at_(view, 0.0, 1.0, -2.0, 2.0, seed=9, stream=4, offset=11, backend=backend.name)
    assert out is view
    covered = torch.zeros(base_shape, dtype=torch.bool, device=backend.device)
    make_view(covered).fill_(True)
    untouched = base[~covered]
    assert (untouched == sentinel).all(), f"{int((untouched != sentinel).sum())} elements outside the view changed"
    expected = fill_at(view.shape, dtype, 0.0, 1.0, -2.0, 2.0, seed=9, stream=4, offset=11, backend=backend)
    torch.testing.assert_close(view.cpu(), expected, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPE_PARAMS)
def test_non_contiguous_view_default_generator(dtype):
    base = torch.full((16, 9), 100.0, dtype=dtype)
    view = base.t()[2:7]
    tinit.trunc_normal_(view)
    covered = torch.zeros(16, 9, dtype=torch.bool)
    covered.t()[2:7] = True
    assert (base[~covered] == 100.0).all(), "elements outside the view changed"
    assert (base[covered].double().abs() <= 2.0).all(), "view not filled inside the bounds"


@pytest.mark.parametrize("dtype", DTYPE_PARAMS)
@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda dt: torch.empty(0, dtype=dt), id="empty"),
        pytest.param(lambda dt: torch.empty(3, 0, 5, dtype=dt), id="empty_3d"),
        pytest.param(lambda dt: torch.empty(4, 5, dtype=dt, device="meta"), id="meta"),
        pytest.param(
            lambda dt: torch.nn.Parameter(torch.empty(2**20, 8, dtype=dt, device="meta")), id="meta_parameter"
        ),
    ],
)
def test_empty_and_meta_are_no_ops(dtype, make):
    tensor = make(dtype)
    assert tinit.trunc_normal_(tensor) is tensor
    assert tinit.trunc_normal_at_(tensor, seed=1) is tensor
    assert tinit.fill_(tensor, "gpt2", name="h.0.attn.c_proj.weight", n_layers=4, seed=1) is tensor
    with pytest.raises(ValueError, match="a <= b"):
        tinit.trunc_normal_(tensor, a=1.0, b=-1.0)


def test_default_generator_reproducible_and_advancing():
    torch.manual_seed(1234)
    first = tinit.trunc_normal_(torch.empty(1000))
    second = tinit.trunc_normal_(torch.empty(1000))
    torch.manual_seed(1234)
    torch.testing.assert_close(tinit.trunc_normal_(torch.empty(1000)), first, rtol=0, atol=0)
    torch.testing.assert_close(tinit.trunc_normal_(torch.empty(1000)), second, rtol=0, atol=0)
    same = int((first == second).sum())
    assert same == 0, f"consecutive calls gave {same} identical values"


def test_draws_one_int64_from_the_generator():
    """As documented: exactly one int64 from ``random_`` on the generator, the Philox key."""
    gen = torch.Generator().manual_seed(77)
    twin = torch.Generator().manual_seed(77)
    values = tinit.trunc_normal_(torch.empty(100), generator=gen)
    key = int(torch.empty((), dtype=torch.int64).random_(generator=twin))
    assert torch.equal(gen.get_state(), twin.get_state()), "the generator advanced by more than one int64"
    torch.testing.assert_close(values, fill_at(100, torch.float32, 0.0, 1.0, -2.0, 2.0, seed=key), rtol=0, atol=0)


def test_explicit_generator():
    default_state = torch.get_rng_state()
    gen_a = torch.Generator().manual_seed(5)
    gen_b = torch.Generator().manual_seed(5)
    a1 = tinit.trunc_normal_(torch.empty(500), generator=gen_a)
    a2 = tinit.trunc_normal_(torch.empty(500), generator=gen_a)
    b1 = tinit.trunc_normal_(torch.empty(500), generator=gen_b)
    b2 = tinit.trunc_normal_(torch.empty(500), generator=gen_b)
    torch.testing.assert_close(b1, a1, rtol=0, atol=0)
    torch.testing.assert_close(b2, a2, rtol=0, atol=0)
    assert not torch.equal(a1, a2), "consecutive calls on one generator gave the same tensor"
    assert torch.equal(torch.get_rng_state(), default_state), "an explicit generator touched the default one"


def _realised_std_check(param: torch.Tensor, std: float, what: str) -> None:
    values = param.detach().double()
    want = std * STD_FACTOR_2SIGMA
    got = float(values.std())
    assert abs(got / want - 1.0) < 0.01, f"{what}: std {got:.6g}, expected {want:.6g} (0.8796 * {std:.6g})"
    worst = float(values.abs().max())
    assert worst <= 2.0 * std, f"{what}: |x| reaches {worst:.6g} > 2 std = {2 * std:.6g}"


def _rows(backend) -> int:
    """Rows of the 512-wide scheme tensors: fewer on the slow backends (the std checks hold to 1 %)."""
    return 128 if backend.small else 512


def test_fill_normal_scheme(backend):
    param = torch.nn.Parameter(torch.empty(_rows(backend), 512, device=backend.device))
    # The mission's +-2 std window (the recipe's default is HF's untruncated normal_).
    assert tinit.fill_(param, "normal", seed=3, backend=backend.name, trunc=2.0, variance_preserving=False) is param
    _realised_std_check(param, 0.02, "normal scheme")


def test_fill_gpt2_scheme(backend):
    n_layers = 12
    window = {"trunc": 2.0, "variance_preserving": False}  # +-2 std, not the recipe's untruncated default
    residual = torch.nn.Parameter(torch.empty(_rows(backend), 512, device=backend.device))
    tinit.fill_(
        residual,
        "gpt2",
        name="transformer.h.3.attn.c_proj.weight",
        n_layers=n_layers,
        seed=4,
        backend=backend.name,
        **window,
    )
    _realised_std_check(residual, 0.02 / math.sqrt(2 * n_layers), "gpt2 residual c_proj")
    mlp_out = torch.nn.Parameter(torch.empty(_rows(backend), 512, device=backend.device))
    tinit.fill_(
        mlp_out,
        "gpt2",
        name="transformer.h.3.mlp.c_proj.weight",
        n_layers=n_layers,
        seed=5,
        backend=backend.name,
        **window,
    )
    _realised_std_check(mlp_out, 0.02 / math.sqrt(2 * n_layers), "gpt2 residual mlp.c_proj")
    other = torch.nn.Parameter(torch.empty(_rows(backend), 512, device=backend.device))
    tinit.fill_(
        other,
        "gpt2",
        name="transformer.h.3.attn.c_attn.weight",
        n_layers=n_layers,
        seed=6,
        backend=backend.name,
        **window,
    )
    _realised_std_check(other, 0.02, "gpt2 c_attn")


def test_fill_constants_for_norm_and_bias():
    norm = torch.nn.Parameter(torch.zeros(64))
    bias = torch.nn.Parameter(torch.ones(64))
    tinit.fill_(norm, "gpt2", name="transformer.h.0.ln_1.weight", n_layers=2, seed=0)
    tinit.fill_(bias, "gpt2", name="transformer.h.0.attn.c_attn.bias", n_layers=2, seed=0)
    torch.testing.assert_close(norm.detach(), torch.ones(64), rtol=0, atol=0)
    torch.testing.assert_close(bias.detach(), torch.zeros(64), rtol=0, atol=0)


def test_fill_explicit_seed_leaves_torch_rng_alone():
    state = torch.get_rng_state()
    param = torch.empty(300, 7)
    tinit.fill_(param, "gpt2", name="h.1.mlp.c_proj.weight", n_layers=6, seed=2**63 + 5, stream=3)
    assert torch.equal(torch.get_rng_state(), state), "fill_ with a seed changed torch's RNG state"
    std = 0.02 / math.sqrt(12)  # gpt2: HF's untruncated normal_
    expected = fill_at((300, 7), torch.float32, 0.0, std, -math.inf, math.inf, seed=2**63 + 5, stream=3)
    torch.testing.assert_close(param, expected, rtol=0, atol=0)


def test_fill_without_seed_uses_torch_rng():
    torch.manual_seed(99)
    first = tinit.fill_(torch.empty(256), "normal")
    second = tinit.fill_(torch.empty(256), "normal")
    torch.manual_seed(99)
    torch.testing.assert_close(tinit.fill_(torch.empty(256), "normal"), first, rtol=0, atol=0)
    assert not torch.equal(first, second), "consecutive fill_ calls without a seed gave the same tensor"


def test_fill_gpt2_residual_needs_n_layers():
    param = torch.full((8, 8), 3.0)
    with pytest.raises(ValueError, match="n_layers"):
        tinit.fill_(param, "gpt2", name="h.0.attn.c_proj.weight", seed=1)
    assert (param == 3.0).all(), "fill_ wrote before raising"


# (id, keyword arguments, exception, message pattern)
BAD_ARGS = [
    pytest.param({"a": 1.0, "b": 1.0}, ValueError, "a < b", id="a_eq_b"),
    pytest.param({"a": 2.0, "b": -2.0}, ValueError, "a < b", id="a_gt_b"),
    pytest.param({"std": 0.0}, ValueError, "std", id="std_zero"),
    pytest.param({"std": -1.0}, ValueError, "std", id="std_negative"),
    pytest.param({"std": math.nan}, ValueError, "finite", id="std_nan"),
    pytest.param({"std": math.inf}, ValueError, "finite", id="std_inf"),
    pytest.param({"mean": math.nan}, ValueError, "finite", id="mean_nan"),
    pytest.param({"mean": math.inf}, ValueError, "finite", id="mean_inf"),
    pytest.param({"mean": -math.inf}, ValueError, "finite", id="mean_neg_inf"),
    pytest.param({"a": math.nan}, ValueError, "NaN", id="a_nan"),
    pytest.param({"b": math.nan}, ValueError, "NaN", id="b_nan"),
    pytest.param({"a": math.inf, "b": math.inf}, ValueError, "a < b", id="both_inf"),
    pytest.param({"mean": "0"}, TypeError, "real", id="mean_str"),
]
# The drop-in follows torch.nn.init.trunc_normal_: a == b fills with a and the sign of std does not
# matter (test_drop_in_takes_what_torch_takes); the rest of BAD_ARGS it refuses too, in its own words.
DROP_IN_BAD_ARGS = [
    pytest.param({"a": 2.0, "b": -2.0}, ValueError, "a <= b", id="a_gt_b"),
    pytest.param({"std": 0.0}, ValueError, "std", id="std_zero"),
    pytest.param({"std": math.nan}, ValueError, "finite", id="std_nan"),
    pytest.param({"std": math.inf}, ValueError, "finite", id="std_inf"),
    pytest.param({"mean": math.nan}, ValueError, "finite", id="mean_nan"),
    pytest.param({"mean": math.inf}, ValueError, "finite", id="mean_inf"),
    pytest.param({"mean": -math.inf}, ValueError, "finite", id="mean_neg_inf"),
    pytest.param({"a": math.nan}, ValueError, "NaN", id="a_nan"),
    pytest.param({"b": math.nan}, ValueError, "NaN", id="b_nan"),
    pytest.param({"a": math.inf, "b": math.inf}, ValueError, "finite", id="both_inf"),
    pytest.param({"mean": "0"}, TypeError, "real", id="mean_str"),
]
BAD_DTYPES = [
    pytest.param(torch.int32, id="int32"),
    pytest.param(torch.int64, id="int64"),
    pytest.param(torch.uint8, id="uint8"),
    pytest.param(torch.bool, id="bool"),
    pytest.param(torch.complex64, id="complex64"),
    pytest.param(torch.complex128, id="complex128"),
]


def _sample_tensor(dtype):
    return (torch.arange(24).reshape(4, 6) % 3).to(dtype)


@pytest.mark.parametrize("dtype", DTYPE_PARAMS)
@pytest.mark.parametrize("kwargs,error,pattern", BAD_ARGS)
def test_bad_arguments_raise_before_writing(backend, kwargs, error, pattern, dtype):
    """Refused before anything is written, and without touching torch's RNG."""
    backend.skip_unless(dtype)
    tensor = _sample_tensor(dtype).to(backend.device)
    before, state = tensor.clone(), torch.get_rng_state()
    args = {"mean": 0.0, "std": 1.0, "a": -2.0, "b": 2.0} | kwargs
    with pytest.raises(error, match=pattern):
        tinit.trunc_normal_at_(tensor, **args, seed=1, backend=backend.name)
    assert torch.equal(tensor, before), "the tensor changed before the error"
    assert torch.equal(torch.get_rng_state(), state), "torch's RNG advanced before the error"


@pytest.mark.parametrize("dtype", DTYPE_PARAMS)
@pytest.mark.parametrize("kwargs,error,pattern", DROP_IN_BAD_ARGS)
def test_bad_arguments_raise_before_drawing(kwargs, error, pattern, dtype):
    """trunc_normal_ neither writes nor consumes torch's RNG on bad input."""
    tensor = _sample_tensor(dtype)
    before, state = tensor.clone(), torch.get_rng_state()
    args = {"mean": 0.0, "std": 1.0, "a": -2.0, "b": 2.0} | kwargs
    with pytest.raises(error, match=pattern):
        tinit.trunc_normal_(tensor, **args)
    assert torch.equal(tensor, before), "the tensor changed before the error"
    assert torch.equal(torch.get_rng_state(), state), "torch's RNG advanced before the error"


def test_drop_in_takes_what_torch_takes():
    """a == b and a negative std, which torch.nn.init.trunc_normal_ accepts: a == b fills with a, and
    -std gives the fill of |std| from the same key (the density depends on std^2), with a UserWarning;
    one key each."""
    torch.nn.init.trunc_normal_(torch.empty(3), 0.0, -0.5, -1.0, 1.0)  # torch accepts both too
    torch.testing.assert_close(torch.nn.init.trunc_normal_(torch.empty(3), 0.0, 1.0, 1.0, 1.0), torch.ones(3))
    torch.manual_seed(11)
    key = int(torch.empty((), dtype=torch.int64).random_())
    after_one = torch.get_rng_state()
    torch.manual_seed(11)
    with pytest.warns(UserWarning, match=r"std=-0\.5 is negative; sampling with \|std\| = 0\.5"):
        got = tinit.trunc_normal_(torch.empty(257), 0.25, -0.5, -1.0, 1.0)
    assert torch.equal(torch.get_rng_state(), after_one), "not exactly one key drawn"
    torch.testing.assert_close(got, fill_at(257, torch.float32, 0.25, 0.5, -1.0, 1.0, seed=key), rtol=0, atol=0)
    torch.manual_seed(11)
    torch.testing.assert_close(tinit.trunc_normal_(torch.empty(3, 4), 0.0, 1.0, 1.0, 1.0), torch.ones(3, 4))
    assert torch.equal(torch.get_rng_state(), after_one), "a == b did not draw its one key"


@pytest.mark.parametrize("dtype", BAD_DTYPES)
def test_unsupported_dtypes_raise(backend, dtype):
    tensor = _sample_tensor(dtype).to(backend.device)
    before, state = tensor.clone(), torch.get_rng_state()
    with pytest.raises(TypeError, match="float32, float64, bfloat16 or float16"):
        tinit.trunc_normal_at_(tensor, seed=1, backend=backend.name)
    with pytest.raises(TypeError, match="float32, float64, bfloat16 or float16"):
        tinit.trunc_normal_(tensor)
    with pytest.raises(TypeError, match="float32, float64, bfloat16 or float16"):
        tinit.fill_(tensor, "normal", backend=backend.name)
    assert torch.equal(tensor, before), "the tensor changed before the error"
    assert torch.equal(torch.get_rng_state(), state), "torch's RNG advanced before the error"


@pytest.mark.parametrize(
    "kwargs,pattern",
    [
        pytest.param({"seed": -1}, "seed", id="seed_negative"),
        pytest.param({"seed": 2**64}, "seed", id="seed_too_big"),
        pytest.param({"seed": 1, "stream": 2**64}, "stream", id="stream_too_big"),
        pytest.param({"seed": 1, "offset": -1}, "offset", id="offset_negative"),
        pytest.param({"seed": 1, "offset": 2**63 - 10}, "offset", id="offset_past_end"),
        pytest.param({"seed": 1, "backend": "nope"}, "backend", id="unknown_backend"),
    ],
)
def test_bad_stream_position_raises(kwargs, pattern):
    tensor = _sample_tensor(torch.float32)
    before = tensor.clone()
    with pytest.raises(ValueError, match=pattern):
        tinit.trunc_normal_at_(tensor, **kwargs)
    assert torch.equal(tensor, before), "the tensor changed before the error"


@pytest.mark.parametrize("dtype", DTYPE_PARAMS)
@pytest.mark.parametrize(
    "window",
    [
        pytest.param((0.0, 1.0, -2.0, 2.0), id="central"),
        pytest.param((0.0, 1.0, 8.0, 100.0), id="far_tail"),
        pytest.param((0.0, 1.0, -math.inf, -15.0), id="tail_mode"),
    ],
)
def test_opcheck_trunc_normal(dtype, window):
    tensor = torch.empty(5, 37, dtype=dtype)
    constants = list(transform_constants(*window, dtype))
    torch.library.opcheck(torch.ops.tinit.trunc_normal_.default, (tensor, 3, -5, 2**40 + 1, constants))


def test_opcheck_philox():
    torch.library.opcheck(torch.ops.tinit.philox_.default, (torch.empty(1029, dtype=torch.int32), -7, 2**62, 3))


_CENTRAL = list(transform_constants(0.0, 1.0, -2.0, 2.0, torch.float32))
# Each native op that writes its first argument (tinit.ops.WRITING_OPS), called on an 8-element float32
# tensor: its values, its words (an int32 view: same storage, same version counter), or a list of it; the
# runs ops as 2 rows of 4 elements.
WRITES = {
    "trunc_normal_": lambda t: torch.ops.tinit.trunc_normal_(t, 1, 2, 0, _CENTRAL),
    "philox_": lambda t: torch.ops.tinit.philox_(t.view(torch.int32), 1, 2, 0),
    "trunc_normal_runs_": lambda t: torch.ops.tinit.trunc_normal_runs_(t, 1, 2, 0, 4, [2], [0, 100], _CENTRAL),
    "philox_runs_": lambda t: torch.ops.tinit.philox_runs_(t.view(torch.int32), 1, 2, 0, 4, [2], [0, 100]),
    "trunc_normal_grouped_": lambda t: torch.ops.tinit.trunc_normal_grouped_([t], 1, [2], [0], _CENTRAL),
    "trunc_normal_grouped_runs_": lambda t: torch.ops.tinit.trunc_normal_grouped_runs_(
        [t], 1, [2], [0], [4], [1], [2], [0, 100], _CENTRAL
    ),
}


def test_every_writing_op_is_checked():
    from tinit import ops

    assert set(WRITES) == set(ops.WRITING_OPS["tinit"])


@pytest.mark.parametrize("overwritten", ["leaf", "saved"])
@pytest.mark.parametrize("op", list(WRITES))
def test_native_writes_bump_version_so_autograd_refuses_stale_graphs(op, overwritten):
    """Every caller of torch.ops.tinit.* (not only tinit's front ends) moves the version counter of the
    tensor it writes, as ATen's in-place ops do (the ADInplaceOrView kernels of tinit.ops), so a backward
    through an overwritten leaf, or through a value autograd saved, raises instead of giving wrong grads."""
    from tinit import ops

    if not ops.native_available():
        pytest.skip(f"native extension not built: {ops.native_load_error()}")
    w = torch.ones(8, requires_grad=True)
    written = w if overwritten == "leaf" else w * 2
    loss = (written * written).sum()  # saves `written` for the backward
    before = written._version
    with torch.no_grad():
        WRITES[op](written)
    assert written._version > before, f"{op}: version {before} -> {written._version}"
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


@pytest.mark.parametrize(
    "op,args",
    [
        pytest.param("trunc_normal_runs_", lambda t: (t, 3, -5, 7, 4, [2], [0, 2**40]), id="runs"),
        pytest.param("philox_runs_", lambda t: (t.view(torch.int32), 3, -5, 7, 4, [2], [0, 2**40]), id="philox_runs"),
        pytest.param("trunc_normal_grouped_", lambda t: ([t, t.new_empty(5)], 3, [1, 2], [7, 0]), id="grouped"),
        pytest.param(
            "trunc_normal_grouped_runs_",
            lambda t: ([t, t.new_empty(5)], 3, [1, 2], [7, 0], [4, 5], [1, 0], [2], [0, 2**40]),
            id="grouped_runs",
        ),
    ],
)
def test_opcheck_runs_and_grouped(op, args):
    tensor = torch.empty(8, dtype=torch.float32)
    call = args(tensor)
    if op.startswith("trunc_normal_grouped"):
        call = (*call, _CENTRAL * 2)
    elif op == "trunc_normal_runs_":
        call = (*call, _CENTRAL)
    torch.library.opcheck(getattr(torch.ops.tinit, op).default, call)


def test_in_place_fill_bumps_version_so_autograd_refuses_stale_graphs(backend):
    """Like every ATen in-place op: the version counter moves, and a backward
    through a value that was overwritten raises instead of giving wrong grads."""
    x = torch.ones(5, requires_grad=True, device=backend.device)
    y = x * 2
    z = y * y
    before = y._version
    tinit.trunc_normal_at_(y, 0.0, 1.0, -2.0, 2.0, seed=1, backend=backend.name)
    assert y._version > before, f"version {before} -> {y._version}"
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


def test_bad_backend_env_raises_before_drawing_from_torch_rng(monkeypatch):
    monkeypatch.setenv("TINIT_BACKEND", "no-such-backend")
    t = torch.zeros(8)
    state = torch.get_rng_state()
    with pytest.raises(ValueError, match=r"unknown tinit backend 'no-such-backend' in \$TINIT_BACKEND"):
        tinit.trunc_normal_(t)
    assert torch.equal(torch.get_rng_state(), state), "the RNG advanced on a failed call"
    assert torch.count_nonzero(t) == 0


@pytest.mark.parametrize("mode", [-1.0, 4.0, 7.0, 0.5])
def test_cpu_ops_refuse_an_unknown_transform_mode(mode):
    """A transform table with a mode outside 0..3 is refused before anything
    is written (the CPU kernels would otherwise run the two-sided transform on
    constants meant for another)."""
    constants = list(transform_constants(0.0, 1.0, -2.0, 2.0, torch.float32))
    constants[0] = mode
    tensor = torch.full((37,), 5.0)
    with pytest.raises(RuntimeError, match="transform mode"):
        torch.ops.tinit.trunc_normal_(tensor, 1, 2, 0, constants)
    other = torch.full((5,), 5.0)
    good = list(transform_constants(0.0, 1.0, -2.0, 2.0, torch.float32))
    with pytest.raises(RuntimeError, match="transform mode"):
        torch.ops.tinit.trunc_normal_grouped_([other, tensor], 1, [1, 2], [0, 0], good + constants)
    with pytest.raises(RuntimeError, match="transform mode"):
        torch.ops.tinit.trunc_normal_runs_(tensor.view(1, 37), 1, 2, 0, 37, [1], [0], constants)
    assert torch.equal(tensor, torch.full((37,), 5.0)) and torch.equal(other, torch.full((5,), 5.0))
