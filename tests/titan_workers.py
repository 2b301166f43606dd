"""Workers for tests/test_torchtitan.py: torchtitan's own models, split and parallelize code.

Run by ``torch.multiprocessing.spawn`` as ``worker(rank, world, port, out_dir, layouts)``, in the
style of tests/dist_workers.py (whose process-group and result helpers they use). Each layout is
applied by torchtitan's functions on a fresh meta-device model: ``ParallelDims.build_mesh`` (its
module's ``device_type`` set to "cpu": torchtitan picks "cuda" on a host without a GPU),
``pipeline_llm`` (the deep-copy-and-delete split, global FQNs kept) and the model spec's
``parallelize_fn`` (TP/EP by ``Module.parallelize``, ``ActivationCheckpointing.apply``,
``apply_compile``, ``apply_fsdp_to_decoder``). Then every model part is materialised on CPU and
initialised by its own ``init_states`` under ``patch_torch_init(seed=SEED, model=parts)``; each
parameter is gathered with ``full_tensor()`` and the ranks holding coordinate 0 on every axis but
``pp`` save their stage's parameters by FQN, so the parent merges the stages.
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from pathlib import Path

import torch
from dist_workers import _on_every_rank, _process_group, _write_results
from torch.distributed.tensor import DTensor

import tinit

SEED = 0
#: the Qwen3 MoE "debugmodel_moe" at reduced size (8 layers x 64 experts of 768 x 256 would be 1.2 GB a rank)
MOE_LAYERS, MOE_EXPERTS, MOE_HIDDEN = 4, 8, 64


@dataclasses.dataclass(frozen=True)
class Layout:
    """One parallel layout: torchtitan's degrees plus the training techniques applied."""

    model: str  # "llama3" | "qwen3_moe"
    dp_shard: int = 1
    tp: int = 1
    pp: int = 1
    ep: int = 1
    ac: bool = False
    compile: bool = False
    keyed: bool = True  # False: patch_torch_init(seed) without model= (the call-number rule)

    @property
    def world(self) -> int:
        return self.dp_shard * self.tp * self.pp

    @property
    def name(self) -> str:
        degrees = (
            "x".join(
                f"{k}{v}"
                for k, v in (("fsdp", self.dp_shard), ("tp", self.tp), ("pp", self.pp), ("ep", self.ep))
                if v > 1
            )
            or "fsdp1"
        )
        extras = "".join(
            f"-{x}" for x, on in (("ac", self.ac), ("compile", self.compile), ("calls", not self.keyed)) if on
        )
        return f"{self.model}-{degrees}{extras}"


def model_spec(model: str):
    """torchtitan's ``ModelSpec``: Llama-3 "debugmodel", or Qwen3 "debugmodel_moe" at the reduced size above."""
    if model == "llama3":
        from torchtitan.models.llama3 import model_registry

        return model_registry("debugmodel")
    from torchtitan.models import qwen3

    spec = qwen3.model_registry("debugmodel_moe")
    base = spec.model
    attention = base.layers[0].attention
    layers = qwen3._build_qwen3_moe_layers(
        n_layers=MOE_LAYERS, dim=base.dim, n_heads=attention.n_heads, n_kv_heads=attention.n_kv_heads,
        head_dim=attention.head_dim, moe_hidden_dim=MOE_HIDDEN, num_experts=MOE_EXPERTS, top_k=2,
        attn_backend="flex", moe_comm_backend="standard", rope=attention.rope,
    )  # fmt: skip
    return dataclasses.replace(spec, model=dataclasses.replace(base, layers=layers))


def unwrapped(model: str, keyed: bool = True) -> dict[str, torch.Tensor]:
    """The oracle: the whole model in one process, no parallelism or wrapper, under the same patch."""
    spec = model_spec(model)
    with torch.device("meta"):
        net = spec.model.build()
    net.to_empty(device="cpu")
    with tinit.patch_torch_init(seed=SEED, **({"model": net} if keyed else {})):
        net.init_states(buffer_device=torch.device("cpu"))
    return {name: param.detach() for name, param in net.named_parameters()}


def _configs(layout: Layout):
    from torchtitan.config import CompileConfig, ParallelismConfig, TrainingConfig
    from torchtitan.distributed.activation_checkpoint import FullAC

    parallelism = ParallelismConfig(
        data_parallel_shard_degree=layout.dp_shard, tensor_parallel_degree=layout.tp,
        pipeline_parallel_degree=layout.pp, expert_parallel_degree=layout.ep,
        pipeline_parallel_schedule="1F1B", spmd_backend="partial_dtensor",
    )  # fmt: skip
    return {
        "training": TrainingConfig(local_batch_size=layout.pp, seq_len=64, mixed_precision_param="float32"),
        "parallelism": parallelism,
        "compile_config": CompileConfig(enable=layout.compile, backend="aot_eager"),
        "ac_config": FullAC.Config() if layout.ac else None,
        "dump_folder": "",
    }


