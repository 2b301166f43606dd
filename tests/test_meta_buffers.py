"""Buffers of meta-built models: recomputed by each module's own code, bit-identical to an eager build, or refused."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import tinit
from tinit import buffers
from tinit.tools import hf_families

transformers = pytest.importorskip("transformers", reason="transformers is not installed (pip install transformers)")

VOCAB = 1000
DECODER = {
    "num_hidden_layers": 2,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": VOCAB,
    "bos_token_id": 0,
    "eos_token_id": 0,
    "pad_token_id": 0,
}
FAMILIES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", DECODER),
    "mistral": ("MistralConfig", "MistralForCausalLM", DECODER),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", DECODER),
    "gemma": ("GemmaConfig", "GemmaForCausalLM", {**DECODER, "head_dim": 16}),
    "gpt2": (
        "GPT2Config",
        "GPT2LMHeadModel",
        {
            "n_layer": 2,
            "n_embd": 64,
            "n_head": 2,
            "n_positions": 64,
            "vocab_size": VOCAB,
            "bos_token_id": 0,
            "eos_token_id": 0,
        },
    ),
    "t5": (
        "T5Config",
        "T5ForConditionalGeneration",
        {"num_layers": 2, "d_model": 64, "d_ff": 128, "num_heads": 2, "d_kv": 32, "vocab_size": VOCAB},
    ),
    "bert": (
        "BertConfig",
        "BertForMaskedLM",
        {
            "num_hidden_layers": 2,
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_attention_heads": 2,
            "vocab_size": VOCAB,
        },
    ),
    # One rope type per layer type, and a rope type from ROPE_INIT_FUNCTIONS.
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM", {**DECODER, "head_dim": 16, "sliding_window": 8}),
    "llama-llama3-rope": (
        "LlamaConfig",
        "LlamaForCausalLM",
        {
            **DECODER,
            "rope_parameters": {
                "rope_type": "llama3",
                "rope_theta": 500000.0,
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 64,
            },
        },
    ),
}
INPUT_IDS = (torch.arange(24).reshape(2, 12) * 37) % VOCAB


def _build(family, device=None, dtype=None):
    config_name, model_name, kwargs = FAMILIES[family]
    config = getattr(transformers, config_name)(**kwargs)
    if device is None:
        model = getattr(transformers, model_name)(config)
    else:
        with torch.device(device):
            model = getattr(transformers, model_name)(config)
    if dtype is not None:
        model.to(dtype=dtype)
    return model.eval()


def _init(model, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tinit.init_model_(model, "modern", seed=0, **kwargs)
    notes = [str(w.message) for w in caught if "uninitialised" in str(w.message)]
    assert not notes, f"a warning about uninitialised buffers remains: {notes}"
    return model


def _logits(family, model):
    extra = {"decoder_input_ids": INPUT_IDS} if family == "t5" else {}
    with torch.no_grad():
        return model(INPUT_IDS, **extra).logits


def _assert_same(family, meta, eager):
    got, want = dict(meta.named_buffers()), dict(eager.named_buffers())
    assert list(got) == list(want)
    assert all(b.device.type == "cpu" for b in got.values())
    differ = [name for name, value in want.items() if not torch.equal(got[name], value)]
    assert not differ, f"buffers differ from the eager build: {differ}"
    for name, value in want.items():
        torch.testing.assert_close(got[name], value, rtol=0, atol=0, msg=lambda m, n=name: f"{n}: {m}")
    for (_, a), b in zip(meta.named_parameters(), eager.parameters(), strict=True):
        assert torch.equal(a, b), name
    torch.testing.assert_close(_logits(family, meta), _logits(family, eager), rtol=0, atol=0)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_meta_build_matches_eager_bit_for_bit(family):
    meta = _init(_build(family, "meta"), device="cpu")
    eager = _init(_build(family))
    _assert_same(family, meta, eager)


def test_meta_build_cast_before_materialising():
    """A meta model cast to bf16 (as ``tinit init --dtype bf16`` does) matches the eager model cast the same way."""
    meta = _init(_build("llama", "meta", torch.bfloat16), device="cpu")
    eager = _init(_build("llama", dtype=torch.bfloat16))
    assert meta.model.rotary_emb.inv_freq.dtype == torch.bfloat16
    _assert_same("llama", meta, eager)


def test_readme_flow():
    config = transformers.LlamaConfig(
        num_hidden_layers=2,
        hidden_size=256,
        intermediate_size=512,
        num_attention_heads=4,
        num_key_value_heads=4,
        vocab_size=1000,
    )
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(config)
    _init(model, device="cpu")
    rotary = transformers.LlamaForCausalLM(config).model.rotary_emb
    assert torch.equal(model.model.rotary_emb.inv_freq, rotary.inv_freq)
    assert torch.equal(model.model.rotary_emb.original_inv_freq, rotary.original_inv_freq)


class _Masked(nn.Module):
    def __init__(self, persistent=False):
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.register_buffer("mask", torch.tril(torch.ones(8, 8)), persistent=persistent)


@pytest.mark.parametrize("persistent", [False, True], ids=["non-persistent", "persistent"])
def test_unknown_buffer_is_refused_before_allocating(persistent):
    with torch.device("meta"):
        model = _Masked(persistent)
    kind = "persistent" if persistent else "non-persistent"
    with pytest.raises(buffers.UninitialisedBufferError, match=rf"mask \(_Masked, {kind}\)") as info:
        tinit.init_model_(model, "normal", seed=0, device="cpu")
    assert isinstance(info.value, RuntimeError)
    assert info.value.names == ["mask"]
    assert all(t.is_meta for t in (*model.parameters(), *model.buffers())), "allocated before refusing"


def test_unknown_rotary_layout_is_refused_before_allocating(monkeypatch):
    monkeypatch.setattr(buffers, "RECIPES", [])
    model = _build("llama", "meta")
    with pytest.raises(buffers.UninitialisedBufferError, match=r"model\.rotary_emb\.inv_freq"):
        tinit.init_model_(model, "modern", seed=0, device="cpu")
    assert all(p.is_meta for p in model.parameters())


def test_rope_type_without_init_function_is_refused_before_allocating():
    model = _build("llama", "meta")
    model.model.rotary_emb.rope_type = "no-such-rope"
    with pytest.raises(buffers.UninitialisedBufferError, match=r"model\.rotary_emb\.inv_freq \(LlamaRotaryEmbedding"):
        tinit.init_model_(model, "modern", seed=0, device="cpu")
    assert all(p.is_meta for p in model.parameters())


def test_buffer_with_values_is_kept():
    with torch.device("meta"):
        model = _Masked()
    model.mask = torch.arange(64.0).reshape(8, 8)  # a real tensor among meta ones: to_empty would drop it
    tinit.init_model_(model, "normal", seed=0, device="cpu")
    assert torch.equal(model.mask, torch.arange(64.0).reshape(8, 8))


def test_registered_recipe(monkeypatch):
    class Tril(buffers.BufferRecipe):
        """The mask of ``_Masked``: ``torch.tril(torch.ones(8, 8))``, as its constructor builds it."""

        name = "tril"

        def claims(self, module):
            return ("mask",) if isinstance(module, _Masked) else ()

        def values(self, module):
            return {"mask": torch.tril(torch.ones(8, 8))}

    monkeypatch.setattr(buffers, "RECIPES", list(buffers.RECIPES))
    buffers.register(Tril())
    with torch.device("meta"):
        model = _Masked()
    tinit.init_model_(model, "normal", seed=0, device="cpu")
    assert torch.equal(model.mask, torch.tril(torch.ones(8, 8)))
    with pytest.raises(TypeError):
        buffers.register(object())


def test_failing_recipe_names_the_buffer(monkeypatch):
    class Wrong(buffers.BufferRecipe):
        name = "wrong"

        def claims(self, module):
            return ("mask",) if isinstance(module, _Masked) else ()

        def values(self, module):
            return {"mask": torch.ones(3)}

    monkeypatch.setattr(buffers, "RECIPES", [Wrong()])
    with torch.device("meta"):
        model = _Masked()
    with pytest.raises(buffers.UninitialisedBufferError, match=r"'wrong' gave shape \(3,\) for mask"):
        tinit.materialise_(model, "cpu")


def test_batch_norm_statistics():
    with torch.device("meta"):
        model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    tinit.materialise_(model, "cpu")
    eager = nn.BatchNorm1d(4)
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        torch.testing.assert_close(getattr(model[1], name), getattr(eager, name), rtol=0, atol=0)


def test_recompute_buffers_false_skips_them():
    with torch.device("meta"):
        model = _Masked()
    tinit.materialise_(model, "cpu", recompute_buffers=False)
    assert model.mask.device.type == "cpu"


# Buffers that are not rotary frequencies: GPT-J's sin/cos table, causal masks (GPT-Neo's local layers banded),
# BART's final_logits_bias and DeepSeek-V3's router correction bias (persistent, fp32), each from its family's config.
OTHER_BUFFERS = {
    "gptj": lambda: hf_families.config("gptj", max_position_embeddings=64),
    "gpt_bigcode": lambda: hf_families.config("gpt_bigcode", max_position_embeddings=64),
    "bart": lambda: hf_families.config("bart"),
    "deepseek_v3": lambda: hf_families.config("deepseek_v3"),
    "gpt_neo-local": lambda: transformers.GPTNeoConfig(
        num_layers=2,
        attention_types=[[["global", "local"], 1]],
        hidden_size=64,
        num_heads=2,
        window_size=5,
        max_position_embeddings=32,
        vocab_size=VOCAB,
    ),
    "codegen": lambda: transformers.CodeGenConfig(
        n_layer=2, n_embd=64, n_head=2, rotary_dim=16, n_positions=32, vocab_size=VOCAB, bos_token_id=0, eos_token_id=0
    ),
}


def _auto(config):
    return getattr(transformers, hf_families.model_class(config))


@pytest.mark.parametrize("family", sorted(OTHER_BUFFERS))
def test_other_buffers_match_eager_bit_for_bit(family):
    """Every buffer of the meta-built model, materialised on the CPU, equals the eager CPU build's; so do logits."""
    config = OTHER_BUFFERS[family]()
    with torch.device("meta"):
        meta = _auto(config).from_config(config).eval()
    names = {name for name, b in meta.named_buffers() if not any(k in name for k in ("inv_freq", "position_ids"))}
    assert names, "the model registers no buffer this test is about"
    tinit.materialise_(meta, "cpu")
    torch.manual_seed(0)
    eager = _auto(config).from_config(config).eval()
    got, want = dict(meta.named_buffers()), dict(eager.named_buffers())
    assert list(got) == list(want)
    for name, value in want.items():
        assert got[name].dtype == value.dtype, name
        torch.testing.assert_close(got[name], value, rtol=0, atol=0, msg=lambda m, n=name: f"{n}: {m}")
    with torch.no_grad():  # parameters only: a persistent buffer must come from the recipe, not a state dict
        for (_, a), b in zip(meta.named_parameters(), eager.parameters(), strict=True):
            a.copy_(b)
    ids = INPUT_IDS % config.vocab_size
    extra = {"decoder_input_ids": ids} if config.is_encoder_decoder else {}
    with torch.no_grad():
        torch.testing.assert_close(meta(ids, **extra).logits, eager(ids, **extra).logits, rtol=0, atol=0)


