"""The portability check: the CPU kernels' bits on other architectures against the x86 extension.

Builds tests/portability_harness.cpp with the project's own torch-free CPU kernel sources
(``CPU_KERNEL_SOURCES`` of setup.py, compiled with setup.py's ``cxx_flags`` for the target's
machine, statically linked) for every target below, runs each binary natively or under qemu-user,
and compares its bytes with what the extension built in this checkout writes (the public
``tinit.trunc_normal_at_``, and ``torch.ops.tinit.trunc_normal_`` for the uniform records), for a
fixed case list (``cases``): every mode and dtype, far tails, narrow windows, subnormal std, each
with and without FTZ/DAZ set by the caller (the harness sets MXCSR on x86, FPCR.FZ on aarch64;
targets without such a control run the FTZ cases as n/a). The extension side also runs with 2
threads and with ``torch.set_flush_denormal(True)``; its 1-thread, FTZ-off run is the reference.

Prints a table (target x case group: equal/differ case counts, "-" where a group was not run),
then every differing case. Exits 1 on a difference not declared by ``--xfail GROUP`` (or
``--xfail TARGET:GROUP``), 2 when a build or run fails, or, with ``--strict``, when a tool is
missing (without it a target whose compiler or qemu is absent is skipped, saying so). It installs
nothing: CI installs the tools (.ci/run: g++-aarch64-linux-gnu, g++-s390x-linux-gnu,
g++-powerpc64le-linux-gnu, qemu-user). ``--contract fast`` builds with -ffp-contract=fast to show
that the sources keep contraction off whatever the build line (fp_contract.h); ``--contract
fast-unguarded`` also drops that header's pragmas, to show that the check catches a contracting build.

    python scripts/portability_check.py [--targets a,b] [--xfail GROUP] [--contract fast|fast-unguarded] [--strict]
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import math
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
HARNESS = ROOT / "tests" / "portability_harness.cpp"
SHIM = ROOT / "tests" / "portability_shim"
INF = math.inf
DTYPES = ("f32", "bf16", "f16", "f64")
BITS = {"f32": "u4", "bf16": "u2", "f16": "u2", "f64": "u8"}
GROUPS = ("uniform", "two-sided", "precise", "tail", "far-tail", "narrow", "subnormal", "fp64", "ftz", "ftz-fp64")
EXTENSION_ROWS = ("extension 2 threads", "extension FTZ 1 thread", "extension FTZ 2 threads")


class Target(NamedTuple):
    name: str
    machine: str  # platform.machine() spelling, for setup.py's cxx_flags
    compiler: str
    arch_flags: tuple[str, ...]
    runner: tuple[str, ...]  # () runs natively
    ftz: bool  # the harness can set FTZ/DAZ there
    note: str = ""


def _x86_native_runner(feature: str) -> tuple[str, ...] | None:
    """() when this host runs code for ``feature``, else None."""
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    return () if platform.machine() == "x86_64" and f" {feature}" in flags else None


def targets() -> list[Target]:
    """Every target the check knows, in table order."""
    v4_runner = _x86_native_runner("avx512bw")
    v3_runner = _x86_native_runner("avx2")
    x86 = "g++" if platform.machine() == "x86_64" else "x86_64-linux-gnu-g++"
    qemu_x86 = () if platform.machine() == "x86_64" else ("qemu-x86_64",)
    return [
        Target("x86-64", "x86_64", x86, ("-march=x86-64",), qemu_x86, True, "this host's CPU"),
        Target("x86-64@Nehalem", "x86_64", x86, ("-march=x86-64",), ("qemu-x86_64", "-cpu", "Nehalem"), True),
        # qemu 7.2's TCG does not emulate the AVX2 two-sided entries bit for bit (4 of 85 cases
        # differ under -cpu Haswell where the same binary on an AVX2 host agrees): the entries run
        # natively where the host has AVX2, and the portable entries under qemu.
        Target(
            "x86-64-v3",
            "x86_64",
            x86,
            ("-march=x86-64-v3",),
            v3_runner if v3_runner is not None else ("build-only",),
            True,
            "AVX2 entries, natively on an AVX2 host",
        ),
        Target(
            "x86-64-v3@Haswell",
            "x86_64",
            x86,
            ("-march=x86-64-v3",),
            ("env", "TINIT_CPU_PORTABLE=1", "qemu-x86_64", "-cpu", "Haswell"),
            True,
            "portable entries (qemu's AVX2 is not exact)",
        ),
        Target(
            "x86-64-v4",
            "x86_64",
            x86,
            ("-march=x86-64-v4",),
            v4_runner if v4_runner is not None else ("build-only",),
            True,
            "natively on this AVX-512 host"
            if v4_runner is not None
            else "built only: it runs only on an AVX-512 host (qemu's TCG has no AVX-512)",
        ),
        Target("aarch64 armv8-a", "aarch64", "aarch64-linux-gnu-g++", ("-march=armv8-a",), ("qemu-aarch64",), True),
        *(
            Target(f"aarch64 {cpu}", "aarch64", "aarch64-linux-gnu-g++", (f"-mcpu={cpu}",), ("qemu-aarch64",), True)
            for cpu in ("neoverse-n1", "neoverse-v1", "neoverse-n2")
        ),
        Target("s390x", "s390x", "s390x-linux-gnu-g++", (), ("qemu-s390x",), False, "big-endian"),
        Target("ppc64le", "ppc64le", "powerpc64le-linux-gnu-g++", (), ("qemu-ppc64le",), False),
    ]


def setup_definitions() -> dict:
    """``CPU_KERNEL_SOURCES`` and ``cxx_flags`` from setup.py, run without its build: every
    top-level statement except those that call ``setup`` or ``_extensions``."""
    path = ROOT / "setup.py"
    tree = ast.parse(path.read_text(), str(path))

    def builds(node: ast.stmt) -> bool:
        return any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("setup", "_extensions")
            for n in ast.walk(node)
        )

    tree.body = [node for node in tree.body if not builds(node)]
    namespace: dict = {"__file__": str(path), "__name__": "tinit_setup"}
    exec(compile(tree, str(path), "exec"), namespace)  # noqa: S102 (the checkout's own setup.py, minus the build)
    return {"sources": list(namespace["CPU_KERNEL_SOURCES"]), "cxx_flags": namespace["cxx_flags"]}


class Case(NamedTuple):
    group: str
    label: str
    dtype: str
    ftz: bool
    seed: int
    stream: int
    offset: int
    numel: int
    window: tuple  # ("normal", mean, std, a, b) or ("uniform", low, high)
    record: tuple[float, ...]


# (group, window, numel, offset[, dtypes[, FTZ settings]]): numel above the CPU fill's grain (32768)
# splits across 2 threads; the offset 2^34 - 1000 crosses the SIMD Philox engines' 2^32-block boundary.
WINDOWS = [
    ("uniform", ("uniform", -0.1, 0.1), 40_003, 0),
    ("uniform", ("uniform", -3.0, 5.0), 1_031, 3),
    ("two-sided", ("normal", 0.0, 1.0, -2.0, 2.0), 40_003, 1),
    ("two-sided", ("normal", 0.0, 0.02, -0.04, 0.04), 4_099, 2**34 - 1_000),
    ("two-sided", ("normal", 0.3, 1.0, -INF, 0.5), 4_099, 7),
    ("two-sided", ("normal", 0.0, 1.0, -INF, INF), 4_099, 0),
    ("precise", ("normal", 3.0, 1.0, 0.0, 6.0), 40_003, 5),
    ("precise", ("normal", 0.0, 1e-35, -2e-35, 2e-35), 4_099, 11),
    ("precise", ("normal", 0.0, 1e35, -2e35, 2e35), 4_099, 0),
    ("tail", ("normal", 0.0, 1.0, 8.5, INF), 40_003, 2),
    ("tail", ("normal", 0.0, 1.0, -INF, -9.0), 4_099, 13),
    ("tail", ("normal", 1.0, 2.0, 20.0, 21.0), 4_099, 0),
    ("far-tail", ("normal", 0.0, 1.0, 40.0, INF), 40_003, 0),
    ("far-tail", ("normal", 0.0, 1.0, -1000.5, -1000.0), 4_099, 9),
    ("far-tail", ("normal", 0.0, 1.0, 5e5, INF), 4_099, 2**34 - 1_000),
    ("narrow", ("normal", 0.0, 1.0, 0.5, 0.5 + 1e-6), 40_003, 0),
    ("narrow", ("normal", 0.0, 1.0, 1.0, 1.001), 4_099, 17),
    ("narrow", ("normal", 0.0, 1e-3, 2e-3, 2.0001e-3), 4_099, 0),
    ("subnormal", ("normal", 0.0, 1e-40, -3e-40, 3e-40), 40_003, 0),
    ("subnormal", ("normal", -1e-38, 1e-38, -1e-37, 0.0), 4_099, 4),
    ("subnormal", ("normal", 0.0, 1e-310, -3e-310, 3e-310), 4_099, 0),
    ("subnormal", ("normal", 0.0, 1e-45, -3e-45, 3e-45), 4_099, 6),  # fp32: values that underflow to 0
    # fp64 only, FTZ off only (for time): every element's s is below AS 241's central range, so each
    # takes a log, and libm's FMA and non-FMA variants differ for about 1e-5 of these arguments (7 of
    # the 10^6 values under an emulated Nehalem, glibc 2.36, at this window's seed: keep it last).
    ("two-sided", ("normal", 0.0, 1.0, -INF, -1.5), 1_000_003, 0, ("f64",), (False,)),
]


def cases() -> list[Case]:
    """The case list: every window in every dtype that can hold it, FTZ off and on."""
    import torch

    from tinit.params import transform_constants, uniform_constants

    torch_dtype = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16, "f64": torch.float64}
    out = []
    for i, (group, window, numel, offset, *only) in enumerate(WINDOWS):
        defaults = (DTYPES, (False, True))
        dtypes, ftzs = (*only, *defaults[len(only) :])
        for dtype in dtypes:
            try:
                if window[0] == "uniform":
                    record = uniform_constants(window[1], window[2], torch_dtype[dtype])
                else:
                    record = transform_constants(*window[1:], torch_dtype[dtype])
            except ValueError:
                continue  # e.g. N(0, 1e35^2) overflows fp16
            label = f"{window[0]}{window[1:]} {dtype}"
            seed = 2**64 - 1 - i if i % 5 == 4 else 1_000 + i  # some seeds above 2^63
            for ftz in ftzs:
                out.append(Case(group, label, dtype, ftz, seed, 3 * i, offset, numel, window, tuple(record)))
    return out


def column(case: Case) -> str:
    """The table column of a case."""
    if case.ftz:
        return "ftz-fp64" if case.dtype == "f64" else "ftz"
    return "fp64" if case.dtype == "f64" else case.group


def case_lines(selected: list[Case]) -> str:
    rows = []
    for c in selected:
        record = " ".join(float(v).hex() for v in c.record)
        rows.append(f"{c.seed} {c.stream} {c.offset} {c.numel} {c.dtype} {int(c.ftz)} {record}")
    return "\n".join(rows) + "\n"


def build(target: Target, setup: dict, contract: str | None, build_dir: Path) -> Path:
    """The harness for ``target`` (cached by a hash of the command and every source it reads)."""
    flags = [*setup["cxx_flags"](target.machine), *target.arch_flags]
    if contract is not None:
        flags.append(f"-ffp-contract={contract.removesuffix('-unguarded')}")
        if contract.endswith("-unguarded"):  # without fp_contract.h's pragmas: the build line decides
            flags.append("-DTINIT_TEST_CONTRACTED_BUILD")
    sources = [HARNESS, *(ROOT / s for s in setup["sources"])]
    includes = [SHIM, ROOT / "csrc" / "include", ROOT / "csrc" / "cpu"]
    command = [target.compiler, *flags, "-static", *(f"-I{d}" for d in includes), *map(str, sources)]
    digest = hashlib.sha256(" ".join(command).encode())
    for path in sorted({*sources, *(p for d in (*includes, ROOT / "csrc") for p in d.rglob("*.h"))}):
        digest.update(path.read_bytes())
    exe = build_dir / f"harness-{digest.hexdigest()[:16]}"
    with _BUILD_LOCKS.setdefault(exe.name, threading.Lock()):  # targets that share a build wait for it
        if not exe.exists():
            tmp = exe.with_suffix(".tmp")
            done = subprocess.run([*command, "-o", str(tmp)], check=False, capture_output=True, text=True, timeout=600)
            if done.returncode != 0:
                raise RuntimeError(f"{target.name}: build failed:\n{done.stderr[-4000:]}")
            tmp.replace(exe)
    return exe


_BUILD_LOCKS: dict[str, threading.Lock] = {}


def run_harness(target: Target, exe: Path, selected: list[Case]) -> list[np.ndarray]:
    """The harness's values of ``selected`` on ``target``, as bit patterns."""
    done = subprocess.run(
        [*target.runner, str(exe)], input=case_lines(selected).encode(), check=False, capture_output=True, timeout=600
    )
    if done.returncode != 0:
        raise RuntimeError(f"{target.name}: harness exited {done.returncode}: {done.stderr.decode()[-2000:]}")
    raw = done.stdout
    order = {b"\x04\x03\x02\x01": "<", b"\x01\x02\x03\x04": ">"}.get(raw[:4])
    if order is None:
        raise RuntimeError(f"{target.name}: the harness wrote no byte-order mark")
    values, pos = [], 4
    for c in selected:
        width = np.dtype(BITS[c.dtype]).itemsize
        values.append(np.frombuffer(raw, dtype=order + BITS[c.dtype], count=c.numel, offset=pos).astype(BITS[c.dtype]))
        pos += width * c.numel
    if pos != len(raw):
        raise RuntimeError(f"{target.name}: {len(raw) - pos} bytes more than the cases hold")
    return values


