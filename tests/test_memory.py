"""``tinit.tools.memory``: the bytes a meta model takes, and the memory figure read from a proc and
cgroup tree (built in a temporary directory, so every layout is tried on any machine).

Oracles: the bytes torch allocates for the materialised model; the figures written into the tree.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tinit.tools import memory

GIB = 1 << 30


def _tree(tmp_path: Path, *, cgroup: str, mounts: list[tuple[str, str, str, str]], meminfo_kib: int | None) -> Path:
    """A proc tree: ``/proc/self/cgroup`` as given, ``mountinfo`` with (fstype, root, mount point, options)."""
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "cgroup").write_text(cgroup)
    lines = [
        f"{30 + i} 23 0:{28 + i} {root} {point} rw,relatime - {fstype} {fstype} {options}"
        for i, (fstype, root, point, options) in enumerate(mounts)
    ]
    (proc / "self" / "mountinfo").write_text("\n".join(["22 1 8:1 / / rw - ext4 /dev/sda1 rw", *lines]) + "\n")
    if meminfo_kib is not None:
        (proc / "meminfo").write_text(f"MemTotal:       99999999 kB\nMemAvailable:   {meminfo_kib} kB\n")
    return proc


def _group(folder: Path, files: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)


def test_cgroup_v2_takes_the_tightest_limit_on_the_path(tmp_path):
    """A parent's memory.max binds too; the working set leaves out inactive_file (reclaimable cache)."""
    mount = tmp_path / "cg2"
    _group(mount, {"cgroup.controllers": "cpu io memory pids\n"})
    _group(
        mount / "pod",
        {
            "memory.max": f"{4 * GIB}\n",
            "memory.current": f"{3 * GIB}\n",
            "memory.stat": f"anon {2 * GIB}\ninactive_file {GIB}\n",
        },
    )
    _group(mount / "pod" / "job", {"memory.max": "max\n", "memory.current": f"{GIB}\n"})
    proc = _tree(tmp_path, cgroup="0::/pod/job\n", mounts=[("cgroup2", "/", str(mount), "rw")], meminfo_kib=64 << 20)
    got = memory.available("cpu", proc)
    assert got.bytes == 4 * GIB - (3 * GIB - GIB)
    assert str(mount / "pod" / "memory.max") in got.source and "working set" in got.source


def test_cgroup_v2_namespace_root_and_meminfo_when_lower(tmp_path):
    """A container's cgroup namespace: /proc/self/cgroup says "/", the mount shows the container's own
    group; MemAvailable wins when it is the smaller figure."""
    mount = tmp_path / "cg2"
    _group(mount, {"cgroup.controllers": "memory\n", "memory.max": f"{16 * GIB}\n", "memory.current": "0\n"})
    proc = _tree(tmp_path, cgroup="0::/\n", mounts=[("cgroup2", "/", str(mount), "rw")], meminfo_kib=1 << 20)
    assert memory.available("cpu", proc) == memory.Available(GIB, f"MemAvailable of {proc / 'meminfo'}")
    (proc / "meminfo").write_text(f"MemAvailable: {32 << 20} kB\n")
    assert memory.available("cpu", proc).bytes == 16 * GIB


def test_cgroup_v1_memory_hierarchy_when_v2_has_no_memory_controller(tmp_path):
    """The hybrid layout of this project's own hosts: cgroup2 mounted without the memory controller,
    cgroup v1's memory hierarchy mounted from its root; the path is placed under the mount point."""
    unified, v1 = tmp_path / "unified", tmp_path / "memory"
    _group(unified, {"cgroup.controllers": "cpu\n"})
    _group(v1, {"memory.limit_in_bytes": "9223372036854771712\n", "memory.usage_in_bytes": f"{GIB}\n"})
    _group(
        v1 / "api" / "x1",
        {
            "memory.limit_in_bytes": f"{2 * GIB}\n",
            "memory.usage_in_bytes": f"{GIB}\n",
            "memory.stat": f"inactive_file 5\ntotal_inactive_file {GIB // 2}\n",
        },
    )
    proc = _tree(
        tmp_path,
        cgroup="4:memory:/api/x1\n0::/\n",
        mounts=[("cgroup2", "/", str(unified), "rw"), ("cgroup", "/", str(v1), "rw,memory")],
        meminfo_kib=64 << 20,
    )
    got = memory.available("cpu", proc)
    assert got.bytes == 2 * GIB - GIB // 2 and got.source.startswith(f"cgroup v1 {v1 / 'api' / 'x1'}")


def test_no_figure_at_all_is_none(tmp_path):
    proc = _tree(tmp_path, cgroup="", mounts=[], meminfo_kib=None)
    assert memory.available("cpu", proc) is None


def test_cuda_figure_is_mem_get_info(monkeypatch):
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (123 * GIB, 141 * GIB))
    got = memory.available("cuda:0")
    assert got.bytes == 123 * GIB and "torch.cuda.mem_get_info" in got.source


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_model_bytes_is_what_torch_allocates(dtype):
    """Ties once, integer buffers at their own size, float tensors at ``dtype``'s: against the bytes of
    the materialised model's distinct storages."""

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(50, 12)
            self.head = torch.nn.Linear(12, 50, bias=False)
            self.head.weight = self.emb.weight
            self.norm = torch.nn.LayerNorm(12)
            self.register_buffer("steps", torch.zeros(7, dtype=torch.int64))
            self.register_buffer("scale", torch.ones(3))

    with torch.device("meta"):
        meta = Net()
    real = Net().to(dtype=dtype)
    tensors = [*real.parameters(), *real.buffers()]
    allocated = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}
    assert memory.model_bytes(meta, dtype) == sum(allocated.values())


def test_describe():
    assert memory.describe(512) == "512 bytes"
    assert memory.describe(3 * GIB + GIB // 2) == "3,758,096,384 bytes (3.5 GiB)"
