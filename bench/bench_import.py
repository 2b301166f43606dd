"""``import tinit`` against ``import torch``, in fresh interpreters, interleaved.

    python bench/bench_import.py              # 7 rounds
    python bench/bench_import.py --rounds 3

Each round starts three interpreters: ``import torch``; ``import torch`` then ``import tinit``
(timed from after torch); ``import torch, tinit`` then one fill (the first use). The figure is the
median over the rounds of tinit's own time and its spread; the target is at most 0.3 s over
``import torch``. Writes markdown and JSON under bench/results/.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

import _env

PROBE = """
import time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
{after}
t2 = time.perf_counter()
import json
print(json.dumps([t1 - t0, t2 - t1]))
"""
CASES = {
    "import torch": "",
    "import tinit (after torch)": "import tinit",
    "import tinit + first fill": "import tinit\ntinit.trunc_normal_(torch.empty(1024), std=0.02, a=-0.04, b=0.04)",
}


def _run(after: str) -> tuple[float, float]:
    out = subprocess.run([sys.executable, "-c", PROBE.format(after=after)], capture_output=True, text=True, check=True)
    torch_s, after_s = json.loads(out.stdout.strip().splitlines()[-1])
    return torch_s, after_s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", default=str(_env.REPO / "bench" / "results"))
    args = parser.parse_args(argv)
    before = _env.load_average()
    samples: dict[str, list[float]] = {name: [] for name in CASES}
    torch_samples: list[float] = []
    for _ in range(args.rounds):
        for name, after in CASES.items():
            torch_s, after_s = _run(after)
            samples[name].append(torch_s if not after else after_s)
            if not after:
                torch_samples.append(torch_s)
    env = _env.environment()
    env["load_average_1_5_15"] = {"before": before, "after": _env.load_average()}
    rows = ["| what | median | min | max |", "| --- | ---: | ---: | ---: |"]
    for name, values in samples.items():
        rows.append(f"| {name} | {statistics.median(values):.3f} s | {min(values):.3f} s | {max(values):.3f} s |")
    extra = statistics.median(samples["import tinit (after torch)"])
    verdict = "meets" if extra <= 0.3 else "misses"
    report = (
        f"`import tinit` over `import torch`, {args.rounds} interleaved rounds of fresh interpreters; {env}\n\n"
        + "\n".join(rows)
        + f"\n\ntinit adds {extra:.3f} s to `import torch` (median): {verdict} the 0.3 s target.\n"
    )
    print(report)
    _env.write_report(args.out, env, "_import", report, {"samples_s": samples})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
