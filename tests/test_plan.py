"""The one engine (``tinit._plan.Plan``): the lean path of ``tinit.trunc_normal_``, one dtype check per
call, every write through the plan, views that are not contiguous written through a bounded buffer,
zero rows, and the key-draw rule."""

from __future__ import annotations

import dataclasses
import math
import sys

import pytest
import torch
from helpers import assert_same_bits
from torch.utils._python_dispatch import TorchDispatchMode

import tinit
from tinit import (
    FillItem,
    InternalOverlapError,
    _model_init as model_init_module,
    _plan as plan_module,
    dispatch,
    ops,
    params,
    write_grouped_,
    write_spec_,
)
from tinit._plan import CHUNK_BYTES, Item, Plan
from tinit.schemes import InitSpec

needs_native = pytest.mark.skipif(not ops.native_available(), reason="native extension not built")
SEED = 12345


@pytest.fixture(autouse=True)
def _cpu_backend(monkeypatch):
    monkeypatch.delenv("TINIT_BACKEND", raising=False)


def _trace(fn) -> list[tuple[str, str]]:
    """(module, qualified name) of every tinit Python frame entered while ``fn`` runs, up to the first
    call of ``torch.ops.tinit.trunc_normal_`` (the native op)."""
    frames, done = [], []
    native = torch.ops.tinit.trunc_normal_

    def profile(frame, event, arg):
        if done or event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if frame.f_code is type(native).__call__.__code__ and frame.f_locals.get("self") is native:
            done.append(True)
        elif module == "tinit" or module.startswith("tinit."):
            frames.append((module, frame.f_code.co_qualname))

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    assert done, "the native op was not reached"
    return frames


@needs_native
def test_trunc_normal_reaches_the_native_op_through_few_frames():
    """``tinit.trunc_normal_(w, std=0.02)`` on a 64x64 fp32 CPU tensor: at most 6 tinit modules and
    17 tinit function calls between the call and ``torch.ops.tinit.trunc_normal_`` (before the one
    engine: 6 modules, 28 distinct functions, 40 calls). Since 0.3.0 three of them are
    ``tinit.sharding.enabled_local_mode`` twice (a ``sys.modules`` lookup, so that ``import tinit``
    does not import LocalTensorMode) and the host constants' FTZ/DAZ-off wrapper in ``tinit.params``."""
    weight = torch.empty(64, 64)
    tinit.trunc_normal_(weight, std=0.02)  # warm: the backend choice and the record are cached
    frames = _trace(lambda: tinit.trunc_normal_(weight, std=0.02))
    modules = sorted({module for module, _ in frames})
    assert len(modules) <= 6, modules
    assert len(frames) <= 17, frames
    assert ("tinit._plan", "Plan.run") in frames and ("tinit.ops", "trunc_normal_native") in frames, frames


class _CountingSet(frozenset):
    """A dtype set that counts how often a dtype is tested against it."""

    hits = 0

    def __contains__(self, item):
        type(self).hits += 1
        return frozenset.__contains__(self, item)


class _CountingTuple(tuple):
    hits = 0

    def __contains__(self, item):
        _CountingSet.hits += 1
        return tuple.__contains__(self, item)


FRONT_ENDS = {
    "trunc_normal_": lambda t: tinit.trunc_normal_(t, std=0.02),
    "trunc_normal_at_": lambda t: tinit.trunc_normal_at_(t, std=0.02, seed=1),
    "write_spec_": lambda t: write_spec_(t, InitSpec(std=0.02), seed=1),
    "fill_": lambda t: tinit.fill_(t, "normal", seed=1),
    "fill_-drawn": lambda t: tinit.fill_(t, "normal"),
    "write_grouped_": lambda t: write_grouped_([FillItem(t, InitSpec(std=0.02), 3)], seed=1),
    "nn.init.uniform_": lambda t: tinit.nn.init.uniform_(t),
    "nn.init.normal_": lambda t: tinit.nn.init.normal_(t),
    "nn.init.xavier_uniform_": lambda t: tinit.nn.init.xavier_uniform_(t),
    "nn.init.xavier_normal_": lambda t: tinit.nn.init.xavier_normal_(t),
    "nn.init.kaiming_uniform_": lambda t: tinit.nn.init.kaiming_uniform_(t),
    "nn.init.kaiming_normal_": lambda t: tinit.nn.init.kaiming_normal_(t),
}
# init_model_ checks a parameter's dtype itself only on the meta device, before allocating it; a
# loaded model's parameters are checked by the plan alone.
WRITERS = {**FRONT_ENDS, "init_model_": lambda t: tinit.init_model_(_Holder(t), "normal", seed=1)}