def extension_values(selected: list[Case], threads: int, ftz: bool) -> list[np.ndarray]:
    """The extension's values of ``selected`` (FTZ set by this caller when ``ftz``), as bit patterns."""
    import torch

    import tinit
    from tinit.params import trunc_normal_record

    torch_dtype = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16, "f64": torch.float64}
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    if ftz and not torch.set_flush_denormal(True):
        raise RuntimeError("torch.set_flush_denormal(True) is not supported on this CPU")
    # The host constants are computed afresh under the caller's FTZ/DAZ too (Python's float
    # arithmetic runs under the same MXCSR), as in a process that set it first.
    trunc_normal_record.cache_clear()
    try:
        out = []
        for c in selected:
            t = torch.empty(c.numel, dtype=torch_dtype[c.dtype])
            try:
                if c.window[0] == "uniform":
                    seed, stream = (v - 2**64 if v >= 2**63 else v for v in (c.seed, c.stream))
                    torch.ops.tinit.trunc_normal_(t, seed, stream, c.offset, list(c.record))
                else:
                    _, mean, std, a, b = c.window
                    tinit.trunc_normal_at_(
                        t, mean, std, a, b, seed=c.seed, stream=c.stream, offset=c.offset, backend="cpu"
                    )
            except ValueError as err:  # e.g. a subnormal std read as 0 under DAZ
                out.append(f"refused: {err}")
                continue
            out.append(t.view(torch.int16 if t.element_size() == 2 else t.dtype).numpy().view(BITS[c.dtype]).copy())
        return out
    finally:
        torch.set_flush_denormal(False)
        torch.set_num_threads(before)


