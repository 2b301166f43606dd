"""tinit.nn.init's random initialisers against torch.nn.init's, function by function, in one process.

    python bench/bench_nn_init.py                  # 64 M elements, 2 threads, median of 5
    python bench/bench_nn_init.py --numel 4194304  # a quick look

Each case fills one preallocated (rows, 4096) tensor in place through the
public functions with the same arguments, as model code calls them (tinit's
call includes its one key drawn from torch's RNG). Before timing, one call of
each is validated: finite, inside the distribution's support, and the
sample std within 1% of the target's (torch's fans and gains; scipy's
truncated-normal std). Then the median of --repeats timed calls (fewer for
torch's trunc_normal_, seconds per call). Prints a markdown table of G
elements/s and the speed-up, and writes it with JSON beside it (machine,
versions, commit, load average) under bench/results/.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import torch
from _env import check_values, environment, load_average, median_s, write_report  # bench/_env.py

import tinit
import tinit.nn.init as tnn

WIDTH = 4096
# (function, dtype, kwargs, label): absolute bounds for trunc_normal_.
CASES = [
    ("uniform_", torch.float32, {"a": -0.1, "b": 0.1}, ""),
    ("normal_", torch.float32, {"std": 0.02}, ""),
    ("normal_", torch.bfloat16, {"std": 0.02}, ""),
    ("trunc_normal_", torch.float32, {"std": 0.02, "a": -0.04, "b": 0.04}, "std 0.02, +-2 std"),
    ("trunc_normal_", torch.bfloat16, {"std": 0.02, "a": -0.04, "b": 0.04}, "std 0.02, +-2 std"),
    ("trunc_normal_", torch.float32, {"std": 0.02}, "std 0.02, default a=-2, b=2"),
    ("xavier_uniform_", torch.float32, {}, ""),
    ("xavier_normal_", torch.float32, {}, ""),
    ("kaiming_uniform_", torch.float32, {"a": math.sqrt(5)}, "a=sqrt(5) (nn.Linear)"),
    ("kaiming_normal_", torch.float32, {"mode": "fan_out", "nonlinearity": "relu"}, "fan_out, relu"),
]


def _target(name: str, shape: tuple[int, int], kwargs: dict) -> tuple[float, float, float]:
    """(std, low, high) of the values torch's ``name`` writes, from torch's own fan and gain functions."""
    from scipy.stats import truncnorm

    fan_in, fan_out = torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(shape, device="meta"))
    if name == "uniform_":
        low, high = kwargs["a"], kwargs["b"]
        return (high - low) / math.sqrt(12.0), low, high
    if name == "normal_":
        return kwargs["std"], -math.inf, math.inf
    if name == "trunc_normal_":
        std, a, b = kwargs["std"], kwargs.get("a", -2.0), kwargs.get("b", 2.0)
        return float(truncnorm.std(a / std, b / std, scale=std)), a, b
    if name.startswith("xavier"):
        std = math.sqrt(2.0 / (fan_in + fan_out))
    else:
        fan = fan_in if kwargs.get("mode", "fan_in") == "fan_in" else fan_out
        std = torch.nn.init.calculate_gain(kwargs.get("nonlinearity", "leaky_relu"), kwargs.get("a", 0)) / math.sqrt(
            fan
        )
    if name.endswith("uniform_"):
        return std, -math.sqrt(3.0) * std, math.sqrt(3.0) * std
    return std, -math.inf, math.inf


def _row(name: str, dtype: torch.dtype, kwargs: dict, label: str, numel: int, repeats: int) -> dict:
    shape = (numel // WIDTH, WIDTH)
    x = torch.empty(shape, dtype=dtype)
    std, low, high = _target(name, shape, kwargs)
    ours, theirs = getattr(tnn, name), getattr(torch.nn.init, name)
    dtype_name = str(dtype).removeprefix("torch.")
    check_values(ours(x, **kwargs), low, high, f"tinit {name} {dtype_name}", std=std)
    t_tinit = median_s(lambda: ours(x, **kwargs), repeats)
    check_values(theirs(x, **kwargs), low, high, f"torch {name} {dtype_name}", std=std)
    slow = name == "trunc_normal_" and "a" in kwargs
    t_torch = median_s(lambda: theirs(x, **kwargs), max(1, repeats // 2) if slow else repeats)
    return {
        "function": name,
        "case": label,
        "dtype": dtype_name,
        "numel": x.numel(),
        "kwargs": {k: v for k, v in kwargs.items()},
        "tinit_g_per_s": x.numel() / t_tinit / 1e9,
        "torch_g_per_s": x.numel() / t_torch / 1e9,
    }


def table(rows: list[dict]) -> str:
    lines = [
        "| function | case | dtype | tinit.nn.init (G/s) | torch.nn.init (G/s) | speed-up |",
        "| --- | --- | --- | ---: | ---: | ---: |",
    ]
    for r in rows:
        ratio = r["tinit_g_per_s"] / r["torch_g_per_s"]
        lines.append(
            f"| `{r['function']}` | {r['case']} | {r['dtype']} | {r['tinit_g_per_s']:.3f} | "
            f"{r['torch_g_per_s']:.4f} | {ratio:.1f}x |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--numel", type=int, default=64 << 20, help="elements per tensor (default 64 M)")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per case (median)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args(argv)
    if args.numel % WIDTH or args.numel < WIDTH:
        parser.error(f"--numel must be a positive multiple of {WIDTH}")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    load_before = load_average()
    rows = [_row(*case, args.numel, args.repeats) for case in CASES]
    load_after = load_average()
    env = environment()
    header = (
        f"tinit {tinit.__version__} (stream version {tinit.STREAM_VERSION}) `tinit.nn.init` vs `torch.nn.init`, "
        f"{args.threads} threads, {args.numel} elements, median of {args.repeats} "
        f"({max(1, args.repeats // 2)} for torch's truncated +-2 std); torch {torch.__version__}; "
        f"load average (1, 5, 15 min) {load_before} before, {load_after} after; {env}"
    )
    md = f"{header}\n\n{table(rows)}\n"
    print(md)
    payload = {"rows": rows, "load_before": load_before, "load_after": load_after, "threads": args.threads}
    write_report(args.out, env, "_nn_init", md, payload)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
