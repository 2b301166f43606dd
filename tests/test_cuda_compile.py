"""The CUDA kernels and bindings build with the nvcc on PATH, without a GPU or a CUDA torch.

- setup.py's CUDA_SOURCES lists every .cpp and .cu under csrc/cuda/.
- The kernels' .cu files compile for sm_90 and sm_80 (one nvcc call each, the
  flags of the extension build: --fmad=false, -O3, torch's defines).
- The launch structs' header (launch.h) compiles as host C++ without any
  torch header.
- The bindings (the .cpp files of CUDA_SOURCES), on torch's stable ABI only,
  compile with the host compiler (-Wall -Werror) for TORCH_TARGET_VERSION 2.10,
  2.11 and the installed torch's own, against the installed torch's stable
  headers and the toolkit's: a CPU-only torch does not build them, and nothing
  else here would notice a binding that no longer compiles. Linked with the
  kernels and cudart into a shared object, as the extension links them, they
  import no at::, c10:: or torch:: C++ symbol: only torch's C shims (each one
  declared by a stable header; the ones a CPU torch lacks are the CUDA shims),
  the CUDA runtime and the C/C++ runtime.
- The kernel's per-thread code (fill_blocks / philox_fill_blocks), run on the
  host by tests/cuda_host_harness.cu as an emulated grid-stride launch of a
  FillLaunch, writes
  exactly what the CPU op writes: every offset % 4, edge blocks, misaligned
  outputs (scalar stores), the raw words past a 2^32-block boundary, and
  nothing outside the tensor.
- The grouped kernels' per-thread code, run on the host by
  tests/cuda_grouped_host_harness.cu over a table built by the binding's own
  GroupPlan, writes exactly what the CPU trunc_normal_grouped_ (mixed dtypes,
  every mode, odd sizes and offsets, misaligned outputs, several emulated
  grids), trunc_normal_runs_ and philox_runs_ (shard layouts from
  tinit.sharding) write, and nothing outside the outputs; the table's size
  does not grow with the element count; the plan refuses a bad mode or
  stream range.

The device arithmetic, and whether the bindings load into a CUDA torch and
run, need a CUDA torch and a GPU (tests/test_gpu.py).

Skipped, saying so, where no nvcc exists; the C++ checks also where no g++
exists or torch ships no stable-ABI headers (before 2.10), the link check
where no nm or libcudart.so is found.
"""

from __future__ import annotations

import ast
import math
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from tinit import ops
from tinit.params import PARAM_COUNT, transform_constants

ROOT = Path(__file__).resolve().parent.parent
CUDA_DIR = ROOT / "csrc" / "cuda"
KERNEL = CUDA_DIR / "trunc_normal_kernel.cu"
GROUPED_KERNEL = CUDA_DIR / "trunc_normal_grouped_kernel.cu"
LAUNCH_HEADER = CUDA_DIR / "launch.h"
HARNESS = ROOT / "tests" / "cuda_host_harness.cu"
NVCC = shutil.which("nvcc")
# The defines torch.utils.cpp_extension adds to every nvcc call of the extension.
TORCH_NVCC_DEFINES = [
    "-D__CUDA_NO_HALF_OPERATORS__",
    "-D__CUDA_NO_HALF_CONVERSIONS__",
    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-D__CUDA_NO_HALF2_OPERATORS__",
    "--expt-relaxed-constexpr",
]
COMMON = ["-I", str(ROOT / "csrc" / "include"), "--fmad=false", "-O3", "-std=c++17"]
TIMEOUT_S = 300

pytestmark = pytest.mark.skipif(
    NVCC is None, reason="no nvcc on PATH: the CUDA compile checks need the CUDA toolkit (nvcc)"
)


def _run(cmd: list[str], what: str) -> subprocess.CompletedProcess:
    """Run a compiler; fail with its command line and stderr when it fails."""
    start = time.perf_counter()
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=TIMEOUT_S)
    elapsed = time.perf_counter() - start
    assert proc.returncode == 0, (
        f"{what} failed (exit {proc.returncode}, {elapsed:.1f} s):\n  {' '.join(cmd)}\n"
        f"--- stderr ---\n{proc.stderr}\n--- stdout ---\n{proc.stdout}"
    )
    return proc


