"""Sharded initialisation at scale, in one process: torch's LocalTensorMode and the fake process group.

**LocalTensorMode** (``torch.distributed._local_tensor``) simulates every rank of a mesh: a DTensor's
local tensor is a ``LocalTensor`` holding each rank's shard, and the mesh coordinates are per-rank
integers. tinit writes every simulated rank's shard from that rank's layout
(``tinit.sharding.ShardLayout.local_shards``); each one must equal the single-process fill sliced by
torch's own ``distribute_tensor``, for ``nn.init`` fills (1-D and 2-D meshes, uneven and empty shards,
FSDP2 x TP's ``_StridedShard``) and ``init_model_`` on a tensor- and FSDP2-parallel model, at 2, 4 and 8
ranks.

**The fake process group** (``torch.testing._internal.distributed.fake_pg``) makes this process one
rank r of a 4096-rank world: a Llama-3-70B-shaped model at reduced width (80 layers, 64 query heads
over 8 k/v heads, d_model 8192 -> 128, FFN 28672 -> 448, vocabulary 128256 -> 2004) split into 8
pipeline stages as torchtitan splits it, each stage tensor-parallel over 8 ranks (torch's
``parallelize_module`` with torchtitan's colwise/rowwise/sequence plan) and FSDP2 ``fully_shard`` over
64 (bench/bench_scale.py builds it: the test checks the topology the benchmark times). For a sample of
ranks and every rank at a shard boundary, the rank's part is initialised on its own and every local
shard must equal the dense single-process build sliced by torch's ``distribute_tensor`` for that rank.
The process group is re-created per checked rank, with DTensor's sharding-propagation caches cleared:
a DeviceMesh compares equal on every rank, so a cached output spec would carry the previous rank's.
"""

from __future__ import annotations

import random
import sys

import pytest
import torch
import torch.distributed as dist

if not dist.is_available():
    pytest.skip("torch.distributed is not available", allow_module_level=True)
try:
    from torch.distributed._local_tensor import LocalIntNode, LocalTensor, LocalTensorMode
except ImportError:
    pytest.skip("this torch has no torch.distributed._local_tensor (LocalTensorMode)", allow_module_level=True)

import bench_scale as topo
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
from torch.distributed.tensor._utils import compute_local_shape_and_global_offset
from torch.distributed.tensor.placement_types import _StridedShard, _StridedShardOffsetMode

import tinit
from tinit.sharding import ShardLayout, _strided_positions

pytestmark = pytest.mark.dist

LOCAL_WORLDS = (2, 4, 8)
# (id, global shape, mesh dims, placements): uneven and empty shards at 8 ranks (13 rows: 2 x 6, 1, 0).
LOCAL_LAYOUTS = [
    ("S0", (13, 6), 1, (Shard(0),)),
    ("S1", (5, 11), 1, (Shard(1),)),
    ("R", (4, 6), 1, (Replicate(),)),
    ("S0-S1", (13, 11), 2, (Shard(0), Shard(1))),
    ("R-S1", (5, 24), 2, (Replicate(), Shard(1))),
    ("S1-S1", (5, 24), 2, (Shard(1), Shard(1))),
    ("SS0-S0", (16, 6), 2, (_StridedShard(0, split_factor=2), Shard(0))),
]
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
SMALL_LLAMA = topo.llama_shapes(dim=64, n_heads=8, n_kv_heads=2, n_layers=2, ffn_dim=256, vocab=256)

PP, DP, TP = 8, 64, 8
WORLD = PP * DP * TP
LLAMA_70B = topo.llama_shapes(dim=128, n_heads=64, n_kv_heads=8, n_layers=80, ffn_dim=448, vocab=2004)


def _rank(stage: int, dp: int, tp: int) -> int:
    return (stage * DP + dp) * TP + tp


