"""Role and layer inference from parameter names (tinit.roles) on real module trees."""

from __future__ import annotations

import pytest
import torch

from tinit.models import GPT, GPTConfig
from tinit.roles import infer_layer, infer_role

GPT2_ROLES = {
    "transformer.wte.weight": "embedding",
    "transformer.wpe.weight": "embedding",
    "transformer.h.{i}.ln_1.weight": "norm",
    "transformer.h.{i}.ln_1.bias": "bias",
    "transformer.h.{i}.attn.c_attn.weight": "weight",
    "transformer.h.{i}.attn.c_attn.bias": "bias",
    "transformer.h.{i}.attn.c_proj.weight": "residual",
    "transformer.h.{i}.attn.c_proj.bias": "bias",
    "transformer.h.{i}.ln_2.weight": "norm",
    "transformer.h.{i}.ln_2.bias": "bias",
    "transformer.h.{i}.mlp.c_fc.weight": "weight",
    "transformer.h.{i}.mlp.c_fc.bias": "bias",
    "transformer.h.{i}.mlp.c_proj.weight": "residual",
    "transformer.h.{i}.mlp.c_proj.bias": "bias",
    "transformer.ln_f.weight": "norm",
    "transformer.ln_f.bias": "bias",
    "lm_head.weight": "head",
}
N_LAYERS = 3


def _expected(n_layers: int) -> dict[str, tuple[str, int | None]]:
    expected = {}
    for pattern, role in GPT2_ROLES.items():
        layers = range(n_layers) if "{i}" in pattern else [None]
        for i in layers:
            expected[pattern.format(i=i)] = (role, i)
    return expected


def _hf_gpt2():
    transformers = pytest.importorskip("transformers",
                                       reason="transformers is not installed (pip install transformers)")
    with torch.device("meta"):
        return transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=N_LAYERS, n_embd=64, n_head=2))


def _tinit_gpt():
    with torch.device("meta"):
        return GPT(GPTConfig(n_layers=N_LAYERS, d_model=64, n_heads=2))


@pytest.mark.parametrize("build", [_hf_gpt2, _tinit_gpt], ids=["hf-gpt2", "tinit-gpt"])
def test_gpt2_names(build):
    model = build()
    names = [n for n, _ in model.named_parameters(remove_duplicate=False)]
    got = {n: (infer_role(n), infer_layer(n)) for n in names}
    assert got == _expected(N_LAYERS)


@pytest.mark.parametrize("name,role", [
    ("model.layers.0.self_attn.o_proj.weight", "residual"),
    ("model.layers.0.mlp.down_proj.weight", "residual"),
    ("model.layers.0.mlp.up_proj.weight", "weight"),
    ("model.layers.0.input_layernorm.weight", "norm"),
    ("model.norm.weight", "norm"),
    ("model.embed_tokens.weight", "embedding"),
    ("encoder.layers.1.self_attn.out_proj.weight", "residual"),
    ("encoder.layers.1.fc2.weight", "residual"),
    ("layers.2.feed_forward.w2.weight", "residual"),
    ("encoder.block.0.layer.1.DenseReluDense.wo.weight", "residual"),
    ("output.weight", "head"),
], ids=lambda v: v if "." not in v else v.split(".")[-2])
def test_other_architectures(name, role):
    assert infer_role(name) == role