def _cuda_include() -> Path:
    """The include folder of the toolkit that the nvcc on PATH belongs to."""
    for root in (Path(NVCC).parent.parent, Path(os.path.realpath(NVCC)).parent.parent, Path("/usr/local/cuda")):
        if (root / "include" / "cuda_runtime_api.h").exists():
            return root / "include"
    pytest.skip(f"no include/cuda_runtime_api.h beside {NVCC}")


@pytest.fixture(scope="module")
def kernel_objects(tmp_path_factory) -> dict[str, Path]:
    """Each kernel .cu compiled once, position-independent as in the extension, for both checks below."""
    folder = tmp_path_factory.mktemp("kernels")
    objects = {}
    for kernel in (KERNEL, GROUPED_KERNEL):
        obj = folder / f"{kernel.stem}.o"
        _run(
            [
                NVCC,
                "-c",
                str(kernel),
                "-o",
                str(obj),
                *COMMON,
                *TORCH_NVCC_DEFINES,
                "-Xcompiler",
                "-fPIC",
                "-gencode",
                "arch=compute_90,code=sm_90",
                "-gencode",
                "arch=compute_80,code=sm_80",
            ],
            f"nvcc -c {kernel.name} for sm_90 and sm_80",
        )
        objects[kernel.stem] = obj
    return objects


@pytest.mark.parametrize("kernel", [KERNEL, GROUPED_KERNEL], ids=lambda k: k.stem)
def test_kernel_compiles_for_sm90_and_sm80(kernel_objects, kernel):
    assert kernel_objects[kernel.stem].stat().st_size > 0


def _cuda_sources() -> list[str]:
    """setup.py's CUDA_SOURCES, read without running setup.py."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "CUDA_SOURCES" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError("setup.py defines no CUDA_SOURCES list")


def test_setup_lists_every_cuda_source():
    on_disk = sorted(str(p.relative_to(ROOT)) for p in CUDA_DIR.iterdir() if p.suffix in (".cpp", ".cu"))
    assert sorted(_cuda_sources()) == on_disk


def test_kernels_are_the_cu_sources():
    assert sorted(s for s in _cuda_sources() if s.endswith(".cu")) == sorted(
        str(k.relative_to(ROOT)) for k in (KERNEL, GROUPED_KERNEL)
    )


def _host_cxx() -> str:
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler on PATH (g++ or c++)")
    return cxx


def test_launch_header_is_torch_free(tmp_path):
    source = tmp_path / "use_launch.cpp"
    source.write_text(
        f'#include "{LAUNCH_HEADER.name}"\n'
        "int main() {\n"
        "  tinit::cuda::GroupPlan plan;\n"
        "  tinit::cuda::FillLaunch<__nv_bfloat16> fill{};\n"
        "  (void)fill;\n"
        "  return plan.empty() && tinit::cuda::valid_range(nullptr, 0, 0) ? 0 : 1;\n"
        "}\n"
    )
    _run(
        [
            _host_cxx(),
            "-std=c++17",
            "-Wall",
            "-Werror",
            "-fsyntax-only",
            "-I",
            str(LAUNCH_HEADER.parent),
            "-I",
            str(ROOT / "csrc" / "include"),
            "-isystem",
            str(_cuda_include()),
            str(source),
        ],
        "g++ -fsyntax-only on launch.h without torch",
    )


# The stable ABI versions the bindings are compiled for: TORCH_TARGET_VERSION as torch/csrc/stable/version.h
# spells it (major in the top byte, minor in the next), and the installed torch's own (no target).
STABLE_TARGETS = {"target-2.10": (2, 10), "target-2.11": (2, 11), "installed-torch": None}


def _stable_flags(target: tuple[int, int] | None) -> list[str]:
    """The host compiler's flags for the bindings on torch's stable ABI: torch's headers (only its stable and
    header-only ones are included), the toolkit's, tinit's; no ATen define. Skips, saying why, before torch 2.10."""
    from torch.utils import cpp_extension

    torch_include = Path(cpp_extension.include_paths()[0])
    if not (torch_include / "torch" / "csrc" / "stable" / "library.h").exists():
        pytest.skip(f"torch {torch.__version__} ships no stable-ABI headers (torch/csrc/stable, torch >= 2.10)")
    flags = ["-std=c++17", "-fPIC", "-O2", "-Wall", "-Werror"]
    if target is not None:
        flags.append(f"-DTORCH_TARGET_VERSION={(target[0] << 56) | (target[1] << 48):#018x}")
    for folder in [torch_include, torch_include / "torch" / "csrc" / "api" / "include", _cuda_include()]:
        flags += ["-isystem", str(folder)]
    return flags + ["-I", str(ROOT / "csrc" / "include")]


@pytest.fixture(scope="module")
def binding_objects(tmp_path_factory) -> Callable[[str], list[Path]]:
    """Each target's objects of the bindings (the .cpp files of CUDA_SOURCES), compiled on first use."""
    folder = tmp_path_factory.mktemp("bindings")
    built: dict[str, list[Path]] = {}

    def build(target_id: str) -> list[Path]:
        if target_id not in built:
            objects = []
            for binding in (s for s in _cuda_sources() if s.endswith(".cpp")):
                obj = folder / f"{target_id}-{Path(binding).stem}.o"
                flags = _stable_flags(STABLE_TARGETS[target_id])
                _run([_host_cxx(), *flags, "-c", str(ROOT / binding), "-o", str(obj)], f"g++ -c {binding} {target_id}")
                objects.append(obj)
            built[target_id] = objects
        return built[target_id]

    return build


