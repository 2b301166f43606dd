"""Per-rank init time against the world size, in one process: torch's fake process group and LocalTensorMode.

    python bench/bench_scale.py                    # both tables, 5 interleaved rounds, printed only
    python bench/bench_scale.py --rounds 2 --local-worlds 2,4,8     # a quick look
    python bench/bench_scale.py --save             # also write bench/results/<date>_<commit>_scale.{md,json}

**Fake process group** (``torch.testing._internal.distributed.fake_pg``, backend "fake"): this process
is rank r of a world of W = 1, 8, 64, 128, 512, 1024, 4096 ranks, on a (pp, dp, tp) mesh (tp = min(8, W),
pp = min(8, W / tp), dp the rest: 4096 = 8 x 64 x 8). The model is a torchtitan-named Llama stage
(``Transformer``: ``layers.{i}.attention.wq``, ..., ``feed_forward.w2``, the norms) split as
torchtitan's pipeline does (``pipeline_part``: a deep copy with the other stages' layers deleted,
FQNs kept), tensor-parallel by ``parallelize_module`` (torchtitan's colwise/rowwise/sequence plan,
``TP_PLAN``) and FSDP2 ``fully_shard`` on dp (``parallelize``). The work per rank is held constant:
every weight's *local* shard is ``--rows`` x ``--cols`` whatever W (``fixed_shard_shapes``: a global
dim is the local one times the mesh size that shards it), and each stage has ``--layers`` layers, so
a flat line means nothing in the init grows with the world size. Timed: ``tinit.init_model_(part,
"gpt2", seed=0)`` on the part after torch's ``part.to_empty(device="cpu")`` (as torchtitan
materialises before its init), whose time is reported beside it: torch's allocation of each DTensor
parameter compares device meshes (``DeviceMesh.__eq__`` over the rank map, O(world)), a cost any
init pays and tinit's write does not add to; the mesh, the split and the wrapping are set up
outside the timing, and the process group is re-created per sample (destroy + init, the
sharding-propagation caches cleared: a DeviceMesh compares equal across ranks, so a cached output
spec would carry the previous rank's mesh). Rounds interleave
the world sizes; a sample's rank is drawn at random. Reported: the median and the spread (min-max)
of the seconds per rank, and the slope: the least-squares line of the median against log2(W),
its rise from W = 1 to the largest W over its value at 1 (target: <= 10 %), and the same over the
worlds whose layout has the same kinds of shards (pp, dp > 1 and tp = 8: 128 ... 4096); W = 1 has
whole tensors, tp = 8 adds inner-dim shards and dp > 1 cuts FSDP's strided pieces into ranges, steps
of the layout's kind rather than of the world size.

**LocalTensorMode** (``torch.distributed._local_tensor``, one process holding every rank's shard):
seconds per tensor of ``tinit.nn.init.trunc_normal_`` on a DTensor ``Shard(0)`` of a
``--rows`` x ``--cols`` shard per rank, world 2 ... 128, beside torch's own DTensor ``normal_`` in
the same mode; both write every simulated rank, so they grow with W.

Before timing, each configuration's output is checked: the fake-PG rank's shards are finite and
inside the recipe's bounds, and every simulated rank's shard equals the single-process fill sliced
by torch's ``distribute_tensor``. tests/test_scale.py checks the same topology's values rank by rank.
"""

from __future__ import annotations

import argparse
import copy
import math
import random
import statistics
import sys
import time
from dataclasses import dataclass

import _env
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor, Shard, distribute_tensor
from torch.distributed.tensor.debug import _clear_sharding_prop_cache
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)
from torch.testing._internal.distributed.fake_pg import FakeStore

import tinit

FAKE_WORLDS = (1, 8, 64, 128, 512, 1024, 4096)
LOCAL_WORLDS = (2, 4, 8, 16, 32, 64, 128)
SLOPE_TARGET = 0.10

# torchtitan's Llama tensor-parallel plan for one layer (its parallelize_llama), minus the input and
# output re-layouts of the forward pass, which place no parameter.
TP_PLAN = {
    "attention_norm": SequenceParallel(),
    "attention.wq": ColwiseParallel(),
    "attention.wk": ColwiseParallel(),
    "attention.wv": ColwiseParallel(),
    "attention.wo": RowwiseParallel(),
    "ffn_norm": SequenceParallel(),
    "feed_forward.w1": ColwiseParallel(),
    "feed_forward.w2": RowwiseParallel(),
    "feed_forward.w3": ColwiseParallel(),
}


