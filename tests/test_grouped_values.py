"""init_model_'s values: grouped equals one by one and ``write_spec_`` bit for bit (mixed dtypes,
HF Conv1D parts, shared storage, meta models), uniforms inside their bounds in low precision,
zero-fan weights left alone.
"""

from __future__ import annotations

import pytest
import torch
from helpers import BITS, assert_same_bits
from helpers.grouped import (
    SEED,
    MixedDtypes,
    assert_matches_write_spec,
    prefilled,
)
from torch import nn

import tinit
from tinit import stream_for, write_spec_

# --- init_model_: values -----------------------------------------------------


@pytest.mark.parametrize(
    "scheme", ["normal", "gpt2", "mitchell", "depth_init", "deepnorm", "xavier_uniform", "fixup", "rezero"]
)
def test_mixed_dtype_model_grouped_equals_one_by_one_and_write_spec(scheme):
    """Every dtype in one model, dim-0 fused parts (deepnorm qkv), uniforms, zero constants (fixup):
    grouped, grouped=False and write_spec_ per parameter agree bit for bit."""
    a, b = prefilled(MixedDtypes(n_layers=3)), prefilled(MixedDtypes(n_layers=3))
    if scheme == "rezero":
        for model in (a, b):
            for block in model.h:
                block.resweight = nn.Parameter(torch.full((1,), 7.0))
    summary = tinit.init_model_(a, scheme, seed=SEED)
    tinit.init_model_(b, scheme, seed=SEED, grouped=False)
    for (name, p), q in zip(a.named_parameters(), b.parameters(), strict=True):
        assert_same_bits(p, q, f"{scheme}: grouped vs grouped=False at {name}")
    assert_matches_write_spec(a, summary, SEED)
    assert {p.dtype for p in a.parameters()} == set(BITS)


def test_hf_gpt2_conv1d_dim1_parts_tie_and_bf16():
    """HF GPT-2 (Conv1D c_attn: deepnorm parts along dim 1, lm_head tied to wte) in bf16."""
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(
        n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=16, bos_token_id=0, eos_token_id=0
    )
    model = prefilled(transformers.GPT2LMHeadModel(config).to(torch.bfloat16))
    summary = tinit.init_model_(model, "deepnorm", seed=SEED)
    qkv = next(e for e in summary if e.name == "transformer.h.1.attn.c_attn.weight")
    assert qkv.spec.parts is not None and qkv.spec.split_dim == 1
    assert model.lm_head.weight is model.transformer.wte.weight
    assert "lm_head.weight" in next(e for e in summary if e.name == "transformer.wte.weight").tied
    assert_matches_write_spec(model, summary, SEED)


@pytest.mark.filterwarnings("ignore:Initializing zero-element tensors:UserWarning")
def test_non_contiguous_shared_storage_and_empty_parameters():
    """A Parameter from a transposed tensor, two Parameters on one storage (later overwrites earlier, with a
    warning), and 0-element parameters, in one model."""
    model = nn.Module()
    model.h = nn.ModuleList([nn.Module() for _ in range(2)])
    storage = torch.full((6, 6), 7.0)
    model.h[0].mlp = nn.Module()
    model.h[0].mlp.c_fc = nn.Linear(6, 10)
    model.h[0].mlp.c_fc.weight = nn.Parameter(torch.full((6, 10), 7.0).t())
    model.h[0].mlp.c_proj = nn.Linear(6, 6)
    model.h[0].mlp.c_proj.weight = nn.Parameter(storage)
    model.h[1].mlp = nn.Module()
    model.h[1].mlp.c_proj = nn.Linear(6, 6)
    model.h[1].mlp.c_proj.weight = nn.Parameter(storage)  # same memory, another Parameter
    model.h[1].mlp.c_fc = nn.Linear(6, 0)
    assert not model.h[0].mlp.c_fc.weight.is_contiguous()
    with pytest.warns(RuntimeWarning, match="share memory"):
        summary = tinit.init_model_(model, "gpt2", seed=SEED, d_model=6)
    assert [e.numel for e in summary if e.name.startswith("h.1.mlp.c_fc")] == [0, 0]
    for entry in summary:
        if entry.name != "h.0.mlp.c_proj.weight":  # overwritten by h.1's, as written one by one
            param = model.get_parameter(entry.name)
            want = write_spec_(torch.empty_like(param.detach()), entry.spec, seed=SEED, stream=stream_for(entry.name))
            assert_same_bits(param, want, entry.name)
    last = next(e for e in summary if e.name == "h.1.mlp.c_proj.weight")
    assert_same_bits(
        storage,
        write_spec_(torch.empty(6, 6), last.spec, seed=SEED, stream=stream_for(last.name)),
        "shared storage holds the later parameter's values",
    )


def test_meta_model_with_device_equals_materialised_model():
    model = MixedDtypes(n_layers=2)
    with torch.device("meta"):
        meta = MixedDtypes(n_layers=2)
    meta.lm_head.weight = meta.wte.weight = nn.Parameter(torch.empty(16, 12, device="meta"))
    model.lm_head.weight = model.wte.weight = nn.Parameter(torch.empty(16, 12))
    want = tinit.init_model_(model, "modern", seed=SEED)
    got = tinit.init_model_(meta, "modern", seed=SEED, device="cpu")
    assert meta.lm_head.weight is meta.wte.weight
    assert [(e.name, e.role, e.layer, e.tied) for e in got] == [(e.name, e.role, e.layer, e.tied) for e in want]
    for (name, p), q in zip(meta.named_parameters(), model.parameters(), strict=True):
        assert_same_bits(p, q, name)


# --- uniforms in low precision ----------------------------------------------


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "f16"])
def test_xavier_uniform_stays_inside_its_bounds(dtype):
    model = nn.Linear(768, 768, bias=False).to(dtype)
    (entry,) = tinit.init_model_(model, "xavier_uniform", seed=1)
    low, high = entry.bounds
    values = model.weight.detach().double()
    outside = int(((values < low) | (values > high)).sum())
    assert outside == 0, f"{outside} values outside [{low!r}, {high!r}]; max {values.max().item()!r}"


@pytest.mark.filterwarnings("ignore:Initializing zero-element tensors is a no-op")
@pytest.mark.parametrize("scheme", ["kaiming_normal", "xavier_uniform", "kaiming_uniform"])
def test_zero_fan_is_a_no_op(scheme):
    """A weight with no elements has no fan-based std and needs none: it is left as it is (as
    torch.nn.init does), the rest of the model is written, not a ZeroDivisionError."""
    model = nn.Linear(0, 4)
    nn.init.constant_(model.bias, 7.0)
    summary = tinit.init_model_(model, scheme, seed=SEED, d_model=4, overrides={"weight": "mlp_in", "bias": "bias"})
    assert [entry.numel for entry in summary] == [0, 4]
    assert torch.equal(model.bias, torch.zeros(4))