@pytest.mark.parametrize("target_id", list(STABLE_TARGETS))
def test_bindings_compile_on_the_stable_abi(binding_objects, target_id):
    assert all(obj.stat().st_size > 0 for obj in binding_objects(target_id))


def _shim_declarations() -> tuple[set[str], set[str]]:
    """The C shims torch's stable headers declare: (all of them, those only a CUDA torch has: under USE_CUDA)."""
    from torch.utils import cpp_extension

    root = Path(cpp_extension.include_paths()[0]) / "torch" / "csrc"
    every, cuda = set(), set()
    for header in (root / "inductor" / "aoti_torch" / "c" / "shim.h", root / "stable" / "c" / "shim.h"):
        text = header.read_text()
        every |= set(re.findall(r"\b((?:aoti_)?torch_\w+)\(", text))
        for block in re.findall(r"#ifdef USE_CUDA\n(.*?)#endif // USE_CUDA", text, re.DOTALL):
            cuda |= set(re.findall(r"\b((?:aoti_)?torch_\w+)\(", block))
    return every, cuda


def _torch_exports() -> set[str]:
    lib = Path(torch.__file__).parent / "lib"
    names = set()
    for so in lib.glob("lib*.so*"):
        out = subprocess.run(["nm", "-D", "--defined-only", str(so)], capture_output=True, text=True, check=False)
        names |= {line.split()[-1].split("@")[0] for line in out.stdout.splitlines() if line.strip()}
    return names


# What the linked object may import besides the C shims: the CUDA runtime and the C/C++ runtime, by symbol version.
SYSTEM_VERSIONS = ("@libcudart.so", "@GLIBC_", "@GLIBCXX_", "@CXXABI_", "@GCC_")


