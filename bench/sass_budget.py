"""Static SASS instruction budget of every tinit GPU kernel, per element, for sm_90 (H200), without a GPU.

    python bench/sass_budget.py [--cuda/--no-cuda] [--triton/--no-triton] [--md PATH] [--json PATH]
                                [--keep-dir DIR] [--root DIR] [--filter REGEX] [--p-diverge MODE=P ...]

Prints a markdown table (also --md) and writes the JSON report to --json or
bench/results/sass_budget_<date>_<commit>.json (commit: TINIT_COMMIT, else
``git rev-parse --short=12 HEAD`` of --root). --root measures another source
tree (e.g. ``git archive`` of a commit); --filter keeps the cases whose
"kernel/dtype/mode" matches; --keep-dir keeps cubins, SASS, PTX, ptxas logs.

CUDA: the kernels' .cu files (CU_FILES) are compiled with the extension's
nvcc flags (setup.py: -O3 -std=c++17 --fmad=false; torch's
COMMON_NVCC_FLAGS; -I csrc/include) by ``nvcc -cubin -arch=sm_90 -Xptxas
-v`` and disassembled with nvdisasm (PATH, else triton's). Each __global__
function is named from its demangled symbol: the first template argument
that is a type gives the dtype (float fp32, double fp64, __nv_bfloat16 bf16,
__half fp16, unsigned int words), the first integer (or enumerator) argument
the transform mode, named from ``enum TransformMode`` of transform.h (read
with a regex: modes are reported as the enum has them). Triton: _sass_triton
compiles every ``*_kernel`` for GPUTarget("cuda", 90, 32) with the argument
types its launcher passes, once per dtype and mode.

Metric (_sass states the CFG rules): the fast path of the hot loop, i.e. the
path from the loop header back to it through the block of the widest global
store that stores the most bits and has the fewest instructions, divided by
the elements it stores (STG.E.128 of fp32 = 4; STG.E.64 of bf16 = 4; an
unrolled loop stores more). Loop set-up before the first trip is not
counted; UMOV/BSSY/BSYNC/BRA are (they take issue slots). Triton kernels
have no loop: their path runs from entry to EXIT and covers 4 BLOCK /
(32 num_warps) elements per thread. Slow path: static instructions of the
loop's other blocks and of the subroutines they call, per element. FP64: D*
opcodes (not DEPBAR), F2F/I2F/F2I/FRND with .F64, MUFU.*64H. Conversions:
F2F, I2F, F2I, I2I, F2FP, I2FP, F2IP. Spills: ptxas -v (for Triton, triton's
ptxas rerun on its PTX with its flags); registers: cuobjdump -res-usage.
Kernels whose mode is a run-time value (grouped_kernel<T>: one loop per
mode; _grouped_kernel: one branch per mode) get one case per fast path,
named after the single-tensor kernel (same backend and dtype) whose
fast-path opcode histogram is nearest (L1 distance over its size, greedy one
to one; match_d). Two modes whose single-tensor code is identical cannot be
told apart there.

Throughput model (an issue-rate bound, stated in every report): G elements/s
= min(132 SMs x 4 schedulers x 32 lanes x 1.98 GHz / SASS per element,
4.8 TB/s / bytes per element). It ignores pipe limits (FP64 and MUFU issue
at a fraction of that rate), latency and occupancy. ``--p-diverge MODE=P``
adds a figure for fast + P x slow per element (P: the chance that a warp
takes the slow blocks; default 0).

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
ARCH = "sm_90"
NVCC_FLAGS = ["-O3", "-std=c++17", "--fmad=false"]  # setup.py, the extension's release nvcc flags
TORCH_NVCC_FLAGS = [
    "-D__CUDA_NO_HALF_OPERATORS__",
    "-D__CUDA_NO_HALF_CONVERSIONS__",
    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-D__CUDA_NO_HALF2_OPERATORS__",
    "--expt-relaxed-constexpr",
]  # COMMON_NVCC_FLAGS of torch, if torch is absent
MODEL = {"sms": 132, "schedulers": 4, "lanes": 32, "clock_ghz": 1.98, "hbm_tb_s": 4.8}
MODEL_TEXT = (
    "G elem/s = min(132 SMs x 4 schedulers x 32 lanes x 1.98 GHz / SASS per element, "
    "4.8 TB/s / bytes per element); weighted: SASS per element = fast + P(diverge) x slow"
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


def read_modes(header: Path) -> dict[int, str]:
    """``enum TransformMode`` of transform.h as {value: snake name}: kTwoSidedFar = 2 -> {2: "two_sided_far"}."""
    body = re.search(r"enum\s+(?:class\s+)?TransformMode\b[^{]*\{(.*?)\}", header.read_text(), re.DOTALL)
    if not body:
        raise ValueError(f"no enum TransformMode in {header}")
    modes, value = {}, -1
    for name, given in re.findall(r"\b(k\w+)\s*(?:=\s*(\d+))?\s*,?", re.sub(r"//[^\n]*", "", body.group(1))):
        value = int(given) if given else value + 1
        modes[value] = re.sub(r"(?<!^)(?=[A-Z])", "_", name[1:]).lower()
    return modes


def nvcc_flags(root: Path) -> list[str]:
    try:
        from torch.utils.cpp_extension import COMMON_NVCC_FLAGS as torch_flags
    except ImportError:
        torch_flags = TORCH_NVCC_FLAGS
    return [*NVCC_FLAGS, *torch_flags, "-I", str(root / "csrc" / "include")]


def compile_cu(source: Path, out_dir: Path, flags: list[str]) -> tuple[Path, str]:
    """``nvcc -cubin -arch=sm_90`` of one .cu: (cubin, ptxas -v log)."""
    cubin = out_dir / f"{source.stem}.{ARCH}.cubin"
    proc = _run(
        [
            shutil.which("nvcc") or "nvcc",
            "-cubin",
            f"-arch={ARCH}",
            *flags,
            "-Xptxas",
            "-v",
            "-o",
            str(cubin),
            str(source),
        ],
        f"nvcc {source.name}",
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


def throughput(per_elem: float, dtype: str | None) -> dict:
    """The model's estimate (G elements/s) and which of its two bounds sets it."""
    issue = MODEL["sms"] * MODEL["schedulers"] * MODEL["lanes"] * MODEL["clock_ghz"] / per_elem
    hbm = MODEL["hbm_tb_s"] * 1e3 / BYTES.get(dtype, 4)
    return {"est_gelem_s": min(issue, hbm), "bound": "issue" if issue < hbm else "hbm"}


