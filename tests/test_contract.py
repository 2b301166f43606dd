"""The input contract of every entry point: what is a no-op, what is refused, and that a refusal
leaves the tensor, its storage and torch's RNG exactly as they were.

Regression tests for the reproducers of the core-correctness review, then a hypothesis property
suite over dtypes, shapes, views, extreme parameters and stream positions (CPU backend).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, event, given, settings, strategies as st
from torch import nn

import tinit
from tinit import FillItem, write_grouped_, write_spec_
from tinit._plan import leaf_record
from tinit.params import InternalOverlapError, _representable_inside, transform_constants
from tinit.schemes import InitSpec

DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.float64)
FAN_SCHEMES = (
    "xavier_normal",
    "xavier_uniform",
    "kaiming_normal",
    "kaiming_uniform",
    "lecun_normal",
    "deepnorm",
    "fixup",
)


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    """The raw bits of a tensor's elements (NaN payloads and -0.0 included), as a flat int tensor."""
    ints = {2: torch.int16, 4: torch.int32, 8: torch.int64}[tensor.element_size()]
    return tensor.detach().contiguous().view(ints).reshape(-1).clone()


def _storage_bits(tensor: torch.Tensor) -> torch.Tensor:
    """Every byte of the storage behind ``tensor``, including what lies outside the view."""
    storage = tensor.untyped_storage()
    if storage.nbytes() == 0:
        return torch.zeros(0, dtype=torch.uint8)
    return torch.frombuffer(bytearray(storage), dtype=torch.uint8).clone()


class _Unchanged:
    """Asserts that the storages of ``tensors`` and torch's CPU RNG state are bit-identical on exit."""

    def __init__(self, *tensors: torch.Tensor):
        self.tensors = tensors

    def __enter__(self):
        self.before = [_storage_bits(t) for t in self.tensors]
        self.rng = torch.get_rng_state()
        return self

    def __exit__(self, *exc):
        for tensor, before in zip(self.tensors, self.before, strict=True):
            assert torch.equal(_storage_bits(tensor), before), "a refused call changed the storage"
        assert torch.equal(torch.get_rng_state(), self.rng), "a refused or no-op call drew from torch's RNG"
        return False


# --- meta device and the default device ---------------------------------------------------------


def test_meta_default_device_is_a_no_op_and_draws_nothing():
    torch.manual_seed(0)
    state = torch.get_rng_state()
    with torch.device("meta"):
        tensor = torch.empty(3, 4)
        assert tinit.trunc_normal_(tensor) is tensor
        assert tinit.fill_(tensor, "normal", seed=None) is tensor
        assert tinit.fill_(tensor, "kaiming_normal", seed=None) is tensor
    assert tensor.is_meta
    assert torch.equal(torch.get_rng_state(), state)


def test_set_default_device_meta():
    from torch.overrides import _get_current_function_mode_stack

    # set_default_device pushes a DeviceContext TorchFunctionMode that later tests would inherit:
    # restored to none when there was none (set_default_device("cpu") would keep one pushed)
    previous = torch.get_default_device() if _get_current_function_mode_stack() else None
    torch.set_default_device("meta")
    try:
        state = torch.get_rng_state()
        tensor = torch.empty(3, 4)
        assert tinit.trunc_normal_(tensor) is tensor and tensor.is_meta
        assert tinit.fill_(tensor, "gpt2", name="h.0.mlp.c_fc.weight", n_layers=2, seed=None) is tensor
        assert torch.equal(torch.get_rng_state(), state)
    finally:
        torch.set_default_device(previous)


def test_key_comes_from_the_cpu_generator_whatever_the_default_device():
    torch.manual_seed(5)
    want = tinit.trunc_normal_(torch.empty(64))
    torch.manual_seed(5)
    with torch.device("meta"):
        got = tinit.trunc_normal_(torch.empty(64, device="cpu"))
    assert torch.equal(_bits(got), _bits(want))
    torch.manual_seed(5)
    key = int(torch.empty((), dtype=torch.int64, device="cpu").random_())
    assert torch.equal(_bits(want), _bits(tinit.trunc_normal_at_(torch.empty(64), seed=key)))


# --- no-ops leave torch's RNG alone ----------------------------------------------------------------

