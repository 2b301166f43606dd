"""Turn a pytest-benchmark JSON of bench_trunc_normal.py into a markdown report.

    python bench/report.py RAW.json [--peak PEAK.json | --no-peak] [--quick] [--out-dir DIR]

Prints the report and writes DIR/<date>_<commit>.md and .json (DIR defaults
to bench/results). Throughput is numel / median time of whole calls; write
GB/s counts the tensor's bytes once (numel * element size / time). Ratios:
tinit over torch.nn.init.trunc_normal_ and over torch.Tensor.normal_, and
tinit as a fraction of zero_ (the memory-write ceiling). Peak memory comes
from --peak (bench/peak_memory.py --json), or is measured now by running
bench/peak_memory.py (with --quick: on 64 MiB instead of 1 GiB).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import peak_memory
from _env import REPO, write_report

METHODS = ("tinit", "torch_trunc", "normal", "zero")
HEADLINE = (64 << 20, "f32")
TARGETS = {"torch_trunc": 60.0, "normal": 4.0}  # the project's targets: 2 cores, fp32, 64 M


def _rate(bench: dict) -> tuple[float, float]:
    """(G elements/s, write GB/s) from a benchmark's median time."""
    info = bench["extra_info"]
    t = bench["stats"]["median"]
    return info["numel"] / t / 1e9, info["numel"] * info["element_size"] / t / 1e9


def summarise(raw: dict) -> list[dict]:
    """One row per (numel, dtype): rates of every method and tinit's ratios."""
    cases: dict[tuple[int, str], dict] = {}
    for bench in raw["benchmarks"]:
        info = bench["extra_info"]
        row = cases.setdefault(
            (info["numel"], info["dtype"]), {"numel": info["numel"], "dtype": info["dtype"], "methods": {}}
        )
        gelem, gbs = _rate(bench)
        row["methods"][info["method"]] = {
            "gelem_s": gelem,
            "write_gb_s": gbs,
            "median_s": bench["stats"]["median"],
            "rounds": bench["stats"]["rounds"],
            "out_of_bounds": info.get("out_of_bounds", 0),
            "backend": info.get("backend"),
        }
    rows = []
    for key in sorted(cases, key=lambda k: (k[1] != "f32", k[0])):
        row = cases[key]
        m = row["methods"]
        if "tinit" in m:
            for other in ("torch_trunc", "normal", "zero"):
                if other in m:
                    row[f"tinit_over_{other}"] = m["tinit"]["gelem_s"] / m[other]["gelem_s"]
        rows.append(row)
    return rows


def _fmt(value: float | None, spec: str, suffix: str = "") -> str:
    return "n/a" if value is None else f"{value:{spec}}{suffix}"


def _label(numel: int) -> str:
    return f"{numel >> 20} M" if numel >= 1 << 20 else f"{numel:,}"


def markdown(rows: list[dict], env: dict, peak_rows: list[dict] | None, quick: bool) -> str:
    """The whole report as markdown."""
    dirty = " (uncommitted changes)" if env.get("git_dirty") else ""
    out = [
        f"# tinit fill benchmark{' (quick: 1 M elements)' if quick else ''}",
        "",
        (
            f"- machine: {env['cpu_model']}, {env['logical_cpus']} logical CPUs "
            f"({env['cpu_simd']}), torch threads {env['torch_threads']}"
        ),
        f"- torch {env['torch']}, tinit {env['tinit']}, Python {env['python']}",
        f"- commit {env['git_commit']}{dirty}, {env['date']}",
        "- every case: std 0.02, a = -0.04, b = 0.04 (+-2 sigma); median of whole in-place calls",
        "",
        "G elements/s (write GB/s in brackets):",
        "",
        (
            "| case | tinit | torch trunc_normal_ | normal_ | zero_ | tinit / torch trunc_normal_ "
            "| tinit / normal_ | tinit / zero_ |"
        ),
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        cells = []
        for method in METHODS:
            m = row["methods"].get(method)
            cells.append("skipped" if m is None else f"{m['gelem_s']:.3g} ({m['write_gb_s']:.3g})")
        out.append(
            f"| {row['dtype']} {_label(row['numel'])} | "
            + " | ".join(cells)
            + " | "
            + " | ".join(
                [
                    _fmt(row.get("tinit_over_torch_trunc"), ".1f", "x"),
                    _fmt(row.get("tinit_over_normal"), ".2f", "x"),
                    _fmt(row.get("tinit_over_zero"), ".0%"),
                ]
            )
            + " |"
        )
    headline = next((r for r in rows if (r["numel"], r["dtype"]) == HEADLINE), None)
    if headline is not None:
        out += ["", "Targets at 64 M fp32:"]
        for other, target in TARGETS.items():
            got = headline.get(f"tinit_over_{other}")
            verdict = "n/a" if got is None else ("met" if got >= target else "NOT met")
            out.append(f"- >= {target:g}x {other}: {_fmt(got, '.1f', 'x')} ({verdict})")
    violations = [(r, meth) for r in rows for meth, m in r["methods"].items() if m["out_of_bounds"]]
    if violations:
        out += ["", "Values outside the exact [a, b] (validation allows the dtype-rounded bounds for torch's):"]
        for r, meth in violations:
            out.append(f"- {meth} {r['dtype']} {_label(r['numel'])}: {r['methods'][meth]['out_of_bounds']:,} values")
    if peak_rows:
        out += ["", "## Peak memory", "", peak_memory.markdown(peak_rows)]
    out += [
        "",
        "Reproduce:",
        "",
        "```",
        "bash scripts/setup.sh",
        ".venv/bin/python -m pytest bench/bench_trunc_normal.py --benchmark-only "
        "--benchmark-json=bench/results/raw.json" + (" --quick" if quick else ""),
        ".venv/bin/python bench/report.py bench/results/raw.json" + (" --quick" if quick else ""),
        "```",
    ]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("raw", help="pytest-benchmark JSON (--benchmark-json)")
    parser.add_argument("--peak", help="bench/peak_memory.py --json output")
    parser.add_argument("--no-peak", action="store_true", help="leave peak memory out")
    parser.add_argument("--quick", action="store_true", help="measure peak memory on 64 MiB")
    parser.add_argument("--out-dir", default=str(REPO / "bench" / "results"))
    args = parser.parse_args(argv)

    raw = json.loads(Path(args.raw).read_text())
    env = raw["machine_info"]["tinit_env"]
    quick = args.quick or raw["machine_info"].get("tinit_quick", False)
    rows = summarise(raw)
    if args.no_peak:
        peak_rows = None
    elif args.peak:
        peak_rows = json.loads(Path(args.peak).read_text())
    else:
        peak_rows = peak_memory.measure(1 << 24 if quick else 1 << 28)
    report = markdown(rows, env, peak_rows, quick)
    print(report, end="")

    write_report(
        args.out_dir,
        env,
        "_quick" if quick else "",
        report,
        {"quick": quick, "cases": rows, "peak_memory": peak_rows, "benchmark_datetime": raw.get("datetime")},
    )


if __name__ == "__main__":
    main()
