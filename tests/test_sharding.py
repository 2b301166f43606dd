"""Shards and grouped fills in one process (``tinit.sharding``, ``tinit.write_grouped_``, the
native ``gather_words`` and ``trunc_normal_grouped_cpu``).

The oracle is the unsharded fill: a shard must hold exactly the slice of it
(the contiguous fill itself is checked against scipy and against the
independent ``numpy_philox.stream_words`` by the accuracy and Philox tests), and the
stream words of a shard exactly the numpy Philox words of its global
indices. Grouped fills must equal one ``write_spec_`` per tensor, bit for
bit. DTensor/FSDP2 layouts over real process groups: ``test_sharding_dist``.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from helpers import DTYPE_PARAMS

import tinit
from tests import numpy_philox
from tinit import FillItem, ops, schemes, write_grouped_, write_spec_
from tinit.sharding import ShardLayout, StreamRuns, shard_offsets, shard_shape

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
SHAPES = [(1000, 37), (64, 48), (7, 5, 9), (4097,), (3, 1, 40)]
WINDOWS = [(0.0, 0.02, -0.04, 0.04), (1.0, 2.0, -3.0, 20.0), (0.0, 1.0, 12.0, 14.0)]  # central, two-sided, tail

pytestmark = pytest.mark.skipif(not ops.native_available(), reason="needs the native extension")


def _block(shape, offsets, local):
    return tuple(slice(o, o + n) for o, n in zip(offsets, local, strict=True))


# The Triton interpreter launches once per row run of a shard (each launch runs in Python): it takes the
# shapes up to this many elements.
INTERPRETER_NUMEL = 128


@pytest.mark.parametrize("dtype", DTYPE_PARAMS)
@pytest.mark.parametrize("shape", [pytest.param(s, id="x".join(map(str, s))) for s in SHAPES])
def test_chunked_shards_assemble_the_unsharded_fill(backend, shape, dtype):
    """Every dim split into 2, 3 and 4 chunks (torch.chunk sizes, empty chunks included): each shard is the slice."""
    backend.skip_unless(dtype)
    if backend.id == "triton-interpreter" and math.prod(shape) > INTERPRETER_NUMEL:
        pytest.skip(
            f"{math.prod(shape)} elements in row runs are too slow in the interpreter (up to {INTERPRETER_NUMEL})"
        )
    window = WINDOWS[0]

    def fill(tensor, **layout):
        return tinit.trunc_normal_at_(tensor, *window, seed=5, stream=9, offset=3, backend=backend.name, **layout)

    full = fill(torch.empty(shape, dtype=dtype, device=backend.device))
    for dim in range(len(shape)):
        for world in (2, 3, 4):
            pieces = []
            for rank in range(world):
                offsets, local = shard_offsets(shape, dim, rank, world), shard_shape(shape, dim, rank, world)
                shard = torch.full(local, 7.0, dtype=dtype, device=backend.device)
                fill(shard, global_shape=shape, shard_offsets=offsets)
                assert torch.equal(shard, full[_block(shape, offsets, local)]), (dim, world, rank)
                pieces.append(shard)
            assert torch.equal(torch.cat(pieces, dim), full)


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize(
    "block",
    [
        ((3, 10), (4, 7)),
        ((0, 50), (29, 1)),
        ((49, 1), (0, 30)),
        ((10, 5), (0, 30)),
        ((0, 1), (0, 1)),
        ((5, 40), (3, 20)),
    ],
)
def test_2d_blocks(block, window):
    """Blocks on both dims (a 2-D mesh's Shard, Shard), including single rows, columns and elements."""
    (o0, n0), (o1, n1) = block
    full = tinit.trunc_normal_at_(torch.empty(50, 30), *window, seed=1, stream=2)
    shard = tinit.trunc_normal_at_(
        torch.empty(n0, n1), *window, seed=1, stream=2, global_shape=(50, 30), shard_offsets=(o0, o1)
    )
    assert torch.equal(shard, full[o0 : o0 + n0, o1 : o1 + n1])


def test_3d_middle_dim_shard_and_non_contiguous_local():
    """A shard split along a middle dim, written into a transposed (non-contiguous) local view."""
    shape = (6, 40, 9)
    full = tinit.trunc_normal_at_(torch.empty(shape), 0.0, 0.5, -1.0, 1.0, seed=3, stream=4)
    storage = torch.zeros(9, 13, 6)
    local = storage.permute(2, 1, 0)  # shape (6, 13, 9), not contiguous
    tinit.trunc_normal_at_(local, 0.0, 0.5, -1.0, 1.0, seed=3, stream=4, global_shape=shape, shard_offsets=(0, 20, 0))
    assert torch.equal(local, full[:, 20:33])


@pytest.mark.parametrize(
    "layout,expected",
    [
        (ShardLayout.from_offsets((8, 6), (4, 6), (4, 0)), StreamRuns(24, 24)),
        (ShardLayout.from_offsets((8, 6), (8, 3), (0, 3)), StreamRuns(3, 3, (8,), tuple(range(0, 48, 6)))),
        (ShardLayout.from_offsets((8, 6), (1, 2), (5, 1)), StreamRuns(31, 2)),
        (ShardLayout.from_offsets((2, 3, 4), (2, 1, 4), (0, 2, 0)), StreamRuns(8, 4, (2,), (0, 12))),
        (ShardLayout.full((5, 7)), StreamRuns(0, 35)),
    ],
)
def test_runs_of_layouts(layout, expected):
    """Hand-derived runs: row-major global index = sum offset_k * stride_k."""
    assert layout.runs() == expected
    assert layout.runs(offset=10).base == expected.base + 10


@pytest.mark.parametrize("offset", [0, 1, 2**32 - 5, 2**34 + 3])
@pytest.mark.parametrize("block", [((0, 7), (3, 5), (1, 2)), ((2, 3), (0, 11), (0, 3)), ((1, 1), (4, 1), (2, 1))])
def test_shard_words_are_the_numpy_philox_words_of_global_indices(block, offset):
    """``philox_runs_`` and ``reference.words_at`` against an independent numpy Philox at each global index."""
    shape = (7, 11, 3)
    offsets = tuple(o for o, _ in block)
    local = tuple(n for _, n in block)
    layout = ShardLayout.from_offsets(shape, local, offsets)
    runs = layout.runs(offset)
    index = layout.flat_index().reshape(-1).numpy() + offset
    seed, stream = 0xDEADBEEF12345678, 2**63 + 77
    all_words = numpy_philox.stream_words(int(index.max() - index.min() + 1), seed, stream, int(index.min()))
    expected = all_words[index - index.min()].astype(np.int64)
    native = ops.philox_words(math.prod(local), seed, stream, runs=runs)
    np.testing.assert_array_equal(native.numpy(), expected)
    np.testing.assert_array_equal(tinit.reference.words_at(torch.from_numpy(index), seed, stream).numpy(), expected)
    np.testing.assert_array_equal(runs.stream_indices().numpy(), index)


def test_uniform_spec_on_a_shard():
    spec = schemes.InitSpec(distribution="uniform", std=0.5, trunc=math.sqrt(3.0))
    full = write_spec_(torch.empty(20, 30), spec, seed=8, stream=1)
    shard = write_spec_(torch.empty(20, 7), spec, seed=8, stream=1, global_shape=(20, 30), shard_offsets=(0, 21))
    assert torch.equal(shard, full[:, 21:28])
    assert full.abs().max() <= 0.5 * math.sqrt(3.0)


@pytest.mark.parametrize("dim", [0, 1])
def test_fused_parts_and_fans_use_the_logical_tensor(dim):
    """A fused QKV (parts along dim 0) and a fan-dependent scheme: a shard holds the slice of the full fill."""
    shape = (192, 64)
    kwargs = {"role": "attn_qkv", "seed": 3, "stream": 4, "d_model": 64}
    full = tinit.fill_(torch.empty(shape), "mup", **kwargs)
    xavier = tinit.fill_(torch.empty(shape), "xavier_uniform", seed=3, stream=5)
    for world in (4, 5):
        for rank in range(world):
            offsets, local = shard_offsets(shape, dim, rank, world), shard_shape(shape, dim, rank, world)
            shard = tinit.fill_(torch.empty(local), "mup", global_shape=shape, shard_offsets=offsets, **kwargs)
            assert torch.equal(shard, full[_block(shape, offsets, local)])
            shard = tinit.fill_(
                torch.empty(local), "xavier_uniform", seed=3, stream=5, global_shape=shape, shard_offsets=offsets
            )
            assert torch.equal(shard, xavier[_block(shape, offsets, local)])


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"global_shape": (10, 10), "shard_offsets": (8, 0)}, "does not fit"),
        ({"global_shape": (3, 10), "shard_offsets": (0, 0)}, "does not fit"),
        ({"global_shape": (10, 10), "shard_offsets": (-1, 0)}, "does not fit"),
        ({"global_shape": (10, 10), "shard_offsets": (0,)}, "one entry per dim"),
        ({"global_shape": (10, 10)}, "both"),
        ({"shard_offsets": (0, 0)}, "both"),
    ],
)
def test_bad_shard_arguments_raise_before_writing(kwargs, match):
    shard = torch.full((4, 10), 5.0)
    with pytest.raises(ValueError, match=match):
        tinit.trunc_normal_at_(shard, seed=1, **kwargs)
    assert torch.equal(shard, torch.full((4, 10), 5.0))
    g = torch.Generator().manual_seed(0)
    state = g.get_state()
    with pytest.raises(ValueError, match=match):
        tinit.fill_(shard, "normal", generator=g, **kwargs)
    assert torch.equal(g.get_state(), state)  # nothing drawn
    assert torch.equal(shard, torch.full((4, 10), 5.0))


