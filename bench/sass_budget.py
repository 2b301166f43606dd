"""Static SASS instruction budget of every tinit GPU kernel, per element, for sm_90 and sm_80, without a GPU.

    python bench/sass_budget.py [--cuda/--no-cuda] [--triton/--no-triton] [--arch sm_90 --arch sm_80]
                                [--md PATH] [--json PATH] [--keep-dir DIR] [--root DIR] [--filter REGEX]
                                [--p-diverge MODE=P ...]

Prints a markdown table per arch (also --md) and writes the JSON report to
--json or bench/results/sass_budget_<date>_<commit>.json (commit:
TINIT_COMMIT, else ``git rev-parse --short=12 HEAD`` of --root). --arch
picks the targets (default both of ARCHS, setup.py's DEFAULT_CUDA_ARCHS);
--root measures another source tree (e.g. ``git archive`` of a commit);
--filter keeps the cases whose "backend/kernel/dtype/mode" matches;
--keep-dir keeps cubins, SASS, PTX, ptxas logs.

CUDA: the kernels' .cu files (CU_FILES) are compiled with the extension's
nvcc flags (setup.py: -O3 -std=c++17 --fmad=false; torch's
COMMON_NVCC_FLAGS; -I csrc/include) by ``nvcc -cubin -arch=<arch> -Xptxas
-v`` (two at a time) and disassembled with nvdisasm (PATH, else triton's).
Each __global__ function is named from its demangled symbol: the first
template argument that is a type gives the dtype (float fp32, double fp64,
__nv_bfloat16 bf16, __half fp16, unsigned int words), the first integer (or
enumerator) argument the transform mode, named from ``enum TransformMode``
of transform.h (read with a regex: modes are reported as the enum has
them) and, for CUDA only, from the constants set past it
(``kTwoSidedUnclamped = kModeCount``: two_sided_unclamped; read_cuda_modes),
which Triton does not compile. Triton: _sass_triton compiles every ``*_kernel`` for GPUTarget("cuda",
90 or 80, 32) with the argument types its launcher passes, once per dtype
and mode, and the grouped kernel once per tensor count (1, 256, 4096).

Columns (_sass states the CFG rules), per element a thread stores:

- interior: the fast path of the hot loop, from its header back to it
  through the widest global store with the fewest narrower stores, then the
  most bits, then the fewest instructions, divided by the elements its
  widest stores write (STG.E.128 of fp32 = 4; STG.E.64 of bf16 = 4; an
  unrolled loop stores more). UMOV/BSSY/BSYNC/BRA count (they take issue
  slots). Triton single-tensor kernels have no loop: their path runs from
  entry to EXIT and covers 4 BLOCK / (32 num_warps) elements per thread.
- edge: the element-by-element path (a store narrower than the widest, the
  fewest widest ones): a tensor's edge unit (CUDA: the loop after the
  interior one), or a masked Triton program.
- misaligned: CUDA fp32/bf16/fp16, the costliest of the loops that realign
  misaligned units (fill_runs_shifted, one per shift); where there are none
  (fp64, words, Triton), the edge path, which misaligned tensors take for
  every unit (marked "(edge)").
- set-up: instructions from the entry to the hot loop's header (prologue)
  plus from its exit to EXIT (epilogue), every other loop passed in zero
  trips; for the grouped CUDA kernel, per warp, also the trip of its table
  search loop and the crossing from one entry to the next (the hot loop's
  exit back to its header through the loop over the entries):
  "P + S/step + E/entry"; for the Triton grouped kernel the figure of each
  tensor count's compile. Steady state: interior + set-up amortised
  (STEADY_TEXT; the grouped CUDA warps from launch_grouped's one wave of
  resident blocks at the kernel's registers, MODELS' SM count).
- tbl ld: LDG/LD/indexed LDC on the interior path (the ndtri table);
  smem+bar: LDS/LDSM/STS/STSM/BAR on it (Triton layout conversions).
- slow: static instructions of the loop's other blocks and of the
  subroutines they call. FP64: D* opcodes (not DEPBAR), F2F/I2F/F2I/FRND
  with .F64, MUFU.*64H. Conversions: F2F, I2F, F2I, I2I, F2FP, I2FP, F2IP.
  Spills: ptxas -v (for Triton, triton's ptxas rerun on its PTX with its
  flags); registers: cuobjdump -res-usage.

Kernels whose mode is a run-time value (grouped_kernel<T>: one loop per
mode; _grouped_kernel: one loop per mode) get one case per fast path, named
after the single-tensor kernel (same backend, dtype and arch) whose
fast-path opcode histogram is nearest (L1 distance over its size, greedy one
to one; match_d). Two modes whose single-tensor code is identical cannot be
told apart there.

Throughput model (an issue-rate bound, stated in every report): G elements/s
= min(SMs x 4 schedulers x 32 lanes x clock / interior SASS per element, HBM
bandwidth / bytes per element), H200 for sm_90 and A100 for sm_80 (MODELS).
It ignores pipe limits (FP64 and MUFU issue at a fraction of that rate),
latency and occupancy. ``--p-diverge MODE=P`` adds a figure for fast + P x
slow per element (P: the chance that a warp takes the slow blocks).

A hand count of the same metric on tinit's kernels agrees within 1%
(docs/sass_budget.md); its FP64 figure counted D* opcodes only (53 of this
count's 58 for fp32 two-sided: + 3 F2F.F64 + 2 MUFU.RSQ64H/RCP64H). Its
3.75 for a float4 store-only loop is a different loop: the one in
tests/test_sass_budget.py takes 10 instructions a trip (2.5 per element).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _sass
import _sass_triton

REPO = Path(__file__).resolve().parent.parent
CU_FILES = ("csrc/cuda/trunc_normal_kernel.cu", "csrc/cuda/trunc_normal_grouped_kernel.cu")
ARCHS = ("sm_90", "sm_80")  # setup.py's DEFAULT_CUDA_ARCHS: 8.0 and 9.0
ARCH = ARCHS[0]
NVCC_FLAGS = ["-O3", "-std=c++17", "--fmad=false"]  # setup.py, the extension's release nvcc flags
TORCH_NVCC_FLAGS = [
    "-D__CUDA_NO_HALF_OPERATORS__",
    "-D__CUDA_NO_HALF_CONVERSIONS__",
    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-D__CUDA_NO_HALF2_OPERATORS__",
    "--expt-relaxed-constexpr",
]  # COMMON_NVCC_FLAGS of torch, if torch is absent
# Per arch, the GPU of the throughput model and what the steady state needs (resident CUDA blocks).
MODELS = {
    "sm_90": {"gpu": "H200", "sms": 132, "schedulers": 4, "lanes": 32, "clock_ghz": 1.98, "hbm_tb_s": 4.8},
    "sm_80": {"gpu": "A100-SXM4-80GB", "sms": 108, "schedulers": 4, "lanes": 32, "clock_ghz": 1.41, "hbm_tb_s": 2.039},
}
MODEL = MODELS["sm_90"]
SM_LIMITS = {"regs": 65536, "threads": 2048, "blocks": 32, "reg_unit": 256}  # per SM, sm_80 and sm_90
THREADS = 256  # kThreads: every CUDA kernel's block
TOTAL_ELEMENTS = _sass_triton.TOTAL_ELEMENTS  # the steady state's fill: one tensor, or equal ones
TENSOR_COUNTS = _sass_triton.TENSOR_COUNTS
MODEL_TEXT = (
    "G elem/s = min(SMs x 4 schedulers x 32 lanes x clock / SASS per element, HBM bandwidth / bytes per "
    "element), SASS per element of the interior loop (H200 for sm_90: 132 SMs, 1.98 GHz, 4.8 TB/s; "
    "A100 for sm_80: 108 SMs, 1.41 GHz, 2.039 TB/s); weighted: SASS per element = fast + P(diverge) x slow"
)
STEADY_TEXT = (
    "steady state = interior + set-up / elements a thread writes per set-up, for 2^28 elements: "
    "CUDA single, one tensor, set-up = prologue + epilogue once per thread, 4 ceil(2^26 / threads) "
    "elements, threads = 256 x min(blocks needed, SMs x resident blocks at its registers); "
    "CUDA grouped, equal tensors (1, 256, 4096) of C = ceil(2^26 / tensors / kChunkUnits) chunks, "
    "W = 256 / kLanes x min(ceil(chunks / (256 / kLanes)), SMs x resident blocks at its registers) "
    "warps, warp w taking chunks [w q + min(w, r), (w + 1) q + min(w + 1, r)) (q, r = divmod(chunks, "
    "W)): set-up once per warp and lane = prologue + epilogue + ceil(log2 tensors) x the search "
    "loop's trip + the most entries a warp crosses x the crossing (loop exit to the next entry's "
    "loop head), over the fewest chunks a warp takes x 4 kChunkUnits / kLanes elements; Triton "
    "grouped, compiled at each count's LOG, set-up once per program over REPS x 4 BLOCK / "
    "(32 num_warps) elements; Triton single, no loop: the interior path runs entry to EXIT, set-up "
    "included"
)
TYPES = {
    "float": "fp32",
    "double": "fp64",
    "__nv_bfloat16": "bf16",
    "__half": "fp16",
    "unsigned int": "words",
    "c10::BFloat16": "bf16",
    "c10::Half": "fp16",
}
BYTES = {"fp32": 4, "fp64": 8, "bf16": 2, "fp16": 2, "words": 4, "i32": 4}
TIMEOUT_S = 900


def tool(name: str) -> str | None:
    """A CUDA binary tool: on PATH, else the one bundled with triton."""
    found = shutil.which(name)
    if found:
        return found
    try:
        import triton
    except ImportError:
        return None
    bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name
    return str(bundled) if bundled.exists() else None


def _run(cmd: list[str], what: str, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=TIMEOUT_S, **kw)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-4000:]}")
    return proc


def _snake(name: str) -> str:
    """kTwoSidedFar -> two_sided_far."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name[1:]).lower()


