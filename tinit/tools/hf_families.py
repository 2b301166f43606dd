"""Hugging Face architecture families, built from reduced configs on the meta device (nothing downloaded).

One record per family (``HFFamily``): the ``model_type`` that ``transformers.AutoConfig.for_model``
knows and the Auto class that builds the model with its usual head. ``fields`` gives the fields
that shrink the family's default config (``REDUCED``: a few blocks, a narrow width, a small
vocabulary, few experts; the configs a multimodal config holds in turn) with the caller's merged in;
``config`` constructs the config from them, so the fields a constructor derives (``head_dim``,
DeepSeek-V3's ``qk_head_dim``) follow; ``build`` makes the model under ``torch.device("meta")``.
Field names a config does not have are refused (``unknown_fields``): transformers' configs keep any
keyword silently, so a typo would build the default instead. Used by the CLI (``tinit init --hf
FAMILY``, ``--config``), the coverage table (``docs/coverage.md``) and the architecture tests, so
all three try the same models.
"""

from __future__ import annotations

import dataclasses
import difflib
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
# Set only where the default config already has the field, not None (a MoE or GQA model).
_REDUCED_IF_PRESENT = {
    "num_key_value_heads": 2,
    "num_local_experts": 4,
    "num_experts": 4,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 128,
    "shared_expert_intermediate_size": 256,
    "max_position_embeddings": 512,
    "ffn_hidden_size": 512,
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
# Configs a multimodal config holds, reduced in turn (a vision tower also gets a small image).
SUB_CONFIGS = {"text_config": {}, "vision_config": {"image_size": 32, "patch_size": 8}}
# Keys a saved config.json carries that are not fields to check.
_METADATA = ("model_type", "transformers_version", "architectures", "_name_or_path", "torch_dtype", "auto_map")

_CAUSAL = "AutoModelForCausalLM"
_MAMBA2_MIXER = {
    "hidden_size": 256,
    "mamba_n_heads": 8,
    "mamba_d_head": 64,
    "mamba_n_groups": 1,
    "mamba_d_state": 16,
    "mamba_chunk_size": 32,
}
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
        # MLA: every head has its own k and v (as in DeepSeek-V3, 128 of 128); expert groups that divide
        # the experts; the first block dense, the others MoE; head dims in DeepSeek-V3's proportions.
        HFFamily(
            "deepseek_v3",
            "deepseek_v3",
            fields={
                "q_lora_rank": 64,
                "kv_lora_rank": 32,
                "num_key_value_heads": 4,
                "n_group": 2,
                "topk_group": 1,
                "first_k_dense_replace": 1,
                "qk_nope_head_dim": 32,
                "qk_rope_head_dim": 16,
                "v_head_dim": 32,
            },
        ),
        HFFamily("gpt_oss", "gpt_oss"),
        HFFamily("t5", "t5", "AutoModelForSeq2SeqLM"),
        HFFamily("bart", "bart", "AutoModelForSeq2SeqLM"),
        HFFamily("bert", "bert", "AutoModelForMaskedLM"),
        HFFamily("roberta", "roberta", "AutoModelForMaskedLM"),
        HFFamily("vit", "vit", "AutoModelForImageClassification", fields={"image_size": 32, "patch_size": 8}),
        HFFamily("llava", "llava", "AutoModelForImageTextToText"),
        # State-space and gated-delta-net hybrids: Mamba-2 mixers of 8 heads of 64 (expand 2 x 256),
        # attention in every other block. Their configs check sizes against each other as they are
        # built, so the fields repeat the reduced width and depth.
        HFFamily("mamba", "mamba", fields={"state_size": 16}),
        HFFamily("mamba2", "mamba2", fields={"hidden_size": 256, "num_heads": 8, "head_dim": 64, "n_groups": 2}),
        HFFamily(
            "jamba",
            "jamba",
            fields={"attn_layer_period": 2, "attn_layer_offset": 1, "expert_layer_period": 2, "expert_layer_offset": 1}
            | {"mamba_d_state": 16},
        ),
        HFFamily("bamba", "bamba", fields={**_MAMBA2_MIXER, "attn_layer_indices": [1, 3]}),
        HFFamily("falcon_h1", "falcon_h1", fields={**_MAMBA2_MIXER, "mamba_d_ssm": 512}),
        HFFamily(
            "granitemoehybrid",
            "granitemoehybrid",
            fields={**_MAMBA2_MIXER, "shared_intermediate_size": 256, "num_hidden_layers": 4}
            | {"layer_types": ["mamba", "attention"] * 2},
        ),
        HFFamily(
            "nemotron_h",
            "nemotron_h",
            fields={"mamba_num_heads": 8, "mamba_head_dim": 64, "n_groups": 1, "ssm_state_size": 16}
            | {"chunk_size": 32, "hybrid_override_pattern": "M*M-"},
        ),
        HFFamily(
            "qwen3_next",
            "qwen3_next",
            fields={"linear_num_value_heads": 4, "linear_num_key_heads": 2, "linear_key_head_dim": 32}
            | {"linear_value_head_dim": 32, "num_hidden_layers": 4}
            | {"layer_types": ["linear_attention", "full_attention"] * 2},
        ),
    )
}


