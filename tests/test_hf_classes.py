"""tinit.tools.hf_classes: a tiny config for every causal-LM class, shrunk from its own defaults."""

from __future__ import annotations

import warnings

import pytest
import torch

transformers = pytest.importorskip("transformers", reason="transformers is not installed (pip install transformers)")

from tinit.tools import hf_classes  # noqa: E402 (after the importorskip above)

MAX_PARAMETERS = 5_000_000


@pytest.fixture(scope="module", autouse=True)
def _quiet():
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
    hf_logging.set_verbosity(level)


def test_every_distinct_class_of_the_mapping_is_listed_once():
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    classes = hf_classes.causal_lm_classes()
    assert list(classes) == list(dict.fromkeys(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values()))
    for name, model_type in classes.items():
        assert MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type] == name
    # A class several model types name gets the one its own config class belongs to.
    assert classes["LlamaForCausalLM"] == "llama"


def _defaults(name: str):
    """The config class's defaults, None when they refuse themselves (the table's business)."""
    try:
        return getattr(transformers, name).config_class()
    except Exception:  # noqa: BLE001 - any refusal of the config's own validation
        return None


def test_shrinking_only_ever_makes_a_size_smaller():
    """Every field the generic shrink sets (outside the hand-written table) is at most the default."""
    for name in hf_classes.causal_lm_classes():
        defaults = _defaults(name)
        if defaults is None:
            continue
        for key, value in hf_classes.shrink(defaults).items():
            default = vars(defaults).get(key)  # a per-layer getter may refuse (Gemma-4)
            if type(value) is int and type(default) is int:
                assert value <= default, f"{name}.{key}: {default} -> {value}"


@pytest.mark.parametrize(
    ("name", "kinds"),
    [
        ("Qwen3NextForCausalLM", {"linear_attention", "full_attention"}),
        ("Llama4ForCausalLM", {"chunked_attention", "full_attention"}),
        ("Gemma3ForCausalLM", {"sliding_attention", "full_attention"}),
        ("KimiLinearForCausalLM", {"linear_attention", "full_attention"}),
    ],
)
def test_one_layer_of_each_kind_is_kept(name, kinds):
    """The depth is cut to one layer of each kind the defaults have, and the config agrees."""
    defaults = getattr(transformers, name).config_class()
    config = hf_classes.config_of(name)
    assert set(config.layer_types) == set(defaults.layer_types) == kinds
    assert len(config.layer_types) == config.num_hidden_layers < defaults.num_hidden_layers


def test_layer_indices_are_renumbered():
    """Llama-4's ``moe_layers`` (indices) follow the layers kept, and its ``no_rope_layers`` (a flag per layer)."""
    config = hf_classes.config_of("Llama4ForCausalLM")
    assert config.moe_layers == list(range(config.num_hidden_layers))  # every layer is MoE by default
    assert len(config.no_rope_layers) == config.num_hidden_layers
    assert set(config.no_rope_layers) == {0, 1}


def test_the_hybrids_keep_both_mixers():
    """Each state-space / linear-attention hybrid builds (on the meta device) with both kinds of block."""
    expect = {
        "JambaForCausalLM": ("mamba.A_log", "self_attn.q_proj", "experts"),
        "BambaForCausalLM": ("mamba.A_log", "self_attn.q_proj"),
        "FalconH1ForCausalLM": ("mamba.A_log", "self_attn.q_proj"),
        "GraniteMoeHybridForCausalLM": ("mamba.A_log", "self_attn.q_proj", "experts"),
        "NemotronHForCausalLM": ("mixer.A_log", "mixer.q_proj", "experts"),
        "Qwen3NextForCausalLM": ("linear_attn.A_log", "self_attn.q_proj", "experts"),
        "Mamba2ForCausalLM": ("mixer.A_log", "mixer.dt_bias"),
    }
    for name, parts in expect.items():
        names = [n for n, _ in hf_classes.build(name).named_parameters()]
        for part in parts:
            assert any(part in n for n in names), f"{name}: no parameter with {part!r}"


def test_every_class_builds_small_on_the_meta_device():
    """All but the classes whose tiny config needs what is not installed build on meta, and are small."""
    failed = {}
    for name in hf_classes.causal_lm_classes():
        try:
            model = hf_classes.build(name)
        except ImportError as err:  # a vision tower that needs timm
            failed[name] = str(err)
            continue
        count = sum(p.numel() for p in model.parameters())
        assert 0 < count < MAX_PARAMETERS, f"{name}: {count:,} parameters"
        assert any(p.is_meta for p in model.parameters()), name
    assert set(failed) <= {"Gemma3nForConditionalGeneration"}, failed


def test_the_issue_s_mamba2_reproducer_is_the_tiny_config():
    config = hf_classes.config_of("Mamba2ForCausalLM")
    want = {"hidden_size": 128, "num_heads": 8, "head_dim": 32, "state_size": 16, "n_groups": 2, "expand": 2}
    assert {k: getattr(config, k) for k in want} == want
    assert config.num_hidden_layers == 2 and config.vocab_size == 512


def test_the_hand_written_table_names_known_classes():
    assert set(hf_classes.HAND_WRITTEN) <= set(hf_classes.causal_lm_classes())


def test_an_unknown_class_is_refused():
    with pytest.raises(ValueError, match="not a class of MODEL_FOR_CAUSAL_LM_MAPPING_NAMES"):
        hf_classes.tiny_fields("LlamaForSequenceClassification")


def test_the_eager_build_runs_forward():
    """A tiny config is consistent: transformers builds it on the CPU and its forward is finite."""
    torch.manual_seed(0)
    model = hf_classes.build("Qwen3NextForCausalLM", device="cpu").eval()
    with torch.no_grad():
        logits = model(input_ids=torch.arange(8).reshape(1, 8)).logits
    assert torch.isfinite(logits).all() and logits.shape[-1] == 512