NO_OPS = {
    "empty": lambda: torch.empty(0, 4),
    "empty-3d": lambda: torch.empty(2, 0, 3, dtype=torch.float16),
    "meta": lambda: torch.empty(3, 4, device="meta"),
    "meta-parameter": lambda: nn.Parameter(torch.empty(2**20, 8, device="meta")),
}


@pytest.mark.parametrize("make", NO_OPS.values(), ids=NO_OPS.keys())
def test_no_ops_draw_nothing(make):
    tensor = make()
    torch.manual_seed(0)
    state = torch.get_rng_state()
    generator = torch.Generator().manual_seed(3)
    generator_state = generator.get_state()
    assert tinit.trunc_normal_(tensor) is tensor
    assert tinit.trunc_normal_(tensor, generator=generator) is tensor
    assert tinit.fill_(tensor, "normal") is tensor
    assert tinit.fill_(tensor, "kaiming_uniform", generator=generator) is tensor
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(generator.get_state(), generator_state)


def test_expanded_view_is_refused_before_the_draw():
    base = torch.zeros(3, 1)
    view = base.expand(3, 4)
    with _Unchanged(base), pytest.raises(InternalOverlapError, match="share memory"):
        tinit.trunc_normal_(view)
    with _Unchanged(base), pytest.raises(InternalOverlapError):
        tinit.fill_(view, "kaiming_normal")
    # torch raises RuntimeError for the same tensor: either except clause works
    assert issubclass(InternalOverlapError, ValueError) and issubclass(InternalOverlapError, RuntimeError)
    with pytest.raises(RuntimeError):
        torch.nn.init.trunc_normal_(view)


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda t: tinit.trunc_normal_(t), id="trunc_normal_"),
        pytest.param(lambda t: tinit.fill_(t, "normal"), id="fill_-drawn-seed"),
        pytest.param(lambda t: tinit.fill_(t, "normal", seed=0), id="fill_-seed"),
        pytest.param(lambda t: tinit.trunc_normal_at_(t, seed=0), id="trunc_normal_at_"),
        pytest.param(lambda t: tinit.trunc_normal_at_(t, seed=0, backend="torch"), id="trunc_normal_at_-torch"),
        pytest.param(lambda t: write_grouped_([(t, InitSpec(std=1.0), 0)], seed=0), id="write_grouped_"),
    ],
)
def test_inference_tensor_outside_inference_mode_is_refused_before_anything(call):
    with torch.inference_mode():
        tensor = torch.zeros(8)
    with _Unchanged(tensor), pytest.raises(tinit.InferenceTensorError, match="inference"):
        call(tensor)
    # torch's own refusal is a RuntimeError: either except clause works
    assert issubclass(tinit.InferenceTensorError, ValueError) and issubclass(tinit.InferenceTensorError, RuntimeError)
    with torch.inference_mode():  # inside inference mode the write is allowed
        call(tensor)
    assert bool((tensor != 0).any())


@pytest.mark.parametrize(
    "call, match",
    [
        pytest.param(lambda t: tinit.fill_(t, "bogus", seed=0), "unknown tinit scheme 'bogus'", id="scheme"),
        pytest.param(lambda t: tinit.fill_(t, "gpt2", role="bogus", seed=0), "unknown role 'bogus'", id="role"),
        pytest.param(
            lambda t: tinit.init_model_(_Holder(t), "modern", seed=0, overrides={"weight": "bogus"}),
            "unknown role 'bogus'",
            id="override-role",
        ),
    ],
)
def test_unknown_names_are_value_errors_and_key_errors(call, match):
    tensor = torch.zeros(4, 4)
    with _Unchanged(tensor), pytest.raises(ValueError, match=match) as info:
        call(tensor)
    assert isinstance(info.value, KeyError), type(info.value)


class _Holder(nn.Module):
    """A module whose one parameter is ``tensor`` itself (so a refused init can be checked on it)."""

    def __init__(self, tensor: torch.Tensor):
        super().__init__()
        self.weight = nn.Parameter(tensor, requires_grad=False)


@pytest.mark.parametrize(
    "device, error",
    [("bogus", ValueError), ("meta", ValueError), (5, TypeError), (object(), TypeError)]
    + ([] if torch.cuda.is_available() else [("cuda", ValueError), ("cuda:7", ValueError)]),
)
@pytest.mark.parametrize("on_meta", [False, True], ids=["materialised", "meta"])
def test_init_model_checks_the_device(device, error, on_meta):
    with torch.device("meta" if on_meta else "cpu"):
        model = nn.Linear(2, 2)
    state = torch.get_rng_state()
    with pytest.raises(error, match="device"):
        tinit.init_model_(model, "normal", seed=0, device=device)
    assert torch.equal(torch.get_rng_state(), state)
    assert all(p.is_meta == on_meta for p in model.parameters())


