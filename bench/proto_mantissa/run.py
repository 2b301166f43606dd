"""Every figure of docs/sass_budget.md's "A future stream version: every row in the mantissa variable".

    python bench/proto_mantissa/run.py [--samples N] [--words N] [--rounds N]
                                       [--no-accuracy] [--no-sass] [--no-triton] [--no-cpu]
                                       [--json PATH] [--md PATH]

1. The emulation: mantissa_fp32's today's transform against the native extension, bit for bit,
   on 2^20 words of each end-to-end window (skipped without the extension).
2. The table: the fit (mantissa_fit) against the committed ndtri_mantissa_table.h.
3. Accuracy (mantissa_accuracy): the worst error of every row (3..253) against mpmath at 50
   digits, today's and the prototype's, fp32 single and pair (N samples a row, 8 N on rows 3..5);
   the centre (s -> 1/2); the end-to-end windows against the fp64 oracle (2^20 words each).
4. SASS (mantissa_sass): the CUDA and Triton single-tensor loops, sm_90 and sm_80.
5. CPU (mantissa_cpu): the engines' bits, then interleaved rounds of today's and the prototype's
   AVX-512 and AVX2 transform, and the fill of a 2^24-element buffer beside its memset.

Writes bench/results/proto_mantissa_<date>_<commit>.json (or --json) and prints a markdown
summary (also --md). About 3 minutes on 2 shared cores, most of it the mpmath oracle and nvcc.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE), str(ROOT / "tests"), str(ROOT / "bench")]

import mantissa_accuracy as acc  # noqa: E402
import mantissa_fit as fit  # noqa: E402
import numpy as np  # noqa: E402


def emulation_check(words: int) -> dict:
    """Mismatching values of today's emulated transform against the native CPU kernel, per window."""
    import mantissa_fp32 as fp
    import torch

    import tinit
    from tinit.ops import philox_words
    from tinit.params import transform_constants

    single, pair = acc.inverses()["today"]
    found = {}
    for name, window in acc.WINDOWS.items():
        native = torch.empty(words, dtype=torch.float32)
        tinit.trunc_normal_at_(native, *window, seed=7, stream=3, backend="cpu")
        record = fp.Record.of(transform_constants(*window, torch.float32))
        ours = fp.two_sided(philox_words(words, 7, 3).numpy(), record, single, pair)
        found[name] = int(np.sum(ours.view(np.uint32) != native.numpy().view(np.uint32)))
    return found


def accuracy(samples: int, words: int) -> dict:
    new = acc.row_study([row for row, *_ in fit.NEW_ROWS], 8 * samples)
    rest = acc.row_study(range(6, 254), samples)
    return {
        "new_rows": new,
        "other_rows": rest,
        "centre": acc.centre_study(),
        "row3_fits": acc.row3_fits(),
        "end_to_end": acc.end_to_end(words),
        "mirror": acc.mirror_check(),
    }


def worst(rows: dict, inverse: str, kind: str) -> tuple[float, int]:
    """(worst error, its row) over a row_study."""
    row = max(rows, key=lambda r: rows[r][inverse][kind])
    return rows[row][inverse][kind], row