def test_shard_offset_beyond_int64_is_refused():
    with pytest.raises(ValueError, match="offset"):
        tinit.trunc_normal_at_(torch.empty(2, 2), seed=1, offset=2**63 - 10, global_shape=(10, 2), shard_offsets=(0, 0))


def test_shard_offsets_helper_is_torch_chunk():
    for size, world in [(10, 4), (3, 4), (4096, 2), (37, 4), (1, 3)]:
        chunks = torch.arange(size).chunk(world)
        for rank in range(world):
            (start,) = shard_offsets((size,), 0, rank, world)
            (length,) = shard_shape((size,), 0, rank, world)
            expected = chunks[rank].tolist() if rank < len(chunks) else []
            assert list(range(start, start + length)) == expected
    with pytest.raises(ValueError):
        shard_offsets((4, 4), 0, 4, 4)
    with pytest.raises(ValueError):
        shard_offsets((4, 4), 2, 0, 4)


# --- grouped fills -----------------------------------------------------------

SIZES = [0, 1, 3, 4097, 10**6]


def _items(tensors):
    """One spec per tensor: truncated normals in every mode, a constant, a uniform, a fused part spec."""
    specs = [
        schemes.InitSpec(std=0.02, trunc=2.0),
        schemes.InitSpec(mean=1.0, std=2.0, trunc=3.0),
        schemes.InitSpec(mean=0.5, std=1.0, trunc=1e-3),
        schemes.InitSpec(constant=1.0),
        schemes.InitSpec(distribution="uniform", std=0.1, trunc=math.sqrt(3.0)),
    ]
    return [FillItem(t, specs[i % len(specs)], stream=1000 + i, offset=17 * i) for i, t in enumerate(tensors)]