def test_transform_constants_are_computed_once_per_piece(monkeypatch):
    """The write plan computes each piece's transform constants once, at validation: fill_ of a
    fused three-part spec takes three; write_grouped_ of five tensors of one spec and a fused
    tensor takes 1 + 3, batched or one by one."""
    import tinit._plan

    calls = []
    real = tinit._plan.leaf_record

    def counted(spec, dtype):
        calls.append(spec)
        return real(spec, dtype)

    monkeypatch.setattr(tinit._plan, "leaf_record", counted)
    parts = (InitSpec(std=0.02), InitSpec(std=0.01), InitSpec(std=0.03))
    fused = InitSpec(parts=parts, split_dim=0)
    weight = torch.empty(12, 4)
    write_spec_(weight, fused, seed=1)
    assert len(calls) == 3, calls
    calls.clear()
    normal, fused_again = InitSpec(std=0.02), InitSpec(parts=parts, split_dim=0)
    items = [(torch.empty(6, 4), normal, k) for k in range(5)] + [(torch.empty(12, 4), fused_again, 9)]
    write_grouped_(items, seed=1)
    assert len(calls) == 1 + 3, calls
    calls.clear()
    write_grouped_(items, seed=1, sequential=True)
    assert len(calls) == 1 + 3, calls


def test_stream_for_takes_a_name():
    with pytest.raises(TypeError, match="name must be a str"):
        tinit.stream_for(3)
    assert tinit.stream_for("h.0.attn.c_attn.weight") == tinit.stream_for("h.0.attn.c_attn.weight")


def test_bad_stream_position_with_a_drawn_seed_draws_nothing():
    tensor = torch.full((4, 4), 7.0)
    with _Unchanged(tensor), pytest.raises(ValueError, match="offset"):
        tinit.fill_(tensor, "normal", offset=-1)
    with _Unchanged(tensor), pytest.raises(TypeError, match="stream"):
        tinit.fill_(tensor, "normal", stream=1.0)
    with _Unchanged(tensor), pytest.raises(ValueError, match="unknown tinit backend"):
        tinit.fill_(tensor, "normal", backend="bogus")
    with _Unchanged(tensor), pytest.raises(TypeError, match="generator"):
        tinit.trunc_normal_(tensor, generator=3)


# --- 0-element weights under fan-based schemes ---------------------------------------------------


@pytest.mark.parametrize("shape", [(16, 0), (0, 8)])
@pytest.mark.parametrize("scheme", FAN_SCHEMES)
def test_zero_element_weights_are_no_ops_for_fan_schemes(scheme, shape):
    tensor = torch.empty(shape)
    with _Unchanged(tensor):
        assert tinit.fill_(tensor, scheme, role="mlp_in", seed=1, n_layers=2, layer_idx=0, d_model=8) is tensor
        assert tinit.fill_(tensor, scheme, role="mlp_in", n_layers=2, layer_idx=0, d_model=8) is tensor


def test_zero_element_weight_options_are_still_checked():
    with pytest.raises(ValueError, match="gain"):
        tinit.fill_(torch.empty(16, 0), "kaiming_normal", role="mlp_in", seed=1, gain=-1.0)
    with pytest.raises(TypeError):
        tinit.fill_(torch.empty(16, 0), "kaiming_normal", role="mlp_in", seed=1, bogus=1)


@pytest.mark.filterwarnings("ignore:Initializing zero-element tensors is a no-op")
@pytest.mark.parametrize("grouped", [True, False])
def test_model_with_a_zero_element_layer(grouped):
    model = nn.Sequential(nn.Linear(0, 4), nn.Linear(4, 4))
    alone = nn.Sequential(nn.Linear(0, 4), nn.Linear(4, 4))
    summary = tinit.init_model_(model, "kaiming_normal", seed=3, grouped=grouped)
    assert [entry.numel for entry in summary] == [0, 4, 16, 4]
    tinit.init_model_(alone, "kaiming_normal", seed=3, only=r"^1\.")
    assert torch.equal(model[1].weight, alone[1].weight)
    assert model[1].weight.std() > 0