def test_stable_bindings_import_no_torch_cpp_symbols(tmp_path, binding_objects, kernel_objects):
    """The bindings (target 2.10) linked with the kernels and cudart into a shared object, as the extension
    is: it imports no at::, c10:: or torch:: C++ symbol, only torch's C shims (every one declared by the stable
    headers, none a CUDA-only one of libtorch_cuda, every one exported by this torch), the CUDA runtime and
    the C/C++ runtime."""
    if shutil.which("nm") is None:
        pytest.skip("no nm on PATH (binutils) to read the shared object's imports")
    cudart = _cuda_include().parent / "lib64"
    if not any(cudart.glob("libcudart.so*")):
        pytest.skip(f"no libcudart.so in {cudart} to link against")
    shared = tmp_path / "tinit_cuda.so"
    objects = [*binding_objects("target-2.10"), *kernel_objects.values()]
    _run([_host_cxx(), "-shared", "-o", str(shared), *map(str, objects), f"-L{cudart}", "-lcudart"], "link")
    listing = _run(["nm", "-D", "--undefined-only", str(shared)], "nm -D").stdout.split("\n")
    demangled = _run(["nm", "-D", "--undefined-only", "-C", str(shared)], "nm -D -C").stdout
    cxx = re.findall(r"^.*\b(?:at|c10|torch)::.*$", demangled, re.MULTILINE)
    assert not cxx, f"{len(cxx)} torch C++ symbols imported:\n" + "\n".join(cxx[:20])
    imports = [line.split() for line in listing if line.strip()]
    shims = {name for kind, name in imports if name.startswith(("aoti_torch_", "torch_"))}
    others = [n for kind, n in imports if kind != "w" and n not in shims and not any(v in n for v in SYSTEM_VERSIONS)]
    assert not others, f"imports outside the C shims, cudart and the C/C++ runtime: {others[:20]}"
    declared, cuda_only = _shim_declarations()
    assert shims <= declared, f"shims no stable header declares: {sorted(shims - declared)}"
    # No CUDA shim either (libtorch_cuda's, declared under USE_CUDA): the extension names only
    # libtorch_cpu, and torch loads libtorch_cuda RTLD_LOCAL, so such an import would not bind when
    # tinit._C loads; bindings.cpp looks the current-stream shim up at run time instead.
    assert not shims & cuda_only, f"CUDA shims imported (not bindable at load): {sorted(shims & cuda_only)}"
    if torch.version.cuda is None:
        missing = shims - _torch_exports()
        assert not missing, f"shims this torch's libtorch_cpu does not export: {sorted(missing)}"
    print(f"{len(shims)} C shims imported, none of them CUDA-only")


@pytest.fixture(scope="module")
def harness(tmp_path_factory) -> Path:
    exe = tmp_path_factory.mktemp("harness") / "cuda_host_harness"
    _run(
        [
            NVCC,
            str(HARNESS),
            "-o",
            str(exe),
            *COMMON,
            "-I",
            str(KERNEL.parent),
            "-arch=sm_90",
            "-Xcompiler",
            "-ffp-contract=off",
        ],
        "nvcc cuda_host_harness.cu",
    )
    return exe


DTYPE_CODES = {torch.float32: 0, torch.float64: 1, torch.bfloat16: 2, torch.float16: 3}
WINDOWS = {
    "central": (0.0, 1.0, -2.0, 2.0),
    "two_sided": (0.0, 1.0, -4.0, 4.0),
    "far": (0.0, 1.0, -math.inf, math.inf),
    "tail": (0.0, 1.0, -math.inf, -15.0),
    "gpt2": (0.0, 0.02, -0.04, 0.04),
    "uniform": (0.0, 1.0, 0.5, 0.5001),
    "precise": (1.0, 1.0 / 7.0, -math.inf, 0.0),
}
# (window, dtype, numel, offset, shift): shift misaligns the output by elements.
CASES = [
    pytest.param("central", torch.float32, 1000, 0, 0, id="f32-central-aligned"),
    pytest.param("central", torch.float32, 1001, 1, 0, id="f32-central-offset1"),
    pytest.param("central", torch.float32, 1002, 2, 1, id="f32-central-offset2-shift1"),
    pytest.param("central", torch.float32, 1003, 3, 3, id="f32-central-offset3-shift3"),
    pytest.param("central", torch.float32, 5, 1, 0, id="f32-central-offset1-shift1-n5"),
    pytest.param("central", torch.float32, 3, 2, 0, id="f32-one-block-inside"),
    pytest.param("central", torch.float32, 1, 3, 0, id="f32-n1-offset3"),
    pytest.param("two_sided", torch.float32, 517, 2**40 + 2, 0, id="f32-two-sided-offset2^40+2"),
    pytest.param("far", torch.float32, 257, 7, 2, id="f32-far-offset7"),
    pytest.param("tail", torch.float32, 129, 0, 0, id="f32-tail"),
    # Units straddling vectors by 3 and 1 elements (fill_runs_shifted's A = 1 and A = 3).
    pytest.param("central", torch.float32, 1000, 3, 0, id="f32-central-units-shifted-by-1"),
    pytest.param("tail", torch.float32, 1001, 1, 2, id="f32-tail-units-shifted-by-1"),
    pytest.param("two_sided", torch.float32, 997, 0, 2, id="f32-two-sided-units-shifted-by-2"),
    pytest.param("gpt2", torch.bfloat16, 1000, 0, 0, id="bf16-gpt2-aligned"),
    pytest.param("gpt2", torch.bfloat16, 1001, 2, 0, id="bf16-gpt2-offset2"),
    pytest.param("gpt2", torch.bfloat16, 1003, 3, 1, id="bf16-gpt2-offset3-shift1"),
    pytest.param("central", torch.float16, 999, 1, 2, id="f16-central-offset1-shift2"),
    pytest.param("far", torch.float16, 64, 0, 0, id="f16-far"),
    pytest.param("two_sided", torch.float64, 513, 3, 0, id="f64-two-sided-offset3"),
    pytest.param("tail", torch.float64, 100, 0, 1, id="f64-tail-shift1"),
    pytest.param("uniform", torch.float32, 1001, 1, 0, id="f32-uniform-offset1"),
    pytest.param("uniform", torch.bfloat16, 1003, 3, 1, id="bf16-uniform-offset3-shift1"),
    pytest.param("precise", torch.float32, 1002, 2, 0, id="f32-precise-offset2"),
    pytest.param("precise", torch.float16, 515, 0, 2, id="f16-precise-shift2"),
]


