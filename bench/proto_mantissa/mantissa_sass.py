"""SASS instructions per element of the prototype's two-sided loops beside today's, counted by
bench/sass_budget.py's own rules (``cuda_cases``, ``triton_cases``: the interior path of the hot
loop, the steady state at 2^28 elements), for sm_90 and sm_80, without a GPU.

- CUDA: proto_kernel.cu, the shipped trunc_normal_kernel.cu included whole plus three modes whose
  transform is ndtri_mantissa.h's, compiled once per target with the extension's nvcc flags: the
  shipped modes and the prototype's come out of one cubin.
- Triton: triton_kernels/ copied to a temporary tree whose transform.py has ``ndtri_table`` and
  ``ndtri_table_pair`` replaced by TRITON_PROTO (the rest unchanged), compiled beside the
  checkout's own for the single-tensor kernel ("mantissa"); and a second tree that also applies
  the upper side's sign to std (TRITON_SIGN_IN_STD, "mantissa+sd"): in the first, ptxas for sm_90
  keeps the side as a predicate across the table loads (P2R, ISETP, SEL) and loses what the
  transform saves.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import sass_budget as sb  # noqa: E402

ARCHS = ("sm_90", "sm_80")
DTYPES = ("fp32", "bf16")
# {kernel mode value: (case name, variant)} of proto_kernel.cu: the shipped modes and the prototype's.
CUDA_MODES = {
    1: ("two_sided", "today"),
    4: ("two_sided_unclamped", "today"),
    2: ("two_sided_precise", "today"),
    8: ("two_sided", "mantissa"),
    9: ("two_sided_unclamped", "mantissa"),
    10: ("two_sided_precise", "mantissa"),
}
TRITON_MODES = {1: "two_sided", 2: "two_sided_precise"}

TRITON_PROTO = '''    @triton.jit
    def ndtri_table(table_ptr, s, q):
        """Prototype (bench/proto_mantissa): z = P(r) on every row, r from the mantissa bits of s; q unused."""
        c0, c1, c2, c3, c4, c5, c6, _ = ndtri_row(table_ptr, s)  # c0_lo unused
        r = ((s.to(tl.int32, bitcast=True) & 0x003FFFFF) | 0x3F800000).to(tl.float32, bitcast=True) - 1.25
        return tl.fma(ndtri_acc(c1, c2, c3, c4, c5, c6, r), r, c0)

    @triton.jit
    def ndtri_table_pair(table_ptr, s, q):
        """Prototype: the same z as (z_hi, z_lo), ``tinit::ndtri_poly``'s pair as it stands."""
        c0, c1, c2, c3, c4, c5, c6, c7 = ndtri_row(table_ptr, s)
        r = ((s.to(tl.int32, bitcast=True) & 0x003FFFFF) | 0x3F800000).to(tl.float32, bitcast=True) - 1.25
        acc = ndtri_acc(c1, c2, c3, c4, c5, c6, r)
        p_hi = tl.fma(acc, r, c0)
        return p_hi, tl.fma(acc, r, c0 - p_hi) + c7