class _Holder(torch.nn.Module):
    def __init__(self, weight):
        super().__init__()
        self.mlp = torch.nn.Module()
        self.mlp.c_fc = torch.nn.Module()
        self.mlp.c_fc.weight = torch.nn.Parameter(weight)


@needs_native
@pytest.mark.parametrize("front_end", list(WRITERS))
def test_one_dtype_check_per_call(front_end, monkeypatch):
    """Each front end tests the tensor's dtype against the supported set once (before the one engine:
    three times on ``tinit.trunc_normal_``'s path), a second call once too."""
    fill = WRITERS[front_end]
    fill(torch.empty(8, 4))  # warm
    monkeypatch.setattr(params, "_SUPPORTED", _CountingSet(params._SUPPORTED))
    monkeypatch.setattr(params, "SUPPORTED_DTYPES", _CountingTuple(params.SUPPORTED_DTYPES))
    monkeypatch.setattr(plan_module, "_SUPPORTED", _CountingSet(plan_module._SUPPORTED))
    monkeypatch.setattr(model_init_module, "_SUPPORTED", _CountingSet(model_init_module._SUPPORTED))
    _CountingSet.hits = 0
    fill(torch.empty(8, 4))
    assert _CountingSet.hits == 1, f"{front_end}: {_CountingSet.hits} dtype checks"


def test_one_dtype_refusal_for_every_front_end():
    """The one message and class (``tinit.params.DtypeError``, re-exported by ``tinit.nn.init``)."""
    assert tinit.nn.init.DtypeError is params.DtypeError
    assert issubclass(params.DtypeError, TypeError) and issubclass(params.DtypeError, NotImplementedError)
    for fill in FRONT_ENDS.values():
        with pytest.raises(params.DtypeError, match="float32, float64, bfloat16 or float16; got torch.int32"):
            fill(torch.zeros(8, 4, dtype=torch.int32))


@needs_native
def test_every_write_goes_through_the_plan(monkeypatch):
    """Every backend call of every front end is made by ``tinit._plan`` (one write body)."""
    callers = set()

    def spy(fn):
        def called(*args, **kwargs):
            frame = sys._getframe(1)
            while frame.f_globals.get("__name__") == "tinit.dispatch":
                frame = frame.f_back
            callers.add(frame.f_globals.get("__name__"))
            return fn(*args, **kwargs)

        return called

    cpu = dispatch.BACKENDS["cpu"]
    spied = dataclasses.replace(
        cpu, fill=spy(cpu.fill), fill_runs=spy(cpu.fill_runs), fill_grouped=spy(cpu.fill_grouped)
    )
    monkeypatch.setitem(dispatch.BACKENDS, "cpu", spied)
    for fill in WRITERS.values():
        fill(torch.empty(8, 4))
        fill(torch.empty(4, 8).t())  # a view that is not contiguous
    fused = InitSpec(parts=(InitSpec(std=0.1), InitSpec(constant=0.0)), split_dim=1)
    write_spec_(torch.empty(3, 8), fused, seed=1)
    tinit.trunc_normal_at_(torch.empty(2, 4), seed=1, global_shape=(4, 8), shard_offsets=(1, 2))
    write_grouped_([(torch.empty(5), InitSpec(std=1.0), 1), (torch.empty(6), InitSpec(std=1.0), 2)], seed=1)
    with tinit.patch_torch_init(seed=3):
        torch.nn.Linear(4, 4)
    assert callers == {"tinit._plan"}, callers


VIEWS = {
    "transposed": ((48, 40), lambda t: t.t()),
    "permuted-3d": ((6, 7, 8), lambda t: t.permute(2, 0, 1)),
    "stepped": ((40, 60), lambda t: t[::2, 1::3]),
    "narrowed": ((30, 33), lambda t: t.narrow(1, 5, 20)),
    "long-row": ((3, 500), lambda t: t[:, ::2]),
}


@needs_native
@pytest.mark.parametrize("chunk_bytes", [4, 64, 1000, CHUNK_BYTES], ids=["1-elem", "64B", "1000B", "4MiB"])
@pytest.mark.parametrize("view", list(VIEWS))
def test_non_contiguous_views_equal_the_contiguous_fill(view, chunk_bytes, monkeypatch):
    """A view is written slab by slab (each at most ``CHUNK_BYTES``) with the values of the contiguous
    tensor of its shape, element for element; memory outside the view is left alone."""
    shape, make = VIEWS[view]
    monkeypatch.setattr(plan_module, "CHUNK_BYTES", chunk_bytes)
    base = torch.full(shape, 7.0)
    target = make(base)
    assert not target.is_contiguous()
    outside = torch.ones_like(base, dtype=torch.bool)
    make(outside).fill_(False)
    want = tinit.trunc_normal_at_(torch.empty(target.shape), 0.1, 1.0, -2.0, 2.0, seed=SEED, stream=5, offset=11)
    tinit.trunc_normal_at_(target, 0.1, 1.0, -2.0, 2.0, seed=SEED, stream=5, offset=11)
    assert_same_bits(target.contiguous(), want, f"{view} at {chunk_bytes} bytes per slab")
    assert bool((base[outside] == 7.0).all()), "memory outside the view changed"