def _checked_ranks() -> list[int]:
    """Each stage's first and last rank; on the first and last stage also the other corners of the
    (dp, tp) grid and the dp rank whose vocabulary shard is partial (2004 rows in chunks of 32: dp 62
    holds 20, dp 63 none); and six ranks drawn at random."""
    ranks = {_rank(s, 0, 0) for s in range(PP)} | {_rank(s, DP - 1, TP - 1) for s in range(PP)}
    for stage in (0, PP - 1):
        ranks |= {_rank(stage, 0, TP - 1), _rank(stage, DP - 1, 0), _rank(stage, DP - 2, 3)}
    ranks |= set(random.Random(0).sample(range(WORLD), 6))
    return sorted(ranks)


@pytest.fixture
def fake_pg():
    """``world(rank, size)`` makes this process ``rank`` of a fake process group (``topo.fake_world``);
    the group is destroyed and the excepthook restored after the test."""
    hook = sys.excepthook
    yield topo.fake_world
    if dist.is_initialized():
        dist.destroy_process_group()
    sys.excepthook = hook


def _trunc_normal(tensor):
    """The one fill every LocalTensorMode check uses, its key drawn from a generator seeded 0."""
    return tinit.nn.init.trunc_normal_(
        tensor, mean=0.01, std=0.02, a=-0.03, b=0.05, generator=torch.Generator().manual_seed(0)
    )


def _assert_ranks_equal(tensor, expected, what: str) -> None:
    """Every simulated rank's shard of ``tensor`` (a DTensor) bit-equal to the same rank's of ``expected``
    (a DTensor whose local tensor is a plain one when it is the same on every rank: ``Replicate``)."""
    shards, wanted = tensor._local_tensor._local_tensors, expected._local_tensor
    wanted = wanted._local_tensors if isinstance(wanted, LocalTensor) else dict.fromkeys(shards, wanted)
    assert sorted(shards) == sorted(wanted), what
    for rank, shard in shards.items():
        torch.testing.assert_close(shard, wanted[rank], rtol=0, atol=0, msg=lambda m, r=rank: f"{what}, rank {r}: {m}")