def compare(name: str, selected: list[Case], got: list[np.ndarray], want: dict, table: dict, diffs: list) -> None:
    for c, values in zip(selected, got, strict=True):
        ref = want[(c.label, c.seed)]
        differ = values if isinstance(values, str) else int(np.count_nonzero(values != ref))
        cell = table.setdefault((name, column(c)), [0, 0])
        cell[1 if differ else 0] += 1
        if differ:
            diffs.append((name, column(c), c, differ))


def missing_tools(target: Target) -> list[str]:
    program = [word for word in target.runner if word != "env" and "=" not in word][:1]  # past `env VAR=1`
    tools = [target.compiler] + ([] if program == ["build-only"] else program)
    return [tool for tool in tools if shutil.which(tool) is None]


def print_table(rows: list[str], table: dict, notes: dict) -> None:
    width = max(len(r) for r in rows) + 2
    print("target".ljust(width) + "".join(g.rjust(11) for g in GROUPS) + "   (equal/differ cases)")
    for row in rows:
        cells = []
        for g in GROUPS:
            eq_diff = table.get((row, g))
            cells.append((f"{eq_diff[0]}/{eq_diff[1]}" if eq_diff else "-").rjust(11))
        print(row.ljust(width) + "".join(cells) + (f"   {notes[row]}" if row in notes else ""))


