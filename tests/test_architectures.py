"""Every Hugging Face family of ``tinit.tools.hf_families`` initialises, with the roles its blocks mean.

Each family is built small on the meta device and initialised on the CPU. The oracle for which
parameters are constants is the model's own code: the same family built eagerly under
``torch.manual_seed`` runs Hugging Face's ``_init_weights``, and every parameter it leaves constant
(norms 1, Gemma's zero-centred norms 0, biases 0) must be the same constant in tinit's summary,
every parameter it draws must be drawn (routers, GPT-OSS's router bias, tokens, patch embeddings).
"""

from __future__ import annotations

import math
import re

import pytest
import torch

import tinit
from tinit.tools import hf_families

transformers = pytest.importorskip("transformers", reason="transformers is not installed (pip install transformers)")

FAMILIES = sorted(hf_families.FAMILIES)
SCHEMES = ("gpt2", "xavier_normal")  # and "normal" in test_constants_match_the_models_own_init

# Known gaps outside roles, each with the part of tinit that owns it: the test fails (XPASS) once
# they are closed, so the marker is removed with the fix.
KNOWN_GAPS: dict[tuple[str, str], str] = {}
HF_CONSTANT_GAPS: dict[str, str] = {}


def _initialise(model, scheme: str, **kwargs) -> list[tinit.ParamInit]:
    """``init_model_`` on the CPU (materialising the meta-built model, buffers recomputed)."""
    return tinit.init_model_(model, scheme, device="cpu", **kwargs)


def _params(family: str, scheme: str):
    marks = []
    if (family, scheme) in KNOWN_GAPS:
        marks = [pytest.mark.xfail(strict=True, raises=ValueError, reason=KNOWN_GAPS[(family, scheme)])]
    return pytest.param(family, scheme, marks=marks, id=f"{family}-{scheme}")


@pytest.mark.parametrize(("family", "scheme"), [_params(f, s) for f in FAMILIES for s in SCHEMES])
def test_family_initialises_with_every_parameter_classified(family, scheme):
    model = hf_families.build(family)
    names = [n for n, _ in model.named_parameters()]
    summary = _initialise(model, scheme)
    assert [e.name for e in summary] == names, "summary does not list every (untied) parameter once"
    assert [e.name for e in summary if e.role is None] == []
    assert all(not p.is_meta for p in model.parameters())


