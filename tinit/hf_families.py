"""Hugging Face architecture families, built from reduced configs on the meta device (nothing downloaded).

One record per family (``HFFamily``): the ``model_type`` that ``transformers.AutoConfig.for_model``
knows and the Auto class that builds the model with its usual head. ``config`` takes the family's
default config, shrinks it (``REDUCED``: a few blocks, a narrow width, a small vocabulary, few
experts) and applies the caller's fields; ``build`` makes the model under ``torch.device("meta")``.
Used by the CLI (``tinit init --hf FAMILY``), the coverage table (``docs/coverage.md``) and the
architecture tests, so all three try the same models.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class HFFamily:
    """One Hugging Face architecture family.

    Attributes:
        name: the family's name here ("llama", "gemma3", ...).
        model_type: the ``transformers`` model type (``AutoConfig.for_model``).
        auto_class: the ``transformers`` Auto class that builds it with its head.
        fields: config fields beyond ``REDUCED`` this family needs to build small.
    """

    name: str
    model_type: str
    auto_class: str = "AutoModelForCausalLM"
    fields: Mapping = field(default_factory=dict)


# Applied where the config has the field (HF configs map their own names, e.g. GPT-2's n_layer,
# through ``attribute_map``): every family stays small enough to initialise in a test.
REDUCED = {
    "num_hidden_layers": 4,
    "hidden_size": 256,
    "num_attention_heads": 4,
    "intermediate_size": 512,
    "vocab_size": 1024,
}
# Set only where the default config already has the field (a MoE or GQA model).
_REDUCED_IF_PRESENT = {
    "num_key_value_heads": 2,
    "num_local_experts": 4,
    "num_experts": 4,
    "n_routed_experts": 4,
    "moe_intermediate_size": 128,
    "shared_expert_intermediate_size": 256,
    "head_dim": 64,
    "max_position_embeddings": 512,
    "d_ff": 512,
    "d_kv": 64,
    "num_layers": 4,
    "num_decoder_layers": 4,
    "encoder_layers": 4,
    "decoder_layers": 4,
    "encoder_ffn_dim": 512,
    "decoder_ffn_dim": 512,
    "encoder_attention_heads": 4,
    "decoder_attention_heads": 4,
    "d_model": 256,
    "num_heads": 4,
}

_CAUSAL = "AutoModelForCausalLM"
FAMILIES = {
    f.name: f
    for f in (
        HFFamily("gpt2", "gpt2"),
        HFFamily("llama", "llama"),
        HFFamily("mistral", "mistral"),
        HFFamily("qwen2", "qwen2"),
        HFFamily("qwen3", "qwen3"),
        HFFamily("phi", "phi"),
        HFFamily("phi3", "phi3", fields={"pad_token_id": 0}),
        HFFamily("gpt_neox", "gpt_neox"),
        HFFamily("gptj", "gptj", fields={"rotary_dim": 32}),
        HFFamily("opt", "opt", fields={"word_embed_proj_dim": 256, "ffn_dim": 512}),
        HFFamily("bloom", "bloom"),
        HFFamily("olmo", "olmo"),
        HFFamily("olmo2", "olmo2"),
        HFFamily("starcoder2", "starcoder2", fields={"bos_token_id": 0, "eos_token_id": 0}),
        HFFamily("falcon", "falcon"),
        HFFamily("gpt_bigcode", "gpt_bigcode"),
        HFFamily("gemma", "gemma"),
        HFFamily("gemma2", "gemma2"),
        HFFamily("gemma3", "gemma3_text"),
        HFFamily("mixtral", "mixtral"),
        HFFamily("qwen2_moe", "qwen2_moe"),
        HFFamily("qwen3_moe", "qwen3_moe"),
        HFFamily("olmoe", "olmoe"),
        HFFamily("deepseek_v3", "deepseek_v3", fields={"q_lora_rank": 64, "kv_lora_rank": 32}),
        HFFamily("gpt_oss", "gpt_oss"),
        HFFamily("t5", "t5", "AutoModelForSeq2SeqLM"),
        HFFamily("bart", "bart", "AutoModelForSeq2SeqLM"),
        HFFamily("bert", "bert", "AutoModelForMaskedLM"),
        HFFamily("roberta", "roberta", "AutoModelForMaskedLM"),
        HFFamily("vit", "vit", "AutoModelForImageClassification", fields={"image_size": 32, "patch_size": 8}),
        HFFamily("llava", "llava", "AutoModelForImageTextToText"),
    )
}


def _transformers():
    try:
        import transformers
    except ImportError as err:
        raise ImportError(f"Hugging Face families need transformers (pip install transformers): {err}") from err
    return transformers


def _reduce(config, fields: Mapping) -> None:
    """Shrink ``config`` in place (``REDUCED``, then ``_REDUCED_IF_PRESENT``, then ``fields``), and the
    configs it holds (a multimodal model's ``text_config``, ``vision_config``)."""
    for sub in ("text_config", "vision_config"):
        inner = getattr(config, sub, None)
        if inner is not None and hasattr(inner, "to_dict"):
            _reduce(inner, {"image_size": 32, "patch_size": 8} if sub == "vision_config" else {})
    for key, value in REDUCED.items():
        if hasattr(config, key):
            setattr(config, key, value)
    for key, value in _REDUCED_IF_PRESENT.items():
        # a read-only property (Falcon's head_dim) follows from the fields it is computed from
        settable = not isinstance(getattr(type(config), key, None), property) or getattr(type(config), key).fset
        if getattr(config, key, None) is not None and settable:
            setattr(config, key, value)
    for key, value in fields.items():
        setattr(config, key, value)
    vocab = getattr(config, "vocab_size", None)
    for key in ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id"):
        value = getattr(config, key, None)
        if isinstance(vocab, int) and isinstance(value, int) and value >= vocab:  # keep special ids in the vocab
            setattr(config, key, vocab - 1)


def config(family: str, **fields):
    """The reduced config of ``family`` with ``fields`` applied last.

    Args:
        family: a key of ``FAMILIES``.
        **fields: config fields to set (e.g. ``num_hidden_layers=80``), after the reduction.

    Returns:
        A ``transformers.PretrainedConfig``.

    Raises:
        ValueError: unknown family. ImportError: transformers is not installed.
    """
    if family not in FAMILIES:
        raise ValueError(f"unknown Hugging Face family {family!r}; choose from {sorted(FAMILIES)}")
    transformers = _transformers()
    record = FAMILIES[family]
    built = transformers.AutoConfig.for_model(record.model_type)
    _reduce(built, {**record.fields, **fields})
    return built


def build(family_or_config, *, device: str | torch.device = "meta", **fields) -> torch.nn.Module:
    """The model of a family (reduced config) or of a given config, built on ``device``.

    Args:
        family_or_config: a key of ``FAMILIES``, or a ``transformers.PretrainedConfig`` (built
            with the Auto class of its family when it has one, else ``AutoModel``).
        device: where to build; the default "meta" allocates nothing.
        **fields: config fields to set (a family name only).

    Returns:
        The model (``nn.Module``), its parameters on ``device``.

    Raises:
        ValueError: unknown family, or ``fields`` with a config. ImportError: no transformers.
    """
    transformers = _transformers()
    if isinstance(family_or_config, str):
        built = config(family_or_config, **fields)
        auto = FAMILIES[family_or_config].auto_class
    else:
        if fields:
            raise ValueError("build: fields apply to a family name; set them on the config instead")
        built = family_or_config
        auto = next(
            (f.auto_class for f in FAMILIES.values() if f.model_type == getattr(built, "model_type", None)),
            "AutoModel",
        )
    with torch.device(device):
        return getattr(transformers, auto).from_config(built)


__all__ = ["FAMILIES", "REDUCED", "HFFamily", "build", "config"]