def cases_of(functions, usage, ptxas, names, backend, elems_of, refs) -> list[dict]:
    """Cases of one backend's functions; names: symbol -> (kernel, dtype, mode).

    refs[(backend, dtype)] collects the single-mode kernels' fast-path histograms
    (processed first); a kernel without a mode in its name (not words) then gets
    one case per reference mode, its paths matched by _match.
    """
    out = []
    for symbol in sorted(functions, key=lambda s: (names[s][2] is None and names[s][1] != "words", s)):
        kernel, dtype, mode = names[symbol]
        an = _sass.Analyzer(functions[symbol])
        res = {**usage.get(symbol, {}), **ptxas.get(symbol, {})}
        common = {
            "backend": backend,
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
        runtime_mode = mode is None and dtype != "words" and bool(refs.get((backend, dtype)))
        paths = _sass.paths_of(an, runtime_mode)
        if not paths:
            out.append({**common, "mode": mode, "error": "no global store found"})
            continue
        if mode is None and dtype != "words" and not runtime_mode:
            common["note"] = "mode is a run-time value and no single-mode kernel was measured to match it"
        chosen = _sass.match(paths, refs[(backend, dtype)]) if runtime_mode else [(paths[0], mode, None)]
        for path, m, dist in chosen:
            others = set().union(*(set(q.blocks) for q, *_ in chosen if q is not path))
            row = {**common, "mode": m, **_sass.metrics(an, path, elems_of(symbol, path, dtype), others)}
            if not runtime_mode:
                # Misaligned tensors: the costliest of the shifted-run loops (one per shift).
                shifted = [q for q in map(an.fast_path, an.shifted_loops()) if q is not None]
                row["shifted_per_elem"] = max(
                    (len(q.insts) / elems_of(symbol, q, dtype) for q in shifted), default=None
                )
            if dist is not None:
                row["match_d"] = round(dist, 3)
            elif m is not None:
                refs.setdefault((backend, dtype), {})[m] = path.histogram()
            out.append(row)
    return out


def cuda_cases(
    source: Path, modes: dict[int, str], work: Path, keep: Path | None, refs: dict, select=None
) -> list[dict]:
    """Cases of one .cu file (select: a predicate on (kernel, dtype, mode) to keep fewer)."""
    cubin, log = compile_cu(source, work, nvcc_flags(source.parents[2]))
    if keep:
        (keep / f"{source.stem}.ptxas.txt").write_text(log)
    functions, usage = disassemble(cubin, keep)
    symbols = [s for s in functions if not s.startswith("$")]
    names = {s: describe(d, modes) for s, d in zip(symbols, demangle(symbols), strict=True)}
    if select:
        symbols = [s for s in symbols if select(*names[s])]
    functions = {s: functions[s] for s in symbols}

    def elems(symbol, path, dtype):
        return path.stored_bits() / 8 / BYTES.get(dtype, 4)

    return cases_of(functions, usage, ptxas_info(log), names, "cuda", elems, refs)


def triton_cases(
    root: Path, modes: dict[int, str], work: Path, keep: Path | None, refs: dict, select=None
) -> list[dict]:
    """Cases of the Triton kernels (select: a predicate on (kernel, dtype, mode) to compile fewer)."""
    functions, usage, ptxas, names, elems, extra = {}, {}, {}, {}, {}, {}
    failed = []
    for k in _sass_triton.compile_all(root, modes, keep or work, select):
        if "error" in k:
            failed.append({"backend": "triton", **k})
            continue
        symbol = f"{k['kernel']}[{k['dtype']},{'' if k['mode'] is None else k['mode']}]"
        fns, use = disassemble(k["cubin"], keep)
        functions[symbol], usage[symbol] = fns[k["name"]], use.get(k["name"], {})
        log = _run(_sass_triton.ptxas_command(k["ptx"], k["options"]), "ptxas -v")
        ptxas[symbol] = next(iter(ptxas_info(log.stdout + log.stderr).values()), {})
        names[symbol] = (k["kernel"], k["dtype"], k["mode"])
        # a program is 4 BLOCK elements (one Philox block per 4) over 32 num_warps threads
        elems[symbol] = 4 * k["block"] / (32 * k["num_warps"]) if k["block"] else None
        extra[symbol] = {"typed_by": k["typed_by"], "options": k["options"]}
    cases = cases_of(
        functions, usage, ptxas, names, "triton", lambda s, p, d: elems[s] or p.stored_bits() / 8 / BYTES[d], refs
    )
    for c in cases:
        c.update(extra[c["symbol"]])
    return cases + failed


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
    "SASS/elem",
    "slow/elem",
    "shifted/elem",
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


def markdown(report: dict) -> str:
    """The report as a markdown table, with the command, versions and model above it."""
    head = (
        f"`{report['command']}` at {report['commit']}{' (sources modified)' if report['dirty'] else ''}, "
        f"{report['date']}; nvcc {report['versions']['nvcc']}, triton {report['versions']['triton']}, "
        f"{report['arch']}."
    )
    skipped = "".join(f"\n\nSkipped: {why}" for why in report["skipped"])
    lines = [
        head + skipped,
        "",
        f"Model: {report['model']}.",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    for c in report["cases"]:
        if "error" in c:
            lines.append(
                f"| {c['backend']} | {c['kernel']} | {c['dtype']} | {c.get('mode_name') or '-'} | "
                f"error: {c['error']} |" + " |" * (len(COLUMNS) - 5)
            )
            continue
        mode = c.get("mode_name") or "-"
        if "match_d" in c:
            mode += f" (d={c['match_d']:.2f})"
        est = f"{c['est_gelem_s']:.0f} ({c['bound']})"
        if c.get("p_diverge"):
            est += f"; P={c['p_diverge']}: {c['weighted_est_gelem_s']:.0f}"
        cells = [
            c["backend"],
            c["kernel"],
            c["dtype"],
            mode,
            _fmt(c["sass_per_elem"], 2),
            _fmt(c["slow_per_elem"]),
            _fmt(c.get("shifted_per_elem"), 2),
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
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def run(
    root: Path,
    cuda: bool = True,
    triton: bool = True,
    keep: Path | None = None,
    select=None,
    p_diverge: dict | None = None,
) -> dict:
    """Measure root's kernels; returns the report (what --json writes).

    select(kernel, dtype, mode) -> bool limits what is compiled (Triton) and
    analysed; a kernel whose mode is a run-time value is matched only against
    the single-mode kernels selected with it.
    """
    modes = read_modes(root / "csrc" / "include" / "tinit" / "transform.h")
    cases, refs, skipped = [], {}, []
    with tempfile.TemporaryDirectory() as tmp:
        work = keep or Path(tmp)
        if cuda and shutil.which("nvcc"):
            for cu in CU_FILES:
                cases += cuda_cases(root / cu, modes, work, keep, refs, select)
        elif cuda:
            skipped.append("cuda: no nvcc on PATH")
        if triton:
            try:
                cases += triton_cases(root, modes, work, keep, refs, select)
            except ImportError as exc:
                skipped.append(f"triton: {exc}")
    p_diverge = p_diverge or {}
    for c in cases:
        c["mode_name"] = modes.get(c["mode"]) if c.get("mode") is not None else None
        if "error" in c:
            continue
        c.update(throughput(c["sass_per_elem"], c["dtype"]))
        p = p_diverge.get(c["mode_name"], p_diverge.get(str(c["mode"]), 0.0))
        if p:
            weighted = c["sass_per_elem"] + p * c["slow_per_elem"]
            c.update(
                p_diverge=p,
                weighted_per_elem=weighted,
                weighted_est_gelem_s=throughput(weighted, c["dtype"])["est_gelem_s"],
            )
    sha, dirty = commit(root)
    return {
        "commit": sha,
        "dirty": dirty,
        "date": datetime.date.today().isoformat(),
        "arch": ARCH,
        "root": str(root),
        "versions": versions(),
        "nvcc_flags": nvcc_flags(root),
        "modes": modes,
        "model": MODEL_TEXT,
        "model_constants": MODEL,
        "p_diverge": p_diverge,
        "skipped": skipped,
        "cases": cases,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cuda", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--triton", action=argparse.BooleanOptionalAction, default=True)
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
    report = run(args.root.resolve(), args.cuda, args.triton, args.keep_dir, None, p_diverge)
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