@dataclass(frozen=True)
class Shapes:
    """``nn.Linear`` weight shapes (out, in) of one layer, the norm width and the vocabulary rows
    (``vocab`` 0: no embedding, final norm or output head)."""

    n_layers: int
    wq: tuple[int, int]
    wkv: tuple[int, int]
    wo: tuple[int, int]
    w13: tuple[int, int]
    w2: tuple[int, int]
    norm: int
    vocab: int = 0
    dim: int = 0


def llama_shapes(dim: int, n_heads: int, n_kv_heads: int, n_layers: int, ffn_dim: int, vocab: int) -> Shapes:
    """A Llama-3 shape (grouped-query attention: ``n_kv_heads`` k/v heads of ``dim // n_heads``)."""
    head = dim // n_heads
    return Shapes(
        n_layers,
        wq=(n_heads * head, dim),
        wkv=(n_kv_heads * head, dim),
        wo=(dim, n_heads * head),
        w13=(ffn_dim, dim),
        w2=(dim, ffn_dim),
        norm=dim,
        vocab=vocab,
        dim=dim,
    )


def fixed_shard_shapes(dp: int, tp: int, rows: int, cols: int, n_layers: int) -> Shapes:
    """Global shapes whose every local shard under ``TP_PLAN`` + FSDP on (dp, tp) is ``rows`` x ``cols``
    (a norm: ``rows``): colwise weights shard dim 0 over tp then dp, rowwise ones dim 1 over tp and
    dim 0 over dp, a sequence-parallel norm (replicated on tp) dim 0 over dp."""
    colwise, rowwise = (tp * dp * rows, cols), (dp * rows, tp * cols)
    return Shapes(n_layers, wq=colwise, wkv=colwise, wo=rowwise, w13=colwise, w2=rowwise, norm=dp * rows, dim=cols)


def _linear(shape: tuple[int, int]) -> nn.Linear:
    return nn.Linear(shape[1], shape[0], bias=False)


class Attention(nn.Module):
    def __init__(self, s: Shapes):
        super().__init__()
        self.wq, self.wk, self.wv, self.wo = _linear(s.wq), _linear(s.wkv), _linear(s.wkv), _linear(s.wo)


class FeedForward(nn.Module):
    def __init__(self, s: Shapes):
        super().__init__()
        self.w1, self.w2, self.w3 = _linear(s.w13), _linear(s.w2), _linear(s.w13)


class TransformerBlock(nn.Module):
    def __init__(self, s: Shapes):
        super().__init__()
        self.attention, self.feed_forward = Attention(s), FeedForward(s)
        self.attention_norm, self.ffn_norm = nn.RMSNorm(s.norm), nn.RMSNorm(s.norm)


class Transformer(nn.Module):
    """torchtitan's Llama parameter names: ``tok_embeddings``, ``layers`` (a ModuleDict keyed "0", "1",
    ... so a pipeline stage keeps the global FQNs), ``norm``, ``output``."""

    def __init__(self, s: Shapes):
        super().__init__()
        self.tok_embeddings = nn.Embedding(s.vocab, s.dim) if s.vocab else None
        self.layers = nn.ModuleDict({str(i): TransformerBlock(s) for i in range(s.n_layers)})
        self.norm = nn.RMSNorm(s.dim) if s.vocab else None
        self.output = nn.Linear(s.dim, s.vocab, bias=False) if s.vocab else None


def pipeline_part(model: Transformer, stage: int, stages: int) -> Transformer:
    """torchtitan's pipeline split: a deep copy of ``model`` with the other stages' layers deleted (an
    equal run of layers per stage), the embedding only on the first stage, norm and head only on the
    last; the names of what is kept do not change."""
    part = copy.deepcopy(model)
    per = len(model.layers) // stages
    for key in list(part.layers):
        if not stage * per <= int(key) < (stage + 1) * per:
            del part.layers[key]
    if stage != 0:
        part.tok_embeddings = None
    if stage != stages - 1:
        part.norm = part.output = None
    return part