def test_local_attention_mask_is_banded():
    """GPT-Neo's local layer keeps window_size positions per row (the recipe's band, checked on its own)."""
    config = OTHER_BUFFERS["gpt_neo-local"]()
    with torch.device("meta"):
        meta = transformers.AutoModelForCausalLM.from_config(config)
    tinit.materialise_(meta, "cpu")
    local = meta.transformer.h[1].attn.attention.bias[0, 0]
    assert local.sum(dim=1).tolist() == [min(i + 1, config.window_size) for i in range(config.max_position_embeddings)]


@pytest.mark.parametrize("family", sorted(hf_families.FAMILIES))
def test_every_family_s_buffers_match_eager(family):
    """Every family of tinit.tools.hf_families, built on the meta device and materialised on the CPU, holds the
    buffers an eager CPU build holds, bit for bit and dtype for dtype."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        meta = hf_families.build(family)
        tinit.materialise_(meta, "cpu")
        eager = hf_families.build(family, device="cpu")
    got, want = dict(meta.named_buffers()), dict(eager.named_buffers())
    assert list(got) == list(want)
    for name, value in want.items():
        assert got[name].dtype == value.dtype, name
        torch.testing.assert_close(got[name], value, rtol=0, atol=0, msg=lambda m, n=name: f"{n}: {m}")


class _Custom(nn.Module):
    """Buffers named as transformers' are not claimed outside transformers: their values need not match."""

    def __init__(self):
        super().__init__()
        self.register_buffer("final_logits_bias", torch.ones(1, 8))
        self.register_buffer("bias", torch.ones(8, 8, dtype=torch.bool))