'''


# two_sided_value's sign word (a bit flip of z after the loads) -> the sign on sd_hi and sd_lo
# before them (two selects of a constant; the same values: (-sd) z = -(sd z) exactly).
TRITON_SIGN_IN_STD = (
    """        sign = tl.where(lower, 0, 0x80000000).to(tl.uint32)
        zl = ndtri_table(table_ptr, s, q)
        z = (zl.to(tl.uint32, bitcast=True) ^ sign).to(tl.float32, bitcast=True)
        return clamp_to(tl.fma(P.sd_hi, z, tl.fma(P.sd_lo, z, P.mean)), P)""",
    """        sd_hi = tl.where(lower, P.sd_hi, -P.sd_hi)
        sd_lo = tl.where(lower, P.sd_lo, -P.sd_lo)
        zl = ndtri_table(table_ptr, s, q)
        return clamp_to(tl.fma(sd_hi, zl, tl.fma(sd_lo, zl, P.mean)), P)""",
)


def _row(case: dict, variant: str, mode: str) -> dict:
    return {
        "backend": case["backend"],
        "arch": case["arch"],
        "dtype": case["dtype"],
        "mode": mode,
        "variant": variant,
        "interior": case.get("sass_per_elem"),
        "steady": next(iter(case.get("steady_per_elem", {}).values()), None),
        "regs": case.get("regs"),
        "table_loads": case.get("table_loads_per_elem"),
        "histogram": case.get("histogram"),
        "error": case.get("error"),
    }


def cuda_rows(work: Path) -> list[dict]:
    """The CUDA single kernel's cases, both variants, every arch of ARCHS."""
    source = HERE / "proto_kernel.cu"
    flags = sb.nvcc_flags(ROOT)
    with ThreadPoolExecutor(max_workers=2) as pool:
        compiled = {a: pool.submit(sb.compile_cu, source, work, flags, a) for a in ARCHS}
        compiled = {a: f.result() for a, f in compiled.items()}
    modes = {value: f"{variant}/{name}" for value, (name, variant) in CUDA_MODES.items()}
    rows = []
    for arch in ARCHS:

        def select(kernel, dtype, mode):
            return kernel == "trunc_normal_kernel" and dtype in DTYPES and mode in CUDA_MODES

        cases = sb.cuda_cases(source, modes, work, None, {}, select, arch, compiled[arch])
        rows += [_row(c, *reversed(CUDA_MODES[c["mode"]])) for c in cases]
    return rows


def patched_triton_tree(dest: Path, sign_in_std: bool = False) -> Path:
    """A tree holding a copy of the checkout's triton_kernels/ with TRITON_PROTO in transform.py
    (and TRITON_SIGN_IN_STD when asked)."""
    shutil.copytree(ROOT / "triton_kernels", dest / "triton_kernels")
    path = dest / "triton_kernels" / "transform.py"
    text = path.read_text()
    start = text.index("    @triton.jit\n    def ndtri_table(table_ptr, s, q):")
    end = text.index("    @triton.jit\n    def two_sided_s(")
    if "ndtri_table_pair" not in text[start:end]:
        raise RuntimeError("triton_kernels/transform.py changed: ndtri_table_pair no longer follows ndtri_table")
    text = text[:start] + TRITON_PROTO + text[end:]
    if sign_in_std:
        if TRITON_SIGN_IN_STD[0] not in text:
            raise RuntimeError("triton_kernels/transform.py changed: two_sided_value's sign word not found")
        text = text.replace(*TRITON_SIGN_IN_STD)
    path.write_text(text)
    return dest


def triton_rows(work: Path) -> list[dict]:
    """The Triton single kernel's two-sided cases, today's (the checkout) and the prototype's."""

    def select(kernel, dtype, mode):
        return kernel == "_trunc_normal_kernel" and dtype in DTYPES and mode in TRITON_MODES

    rows = []
    trees = {
        "today": ROOT,
        "mantissa": patched_triton_tree(work / "tree"),
        "mantissa+sd": patched_triton_tree(work / "tree_sd", sign_in_std=True),
    }
    for variant, root in trees.items():
        for name in [m for m in sys.modules if m.startswith("_sass_budget_kernels")]:
            del sys.modules[name]  # _sass_triton imports each tree's copy under one package name
        for arch in ARCHS:
            out = work / f"{variant}_{arch}"
            out.mkdir()
            cases = sb.triton_cases(root, TRITON_MODES, out, None, {}, select, arch)
            rows += [_row(c, variant, TRITON_MODES.get(c.get("mode"), "?")) for c in cases]
    return rows


def measure(triton: bool = True) -> list[dict]:
    """Every row (CUDA, and Triton when asked and importable)."""
    with tempfile.TemporaryDirectory() as tmp:
        rows = cuda_rows(Path(tmp))
        if triton:
            try:
                rows += triton_rows(Path(tmp))
            except ImportError as exc:
                rows.append({"backend": "triton", "error": f"not measured: {exc}"})
    return rows


def table(rows: list[dict]) -> str:
    """Markdown: one line per backend, arch, dtype, mode and prototype variant: today -> prototype,
    interior (steady state), the instructions saved and the registers."""
    index = {(r["backend"], r["arch"], r["dtype"], r["mode"], r["variant"]): r for r in rows if not r.get("error")}
    lines = [
        "| backend | arch | dtype | mode | variant | today | prototype | saved | regs |",
        "|---|---|---|---|---|---:|---:|---:|---|",
    ]
    for key in sorted(index):
        today = index.get((*key[:4], "today"))
        if key[4] == "today" or not today:
            continue
        proto = index[key]
        lines.append(
            f"| {' | '.join(key)} | {today['interior']:.2f} ({today['steady']:.2f}) | "
            f"{proto['interior']:.2f} ({proto['steady']:.2f}) | {today['interior'] - proto['interior']:.2f} | "
            f"{today['regs']} -> {proto['regs']} |"
        )
    return "\n".join(lines) + "\n"