def import_transformers():
    """``import transformers``, with the install hint when it is missing.

    Returns:
        The ``transformers`` module.

    Raises:
        ImportError: transformers is not installed.
    """
    try:
        import transformers
    except ImportError as err:
        raise ImportError(f"Hugging Face families need transformers (pip install transformers): {err}") from err
    return transformers


def settable(config, key: str) -> bool:
    """Whether ``key`` can be passed to the config's constructor (a ``transformers`` config object).

    A dataclass config (transformers 5) takes its init fields and its ``attribute_map`` names; a field
    its ``__post_init__`` computes (DeepSeek-V3's ``head_dim``, from ``qk_rope_head_dim``) is not one.
    Otherwise anything but a read-only property (Falcon's ``head_dim``) is.

    Args:
        config: a ``transformers`` config object.
        key: a field name.

    Returns:
        True when the constructor takes ``key``.
    """
    if dataclasses.is_dataclass(config):
        init = {f.name for f in dataclasses.fields(config) if f.init}
        return key in init or key in getattr(type(config), "attribute_map", {})
    attr = getattr(type(config), key, None)
    return not isinstance(attr, property) or attr.fset is not None


def _independent_head_dim(config) -> bool:
    """Whether ``head_dim`` is a field of its own (Gemma: 256 at width 3072, 16 heads; Qwen3: 128 whatever
    the width), found by building the config at twice the width: a derived one follows width / heads."""
    width, heads = getattr(config, "hidden_size", None), getattr(config, "num_attention_heads", None)
    if not (isinstance(getattr(config, "head_dim", None), int) and isinstance(width, int) and isinstance(heads, int)):
        return False
    if not settable(config, "head_dim"):
        return False
    auto = import_transformers().AutoConfig
    wider = auto.for_model(config.model_type, hidden_size=2 * width, num_attention_heads=heads)
    return wider.head_dim != 2 * width // heads


def _non_default(config) -> dict:
    """The fields of a held config that differ from its model type's defaults (LLaVA's CLIP tower sizes)."""
    plain = import_transformers().AutoConfig.for_model(config.model_type).to_dict()
    return {k: v for k, v in config.to_dict().items() if k not in _METADATA and plain.get(k, object()) != v}


def _reduction(config) -> dict:
    """The fields that shrink ``config``: ``REDUCED``, then ``_REDUCED_IF_PRESENT``, and its held configs."""
    fields = {}
    for sub, extra in SUB_CONFIGS.items():
        inner = getattr(config, sub, None)
        if inner is not None and hasattr(inner, "to_dict"):
            reduced = merge(_non_default(inner), canonical(inner, _reduction(inner)))
            fields[sub] = {"model_type": inner.model_type, **merge(reduced, canonical(inner, extra))}
    fields.update({key: value for key, value in REDUCED.items() if hasattr(config, key) and settable(config, key)})
    for key, value in _REDUCED_IF_PRESENT.items():
        if getattr(config, key, None) is not None and settable(config, key):
            fields[key] = value
    if _independent_head_dim(config):
        fields["head_dim"] = 64  # else the config derives it: hidden_size // num_attention_heads
    return fields


def merge(base: Mapping, fields: Mapping) -> dict:
    """``base`` updated by ``fields``, held configs (``text_config``, ...) merged field by field.

    Args:
        base, fields: config fields; a value that is a mapping on both sides is merged recursively.

    Returns:
        A new dict.
    """
    merged = dict(base)
    for key, value in fields.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def canonical(config, fields: Mapping) -> dict:
    """``fields`` with ``attribute_map`` aliases renamed to the fields they stand for (GPT-2's
    ``num_hidden_layers`` -> ``n_layer``), in held configs too, so that merging two sets of fields
    cannot keep both an alias and its field with different values.

    Args:
        config: a config of the model type (its class gives the aliases; held configs by attribute).
        fields: config fields.

    Returns:
        A new dict.
    """
    aliases = getattr(type(config), "attribute_map", {})
    renamed = {}
    for key, value in fields.items():
        inner = getattr(config, key, None)
        if isinstance(value, Mapping) and hasattr(inner, "to_dict"):
            value = canonical(inner, value)
        renamed[aliases.get(key, key)] = value
    return renamed