def _harness_run(
    exe: Path,
    kind: str,
    dtype_code: int,
    numel: int,
    seed: int,
    stream: int,
    offset: int,
    shift: int,
    threads: int,
    constants=(),
) -> bytes:
    cmd = [
        str(exe),
        kind,
        str(dtype_code),
        str(numel),
        str(seed),
        str(stream),
        str(offset),
        str(shift),
        str(threads),
        *(repr(float(c)) for c in constants),
    ]
    proc = subprocess.run(cmd, check=False, capture_output=True, timeout=120)
    assert proc.returncode != 2, f"{' '.join(cmd)}: wrote outside the output tensor"
    assert proc.returncode == 0, f"{' '.join(cmd)}: exit {proc.returncode}"
    return proc.stdout


def _assert_same_bits(got: bytes, want: torch.Tensor, what: str) -> None:
    want_bytes = want.contiguous().view(torch.uint8).numpy().tobytes()
    assert len(got) == len(want_bytes), f"{what}: {len(got)} bytes, expected {len(want_bytes)}"
    if got != want_bytes:
        size = want.element_size()
        a = np.frombuffer(got, dtype=np.uint8).reshape(-1, size)
        b = np.frombuffer(want_bytes, dtype=np.uint8).reshape(-1, size)
        bad = np.nonzero((a != b).any(axis=1))[0]
        got_t = torch.frombuffer(bytearray(got), dtype=want.dtype)
        raise AssertionError(
            f"{what}: {bad.size} of {want.numel()} elements differ; first at {bad[0]}: "
            f"got {got_t[bad[0]].item()!r}, CPU op {want[bad[0]].item()!r}"
        )


needs_native = pytest.mark.skipif(
    not ops.native_available(), reason=f"native extension not built: {ops.native_load_error()}"
)


@needs_native
@pytest.mark.parametrize("window,dtype,numel,offset,shift", CASES)
def test_host_run_of_kernel_matches_cpu_op(harness, window, dtype, numel, offset, shift):
    constants = transform_constants(*WINDOWS[window], dtype)
    seed, stream = 2**63 + 12345, 2**33 + 7
    got = _harness_run(
        harness, "values", DTYPE_CODES[dtype], numel, seed, stream, offset, shift, threads=5, constants=constants
    )
    want = torch.empty(numel, dtype=dtype)
    ops.trunc_normal_native(want, seed, stream, offset, constants)
    _assert_same_bits(got, want, f"host run of the CUDA kernel code, {window} {dtype}, offset {offset}")


