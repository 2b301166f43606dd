"""Workers for tests/test_sharding_dist.py, run in processes started by ``torch.multiprocessing.spawn``.

Each worker is a module-level function (spawn pickles it by name) called as
``worker(rank, world, port, out_dir, ...)``: it joins a gloo process group on
127.0.0.1:``port``, runs its checks on a CPU device mesh and has rank 0 write
the outcome to ``out_dir`` as JSON, which the test in the parent process
asserts on. A check's local steps run on every rank under ``_on_every_rank``,
which gathers each rank's failure message, so one failing check is reported
under its own name and every rank still reaches the same collectives.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import resource
import sys
from datetime import timedelta
from pathlib import Path
from typing import NamedTuple

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed import tensor as dtensor
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard
from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

import tinit
from tinit.sharding import ShardLayout

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
# An asymmetric window, a non-zero stream and offset: every rank's shard must
# take logical element g from stream index OFFSET + g of (SEED, STREAM).
FILL = {"mean": 0.1, "std": 0.5, "a": -0.6, "b": 0.9, "seed": 2024, "stream": 7, "offset": 13}
MODEL_SEED = 123
RESULTS = "results.json"


class Layout(NamedTuple):
    """A float tensor of ``shape`` and ``dtype`` ("f32", "bf16") laid out over a mesh of ``mesh_shape``.

    ``placements`` has one code per mesh dim: "S<d>" for Shard(d), "R" for
    Replicate(), "P" for Partial().
    """

    shape: tuple[int, ...]
    dtype: str
    mesh_shape: tuple[int, ...]
    placements: tuple[str, ...]

    @property
    def id(self) -> str:
        return (
            f"{'x'.join(map(str, self.shape))}-{self.dtype}-mesh{'x'.join(map(str, self.mesh_shape))}-"
            f"{','.join(self.placements)}"
        )


def _placement(code: str):
    if code == "R":
        return Replicate()
    if code == "P":
        return Partial()
    return Shard(int(code[1:]))


@contextlib.contextmanager
def _process_group(rank: int, world: int, port: int):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)  # several ranks share two cores
    # full_tensor() of (Shard(d), Shard(d)) logs advice to flatten the mesh on every rank
    logging.getLogger("torch.distributed.tensor._redistribute").setLevel(logging.ERROR)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=120))
    try:
        yield
    finally:
        dist.destroy_process_group()


def _on_every_rank(step) -> list[str]:
    """Run ``step()`` here; every rank's failure as "rank r: message" (the same list on every rank)."""
    try:
        step()
        message = None
    except Exception as exc:  # noqa: BLE001  reported by name in the parent, like a failed assertion
        message = f"{type(exc).__name__}: {exc}"
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, message)
    return [f"rank {rank}: {m}" for rank, m in enumerate(gathered) if m is not None]


def _write_results(out_dir: str, results: dict) -> None:
    """Rank 0 writes the results once every rank is past its last collective; then every rank
    leaves at once by ``os._exit(0)``: on torch 2.13 gloo's destructors at interpreter exit
    occasionally abort ("terminate called without an active exception", SIGABRT), which
    would fail a run whose results are already complete."""
    dist.barrier()
    if dist.get_rank() == 0:
        (Path(out_dir) / RESULTS).write_text(json.dumps(results, indent=1))
    dist.barrier()  # rank 0's file is written before anyone leaves
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(0)


def _assert_bits_equal(actual: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    """Equal values (reported with where and by how much they differ) and equal bit patterns."""
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=False, msg=lambda m: f"{what}: {m}")
    bits = {2: torch.int16, 4: torch.int32, 8: torch.int64}[actual.element_size()]
    if not torch.equal(actual.contiguous().view(bits), expected.contiguous().view(bits)):
        raise AssertionError(f"{what}: equal values but different bit patterns (signed zeros)")


# --- DTensor layouts --------------------------------------------------------------------------------------------


