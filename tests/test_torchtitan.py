"""torchtitan's own models, pipeline split and parallelize code under ``patch_torch_init(seed=0, model=parts)``.

torchtitan (0.3.0) initialises parameters by ``Module.init_states``, which calls the
``functools.partial(nn.init.trunc_normal_ / normal_, ...)`` entries of each sub-config's
``param_init``; a pipeline stage calls it on its own model part, whose parameters keep their global
FQNs (``pipeline_llm``'s deep-copy-and-delete split). Under the name-keyed patch every call is keyed
by the parameter's canonical FQN and its elements' positions in the global tensor, so every layout's
gathered state dict must equal, bit for bit, the oracle: the whole model, unwrapped, initialised in
this process by the same ``init_states`` under the same patch.

Models: the Llama-3 "debugmodel" as torchtitan ships it, and the Qwen3 "debugmodel_moe" at reduced
size (``titan_workers.MOE_*``). Layouts, built by torchtitan's own ``ParallelDims``,
``pipeline_llm`` and the model spec's ``parallelize_fn`` (``spmd_backend="partial_dtensor"``: DTensor
on the model-parallel axes; the ``torchtitan.distributed.parallel_dims`` module's ``device_type`` is
set to "cpu", since torchtitan picks "cuda" on a host without a GPU), on real gloo process groups of
1, 2 and 4 spawned ranks (three launches): FSDP2 on 1, 2, 4 ranks; TP 2; PP 2 and 4 stages; EP 2
(experts ``Shard(0)``); FSDP2 x TP2; PP2 x FSDP2; torch.compile (torchtitan's ``apply_compile``,
backend "aot_eager", which compiles lazily: nothing is traced by ``init_states``) and full activation
checkpointing (torchtitan's ``FullAC``) as ``parallelize_fn`` applies them. The negative: without
``model=`` (the call-number rule) the PP split gives other values than the one-process build.
"""

from __future__ import annotations

import json
import socket
import warnings

import pytest
import torch
import torch.distributed as dist

if not (dist.is_available() and dist.is_gloo_available()):
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)
try:  # the workers import these by name
    import torchtitan.distributed.pipeline_parallel
    import torchtitan.models.llama3
    import torchtitan.models.qwen3  # noqa: F401
except Exception as exc:  # noqa: BLE001  the reason is printed in the skip
    pytest.skip(f"torchtitan does not import here ({type(exc).__name__}: {exc})", allow_module_level=True)

import titan_workers
import torch.multiprocessing as mp
from titan_workers import Layout

import tinit

pytestmark = pytest.mark.dist

LLAMA, MOE = "llama3", "qwen3_moe"
#: world size -> the layouts one spawn of that many ranks runs, one after another
LAYOUTS = {
    1: [Layout(LLAMA), Layout(MOE, ac=True, compile=True)],
    2: [
        Layout(LLAMA, dp_shard=2),
        Layout(LLAMA, tp=2),
        Layout(LLAMA, pp=2),
        Layout(LLAMA, pp=2, keyed=False),
        Layout(MOE, dp_shard=2, ep=2),
        Layout(MOE, pp=2, ac=True, compile=True),
    ],
    4: [
        Layout(LLAMA, dp_shard=4),
        Layout(LLAMA, pp=4),
        Layout(LLAMA, dp_shard=2, tp=2, ac=True, compile=True),
        Layout(LLAMA, dp_shard=2, pp=2),
        Layout(MOE, dp_shard=2, tp=2, ep=2),
    ],
}
KEYED = [layout for layouts in LAYOUTS.values() for layout in layouts if layout.keyed]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _spawn(world: int, layouts: list[Layout], tmp_path_factory):
    """The output folder of one spawn of ``world`` ranks running ``layouts`` (a second spawn if one crashes)."""
    for attempt in (1, 2):
        out = tmp_path_factory.mktemp(f"world{world}")
        try:
            mp.spawn(titan_workers.worker, args=(world, _free_port(), str(out), layouts), nprocs=world)
            return out
        except Exception as exc:  # a port taken between pick and bind: retried once
            if attempt == 2:
                raise
            warnings.warn(f"world {world}: {type(exc).__name__}: {exc}", RuntimeWarning, stacklevel=1)
    raise AssertionError("unreachable")


def _merge(out, layout: Layout) -> dict:
    """The stages' records of ``layout`` merged by canonical FQN; a parameter held by two stages is an error."""
    merged = {"state": {}, "placements": {}, "raw": [], "compiled": 0, "unkeyed": 0}
    files = sorted(out.glob(f"{layout.name}.rank*.pt"))
    assert len(files) == layout.pp, f"{layout.name}: {len(files)} stage records, expected {layout.pp}"
    for path in files:
        record = torch.load(path)
        overlap = set(record["state"]) & set(merged["state"])
        assert not overlap, f"{layout.name}: {sorted(overlap)[:3]} in two stages"
        for key in ("state", "placements"):
            merged[key].update(record[key])
        merged["raw"] += record["raw"]
        merged["compiled"] += record["compiled"]
        merged["unkeyed"] += record["unkeyed"]
    return merged


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """layout name -> its merged record, from one spawn per world size."""
    records = {}
    for world, layouts in LAYOUTS.items():
        out = _spawn(world, layouts, tmp_path_factory)
        failures = json.loads((out / "results.json").read_text())
        for layout in layouts:
            assert not failures[layout.name], f"{layout.name}:\n" + "\n".join(failures[layout.name])
            records[layout.name] = _merge(out, layout)
    return records


