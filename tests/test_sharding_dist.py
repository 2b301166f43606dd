"""Sharded initialisation across real processes: DTensor layouts, FSDP2 and peak memory, on a CPU mesh over gloo.

Every layout of a weight (Shard(0), Shard(1), Replicate over 1, 2 and 4
ranks, 2-D meshes, uneven and empty shards) must assemble with
``full_tensor()`` into exactly the single-process ``trunc_normal_at_`` fill;
an FSDP2 ``fully_shard`` model (also HSDP and FSDP2 x tensor parallel on a
2x2 mesh) initialised by ``init_model_`` must gather into exactly the
unsharded model's weights; and filling a shard must not
allocate anything near the global tensor.

The checks run in processes started by ``torch.multiprocessing.spawn``
(tests/dist_workers.py): one spawn per world size serves all its layout,
Partial and FSDP2 tests (a module-scoped cache), and each memory test gets
fresh processes of its own.
"""

from __future__ import annotations

import json
import socket
import warnings

import pytest
import torch.distributed as dist

if not (dist.is_available() and dist.is_gloo_available()):
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

# dist_workers imports torch.distributed.tensor and fsdp: only once they are known to work
import dist_workers
import torch.multiprocessing as mp
from dist_workers import Layout

MiB = 2**20
WORLDS = (1, 2, 4)
SHAPES = [((4096, 4096), "f32"), ((1000, 37), "f32"), ((1000, 37), "bf16"), ((3, 37), "f32"), ((5, 7, 9), "f32")]
ONE_D = [("S0",), ("S1",), ("R",)]
TWO_D = [("S0", "S1"), ("R", "S1"), ("S1", "S1"), ("S0", "S0"), ("S1", "S0")]
LAYOUTS = {
    world: [Layout(shape, dtype, (world,), placements) for shape, dtype in SHAPES for placements in ONE_D]
    + (
        [Layout(shape, dtype, (2, 2), placements) for shape, dtype in SHAPES for placements in TWO_D]
        if world == 4
        else []
    )
    for world in WORLDS
}
PARTIALS = {
    1: [],
    2: [Layout((8, 6), "f32", (2,), ("P",))],
    4: [Layout((8, 6), "f32", (2, 2), ("S0", "P")), Layout((8, 6), "bf16", (4,), ("P",))],
}
FSDP_RUNS = [
    ("gpt2", True),
    ("gpt2", False),
    ("small_init", True),
    ("normal", False),
    ("xavier_normal", True),
    ("xavier_uniform", False),
]
MEMORY_WORLD, MEMORY_SHAPE, MEMORY_SLACK = 2, (8192, 8192), 32 * MiB


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _spawn(worker, world: int, *args) -> None:
    mp.spawn(worker, args=(world, _free_port(), *args), nprocs=world, join=True)


@pytest.fixture(scope="module")
def world_results(tmp_path_factory):
    """world -> {check id: [failure messages]} from one ``dist_workers.run_world`` spawn per world size."""
    cache = {}

    def results(world: int) -> dict:
        # A second spawn when the first fails to start or crashes: a free port
        # picked here can be taken before the workers bind it on a busy
        # machine. Wrong values are results, not crashes, and are not retried.
        attempts = (1, 2) if world not in cache else ()
        for attempt in attempts:
            out = tmp_path_factory.mktemp(f"world{world}")
            try:
                _spawn(dist_workers.run_world, world, str(out), LAYOUTS[world], PARTIALS[world], FSDP_RUNS)
                cache[world] = json.loads((out / dist_workers.RESULTS).read_text())
                break
            except Exception as exc:  # noqa: BLE001  every test of this world reports it
                cache[world] = f"the world-{world} workers failed (attempt {attempt}): {type(exc).__name__}: {exc}"
                if attempt == 1:
                    warnings.warn(cache[world], RuntimeWarning, stacklevel=1)
        if isinstance(cache[world], str):
            pytest.fail(cache[world])
        return cache[world]

    return results


def _assert_passed(results: dict, check: str) -> None:
    assert check in results, f"the workers reported no result for {check!r}"
    if results[check]:
        pytest.fail(f"{check}:\n" + "\n".join(results[check]), pytrace=False)