# Key parameters of each family (block 0 unless named): the roles their modules mean.
KEY_ROLES = {
    "llama": {r"layers\.0\.mlp\.gate_proj\.weight": "mlp_in", r"layers\.0\.mlp\.up_proj\.weight": "mlp_up"},
    "gpt2": {r"h\.0\.mlp\.c_fc\.weight": "mlp_in"},  # an ungated MLP: no mlp_up
    "mixtral": {
        r"layers\.0\.mlp\.gate\.weight": "router",
        r"layers\.0\.mlp\.experts\.gate_up_proj$": "mlp_gate_up",
        r"layers\.0\.mlp\.experts\.down_proj$": "mlp_out",
    },
    "qwen2_moe": {
        r"layers\.0\.mlp\.gate\.weight": "router",
        r"layers\.0\.mlp\.shared_expert_gate\.weight": "router",
        r"layers\.0\.mlp\.shared_expert\.up_proj\.weight": "mlp_up",
        r"layers\.0\.mlp\.shared_expert\.down_proj\.weight": "mlp_out",
    },
    "qwen3_moe": {r"layers\.0\.mlp\.gate\.weight": "router"},
    "olmoe": {r"layers\.0\.mlp\.gate\.weight": "router"},
    "deepseek_v3": {
        r"layers\.0\.self_attn\.q_a_proj\.weight": "attn_q_down",
        r"layers\.0\.self_attn\.q_a_layernorm\.weight": "norm",
        r"layers\.0\.self_attn\.q_b_proj\.weight": "attn_q",
        r"layers\.0\.self_attn\.kv_a_proj_with_mqa\.weight": "attn_kv_down",
        r"layers\.0\.self_attn\.kv_a_layernorm\.weight": "norm",
        r"layers\.0\.self_attn\.kv_b_proj\.weight": "attn_kv",
        r"layers\.3\.mlp\.gate\.weight": "router",
        r"layers\.3\.mlp\.shared_experts\.up_proj\.weight": "mlp_up",
    },
    "gpt_oss": {
        r"layers\.0\.self_attn\.sinks": "attn_sink",
        r"layers\.0\.mlp\.router\.weight": "router",
        r"layers\.0\.mlp\.router\.bias": "router",
        r"layers\.0\.mlp\.experts\.gate_up_proj_bias": "bias",
    },
    "roberta": {r"^lm_head\.dense\.weight": "mlp_in"},
    "vit": {
        r"embeddings\.cls_token": "token",
        r"embeddings\.position_embeddings": "embedding",
        r"patch_embeddings\.projection\.weight": "patch_embed",
    },
    "llava": {
        r"vision_tower\.embeddings\.class_embedding": "token",
        r"vision_tower\.embeddings\.patch_embedding\.weight": "patch_embed",
        r"vision_tower\.embeddings\.position_embedding\.weight": "embedding",
        r"multi_modal_projector\.linear_1\.weight": "linear",
        r"multi_modal_projector\.linear_2\.weight": "linear",
        r"language_model\.layers\.0\.mlp\.up_proj\.weight": "mlp_up",
    },
    # State-space mixers: the input projection is no fused q/k/v, the output projection the residual's.
    "mamba2": {
        r"layers\.0\.mixer\.in_proj\.weight": "ssm_in",
        r"layers\.0\.mixer\.conv1d\.weight": "ssm_conv",
        r"layers\.0\.mixer\.out_proj\.weight": "attn_out",
        r"layers\.0\.mixer\.A_log": "ssm_a",
        r"layers\.0\.mixer\.D": "ssm_d",
        r"layers\.0\.mixer\.dt_bias": "ssm_dt",
    },
    "mamba": {r"layers\.0\.mixer\.x_proj\.weight": "ssm_in", r"layers\.0\.mixer\.dt_proj\.bias": "ssm_dt"},
    "jamba": {r"layers\.0\.mamba\.dt_proj\.weight": "ssm_in", r"layers\.0\.mamba\.dt_proj\.bias": "ssm_dt"},
    "bamba": {r"layers\.0\.mamba\.in_proj\.weight": "ssm_in", r"layers\.1\.self_attn\.q_proj\.weight": "attn_q"},
    "nemotron_h": {r"layers\.1\.mixer\.q_proj\.weight": "attn_q", r"layers\.0\.mixer\.dt_bias": "ssm_dt"},
    "qwen3_next": {
        r"layers\.0\.linear_attn\.in_proj_qkvz\.weight": "ssm_in",
        r"layers\.0\.linear_attn\.in_proj_ba\.weight": "ssm_in",
        r"layers\.0\.linear_attn\.conv1d\.weight": "ssm_conv",
        r"layers\.0\.linear_attn\.A_log": "ssm_a",
    },
}


@pytest.mark.parametrize("family", sorted(KEY_ROLES))
def test_key_parameters_have_their_roles(family):
    summary = _initialise(hf_families.build(family), "gpt2")
    roles = {e.name: e.role for e in summary}
    for pattern, role in KEY_ROLES[family].items():
        found = [name for name in roles if re.search(pattern, name)]
        assert found, f"{family}: no parameter matches {pattern}"
        assert {roles[name] for name in found} == {role}, (pattern, {n: roles[n] for n in found})


def _kind(tensor: torch.Tensor) -> tuple:
    flat = tensor.detach().double().flatten()
    if flat.numel() and bool((flat == flat[0]).all()):
        return ("constant", float(flat[0]))
    return ("drawn",)


def _hf_case(family):
    marks = []
    if family in HF_CONSTANT_GAPS:
        marks = [pytest.mark.xfail(strict=True, raises=AssertionError, reason=HF_CONSTANT_GAPS[family])]
    return pytest.param(family, marks=marks, id=family)


@pytest.mark.parametrize("family", [_hf_case(f) for f in FAMILIES])
def test_constants_match_the_models_own_init(family):
    """Which parameters are constant (and which constant) agrees with HF's own ``_init_weights``."""
    torch.manual_seed(0)
    own = {name: _kind(p) for name, p in hf_families.build(family, device="cpu").named_parameters()}
    summary = _initialise(hf_families.build(family), "normal")
    ours = {e.name: ("constant", e.constant) if e.constant is not None else ("drawn",) for e in summary}
    assert ours.keys() == own.keys()
    assert [e.name for e in summary if e.role is None] == []
    differ = {name: (own[name], ours[name]) for name in own if own[name] != ours[name]}
    assert differ == {}, f"{family}: (HF's own init, tinit) differ"