@needs_native
@pytest.mark.parametrize(
    "numel,offset,shift",
    [
        pytest.param(1030, 0, 0, id="aligned"),
        pytest.param(1031, 3, 1, id="offset3-shift1"),
        pytest.param(40, 2**34 - 17, 0, id="across-2^32-blocks"),
    ],
)
def test_host_run_of_words_kernel_matches_cpu_op(harness, numel, offset, shift):
    got = _harness_run(harness, "words", 0, numel, 99, 2**62 + 5, offset, shift, threads=3)
    want = torch.empty(numel, dtype=torch.int32)
    torch.ops.tinit.philox_(want, 99, ops.as_int64(2**62 + 5), offset)
    _assert_same_bits(got, want, f"host run of the words kernel code, offset {offset}")


def test_host_run_compute_only_stores_nothing(harness):
    constants = transform_constants(*WINDOWS["central"], torch.float32)
    got = _harness_run(harness, "compute", 0, 1000, 1, 2, 3, 0, threads=4, constants=constants)
    assert got == bytes([0xA5]) * 4000, "compute-only changed the output"


# ---- grouped kernels (tests/cuda_grouped_host_harness.cu) ----

WORDS_KIND = 4
# Windows that reach every transform mode (tinit.params.Mode, in order):
# float-compute dtypes get all four from these; float64 gets 1, 2 and 3 (its
# narrow window is two-sided at fp64 precision).
MODE_WINDOWS = [
    (0.0, 1.0, 0.5, 0.5001),  # uniform: linear density on a narrow window
    (0.0, 1.0, -4.0, 4.0),  # two-sided
    (1.0, 1.0 / 7.0, -math.inf, 0.0),  # precise: x near 0, 7 std below the mean
    (0.0, 1.0, 8.0, 100.0),  # tail
]
# (numel, offset): every offset % 4, one offset past 2^34 and one range across it.
GROUP_SIZES = [(0, 5), (1, 3), (3, 2), (4, 1), (5, 0), (4097, 2**34 + 3), (10**5, 2**34 - 4099)]
GROUP_SEED = 2**63 + 12345


@pytest.fixture(scope="module")
def grouped_harness(tmp_path_factory) -> Path:
    exe = tmp_path_factory.mktemp("grouped_harness") / "cuda_grouped_host_harness"
    _run(
        [
            NVCC,
            str(ROOT / "tests" / "cuda_grouped_host_harness.cu"),
            "-o",
            str(exe),
            *COMMON,
            "-I",
            str(KERNEL.parent),
            "-arch=sm_90",
            "-Xcompiler",
            "-ffp-contract=off",
        ],
        "nvcc cuda_grouped_host_harness.cu",
    )
    return exe


def _grouped_run(exe: Path, records: list[str], grid: int, seed: int = GROUP_SEED) -> tuple[bytes, dict]:
    """Run the harness on records; return the outputs' bytes and its table_bytes / chunks report."""
    spec = "\n".join([str(seed), *records]) + "\n"
    proc = subprocess.run([str(exe), str(grid)], input=spec.encode(), check=False, capture_output=True, timeout=120)
    what = {1: "a bad spec", 2: "a write outside an output", 3: "the pack refusing the table"}
    assert proc.returncode == 0, (
        f"grouped harness (grid {grid}): exit {proc.returncode}, {what.get(proc.returncode, 'a crash')}"
    )
    words = proc.stderr.decode().split()
    return proc.stdout, {words[i]: int(words[i + 1]) for i in range(0, len(words), 2)}


def _numbers(values) -> str:
    return " ".join(repr(float(v)) if isinstance(v, float) else str(int(v)) for v in values)


def _tensor_record(kind: int, numel: int, stream: int, offset: int, shift: int, constants=()) -> str:
    return f"T {kind} {numel} {stream} {offset} {shift} {_numbers(constants)}"


def _runs_record(kind: int, numel: int, stream: int, runs, shift: int, constants=()) -> str:
    return (
        f"R {kind} {numel} {stream} {runs.base} {shift} {runs.run} "
        f"{len(runs.outer_sizes)} {_numbers(runs.outer_sizes)} "
        f"{len(runs.outer_starts)} {_numbers(runs.outer_starts)} {_numbers(constants)}"
    )


