"""Planning time of ``tinit.init_model_`` on a model of thousands of tiny parameters, with and without its speed hacks.

    python bench/bench_init_model_overhead.py                       # 200 layers (1,803 tensors), 15 repeats
    python bench/bench_init_model_overhead.py --layers 20 --repeats 3   # a smoke run

The model is an HF ``LlamaForCausalLM`` reduced to width 16 and ``--layers``
blocks on the CPU, so that the fill is negligible and the per-parameter Python
work (classify, choose a spec, build the fill list) is what is timed: the
native fill (``write_grouped_``) is replaced by a no-op, leaving the planning.
``--ballast`` keeps that many extra small objects alive during the run, as a
process holding a large training stack would; the cyclic collector's full
passes walk them.

Variants, alternated within each repeat so that the machine's load falls on
all alike (the figure is the median of --repeats calls):

- "as shipped": ``init_model_`` as the library defines it;
- "gc not paused": the function under ``_without_gc_passes`` called directly
  (``init_model_.__wrapped__``), when the library still pauses the collector;
- "gc paused": the shipped function called with the collector paused by the
  caller, when the library no longer pauses it itself;
- "NamedTuple constructors": the shipped function with ``tuple.__new__`` (the
  fill list and summary built without the NamedTuples' Python-level
  ``__new__``) replaced by a call of the NamedTuple itself, when the library
  still builds them that way (a module-level ``tuple`` stand-in, so the
  stand-in's extra call counts against the variant: an upper bound of what the
  hack saves).

A speed hack stays in the library only while this benchmark shows it saves
more than 5 % of the planning time. Prints a markdown table and writes it
with JSON (machine, versions, commit, load average) under --out
(bench/results/).
"""

from __future__ import annotations

import argparse
import builtins
import contextlib
import gc
import inspect
import os
import statistics
import time
from unittest import mock

import torch

import tinit
from tinit import model_init


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


def _gc_paused(function):
    def call(*args, **kwargs):
        enabled = gc.isenabled()
        gc.disable()
        try:
            return function(*args, **kwargs)
        finally:
            if enabled:
                gc.enable()

    return call


class _TupleCallingNamedTuple:
    """Stands in for ``tuple`` in ``tinit.model_init``: ``tuple(x)`` as usual, ``tuple.__new__(cls, args)`` as ``cls(*args)``."""

    def __init__(self):
        self.__new__ = lambda cls, args: cls(*args)

    def __call__(self, iterable=()):
        return builtins.tuple(iterable)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--ballast", type=int, default=1_000_000, help="extra live objects (0: none)")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    args = parser.parse_args()

    model = _model(args.layers)
    n_tensors = sum(1 for _ in model.parameters())
    ballast = [[i] for i in range(args.ballast)]  # noqa: F841  kept alive for the collector to walk

    shipped = model_init.init_model_
    # name -> (function, context the call runs in)
    variants = {"as shipped": (shipped, contextlib.nullcontext)}
    if hasattr(shipped, "__wrapped__"):
        variants["gc not paused"] = (shipped.__wrapped__, contextlib.nullcontext)
    else:
        variants["gc paused"] = (_gc_paused(shipped), contextlib.nullcontext)
    if "tuple.__new__" in inspect.getsource(shipped):
        stand_in = _TupleCallingNamedTuple()
        variants["NamedTuple constructors"] = (
            shipped,
            lambda: mock.patch.object(model_init, "tuple", stand_in, create=True),
        )

    times: dict[str, list[float]] = {name: [] for name in variants}
    load_before = os.getloadavg()
    with mock.patch.object(model_init, "write_grouped_", lambda *a, **k: None):
        for function, context in variants.values():  # warm-up: imports, regex compilation, caches
            with context():
                reference = function(model, "gpt2")
        for _ in range(args.repeats):
            for name, (function, context) in variants.items():
                with context():
                    start = time.perf_counter()
                    summary = function(model, "gpt2")
                    times[name].append(time.perf_counter() - start)
                if summary != reference:
                    raise SystemExit(f"variant {name!r} planned differently from the shipped function")

    load_after = os.getloadavg()
    from _env import environment, write_report  # beside this file

    env = environment()
    base = statistics.median(times["as shipped"])
    header = (
        f"`init_model_` planning, tinit {tinit.__version__}, torch {torch.__version__}: HF Llama width 16, "
        f"{args.layers} layers, {n_tensors} tensors, {args.ballast:,} ballast objects, median of {args.repeats}; "
        f"load average (1, 5, 15 min) {load_before} before, {load_after} after; {env}"
    )
    lines = [
        header,
        "",
        "| variant | planning (ms) | vs as shipped |",
        "|---|---:|---:|",
    ]
    rows = {}
    for name, samples in times.items():
        median = statistics.median(samples)
        rows[name] = {"median_s": median, "samples_s": samples, "vs_shipped": median / base - 1}
        lines.append(f"| {name} | {median * 1e3:.2f} | {100 * (median / base - 1):+.1f} % |")
    md = "\n".join(lines) + "\n"
    print(md)
    payload = {
        "rows": rows,
        "layers": args.layers,
        "tensors": n_tensors,
        "ballast": args.ballast,
        "load_before": load_before,
        "load_after": load_after,
    }
    write_report(args.out, env, "_init_model_overhead", md, payload)


if __name__ == "__main__":
    main()
