"""tinit.tools.hf_families: every family builds small, runs forward, and its config follows the fields given."""

from __future__ import annotations

import warnings

import pytest
import torch

from tinit.tools import hf_families

transformers = pytest.importorskip("transformers", reason="transformers is not installed (pip install transformers)")

MAX_PARAMETERS = 10_000_000  # a reduced family is small enough to initialise in a unit test


def _inputs(family: str, config) -> dict:
    if family == "vit":
        return {"pixel_values": torch.randn(2, 3, config.image_size, config.image_size, generator=torch.Generator())}
    ids = (torch.arange(16).reshape(2, 8) * 37) % 100
    return {"input_ids": ids, **({"decoder_input_ids": ids} if config.is_encoder_decoder else {})}


@pytest.mark.parametrize("family", sorted(hf_families.FAMILIES))
def test_family_builds_small_and_runs_forward(family):
    """The reduced config is consistent: the model it builds on the CPU runs a forward pass."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = hf_families.build(family, device="cpu").eval()
    count = sum(p.numel() for p in model.parameters())
    assert 0 < count < MAX_PARAMETERS, f"{family}: {count:,} parameters"
    with torch.no_grad():
        logits = model(**_inputs(family, model.config)).logits
    assert torch.isfinite(logits).all()
    meta = hf_families.build(family)
    assert all(p.is_meta for p in meta.parameters())
    assert sum(p.numel() for p in meta.parameters()) == count


def test_derived_fields_follow_the_fields_given():
    """Configs are constructed from the fields, so what a constructor derives agrees with them."""
    deepseek = hf_families.config("deepseek_v3", qk_nope_head_dim=24, qk_rope_head_dim=8)
    assert deepseek.qk_head_dim == 32 and deepseek.head_dim == 8
    llama = hf_families.config("llama", hidden_size=512, num_attention_heads=8)
    assert llama.head_dim == 64  # hidden_size // num_attention_heads
    wide = hf_families.config("llama", hidden_size=512)
    assert wide.head_dim == 128
    # Gemma's and Qwen3's head_dim is a field of its own: reduced to 64, kept when the width changes.
    for family in ("gemma", "qwen3"):
        assert hf_families.config(family).head_dim == 64
        assert hf_families.config(family, hidden_size=512).head_dim == 64


def test_fields_of_a_held_config_merge():
    llava = hf_families.config("llava", text_config={"num_hidden_layers": 3})
    assert llava.text_config.num_hidden_layers == 3
    assert llava.text_config.hidden_size == hf_families.REDUCED["hidden_size"]  # the rest stays reduced
    assert llava.vision_config.image_size == 32
    clip = transformers.AutoConfig.for_model("clip_vision_model")
    # LLaVA's own tower default (projection_dim 768) survives the reduction; CLIP's plain default is 512.
    assert llava.vision_config.projection_dim == 768 != clip.projection_dim


def test_aliases_of_attribute_map():
    gpt2 = hf_families.config("gpt2", num_hidden_layers=3)
    assert gpt2.n_layer == 3


@pytest.mark.parametrize(
    "fields,needle",
    [
        ({"num_hidden_layer": 80}, "num_hidden_layer (did you mean num_hidden_layers?)"),
        ({"text_config": {"hiden_size": 8}}, "text_config.hiden_size (did you mean text_config.hidden_size?)"),
    ],
    ids=["top-level", "held-config"],
)
def test_unknown_field_is_refused(fields, needle):
    family = "llava" if "text_config" in fields else "llama"
    with pytest.raises(ValueError, match="has no field") as info:
        hf_families.config(family, **fields)
    assert needle in str(info.value)


def test_unknown_family_and_model_type():
    with pytest.raises(ValueError, match="unknown Hugging Face family 'lama'"):
        hf_families.config("lama")
    with pytest.raises(ValueError, match="unknown transformers model type 'no_such_type'"):
        hf_families.from_fields("no_such_type", {})


def test_special_ids_stay_in_the_vocabulary():
    config = hf_families.config("gpt2", vocab_size=100)
    assert config.bos_token_id == config.eos_token_id == 99  # GPT-2's 50256, moved inside the vocabulary


@pytest.mark.parametrize(
    "fields,expected",
    [
        ({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}, "LlamaForCausalLM"),
        ({"model_type": "llama", "architectures": ["NoSuchClassForCausalLM"]}, "AutoModelForCausalLM"),
        ({"model_type": "t5"}, "AutoModelForSeq2SeqLM"),
        ({"model_type": "mamba"}, "AutoModelForCausalLM"),
        ({"model_type": "clip"}, "AutoModel"),
    ],
    ids=["architectures", "unknown-architecture", "family", "causal-lm", "other"],
)
def test_model_class(fields, expected):
    model_type = fields.pop("model_type")
    assert hf_families.model_class(transformers.AutoConfig.for_model(model_type, **fields)) == expected


def test_build_from_a_config():
    config = hf_families.config("llama", num_hidden_layers=2)
    model = hf_families.build(config)
    assert type(model).__name__ == "LlamaForCausalLM" and len(model.model.layers) == 2
    with pytest.raises(ValueError, match="overrides apply to a family name"):
        hf_families.build(config, num_hidden_layers=3)


def test_reduced_sizes():
    """The reduction reaches every family's own names for depth, width and MLP width."""
    for family in hf_families.FAMILIES:
        config = hf_families.config(family)
        config = getattr(config, "text_config", None) or config
        assert config.num_hidden_layers == hf_families.REDUCED["num_hidden_layers"], family
        assert config.hidden_size == hf_families.REDUCED["hidden_size"], family
        width = next(
            (
                getattr(config, key)
                for key in ("intermediate_size", "ffn_hidden_size", "d_ff", "encoder_ffn_dim", "ffn_dim", "n_inner")
                if isinstance(getattr(config, key, None), int)
            ),
            4 * config.hidden_size,
        )
        assert width <= 4 * config.hidden_size, (family, width)
        vocab = getattr(config, "vocab_size", None)
        assert vocab is None or vocab <= hf_families.REDUCED["vocab_size"], family