def _accuracy_md(a: dict) -> list[str]:
    every = {**a["new_rows"], **a["other_rows"]}
    lines = ["## Accuracy (units of 2^-24 max(|z|, 1), mpmath at 50 digits)", ""]
    lines += ["| rows | today single | prototype single | today pair | prototype pair |", "|---|---:|---:|---:|---:|"]
    for label, rows in (("3..5 (s >= 1/4)", a["new_rows"]), ("6..253", a["other_rows"]), ("all", every)):
        cells = [
            f"{worst(rows, inv, kind)[0]:.3f} (row {worst(rows, inv, kind)[1]})"
            for kind in ("single", "pair")
            for inv in ("today", "mantissa")
        ]
        lines.append(f"| {label} | {cells[0]} | {cells[1]} | {cells[2]} | {cells[3]} |")
    lines += [
        "",
        "Per new row: "
        + "; ".join(
            f"row {r}: today {v['today']['single']:.3f} / {v['today']['pair']:.3f}, prototype "
            f"{v['mantissa']['single']:.3f} / {v['mantissa']['pair']:.3f}"
            for r, v in a["new_rows"].items()
        ),
    ]
    for inv, c in a["centre"].items():
        rel = ", ".join(f"2^-{k}: {v:.3g}" for k, v in c["relative_by_k"].items() if k in (5, 10, 15, 20, 25))
        lines.append(
            f"- centre, {inv}: z(1/2) = {c['z_at_half']!r}, wrong signs {c['wrong_sign']}, decreasing steps "
            f"{c['decreasing']}, worst {c['worst']:.3f}, |z(1/2 + d) + z(1/2 - d)| <= {c['antisymmetry']:.3f}; "
            f"relative error at s = 1/2 - 2^-k ({rel})"
        )
    for r_hi, f in a["row3_fits"].items():
        lines.append(
            f"- row 3 fitted on r < {r_hi}: whole row {f['whole_row']:.2f}, first half {f['first_half']:.2f}, "
            f"reached s {f['reach_single']:.3f} / pair {f['reach_pair']:.3f}"
        )
    lines.append(f"- symmetric windows, values with x(~w) != -x(w): {a['mirror']}")
    lines += [
        "",
        "| window | today ulp | prototype ulp | rel. at 2^-10 std: today / prototype | changed fp32 | changed bf16 |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, e in a["end_to_end"].items():
        rel = [e[inv]["relative_by_band"].get(10, float("nan")) for inv in ("today", "mantissa")]
        lines.append(
            f"| {name} | {e['today']['ulp']:.3f} | {e['mantissa']['ulp']:.3f} | {rel[0]:.0f} / {rel[1]:.0f} | "
            f"{100 * e['changed_fp32']:.1f}% | {100 * e['changed_bf16']:.4f}% |"
        )
    return lines


def _cpu_md(c: dict) -> list[str]:
    lines = ["## CPU (one thread, interleaved rounds; the machine was shared)", "", f"checks: {c['check']}", ""]
    lines += ["| case | today ns/elem | prototype ns/elem | ratio median (min-max) |", "|---|---:|---:|---|"]
    for kind in ("chunk", "fill"):
        for key, s in c["timings"][kind].items():
            extra = f"; memset {s['memset_ns']:.3f}, Philox {s['philox_ns']:.3f}" if kind == "fill" else ""
            lines.append(
                f"| {kind}: {', '.join(key)} | {s['today_ns']:.3f} | {s['mantissa_ns']:.3f} | "
                f"{s['ratio_median']:.3f} ({s['ratio_min']:.3f}-{s['ratio_max']:.3f}, {s['rounds']} rounds){extra} |"
            )
    return lines


def markdown(report: dict) -> str:
    import mantissa_sass

    lines = [f"proto_mantissa at {report['commit']}, {report['date']}, {report['machine']}", ""]
    lines += [f"emulation vs native (mismatches): {report.get('emulation')}", f"table: {report['table']}", ""]
    if "accuracy" in report:
        lines += _accuracy_md(report["accuracy"])
    if "sass" in report:
        lines += ["", "## SASS per element, interior (steady state)", "", mantissa_sass.table(report["sass"])]
    if "cpu" in report:
        lines += _cpu_md(report["cpu"])
    return "\n".join(lines) + "\n"


def _commit() -> str:
    out = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"], check=False, capture_output=True, text=True
    )
    return out.stdout.strip() or "unknown"


def _jsonable(value):
    if isinstance(value, dict):
        return {(" / ".join(k) if isinstance(k, tuple) else str(k)): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def measure(args) -> dict:
    report = {"commit": _commit(), "date": datetime.date.today().isoformat(), "seconds": {}}
    report["machine"] = f"{platform.processor() or platform.machine()}, {platform.python_version()}"
    fresh = fit.header_text(fit.mantissa_rows())
    report["table"] = "committed header is the fit" if fresh == fit.HEADER.read_text() else "STALE: run mantissa_fit.py"
    steps = [("emulation", lambda: emulation_check(1 << 20))]
    if args.accuracy:
        steps.append(("accuracy", lambda: accuracy(args.samples, args.words)))
    if args.sass:
        import mantissa_sass

        steps.append(("sass", lambda: mantissa_sass.measure(args.triton)))
    if args.cpu:
        import mantissa_cpu

        steps.append(
            (
                "cpu",
                lambda: {
                    "check": mantissa_cpu.check(mantissa_cpu.harness()),
                    "timings": mantissa_cpu.timings(mantissa_cpu.harness(), args.rounds),
                },
            )
        )
    for name, step in steps:
        start = time.perf_counter()
        try:
            report[name] = step()
        except (ImportError, RuntimeError) as exc:
            report[name] = None
            report.setdefault("skipped", {})[name] = f"{type(exc).__name__}: {exc}"
        report["seconds"][name] = round(time.perf_counter() - start, 1)
        print(f"{name}: {report['seconds'][name]} s", file=sys.stderr)
    return {k: v for k, v in report.items() if v is not None}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=512, help="fp32 s values a row (8x on rows 3..5)")
    parser.add_argument("--words", type=int, default=1 << 20, help="stream words per end-to-end window")
    parser.add_argument("--rounds", type=int, default=15, help="interleaved CPU timing rounds")
    for flag in ("accuracy", "sass", "triton", "cpu"):
        parser.add_argument(f"--{flag}", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--md", type=Path)
    args = parser.parse_args(argv)
    report = measure(args)
    text = markdown(report)
    sys.stdout.write(text)
    if args.md:
        args.md.write_text(text)
    path = args.json or ROOT / "bench" / "results" / f"proto_mantissa_{report['date']}_{report['commit']}.json"
    path.write_text(json.dumps(_jsonable(report), indent=1, default=str) + "\n")
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
