"""``python -m tinit.tools.info``: which backends can run here and why not, the build, the devices.

Cheap enough for a bug report or the first line of a GPU check: it imports
torch and tinit, tries to import Triton and the Triton kernel, reads
/proc/cpuinfo and asks ``nvcc --version``; it launches nothing.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path

import torch

import tinit
from tinit import _build, _torch_floor, dispatch, ops

__all__ = [
    "backend_info",
    "build_info",
    "cpu_engine",
    "cpu_flags",
    "cpu_model",
    "device_info",
    "main",
    "nvcc_version",
    "report",
    "triton_version",
]


def cpu_flags() -> set[str]:
    """The CPU's feature flags from /proc/cpuinfo (empty where it is unreadable)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cpu_engine() -> dict[str, object]:
    """The CPU engine of the native kernels (csrc/cpu/isa.h), from the extension itself.

    Returns:
        {"chosen": "scalar" | "avx2" | "avx512" | None, "available": [...], "error": str | None}:
        chosen is None, with the reason in error, when the extension is missing or refuses
        (``TINIT_CPU_ISA`` naming an engine this CPU lacks, a failed load-time self-test).
    """
    if not ops.native_available():
        return {"chosen": None, "available": [], "error": "native extension not loaded"}
    try:
        chosen, error = ops.cpu_isa(), None
    except RuntimeError as exc:
        chosen, error = None, str(exc).splitlines()[0]
    return {"chosen": chosen, "available": ops.cpu_isas(), "error": error}


