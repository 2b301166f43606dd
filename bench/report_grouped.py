"""Turn a pytest-benchmark JSON of bench_grouped.py into a markdown report.

    python bench/report_grouped.py RAW.json [--out-dir DIR]

Prints the report and writes DIR/<date>_<commit>_grouped.md and .json (DIR
defaults to bench/results). Times are medians of whole-model calls; ratios
are the other methods' time over the grouped fill's, from the same run.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from _env import REPO, write_report

METHODS = ("grouped", "per_tensor", "fill_loop", "torch_loop", "native_fill")
LABELS = {
    "grouped": "grouped `init_model_`",
    "per_tensor": "`init_model_(grouped=False)`",
    "fill_loop": "loop of `tinit.fill_`",
    "torch_loop": "loop of `nn.init.trunc_normal_`",
    "native_fill": "native calls alone",
}
TARGET = 5.0  # the project's target: grouped >= 5x the per-tensor tinit loop, tensors averaging below 64 k elements


def summarise(raw: dict) -> list[dict]:
    """One row per model width: median seconds per method, model facts and ratios over grouped."""
    rows: dict[int, dict] = {}
    for bench in raw["benchmarks"]:
        info = bench["extra_info"]
        row = rows.setdefault(
            info["width"],
            {
                "width": info["width"],
                "blocks": info["blocks"],
                "tensors": info["tensors"],
                "numel": info["numel"],
                "mean_numel": info["mean_numel"],
                "seconds": {},
            },
        )
        row["seconds"][info["method"]] = bench["stats"]["median"]
    for row in rows.values():
        grouped = row["seconds"].get("grouped")
        row["over_grouped"] = {m: t / grouped for m, t in row["seconds"].items() if grouped}
    return [rows[w] for w in sorted(rows)]


def markdown(rows: list[dict], env: dict) -> str:
    """The whole report as markdown."""
    dirty = " (uncommitted changes)" if env.get("git_dirty") else ""
    out = [
        "# tinit grouped-fill benchmark",
        "",
        (
            f"- machine: {env['cpu_model']}, {env['logical_cpus']} logical CPUs ({env['cpu_simd']}), "
            f"torch threads {env['torch_threads']}"
        ),
        f"- torch {env['torch']}, tinit {env['tinit']}, Python {env['python']}",
        f"- commit {env['git_commit']}{dirty}, {env['date']}",
        "- GPT-2-style models (tinit.tools.toy_models.GPT), scheme gpt2, fp32; median of whole-model calls",
        "",
        "| model | tensors | mean elements | "
        + " | ".join(LABELS[m] for m in METHODS)
        + " | per-tensor tinit loop / grouped | torch loop / grouped | bound: tinit loop / native calls |",
        "| --- | ---: | ---: | " + " | ".join("---:" for _ in METHODS) + " | ---: | ---: | ---: |",
    ]
    for row in rows:
        times = [f"{row['seconds'][m] * 1e3:.1f} ms" if m in row["seconds"] else "-" for m in METHODS]
        ratio = row["over_grouped"]
        out.append(
            f"| d {row['width']}, {row['blocks']} blocks | {row['tensors']} | {row['mean_numel']:,.0f} | "
            + " | ".join(times)
            + f" | {ratio.get('fill_loop', float('nan')):.1f}x | {ratio.get('torch_loop', float('nan')):.0f}x"
            + f" | {_bound(row):.1f}x |"
        )
    out += [
        "",
        (
            f"Target: grouped >= {TARGET:.0f}x the per-tensor `tinit.fill_` loop when tensors "
            "average below 64 k elements:"
        ),
    ]
    for row in rows:
        ratio = row["over_grouped"].get("fill_loop")
        if ratio is not None and row["mean_numel"] < 64 * 1024:
            bound = _bound(row)
            why = (
                ""
                if ratio >= TARGET or bound >= TARGET
                else f"; the native calls alone allow at most {bound:.1f}x, whatever the Python costs"
            )
            out.append(f"- d {row['width']}: {ratio:.1f}x ({'met' if ratio >= TARGET else 'NOT met'}{why})")
    out += [
        "",
        (
            "bound: the `tinit.fill_` loop's time over the grouped fill's native calls alone (made from "
            "prepared arguments): the ratio a grouped fill with no Python cost at all would reach."
        ),
    ]
    return "\n".join(out) + "\n"


def _bound(row: dict) -> float:
    seconds = row["seconds"]
    return (
        seconds["fill_loop"] / seconds["native_fill"]
        if "fill_loop" in seconds and "native_fill" in seconds
        else float("nan")
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("raw", help="pytest-benchmark JSON (--benchmark-json) of bench/bench_grouped.py")
    parser.add_argument("--out-dir", default=str(REPO / "bench" / "results"))
    args = parser.parse_args(argv)

    raw = json.loads(Path(args.raw).read_text())
    env = raw["machine_info"]["tinit_env"]
    rows = summarise(raw)
    report = markdown(rows, env)
    print(report, end="")
    write_report(args.out_dir, env, "_grouped", report, {"models": rows, "benchmark_datetime": raw.get("datetime")})


if __name__ == "__main__":
    main()
