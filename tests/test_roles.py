"""Role, layer and stack inference from parameter names (tinit.roles) on real module trees."""

from __future__ import annotations

import pytest
import torch

from tinit.roles import ROLES, infer_layer, infer_role, infer_stack
from tinit.tools.toy_models import GPT, GPTConfig

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
    ("model.layers.7.mlp.up_proj.weight", "mlp_up", 7),
    ("model.layers.7.mlp.down_proj.weight", "mlp_out", 7),
    ("model.layers.7.input_layernorm.weight", "norm", 7),
    ("model.layers.7.post_attention_layernorm.weight", "norm", 7),
    ("model.layers.7.self_attn.q_norm.weight", "norm", 7),
    ("model.norm.weight", "norm", None),
    ("lm_head.weight", "head", None),
    ("decoder.output_projection.weight", "head", None),  # fairseq, torchscale
    # T5
    ("shared.weight", "embedding", None),
    ("encoder.block.3.layer.0.SelfAttention.q.weight", "attn_q", 3),
    ("encoder.block.3.layer.0.SelfAttention.o.weight", "attn_out", 3),
    ("encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", "embedding", 0),
    ("encoder.block.3.layer.1.DenseReluDense.wi.weight", "mlp_in", 3),
    ("encoder.block.3.layer.1.DenseReluDense.wi_0.weight", "mlp_in", 3),
    ("encoder.block.3.layer.1.DenseReluDense.wi_1.weight", "mlp_up", 3),
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
    ("layers.5.feed_forward.w3.weight", "mlp_up", 5),
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
    # state-space and linear-attention mixers (HF Mamba, Mamba-2, Jamba, Bamba, Nemotron-H, Qwen3-Next)
    ("backbone.layers.2.mixer.A_log", "ssm_a", 2),
    ("backbone.layers.2.mixer.D", "ssm_d", 2),
    ("backbone.layers.2.mixer.dt_bias", "ssm_dt", 2),
    ("backbone.layers.2.mixer.in_proj.weight", "ssm_in", 2),
    ("backbone.layers.2.mixer.conv1d.weight", "ssm_conv", 2),
    ("backbone.layers.2.mixer.conv1d.bias", "bias", 2),
    ("backbone.layers.2.mixer.norm.weight", "norm", 2),
    ("backbone.layers.2.mixer.out_proj.weight", "attn_out", 2),
    ("backbone.layers.2.mixer.x_proj.weight", "ssm_in", 2),
    ("backbone.layers.2.mixer.dt_proj.weight", "ssm_in", 2),
    ("backbone.layers.2.mixer.dt_proj.bias", "ssm_dt", 2),
    ("model.layers.0.mamba.in_proj.weight", "ssm_in", 0),
    ("model.layers.0.mamba.D", "ssm_d", 0),
    ("model.layers.1.mixer.q_proj.weight", "attn_q", 1),  # Nemotron-H's attention block is a "mixer" too
    ("model.layers.1.mixer.down_proj.weight", "mlp_out", 1),
    ("model.layers.0.linear_attn.in_proj_qkvz.weight", "ssm_in", 0),
    ("model.layers.0.linear_attn.in_proj_ba.weight", "ssm_in", 0),
    ("model.layers.0.linear_attn.dt_bias", "ssm_dt", 0),
    ("blocks.0.attn.in_proj.weight", "attn_qkv", 0),  # a fused in_proj inside an attention module
    # residual gates (ReZero and friends), LayerScale, tanh gates
    ("layers.3.resweight", "residual_gate", 3),
    ("blocks.3.attn_gate", "residual_gate", 3),
    ("h.3.res_gate", "residual_gate", 3),
    ("blocks.3.ls1.gamma", "residual_gate", 3),
    ("dinov2.encoder.layer.2.layer_scale1.lambda1", "residual_gate", 2),
    ("model.vision_model.transformer.layers.1.gate_attn", "residual_gate", 1),
    ("model.language_model.layers.3.cross_attn_attn_gate", "residual_gate", 3),
    ("model.language_model.layers.3.cross_attn_mlp_gate", "residual_gate", 3),
    ("layers.0.gate_attention", "residual_gate", 0),
    ("layers.0.gate_ffw", "residual_gate", 0),
    # Hugging Face MoE: Mixtral / Qwen2-MoE / Qwen3-MoE / OLMoE / DeepSeek-V3 routers and experts
    ("model.layers.1.mlp.gate.weight", "router", 1),
    ("model.layers.1.block_sparse_moe.gate.weight", "router", 1),
    ("model.layers.1.mlp.shared_expert_gate.weight", "router", 1),
    ("model.layers.1.mlp.experts.gate_up_proj", "mlp_gate_up", 1),
    ("model.layers.1.mlp.experts.down_proj", "mlp_out", 1),
    ("model.layers.1.mlp.experts.gate_up_proj_bias", "bias", 1),
    ("model.layers.1.mlp.shared_expert.gate_proj.weight", "mlp_in", 1),
    ("model.layers.1.mlp.shared_expert.up_proj.weight", "mlp_up", 1),
    ("model.layers.1.mlp.shared_experts.down_proj.weight", "mlp_out", 1),
    # GPT-OSS: router weight and bias, attention sinks
    ("model.layers.1.mlp.router.weight", "router", 1),
    ("model.layers.1.mlp.router.bias", "router", 1),
    ("model.layers.1.self_attn.sinks", "attn_sink", 1),
    # DeepSeek-V2/V3 MLA
    ("model.layers.1.self_attn.q_a_proj.weight", "attn_q_down", 1),
    ("model.layers.1.self_attn.q_a_layernorm.weight", "norm", 1),
    ("model.layers.1.self_attn.q_b_proj.weight", "attn_q", 1),
    ("model.layers.1.self_attn.kv_a_proj_with_mqa.weight", "attn_kv_down", 1),
    ("model.layers.1.self_attn.kv_a_layernorm.weight", "norm", 1),
    ("model.layers.1.self_attn.kv_b_proj.weight", "attn_kv", 1),
    # RoBERTa, OPT, ViT, CLIP / SigLIP, LLaVA
    ("lm_head.dense.weight", "mlp_in", None),
    ("lm_head.layer_norm.weight", "norm", None),
    ("model.decoder.project_in.weight", "linear", None),
    ("model.decoder.project_out.weight", "linear", None),
    ("vit.embeddings.cls_token", "token", None),
    ("vit.embeddings.mask_token", "token", None),
    ("vit.embeddings.position_embeddings", "embedding", None),
    ("vit.embeddings.patch_embeddings.projection.weight", "patch_embed", None),
    ("vit.embeddings.patch_embeddings.projection.bias", "bias", None),
    ("deit.embeddings.distillation_token", "token", None),
    ("dinov2.embeddings.register_tokens", "token", None),
    ("vision_model.embeddings.class_embedding", "token", None),
    ("vision_model.embeddings.patch_embedding.weight", "patch_embed", None),
    ("vision_model.embeddings.position_embedding.weight", "embedding", None),
    ("model.multi_modal_projector.linear_1.weight", "linear", None),
    ("model.multi_modal_projector.linear_2.bias", "bias", None),
    ("visual_projection.weight", "linear", None),
    # OLMo-core (names from olmo_core.nn: attention, feed_forward, lm_head, moe)
    ("embeddings.weight", "embedding", None),
    ("blocks.2.attention.w_q.weight", "attn_q", 2),
    ("blocks.2.attention.w_k.weight", "attn_k", 2),
    ("blocks.2.attention.w_v.weight", "attn_v", 2),
    ("blocks.2.attention.w_qkv.weight", "attn_qkv", 2),
    ("blocks.2.attention.w_out.weight", "attn_out", 2),
    ("blocks.2.attention.q_norm.weight", "norm", 2),
    ("blocks.2.attention_norm.weight", "norm", 2),
    ("blocks.2.feed_forward.w1.weight", "mlp_in", 2),
    ("blocks.2.feed_forward.w3.weight", "mlp_up", 2),
    ("blocks.2.feed_forward.w2.weight", "mlp_out", 2),
    ("blocks.2.feed_forward_norm.weight", "norm", 2),
    ("blocks.2.feed_forward_moe.router.weight", "router", 2),
    ("blocks.2.feed_forward_moe.experts.mlp.w1", "mlp_in", 2),
    ("blocks.2.feed_forward_moe.experts.mlp.w3", "mlp_up", 2),
    ("blocks.2.feed_forward_moe.experts.mlp.w2", "mlp_out", 2),
    ("blocks.2.feed_forward_moe.shared_mlp.w1.weight", "mlp_in", 2),
    ("blocks.2.feed_forward_moe.shared_mlp.w2.weight", "mlp_out", 2),
    ("lm_head.norm.weight", "norm", None),
    ("lm_head.w_out.weight", "head", None),
    # Megatron-Core MoE (TE grouped experts: one weight<e> per expert; legacy GroupedMLP) and MLA
    ("decoder.layers.1.mlp.router.weight", "router", 1),
    ("decoder.layers.1.mlp.experts.linear_fc1.weight0", "mlp_in", 1),
    ("decoder.layers.1.mlp.experts.linear_fc1.weight7", "mlp_in", 1),
    ("decoder.layers.1.mlp.experts.linear_fc2.weight3", "mlp_out", 1),
    ("decoder.layers.1.mlp.experts.weight1", "mlp_in", 1),
    ("decoder.layers.1.mlp.experts.weight2", "mlp_out", 1),
    ("decoder.layers.1.mlp.experts.local_experts.0.linear_fc1.weight", "mlp_in", 1),
    ("decoder.layers.1.mlp.shared_experts.linear_fc1.weight", "mlp_in", 1),
    ("decoder.layers.1.mlp.shared_experts.linear_fc2.weight", "mlp_out", 1),
    ("decoder.layers.1.mlp.shared_experts.gate_weight", "router", 1),
    ("decoder.layers.1.mlp.linear_fc1.layer_norm_weight", "norm", 1),
    ("decoder.layers.1.self_attention.linear_q_down_proj.weight", "attn_q_down", 1),
    ("decoder.layers.1.self_attention.linear_q_up_proj.weight", "attn_q", 1),
    ("decoder.layers.1.self_attention.linear_q_up_proj.layer_norm_weight", "norm", 1),
    ("decoder.layers.1.self_attention.linear_kv_down_proj.weight", "attn_kv_down", 1),
    ("decoder.layers.1.self_attention.linear_kv_up_proj.weight", "attn_kv", 1),
    # torchtitan MoE and MLA: 0.3.0's dimension-tagged names, and the earlier moe.experts.w1
    ("layers.1.moe.router.gate.weight", "router", 1),
    ("layers.1.moe.router.gate.bias", "router", 1),
    ("layers.1.moe.experts.w1", "mlp_in", 1),
    ("layers.1.moe.experts.w3", "mlp_up", 1),
    ("layers.1.moe.experts.w2", "mlp_out", 1),
    ("layers.1.moe.routed_experts.inner_experts.w1_EFD", "mlp_in", 1),
    ("layers.1.moe.routed_experts.inner_experts.w3_EFD", "mlp_up", 1),
    ("layers.1.moe.routed_experts.inner_experts.w2_EDF", "mlp_out", 1),
    ("layers.1.moe.routed_experts.inner_experts.mlp1_weight_EGD", "mlp_gate_up", 1),
    ("layers.1.moe.routed_experts.inner_experts.mlp1_bias_EG", "bias", 1),
    ("layers.1.moe.routed_experts.inner_experts.mlp2_weight_EDF", "mlp_out", 1),
    ("layers.1.moe.shared_experts.w1.weight", "mlp_in", 1),
    ("layers.1.moe.shared_experts.w3.weight", "mlp_up", 1),
    ("layers.1.attention.qkv_linear.wqkv.weight", "attn_qkv", 1),
    ("layers.1.attention.sinks", "attn_sink", 1),
    ("layers.1.attention.wq_a.weight", "attn_q_down", 1),
    ("layers.1.attention.q_norm.weight", "norm", 1),
    ("layers.1.attention.wq_b.weight", "attn_q", 1),
    ("layers.1.attention.wkv_a.weight", "attn_kv_down", 1),
    ("layers.1.attention.kv_norm.weight", "norm", 1),
    ("layers.1.attention.wkv_b.weight", "attn_kv", 1),
    ("lm_head.weight", "head", None),
    # timm VisionTransformer (timm 1.0: vision_transformer.VisionTransformer / Block / LayerScale)
    ("cls_token", "token", None),
    ("reg_token", "token", None),
    ("pos_embed", "embedding", None),
    ("patch_embed.proj.weight", "patch_embed", None),
    ("blocks.4.norm1.weight", "norm", 4),
    ("blocks.4.attn.qkv.weight", "attn_qkv", 4),
    ("blocks.4.attn.proj.weight", "attn_out", 4),
    ("blocks.4.ls1.gamma", "residual_gate", 4),
    ("blocks.4.mlp.fc1.weight", "mlp_in", 4),
    ("blocks.4.mlp.fc2.weight", "mlp_out", 4),
    ("blocks.4.ls2.gamma", "residual_gate", 4),
    ("fc_norm.weight", "norm", None),
    ("head.weight", "head", None),
]


@pytest.mark.parametrize("name,role,layer", NAMES, ids=[n for n, _, _ in NAMES])
def test_architectures(name, role, layer):
    assert role in ROLES
    assert (infer_role(name), infer_layer(name)) == (role, layer)


@pytest.mark.parametrize(
    "name",
    [
        "encoder.block.0.mystery.weight",
        "layers.0.gate.weight",
        "layers.0.proj.weight",
        "q.weight",
        "mlp.o.weight",
        "blocks.0.in_proj.weight",  # neither an attention's nor a mixer's: init_model_ reads its module
        "blocks.0.D",
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
    from tinit._classify import _BLOCK_NUMBER

    template = _BLOCK_NUMBER.sub(".0", name)
    renumbered = _BLOCK_NUMBER.sub(".17", name)
    for other in (template, renumbered):
        assert infer_role(other) == infer_role(name), other
        assert infer_stack(other) == infer_stack(name), other