def _split(got: bytes, tensors: list[torch.Tensor]) -> list[bytes]:
    parts, at = [], 0
    for t in tensors:
        size = t.numel() * t.element_size()
        parts.append(got[at : at + size])
        at += size
    assert at == len(got), f"harness wrote {len(got)} bytes, expected {at}"
    return parts


def _mixed_group():
    """(tensors, streams, offsets, constants, shifts): mixed dtypes interleaved in one list."""
    tensors, streams, offsets, constants, shifts = [], [], [], [], []
    for i, (numel, offset) in enumerate(GROUP_SIZES):
        for d, dtype in enumerate(DTYPE_CODES):
            tensors.append(torch.empty(numel, dtype=dtype))
            streams.append(2**33 + 7 * len(streams))
            offsets.append(offset + 4 * d)  # keeps offset % 4 per size: every dtype sees all four
            constants.append(transform_constants(*MODE_WINDOWS[(i + d) % 4], dtype))
            shifts.append((3 * i + d) % 4)
    return tensors, streams, offsets, constants, shifts


@needs_native
@pytest.mark.parametrize(
    "grid", [pytest.param(0, id="launcher-grid"), pytest.param(1, id="grid1"), pytest.param(3, id="grid3")]
)
def test_grouped_host_run_matches_cpu_grouped_op(grouped_harness, grid):
    tensors, streams, offsets, constants, shifts = _mixed_group()
    assert {c[0] for c in constants} == {0.0, 1.0, 2.0, 3.0}, "the list must reach every transform mode"
    records = [
        _tensor_record(DTYPE_CODES[t.dtype], t.numel(), s, o, sh, c)
        for t, s, o, c, sh in zip(tensors, streams, offsets, constants, shifts, strict=True)
    ]
    got, report = _grouped_run(grouped_harness, records, grid)
    ops.trunc_normal_grouped_native(tensors, GROUP_SEED, streams, offsets, constants)
    # The harness writes its outputs in record order, each kind's launch in turn.
    for t, part, o, sh, c in zip(tensors, _split(got, tensors), offsets, shifts, constants, strict=True):
        _assert_same_bits(
            part, t, f"grouped host run (grid {grid}): {t.dtype} n={t.numel()} offset {o} shift {sh} mode {int(c[0])}"
        )
    assert report["chunks"] > 0


# Windows whose clamp cannot fire (the CUDA kernels' kTwoSidedUnclamped) beside
# ones where it can, of several sizes, so that warps cross entries of both.
UNCLAMPED_WINDOWS = [(0.0, 0.02, -2.0, 2.0), (0.0, 0.02, -0.04, 0.04), (0.5, 1.0, -math.inf, math.inf)]


@needs_native
@pytest.mark.parametrize("grid", [pytest.param(0, id="launcher-grid"), pytest.param(2, id="grid2")])
def test_grouped_host_run_unclamped_windows_match_cpu(grouped_harness, grid):
    tensors, streams, offsets, constants = [], [], [], []
    for i, numel in enumerate([5000, 1, 2**12 + 3, 777, 3 * 2**12]):
        for d, dtype in enumerate((torch.float32, torch.bfloat16, torch.float16)):
            tensors.append(torch.empty(numel, dtype=dtype))
            streams.append(11 + len(streams))
            offsets.append(i + d)
            constants.append(transform_constants(*UNCLAMPED_WINDOWS[(i + d) % 3], dtype))
    records = [
        _tensor_record(DTYPE_CODES[t.dtype], t.numel(), s, o, 0, c)
        for t, s, o, c in zip(tensors, streams, offsets, constants, strict=True)
    ]
    got, _ = _grouped_run(grouped_harness, records, grid)
    ops.trunc_normal_grouped_native(tensors, GROUP_SEED, streams, offsets, constants)
    for t, part, o, c in zip(tensors, _split(got, tensors), offsets, constants, strict=True):
        _assert_same_bits(part, t, f"grouped host run (grid {grid}): {t.dtype} n={t.numel()} offset {o} std {c.sd_hi}")