@pytest.mark.parametrize("threads", [1, 2])
def test_grouped_equals_per_tensor(threads):
    """Mixed sizes (0, 1, 3, 4097, 10**6 elements) and dtypes in one group: bit for bit the per-tensor fill."""
    shapes = [(n,) for n in SIZES] + [(4097, 3), (1, 1), (33, 65)]
    tensors = [torch.full(s, 9.0, dtype=DTYPES[i % len(DTYPES)]) for i, s in enumerate(shapes * 3)]
    items = _items(tensors)
    expected = [write_spec_(i.tensor.clone(), i.spec, seed=42, stream=i.stream, offset=i.offset) for i in items]
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        write_grouped_(items, seed=42)
    finally:
        torch.set_num_threads(previous)
    for item, want in zip(items, expected, strict=True):
        assert torch.equal(item.tensor, want), (item.tensor.shape, item.tensor.dtype, item.spec)
    assert any(t.numel() > 1 and not torch.equal(t, torch.full_like(t, 9.0)) for t in tensors)


def test_grouped_uses_one_native_call_per_device(monkeypatch):
    calls = []
    real = ops.trunc_normal_grouped_native
    monkeypatch.setattr(ops, "trunc_normal_grouped_native", lambda t, *a: (calls.append(len(t)), real(t, *a))[1])
    tensors = [torch.empty(n) for n in (5, 64, 4097, 300) * 50]
    write_grouped_(
        [FillItem(t, schemes.InitSpec(std=0.02, trunc=2.0), stream=i) for i, t in enumerate(tensors)], seed=1
    )
    assert calls == [200]