def read_modes(header: Path) -> dict[int, str]:
    """``enum TransformMode`` of transform.h as {value: snake name}: kTwoSidedFar = 2 -> {2: "two_sided_far"}."""
    body = re.search(r"enum\s+(?:class\s+)?TransformMode\b[^{]*\{(.*?)\}", header.read_text(), re.DOTALL)
    if not body:
        raise ValueError(f"no enum TransformMode in {header}")
    modes, value = {}, -1
    for name, given in re.findall(r"\b(k\w+)\s*(?:=\s*(\d+))?\s*,?", re.sub(r"//[^\n]*", "", body.group(1))):
        value = int(given) if given else value + 1
        modes[value] = _snake(name)
    return modes


def read_cuda_modes(header: Path, modes: dict[int, str]) -> dict[int, str]:
    """The CUDA kernels' modes outside ``enum TransformMode``, as {value: snake name}: the
    ``constexpr int`` constants of transform.h set to ``kModeCount`` (+ n), the first value past
    the enum's (``constexpr int kTwoSidedUnclamped = kModeCount;`` -> {4: "two_sided_unclamped"}).
    Never packed and unknown to Triton (whose kernels refuse modes they lack), so only the CUDA
    kernels' names use them.

    Args:
        header: transform.h.
        modes: its enum (``read_modes``); kModeCount, when the header does not give it a number,
            is one past the enum's largest value.
    """
    text = re.sub(r"//[^\n]*", "", header.read_text())
    count = re.search(r"constexpr\s+int\s+kModeCount\s*=\s*(\d+)\s*;", text)
    base = int(count[1]) if count else max(modes, default=-1) + 1
    found = re.findall(r"constexpr\s+int\s+(k\w+)\s*=\s*kModeCount\s*(?:\+\s*(\d+))?\s*;", text)
    return {base + int(extra or 0): _snake(name) for name, extra in found if base + int(extra or 0) not in modes}


