"""Role, layer and stack inference from parameter names (tinit.roles) on real module trees."""

from __future__ import annotations

import pytest
import torch

from tinit.models import GPT, GPTConfig
from tinit.roles import ROLES, infer_layer, infer_role, infer_stack

GPT2_ROLES = {
    "transformer.wte.weight": "embedding",
    "transformer.wpe.weight": "embedding",
    "transformer.h.{i}.ln_1.weight": "norm",
    "transformer.h.{i}.ln_1.bias": "bias",
    "transformer.h.{i}.attn.c_attn.weight": "attn_qkv",
    "transformer.h.{i}.attn.c_attn.bias": "bias",
    "transformer.h.{i}.attn.c_proj.weight": "attn_out",
    "transformer.h.{i}.attn.c_proj.bias": "bias",
    "transformer.h.{i}.ln_2.weight": "norm",
    "transformer.h.{i}.ln_2.bias": "bias",
    "transformer.h.{i}.mlp.c_fc.weight": "mlp_in",
    "transformer.h.{i}.mlp.c_fc.bias": "bias",
    "transformer.h.{i}.mlp.c_proj.weight": "mlp_out",
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
    transformers = pytest.importorskip(
        "transformers", reason="transformers is not installed (pip install transformers)"
    )
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


NAMES = [
    # Hugging Face Llama / Mistral / Qwen2
    ("model.embed_tokens.weight", "embedding", None),
    ("model.layers.7.self_attn.q_proj.weight", "attn_q", 7),
    ("model.layers.7.self_attn.k_proj.weight", "attn_k", 7),
    ("model.layers.7.self_attn.v_proj.bias", "bias", 7),
    ("model.layers.7.self_attn.o_proj.weight", "attn_out", 7),
    ("model.layers.7.mlp.gate_proj.weight", "mlp_in", 7),
    ("model.layers.7.mlp.up_proj.weight", "mlp_in", 7),
    ("model.layers.7.mlp.down_proj.weight", "mlp_out", 7),
    ("model.layers.7.input_layernorm.weight", "norm", 7),
    ("model.layers.7.post_attention_layernorm.weight", "norm", 7),
    ("model.layers.7.self_attn.q_norm.weight", "norm", 7),
    ("model.norm.weight", "norm", None),
    ("lm_head.weight", "head", None),
    # T5
    ("shared.weight", "embedding", None),
    ("encoder.block.3.layer.0.SelfAttention.q.weight", "attn_q", 3),
    ("encoder.block.3.layer.0.SelfAttention.o.weight", "attn_out", 3),
    ("encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", "embedding", 0),
    ("encoder.block.3.layer.1.DenseReluDense.wi.weight", "mlp_in", 3),
    ("encoder.block.3.layer.1.DenseReluDense.wi_0.weight", "mlp_in", 3),
    ("encoder.block.3.layer.1.DenseReluDense.wo.weight", "mlp_out", 3),
    ("decoder.block.2.layer.1.EncDecAttention.k.weight", "attn_k", 2),
    ("decoder.block.2.layer.1.EncDecAttention.v.weight", "attn_v", 2),
    ("decoder.block.2.layer.2.layer_norm.weight", "norm", 2),
    ("decoder.final_layer_norm.weight", "norm", None),
    # BERT
    ("bert.embeddings.word_embeddings.weight", "embedding", None),
    ("bert.embeddings.token_type_embeddings.weight", "embedding", None),
    ("bert.embeddings.LayerNorm.weight", "norm", None),
    ("bert.encoder.layer.4.attention.self.query.weight", "attn_q", 4),
    ("bert.encoder.layer.4.attention.self.value.weight", "attn_v", 4),
    ("bert.encoder.layer.4.attention.output.dense.weight", "attn_out", 4),
    ("bert.encoder.layer.4.attention.output.LayerNorm.weight", "norm", 4),
    ("bert.encoder.layer.4.intermediate.dense.weight", "mlp_in", 4),
    ("bert.encoder.layer.4.output.dense.weight", "mlp_out", 4),
    ("bert.pooler.dense.weight", "mlp_in", None),
    ("cls.predictions.transform.dense.weight", "mlp_in", None),
    ("cls.predictions.decoder.weight", "head", None),
    ("cls.predictions.bias", "bias", None),
    # torchtitan Llama
    ("tok_embeddings.weight", "embedding", None),
    ("layers.5.attention.wq.weight", "attn_q", 5),
    ("layers.5.attention.wk.weight", "attn_k", 5),
    ("layers.5.attention.wv.weight", "attn_v", 5),
    ("layers.5.attention.wo.weight", "attn_out", 5),
    ("layers.5.feed_forward.w1.weight", "mlp_in", 5),
    ("layers.5.feed_forward.w3.weight", "mlp_in", 5),
    ("layers.5.feed_forward.w2.weight", "mlp_out", 5),
    ("layers.5.attention_norm.weight", "norm", 5),
    ("layers.5.ffn_norm.weight", "norm", 5),
    ("output.weight", "head", None),
    # Megatron-LM legacy and core
    ("language_model.embedding.word_embeddings.weight", "embedding", None),
    ("language_model.encoder.layers.2.self_attention.query_key_value.weight", "attn_qkv", 2),
    ("language_model.encoder.layers.2.self_attention.dense.weight", "attn_out", 2),
    ("language_model.encoder.layers.2.mlp.dense_h_to_4h.weight", "mlp_in", 2),
    ("language_model.encoder.layers.2.mlp.dense_4h_to_h.weight", "mlp_out", 2),
    ("language_model.encoder.final_layernorm.weight", "norm", None),
    ("language_model.output_layer.weight", "head", None),
    ("embedding.word_embeddings.weight", "embedding", None),
    ("decoder.layers.1.self_attention.linear_qkv.weight", "attn_qkv", 1),
    ("decoder.layers.1.self_attention.linear_qkv.layer_norm_weight", "norm", 1),
    ("decoder.layers.1.self_attention.linear_qkv.layer_norm_bias", "bias", 1),
    ("decoder.layers.1.self_attention.linear_proj.weight", "attn_out", 1),
    ("decoder.layers.1.mlp.linear_fc1.weight", "mlp_in", 1),
    ("decoder.layers.1.mlp.linear_fc2.weight", "mlp_out", 1),
    ("output_layer.weight", "head", None),
    # BART / OPT, nn.TransformerEncoderLayer, OLMo, GPT-NeoX
    ("model.decoder.layers.0.self_attn.out_proj.weight", "attn_out", 0),
    ("model.decoder.layers.0.encoder_attn.k_proj.weight", "attn_k", 0),
    ("model.decoder.layers.0.fc1.weight", "mlp_in", 0),
    ("model.decoder.layers.0.fc2.weight", "mlp_out", 0),
    ("layers.0.self_attn.in_proj_weight", "attn_qkv", 0),
    ("layers.0.self_attn.in_proj_bias", "bias", 0),
    ("layers.0.linear2.weight", "mlp_out", 0),
    ("transformer.blocks.3.att_proj.weight", "attn_qkv", 3),
    ("transformer.blocks.3.ff_out.weight", "mlp_out", 3),
    ("transformer.ff_out.weight", "head", None),
    ("gpt_neox.embed_in.weight", "embedding", None),
    ("embed_out.weight", "head", None),
    # residual gates (ReZero and friends)
    ("layers.3.resweight", "residual_gate", 3),
    ("blocks.3.attn_gate", "residual_gate", 3),
    ("h.3.res_gate", "residual_gate", 3),
]


@pytest.mark.parametrize("name,role,layer", NAMES, ids=[n for n, _, _ in NAMES])
def test_architectures(name, role, layer):
    assert role in ROLES
    assert (infer_role(name), infer_layer(name)) == (role, layer)


@pytest.mark.parametrize(
    "name",
    [
        "encoder.block.0.mystery.weight",
        "layers.0.router.gate.weight",
        "layers.0.proj.weight",
        "q.weight",
        "mlp.o.weight",
    ],
)
def test_unclassifiable_is_none(name):
    assert infer_role(name) is None


@pytest.mark.parametrize(
    "name,stack",
    [
        ("encoder.block.0.layer.0.SelfAttention.q.weight", "encoder"),
        ("model.decoder.layers.0.fc1.weight", "decoder"),
        ("bert.encoder.layer.0.attention.self.query.weight", "encoder"),
        ("model.layers.0.mlp.up_proj.weight", None),
        ("decoder_norm.weight", None),
    ],
)
def test_stack(name, stack):
    assert infer_stack(name) == stack


@pytest.mark.parametrize("name", [n for n, _, _ in NAMES])
def test_role_and_stack_ignore_block_numbers(name):
    """init_model_ infers a role and stack once per name template (block numbers replaced by 0): that must agree."""
    from tinit.model_init import _BLOCK_NUMBER

    template = _BLOCK_NUMBER.sub(".0", name)
    renumbered = _BLOCK_NUMBER.sub(".17", name)
    for other in (template, renumbered):
        assert infer_role(other) == infer_role(name), other
        assert infer_stack(other) == infer_stack(name), other
