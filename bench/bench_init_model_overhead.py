"""Planning time of ``tinit.init_model_`` on a model of thousands of tiny parameters, and what its speed hacks save.

    python bench/bench_init_model_overhead.py                         # 200 layers (1,803 tensors), 31 repeats
    python bench/bench_init_model_overhead.py --layers 20 --repeats 3   # a smoke run

The model is an HF ``LlamaForCausalLM`` reduced to width 16 and ``--layers``
blocks on the CPU, so that the fill is negligible and the per-parameter Python
work (classify, choose a spec, build the fill list) is what is timed: the
native fill (``write_grouped_``) is replaced by a no-op, leaving the planning.
``--ballast`` keeps that many extra small objects alive during the run, as a
process holding a large training stack would; the cyclic collector's full
passes walk them.

Two hacks are measured:

- the paused garbage collector (``_without_gc_passes``): ``init_model_`` is
  timed as shipped and with the pause undone (``init_model_.__wrapped__``),
  or, once the library no longer pauses it, with the pause added by the
  caller. The two alternate within each repeat so that the machine's load
  falls on both alike;
- ``tuple.__new__`` in place of the NamedTuples' constructors (one
  ``FillItem`` and one ``ParamInit`` per tensor): timed directly, both ways,
  as the best of many loops (``timeit``), and multiplied by the tensor count.

Each figure is the best (minimum) of --repeats calls, the statistic least
moved by other jobs on a shared machine; medians are printed beside it. A
hack stays in the library only while it saves more than 5 % of the planning
time without it. Prints a markdown table and writes it with JSON (machine, versions,
commit, load average) under --out (bench/results/).
"""

from __future__ import annotations

import argparse
import inspect
import os
import statistics
import time
import timeit
from unittest import mock

import torch

import tinit
from tinit import FillItem, model_init, schemes


def _model(layers: int) -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=8,
        vocab_size=64,
        tie_word_embeddings=False,
    )
    return LlamaForCausalLM(config)


def _tuple_costs(loops: int = 5_000, repeats: int = 31) -> dict[str, float]:
    """Seconds per tensor to build its FillItem and ParamInit with the constructors and with tuple.__new__."""
    param, spec = torch.empty(0), schemes.InitSpec(constant=0.0)
    ParamInit, version = model_init.ParamInit, model_init.STREAM_VERSION
    new = tuple.__new__

    def constructors():
        FillItem(param, spec, 7, 0)
        ParamInit("model.layers.0.mlp.up_proj.weight", "mlp_up", 0, 512, spec, None, (), version, "model.layers")

    def shortcut():
        new(FillItem, (param, spec, 7, 0))
        new(ParamInit, ("model.layers.0.mlp.up_proj.weight", "mlp_up", 0, 512, spec, None, (), version, "model.layers"))

    return {
        name: min(timeit.repeat(function, number=loops, repeat=repeats)) / loops
        for name, function in (("constructors", constructors), ("tuple.__new__", shortcut))
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=31)
    parser.add_argument("--ballast", type=int, default=1_000_000, help="extra live objects (0: none)")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    args = parser.parse_args()

    model = _model(args.layers)
    n_tensors = sum(1 for _ in model.parameters())
    ballast = [[i] for i in range(args.ballast)]  # noqa: F841  kept alive for the collector to walk

    shipped = model_init.init_model_
    pauses_gc = hasattr(shipped, "__wrapped__")
    other = "gc not paused" if pauses_gc else "gc paused"
    variants = {
        "as shipped": shipped,
        other: shipped.__wrapped__ if pauses_gc else model_init._without_gc_passes(shipped),
    }

    times: dict[str, list[float]] = {name: [] for name in variants}
    load_before = os.getloadavg()
    with mock.patch.object(model_init, "write_grouped_", lambda *a, **k: None):
        reference = shipped(model, "gpt2")  # warm-up: imports, regex compilation, caches
        for _ in range(args.repeats):
            for name, function in variants.items():
                start = time.perf_counter()
                summary = function(model, "gpt2")
                times[name].append(time.perf_counter() - start)
                if summary != reference:
                    raise SystemExit(f"variant {name!r} planned differently from the shipped function")
    tuple_costs = _tuple_costs()
    load_after = os.getloadavg()

    best = {name: min(samples) for name, samples in times.items()}
    median = {name: statistics.median(samples) for name, samples in times.items()}
    with_gc = best["gc not paused"] if pauses_gc else best["as shipped"]
    without_gc = best["as shipped"] if pauses_gc else best["gc paused"]
    saved_per_tensor = tuple_costs["constructors"] - tuple_costs["tuple.__new__"]
    uses_shortcut = "tuple.__new__" in inspect.getsource(model_init)
    # Each share is of the planning time without the hack.
    saved_tuple = saved_per_tensor * n_tensors
    planning = best["as shipped"] + (saved_tuple if uses_shortcut else 0.0)

    from _env import environment, write_report  # beside this file

    env = environment()
    header = (
        f"`init_model_` planning, tinit {tinit.__version__}, torch {torch.__version__}: HF Llama width 16, "
        f"{args.layers} layers, {n_tensors} tensors, {args.ballast:,} ballast objects, best (median) of "
        f"{args.repeats}; load average (1, 5, 15 min) {load_before} before, {load_after} after; {env}"
    )
    gc_row = (
        f"| paused collector | {'yes' if pauses_gc else 'no'} | {(with_gc - without_gc) * 1e3:.2f} | "
        f"{100 * (with_gc - without_gc) / with_gc:.1f} % |"
    )
    tuple_row = (
        f"| `tuple.__new__` for FillItem and ParamInit ({tuple_costs['constructors'] * 1e6:.2f} -> "
        f"{tuple_costs['tuple.__new__'] * 1e6:.2f} us a tensor) | {'yes' if uses_shortcut else 'no'} | "
        f"{saved_tuple * 1e3:.2f} | {100 * saved_tuple / planning:.1f} % |"
    )
    lines = [
        header,
        "",
        "| | planning (ms), best (median) |",
        "|---|---:|",
        *(f"| {name} | {best[name] * 1e3:.2f} ({median[name] * 1e3:.2f}) |" for name in variants),
        "",
        "| hack | in the library | saves (ms) | of the planning |",
        "|---|---|---:|---:|",
        gc_row,
        tuple_row,
    ]
    md = "\n".join(lines) + "\n"
    print(md)
    payload = {
        "samples_s": times,
        "tuple_costs_s_per_tensor": tuple_costs,
        "layers": args.layers,
        "tensors": n_tensors,
        "ballast": args.ballast,
        "load_before": load_before,
        "load_after": load_after,
    }
    write_report(args.out, env, "_init_model_overhead", md, payload)


if __name__ == "__main__":
    main()