def nvcc_flags(root: Path) -> list[str]:
    try:
        from torch.utils.cpp_extension import COMMON_NVCC_FLAGS as torch_flags
    except ImportError:
        torch_flags = TORCH_NVCC_FLAGS
    return [*NVCC_FLAGS, *torch_flags, "-I", str(root / "csrc" / "include")]


def compile_cu(source: Path, out_dir: Path, flags: list[str], arch: str = ARCH) -> tuple[Path, str]:
    """``nvcc -cubin -arch=ARCH`` of one .cu.

    Args:
        source: the .cu file.
        out_dir: where the cubin goes.
        flags: nvcc flags (``nvcc_flags``).
        arch: the target, "sm_90" or "sm_80".

    Returns:
        (cubin path, ptxas -v log).

    Raises:
        RuntimeError: nvcc failed.
    """
    cubin = out_dir / f"{source.stem}.{arch}.cubin"
    proc = _run(
        [
            shutil.which("nvcc") or "nvcc",
            "-cubin",
            f"-arch={arch}",
            *flags,
            "-Xptxas",
            "-v",
            "-o",
            str(cubin),
            str(source),
        ],
        f"nvcc {source.name} {arch}",
    )
    return cubin, proc.stdout + proc.stderr


def ptxas_info(log: str) -> dict[str, dict]:
    """Per function of a ``ptxas -v`` log: regs, stack, spill_stores, spill_loads (bytes)."""
    info: dict[str, dict] = {}
    name = None
    for line in log.splitlines():
        found = re.search(r"(?:Compiling entry function|Function properties for) '?([^'\s]+)'?", line)
        if found:
            name = found.group(1)
            continue
        frame = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if frame and name:
            info.setdefault(name, {}).update(stack=int(frame[1]), spill_stores=int(frame[2]), spill_loads=int(frame[3]))
        regs = re.search(r"Used (\d+) registers", line)
        if regs and name:
            info.setdefault(name, {})["regs"] = int(regs[1])
    return info


def disassemble(cubin: Path, keep: Path | None) -> tuple[dict[str, _sass.Function], dict[str, dict]]:
    """(functions of the cubin, cuobjdump -res-usage per function: REG, STACK, LOCAL, SHARED)."""
    text = _run([tool("nvdisasm") or "nvdisasm", "-c", str(cubin)], "nvdisasm").stdout
    if keep:
        (keep / f"{cubin.stem}.sass").write_text(text)
    usage, name = {}, None
    cuobjdump = tool("cuobjdump")
    for line in (_run([cuobjdump, "-res-usage", str(cubin)], "cuobjdump").stdout if cuobjdump else "").splitlines():
        found = re.match(r"\s*Function (\S+):", line)
        if found:
            name = found.group(1)
        elif name and "REG:" in line:
            usage[name] = {k: int(v) for k, v in re.findall(r"(\w+):(\d+)", line)}
    return _sass.parse(text), usage


def demangle(names: list[str]) -> list[str]:
    filt = shutil.which("cu++filt") or shutil.which("c++filt")
    if not filt or not names:
        return names
    out = subprocess.run(
        [filt], check=False, input="\n".join(names) + "\n", capture_output=True, text=True
    ).stdout.splitlines()
    return out if len(out) == len(names) else names


def describe(demangled: str, modes: dict[int, str]) -> tuple[str, str | None, int | None]:
    """(kernel, dtype, mode value) of a demangled kernel symbol."""
    demangled = re.sub(r"^void\s+", "", demangled.replace("(anonymous namespace)::", ""))
    depth, cut = 0, len(demangled)
    for k, ch in enumerate(demangled):  # the parameter list: the first "(" outside <...>
        depth += {"<": 1, ">": -1}.get(ch, 0)
        if ch == "(" and depth == 0:
            cut = k
            break
    head, params = demangled[:cut], demangled[cut:]
    base = re.sub(r"<.*", "", head).split("::")[-1]
    targs = re.search(r"<(.*)>", head)
    args = [a.strip() for a in targs.group(1).split(",")] if targs else []
    dtype = next((TYPES[a] for a in args if a in TYPES), None)
    if dtype is None:  # a plain kernel: the pointee of its first pointer parameter
        first = re.search(r"\(\s*([\w:\s]+?)\s*\*", params)
        dtype = TYPES.get(first.group(1).replace("const", "").strip()) if first else None
    names = {f"k{''.join(p.title() for p in v.split('_'))}": k for k, v in modes.items()}
    mode = None
    for a in args:
        value = re.fullmatch(r"(?:\([\w:]+\))?(-?\d+)", a)
        name = names.get(a.split("::")[-1])
        if value or name is not None:
            mode = int(value.group(1)) if value else name
            break
    return base, dtype, mode


