"""torchtitan's own init under ``patch_torch_init(seed=0)`` on FSDP2: the same model on 1, 2 and 4 ranks.

torchtitan (0.3.0) initialises its Llama-3 parameters with ``torch.nn.init.trunc_normal_`` /
``normal_`` partials bound in its model configs, which on a sharded model draw different values
per layout; it ships a single-process "seed checkpoint" for that. Under the patch every call takes
key 0 and stream id = its call number, so the gathered FSDP2 state dict must equal, bit for bit,
the unsharded model initialised by the same code in this process, for every world size; and each
parameter must follow torchtitan's own (unpatched) recipe: two-sample KS against it.
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
try:
    import torchtitan.models.llama3  # noqa: F401  the workers import it by name
except Exception as exc:  # noqa: BLE001  the reason is printed in the skip
    pytest.skip(f"torchtitan does not import here ({type(exc).__name__}: {exc})", allow_module_level=True)

import patch_dist_workers
import torch.multiprocessing as mp
from scipy import stats

WORLDS = (1, 2, 4)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def gathered(tmp_path_factory):
    """world -> the gathered state dict of one spawn of ``fsdp_patched_init`` (a second spawn if one crashes)."""
    states = {}
    for world in WORLDS:
        for attempt in (1, 2):
            out = tmp_path_factory.mktemp(f"world{world}")
            try:
                mp.spawn(patch_dist_workers.fsdp_patched_init, args=(world, _free_port(), str(out)), nprocs=world)
                break
            except Exception as exc:  # a port taken between pick and bind: retried once
                if attempt == 2:
                    raise
                warnings.warn(f"world {world}: {type(exc).__name__}: {exc}", RuntimeWarning, stacklevel=1)
        failures = json.loads((out / "results.json").read_text())["init"]
        assert not failures, f"world {world}:\n" + "\n".join(failures)
        states[world] = torch.load(out / patch_dist_workers.STATE)
    return states


@pytest.fixture(scope="module")
def unsharded():
    model = patch_dist_workers.init_unsharded(patch_dist_workers.SEED)
    return {name: param.detach() for name, param in model.named_parameters()}


@pytest.mark.parametrize("world", WORLDS, ids=[f"w{w}" for w in WORLDS])
def test_fsdp2_gathered_state_equals_unsharded(gathered, unsharded, world):
    state = gathered[world]
    assert list(state) == list(unsharded)
    for name, value in unsharded.items():
        torch.testing.assert_close(state[name], value, rtol=0, atol=0, msg=lambda m, n=name: f"{n}, world {world}: {m}")


def test_patched_init_follows_torchtitan_recipe(unsharded):
    torch.manual_seed(0)
    reference = {n: p.detach() for n, p in patch_dist_workers.init_unsharded(None).named_parameters()}
    for name, value in unsharded.items():
        ref = reference[name]
        if bool((ref == ref.flatten()[0]).all()):  # norms' ones: a constant, untouched by the patch
            torch.testing.assert_close(value, ref, rtol=0, atol=0, msg=lambda m, n=name: f"{n}: {m}")
            continue
        ks = stats.ks_2samp(value.flatten().numpy(), ref.flatten().numpy())
        assert ks.pvalue > 1e-4, f"{name}: KS {ks.statistic:.4f} p={ks.pvalue:.1e} against torchtitan's unpatched init"
