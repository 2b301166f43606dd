"""Whole-model init with ~2,000 parameter tensors: grouped vs per-tensor, in one pytest-benchmark run.

    python -m pytest bench/bench_grouped.py --benchmark-only --benchmark-json=bench/results/raw_grouped.json
    python bench/report_grouped.py bench/results/raw_grouped.json       # table + ratios
    python -m pytest bench/bench_grouped.py --benchmark-only --quick     # 200 tensors, smoke run

Models: GPT-2-style decoders (``tinit.tools.toy_models.GPT``: LayerNorm gains and
biases, nn.Linear weights and biases; tied lm_head) with 167 blocks, 12 tensors each, so
2,008 tensors, at widths 32, 64 and 128 (average 1.1 k, 4.2 k and 16.4 k
elements per tensor). Every method writes the same values scheme "gpt2" gives (the torch
loop: the same std and bounds):

    grouped      tinit.init_model_(model, "gpt2")               one native call for all truncated normals
    per_tensor   tinit.init_model_(model, "gpt2", grouped=False) one write_spec_ per tensor
    fill_loop    for name, p in named_parameters: tinit.fill_(p, "gpt2", name=name, n_layers=L, d_model=d,
                 seed=..., stream=stream_for(name))              the per-tensor Python loop
    torch_loop   for each tensor: torch.nn.init.trunc_normal_(p, 0, std, a, b), or p.fill_(c) for constants
    native_fill  only the native calls the grouped fill makes (tinit::trunc_normal_grouped_ over every
                 truncated normal, zero_ and fill_ for the constants), from prepared arguments: the time
                 no Python planning can remove, so fill_loop / native_fill bounds fill_loop / grouped

Each case makes one untimed call (its values are checked equal to the grouped
fill for the tinit methods), then times whole calls in pedantic mode, about
ROUND_BUDGET_S seconds per case.
"""

from __future__ import annotations

import math
import time

import pytest
import torch

import tinit
from tinit import ops, stream_for
from tinit.params import transform_constants
from tinit.tools.toy_models import GPT, GPTConfig

BLOCKS = 167
WIDTHS = (32, 64, 128)
QUICK_BLOCKS = 17
SEED = 1
ROUND_BUDGET_S = 4.0
MAX_ROUNDS = 50
METHODS = ("grouped", "per_tensor", "fill_loop", "torch_loop", "native_fill")


def _model(width: int, blocks: int) -> GPT:
    return GPT(GPTConfig(n_layers=blocks, d_model=width, n_heads=4, vocab=512, n_ctx=128))


def _grouped(model):
    tinit.init_model_(model, "gpt2", seed=SEED)


def _per_tensor(model):
    tinit.init_model_(model, "gpt2", seed=SEED, grouped=False)


def _fill_loop(model, blocks, width):
    for name, p in model.named_parameters():
        tinit.fill_(p, "gpt2", name=name, n_layers=blocks, d_model=width, seed=SEED, stream=stream_for(name))


def _torch_loop(params_and_specs):
    for p, spec in params_and_specs:
        if spec.constant is not None:
            p.data.fill_(spec.constant)
        else:
            lo, hi = spec.bounds
            torch.nn.init.trunc_normal_(p, spec.mean, spec.std, lo, hi)


def _native_fill(params_and_specs):
    """The grouped fill's native work alone, from prepared arguments (see the module docstring)."""
    tensors, streams, packed, constants = [], [], [], []
    for (name, p), spec in params_and_specs:
        if spec.constant is not None:
            constants.append((p, spec.constant))
        else:
            lo, hi = spec.bounds
            tensors.append(p.detach())
            streams.append(stream_for(name))
            packed.append(transform_constants(spec.mean, spec.std, lo, hi, p.dtype))
    offsets = [0] * len(tensors)
    zeros = [p.detach() for p, c in constants if c == 0.0]
    others = [(p.detach(), c) for p, c in constants if c != 0.0]

    def call():
        ops.trunc_normal_grouped_native(tensors, SEED, streams, offsets, packed)
        torch._foreach_zero_(zeros)
        for p, c in others:
            p.fill_(c)

    return call


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("width", WIDTHS, ids=lambda w: f"d{w}")
def test_model_init(benchmark, bench_options, width, method):
    blocks = QUICK_BLOCKS if bench_options["quick"] else BLOCKS
    model = _model(width, blocks)
    summary = tinit.init_model_(model, "gpt2", seed=SEED)
    reference = [p.detach().clone() for p in model.parameters()]
    params = dict(model.named_parameters())
    specs = [(params[e.name], e.spec) for e in summary]
    calls = {
        "grouped": lambda: _grouped(model),
        "per_tensor": lambda: _per_tensor(model),
        "fill_loop": lambda: _fill_loop(model, blocks, width),
        "torch_loop": lambda: _torch_loop(specs),
    }
    call = (
        calls[method]
        if method != "native_fill"
        else _native_fill([((e.name, params[e.name]), e.spec) for e in summary])
    )

    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    start = time.perf_counter()
    call()
    first = time.perf_counter() - start
    if method != "torch_loop":  # the tinit methods (and the grouped fill's native calls alone) write the same bits
        for p, want in zip(model.parameters(), reference, strict=True):
            assert torch.equal(p, want)
    rounds = max(1, min(MAX_ROUNDS, math.floor(ROUND_BUDGET_S / max(first, 1e-6))))
    benchmark.extra_info.update(
        tensors=len(summary),
        numel=sum(e.numel for e in summary),
        width=width,
        blocks=blocks,
        mean_numel=sum(e.numel for e in summary) / len(summary),
        method=method,
    )
    benchmark.pedantic(call, rounds=rounds, iterations=1, warmup_rounds=0)
