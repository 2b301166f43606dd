"""``import tinit`` loads none of torch's heavy optional parts: dynamo (1.5 s), DTensor (1.4 s),
Triton, nor tinit's tools; the features that need them import them when used. The time itself is
``bench/bench_import.py``'s."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("torch._dynamo", "torch.distributed.tensor", "torch.distributed._local_tensor", "triton", "tinit.tools")


def _loaded_after(code: str) -> dict[str, bool]:
    probe = f"import sys\n{code}\nimport json\nprint(json.dumps({{m: m in sys.modules for m in {HEAVY!r}}}))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_import_tinit_loads_none_of_the_heavy_modules():
    loaded = _loaded_after("import tinit")
    assert not any(loaded.values()), [m for m, on in loaded.items() if on]


def test_a_fill_loads_none_of_them_either():
    code = (
        "import torch, tinit\n"
        "w = torch.empty(64, 64)\n"
        "tinit.trunc_normal_(w, std=0.02, a=-0.04, b=0.04)\n"
        "tinit.nn.init.normal_(w)\n"
        "tinit.init_model_(torch.nn.Linear(8, 8), 'normal', seed=0)\n"
    )
    loaded = _loaded_after(code)
    assert not any(loaded.values()), [m for m, on in loaded.items() if on]


@pytest.mark.parametrize("module", ["torch.distributed.tensor", "torch._dynamo"])
def test_the_lazy_lookups_still_see_them_once_imported(module):
    """A DTensor is recognised (tinit.sharding.is_dtensor) once torch.distributed.tensor is imported
    after tinit; a compiled nn.init call still runs eagerly once dynamo is loaded after tinit."""
    if module == "torch.distributed.tensor":
        code = (
            "import torch, tinit\n"
            "from torch.distributed.tensor import DTensor, DeviceMesh, Replicate\n"
            "import torch.distributed as dist\n"
            "dist.init_process_group('gloo', store=dist.HashStore(), rank=0, world_size=1)\n"
            "mesh = DeviceMesh('cpu', [0])\n"
            "t = DTensor.from_local(torch.empty(4, 4), mesh, [Replicate()])\n"
            "assert tinit.sharding.is_dtensor(t) and not tinit.sharding.is_dtensor(torch.empty(1))\n"
            "dist.destroy_process_group()\n"
        )
    else:
        code = (
            "import torch, tinit\n"
            "w = torch.empty(16, 16)\n"
            "f = torch.compile(lambda t: tinit.nn.init.normal_(t, std=0.5), backend='eager')\n"
            "torch.manual_seed(3)\n"
            "f(w)\n"
            "ref = torch.empty(16, 16)\n"
            "torch.manual_seed(3)\n"
            "tinit.nn.init.normal_(ref, std=0.5)\n"
            "assert torch.equal(w, ref)\n"
        )
    loaded = _loaded_after(code)
    assert loaded[module]