@needs_native
def test_grouped_table_does_not_grow_with_elements(grouped_harness):
    constants = transform_constants(*MODE_WINDOWS[3], torch.float32)
    small = _grouped_run(grouped_harness, [_tensor_record(0, 1, 1, 0, 0, constants)], grid=4)[1]
    large = _grouped_run(grouped_harness, [_tensor_record(0, 2**20 + 3, 1, 1, 0, constants)], grid=4)[1]
    assert small["table_bytes"] == large["table_bytes"], (small, large)
    assert large["chunks"] == -(-(2**20 + 4) // 1024), large


# Shard layouts: (global shape, local shape, shard offsets).
RUNS_LAYOUTS = [
    pytest.param((300, 70), (300, 34), (0, 18), id="shard1-of-2d"),
    pytest.param((6, 40, 33), (6, 15, 33), (0, 8, 0), id="middle-dim-of-3d"),
    pytest.param((4, 10, 12), (3, 5, 6), (1, 2, 3), id="block-of-3d-two-outer-dims"),
]
RUNS_KINDS = [
    pytest.param(dtype, id=name)
    for name, dtype in (
        ("f32", torch.float32),
        ("f64", torch.float64),
        ("bf16", torch.bfloat16),
        ("f16", torch.float16),
        ("words", torch.int32),
    )
]


@needs_native
@pytest.mark.parametrize("dtype", RUNS_KINDS)
@pytest.mark.parametrize("global_shape,local_shape,shard_offsets", RUNS_LAYOUTS)
def test_runs_host_run_matches_cpu_runs_ops(grouped_harness, global_shape, local_shape, shard_offsets, dtype):
    from tinit.sharding import ShardLayout

    layout = ShardLayout.from_offsets(global_shape, local_shape, shard_offsets)
    stream = 2**62 + 9
    records, tensors = [], []
    for i, (offset, shift) in enumerate(((0, 0), (2**34 + 3, 1), (5, 3))):
        runs = layout.runs(offset)
        assert runs.outer_sizes, f"{layout.local_shape} of {global_shape} should be rows, not one range"
        want = torch.empty(local_shape, dtype=dtype)
        if dtype == torch.int32:
            torch.ops.tinit.philox_runs_(
                want,
                GROUP_SEED - 2**64,
                ops.as_int64(stream),
                runs.base,
                runs.run,
                list(runs.outer_sizes),
                list(runs.outer_starts),
            )
            records.append(_runs_record(WORDS_KIND, want.numel(), stream, runs, shift))
        else:
            constants = transform_constants(*MODE_WINDOWS[(i + 3) % 4], dtype)
            ops.trunc_normal_runs_native(want, GROUP_SEED, stream, runs, constants)
            records.append(_runs_record(DTYPE_CODES[dtype], want.numel(), stream, runs, shift, constants))
        tensors.append(want)
    got, _ = _grouped_run(grouped_harness, records, grid=2)
    for i, (part, want) in enumerate(zip(_split(got, tensors), tensors, strict=True)):
        _assert_same_bits(
            part, want, f"runs host run, {dtype} {local_shape} of {global_shape} at {shard_offsets}, case {i}"
        )


@pytest.mark.parametrize(
    "record",
    [
        pytest.param(_tensor_record(0, 8, 1, 0, 0, (7.0,) + (0.0,) * (PARAM_COUNT - 1)), id="mode-7"),
        pytest.param(_tensor_record(0, 8, 1, 2**63 - 4, 0, (0.0,) * PARAM_COUNT), id="offset+numel-past-2^63"),
        pytest.param("R 4 6 1 0 0 3 1 2 2 0 9223372036854775807", id="row-start-past-2^63"),
        pytest.param("R 4 6 1 0 0 4 1 2 2 0 8", id="rows-do-not-cover"),
    ],
)
def test_grouped_pack_refuses_bad_tables(grouped_harness, record):
    proc = subprocess.run(
        [str(grouped_harness), "1"], input=f"1\n{record}\n".encode(), check=False, capture_output=True, timeout=60
    )
    assert proc.returncode == 3, f"{record!r}: exit {proc.returncode}, expected the pack to refuse (3)"