def _llava(text_layers: int, vision_layers: int):
    config = hf_families.config("llava")
    config.text_config.num_hidden_layers = text_layers
    config.vision_config.num_hidden_layers = vision_layers
    return hf_families.build(config)


def test_llava_depth_is_counted_per_tower():
    """gpt2's residual projections: 0.02 / sqrt(2 L) with L the blocks of the parameter's own tower
    (HF GPT-2 ``_init_weights``' rule), not the blocks of both towers pooled."""
    text, vision = 4, 2
    summary = {e.name: e for e in _initialise(_llava(text, vision), "gpt2")}
    text_o = summary["model.language_model.layers.3.self_attn.o_proj.weight"]
    vision_o = summary["model.vision_tower.encoder.layers.1.self_attn.out_proj.weight"]
    assert text_o.std == pytest.approx(0.02 / math.sqrt(2 * text), rel=1e-12)
    assert vision_o.std == pytest.approx(0.02 / math.sqrt(2 * vision), rel=1e-12)
    assert (text_o.tower, vision_o.tower) == ("model.language_model.layers", "model.vision_tower.encoder.layers")
    assert summary["lm_head.weight"].tower == "model.language_model.layers"  # the tower before it
    assert summary["model.language_model.embed_tokens.weight"].tower == "model.language_model.layers"


def test_llava_n_layers_by_tower_name():
    towers = {"model.language_model.layers": 80, "model.vision_tower.encoder.layers": 24}
    summary = {e.name: e for e in _initialise(_llava(4, 2), "gpt2", n_layers=towers)}
    assert summary["model.language_model.layers.0.mlp.down_proj.weight"].std == pytest.approx(0.02 / math.sqrt(160))
    assert summary["model.vision_tower.encoder.layers.0.mlp.fc2.weight"].std == pytest.approx(0.02 / math.sqrt(48))
    summary = {e.name: e for e in _initialise(_llava(4, 2), "gpt2", n_layers=10)}
    assert summary["model.vision_tower.encoder.layers.0.mlp.fc2.weight"].std == pytest.approx(0.02 / math.sqrt(20))
    with pytest.raises(ValueError, match=r"n_layers keys \['decoder'\]"):
        tinit.init_model_(_llava(4, 2), "gpt2", n_layers={"decoder": 3}, device="cpu")


def test_t5_stacks_keep_n_and_m():
    """An encoder-decoder model's towers are its stacks; deepnorm's decoder beta (12 M)^(-1/4)
    (Wang et al. 2022, DeepNet, Table 1) reads M = the decoder's blocks, overridable by stack."""
    model = hf_families.build("t5", num_layers=2, num_decoder_layers=3)
    summary = _initialise(model, "deepnorm")
    towers = {e.tower for e in summary if e.layer is not None}
    assert towers == {"encoder.block", "decoder.block"}
    v = next(e for e in summary if e.name == "decoder.block.0.layer.0.SelfAttention.v.weight")
    assert v.std == pytest.approx((12 * 3) ** -0.25 * math.sqrt(2 / (256 + 256)), rel=1e-12)
    summary = _initialise(hf_families.build("t5"), "deepnorm", n_layers={"encoder": 6, "decoder": 12})
    v = next(e for e in summary if e.name == "decoder.block.0.layer.0.SelfAttention.v.weight")
    assert v.std == pytest.approx((12 * 12) ** -0.25 * math.sqrt(2 / (256 + 256)), rel=1e-12)