def _check_layout(layout: Layout, mesh, reference: torch.Tensor) -> list[str]:
    """Fill a NaN-initialised DTensor of ``layout``; compare with the single-process fill ``reference``.

    Checks ``full_tensor()``, the local shard against the reference at
    ``ShardLayout.flat_index()``, and that index against DTensor's own
    distribution of ``arange(numel)``.
    """
    placements = [_placement(code) for code in layout.placements]
    tensor = dtensor.full(
        layout.shape, float("nan"), dtype=DTYPES[layout.dtype], device_mesh=mesh, placements=placements
    )
    failures = _on_every_rank(lambda: tinit.trunc_normal_at_(tensor, **FILL))
    if failures:
        return failures
    gathered = tensor.full_tensor()
    index = torch.arange(math.prod(layout.shape)).view(layout.shape)
    expected_index = dtensor.distribute_tensor(index, mesh, placements).to_local()

    def compare():
        _assert_bits_equal(gathered, reference, "full_tensor() vs single-process trunc_normal_at_")
        flat = ShardLayout.of_dtensor(tensor).flat_index()
        torch.testing.assert_close(
            flat,
            expected_index,
            rtol=0,
            atol=0,
            msg=lambda m: f"ShardLayout.flat_index() vs distribute_tensor(arange): {m}",
        )
        _assert_bits_equal(
            tensor.to_local(),
            reference.reshape(-1)[flat.reshape(-1)].view(flat.shape),
            "local shard vs single-process fill at the shard's global indices",
        )

    def drop_in():
        # Every rank draws the key, its shard empty or not, so the ranks' generators stay in step.
        bounds = {k: FILL[k] for k in ("mean", "std", "a", "b")}
        torch.manual_seed(MODEL_SEED)
        tinit.trunc_normal_(again, **bounds)
        state = torch.get_rng_state()
        torch.manual_seed(MODEL_SEED)
        key = int(torch.empty((), dtype=torch.int64).random_())
        assert torch.equal(state, torch.get_rng_state()), (
            "trunc_normal_ did not draw exactly one key on a rank with a local shard of "
            f"{tuple(again.to_local().shape)}"
        )
        tinit.trunc_normal_at_(tensor, **bounds, seed=key)
        _assert_bits_equal(again.to_local(), tensor.to_local(), "trunc_normal_ vs trunc_normal_at_ with its key")

    again = dtensor.full(
        layout.shape, float("nan"), dtype=DTYPES[layout.dtype], device_mesh=mesh, placements=placements
    )
    return _on_every_rank(compare) + _on_every_rank(drop_in)


def _check_partial(layout: Layout, mesh) -> list[str]:
    """A DTensor with a Partial placement: trunc_normal_at_ and fill_ raise ValueError and write nothing."""
    placements = [_placement(code) for code in layout.placements]
    local_shape = compute_local_shape_and_global_offset(layout.shape, mesh, placements)[0]
    local = torch.arange(math.prod(local_shape), dtype=DTYPES[layout.dtype]).view(local_shape)
    before = local.clone()
    tensor = DTensor.from_local(
        local,
        mesh,
        placements,
        run_check=False,
        shape=layout.shape,
        stride=torch.empty(layout.shape, device="meta").stride(),
    )

    def refused():
        for name, call in (
            ("trunc_normal_at_", lambda: tinit.trunc_normal_at_(tensor, **FILL)),
            ("fill_", lambda: tinit.fill_(tensor, "normal", role="mlp_in", seed=FILL["seed"])),
        ):
            try:
                call()
            except ValueError as exc:
                if "Partial" not in str(exc):
                    raise AssertionError(f"{name}: ValueError does not name the Partial placement: {exc}") from exc
            else:
                raise AssertionError(f"{name} accepted a DTensor with placements {tensor.placements}")
            _assert_bits_equal(tensor.to_local(), before, f"local tensor after the refused {name}")

    return _on_every_rank(refused)


# --- FSDP2 ------------------------------------------------------------------------------------------------------


class _Attention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.q_proj, self.k_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.v_proj, self.o_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)