def throughput(per_elem: float, dtype: str | None, arch: str = ARCH) -> dict:
    """The model's estimate (G elements/s) and which of its two bounds sets it.

    Args:
        per_elem: SASS instructions per element.
        dtype: the output dtype (its bytes per element bound HBM).
        arch: which GPU of MODELS.

    Returns:
        {"est_gelem_s": float, "bound": "issue" or "hbm"}.
    """
    m = MODELS[arch]
    issue = m["sms"] * m["schedulers"] * m["lanes"] * m["clock_ghz"] / per_elem
    hbm = m["hbm_tb_s"] * 1e3 / BYTES.get(dtype, 4)
    return {"est_gelem_s": min(issue, hbm), "bound": "issue" if issue < hbm else "hbm"}


def resident_blocks(regs: int | None, arch: str = ARCH) -> int:
    """CUDA blocks of THREADS resident on the GPU at once at regs registers a thread.

    Args:
        regs: registers per thread (cuobjdump); None counts as 255.
        arch: which GPU of MODELS (its SM count).

    Returns:
        SMs x blocks per SM, the register file allocated per warp in SM_LIMITS["reg_unit"] registers.
    """
    unit = SM_LIMITS["reg_unit"]
    per_warp = -(-(regs or 255) * 32 // unit) * unit
    warps = SM_LIMITS["regs"] // per_warp
    per_sm = min(warps // (THREADS // 32), SM_LIMITS["threads"] // THREADS, SM_LIMITS["blocks"])
    return MODELS[arch]["sms"] * max(per_sm, 1)


def grouped_chunk(root: Path) -> tuple[int, int] | None:
    """(kLanes, kChunkUnits) of the grouped CUDA kernel, read from its source; None if not found.
    Its warps are THREADS / kLanes a block (kWarps)."""
    try:
        text = (root / CU_FILES[1]).read_text()
    except OSError:
        return None
    lanes = re.search(r"kLanes\s*=\s*(\d+)\s*;", text)
    units = re.search(r"kChunkUnits\s*=\s*kLanes\s*\*\s*(\d+)\s*;", text)
    if not lanes or not units:
        return None
    return int(lanes[1]), int(lanes[1]) * int(units[1])


def search_steps(tensors: int) -> int:
    """Trips of a binary search over tensors entries: ceil(log2 tensors)."""
    return max(0, (tensors - 1).bit_length())


def warp_ranges(chunks_per_tensor: int, tensors: int, warps: int) -> tuple[int, int]:
    """How the grouped CUDA kernel's warps split equal tensors (grouped_thread): warp w of W
    takes chunks [w q + min(w, r), (w + 1) q + min(w + 1, r)), q, r = divmod(chunks, W), and
    walks the entries they belong to in table order.

    Args:
        chunks_per_tensor: chunks of each tensor (C >= 1).
        tensors: how many (n >= 1).
        warps: warps of the grid (W >= 1).

    Returns:
        (the fewest chunks a warp with work takes, the most entries a warp crosses: the entry
        of its last chunk minus that of its first).
    """
    chunks = chunks_per_tensor * tensors
    q, r = divmod(chunks, warps)
    crossed = 0
    for w in range(min(warps, chunks)):
        first = w * q + min(w, r)
        last = first + q + (w < r) - 1
        crossed = max(crossed, last // chunks_per_tensor - first // chunks_per_tensor)
    return max(q, 1), crossed


def grouped_warps(chunks: int, regs: int | None, arch: str, lanes: int) -> int:
    """Warps of launch_grouped's grid for a table of chunks: grid_size's min(blocks needed, SMs x
    blocks resident at once), the blocks needed ceil(chunks / kWarps) (one chunk a warp at
    least), the resident ones from the kernel's registers (``resident_blocks``: what
    cudaOccupancyMaxActiveBlocksPerMultiprocessor gives a kernel without shared memory)."""
    per_block = THREADS // lanes
    return per_block * min(-(-chunks // per_block), resident_blocks(regs, arch))


def steady_state(case: dict, arch: str, chunk: tuple[int, int] | None) -> None:
    """Add the steady state (STEADY_TEXT) to a case.

    Args:
        case: a row of ``cases_of`` (interior and set-up columns), changed in place: it gains
            ``setup_per`` {tensors: set-up instructions}, ``elems_per_setup`` {tensors: elements
            a thread writes per set-up} and ``steady_per_elem`` {tensors: SASS per element};
            a grouped CUDA case also ``grouped_warps`` {tensors: W} and ``entries_crossed``
            {tensors: the most entries a warp crosses}.
        arch: its target (SMs of MODELS; resident blocks at the case's registers).
        chunk: (kLanes, kChunkUnits) of the grouped CUDA kernel, or None.
    """
    interior, setup = case["sass_per_elem"], case.get("setup_insts")
    grouped = "grouped" in case["kernel"]
    per, elems = {}, {}
    if case["backend"] == "cuda" and not grouped and setup is not None:
        units = TOTAL_ELEMENTS // 4
        threads = THREADS * min(-(-units // THREADS), resident_blocks(case.get("regs"), arch))
        per[1], elems[1] = setup, 4 * -(-units // threads)
    elif case["backend"] == "cuda" and grouped and setup is not None and chunk:
        lanes, units = chunk
        crossed, warps_of = {}, {}
        for n in TENSOR_COUNTS:
            per_tensor = -(-(TOTAL_ELEMENTS // n // 4) // units)
            warps_of[n] = grouped_warps(per_tensor * n, case.get("regs"), arch, lanes)
            fewest, crossed[n] = warp_ranges(per_tensor, n, warps_of[n])
            per[n] = (
                setup
                + search_steps(n) * (case.get("search_step_insts") or 0)
                + crossed[n] * (case.get("entry_insts") or 0)
            )
            elems[n] = fewest * 4 * units // lanes
        case["grouped_warps"], case["entries_crossed"] = warps_of, crossed
    elif case["backend"] == "triton" and grouped:
        for n, found in sorted(case.get("setup_by_tensors", {}).items()):
            per[n], elems[n] = found, (case.get("reps") or 1) * case["elems"]
    elif case["backend"] == "triton":
        per[1], elems[1] = 0, case["elems"]  # no loop: the path is the program, set-up included
    case["setup_per"] = per
    case["elems_per_setup"] = elems
    case["steady_per_elem"] = {n: interior + per[n] / elems[n] for n in per}


def _elems_by_kind(elems_of, symbol, dtype):
    """elems(path, kind) for one function: the fixed count of elems_of (Triton), else the bits of
    the path's stores that the kind writes: interior, the widest; edge, the narrower (all of them
    when it holds one width); shifted, all."""

    def elems(path, kind="interior"):
        fixed = elems_of(symbol, path, dtype)
        if fixed is not None:
            return fixed
        widths = [_sass.store_bits(i) for i in path.stores()]
        top = max(widths)
        narrower = [w for w in widths if w < top] or widths  # an edge path of narrower stores only
        chosen = {"edge": narrower, "shifted": widths}.get(kind, [w for w in widths if w == top])
        return sum(chosen) / 8 / BYTES.get(dtype, 4)

    return elems


def cases_of(functions, usage, ptxas, names, backend, elems_of, refs, arch=ARCH) -> list[dict]:
    """Cases of one backend's functions.

    Args:
        functions: symbol -> _sass.Function.
        usage, ptxas: symbol -> cuobjdump -res-usage and ptxas -v fields.
        names: symbol -> (kernel, dtype, mode).
        backend: "cuda" or "triton".
        elems_of: (symbol, path, dtype) -> elements per trip, or None to count them from the
            path's stores (``_elems_by_kind``).
        refs: {(backend, dtype, arch): {mode: histogram}} of the single-mode kernels' fast paths,
            filled here (they are processed first); a kernel without a mode in its name (not
            words) then gets one case per reference mode, its paths matched by _sass.match.
        arch: the target the functions were compiled for.

    Returns:
        One dict per case: the columns of _sass.metrics and the edge, misaligned and set-up
        columns of _sass.Analyzer.related.
    """
    out = []
    for symbol in sorted(functions, key=lambda s: (names[s][2] is None and names[s][1] != "words", s)):
        kernel, dtype, mode = names[symbol]
        an = _sass.Analyzer(functions[symbol])
        res = {**usage.get(symbol, {}), **ptxas.get(symbol, {})}
        common = {
            "backend": backend,
            "arch": arch,
            "kernel": kernel,
            "dtype": dtype,
            "symbol": symbol,
            "regs": res.get("REG", res.get("regs")),
            "stack": res.get("stack", res.get("STACK")),
            "local_bytes": res.get("LOCAL"),
            "spill_stores": res.get("spill_stores"),
            "spill_loads": res.get("spill_loads"),
            "local_ops_static": sum(i.base in ("LDL", "STL") for b in an.fn.blocks for i in b.insts),
        }
        key = (backend, dtype, arch)
        runtime_mode = mode is None and dtype != "words" and bool(refs.get(key))
        paths = _sass.paths_of(an, runtime_mode)
        if not paths:
            out.append({**common, "mode": mode, "error": "no global store found"})
            continue
        if mode is None and dtype != "words" and not runtime_mode:
            common["note"] = "mode is a run-time value and no single-mode kernel was measured to match it"
        chosen = _sass.match(paths, refs[key]) if runtime_mode else [(paths[0], mode, None)]
        elems = _elems_by_kind(elems_of, symbol, dtype)
        for path, m, dist in chosen:
            others = set().union(*(set(q.blocks) for q, *_ in chosen if q is not path))
            row = {**common, "mode": m, **_sass.metrics(an, path, elems(path), others)}
            rel = an.related(path, [q.header for q, *_ in chosen if q.header is not None])
            edge = rel["edge"]
            row["edge_per_elem"] = len(edge.insts) / elems(edge, "edge") if edge else None
            # Misaligned tensors: the costliest of the shifted-run loops (one per shift), else
            # (fp64, words, Triton) the edge path, which they take for every unit.
            row["shifted_per_elem"] = max((len(q.insts) / elems(q, "shifted") for q in rel["shifted"]), default=None)
            row["misaligned_per_elem"] = row["shifted_per_elem"] or row["edge_per_elem"]
            row["misaligned_by"] = "shifted runs" if rel["shifted"] else "edge path"
            row["prologue_insts"], row["epilogue_insts"] = rel["prologue"], rel["epilogue"]
            row["setup_insts"] = rel["prologue"] + rel["epilogue"] if path.header is not None else None
            row["search_step_insts"] = sum(c for _, c in rel["search"]) if rel["search"] else None
            # a kernel that searches a table walks its entries: the cost of crossing into the next
            row["entry_insts"] = rel["entry"] if rel["search"] else None
            if dist is not None:
                row["match_d"] = round(dist, 3)
            elif m is not None:
                refs.setdefault(key, {})[m] = path.histogram()
            out.append(row)
    return out


def cuda_cases(
    source: Path,
    modes: dict[int, str],
    work: Path,
    keep: Path | None,
    refs: dict,
    select=None,
    arch: str = ARCH,
    compiled: tuple[Path, str] | None = None,
) -> list[dict]:
    """Cases of one .cu file.

    Args:
        source: the .cu file (under csrc/cuda of its tree).
        modes: {value: name} of ``enum TransformMode`` and of the CUDA-only modes
            (``read_cuda_modes``).
        work: folder for the cubin.
        keep: folder to keep SASS and ptxas logs in, or None.
        refs: the single-mode histograms (``cases_of``).
        select: a predicate on (kernel, dtype, mode) to keep fewer; None keeps all.
        arch: the target.
        compiled: (cubin, ptxas log) of ``compile_cu`` when already compiled.

    Returns:
        The cases (``cases_of``) with their steady state (``steady_state``).
    """
    cubin, log = compiled or compile_cu(source, work, nvcc_flags(source.parents[2]), arch)
    if keep:
        (keep / f"{source.stem}.{arch}.ptxas.txt").write_text(log)
    functions, usage = disassemble(cubin, keep)
    symbols = [s for s in functions if not s.startswith("$")]
    names = {s: describe(d, modes) for s, d in zip(symbols, demangle(symbols), strict=True)}
    if select:
        symbols = [s for s in symbols if select(*names[s])]
    functions = {s: functions[s] for s in symbols}
    cases = cases_of(functions, usage, ptxas_info(log), names, "cuda", lambda s, p, d: None, refs, arch)
    chunk = grouped_chunk(source.parents[2])
    for c in cases:
        if "error" not in c:
            steady_state(c, arch, chunk)
    return cases


def triton_cases(
    root: Path,
    modes: dict[int, str],
    work: Path,
    keep: Path | None,
    refs: dict,
    select=None,
    arch: str = ARCH,
) -> list[dict]:
    """Cases of the Triton kernels.

    Args:
        root: the source tree.
        modes: {value: name} of ``enum TransformMode``.
        work: folder for cubins and PTX (keep, when given).
        keep: folder to keep SASS in, or None.
        refs: the single-mode histograms (``cases_of``).
        select: a predicate on (kernel, dtype, mode) to compile fewer; None compiles all.
        arch: the target, "sm_90" or "sm_80".

    Returns:
        The cases, one per kernel, dtype and mode: the grouped kernel's row is its compile for
        256 tensors, with the set-up of every tensor count (``setup_by_tensors``) and the steady
        state; error rows for what did not import or compile.
    """
    capability = int(arch.split("_")[1])
    functions, usage, ptxas, names, elems, extra = {}, {}, {}, {}, {}, {}
    failed = []
    for k in _sass_triton.compile_all(root, modes, keep or work, select, capability):
        if "error" in k:
            failed.append({"backend": "triton", "arch": arch, **k})
            continue
        mode = "" if k["mode"] is None else k["mode"]
        count = "" if k["tensors"] is None else f",n={k['tensors']}"
        symbol = f"{k['kernel']}[{k['dtype']},{mode}{count}]"
        fns, use = disassemble(k["cubin"], keep)
        functions[symbol], usage[symbol] = fns[k["name"]], use.get(k["name"], {})
        log = _run(_sass_triton.ptxas_command(k["ptx"], k["options"], capability), "ptxas -v")
        ptxas[symbol] = next(iter(ptxas_info(log.stdout + log.stderr).values()), {})
        names[symbol] = (k["kernel"], k["dtype"], k["mode"])
        # a program is 4 BLOCK elements (one Philox block per 4) over 32 num_warps threads
        elems[symbol] = 4 * k["block"] / (32 * k["num_warps"]) if k["block"] else None
        extra[symbol] = {
            "typed_by": k["typed_by"],
            "options": k["options"],
            "tensors": k["tensors"],
            "reps": k["reps"],
        }
    cases = cases_of(functions, usage, ptxas, names, "triton", lambda s, p, d: elems[s], refs, arch)
    for c in cases:
        c.update(extra[c["symbol"]])
    return _merge_tensor_counts(cases, arch) + failed


def _merge_tensor_counts(cases: list[dict], arch: str) -> list[dict]:
    """One row per grouped (dtype, mode): the 256-tensor compile (else the first), with
    ``setup_by_tensors`` {count: set-up instructions} of every compile; then every steady state."""
    primary, setups = {}, {}
    for c in cases:
        if c.get("tensors") is None or "error" in c:
            continue
        key = (c["kernel"], c["dtype"], c["mode"])
        setups.setdefault(key, {})[c["tensors"]] = c.get("setup_insts")
        if key not in primary or c["tensors"] == 256:
            primary[key] = c
    out = []
    for c in cases:
        if c.get("tensors") is not None and "error" not in c:
            key = (c["kernel"], c["dtype"], c["mode"])
            if primary[key] is not c:
                continue
            c["setup_by_tensors"] = {n: v for n, v in sorted(setups[key].items()) if v is not None}
        if "error" not in c:
            steady_state(c, arch, None)
        out.append(c)
    return out


def commit(root: Path) -> tuple[str, bool]:
    """(12-digit commit of root, or TINIT_COMMIT; whether the measured sources differ from it)."""

    def git(*args):
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout

    try:
        dirty = bool(git("status", "--porcelain", "--untracked-files=no", "--", "csrc", "triton_kernels", "tinit"))
        found = git("rev-parse", "--short=12", "HEAD").strip()
    except (OSError, subprocess.CalledProcessError):
        found, dirty = "unknown", False
    return os.environ.get("TINIT_COMMIT", found)[:12], dirty


def versions() -> dict:
    nvcc = (
        subprocess.run([shutil.which("nvcc"), "--version"], check=False, capture_output=True, text=True).stdout
        if shutil.which("nvcc")
        else ""
    )
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    release = re.search(r"release [\d.]+, V[\d.]+", nvcc)
    return {
        "nvcc": release.group(0) if release else None,
        "triton": triton_version,
        "nvdisasm": tool("nvdisasm"),
        "cuobjdump": tool("cuobjdump"),
    }


def _fmt(value, digits=1) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


COLUMNS = [
    "backend",
    "kernel",
    "dtype",
    "mode",
    "interior/elem",
    "edge/elem",
    "misaligned/elem",
    "set-up",
    "steady 1 / 256 / 4096",
    "tbl ld/elem",
    "smem+bar/elem",
    "slow/elem",
    "FP64/elem",
    "MUFU/elem",
    "cvt/elem",
    "regs",
    "spill st/ld B",
    "stack B",
    "LDL+STL",
    "store",
    "elems/iter",
    "est G elem/s",
]


def _setup_cell(c: dict) -> str:
    """Set-up instructions per thread: grouped CUDA "P + S/step + E/entry" (per warp, search step
    and entry crossed), Triton grouped one figure per tensor count, else the prologue and epilogue
    of the loop; "in path" without a loop."""
    if c.get("search_step_insts"):
        entry = f" + {c['entry_insts']}/entry" if c.get("entry_insts") is not None else ""
        return f"{c['setup_insts']} + {c['search_step_insts']}/step{entry}"
    if c.get("setup_by_tensors"):
        return " / ".join(str(v) for v in c["setup_by_tensors"].values())
    return "in path" if c.get("setup_insts") is None else str(c["setup_insts"])


def _steady_cell(c: dict) -> str:
    steady = c.get("steady_per_elem") or {}
    if len(steady) > 1:
        return " / ".join(_fmt(steady.get(n), 2) for n in TENSOR_COUNTS)
    return _fmt(next(iter(steady.values()), None), 2)


def _row(c: dict) -> str:
    if "error" in c:
        return (
            f"| {c['backend']} | {c['kernel']} | {c['dtype']} | {c.get('mode_name') or '-'} | "
            f"error: {c['error']} |" + " |" * (len(COLUMNS) - 5)
        )
    mode = c.get("mode_name") or "-"
    if "match_d" in c:
        mode += f" (d={c['match_d']:.2f})"
    est = f"{c['est_gelem_s']:.0f} ({c['bound']})"
    if c.get("p_diverge"):
        est += f"; P={c['p_diverge']}: {c['weighted_est_gelem_s']:.0f}"
    misaligned = _fmt(c.get("misaligned_per_elem"), 2)
    if c.get("misaligned_per_elem") is not None and c.get("misaligned_by") == "edge path":
        misaligned += " (edge)"
    cells = [
        c["backend"],
        c["kernel"],
        c["dtype"],
        mode,
        _fmt(c["sass_per_elem"], 2),
        _fmt(c.get("edge_per_elem"), 2),
        misaligned,
        _setup_cell(c),
        _steady_cell(c),
        _fmt(c.get("table_loads_per_elem"), 2),
        _fmt(c.get("shared_per_elem"), 2),
        _fmt(c["slow_per_elem"]),
        _fmt(c["fp64_per_elem"]),
        _fmt(c["mufu_per_elem"]),
        _fmt(c["cvt_per_elem"]),
        _fmt(c["regs"]),
        f"{_fmt(c['spill_stores'])}/{_fmt(c['spill_loads'])}",
        _fmt(c["stack"]),
        _fmt(c["local_ops_fast"]),
        c["store"],
        _fmt(c["elems"], 0),
        est,
    ]
    return "| " + " | ".join(cells) + " |"


def markdown(report: dict) -> str:
    """The report as markdown: the command, versions and models, then one table per arch.

    Args:
        report: what ``run`` returns (with "command" added by ``main``).

    Returns:
        The text.
    """
    head = (
        f"`{report['command']}` at {report['commit']}{' (sources modified)' if report['dirty'] else ''}, "
        f"{report['date']}; nvcc {report['versions']['nvcc']}, triton {report['versions']['triton']}, "
        f"{', '.join(report['archs'])}."
    )
    skipped = "".join(f"\n\nSkipped: {why}" for why in report["skipped"])
    lines = [head + skipped, "", f"Model: {report['model']}.", "", f"Steady state: {report['steady_model']}."]
    for arch in report["archs"]:
        model = MODELS[arch]
        lines += [
            "",
            f"### {arch} ({model['gpu']} model)",
            "",
            "| " + " | ".join(COLUMNS) + " |",
            "|" + "---|" * len(COLUMNS),
        ]
        lines += [_row(c) for c in report["cases"] if c.get("arch", ARCH) == arch]
    return "\n".join(lines) + "\n"


def _compile_all_cu(root: Path, work: Path, archs) -> dict:
    """{(.cu, arch): (cubin, ptxas log)} of every CU_FILES x archs, two nvcc at a time."""
    from concurrent.futures import ThreadPoolExecutor

    jobs = [(cu, arch) for arch in archs for cu in CU_FILES]
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = {job: pool.submit(compile_cu, root / job[0], work, nvcc_flags(root), job[1]) for job in jobs}
        return {job: future.result() for job, future in done.items()}


def run(
    root: Path,
    cuda: bool = True,
    triton: bool = True,
    keep: Path | None = None,
    select=None,
    p_diverge: dict | None = None,
    archs=ARCHS,
) -> dict:
    """Measure root's kernels.

    Args:
        root: the source tree.
        cuda, triton: which backends to measure.
        keep: folder to keep cubins, SASS, PTX and ptxas logs in, or None.
        select: select(kernel, dtype, mode) -> bool limits what is compiled (Triton) and
            analysed; a kernel whose mode is a run-time value is matched only against the
            single-mode kernels selected with it. None: everything.
        p_diverge: {mode name or value: P} for the weighted figure.
        archs: the targets, of ARCHS.

    Returns:
        The report (what --json writes).
    """
    header = root / "csrc" / "include" / "tinit" / "transform.h"
    modes = read_modes(header)
    cuda_only = read_cuda_modes(header, modes)
    cuda_modes = {**modes, **cuda_only}
    cases, refs, skipped = [], {}, []
    with tempfile.TemporaryDirectory() as tmp:
        work = keep or Path(tmp)
        compiled = {}
        if cuda and shutil.which("nvcc"):
            compiled = _compile_all_cu(root, work, archs)
        elif cuda:
            skipped.append("cuda: no nvcc on PATH")
        for arch in archs:
            for cu in CU_FILES if compiled else ():
                cases += cuda_cases(root / cu, cuda_modes, work, keep, refs, select, arch, compiled[(cu, arch)])
            if triton:
                try:
                    cases += triton_cases(root, modes, work, keep, refs, select, arch)
                except ImportError as exc:
                    skipped.append(f"triton: {exc}")
                    triton = False
    p_diverge = p_diverge or {}
    for c in cases:
        c["mode_name"] = cuda_modes.get(c["mode"]) if c.get("mode") is not None else None
        if "error" in c:
            continue
        c.update(throughput(c["sass_per_elem"], c["dtype"], c["arch"]))
        p = p_diverge.get(c["mode_name"], p_diverge.get(str(c["mode"]), 0.0))
        if p:
            weighted = c["sass_per_elem"] + p * c["slow_per_elem"]
            c.update(
                p_diverge=p,
                weighted_per_elem=weighted,
                weighted_est_gelem_s=throughput(weighted, c["dtype"], c["arch"])["est_gelem_s"],
            )
    sha, dirty = commit(root)
    return {
        "commit": sha,
        "dirty": dirty,
        "date": datetime.date.today().isoformat(),
        "arch": archs[0],
        "archs": list(archs),
        "root": str(root),
        "versions": versions(),
        "nvcc_flags": nvcc_flags(root),
        "modes": modes,
        "cuda_only_modes": cuda_only,
        "model": MODEL_TEXT,
        "model_constants": {arch: MODELS[arch] for arch in archs},
        "steady_model": STEADY_TEXT,
        "tensor_counts": list(TENSOR_COUNTS),
        "total_elements": TOTAL_ELEMENTS,
        "p_diverge": p_diverge,
        "skipped": skipped,
        "cases": cases,
    }


def main(argv=None) -> int:
    """The command line (module docstring); returns 1 when a case is an error row, else 0."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cuda", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--triton", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument(
        "--arch",
        action="append",
        choices=ARCHS,
        help=f"target to compile for (repeat for several; default: {' and '.join(ARCHS)})",
    )
    parser.add_argument("--md", type=Path, help="also write the markdown table here")
    parser.add_argument("--json", type=Path, help="JSON path (default bench/results/sass_budget_<date>_<commit>.json)")
    parser.add_argument("--keep-dir", type=Path, help="keep cubins, SASS, PTX and ptxas logs here")
    parser.add_argument("--root", type=Path, default=REPO, help="source tree to measure (default: this checkout)")
    parser.add_argument(
        "--filter",
        help="regex on 'backend/kernel/dtype/mode' of the cases to report, e.g. '^cuda/trunc_normal_kernel/fp32/'",
    )
    parser.add_argument(
        "--p-diverge",
        action="append",
        default=[],
        metavar="MODE=P",
        help="chance a warp takes a mode's slow blocks (mode name or value), e.g. tail=0.01",
    )
    args = parser.parse_args(argv)
    if args.keep_dir:
        args.keep_dir.mkdir(parents=True, exist_ok=True)
    p_diverge = {k: float(v) for k, v in (item.split("=", 1) for item in args.p_diverge)}
    pattern = re.compile(args.filter) if args.filter else None
    archs = tuple(dict.fromkeys(args.arch)) if args.arch else ARCHS
    report = run(args.root.resolve(), args.cuda, args.triton, args.keep_dir, None, p_diverge, archs)
    report["cases"] = [
        c
        for c in report["cases"]
        if pattern is None or pattern.search(f"{c['backend']}/{c['kernel']}/{c['dtype']}/{c['mode_name'] or ''}")
    ]
    report["command"] = " ".join(["python bench/sass_budget.py", *(argv if argv is not None else sys.argv[1:])])
    text = markdown(report)
    sys.stdout.write(text)
    if args.md:
        args.md.write_text(text)
    path = args.json or REPO / "bench" / "results" / f"sass_budget_{report['date']}_{report['commit']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1, default=str) + "\n")
    print(f"wrote {path}")
    return 1 if any("error" in c for c in report["cases"]) else 0


if __name__ == "__main__":
    sys.exit(main())