def test_transformers_names_outside_transformers_are_refused():
    with torch.device("meta"):
        model = _Custom()
    with pytest.raises(buffers.UninitialisedBufferError) as info:
        buffers.plan(model)
    assert info.value.names == ["final_logits_bias", "bias"]


def _torchtitan_config(family: str):
    """torchtitan's own debug configs (flex attention; MoE layers with the standard all-to-all)."""
    pytest.importorskip("torchtitan", reason="torchtitan is not installed (pip install --no-deps torchtitan)")
    import importlib

    module = importlib.import_module(f"torchtitan.models.{family}")
    registry = next(v for k, v in vars(module).items() if k.endswith("_configs") and isinstance(v, dict))
    build = registry["debugmodel"]
    return build("flex", "standard") if family == "deepseek_v3" else build("flex")


@pytest.mark.parametrize("family", ["llama3", "deepseek_v3"])
def test_torchtitan_buffers_match_eager_bit_for_bit(family):
    """torchtitan's RoPE cache (complex64) and MoE counters, recomputed by each module's _init_self_buffers,
    equal the eager CPU build's."""
    config = _torchtitan_config(family)
    with torch.device("meta"):
        meta = config.build()
    tinit.materialise_(meta, "cpu")
    eager = config.build()
    got, want = dict(meta.named_buffers()), dict(eager.named_buffers())
    assert list(got) == list(want) and want
    for name, value in want.items():
        assert got[name].dtype == value.dtype, name
        torch.testing.assert_close(got[name], value, rtol=0, atol=0, msg=lambda m, n=name: f"{n}: {m}")