@needs_native
@pytest.mark.parametrize("chunk_bytes", [4, 100, CHUNK_BYTES], ids=["1-elem", "100B", "4MiB"])
def test_non_contiguous_shard_equals_its_block_of_the_whole(chunk_bytes, monkeypatch):
    """A hand-made shard whose local tensor is a transposed view: slabs keep their global indices."""
    monkeypatch.setattr(plan_module, "CHUNK_BYTES", chunk_bytes)
    whole = tinit.trunc_normal_at_(torch.empty(12, 20), std=0.5, seed=SEED, stream=2, offset=3)
    local = torch.empty(7, 5).t()  # a (5, 7) block at rows 4..8, cols 10..16
    tinit.trunc_normal_at_(local, std=0.5, seed=SEED, stream=2, offset=3, global_shape=(12, 20), shard_offsets=(4, 10))
    assert_same_bits(local.contiguous(), whole[4:9, 10:17].contiguous(), "transposed shard vs its block")


def test_slabs_cover_the_view_in_order_within_the_bound():
    """``_pieces``: consecutive row-major blocks of at most the limit, whose stream offsets follow."""
    view = torch.empty(9, 10, 11).permute(2, 0, 1)  # (11, 9, 10), not contiguous
    for limit in (1, 7, 90, 95, 200, 10_000):
        covered = []
        for block, layout, at in plan_module._pieces(view, None, 100, limit):
            assert layout is None and 1 <= block.numel() <= limit
            assert at == 100 + len(covered), (limit, at, len(covered))
            covered.extend(range(at - 100, at - 100 + block.numel()))
        assert covered == list(range(view.numel())), limit


