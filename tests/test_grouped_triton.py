"""init_model_ on the GPU-table backends (the ``backend`` fixture: triton-interpreter, cuda, triton):
the CPU backend's values; and on Triton, a float64 parameter refused before anything is written.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from helpers import assert_matches_cpu, assert_same_bits
from helpers.grouped import (
    SEED,
    assert_unchanged,
    prefilled,
    snapshot,
)
from torch import nn

import tinit
from tinit import dispatch

# --- Triton backend in the interpreter ----------------------------------------


def _limit_tables(monkeypatch, numel: int) -> None:
    """The GPU backends' grouped calls take tensors of at most ``numel`` elements."""
    for name in ("cuda", "triton"):
        monkeypatch.setitem(
            dispatch.BACKENDS, name, dataclasses.replace(dispatch.BACKENDS[name], table_max_numel=numel)
        )


@pytest.fixture
def triton_interpreter(triton_interpreter, monkeypatch):
    """The session's Triton interpreter (skips without it), with tables limited to 40 elements."""
    _limit_tables(monkeypatch, 40)


class _SmallMixed(nn.Module):
    """bf16/fp16/fp32 only (Triton has no fp64): fused dim-0 parts, tensors on both sides of the table limit."""

    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(10, 6).to(torch.bfloat16)
        self.h = nn.ModuleList([nn.Module() for _ in range(2)])
        for i, block in enumerate(self.h):
            block.ln_1 = nn.LayerNorm(6).half()
            block.attn = nn.Module()
            block.attn.qkv = nn.Linear(6, 18).to([torch.float32, torch.float16][i])
            block.attn.c_proj = nn.Linear(6, 6).to([torch.bfloat16, torch.float32][i])
        self.lm_head = nn.Linear(6, 10, bias=False)


@pytest.mark.parametrize("scheme", ["deepnorm", "xavier_uniform", "mitchell"])
def test_backend_equals_cpu_backend(backend, scheme, monkeypatch):
    """init_model_ on each backend gives the CPU backend's values (``helpers.assert_matches_cpu``:
    bit for bit in the interpreter and on CUDA), tables limited to 40 elements."""
    if backend.id in ("cpu", "torch"):
        pytest.skip(f"{backend}: the CPU backend is the reference; the torch backend has its own tolerance")
    _limit_tables(monkeypatch, 40)
    a, b = prefilled(_SmallMixed()), prefilled(_SmallMixed()).to(backend.device)
    want = tinit.init_model_(a, scheme, seed=SEED, backend="cpu")
    got = tinit.init_model_(b, scheme, seed=SEED, backend=backend.name)
    assert [(e.name, e.spec) for e in got] == [(e.name, e.spec) for e in want]
    stds = {e.name: e.spec.std for e in want}
    for (name, p), q in zip(b.named_parameters(), a.parameters(), strict=True):
        if backend.id == "triton" and stds.get(name):
            assert_matches_cpu(backend.id, p.detach(), q.detach(), stds[name], f"{backend} vs cpu at {name}")
        else:
            assert_same_bits(p, q, f"{backend} vs cpu at {name}")


def test_triton_backend_refuses_fp64_last_before_writing(triton_interpreter):
    model = prefilled(_SmallMixed())
    model.register_parameter("zz_gate", nn.Parameter(torch.full((3, 3), 7.0, dtype=torch.float64)))
    before = snapshot(model)
    with pytest.raises(RuntimeError, match="triton"):
        tinit.init_model_(model, "normal", seed=SEED, backend="triton", overrides={"^zz_": "mlp_in"})
    assert_unchanged(model, before)