# --- nothing is written when any item is bad ------------------------------------------------------


def test_grouped_refuses_an_expanded_item_before_writing():
    bias = torch.full((4,), 7.0)
    strided_base = torch.full((4, 8), 7.0)
    expanded_base = torch.zeros(3, 1)
    items = [
        (bias, InitSpec(constant=0.0), 0),
        (strided_base[:, ::2], InitSpec(std=1.0), 1),
        (expanded_base.expand(3, 4), InitSpec(std=1.0), 2),
    ]
    for sequential in (False, True):
        with _Unchanged(bias, strided_base, expanded_base), pytest.raises(InternalOverlapError, match="item 2"):
            write_grouped_(items, seed=1, sequential=sequential)


@pytest.mark.parametrize("grouped", [True, False])
def test_model_with_an_expanded_parameter_writes_nothing(grouped):
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
    model[1].weight = nn.Parameter(torch.zeros(4, 1).expand(4, 4))
    for p in model.parameters():
        with torch.no_grad():
            p.fill_(7.0) if p.is_contiguous() else None
    with _Unchanged(*model.parameters()), pytest.raises(InternalOverlapError, match=r"parameter 1\.weight"):
        tinit.init_model_(model, "normal", seed=1, grouped=grouped)


def test_partial_overlap_is_refused_and_a_disjoint_irregular_layout_accepted():
    storage = torch.full((20,), 7.0)
    overlapping = storage.as_strided((3, 3), (1, 1))
    assert torch._debug_has_internal_overlap(overlapping) == 2  # torch: "too hard" to tell
    with _Unchanged(storage), pytest.raises(InternalOverlapError):
        tinit.trunc_normal_at_(overlapping, seed=1)
    disjoint = storage.as_strided((3, 2), (2, 3))  # offsets 0, 3, 2, 5, 4, 7: no two alike
    tinit.trunc_normal_at_(disjoint, seed=1)
    assert torch.equal(disjoint, tinit.trunc_normal_at_(torch.empty(3, 2), seed=1))


def test_storage_shared_between_items_is_written_in_order():
    tensor = torch.zeros(6)
    with pytest.warns(RuntimeWarning, match="share memory"):
        write_grouped_([(tensor, InitSpec(std=1.0), 1), (tensor[:3], InitSpec(constant=2.0), 0)], seed=1)
    assert torch.equal(tensor[:3], torch.full((3,), 2.0)) and (tensor[3:] != 0).all()


# --- exception types ------------------------------------------------------------------------------


def _nested():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)])


BAD_TENSORS = {
    "nested": (_nested, TypeError, "nested"),
    "sparse": (lambda: torch.zeros(3, 3).to_sparse(), TypeError, "sparse"),
    "neg-view": (lambda: torch._neg_view(torch.zeros(3)), TypeError, "negative"),
    "int": (lambda: torch.zeros(3, dtype=torch.int32), TypeError, "int32"),
    "not-a-tensor": (lambda: np.zeros(3, dtype=np.float32), TypeError, "Tensor"),
}


@pytest.mark.parametrize(("make", "error", "match"), BAD_TENSORS.values(), ids=BAD_TENSORS.keys())
def test_bad_tensor_kinds_raise_type_error(make, error, match):
    tensor = make()
    state = torch.get_rng_state()
    with pytest.raises(error, match=match):
        tinit.trunc_normal_at_(tensor, seed=1)
    with pytest.raises(error, match=match):
        tinit.trunc_normal_(tensor)
    with pytest.raises(error, match=match):
        tinit.fill_(tensor, "normal")
    with pytest.raises(error, match=match):
        write_grouped_([(tensor, InitSpec(std=1.0), 0)], seed=1)
    assert torch.equal(torch.get_rng_state(), state)


@pytest.mark.parametrize(
    "kwargs", [{"mean": 10**400}, {"std": 10**400}, {"a": -(10**400)}, {"b": 10**400}], ids=["mean", "std", "a", "b"]
)
def test_huge_ints_raise_value_error_naming_the_argument(kwargs):
    tensor = torch.full((3,), 7.0)
    (name,) = kwargs
    with _Unchanged(tensor), pytest.raises(ValueError, match=name):
        tinit.trunc_normal_(tensor, **kwargs)
    with _Unchanged(tensor), pytest.raises(ValueError, match=name):
        tinit.trunc_normal_at_(tensor, seed=1, **kwargs)