class _Allocations(TorchDispatchMode):
    """The bytes of the largest tensor allocated while active."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func.overloadpacket in (torch.ops.aten.empty, torch.ops.aten.empty_strided, torch.ops.aten.empty_like):
            self.largest = max(self.largest, out.numel() * out.element_size())
        return out


@needs_native
def test_a_transposed_weight_allocates_at_most_the_chunk():
    """A transposed 16 MiB weight: no allocation beyond ``CHUNK_BYTES`` (before: one of 16 MiB)."""
    weight = torch.empty(1024, 4096)
    with _Allocations() as allocations:
        tinit.trunc_normal_at_(weight.t(), std=0.02, seed=1, backend="cpu")
    assert 0 < allocations.largest <= CHUNK_BYTES, allocations.largest
    want = tinit.trunc_normal_at_(torch.empty(4096, 1024), std=0.02, seed=1)
    assert_same_bits(weight.t().contiguous(), want, "transposed weight")


@needs_native
@pytest.mark.parametrize("sequential", [False, True], ids=["batched", "sequential"])
def test_zero_rows_are_written_after_the_values(sequential):
    """``Item.zero_rows``: the padding rows of an embedding are 0, the rest the plan's values; a shard
    zeroes the part of the row it holds."""
    spec = InitSpec(std=0.02)
    whole, shard = torch.empty(10, 6), torch.empty(4, 6)
    items = [
        Item(whole, spec, 7, 0, "wte.weight", zero_rows=(0, 9)),
        Item(shard, spec, 7, 0, "shard", (10, 6), (6, 0), zero_rows=(0, 8)),
    ]
    Plan.build(items, seed=SEED, sequential=sequential).run()
    values = write_spec_(torch.empty(10, 6), spec, seed=SEED, stream=7)
    want = values.clone()
    want[0] = want[9] = 0
    assert_same_bits(whole, want, "whole with zero rows")
    want = values[6:].clone()
    want[2] = 0  # global row 8; row 0 lies outside the shard
    assert_same_bits(shard, want, "shard with zero rows")


def test_zero_rows_are_checked_before_anything_is_written():
    tensor = torch.full((4, 2), 3.0)
    with pytest.raises(ValueError, match=r"zero_rows entry must be an int in \[0, 4\).*item 1"):
        Plan.build([Item(torch.empty(3), InitSpec(std=1.0)), Item(tensor, InitSpec(std=1.0), zero_rows=(4,))], seed=1)
    with pytest.raises(TypeError, match="zero_rows must be a tuple"):
        Plan.build([Item(tensor, InitSpec(std=1.0), zero_rows=[0])], seed=1)
    assert bool((tensor == 3.0).all())


@needs_native
def test_the_key_is_drawn_once_and_only_when_needed():
    """seed=None: one draw when something random is written; none for constants (unless
    ``draw_on_write``), nor when nothing is written."""

    def draws(items, **kwargs) -> int:
        torch.manual_seed(0)
        before = torch.get_rng_state()
        Plan.build(items, **kwargs).run()
        if torch.equal(torch.get_rng_state(), before):
            return 0
        torch.set_rng_state(before)
        torch.empty((), dtype=torch.int64).random_()
        return 1

    random_items = [Item(torch.empty(4), InitSpec(std=1.0), k) for k in range(3)]
    assert draws(random_items) == 1
    assert draws([Item(torch.empty(4), 2.0), Item(torch.empty(3), InitSpec(constant=0.0))]) == 0
    assert draws([Item(torch.empty(4), 2.0)], draw_on_write=True) == 1
    assert draws([Item(torch.empty(4, device="meta"), InitSpec(std=1.0)), Item(torch.empty(0), 1.0)]) == 0
    assert draws(random_items, seed=5) == 0


def test_overlap_makes_the_plan_sequential_with_a_warning():
    base = torch.empty(10)
    items = [Item(base, InitSpec(std=1.0), 1), Item(base[2:6], 4.0)]
    with pytest.warns(RuntimeWarning, match="share memory"):
        plan = Plan.build(items, seed=1, where="test")
    plan.run()
    assert bool((base[2:6] == 4.0).all()) and not bool((base[:2] == 4.0).any())
    with pytest.raises(InternalOverlapError, match="item 0"):
        Plan.build([Item(torch.empty(1).expand(4), InitSpec(std=1.0))], seed=1)


def test_records_and_constants_are_items_too():
    """``Item.what``: a record, a float constant or a hook of the dtype, as well as an InitSpec."""
    record = params.transform_constants(0.0, 1.0, -2.0, 2.0, torch.float32)
    a, b, c = torch.empty(5), torch.empty(5), torch.empty(5, dtype=torch.float64)
    Plan.build(
        [Item(a, record, 4), Item(b, -0.0), Item(c, lambda dtype: 0.5 if dtype == torch.float64 else 1)], seed=1
    ).run()
    want = tinit.trunc_normal_at_(torch.empty(5), seed=1, stream=4)
    assert_same_bits(a, want, "record")
    assert all(math.copysign(1.0, v) < 0 for v in b.tolist())
    assert c.tolist() == [0.5] * 5
    with pytest.raises(TypeError, match="spec must be a tinit.schemes.InitSpec, got str"):
        Plan.build([Item(a, "normal")], seed=1)


@pytest.mark.parametrize(
    "spec, error",
    [
        pytest.param(InitSpec(std=0.02, distribution="laplace"), ValueError, id="distribution"),
        pytest.param(InitSpec(parts=()), ValueError, id="no-parts"),
        pytest.param(InitSpec(parts=(InitSpec(std=0.1), 0.5)), TypeError, id="part-not-a-spec"),
    ],
)
def test_a_malformed_spec_is_refused_before_the_write(spec, error):
    tensor = torch.zeros(4, 4)
    with pytest.raises(error):
        write_spec_(tensor, spec, seed=1)
    assert (tensor == 0).all()


@pytest.mark.parametrize(
    "kwargs, error",
    [
        pytest.param({"seed": None}, TypeError, id="seed-None"),
        pytest.param({"seed": 1, "names": ["a"]}, ValueError, id="names-short"),
        pytest.param({"seed": 1, "names": "ab"}, TypeError, id="names-str"),
        pytest.param({"seed": 1, "sequential": 1}, TypeError, id="sequential-int"),
    ],
)
def test_write_grouped_checks_its_arguments(kwargs, error):
    """A grouped fill has an explicit key: ``seed=None`` is refused, never a draw from torch's RNG."""
    tensors = [torch.zeros(3), torch.zeros(2)]
    state = torch.get_rng_state()
    with pytest.raises(error, match="seed|names|sequential"):
        write_grouped_([FillItem(t, InitSpec(std=1.0), i) for i, t in enumerate(tensors)], **kwargs)
    assert torch.equal(state, torch.get_rng_state())
    assert all((t == 0).all() for t in tensors)


@pytest.mark.parametrize(
    "kwargs", [{"global_shape": 16, "shard_offsets": (0,)}, {"global_shape": (16,), "shard_offsets": 0}]
)
def test_a_shard_description_that_is_not_a_sequence_is_named(kwargs):
    tensor = torch.zeros(4)
    with pytest.raises(TypeError, match=next(k for k, v in kwargs.items() if isinstance(v, int))):
        tinit.trunc_normal_at_(tensor, seed=1, **kwargs)
    assert (tensor == 0).all()