def test_grouped_fused_parts_and_shards(monkeypatch):
    """Truncated-normal parts along dim 0 join the native table; parts along dim 1 are written alone; all exact."""
    qkv = schemes.InitSpec(
        parts=(schemes.InitSpec(std=0.5), schemes.InitSpec(constant=0.0), schemes.InitSpec(std=2.0, trunc=3.0))
    )
    assert schemes.get("deepnorm").spec(role="attn_qkv", shape=(96, 32), d_model=32, n_layers=4).parts is not None
    tensors = [torch.empty(96, 32), torch.empty(32, 96)]
    items = [FillItem(tensors[0], qkv, stream=5), FillItem(tensors[1], dataclasses.replace(qkv, split_dim=1), stream=6)]
    expected = [write_spec_(torch.empty_like(i.tensor), i.spec, seed=2, stream=i.stream) for i in items]
    tabled = []
    real = ops.trunc_normal_grouped_native
    monkeypatch.setattr(
        ops, "trunc_normal_grouped_native", lambda t, *a: (tabled.extend(x.data_ptr() for x in t), real(t, *a))[1]
    )
    write_grouped_(items, seed=2)
    for item, want in zip(items, expected, strict=True):
        torch.testing.assert_close(item.tensor, want, rtol=0, atol=0)
    # the two normal slices of the dim-0 fused tensor, nothing of the dim-1 one
    assert sorted(tabled) == [tensors[0][:32].data_ptr(), tensors[0][64:].data_ptr()]


def test_grouped_bad_item_writes_nothing():
    tensors = [torch.full((10,), 3.0) for _ in range(3)]
    items = _items(tensors[:2]) + [FillItem(tensors[2], schemes.InitSpec(std=-1.0), stream=1)]
    with pytest.raises(ValueError):
        write_grouped_(items, seed=1)
    items = _items(tensors[:2]) + [FillItem(torch.zeros(3, dtype=torch.int32), schemes.InitSpec(std=1.0), stream=1)]
    with pytest.raises(TypeError):
        write_grouped_(items, seed=1)
    with pytest.raises(ValueError, match="seed"):
        write_grouped_(_items(tensors), seed=-1)
    assert all(torch.equal(t, torch.full((10,), 3.0)) for t in tensors)


def test_grouped_bumps_versions():
    tensors = [torch.zeros(8, requires_grad=True) for _ in range(2)]
    before = [t._version for t in tensors]
    write_grouped_([FillItem(t, schemes.InitSpec(std=1.0, trunc=2.0), stream=i) for i, t in enumerate(tensors)], seed=1)
    assert [t._version for t in tensors] > before
    assert all(a > b for a, b in zip([t._version for t in tensors], before, strict=True))


def test_init_model_grouped_equals_ungrouped():
    from tinit.tools.toy_models import GPT, GPTConfig

    config = GPTConfig(n_layers=3, d_model=32, n_heads=2, vocab=97, n_ctx=16)
    a, b = GPT(config), GPT(config)
    tinit.init_model_(a, "gpt2", seed=9, grouped=True)
    tinit.init_model_(b, "gpt2", seed=9, grouped=False)
    for (name, p), q in zip(a.named_parameters(), b.parameters(), strict=True):
        assert torch.equal(p, q), name