def nvcc_version() -> str | None:
    """``release X.Y`` of the nvcc on PATH (or under $CUDA_HOME), or None when there is none."""
    nvcc = shutil.which("nvcc")
    if nvcc is None and os.environ.get("CUDA_HOME"):
        candidate = Path(os.environ["CUDA_HOME"]) / "bin" / "nvcc"
        nvcc = str(candidate) if candidate.exists() else None
    if nvcc is None:
        return None
    try:
        out = subprocess.run([nvcc, "--version"], check=False, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{nvcc} (version unknown: {exc})"
    release = next(
        (line.split("release", 1)[1].split(",")[0].strip() for line in out.splitlines() if "release" in line), "unknown"
    )
    return f"{release} ({nvcc})"


def triton_version() -> str | None:
    """The installed Triton's version, or None when it does not import."""
    try:
        import triton
    except ImportError:
        return None
    return getattr(triton, "__version__", "unknown")


def build_info() -> dict[str, object]:
    """Versions and build facts.

    Returns:
        tinit, python, torch and torch CUDA versions, whether the native
        extension loaded and has its CUDA kernels, the Triton version (None
        when missing), nvcc (None when not found), the CPU engine (cpu_engine),
        the variant ("source", or a wheel's "cpu", "cu12", "cu13"), the CUDA release
        and torch a wheel was built with, whether the extension is built on torch's stable ABI
        (``_C.abi3.so``) and the oldest torch such a build loads on.
    """
    return {
        "tinit": tinit.__version__,
        "variant": _build.VARIANT,
        "variant_cuda": _build.CUDA,
        "built_with_torch": _build.TORCH,
        "stable_abi": ".abi3." in (_torch_floor.extension_file() or ""),
        "torch_floor": _torch_floor.TORCH_FLOOR,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "native_extension": ops.native_available(),
        "native_error": ops.native_load_error(),
        "native_cuda_kernels": ops.native_has_cuda(),
        "triton": triton_version(),
        "nvcc": nvcc_version(),
        "cpu_isa": cpu_engine(),
    }


def backend_info() -> dict[str, dict[str, object]]:
    """Per backend: whether it is usable here and why not, and what it fills.

    Returns:
        {name: {"available": bool, "reason": str | None, "devices": [...],
        "dtypes": [...], "summary": str, "device_reasons": {device type: reason}}};
        device_reasons says, for a small tensor of each local device type, why
        the backend could not fill it (None when it could).
    """
    probes = {"cpu": torch.empty(1)}
    if torch.cuda.is_available():
        probes["cuda"] = torch.empty(1, device="cuda")
    out = {}
    for name, backend in dispatch.BACKENDS.items():
        reason = backend.install_reason()
        out[name] = {
            "available": reason is None,
            "reason": reason,
            "devices": list(backend.devices) or ["any"],
            "dtypes": [str(d).removeprefix("torch.") for d in backend.dtypes],
            "summary": backend.summary,
            "device_reasons": {dev: backend.why_not(t) for dev, t in probes.items()},
        }
    return out


def device_info() -> list[dict[str, object]]:
    """The CPU and every visible CUDA device (name, capability, memory, SMs)."""
    devices = [{"type": "cpu", "name": cpu_model(), "threads": torch.get_num_threads(), "logical_cpus": os.cpu_count()}]
    if torch.cuda.is_available():
        for index in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(index)
            devices.append(
                {
                    "type": "cuda",
                    "index": index,
                    "name": props.name,
                    "capability": f"{props.major}.{props.minor}",
                    "memory_gib": round(props.total_memory / 2**30, 1),
                    "multiprocessors": props.multi_processor_count,
                }
            )
    return devices


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, else ``platform.processor()``."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _variant_line(build: dict[str, object]) -> str:
    """Which build this is (a checkout's or a wheel's variant) and which torch releases it loads on."""
    if build["variant"] == "source":
        made = "built from source"
    else:
        cuda = f" (CUDA {build['variant_cuda']})" if build["variant_cuda"] else ""
        made = f"{build['variant']} wheel{cuda}, compiled against torch {build['built_with_torch']}"
    if build["stable_abi"]:
        return f"{made}; stable ABI: loads on torch >= {build['torch_floor']}"
    return f"{made}; full C++ API: loads on the torch release it was compiled against"


def report() -> str:
    """The whole report as text (what ``python -m tinit.tools.info`` prints)."""
    build = build_info()
    lines = [
        "tinit backends (auto order: "
        + "; ".join(f"{dev} tensors {' > '.join(order)}" for dev, order in dispatch.AUTO_ORDER.items())
        + ")"
    ]
    for name, info in backend_info().items():
        state = "available" if info["available"] else "unavailable"
        lines.append(f"  {name:<7} {state:<12} {info['summary']}")
        if info["reason"]:
            lines.append(f"          why not: {info['reason']}")
        for dev, why in info["device_reasons"].items():
            if info["available"]:
                lines.append(f"          {dev} tensors: {'yes' if why is None else 'no, ' + why}")
    env_backend = os.environ.get("TINIT_BACKEND")
    if env_backend:
        lines.append(f"  TINIT_BACKEND={env_backend} replaces 'auto'")
    engine = build["cpu_isa"]
    lines += [
        "build",
        f"  tinit {build['tinit']}, python {build['python']}",
        "  " + _variant_line(build),
        f"  torch {build['torch']}, torch CUDA {build['torch_cuda'] or 'none (CPU-only build)'}",
        f"  native extension: {'loaded' if build['native_extension'] else 'missing: ' + str(build['native_error'])}"
        + (
            f", CUDA kernels {'built' if build['native_cuda_kernels'] else 'not built'}"
            if build["native_extension"]
            else ""
        ),
        f"  triton: {build['triton'] or 'missing'}",
        f"  nvcc: {build['nvcc'] or 'not found'}",
        f"  CPU engine: {engine['chosen'] or 'none (' + str(engine['error']) + ')'}"
        + (
            ", two-sided entries compiled (TINIT_CPU_PORTABLE=1)"
            if os.environ.get("TINIT_CPU_PORTABLE", "").startswith("1")
            else ", two-sided entries hand-vectorised"
            if engine["chosen"] in ("avx2", "avx512")
            else ""
        )
        + (f" (available: {', '.join(engine['available'])}; TINIT_CPU_ISA overrides)" if engine["available"] else ""),
        "devices",
    ]
    for dev in device_info():
        if dev["type"] == "cpu":
            lines.append(
                f"  cpu: {dev['name']} ({dev['logical_cpus']} logical CPUs, torch uses {dev['threads']} threads)"
            )
        else:
            lines.append(
                f"  cuda:{dev['index']}: {dev['name']}, compute capability {dev['capability']}, "
                f"{dev['memory_gib']} GiB, {dev['multiprocessors']} SMs"
            )
    if not torch.cuda.is_available():
        lines.append("  cuda: none visible")
    return "\n".join(lines)


def main() -> None:
    """Print ``report()``."""
    print(report())


if __name__ == "__main__":
    main()
