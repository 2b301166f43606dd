"""tinit.init_model_: refuses what it cannot write before writing anything; ties written once."""

from __future__ import annotations

import pytest
import torch

import tinit
from tinit.models import GPT, GPTConfig

TINY = GPTConfig(n_layers=2, d_model=32, n_heads=2, vocab=97, n_ctx=16)


def test_meta_parameters_are_refused():
    with torch.device("meta"):
        model = GPT(TINY)
    with pytest.raises(ValueError, match="meta device"):
        tinit.init_model_(model)


def test_bad_dtype_is_refused_before_writing():
    model = GPT(TINY)
    model.transformer.ln_f.register_parameter("count", torch.nn.Parameter(torch.zeros(3, dtype=torch.int32),
                                                                          requires_grad=False))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    with pytest.raises(TypeError, match="dtype"):
        tinit.init_model_(model)
    for name, param in model.named_parameters():
        torch.testing.assert_close(param, before[name], rtol=0, atol=0, msg=f"{name} was written")


def test_tied_weight_written_once():
    model = GPT(TINY)
    summary = tinit.init_model_(model, "gpt2", seed=3)
    names = [e.name for e in summary]
    assert "transformer.wte.weight" in names and "lm_head.weight" not in names
    ptrs = [model.get_parameter(n).data_ptr() for n in names]
    assert len(ptrs) == len(set(ptrs))
    assert sum(e.numel for e in summary) == sum(p.numel() for p in model.parameters())
