"""CPU throughput of tinit per transform mode, side by side with torch's fills, in one process.

    python bench/bench_cpu_modes.py                         # this checkout, 64 M elements, 2 threads
    PYTHONPATH=/path/to/v1 python bench/bench_cpu_modes.py --label v0.1.0   # tinit 0.1.0 (docs/stream.md)

Every case fills one preallocated tensor in place: one untimed call whose
output is checked (finite, inside the window), then the median of --repeats
timed calls. tinit cases call the public ``tinit.trunc_normal_at_`` (an
explicit seed, so torch's RNG is not part of the time) or ``tinit.fill_``
for the uniform schemes; the baselines are torch's own ``Tensor.normal_``,
``Tensor.uniform_`` and ``torch.nn.init.trunc_normal_`` on the same tensor.
Prints a markdown table (G elements/s and the ratios, measured in this one
run) and writes JSON with the machine, versions and commit beside it.
"""

from __future__ import annotations

import argparse
import math
import statistics
from pathlib import Path

import torch
from _env import check_values, environment, load_average, median_s, write_report  # bench/_env.py

import tinit

# (case, dtype, mean, std, a, b): absolute bounds.
CASES = [
    ("+-2 sigma", torch.float32, 0.0, 0.02, -0.04, 0.04),
    ("default window (std 0.02, a=-2, b=2)", torch.float32, 0.0, 0.02, -2.0, 2.0),
    ("untruncated", torch.float32, 0.0, 1.0, -math.inf, math.inf),
    ("+-2 sigma", torch.bfloat16, 0.0, 0.02, -0.04, 0.04),
    ("default window (std 0.02, a=-2, b=2)", torch.bfloat16, 0.0, 0.02, -2.0, 2.0),
]
UNIFORM_BOUND = 0.1


def _window_row(
    name: str,
    dtype: torch.dtype,
    mean: float,
    std: float,
    a: float,
    b: float,
    numel: int,
    repeats: int,
    torch_trunc: bool,
) -> dict:
    x = torch.empty(numel, dtype=dtype)
    tinit.trunc_normal_at_(x, mean, std, a, b, seed=1)
    check_values(x, a, b, f"tinit {name}", round_bounds=False)
    t_tinit = median_s(lambda: tinit.trunc_normal_at_(x, mean, std, a, b, seed=1), repeats)
    x.normal_(mean, std)
    t_normal = median_s(lambda: x.normal_(mean, std), repeats)
    t_zero = median_s(x.zero_, repeats)
    row = {
        "case": name,
        "dtype": str(dtype).replace("torch.", ""),
        "numel": numel,
        "tinit_g_per_s": numel / t_tinit / 1e9,
        "normal_g_per_s": numel / t_normal / 1e9,
        "zero_g_per_s": numel / t_zero / 1e9,
    }
    if torch_trunc and dtype == torch.float32 and math.isfinite(a) and b - a < 1.0:
        torch.nn.init.trunc_normal_(x, mean, std, a, b)
        row["torch_trunc_g_per_s"] = (
            numel / median_s(lambda: torch.nn.init.trunc_normal_(x, mean, std, a, b), max(1, repeats // 2)) / 1e9
        )
    return row


def _uniform_row(dtype: torch.dtype, numel: int, repeats: int) -> dict:
    w = torch.nn.Parameter(torch.empty(numel // 4096, 4096, dtype=dtype))

    def fill():
        tinit.fill_(w, "xavier_uniform", seed=1)

    fill()
    bound = math.sqrt(6.0 / (w.shape[0] + w.shape[1]))
    check_values(w.data, -bound, bound, "tinit xavier_uniform", round_bounds=False)
    t_tinit = median_s(fill, repeats)
    t_uniform = median_s(lambda: w.data.uniform_(-bound, bound), repeats)
    t_zero = median_s(w.data.zero_, repeats)
    return {
        "case": "xavier_uniform (fill_) vs uniform_",
        "dtype": str(dtype).replace("torch.", ""),
        "numel": w.numel(),
        "tinit_g_per_s": w.numel() / t_tinit / 1e9,
        "uniform_g_per_s": w.numel() / t_uniform / 1e9,
        "zero_g_per_s": w.numel() / t_zero / 1e9,
    }


def run(numel: int, repeats: int, torch_trunc: bool) -> list[dict]:
    rows = [_window_row(*case, numel, repeats, torch_trunc) for case in CASES]
    return rows + [_uniform_row(dtype, numel, repeats) for dtype in (torch.float32, torch.bfloat16)]


def _spread(values: list[float], digits: int = 3) -> str:
    """The median, with the range over rounds when there are several."""
    mid = statistics.median(values)
    if len(values) == 1:
        return f"{mid:.{digits}f}"
    return f"{mid:.{digits}f} ({min(values):.{digits}f}–{max(values):.{digits}f})"


def table(rounds: list[list[dict]]) -> str:
    """One row per case: medians over the rounds (their range in brackets); the ratios are per
    round (tinit and its baseline timed back to back), then their median and range."""
    lines = [
        (
            "| case | dtype | tinit | `normal_` / `uniform_` | `zero_` (store limit) | tinit / `zero_` | "
            "`nn.init.trunc_normal_` | tinit / baseline | tinit / `trunc_normal_` |"
        ),
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for k, first in enumerate(rounds[0]):
        rows = [rnd[k] for rnd in rounds]

        def col(key, rows=rows):
            return [r[key] for r in rows]

        base_key = "normal_g_per_s" if "normal_g_per_s" in first else "uniform_g_per_s"
        rate, base, zero = col("tinit_g_per_s"), col(base_key), col("zero_g_per_s")
        ratio = [t / b for t, b in zip(rate, base, strict=True)]
        store = [t / z for t, z in zip(rate, zero, strict=True)]
        trunc_cell = trunc_ratio = ""
        if "torch_trunc_g_per_s" in first:
            trunc = col("torch_trunc_g_per_s")
            trunc_cell = _spread(trunc, 4)
            trunc_ratio = _spread([t / b for t, b in zip(rate, trunc, strict=True)], 0) + "x"
        lines.append(
            f"| {first['case']} | {first['dtype']} | {_spread(rate)} | {_spread(base)} | {_spread(zero)} | "
            f"{_spread(store, 2)} | {trunc_cell} | {_spread(ratio, 2)}x | {trunc_ratio} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--numel", type=int, default=64 << 20, help="elements per tensor (default 64 M)")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per case (median)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1, help="rounds of every case, interleaved (a range)")
    parser.add_argument("--no-torch-trunc", action="store_true", help="skip torch.nn.init.trunc_normal_ (slow)")
    parser.add_argument("--label", default=None, help="name of the tinit under test (default: its version)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    before = load_average()
    rounds = [run(args.numel, args.repeats, not args.no_torch_trunc) for _ in range(args.rounds)]
    env = environment()
    env["load_average_1_5_15"] = {"before": before, "after": load_average()}
    label = args.label or f"tinit {tinit.__version__}"
    stream = getattr(tinit, "STREAM_VERSION", 1)
    header = (
        f"{label} (stream version {stream}, {tinit.__file__}), {args.threads} threads, "
        f"{args.numel} elements, median of {args.repeats} per round, {args.rounds} rounds; "
        f"torch {torch.__version__}; {env}"
    )
    md = f"{header}\n\n{table(rounds)}\n"
    print(md)
    payload = {"label": label, "stream_version": stream, "threads": args.threads, "rounds": rounds}
    write_report(args.out, env, f"_cpu_modes_{label.replace(' ', '_')}", md, payload)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