def test_grouped_items_from_a_generator_with_fresh_specs():
    """Specs created and dropped on the fly (ids may be reused): each tensor still gets its own std."""
    tensors = [torch.empty(20000) for _ in range(12)]
    write_grouped_(
        (FillItem(t, schemes.InitSpec(std=0.01 * (i + 1), trunc=2.0), stream=i) for i, t in enumerate(tensors)), seed=4
    )
    for i, t in enumerate(tensors):
        want = write_spec_(torch.empty(20000), schemes.InitSpec(std=0.01 * (i + 1), trunc=2.0), seed=4, stream=i)
        assert torch.equal(t, want), i


def test_grouped_overlapping_tensors_are_written_in_order():
    """Two Parameters on one storage, and one tensor listed twice: sequential semantics, with a warning."""
    base = torch.empty(50, 40)
    a, b = torch.nn.Parameter(base), torch.nn.Parameter(base)  # distinct Parameters, same memory
    items = [
        FillItem(a, schemes.InitSpec(std=1.0, trunc=2.0), stream=1),
        FillItem(b, schemes.InitSpec(std=0.02, trunc=2.0), stream=2),
    ]
    with pytest.warns(RuntimeWarning, match="share memory"):
        write_grouped_(items, seed=3)
    assert torch.equal(base, write_spec_(torch.empty(50, 40), items[1].spec, seed=3, stream=2))
    t = torch.empty(1000)
    with pytest.warns(RuntimeWarning, match="share memory"):
        write_grouped_(
            [
                FillItem(t, schemes.InitSpec(std=1.0, trunc=2.0), stream=1),
                FillItem(t, schemes.InitSpec(constant=0.0), stream=1),
            ],
            seed=3,
        )
    assert torch.equal(t, torch.zeros(1000))
    views = torch.empty(100)
    write_grouped_(
        [
            FillItem(views[:50], schemes.InitSpec(std=1.0, trunc=2.0), stream=1),
            FillItem(views[50:], schemes.InitSpec(std=1.0, trunc=2.0), stream=2),
        ],
        seed=3,
    )  # no overlap


@pytest.mark.parametrize("sequential", [False, True])
def test_grouped_checks_everything_before_writing(sequential):
    tensors = [torch.full((10,), 3.0) for _ in range(2)]
    items = [
        FillItem(tensors[0], schemes.InitSpec(std=1.0, trunc=2.0), stream=1),
        FillItem(tensors[1], schemes.InitSpec(std=1.0, trunc=2.0), stream=-1),
    ]
    with pytest.raises(ValueError, match="stream"):
        write_grouped_(items, seed=1, sequential=sequential)
    assert all(torch.equal(t, torch.full((10,), 3.0)) for t in tensors)
    for seed, error in ((-1, ValueError), (True, TypeError), (2**64, ValueError)):
        with pytest.raises(error, match="seed"):
            write_grouped_([], seed=seed, sequential=sequential)


def test_fused_spec_on_an_empty_local_shard_writes_nothing():
    """A rank outside a DTensor's mesh holds a (0,) local tensor: the fused parts have nothing to split."""
    from tinit._plan import leaves

    spec = schemes.get("deepnorm").spec(role="attn_qkv", shape=(10, 30), n_layers=2, d_model=10, layout="in_out")
    assert spec.parts is not None and spec.split_dim == 1
    layout = ShardLayout((10, 30), (torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.int64)))
    assert list(leaves(torch.empty(0), layout, spec, 0)) == []