# torchtitan 0.3.0's own models (its dimension-tagged expert names, fused wqkv, MLA, sinks).
TORCHTITAN = {
    "llama3": ("debugmodel", {r"feed_forward\.w3\.weight": "mlp_up", r"qkv_linear\.wqkv\.weight": "attn_qkv"}),
    "deepseek_v3": (
        "debugmodel",
        {
            r"attention\.wkv_a\.weight": "attn_kv_down",
            r"attention\.wkv_b\.weight": "attn_kv",
            r"moe\.router\.gate\.weight": "router",
            r"inner_experts\.w1_EFD": "mlp_in",
            r"inner_experts\.w3_EFD": "mlp_up",
            r"inner_experts\.w2_EDF": "mlp_out",
            r"moe\.shared_experts\.w3\.weight": "mlp_up",
        },
    ),
    "gpt_oss": (
        "debugmodel",
        {
            r"attention\.sinks": "attn_sink",
            r"moe\.router\.gate\.bias": "router",
            r"inner_experts\.mlp1_weight_EGD": "mlp_gate_up",
            r"inner_experts\.mlp1_bias_EG": "bias",
            r"inner_experts\.mlp2_weight_EDF": "mlp_out",
        },
    ),
    "qwen3": ("debugmodel_moe", {r"moe\.router\.gate\.weight": "router", r"attention\.q_norm\.weight": "norm"}),
}


def _torchtitan(family: str):
    module = pytest.importorskip(f"torchtitan.models.{family}", reason="torchtitan is not installed")
    flavor, _ = TORCHTITAN[family]
    config = module.model_registry(flavor).model
    with torch.device("meta"):
        return config.build()


@pytest.mark.parametrize("family", sorted(TORCHTITAN))
def test_torchtitan_models_are_classified(family):
    from tinit._classify import classify

    roles = {e.name: e.role for e in classify(_torchtitan(family), "", [])}
    assert [name for name, role in roles.items() if role is None] == []
    for pattern, role in TORCHTITAN[family][1].items():
        found = {roles[name] for name in roles if re.search(pattern, name)}
        assert found == {role}, pattern


def test_torchtitan_llama3_constants_match_its_init_states():
    """torchtitan's own ``init_states`` (its param_init configs) is the oracle for which parameters
    are constant; every one of its parameters is written by ``depth_init`` (its recipe)."""
    reference = _torchtitan("llama3")
    reference.to_empty(device="cpu")
    torch.manual_seed(0)
    reference.init_states(buffer_device=torch.device("cpu"))
    own = {name: _kind(p) for name, p in reference.named_parameters()}
    model = _torchtitan("llama3")
    tinit.materialise_(model, "cpu", recompute_buffers=False)
    summary = tinit.init_model_(model, "depth_init")
    ours = {e.name: ("constant", e.constant) if e.constant is not None else ("drawn",) for e in summary}
    assert ours == own


def test_vector_parameters_under_fan_schemes():
    """A drawn 1-D parameter has no fans: CLIP's class_embedding gets its width's n^-1/2 under Xavier,
    the std CLIP's own ``_init_weights`` draws (``embed_dim ** -0.5 * initializer_factor``); GPT-OSS's
    router bias is a bias (0) and its sinks 0 under the fan-based schemes."""
    model = hf_families.build("llava")
    summary = {e.name: e for e in _initialise(model, "xavier_normal")}
    (name,) = [n for n in summary if n.endswith("class_embedding")]
    embeddings = model.get_submodule(name.rpartition(".")[0])
    clip_std = embeddings.embed_dim**-0.5 * embeddings.config.initializer_factor
    assert summary[name].spec.std == pytest.approx(clip_std, rel=1e-12)
    oss = {e.name: e for e in _initialise(hf_families.build("gpt_oss"), "kaiming_normal")}
    assert {e.spec.constant for n, e in oss.items() if n.endswith(("router.bias", "sinks"))} == {0.0}


@pytest.mark.parametrize(("scheme", "std"), [("normal", 0.02), ("gpt2", 0.02), ("depth_init", 0.02 / math.sqrt(2 * 2))])
def test_gpt_oss_sinks_are_drawn(scheme, std):
    """HF ``GptOssPreTrainedModel._init_weights`` draws the sinks from N(0, initializer_range);
    torchtitan 0.3.0's GPT-OSS ``sinks_init`` from N(0, depth_scaled_std(0.02, layer_id)) (block 1 here)."""
    summary = {e.name: e for e in _initialise(hf_families.build("gpt_oss"), scheme)}
    (sinks,) = [e for n, e in summary.items() if n.endswith("layers.1.self_attn.sinks")]
    assert sinks.role == "attn_sink" and sinks.spec.constant is None
    assert sinks.spec.std == pytest.approx(std, rel=1e-12)