def test_huge_ints_in_specs_and_options():
    tensor = torch.full((3, 3), 7.0)
    with _Unchanged(tensor), pytest.raises(ValueError, match="constant"):
        write_spec_(tensor, InitSpec(constant=10**400), seed=1)
    with _Unchanged(tensor), pytest.raises(ValueError, match="std"):
        tinit.fill_(tensor, "normal", seed=1, std=10**400)
    with _Unchanged(tensor), pytest.raises(ValueError, match="trunc"):
        tinit.fill_(tensor, "normal", seed=1, trunc=10**400)


def test_numpy_integers_are_ints():
    want = tinit.trunc_normal_at_(torch.empty(5, 4), seed=3, stream=7, offset=11)
    got = tinit.trunc_normal_at_(torch.empty(5, 4), seed=np.int64(3), stream=np.uint64(7), offset=np.int32(11))
    assert torch.equal(got, want)
    big = tinit.trunc_normal_at_(torch.empty(4), seed=np.uint64(2**64 - 1), stream=np.uint64(2**64 - 1))
    assert torch.equal(big, tinit.trunc_normal_at_(torch.empty(4), seed=2**64 - 1, stream=2**64 - 1))
    kwargs = {"role": "attn_out", "seed": 1, "d_model": 8}
    assert torch.equal(
        tinit.fill_(torch.empty(8, 8), "depth_init", layer_idx=np.int64(2), n_layers=np.int64(4), **kwargs),
        tinit.fill_(torch.empty(8, 8), "depth_init", layer_idx=2, n_layers=4, **kwargs),
    )
    model, again = nn.Linear(3, 2), nn.Linear(3, 2)
    tinit.init_model_(model, "normal", seed=np.int64(9))
    tinit.init_model_(again, "normal", seed=9)
    assert torch.equal(model.weight, again.weight)
    write_grouped_([FillItem(torch.empty(3), InitSpec(std=1.0), np.uint64(5), np.int64(2))], seed=np.int64(1))


@pytest.mark.parametrize("value", [True, 1.0, "1", None], ids=["bool", "float", "str", "none"])
@pytest.mark.parametrize("name", ["seed", "stream", "offset"])
def test_non_integer_positions_raise_type_error(name, value):
    tensor = torch.full((3,), 7.0)
    kwargs = {"seed": 1, name: value}
    with _Unchanged(tensor), pytest.raises(TypeError, match=name):
        tinit.trunc_normal_at_(tensor, **kwargs)


def test_tiny_trunc_with_variance_preserving_is_finite():
    tensor = tinit.fill_(torch.empty(64, 64), "normal", seed=1, trunc=1e-9, variance_preserving=True)
    assert torch.isfinite(tensor).all()
    # the realised std is the target: a window 1e-9 std wide is flat, its std width / sqrt(12)
    assert float(tensor.std()) == pytest.approx(0.02, rel=0.05)
    assert tinit.schemes.truncation_factor(1e-9) == pytest.approx(1e-9 / math.sqrt(3.0), rel=1e-12)


@pytest.mark.parametrize(
    "fans",
    [{"fan_in": 0, "fan_out": 0}, {"fan_in": -5}, {"fan_out": 0}, {"fan_in": 2.5}, {"fan_in": True}],
    ids=["zero", "negative", "zero-out", "float", "bool"],
)
@pytest.mark.parametrize("scheme", ["xavier_uniform", "kaiming_normal"])
def test_bad_explicit_fans_are_refused_by_name(scheme, fans):
    tensor = torch.full((3, 3), 7.0)
    (name, *_) = fans
    with _Unchanged(tensor), pytest.raises((TypeError, ValueError), match=name):
        tinit.fill_(tensor, scheme, seed=1, **fans)


# --- property suite -------------------------------------------------------------------------------

SEEDS = st.one_of(st.integers(0, 2**64 - 1), st.sampled_from([0, 1, 2**63 - 1, 2**63, 2**64 - 2, 2**64 - 1]))
OFFSETS = st.one_of(
    st.integers(0, 2**40), st.integers(2**63 - 300, 2**63 - 1), st.sampled_from([0, 2**63 - 1, 2**63, 2**64])
)
STDS = st.sampled_from([1e-30, 1e-3, 1.0, 3e4, 1e30])
MEANS = st.sampled_from([0.0, -1.5, 1e4, -1e30])
UNITS = (-math.inf, -8.0, -2.0, -0.01, 0.0, 0.5, 40.0, math.inf)