def parallelize(part: Transformer, mesh) -> Transformer:
    """``TP_PLAN`` on ``mesh["tp"]`` per layer (embedding rowwise, head colwise, as torchtitan), then FSDP2
    ``fully_shard`` on ``mesh["dp"]`` per layer and on the part: TP weights become (``_StridedShard(0)``,
    ``Shard(0)``) or (``Shard(0)``, ``Shard(1)``), norms (``Shard(0)``, ``Replicate()``)."""
    tp, dp = mesh["tp"], mesh["dp"]
    top = {}
    if part.tok_embeddings is not None:
        top["tok_embeddings"] = RowwiseParallel()
    if part.output is not None:
        top["output"] = ColwiseParallel()
    if top:
        parallelize_module(part, tp, top)
    for layer in part.layers.values():
        parallelize_module(layer, tp, TP_PLAN)
        fully_shard(layer, mesh=dp)
    fully_shard(part, mesh=dp)
    return part


def mesh_shape(world: int) -> tuple[int, int, int]:
    """(pp, dp, tp) of a world: tp = min(8, world), pp = min(8, world // tp), dp the rest."""
    tp = min(8, world)
    pp = min(8, world // tp)
    return pp, world // (pp * tp), tp


_EXCEPTHOOK = sys.excepthook  # init_process_group wraps it (a "[rank<r>]" prefix) each time


def fake_world(rank: int, world: int) -> None:
    """This process as ``rank`` of a fake process group of ``world`` ranks (the previous one destroyed,
    DTensor's sharding-propagation caches cleared: they key by a mesh equal on every rank)."""
    if dist.is_initialized():
        dist.destroy_process_group()
    _clear_sharding_prop_cache()
    sys.excepthook = _EXCEPTHOOK
    dist.init_process_group("fake", rank=rank, world_size=world, store=FakeStore())


def rank_part(meta_parts: list[Transformer], world: int):
    """(the current rank's part, wrapped, still on meta; its (pp, dp, tp) mesh) under the fake PG."""
    mesh = init_device_mesh("cpu", mesh_shape(world), mesh_dim_names=("pp", "dp", "tp"))
    stage = mesh.get_coordinate()[0]
    return parallelize(copy.deepcopy(meta_parts[stage]), mesh["dp", "tp"]), mesh


ALLOCATION: dict[int, list[float]] = {}  # world -> seconds of torch's to_empty per sample, for the table


def _fake_samples(args, rng: random.Random) -> dict[int, list[float]]:
    """{world: seconds per rank, one per round}, the worlds interleaved in each round."""
    parts = {}
    for world in args.worlds:
        pp, dp, tp = mesh_shape(world)
        with torch.device("meta"):
            model = Transformer(fixed_shard_shapes(dp, tp, args.rows, args.cols, args.layers * pp))
        parts[world] = [pipeline_part(model, stage, pp) for stage in range(pp)]
    samples = {world: [] for world in args.worlds}
    allocation = ALLOCATION
    allocation.update({world: [] for world in args.worlds})
    for round_ in range(args.rounds + 1):  # round 0 warms up and validates
        for world in args.worlds:
            fake_world(rng.randrange(world), world)
            part, _ = rank_part(parts[world], world)
            n_layers = args.layers * mesh_shape(world)[0]
            # materialised first, as torchtitan does (``to_empty``): torch's allocation of DTensor
            # parameters compares meshes (``DeviceMesh.__eq__`` over every rank) per parameter, a
            # cost of torch's that any init pays; timed apart from tinit's write
            start = time.perf_counter()
            part.to_empty(device="cpu")
            allocated = time.perf_counter() - start
            start = time.perf_counter()
            specs = tinit.init_model_(part, "gpt2", seed=0, n_layers=n_layers, d_model=args.cols)
            elapsed = time.perf_counter() - start
            if round_ == 0:
                _check_fake(part, specs, args, world)
            else:
                samples[world].append(elapsed)
                allocation[world].append(allocated)
    dist.destroy_process_group()
    return samples


def _check_fake(part, specs, args, world: int) -> None:
    """Every local shard of the rank's part is ``rows`` x ``cols`` (a norm ``rows``) and holds what its
    spec says: its constant, or finite values of the spec's std (within 10 %: 4096 samples)."""
    by_name = {p.name: p.spec for p in specs}
    for name, param in part.named_parameters():
        local, spec = param.to_local().detach(), by_name[name]
        if tuple(local.shape) not in ((args.rows, args.cols), (args.rows,)):
            raise AssertionError(f"world {world}: {name} has a local shard of {tuple(local.shape)}")
        if spec.constant is not None:
            if not bool((local == spec.constant).all()):
                raise AssertionError(f"world {world}: {name} is not the constant {spec.constant}")
        else:
            _env.check_values(local, -math.inf, math.inf, f"world {world} {name}", std=spec.std, rel=0.1)


def _local_mode_samples(args) -> dict[int, tuple[list[float], list[float]]]:
    """{world: (tinit seconds per tensor, torch normal_ seconds per tensor)}, worlds interleaved."""
    from torch.distributed._local_tensor import LocalTensorMode

    samples = {world: ([], []) for world in args.local_worlds}
    generator = torch.Generator()
    for round_ in range(args.rounds + 1):
        for world in args.local_worlds:
            fake_world(0, world)
            with LocalTensorMode(world) as mode:
                mesh = init_device_mesh("cpu", (world,))
                shape = (world * args.rows, args.cols)
                local = mode.rank_map(lambda _: torch.empty(args.rows, args.cols))
                tensor = DTensor.from_local(
                    local, mesh, [Shard(0)], run_check=False, shape=shape, stride=(args.cols, 1)
                )
                start = time.perf_counter()
                tinit.nn.init.trunc_normal_(tensor, std=0.02, a=-0.04, b=0.04, generator=generator.manual_seed(0))
                middle = time.perf_counter()
                tensor.normal_(0, 0.02)
                end = time.perf_counter()
                if round_ == 0:
                    _check_local_mode(tensor, mesh, shape, world)
                else:
                    samples[world][0].append(middle - start)
                    samples[world][1].append(end - middle)
    dist.destroy_process_group()
    return samples


def _check_local_mode(tensor, mesh, shape, world: int) -> None:
    """tinit's write again, then every simulated rank's shard against the dense fill sliced by torch."""
    tinit.nn.init.trunc_normal_(tensor, std=0.02, a=-0.04, b=0.04, generator=torch.Generator().manual_seed(0))
    dense = torch.empty(shape)
    tinit.nn.init.trunc_normal_(dense, std=0.02, a=-0.04, b=0.04, generator=torch.Generator().manual_seed(0))
    expected = distribute_tensor(dense, mesh, [Shard(0)], src_data_rank=None)._local_tensor._local_tensors
    for rank, shard in tensor._local_tensor._local_tensors.items():
        if not torch.equal(shard, expected[rank]):
            raise AssertionError(f"LocalTensorMode world {world}: rank {rank}'s shard differs from the dense slice")


def slope(worlds, medians) -> float:
    """Rise of the least-squares line of ``medians`` against log2(world) from the first world to the
    last, over the line's value at the first."""
    xs = [math.log2(w) for w in worlds]
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(medians)
    var = sum((x - mean_x) ** 2 for x in xs)
    beta = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, medians, strict=True)) / var if var else 0.0
    at_first = mean_y + beta * (xs[0] - mean_x)
    return beta * (xs[-1] - xs[0]) / at_first