def declared(xfails: list[str], target: str, group: str) -> bool:
    return group in xfails or f"{target}:{group}" in xfails


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", help="comma-separated target names (default: all); see --list-targets")
    parser.add_argument("--list-targets", action="store_true", help="print the target names and exit")
    parser.add_argument("--xfail", action="append", default=[], help="a GROUP or TARGET:GROUP allowed to differ")
    parser.add_argument(
        "--contract",
        choices=("off", "fast", "fast-unguarded"),
        help="append -ffp-contract=... to the build flags (fast: the sources' fp_contract.h still keeps "
        "contraction off, the bits are the same; fast-unguarded: without that header's pragmas, which the "
        "check catches)",
    )
    parser.add_argument("--strict", action="store_true", help="a missing compiler or qemu is an error (exit 2)")
    parser.add_argument("--no-extension-variants", action="store_true", help="skip the 2-thread and FTZ rows")
    parser.add_argument("--build-dir", type=Path, default=ROOT / "build" / "portability")
    parser.add_argument("--jobs", type=int, default=2, help="parallel builds and runs (default 2)")
    args = parser.parse_args(argv)
    known = targets()
    if args.list_targets:
        print("\n".join(t.name for t in known))
        return 0
    chosen = known
    if args.targets:
        names = [n.strip() for n in args.targets.split(",")]
        unknown = [n for n in names if n not in {t.name for t in known}]
        if unknown:
            parser.error(f"unknown targets {unknown}; known: {[t.name for t in known]}")
        chosen = [t for t in known if t.name in names]
    bad_group = [x for x in args.xfail if x.rsplit(":", 1)[-1] not in GROUPS]
    if bad_group:
        parser.error(f"--xfail {bad_group}: groups are {GROUPS}")
    return run_check(args, chosen)