@st.composite
def windows(draw):
    """Bounds in units of std; now and then a < b does not hold."""
    lo, hi = sorted(draw(st.lists(st.sampled_from(UNITS), min_size=2, max_size=2, unique=True)))
    return (hi, lo) if draw(st.integers(0, 9)) == 0 else (lo, hi)


@st.composite
def views(draw):
    """(base storage tensor prefilled with NaN, a view of it, the same view of an index tensor)."""
    dtype = draw(st.sampled_from(DTYPES))
    ndim = draw(st.integers(1, 3))
    sizes = [draw(st.integers(0, 5)) for _ in range(ndim)]
    starts = [draw(st.integers(0, 2)) for _ in range(ndim)]
    steps = [draw(st.integers(1, 2)) for _ in range(ndim)]
    base_shape = [
        start + max(size, 1) * step + draw(st.integers(0, 1))
        for start, size, step in zip(starts, sizes, steps, strict=True)
    ]
    base = torch.full(base_shape, math.nan, dtype=dtype)
    index = torch.arange(base.numel()).reshape(base_shape)

    def make(t):
        t = t[
            tuple(
                slice(start, start + size * step, step) for start, size, step in zip(starts, sizes, steps, strict=True)
            )
        ]
        return t

    view, where = make(base), make(index)
    order = draw(st.permutations(range(ndim)))
    view, where = view.permute(*order), where.permute(*order)
    if draw(st.booleans()) and ndim >= 1:  # expand a size-1 dim, or add an expanded one
        dim = draw(st.integers(0, view.dim()))
        repeat = draw(st.integers(1, 3))
        view, where = view.unsqueeze(dim), where.unsqueeze(dim)
        shape = list(view.shape)
        shape[dim] = repeat
        view, where = view.expand(shape), where.expand(shape)
    return base, view, where


def _overlaps(where: torch.Tensor) -> bool:
    flat = where.reshape(-1)
    return flat.numel() > 1 and int(flat.unique().numel()) != flat.numel()


def _accepts(view, mean, std, a, b, offset) -> bool:
    try:
        transform_constants(mean, std, a, b, view.dtype)
    except ValueError:
        return False
    return offset + view.numel() <= 2**63 and not _overlaps_view(view)


