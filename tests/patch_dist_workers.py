"""Workers for tests/test_patch_dist.py: torchtitan's Llama-3 debug model under FSDP2 and ``patch_torch_init``.

Run by ``torch.multiprocessing.spawn`` as ``worker(rank, world, port, out_dir)``, in the style of
tests/dist_workers.py (whose process-group and result helpers they use): join a gloo group, build
the model on the meta device, ``fully_shard`` each block and the root on a CPU mesh of ``world``
ranks, materialise on CPU, run torchtitan's own ``init_states`` inside ``patch_torch_init(seed=SEED)``,
gather every parameter with ``full_tensor()``; rank 0 saves the gathered state dict to ``out_dir``.
"""

from __future__ import annotations

from pathlib import Path

import torch
from dist_workers import _on_every_rank, _process_group, _write_results
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor, Shard

import tinit

SEED = 0
STATE = "state.pt"


def torchtitan_debug_model():
    """torchtitan's Llama-3 "debugmodel" (dim 256, 6 layers, vocab 2048), built on the meta device."""
    from torchtitan.models.llama3 import model_registry

    with torch.device("meta"):
        return model_registry("debugmodel").model.build()


def init_unsharded(seed: int | None):
    """The debug model materialised on CPU and initialised by torchtitan's ``init_states``, in one process.

    ``seed`` None: torch's own ``torch.nn.init`` (the reference recipe); else under ``patch_torch_init(seed)``.
    """
    model = torchtitan_debug_model()
    model.to_empty(device="cpu")
    if seed is None:
        model.init_states(buffer_device=torch.device("cpu"))
    else:
        with tinit.patch_torch_init(seed=seed):
            model.init_states(buffer_device=torch.device("cpu"))
    return model


def fsdp_patched_init(rank: int, world: int, port: int, out_dir: str) -> None:
    with _process_group(rank, world, port):
        mesh = init_device_mesh("cpu", (world,))
        model = torchtitan_debug_model()
        for layer in model.layers.values():
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        model.to_empty(device="cpu")

        def init():
            with tinit.patch_torch_init(seed=SEED):
                model.init_states(buffer_device=torch.device("cpu"))
            for name, param in model.named_parameters():
                if not (isinstance(param, DTensor) and tuple(param.placements) == (Shard(0),)):
                    raise AssertionError(f"{name}: not an FSDP2 Shard(0) DTensor ({type(param).__name__})")

        failures = _on_every_rank(init)
        with torch.no_grad():
            gathered = {name: param.full_tensor().clone() for name, param in model.named_parameters()}
        if rank == 0:
            torch.save(gathered, Path(out_dir) / STATE)
        _write_results(out_dir, {"init": failures})