def run_check(args, chosen: list[Target]) -> int:
    start = time.monotonic()
    setup = setup_definitions()
    all_cases = cases()
    plain = [c for c in all_cases if not c.ftz]
    reference = extension_values(plain, 1, False)
    want = {(c.label, c.seed): v for c, v in zip(plain, reference, strict=True)}
    table: dict = {}
    diffs: list = []
    notes: dict = {}
    rows: list[str] = []
    if not args.no_extension_variants:
        ftz_cases = [c for c in all_cases if c.ftz]
        for row, selected, threads, ftz in zip(
            EXTENSION_ROWS, (plain, ftz_cases, ftz_cases), (2, 1, 2), (False, True, True), strict=True
        ):
            compare(row, selected, extension_values(selected, threads, ftz), want, table, diffs)
            rows.append(row)
    failed = run_targets(args, chosen, setup, all_cases, want, table, diffs, notes, rows)
    print_table(rows, table, notes)
    undeclared = [d for d in diffs if not declared(args.xfail, d[0], d[1])]
    for name, group, c, differ in diffs:
        tag = "" if declared(args.xfail, name, group) else "  (undeclared)"
        what = differ if isinstance(differ, str) else f"{differ} of {c.numel} elements"
        print(f"differ: {name} [{group}] {c.label} ftz={int(c.ftz)}: {what}{tag}")
    cases_run = sum(a + b for a, b in table.values())
    print(
        f"{len(all_cases)} cases ({len(WINDOWS)} windows x dtypes x FTZ), {cases_run} comparisons, "
        f"{time.monotonic() - start:.0f} s; contraction: {args.contract or 'as setup.py'}"
    )
    if failed:
        return 2
    return 1 if undeclared else 0


def run_targets(args, chosen, setup, all_cases, want, table, diffs, notes, rows) -> bool:
    """Build and run every target in ``chosen``; True when one could not be built or run."""
    runnable = []
    for target in chosen:
        missing = missing_tools(target)
        if missing:
            notes[target.name] = f"skipped: {', '.join(missing)} not on PATH"
            rows.append(target.name)
        else:
            runnable.append(target)
    failed = any(n.startswith("skipped") for n in notes.values()) and args.strict
    args.build_dir.mkdir(parents=True, exist_ok=True)

    def one(target: Target):
        exe = build(target, setup, args.contract, args.build_dir)
        if target.runner == ("build-only",):
            return None
        selected = [c for c in all_cases if target.ftz or not c.ftz]
        return selected, run_harness(target, exe, selected)

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [(t, pool.submit(one, t)) for t in runnable]
        for target, future in futures:
            rows.append(target.name)
            try:
                result = future.result()
            except (RuntimeError, subprocess.TimeoutExpired) as err:
                notes[target.name] = f"FAILED: {err}"
                failed = True
                continue
            if result is None:
                notes[target.name] = f"built, not run: {target.note}"
                continue
            compare(target.name, *result, want, table, diffs)
            note = [target.note] if target.note else []
            note += [] if target.ftz else ["no FTZ control: ftz n/a"]
            if note:
                notes[target.name] = "; ".join(note)
    return failed


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "2")
    sys.exit(main())