@pytest.fixture(scope="module")
def oracle():
    """(model, keyed) -> the one-process unwrapped build's parameters under the same patch."""
    return {(m, k): titan_workers.unwrapped(m, keyed=k) for m in (LLAMA, MOE) for k in (True, False)}


def _sharded(placement, axes: tuple[str, ...], dim: int) -> bool:
    """Whether one of ``axes`` (of size > 1) shards tensor dim ``dim`` (``Shard``, or FSDP's ``_StridedShard``)."""
    return any(name in axes and size > 1 and "Shard" in kind and d == dim for name, size, kind, d in placement)


def _assert_layout_applied(layout: Layout, record: dict) -> None:
    """The layout is what it says: FSDP/TP/EP DTensor placements, AC and compile wrappers (stages: ``_merge``)."""
    placements = record["placements"]
    efsdp = layout.dp_shard * layout.tp // layout.ep  # torchtitan's FSDP degree over the experts under EP
    for name, placement in placements.items():
        expert = layout.ep > 1 and ".inner_experts." in name
        # apply_fsdp_to_decoder runs at every degree: FSDP2 on one rank is a DTensor on a size-1 mesh dim
        assert any(d[0] in ("fsdp", "efsdp") for d in placement), f"{layout.name}: {name} {placement}"
        if (efsdp if expert else layout.dp_shard) > 1:
            assert _sharded(placement, ("efsdp",) if expert else ("fsdp",), 0), f"{layout.name}: {name} {placement}"
    if layout.tp > 1:
        assert _sharded(placements["layers.0.attention.qkv_linear.wqkv.weight"], ("tp",), 0), placements
        assert _sharded(placements["layers.0.attention.wo.weight"], ("tp",), 1), placements
    if layout.ep > 1:
        experts = [n for n in placements if ".inner_experts." in n]
        assert experts and all(_sharded(placements[n], ("ep",), 0) for n in experts), placements
    wrapped = [n for n in record["raw"] if "_checkpoint_wrapped_module" in n]
    assert bool(wrapped) == layout.ac, f"{layout.name}: {len(wrapped)} checkpoint-wrapped names"
    assert (record["compiled"] > 0) == layout.compile, f"{layout.name}: {record['compiled']} compiled modules"


def _assert_bits_equal(actual: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, msg=lambda m: f"{what}: {m}")
    assert torch.equal(actual.view(torch.int32), expected.view(torch.int32)), f"{what}: bit patterns"


@pytest.mark.parametrize("layout", KEYED, ids=[layout.name for layout in KEYED])
def test_layout_equals_unwrapped_build(runs, oracle, layout):
    """Every parameter bit-identical, the fused QKV under PP included: torchtitan's
    ``_fused_qkv_param_init`` draws q, k and v into ``t.new_empty`` temporaries of the parameter,
    which the patch keys by the parameter's name (docs/stream.md), so no call is numbered."""
    record = runs[layout.name]
    _assert_layout_applied(layout, record)
    expected = oracle[layout.model, True]
    state = record["state"]
    assert sorted(state) == sorted(expected)
    for name, value in expected.items():
        _assert_bits_equal(state[name], value, f"{name}, {layout.name}")
    assert record["unkeyed"] == 0, f"{layout.name}: {record['unkeyed']} calls took the call-number rule"


def test_call_number_rule_breaks_the_pipeline_split(runs, oracle):
    """Without ``model=``, stage 1's first call is number 0: its parameters get other values than in one
    process, while stage 0 (whose calls are numbered as in one process) agrees; with ``model=`` both agree."""
    state = runs[Layout(LLAMA, pp=2, keyed=False).name]["state"]
    expected = oracle[LLAMA, False]
    stage0 = [n for n in expected if n.startswith(("tok_embeddings.", "layers.0.", "layers.1.", "layers.2."))]
    random = [n for n in expected if not bool((expected[n] == expected[n].flatten()[0]).all())]
    differ = sorted(n for n in random if not torch.equal(state[n], expected[n]))
    assert differ == sorted(set(random) - set(stage0)), differ
    keyed = runs[Layout(LLAMA, pp=2).name]["state"]
    assert all(torch.equal(keyed[n], oracle[LLAMA, True][n]) for n in random)


@pytest.mark.parametrize("model", [LLAMA, MOE])
def test_oracle_is_tinit_stream_of_each_name(oracle, model):
    """The oracle's values are ``tinit.nn.init``'s for the canonical FQN's stream, not the call order's."""
    expected = oracle[model, True]
    name = "layers.1.attention.wo.weight"
    std = 0.02 / (2 * 2) ** 0.5 if model == LLAMA else 0.02 / (2 * titan_workers.MOE_LAYERS) ** 0.5
    fill = torch.empty_like(expected[name])
    if model == LLAMA:  # torchtitan's depth_scaled_std(0.02, layer_id=1), nn.init's default bounds (-2, 2)
        tinit.nn.init.KEYED["trunc_normal_"](fill, 0.0, std, -2.0, 2.0, seed=0, stream=tinit.stream_for(name))
    else:  # Qwen3's residual-output normal
        tinit.nn.init.KEYED["normal_"](fill, 0.0, std, seed=0, stream=tinit.stream_for(name))
    torch.testing.assert_close(expected[name], fill, rtol=0, atol=0)