def _grouped_runs_cases():
    """(local tensor, its layout) pairs of every runs kind: whole, a dim-1 block (rows), two outer dims,
    a strided dim 0 (arbitrary outer starts), a 1-D block; dtypes mixed."""
    layouts = [
        ShardLayout.full((7, 9)),
        ShardLayout.from_offsets((12, 40), (12, 8), (0, 16)),
        ShardLayout.from_offsets((6, 5, 9), (2, 3, 4), (1, 2, 5)),
        ShardLayout((10, 6), (torch.tensor([1, 2, 5, 7]), torch.arange(6))),
        ShardLayout.from_offsets((100,), (37,), (11,)),
        ShardLayout.from_offsets((3, 4097), (3, 1500), (0, 2000)),
    ]
    dtypes = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
    return [
        (torch.full(layout.local_shape, 9.0, dtype=dtypes[i % len(dtypes)]), layout)
        for i, layout in enumerate(layouts * 2)
    ]


@pytest.mark.parametrize("threads", [1, 2])
def test_grouped_runs_op_equals_one_call_per_tensor(threads):
    """``trunc_normal_grouped_runs_`` on whole tensors, row blocks, two outer dims and strided positions in
    one call: bit for bit each tensor's own ``trunc_normal_runs_`` (or ``trunc_normal_`` when one range)."""
    cases = _grouped_runs_cases()
    runs = [layout.runs(1000 * i) for i, (_, layout) in enumerate(cases)]
    assert {r.contiguous for r in runs} == {True, False}
    streams = [3 + i for i in range(len(cases))]
    constants = [tinit.params.transform_constants(0.0, 0.5, -1.0, 1.0, t.dtype) for t, _ in cases]
    expected = []
    for (tensor, _), r, stream, packed in zip(cases, runs, streams, constants, strict=True):
        want = tensor.clone()
        if r.contiguous:
            ops.trunc_normal_native(want, 7, stream, r.base, packed)
        else:
            ops.trunc_normal_runs_native(want, 7, stream, r, packed)
        expected.append(want)
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        ops.trunc_normal_grouped_runs_native([t for t, _ in cases], 7, streams, runs, constants)
    finally:
        torch.set_num_threads(previous)
    for (tensor, layout), want in zip(cases, expected, strict=True):
        torch.testing.assert_close(tensor, want, rtol=0, atol=0, msg=f"layout {layout.global_shape}")
        assert not bool((tensor == 9.0).any())


def test_inner_dim_shards_join_the_table(monkeypatch):
    """A plan of row-parallel (dim-1) shards and whole tensors makes one grouped-runs call and no runs_ call;
    every shard equals its block of the dense fill."""
    from tinit import _plan

    spec = schemes.InitSpec(std=0.02, trunc=2.0)
    dense = [torch.empty(16, 64), torch.empty(8, 96), torch.empty(33)]
    blocks = [((slice(None), slice(16, 32)), (0, 16)), ((slice(None), slice(0, 24)), (0, 0)), ((slice(5, 30),), (5,))]
    shards = [torch.empty(d[b].shape) for d, (b, _) in zip(dense, blocks, strict=True)]
    whole = torch.empty(10, 10)
    items = [
        _plan.Item(s, spec, stream=i, global_shape=tuple(d.shape), shard_offsets=o)
        for i, (s, d, (_, o)) in enumerate(zip(shards, dense, blocks, strict=True))
    ]
    items.append(_plan.Item(whole, spec, stream=9))
    calls = {"grouped_runs": 0, "runs": 0, "grouped": 0}
    for name, key in (
        ("trunc_normal_grouped_runs_native", "grouped_runs"),
        ("trunc_normal_runs_native", "runs"),
        ("trunc_normal_grouped_native", "grouped"),
    ):
        real = getattr(ops, name)
        monkeypatch.setattr(
            ops, name, lambda *a, _real=real, _key=key: (calls.__setitem__(_key, calls[_key] + 1), _real(*a))[1]
        )
    _plan.Plan.build(items, seed=4, backend="cpu").run()
    assert calls == {"grouped_runs": 1, "runs": 0, "grouped": 0}
    for i, (s, d, (b, _)) in enumerate(zip(shards, dense, blocks, strict=True)):
        write_spec_(d, spec, seed=4, stream=i)
        torch.testing.assert_close(s, d[b], rtol=0, atol=0)
    torch.testing.assert_close(whole, write_spec_(torch.empty(10, 10), spec, seed=4, stream=9), rtol=0, atol=0)