def _report(args, fake, local) -> tuple[str, dict]:
    lines = [f"# Per-rank init time against the world size ({args.rounds} interleaved rounds)", ""]
    env = _env.environment()
    lines += [
        (
            f"- {env['cpu_model']} ({env['cpu_simd']}), {env['logical_cpus']} logical CPUs, "
            f"{env['torch_threads']} torch threads; load average {_env.load_average()}"
        ),
        (
            f"- torch {env['torch']}, tinit {env['tinit']}, python {env['python']}; "
            f"commit {env['git_commit']}{' (uncommitted changes)' if env['git_dirty'] else ''}; {env['date']}"
        ),
        "",
    ]
    payload = {"rows": args.rows, "cols": args.cols, "layers_per_stage": args.layers, "rounds": args.rounds}
    if fake:
        medians = [statistics.median(fake[w]) for w in args.worlds]
        rise = slope(args.worlds, medians) if len(args.worlds) > 1 else 0.0
        lines += [
            (
                f"Fake process group, one rank's part ({args.layers} layers, every local shard "
                f"{args.rows} x {args.cols}), `tinit.init_model_(part, 'gpt2')` after `part.to_empty(device='cpu')`:"
            ),
            "",
            "| world | (pp, dp, tp) | median s/rank | min | max | torch `to_empty` before it, median s |",
            "| ---: | --- | ---: | ---: | ---: | ---: |",
        ]
        lines += [
            f"| {w} | {mesh_shape(w)} | {m:.4f} | {min(fake[w]):.4f} | {max(fake[w]):.4f} "
            f"| {statistics.median(ALLOCATION[w]) if ALLOCATION.get(w) else float('nan'):.4f} |"
            for w, m in zip(args.worlds, medians, strict=True)
        ]
        verdict = "within" if rise <= SLOPE_TARGET else "OVER"
        lines += [
            "",
            f"slope {args.worlds[0]} -> {args.worlds[-1]}: {rise:+.1%} ({verdict} the {SLOPE_TARGET:.0%} target)",
        ]
        payload["fake_pg"] = {"samples_s": fake, "medians_s": dict(zip(args.worlds, medians, strict=True))}
        payload["fake_pg"]["slope"] = rise
        # With pp, dp > 1 and tp = 8 every world has the same kinds of shards (colwise dim 0, rowwise
        # inner dim, FSDP's strided dim 0 cut into several ranges); world 1 has whole tensors, tp = 8
        # adds inner-dim shards, dp > 1 cuts FSDP's strided pieces: those steps change the layout's
        # kind, not only the world size.
        sharded = [(w, m) for w, m in zip(args.worlds, medians, strict=True) if min(mesh_shape(w)) > 1]
        if len(sharded) > 1:
            same = slope([w for w, _ in sharded], [m for _, m in sharded])
            verdict = "within" if same <= SLOPE_TARGET else "OVER"
            lines.append(
                f"slope {sharded[0][0]} -> {sharded[-1][0]}, the same layout kinds (pp, dp > 1, tp = 8): {same:+.1%} "
                f"({verdict} the {SLOPE_TARGET:.0%} target)"
            )
            payload["fake_pg"]["slope_same_kinds"] = same
    if local:
        lines += [
            "",
            f"LocalTensorMode, one `Shard(0)` DTensor of {args.rows} x {args.cols} per rank (seconds per tensor):",
            "",
            "| world | tinit trunc_normal_ median | min | max | torch normal_ median |",
            "| ---: | ---: | ---: | ---: | ---: |",
        ]
        for w in args.local_worlds:
            ours, theirs = local[w]
            lines.append(
                f"| {w} | {statistics.median(ours):.4f} | {min(ours):.4f} | {max(ours):.4f} "
                f"| {statistics.median(theirs):.4f} |"
            )
        payload["local_tensor_mode"] = {w: {"tinit_s": local[w][0], "torch_normal_s": local[w][1]} for w in local}
    return "\n".join(lines) + "\n", payload


def _worlds(text: str) -> tuple[int, ...]:
    return tuple(int(w) for w in text.split(",") if w)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--worlds", type=_worlds, default=FAKE_WORLDS, help="fake-PG world sizes ('' skips)")
    parser.add_argument("--local-worlds", type=_worlds, default=LOCAL_WORLDS, help="LocalTensorMode world sizes")
    parser.add_argument("--rows", type=int, default=16, help="rows of every local shard")
    parser.add_argument("--cols", type=int, default=256, help="columns of every local shard")
    parser.add_argument("--layers", type=int, default=4, help="layers per pipeline stage")
    parser.add_argument("--seed", type=int, default=0, help="seed of the ranks drawn")
    parser.add_argument("--save", action="store_true", help="write bench/results/<date>_<commit>_scale.{md,json}")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    fake = _fake_samples(args, random.Random(args.seed)) if args.worlds else {}
    local = _local_mode_samples(args) if args.local_worlds else {}
    report, payload = _report(args, fake, local)
    print(report)
    if args.save:
        _env.write_report(_env.REPO / "bench" / "results", _env.environment(), "_scale", report, payload)


if __name__ == "__main__":
    main()