def _mesh(world: int, dims: int):
    return init_device_mesh("cpu", (world,) if dims == 1 else (world // 2, 2))


@pytest.mark.parametrize("world", LOCAL_WORLDS, ids=[f"w{w}" for w in LOCAL_WORLDS])
@pytest.mark.parametrize("layout", LOCAL_LAYOUTS, ids=[layout[0] for layout in LOCAL_LAYOUTS])
@pytest.mark.parametrize("dtype", list(DTYPES), ids=list(DTYPES))
def test_local_tensor_mode_fill_equals_dense_slices(fake_pg, world, layout, dtype):
    _, shape, dims, placements = layout
    dense = _trunc_normal(torch.empty(shape, dtype=DTYPES[dtype]))
    fake_pg(0, world)
    with LocalTensorMode(world):
        mesh = _mesh(world, dims)
        tensor = distribute_tensor(torch.zeros(shape, dtype=DTYPES[dtype]), mesh, placements, src_data_rank=None)
        _trunc_normal(tensor)
        expected = distribute_tensor(dense, mesh, placements, src_data_rank=None)
        _assert_ranks_equal(tensor, expected, f"{placements} on {tuple(mesh.shape)}")
        gathered = tensor.full_tensor()
    torch.testing.assert_close(gathered.reconcile(), dense, rtol=0, atol=0)


def _tp_fsdp_model(world: int):
    """A 2-layer Llama (torchtitan names, GQA 8/2 heads) on meta, ``topo.parallelize``d on a (world/2, 2)
    (dp, tp) mesh; every dim divides by the mesh (FSDP2 under LocalTensorMode gives every rank the
    padded size of an uneven dim-0 shard, which tinit refuses as a shard its layout does not match)."""
    mesh = init_device_mesh("cpu", (world // 2, 2), mesh_dim_names=("dp", "tp"))
    with torch.device("meta"):
        model = topo.Transformer(SMALL_LLAMA)
    return topo.parallelize(model, mesh)


@pytest.mark.parametrize("world", LOCAL_WORLDS, ids=[f"w{w}" for w in LOCAL_WORLDS])
def test_local_tensor_mode_init_model_equals_single_process(fake_pg, world):
    reference = topo.Transformer(SMALL_LLAMA)
    tinit.init_model_(reference, "gpt2", seed=0)
    fake_pg(0, world)
    with LocalTensorMode(world):
        model = _tp_fsdp_model(world)
        tinit.init_model_(model, "gpt2", seed=0, device="cpu")
        seen = set()
        for name, param in model.named_parameters():
            dense = reference.get_parameter(name).detach()
            seen.add(tuple(type(p).__name__ for p in param.placements))
            expected = distribute_tensor(dense, param.device_mesh, param.placements, src_data_rank=None)
            _assert_ranks_equal(param, expected, f"{name} {param.placements}")
            torch.testing.assert_close(param.full_tensor().reconcile().detach(), dense, rtol=0, atol=0)
    assert {("_StridedShard", "Shard"), ("Shard", "Shard"), ("Shard", "Replicate")} <= seen, seen


def test_local_tensor_mode_draws_each_ranks_key_from_its_rng(fake_pg):
    """No seed and no generator: each simulated rank draws the key from its own default generator, as
    its process would; equal states give the single-process fill, different ones are refused before
    anything is written."""
    world, shape = 4, (8, 6)
    torch.manual_seed(3)
    dense = tinit.nn.init.trunc_normal_(torch.empty(shape), std=0.02)
    fake_pg(0, world)
    with LocalTensorMode(world):
        mesh = init_device_mesh("cpu", (world,))
        tensor = distribute_tensor(torch.zeros(shape), mesh, [Shard(0)], src_data_rank=None)
        torch.manual_seed(3)
        tinit.nn.init.trunc_normal_(tensor, std=0.02)
        _assert_ranks_equal(tensor, distribute_tensor(dense, mesh, [Shard(0)], src_data_rank=None), "seeded ranks")
        torch.manual_seed(torch.SymInt(LocalIntNode({rank: rank for rank in range(world)})))
        before = {rank: shard.clone() for rank, shard in tensor._local_tensor._local_tensors.items()}
        with pytest.raises(RuntimeError, match="different keys"):
            tinit.nn.init.trunc_normal_(tensor, std=0.02)
        for rank, shard in tensor._local_tensor._local_tensors.items():
            torch.testing.assert_close(shard, before[rank], rtol=0, atol=0)


def test_local_tensor_mode_layout_needs_the_rank(fake_pg):
    fake_pg(0, 2)
    with LocalTensorMode(2):
        tensor = distribute_tensor(torch.zeros(4, 3), init_device_mesh("cpu", (2,)), [Shard(0)], src_data_rank=None)
        with pytest.raises(ValueError, match="rank must be one of the simulated ranks"):
            ShardLayout.of_dtensor(tensor)
        with pytest.raises(ValueError, match="rank must be one of the simulated ranks"):
            ShardLayout.of_dtensor(tensor, rank=2)
        assert ShardLayout.of_dtensor(tensor, rank=1).indices[0].tolist() == [2, 3]
        assert [layout.indices[0].tolist() for _, layout in ShardLayout.local_shards(tensor)] == [[0, 1], [2, 3]]
    plain = distribute_tensor(torch.zeros(4, 3), init_device_mesh("cpu", (2,)), [Shard(0)], src_data_rank=None)
    with pytest.raises(ValueError, match="only for a DTensor simulated by LocalTensorMode"):
        ShardLayout.of_dtensor(plain, rank=0)
    assert ShardLayout.of_dtensor(plain).indices[0].tolist() == [0, 1]


@pytest.mark.parametrize("split_factor", [1, 2, 3, 8])
@pytest.mark.parametrize("chunks", [1, 2, 5, 64])
def test_strided_positions_match_torch(split_factor, chunks):
    """tinit's O(split_factor) _StridedShard positions against torch's own (an arange of the whole dim
    split into every rank's chunks), uneven and empty chunks included."""
    placement = _StridedShard(0, split_factor=split_factor)
    for size in [*range(18), 63, 64, 65, 2004]:
        for rank in range(chunks):
            count, offsets = placement.local_shard_size_and_offset(size, chunks, rank, _StridedShardOffsetMode.ALL)
            got = _strided_positions(size, chunks, rank, placement)
            assert got.tolist() == offsets and got.numel() == count, (size, rank)


@pytest.fixture(scope="module")
def llama_70b():
    """(dense parameters of the single-process build, the 8 pipeline stages of the meta model)."""
    reference = topo.Transformer(LLAMA_70B)
    tinit.init_model_(reference, "gpt2", seed=0, n_layers=80, d_model=128)
    dense = {name: param.detach() for name, param in reference.named_parameters()}
    with torch.device("meta"):
        model = topo.Transformer(LLAMA_70B)
    return dense, [topo.pipeline_part(model, stage, PP) for stage in range(PP)]


def _stage_names(dense: dict, stage: int) -> list[str]:
    """The FQNs stage ``stage`` keeps, in the dense model's order."""
    per = LLAMA_70B.n_layers // PP
    first, last = stage == 0, stage == PP - 1

    def kept(name: str) -> bool:
        if name.startswith("layers."):
            return stage * per <= int(name.split(".")[1]) < (stage + 1) * per
        return first if name.startswith("tok_embeddings.") else last

    return [name for name in dense if kept(name)]


@pytest.mark.parametrize("rank", _checked_ranks())
def test_fake_pg_rank_of_4096_equals_dense_slices(fake_pg, llama_70b, rank):
    dense, parts = llama_70b
    fake_pg(rank, WORLD)
    part, mesh = topo.rank_part(parts, WORLD)
    stage = rank // (DP * TP)
    assert tuple(mesh.get_coordinate()) == (stage, rank // TP % DP, rank % TP)
    tinit.init_model_(part, "gpt2", seed=0, n_layers=80, d_model=128, device="cpu")
    assert [name for name, _ in part.named_parameters()] == _stage_names(dense, stage)
    kinds = set()
    for name, param in part.named_parameters():
        assert isinstance(param, DTensor), name
        kinds.add(tuple(type(p).__name__ for p in param.placements))
        local = param.to_local()
        shape, _ = compute_local_shape_and_global_offset(param.shape, param.device_mesh, param.placements)
        assert tuple(local.shape) == tuple(shape), name
        expected = distribute_tensor(dense[name], param.device_mesh, param.placements, src_data_rank=None)
        torch.testing.assert_close(
            local.detach(), expected.to_local(), rtol=0, atol=0, msg=lambda m, n=name: f"rank {rank} {n}: {m}"
        )
    assert {("_StridedShard", "Shard"), ("Shard", "Shard"), ("Shard", "Replicate")} <= kinds, kinds


def test_bench_scale_runs_and_reports(capsys):
    """bench/bench_scale.py with one round of small worlds: it validates its outputs and prints both tables."""
    topo.main(["--rounds", "1", "--worlds", "1,8", "--local-worlds", "2", "--layers", "1"])
    out = capsys.readouterr().out
    assert "| 8 | (1, 1, 8) |" in out and "slope 1 -> 8" in out and "\n| 2 | " in out, out
    assert not dist.is_initialized()


def test_slope_of_a_flat_and_a_rising_line():
    worlds = (1, 8, 64, 512, 4096)
    assert topo.slope(worlds, [2.0] * 5) == pytest.approx(0.0)
    assert topo.slope(worlds, [1.0 + 0.1 * i for i in range(5)]) == pytest.approx(0.4)
