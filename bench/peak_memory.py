"""Peak extra memory of filling one tensor: tinit vs torch's fills.

    python bench/peak_memory.py [--quick] [--json PATH]

Each method runs in a fresh Python process (so no high-water mark is shared):
import torch and tinit, warm every method up on a 4 K-element tensor,
allocate the target tensor and write it once with zero_ (its pages are now
resident), read the resident-set high-water mark (getrusage ru_maxrss), fill
the tensor with the method, read the mark again. The difference is the
memory the fill needed beyond the tensor itself. Default size: 1 GiB of fp32
(2^28 elements); --quick (or TINIT_BENCH_QUICK=1): 64 MiB.

The transposed cases fill the same memory through a view that is not
contiguous, ``w.t()`` of a (4096, numel / 4096) weight: tinit writes it slab
by slab through a buffer of at most ``tinit._plan.CHUNK_BYTES`` (4 MiB), so
its extra stays near that bound whatever the size; torch's ``normal_`` on the
same view is the baseline. The case the docs quote is a 256 MiB weight:
``python bench/peak_memory.py --numel 67108864``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

STD, A, B = 0.02, -0.04, 0.04
METHODS = (
    "alloc",
    "tinit",
    "torch_trunc",
    "normal",
    "tinit_xavier_uniform",
    "uniform",
    "tinit_transposed",
    "normal_transposed",
)
ROWS = 4096  # the transposed cases: w.t() of a (ROWS, numel / ROWS) weight
LABELS = {
    "alloc": "allocate + zero_ only",
    "tinit": "tinit.trunc_normal_",
    "torch_trunc": "torch.nn.init.trunc_normal_",
    "normal": "torch.Tensor.normal_",
    "tinit_xavier_uniform": 'tinit.fill_(w, "xavier_uniform")',
    "uniform": "torch.nn.init.xavier_uniform_",
    "tinit_transposed": "tinit.trunc_normal_(w.t()), transposed weight",
    "normal_transposed": "torch.Tensor.normal_(w.t()), transposed weight",
}


def _child(method: str, numel: int) -> dict:
    import resource

    import torch

    import tinit

    fills = {
        "alloc": lambda x: None,
        "tinit": lambda x: tinit.trunc_normal_(x, 0.0, STD, A, B),
        "torch_trunc": lambda x: torch.nn.init.trunc_normal_(x, 0.0, STD, A, B),
        "normal": lambda x: torch.Tensor.normal_(x, 0.0, STD),
        "tinit_xavier_uniform": lambda x: tinit.fill_(x.view(-1, 4096), "xavier_uniform", seed=0),
        "uniform": lambda x: torch.nn.init.xavier_uniform_(x.view(-1, 4096)),
        "tinit_transposed": lambda x: tinit.trunc_normal_(x.view(ROWS, -1).t(), 0.0, STD, A, B),
        "normal_transposed": lambda x: torch.Tensor.normal_(x.view(ROWS, -1).t(), 0.0, STD),
    }
    for fill in fills.values():
        fill(torch.empty(ROWS * 4))
    if method.startswith("tinit"):
        from tinit import dispatch

        backend = dispatch.select(torch.empty(1)).name
    else:
        backend = None

    def maxrss_mib() -> float:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    x = torch.empty(numel, dtype=torch.float32)
    x.zero_()
    before = maxrss_mib()
    fills[method](x)
    after = maxrss_mib()
    if method.endswith("transposed"):  # validate: the view was written, within the window of trunc_normal_
        assert bool(x.abs().max() <= (B if method.startswith("tinit") else 1.0)), method
        assert float(x.std()) > 0.5 * STD, method
    return {
        "method": method,
        "numel": numel,
        "tensor_mib": numel * 4 / 2**20,
        "rss_before_mib": before,
        "rss_peak_mib": after,
        "extra_mib": after - before,
        "backend": backend,
    }


def measure(numel: int) -> list[dict]:
    """One fresh subprocess per method; returns their records in METHODS order."""
    rows = []
    for method in METHODS:
        out = subprocess.run(
            [sys.executable, __file__, "--child", method, "--numel", str(numel)],
            capture_output=True,
            text=True,
            check=True,
        )
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return rows


def markdown(rows: list[dict]) -> str:
    """The records as a markdown table (MiB)."""
    lines = [
        (
            f"Filling {rows[0]['numel']:,} fp32 elements ({rows[0]['tensor_mib']:.0f} MiB), "
            "std 0.02, a = -0.04, b = 0.04; resident-set high-water mark, fresh process per method."
        ),
        "",
        "| method | peak RSS (MiB) | extra above the allocated tensor (MiB) |",
        "| --- | ---: | ---: |",
    ]
    for r in rows:
        lines.append(f"| {LABELS[r['method']]} | {r['rss_peak_mib']:.0f} | {r['extra_mib']:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", default=os.environ.get("TINIT_BENCH_QUICK", "0") not in ("", "0")
    )
    parser.add_argument(
        "--numel", type=int, default=None, help="elements, a multiple of 4096 (default 2^28, quick 2^24)"
    )
    parser.add_argument("--json", help="also write the records here")
    parser.add_argument("--child", choices=METHODS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    numel = args.numel or (1 << 24 if args.quick else 1 << 28)
    if args.child:
        print(json.dumps(_child(args.child, numel)))
        return
    rows = measure(numel)
    print(markdown(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