def _consumed(model_type: str, key: str, value) -> bool:
    """Whether a config of ``model_type`` reads ``key`` though it keeps no field of that name: a legacy
    name its constructor converts (transformers 5 folds ``rope_theta`` into ``rope_parameters``), seen
    as another field changing when ``key`` is given."""
    transformers = import_transformers()
    plain = transformers.AutoConfig.for_model(model_type).to_dict()
    plain.pop(key, None)
    plain.pop("transformers_version", None)
    # The given value may equal the default it is folded into (Mixtral's rope_theta 1e6): a second,
    # different value of the same type shows the read too.
    for probe in (value, _another(value)):
        if probe is None:
            continue
        try:
            given = transformers.AutoConfig.for_model(model_type, **{key: probe}).to_dict()
        except Exception:  # noqa: BLE001 - a value the constructor rejects is one it reads
            return True
        given.pop(key, None)
        given.pop("transformers_version", None)
        if given != plain:
            return True
    return False


def _another(value):
    """A value of ``value``'s type that differs from it (None where there is no obvious one)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value * 2 + 1
    if isinstance(value, str):
        return value + "_"
    return None


def unknown_fields(config, fields: Mapping, where: str = "") -> list[str]:
    """The names in ``fields`` that ``config`` does not have (a typo an HF config would silently keep).

    A name is known when the config has it (a field, an ``attribute_map`` alias, a property) or its
    constructor reads it (``_consumed``: a legacy name such as ``rope_theta``).

    Args:
        config: a ``transformers.PretrainedConfig`` (the model type's defaults).
        fields: config fields; a mapping under a held config's name (``text_config``) is checked
            against that config.
        where: prefix for the names returned (used when recursing).

    Returns:
        Dotted names, e.g. ["num_hidden_layer", "text_config.hiden_size"], each with a close match
        when there is one ("num_hidden_layer (did you mean num_hidden_layers?)").
    """
    found = []
    known = _known(config)
    for key, value in fields.items():
        inner = getattr(config, key, None)
        if isinstance(value, Mapping) and hasattr(inner, "to_dict"):
            found.extend(unknown_fields(inner, value, f"{where}{key}."))
        elif (
            key not in known
            and key not in _METADATA
            and not hasattr(config, key)
            and not _consumed(config.model_type, key, value)
        ):
            close = difflib.get_close_matches(key, sorted(known), n=1)
            found.append(f"{where}{key}" + (f" (did you mean {where}{close[0]}?)" if close else ""))
    return found


def _known(config) -> set[str]:
    names = set(config.to_dict()) | set(getattr(type(config), "attribute_map", {}))
    if dataclasses.is_dataclass(config):
        names |= {f.name for f in dataclasses.fields(config)}
    return {name for name in names if not name.startswith("_")} | {k for k in vars(config) if not k.startswith("_")}


def _keep_special_ids(config, fields: dict) -> None:
    """Special token ids inside the vocabulary the fields give (the defaults' ids may lie beyond it)."""
    vocab = fields.get("vocab_size", getattr(config, "vocab_size", None))
    for key in ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id"):
        value = fields.get(key, getattr(config, key, None))
        if isinstance(vocab, int) and isinstance(value, int) and value >= vocab:
            fields[key] = vocab - 1


def from_fields(model_type: str, fields: Mapping, *, check: bool = True):
    """The config of ``model_type`` built from ``fields`` (``AutoConfig.for_model``), so derived fields follow.

    Args:
        model_type: a ``transformers`` model type ("llama").
        fields: config fields; held configs as mappings (``{"text_config": {"model_type": ..., ...}}``).
        check: refuse names the model type's config does not have.

    Returns:
        A ``transformers.PretrainedConfig``.

    Raises:
        ValueError: an unknown model type, or (``check``) unknown field names, all listed.
        ImportError: transformers is not installed.
    """
    transformers = import_transformers()
    try:
        defaults = transformers.AutoConfig.for_model(model_type)
    except ValueError:
        known = transformers.CONFIG_MAPPING.keys()
        near = difflib.get_close_matches(str(model_type), known, n=3)
        hint = f"; did you mean {', '.join(near)}?" if near else f" ({len(known)} model types are known)"
        raise ValueError(f"unknown transformers model type {model_type!r}{hint}") from None
    if check:
        unknown = unknown_fields(defaults, fields)
        if unknown:
            raise ValueError(f"{type(defaults).__name__} has no field {', '.join(unknown)}")
    fields = dict(fields)
    _keep_special_ids(defaults, fields)
    try:
        return transformers.AutoConfig.for_model(model_type, **fields)
    except (TypeError, ValueError):
        raise
    except Exception as err:  # the config's own validation (huggingface_hub's strict dataclass errors)
        raise ValueError(f"{type(defaults).__name__} refused the fields: {err}") from err


def fields(family: str, **overrides) -> dict:
    """The config fields of ``family``'s reduced config, ``overrides`` merged in last.

    Args:
        family: a key of ``FAMILIES``.
        **overrides: config fields (a held config's fields as a mapping under its name).

    Returns:
        A dict for ``from_fields(FAMILIES[family].model_type, ...)``.

    Raises:
        ValueError: unknown family. ImportError: transformers is not installed.
    """
    if family not in FAMILIES:
        raise ValueError(f"unknown Hugging Face family {family!r}; choose from {sorted(FAMILIES)}")
    record = FAMILIES[family]
    defaults = import_transformers().AutoConfig.for_model(record.model_type, **record.fields)
    reduced = merge(canonical(defaults, _reduction(defaults)), canonical(defaults, record.fields))
    return merge(reduced, canonical(defaults, overrides))


def config(family: str, **overrides):
    """The reduced config of ``family`` with ``overrides`` applied last.

    The config is constructed from the fields (not edited after), so the fields a config derives
    in its constructor (DeepSeek-V3's ``qk_head_dim``, Llama's ``head_dim``) follow the ones given.

    Args:
        family: a key of ``FAMILIES``.
        **overrides: config fields to set (e.g. ``num_hidden_layers=80``, ``text_config={...}``).

    Returns:
        A ``transformers.PretrainedConfig``.

    Raises:
        ValueError: unknown family or field name. ImportError: transformers is not installed.
    """
    record = FAMILIES.get(family)
    built = fields(family, **overrides)
    return from_fields(record.model_type, built)


def model_class(config) -> str:
    """The ``transformers`` class that builds ``config`` with a head.

    The first of ``config.architectures`` that transformers has (what a ``config.json`` names),
    else the Auto class of the family with this model type, else ``AutoModelForCausalLM`` when
    it knows the type, else ``AutoModel``.
    """
    transformers = import_transformers()
    for name in getattr(config, "architectures", None) or ():
        if isinstance(name, str) and hasattr(transformers, name):
            return name
    model_type = getattr(config, "model_type", None)
    for record in FAMILIES.values():
        if record.model_type == model_type:
            return record.auto_class
    try:
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    except ImportError:
        return "AutoModel"
    return _CAUSAL if model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES else "AutoModel"


def build(family_or_config, *, device: str | torch.device = "meta", **overrides) -> torch.nn.Module:
    """The model of a family (reduced config) or of a given config, built on ``device``.

    Args:
        family_or_config: a key of ``FAMILIES``, or a ``transformers.PretrainedConfig`` (built by
            ``model_class``).
        device: where to build; the default "meta" allocates nothing.
        **overrides: config fields to set (a family name only).

    Returns:
        The model (``nn.Module``), its parameters on ``device``.

    Raises:
        ValueError: unknown family or field, or ``overrides`` with a config. ImportError: no transformers.
    """
    transformers = import_transformers()
    if isinstance(family_or_config, str):
        built = config(family_or_config, **overrides)
    else:
        if overrides:
            raise ValueError("build: overrides apply to a family name; set them on the config instead")
        built = family_or_config
    cls = getattr(transformers, model_class(built))
    with torch.device(device):
        if hasattr(cls, "from_config"):
            return cls.from_config(built)
        return cls(built)


__all__ = [
    "FAMILIES",
    "REDUCED",
    "HFFamily",
    "build",
    "canonical",
    "config",
    "fields",
    "from_fields",
    "import_transformers",
    "merge",
    "model_class",
    "settable",
    "unknown_fields",
]