def _set_sharding(layout: Layout, config) -> None:
    """What ``Decoder.Config.update_from_config`` does for these models' sharding, called directly: it
    imports ``torchtitan.trainer``, whose data loader needs ``torchdata``, not installed here."""
    if layout.model == "llama3":
        from torchtitan.models.llama3.sharding import set_llama3_sharding_config

        set_llama3_sharding_config(config, enable_sp=True)
    else:
        from torchtitan.models.qwen3.sharding import set_qwen3_sharding_config

        set_qwen3_sharding_config(config, enable_sp=True, enable_ep=layout.ep > 1)


def build_parts(layout: Layout, world: int) -> tuple[list[torch.nn.Module], object]:
    """The layout's model parts on this rank, built by torchtitan's functions, parameters still on meta."""
    import torchtitan.distributed.parallel_dims as parallel_dims_module
    from torchtitan.distributed import ParallelDims
    from torchtitan.distributed.pipeline_parallel import pipeline_llm

    parallel_dims_module.device_type = "cpu"  # torchtitan.tools.utils picks "cuda" without a GPU
    configs = _configs(layout)
    dims = ParallelDims.from_config(configs["parallelism"], world)
    dims.build_mesh()
    spec = model_spec(layout.model)
    config = spec.model
    _set_sharding(layout, config)
    with torch.device("meta"):
        model = config.build()
    if layout.pp == 1:
        return [spec.parallelize_fn(model, parallel_dims=dims, **configs)], dims
    _, parts, _, _ = pipeline_llm(
        model, parallel_dims=dims, device=torch.device("cpu"), model_config=config,
        parallelize_fn=spec.parallelize_fn, loss_fn=None, **configs,
    )  # fmt: skip
    return parts, dims


def _placement(param) -> list[tuple[str, int, str, int | None]]:
    """(mesh dim name, its size, placement class, tensor dim) of each mesh dim of a DTensor; [] for a plain tensor."""
    if not isinstance(param, DTensor):
        return []
    mesh = param.device_mesh
    names = mesh.mesh_dim_names or tuple(map(str, range(mesh.ndim)))
    return [
        (name, mesh.size(i), type(p).__name__, getattr(p, "dim", None))
        for i, (name, p) in enumerate(zip(names, param.placements, strict=True))
    ]


def _stage_record(parts) -> dict:
    """This rank's parts: canonical FQN -> gathered value and placement, the raw names, compiled blocks."""
    state, placements, raw = {}, {}, []
    with torch.no_grad():
        for part in parts:
            for name, param in part.named_parameters():
                canonical = tinit.identity.canonical_name(name)
                value = param.full_tensor() if isinstance(param, DTensor) else param
                state[canonical] = value.detach().clone()
                placements[canonical] = _placement(param)
                raw.append(name)
    compiled = sum(getattr(m, "_compiled_call_impl", None) is not None for part in parts for m in part.modules())
    return {"state": state, "placements": placements, "raw": raw, "compiled": compiled}


def _holds_stage_copy(dims) -> bool:
    """Whether this rank holds coordinate 0 on every mesh axis but ``pp`` (one copy of each stage)."""
    meshes = dims.get_all_one_dimensional_meshes()
    return all(meshes[axis].get_local_rank() == 0 for axis in ("fsdp", "tp", "ep") if axis in meshes)


def run_layout(rank: int, layout: Layout, world: int, out_dir: str) -> None:
    """Build, materialise and initialise ``layout`` here; one rank per stage saves its stage's record."""
    parts, dims = build_parts(layout, world)
    for part in parts:
        part.to_empty(device="cpu")
    keyed = {"model": parts, "warn_unkeyed": True} if layout.keyed else {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tinit.patch_torch_init(seed=SEED, **keyed):
            for part in parts:
                part.init_states(buffer_device=torch.device("cpu"))
    record = _stage_record(parts)
    record["unkeyed"] = sum("call-number rule" in str(w.message) for w in caught)
    if _holds_stage_copy(dims):
        torch.save(record, Path(out_dir) / f"{layout.name}.rank{rank}.pt")


def worker(rank: int, world: int, port: int, out_dir: str, layouts: list[Layout]) -> None:
    with _process_group(rank, world, port):
        results = {layout.name: _on_every_rank(functools.partial(run_layout, rank, layout, world, out_dir))
                   for layout in layouts}  # fmt: skip
        _write_results(out_dir, results)