def _overlaps_view(view):
    if view.numel() <= 1:
        return False
    offsets = torch.zeros((), dtype=torch.int64)
    for size, stride in zip(view.shape, view.stride(), strict=True):
        offsets = (offsets.unsqueeze(-1) + torch.arange(size) * stride).reshape(-1)
    return int(offsets.unique().numel()) != view.numel()


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=views(), mean=MEANS, std=STDS, window=windows(), seed=SEEDS, stream=SEEDS, offset=OFFSETS, dropin=st.booleans()
)
def test_property_fill_contract(case, mean, std, window, seed, stream, offset, dropin):
    base, view, where = case
    lo, hi = window
    a, b = mean + lo * std, mean + hi * std
    if dropin:
        stream, offset = 0, 0
    accepted = _accepts(view, mean, std, a, b, offset)
    if dropin and a == b:  # torch.nn.init.trunc_normal_'s zero-width window: the constant a, where finite
        accepted = math.isfinite(a) and abs(a) <= torch.finfo(view.dtype).max and not _overlaps_view(view)
    assert _overlaps(where) == _overlaps_view(view)
    before, rng = _bits(base), torch.get_rng_state()
    try:
        if dropin:
            tinit.trunc_normal_(view, mean, std, a, b)
        else:
            tinit.trunc_normal_at_(view, mean, std, a, b, seed=seed, stream=stream, offset=offset)
    except (TypeError, ValueError) as exc:
        event(f"refused: {type(exc).__name__}")
        assert not accepted, f"refused a valid call: {exc}"
        if _overlaps_view(view):
            assert isinstance(exc, InternalOverlapError)
        assert torch.equal(_bits(base), before), "a refused call changed the storage"
        assert torch.equal(torch.get_rng_state(), rng), "a refused call drew from torch's RNG"
        return
    assert accepted, "accepted a call that should be refused"
    event("accepted, empty" if view.numel() == 0 else "accepted")
    covered = torch.zeros(base.numel(), dtype=torch.bool)
    covered[where.reshape(-1)] = True
    flat = base.reshape(-1)
    assert torch.isnan(flat[~covered]).all(), "wrote outside the view"
    if dropin and a == b:
        event("accepted, a == b")
        assert torch.equal(view, torch.full_like(view, a)), "a == b did not fill with a"
        drew = torch.get_rng_state()
        torch.set_rng_state(rng)
        if view.numel():
            torch.empty((), dtype=torch.int64).random_()
        assert torch.equal(drew, torch.get_rng_state()), "a == b did not draw exactly one key (none when empty)"
        return
    values = view.double()
    assert torch.isfinite(values).all()
    low, high = _representable_inside(a, b, view.dtype)
    assert ((values >= low) & (values <= high)).all(), "a value outside [a, b] as rounded to the dtype"
    if dropin:
        if view.numel() == 0:
            assert torch.equal(torch.get_rng_state(), rng), "a no-op drew from torch's RNG"
            return
        torch.set_rng_state(rng)
        seed = int(torch.empty((), dtype=torch.int64).random_())
    want = tinit.trunc_normal_at_(
        torch.empty(view.shape, dtype=view.dtype), mean, std, a, b, seed=seed, stream=stream, offset=offset
    )
    assert torch.equal(_bits(view), _bits(want)), "the view's values differ from the contiguous fill"
    # Each element is the one-element fill at its stream index (first, middle, last).
    flat_want = want.reshape(-1)
    for j in sorted({0, view.numel() // 2, view.numel() - 1}) if view.numel() else ():
        one = tinit.trunc_normal_at_(
            torch.empty(1, dtype=view.dtype), mean, std, a, b, seed=seed, stream=stream, offset=offset + j
        )
        assert torch.equal(_bits(one), _bits(flat_want[j : j + 1])), f"element {j} != the one-element fill"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cases=st.lists(views(), min_size=1, max_size=4),
    std=STDS,
    seed=SEEDS,
    streams=st.lists(SEEDS, min_size=4, max_size=4),
    sequential=st.booleans(),
)
def test_property_grouped_contract(cases, std, seed, streams, sequential):
    specs = [
        InitSpec(std=std),
        InitSpec(constant=0.0),
        InitSpec(std=std, distribution="uniform"),
        InitSpec(constant=-2.0),
    ]
    items = [FillItem(view, specs[i % 4], streams[i]) for i, (_, view, _) in enumerate(cases)]
    bases = [base for base, _, _ in cases]
    before = [_bits(base) for base in bases]
    accepted = not any(_overlaps_view(item.tensor) for item in items)
    for item in items:
        if item.spec.constant is None:
            try:
                leaf_record(item.spec, item.tensor.dtype)
            except ValueError:
                accepted = False
    try:
        write_grouped_(items, seed=seed, sequential=sequential)
    except (TypeError, ValueError) as exc:
        event(f"refused: {type(exc).__name__}")
        assert not accepted, f"refused a valid grouped call: {exc}"
        for base, old in zip(bases, before, strict=True):
            assert torch.equal(_bits(base), old), "a refused grouped call changed a storage"
        return
    assert accepted, "accepted a grouped call that should be refused"
    event("accepted")
    for item in items:
        want = write_spec_(
            torch.empty(item.tensor.shape, dtype=item.tensor.dtype), item.spec, seed=seed, stream=item.stream
        )
        assert torch.equal(_bits(item.tensor), _bits(want)), "a grouped item differs from write_spec_ alone"
    for (base, _, where), _item in zip(cases, items, strict=True):
        covered = torch.zeros(base.numel(), dtype=torch.bool)
        covered[where.reshape(-1)] = True
        assert torch.isnan(base.reshape(-1)[~covered]).all(), "a grouped fill wrote outside a view"


def test_model_level_errors_name_the_parameter():
    model = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 3))
    before = [p.clone() for p in model.parameters()]
    # an override's bad fan is refused with the override's pattern, before any parameter is read
    with pytest.raises(ValueError, match=r"override '\^1\\\\\.weight': fan_in must be an int >= 1"):
        tinit.init_model_(model, "kaiming_normal", seed=1, overrides={r"^1\.weight": {"fan_in": -5}})
    with pytest.raises(ValueError, match=r"gain .*\(init_model_: parameter 0\.weight\)"):
        tinit.init_model_(model, "kaiming_normal", seed=1, gain=-1.0)
    assert all(torch.equal(p, old) for p, old in zip(model.parameters(), before, strict=True))