# Buffers no named recipe claims, computed by their module's (or an ancestor's) own constructor.
_BY_CONSTRUCTOR = {
    "MiniMaxForCausalLM": "slope_rate",
    "OpenAIGPTLMHeadModel": "attn.bias",
    "XGLMForCausalLM": "embed_positions.weights",
    "ApertusForCausalLM": "act_fn.beta",
}


@pytest.mark.parametrize("name", sorted(_BY_CONSTRUCTOR))
def test_buffers_computed_by_the_constructor_match_eager(name):
    """``hf_constructor``: MiniMax's lightning-attention decays (built from the attention's own
    arguments), GPT's causal masks and XIELU's constants (built from an ancestor: the mask's module
    holds no ``n_positions``), XGLM's sinusoid table. Oracle: transformers' eager build on the CPU,
    bit for bit, every buffer; torch's RNG untouched."""
    from tinit.tools import hf_classes

    config = hf_classes.config_of(name)
    model = hf_classes.build(name, config)
    assert any(_BY_CONSTRUCTOR[name] in n for n, _ in model.named_buffers())
    rng = torch.get_rng_state()
    tinit.init_model_(model, "normal", seed=0, device="cpu")
    assert torch.equal(torch.get_rng_state(), rng)
    eager = dict(hf_classes.build(name, config, device="cpu").named_buffers())
    ours = dict(model.named_buffers())
    assert ours.keys() == eager.keys()
    for key, value in eager.items():
        assert value.dtype == ours[key].dtype and torch.equal(value, ours[key]), key


def test_a_constructor_argument_the_module_does_not_hold_is_not_guessed():
    """A transformers-style module whose buffer depends on an argument it keeps under no name (and
    whose ancestors cannot be rebuilt): no default is assumed, the buffer is refused before allocating."""

    class Table(nn.Module):
        def __init__(self, config, base=10000.0):
            super().__init__()
            self.config = config
            self.proj = nn.Linear(4, 4)
            self.register_buffer("freq", base ** -torch.arange(4.0))

    Table.__module__ = "transformers.models.fake.modeling_fake"
    with torch.device("meta"):
        model = Table(transformers.PretrainedConfig(), base=500.0)
    with pytest.raises(buffers.UninitialisedBufferError, match=r"freq \(Table"):
        tinit.init_model_(model, "normal", seed=0, device="cpu")
    assert model.freq.is_meta