@pytest.mark.parametrize(
    "world, layout", [pytest.param(w, layout, id=f"w{w}-{layout.id}") for w in WORLDS for layout in LAYOUTS[w]]
)
def test_layout_matches_single_process_fill(world_results, world, layout):
    """full_tensor() and each local shard bit-identical to trunc_normal_at_ on one process; flat_index as DTensor's."""
    _assert_passed(world_results(world), layout.id)


@pytest.mark.parametrize(
    "world, layout", [pytest.param(w, layout, id=f"w{w}-{layout.id}") for w in WORLDS for layout in PARTIALS[w]]
)
def test_partial_placement_refused(world_results, world, layout):
    """A Partial DTensor: trunc_normal_at_ and fill_ raise ValueError naming it and leave the local tensor as it was."""
    _assert_passed(world_results(world), layout.id)


@pytest.mark.parametrize("world", WORLDS, ids=[f"w{w}" for w in WORLDS])
@pytest.mark.parametrize(
    "scheme, grouped", [pytest.param(s, g, id=f"{s}-{'grouped' if g else 'ungrouped'}") for s, g in FSDP_RUNS]
)
def test_fsdp2_init_model_matches_unsharded(world_results, world, scheme, grouped):
    """init_model_ on a meta-built, fully_shard-ed Llama: full_tensor() and FSDP's unshard() equal the plain model."""
    _assert_passed(world_results(world), f"fsdp-{scheme}-{'grouped' if grouped else 'ungrouped'}")


@pytest.mark.parametrize("world", WORLDS, ids=[f"w{w}" for w in WORLDS])
def test_fsdp2_grouped_equals_ungrouped(world_results, world):
    _assert_passed(world_results(world), "fsdp-gpt2-grouped-vs-ungrouped")


@pytest.mark.parametrize("kind", dist_workers.TWO_D_RUNS)
def test_two_d_mesh_init_model_matches_unsharded(world_results, kind):
    """HSDP (Replicate, Shard(0)) and FSDP2 x tensor parallel (_StridedShard) on a 2x2 mesh: the unsharded weights."""
    _assert_passed(world_results(4), kind)


@pytest.mark.parametrize("dim", [1, 0], ids=["Shard(1)", "Shard(0)"])
def test_fill_peak_memory_stays_near_shard(tmp_path, dim):
    """Peak RSS during trunc_normal_at_ on a 256 MiB DTensor grows by about the rank's shard, not the global size."""
    _spawn(dist_workers.measure_fill_memory, MEMORY_WORLD, str(tmp_path), MEMORY_SHAPE, dim)
    records = json.loads((tmp_path / dist_workers.RESULTS).read_text())
    assert len(records) == MEMORY_WORLD
    assert records[0]["shard_bytes"] + MEMORY_SLACK < records[0]["global_bytes"] * 3 // 4, "bound too loose to test"
    for r in records:
        increase = r["peak_after"] - r["rss_before"]
        masked = r["peak_before"] - r["rss_before"]
        numbers = (
            f"Shard({dim}) of {MEMORY_SHAPE} float32 over {MEMORY_WORLD} ranks, rank {r['rank']}: RSS before "
            f"{r['rss_before'] / MiB:.1f} MiB, peak before {r['peak_before'] / MiB:.1f} MiB, peak after "
            f"{r['peak_after'] / MiB:.1f} MiB; increase {increase / MiB:.1f} MiB for a shard of "
            f"{r['shard_bytes'] / MiB:.1f} MiB (global {r['global_bytes'] / MiB:.1f} MiB)"
        )
        print(numbers)
        assert not r["value_failures"], f"{numbers}\nvalues wrong: {r['value_failures']}"
        assert masked < MEMORY_SLACK, f"{numbers}\nan earlier peak {masked / MiB:.1f} MiB above the RSS could hide it"
        assert increase >= 0.9 * r["shard_bytes"], f"{numbers}\nthe fill did not touch its shard's pages?"
        assert increase < r["shard_bytes"] + MEMORY_SLACK, f"{numbers}\nmore than shard + {MEMORY_SLACK // MiB} MiB"
