"""How many bytes a model on the meta device will take, and how many this process may still allocate.

``tinit init`` checks the one against the other before it materialises a model, so a model too large
for the machine is a usage error with both figures, not an allocation that runs until the kernel's
OOM killer ends the process.

Where the available figure comes from, on the CPU: the smallest of

- every cgroup v2 ``memory.max`` on the path from the process's cgroup up to its mount (a limit
  higher up binds too), less that cgroup's working set: ``memory.current`` minus the
  ``inactive_file`` of its ``memory.stat``, the page cache the kernel reclaims before it fails an
  allocation (the working set the kubelet evicts on);
- the same for cgroup v1's ``memory.limit_in_bytes``, ``memory.usage_in_bytes`` and
  ``total_inactive_file``, where no v2 hierarchy has the memory controller;
- ``MemAvailable`` of ``/proc/meminfo``, the kernel's estimate of what can be allocated without
  swapping.

The process's cgroup is read from ``/proc/self/cgroup`` and placed under the hierarchy's mount point
from ``/proc/self/mountinfo`` (the mount shows the hierarchy from its own root, a container's cgroup
namespace included). On a CUDA device the figure is ``torch.cuda.mem_get_info``'s free memory.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import torch

__all__ = ["Available", "available", "describe", "model_bytes"]

PROC = Path("/proc")


@dataclass(frozen=True)
class Available:
    """Bytes this process may still allocate on a device, and where the figure was read (one line)."""

    bytes: int
    source: str


def model_bytes(model: torch.nn.Module, dtype: torch.dtype) -> int:
    """Bytes of ``model``'s parameters and buffers once materialised after ``model.to(dtype)``.

    Floating-point tensors count ``dtype``'s size per element, the others their own; a tensor held
    under two names (a tie) counts once, as ``parameters()`` and ``buffers()`` list it once.

    Args:
        model: a module, typically on the meta device (only shapes and dtypes are read).
        dtype: the floating dtype the model will be cast to.

    Returns:
        The total in bytes.
    """
    total, seen = 0, set()
    for tensor in (*model.parameters(), *model.buffers()):
        if id(tensor) in seen:
            continue
        seen.add(id(tensor))
        size = dtype.itemsize if tensor.is_floating_point() else tensor.element_size()
        total += tensor.numel() * size
    return total


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _stat(text: str | None, key: str) -> int:
    """The number after ``key`` in a ``memory.stat`` or ``/proc/meminfo`` text (0 when absent)."""
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].rstrip(":") == key:
            return int(parts[1])
    return 0


def _mounts(proc: Path) -> dict[str, tuple[str, Path]]:
    """{"v2" / "v1": (the hierarchy's root shown by the mount, the mount point)} for the cgroup
    hierarchies holding the memory controller (``/proc/self/mountinfo``)."""
    found = {}
    for line in (_read(proc / "self" / "mountinfo") or "").splitlines():
        fields, _, tail = line.partition(" - ")
        parts, tail = fields.split(), tail.split()
        if len(parts) < 5 or len(tail) < 3:
            continue
        if tail[0] == "cgroup2" and "memory" in (_read(Path(parts[4]) / "cgroup.controllers") or "").split():
            found.setdefault("v2", (parts[3], Path(parts[4])))
        elif tail[0] == "cgroup" and "memory" in tail[2].split(","):
            found.setdefault("v1", (parts[3], Path(parts[4])))
    return found


def _cgroup_dirs(proc: Path, version: str, root: str, mount: Path) -> list[Path]:
    """The process's cgroup directory of hierarchy ``version`` and its parents up to ``mount``."""
    path = None
    for line in (_read(proc / "self" / "cgroup") or "").splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, where = rest.partition(":")
        if (version == "v2" and hierarchy == "0" and controllers == "") or (
            version == "v1" and "memory" in controllers.split(",")
        ):
            path = where
    if path is None:
        return []
    relative = os.path.relpath(path, root) if path.startswith(root) else "."
    here = Path(os.path.normpath(mount / relative))
    dirs = [here]
    while here != mount and mount in here.parents:
        here = here.parent
        dirs.append(here)
    return dirs


_FILES = {
    "v2": ("memory.max", "memory.current", "inactive_file"),
    "v1": ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"),
}


def _cgroup_headroom(proc: Path) -> list[Available]:
    """The headroom of every memory-limited cgroup above the process: the v2 hierarchy's where it
    holds the memory controller, else v1's; none where neither is mounted or nothing is limited."""
    mounts = _mounts(proc)
    version = "v2" if "v2" in mounts else "v1"
    if version not in mounts:
        return []
    limit_file, usage_file, reclaimable = _FILES[version]
    found = []
    for folder in _cgroup_dirs(proc, version, *mounts[version]):
        limit, usage = _read(folder / limit_file), _read(folder / usage_file)
        if limit is None or usage is None or limit.strip() == "max":
            continue
        used = max(0, int(usage) - _stat(_read(folder / "memory.stat"), reclaimable))
        found.append(
            Available(
                max(0, int(limit) - used),
                f"cgroup {version} {folder / limit_file} ({int(limit):,} bytes) less its working set ({used:,} bytes)",
            )
        )
    return found


def available(device: str = "cpu", proc: Path = PROC) -> Available | None:
    """What this process may still allocate on ``device`` (module docstring); None when nothing says.

    Args:
        device: "cpu", or a CUDA device ("cuda", "cuda:1").
        proc: the proc file system (a test's own tree).

    Returns:
        The smallest figure with its source, or None where no figure can be read.
    """
    if torch.device(device).type == "cuda":
        free, _ = torch.cuda.mem_get_info(torch.device(device))
        return Available(int(free), f"torch.cuda.mem_get_info: free memory of {device}")
    figures = _cgroup_headroom(proc)
    meminfo = _stat((_read(proc / "meminfo") or "").replace(":", ""), "MemAvailable")
    if meminfo:
        figures.append(Available(meminfo * 1024, f"MemAvailable of {proc / 'meminfo'}"))
    return min(figures, key=lambda figure: figure.bytes, default=None)


def describe(count: int) -> str:
    """``count`` bytes as "12,345,678 bytes (11.8 GiB)"."""
    if count < 1024:
        return f"{count:,} bytes"
    unit = min(int(math.log(count, 1024)), 4)
    return f"{count:,} bytes ({count / 1024**unit:.1f} {' KMGT'[unit]}iB)"