class _MLP(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.gate_proj, self.up_proj = nn.Linear(dim, hidden, bias=False), nn.Linear(dim, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dim, bias=False)


class _DecoderLayer(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.self_attn, self.mlp = _Attention(dim), _MLP(dim, hidden)
        self.input_layernorm, self.post_attention_layernorm = nn.RMSNorm(dim), nn.RMSNorm(dim)


class _Decoder(nn.Module):
    def __init__(self, n_layers, dim, hidden, vocab):
        super().__init__()
        # A padding row inside the last rank's shard: init_model_ zeroes it shard by shard.
        self.embed_tokens = nn.Embedding(vocab, dim, padding_idx=vocab - 51)
        self.layers = nn.ModuleList(_DecoderLayer(dim, hidden) for _ in range(n_layers))
        self.norm = nn.RMSNorm(dim)


class TinyLlama(nn.Module):
    """Hugging Face Llama's parameter names (``model.layers.{i}.self_attn.q_proj``, ..., ``lm_head``).

    The vocabulary (251, prime) makes FSDP's dim-0 shards uneven.
    """

    def __init__(self, n_layers=3, dim=64, hidden=172, vocab=251):
        super().__init__()
        self.model = _Decoder(n_layers, dim, hidden, vocab)
        self.lm_head = nn.Linear(dim, vocab, bias=False)


def _fsdp_model(mesh) -> TinyLlama:
    """TinyLlama built on the meta device, ``fully_shard`` per layer then the root, materialised on CPU."""
    with torch.device("meta"):
        model = TinyLlama()
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    model.to_empty(device="cpu")
    return model


def _fsdp_unsharded(model: TinyLlama) -> dict[str, torch.Tensor]:
    """The parameters as FSDP's own all-gather assembles them (unshard, copy, reshard)."""
    modules = [*model.model.layers, model]
    for module in modules:
        module.unshard()
    values = {name: param.detach().clone() for name, param in model.named_parameters()}
    for module in modules:
        module.reshard()
    return values


def _check_fsdp(mesh, scheme: str, grouped: bool) -> tuple[list[str], dict[str, torch.Tensor]]:
    """init_model_ on the FSDP2 model vs on an unsharded TinyLlama in this process; (failures, gathered values)."""
    model = _fsdp_model(mesh)
    failures = _on_every_rank(lambda: tinit.init_model_(model, scheme, seed=MODEL_SEED, grouped=grouped))
    if failures:
        return failures, {}
    with torch.no_grad():
        gathered = {name: param.full_tensor() for name, param in model.named_parameters()}
    unsharded = _fsdp_unsharded(model)
    reference = TinyLlama()
    tinit.init_model_(reference, scheme, seed=MODEL_SEED, grouped=grouped)
    expected = {name: param.detach() for name, param in reference.named_parameters()}

    def compare():
        for name, param in model.named_parameters():
            if not (isinstance(param, DTensor) and tuple(param.placements) == (Shard(0),)):
                raise AssertionError(f"{name}: not an FSDP2 Shard(0) DTensor ({type(param).__name__})")
        if list(gathered) != list(expected):
            raise AssertionError(f"parameter names differ: {list(gathered)} vs {list(expected)}")
        for name, value in expected.items():
            _assert_bits_equal(gathered[name], value, f"{name}: full_tensor() vs unsharded init_model_")
            _assert_bits_equal(unsharded[name], value, f"{name}: FSDP unshard() vs unsharded init_model_")

    return _on_every_rank(compare), gathered


TWO_D_RUNS = ("hsdp", "fsdp-tp")


def _check_two_d(mesh, kind: str, scheme: str = "gpt2") -> list[str]:
    """HSDP (fully_shard on a 2-D mesh: Replicate, Shard(0)) or FSDP2 x tensor parallel (colwise q/k/v/gate/up,
    rowwise o/down on "tp", then fully_shard on "dp": _StridedShard(0) + Shard(0), Shard(0) + Shard(1)) of a
    meta-built TinyLlama; full_tensor() of every parameter equals init_model_ of the unsharded model."""
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    with torch.device("meta"):
        model = TinyLlama()
    if kind == "hsdp":
        for layer in model.model.layers:
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
    else:
        plan = {f"self_attn.{n}": ColwiseParallel() for n in ("q_proj", "k_proj", "v_proj")}
        plan |= {
            "self_attn.o_proj": RowwiseParallel(),
            "mlp.down_proj": RowwiseParallel(),
            "mlp.gate_proj": ColwiseParallel(),
            "mlp.up_proj": ColwiseParallel(),
        }
        for layer in model.model.layers:
            parallelize_module(layer, mesh["tp"], plan)
            fully_shard(layer, mesh=mesh["dp"])
        fully_shard(model, mesh=mesh["dp"])
    model.to_empty(device="cpu")
    failures = _on_every_rank(lambda: tinit.init_model_(model, scheme, seed=MODEL_SEED))
    if failures:
        return failures
    placements = {name: tuple(repr(p) for p in param.placements) for name, param in model.named_parameters()}
    with torch.no_grad():
        gathered = {name: param.full_tensor() for name, param in model.named_parameters()}
    reference = TinyLlama()
    tinit.init_model_(reference, scheme, seed=MODEL_SEED)

    def compare():
        seen = {p for ps in placements.values() for p in ps}
        wanted = {"Replicate()", "Shard(dim=0)"} if kind == "hsdp" else {"Shard(dim=1)", "Shard(dim=0)"}
        if not wanted <= seen or (kind == "fsdp-tp" and not any("StridedShard" in p for p in seen)):
            raise AssertionError(f"{kind}: unexpected placements {sorted(seen)}")
        for name, param in reference.named_parameters():
            _assert_bits_equal(gathered[name], param.detach(), f"{kind} {name} {placements[name]}: full_tensor()")

    return _on_every_rank(compare)


def _compare_runs(runs: dict[bool, dict[str, torch.Tensor]]) -> None:
    if not runs[True] or not runs[False]:
        raise AssertionError("a run failed (see its own result)")
    if list(runs[True]) != list(runs[False]):
        raise AssertionError("the grouped and ungrouped runs gathered different parameters")
    for name, value in runs[False].items():
        _assert_bits_equal(runs[True][name], value, f"{name}: grouped vs ungrouped init_model_")


def _mesh(meshes: dict, shape: tuple[int, ...]):
    """One CPU DeviceMesh per shape (creating one is a collective: every rank asks in the same order)."""
    if shape not in meshes:
        meshes[shape] = init_device_mesh("cpu", shape)
    return meshes[shape]


def run_world(
    rank: int,
    world: int,
    port: int,
    out_dir: str,
    layouts: list[Layout],
    partials: list[Layout],
    fsdp_runs: list[tuple[str, bool]],
) -> None:
    """Every layout, Partial and FSDP2 check of one world size; rank 0 writes {check id: [failures]}.

    Ids: ``Layout.id`` for layouts and partials, "fsdp-<scheme>-<grouped|ungrouped>"
    per FSDP run and "fsdp-<scheme>-grouped-vs-ungrouped" when a scheme runs both ways.
    """
    with _process_group(rank, world, port):
        meshes = {}
        references = {}
        results = {}
        for layout in layouts:
            mesh = _mesh(meshes, layout.mesh_shape)
            key = (layout.shape, layout.dtype)
            if key not in references:
                references[key] = tinit.trunc_normal_at_(torch.empty(layout.shape, dtype=DTYPES[layout.dtype]), **FILL)
            results[layout.id] = _check_layout(layout, mesh, references[key])
        references.clear()
        for layout in partials:
            results[layout.id] = _check_partial(layout, _mesh(meshes, layout.mesh_shape))
        mesh = _mesh(meshes, (world,))
        by_scheme = {}
        for scheme, grouped in fsdp_runs:
            failures, gathered = _check_fsdp(mesh, scheme, grouped)
            results[f"fsdp-{scheme}-{'grouped' if grouped else 'ungrouped'}"] = failures
            by_scheme.setdefault(scheme, {})[grouped] = gathered
        for scheme, runs in by_scheme.items():
            if len(runs) == 2:
                results[f"fsdp-{scheme}-grouped-vs-ungrouped"] = _on_every_rank(lambda runs=runs: _compare_runs(runs))
        if world == 4:
            mesh_2d = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
            for kind in TWO_D_RUNS:
                results[kind] = _check_two_d(mesh_2d, kind)
        _write_results(out_dir, results)


# --- peak memory ------------------------------------------------------------------------------------------------


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _peak_rss_bytes() -> int:
    """The resident-set high-water mark (VmHWM), which ``_reset_peak_rss`` can lower; else ru_maxrss."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def _reset_peak_rss() -> None:
    """Lower the high-water mark to the current RSS (Linux >= 4.0: "5" into clear_refs), so a peak of the
    process's set-up (imports, process group) cannot hide the fill's; a no-op where not permitted."""
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
    except OSError:
        pass


def _spot_check(tensor, shape) -> None:
    """The first and last local rows against 1-D single-process fills of those global rows."""
    local = tensor.to_local()
    local_shape, offsets = compute_local_shape_and_global_offset(shape, tensor.device_mesh, tensor.placements)
    for row in (0, local_shape[0] - 1):
        g = offsets[0] + row
        full_row = tinit.trunc_normal_at_(torch.empty(shape[1]), **{**FILL, "offset": FILL["offset"] + g * shape[1]})
        _assert_bits_equal(local[row], full_row[offsets[1] : offsets[1] + local_shape[1]], f"global row {g}")


def measure_fill_memory(rank: int, world: int, port: int, out_dir: str, shape: tuple[int, int], dim: int) -> None:
    """RSS before and peak RSS after trunc_normal_at_ on an uninitialised float32 Shard(``dim``) DTensor.

    Run in fresh processes, one placement each, so that no earlier peak hides
    part of the increase. Rank 0 writes one record per rank, with a spot
    check of the written values.
    """
    with _process_group(rank, world, port):
        mesh = init_device_mesh("cpu", (world,))
        tensor = dtensor.empty(shape, dtype=torch.float32, device_mesh=mesh, placements=[Shard(dim)])
        _reset_peak_rss()
        rss_before, peak_before = _rss_bytes(), _peak_rss_bytes()
        tinit.trunc_normal_at_(tensor, **FILL)
        peak_after = _peak_rss_bytes()
        failures = _on_every_rank(lambda: _spot_check(tensor, shape))
        record = {
            "rank": rank,
            "rss_before": rss_before,
            "peak_before": peak_before,
            "peak_after": peak_after,
            "shard_bytes": tensor.to_local().nbytes,
            "global_bytes": math.prod(shape) * 4,
            "value_failures": [f for f in failures if f.startswith(f"rank {rank}:")],
        }
        gathered = [None] * world
        dist.all_gather_object(gathered, record)
        _write_results(out_dir, gathered)
