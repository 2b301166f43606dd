"""A tiny config for every causal-LM class of transformers, built by shrinking the class's own defaults.

``causal_lm_classes()`` lists the distinct classes of transformers'
``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES`` (several model types may name one class; the one whose
config class the model class declares is kept). ``tiny_fields(name)`` starts from that config
class's defaults and shrinks every size field it has, found by name (``SIZES``: width, depth,
heads, key/value heads, head dims, feed-forward widths, experts, vocabulary, positions, state
sizes, low ranks), in held configs (``text_config``, ``vision_config``, ...) too; a value is only
ever made smaller. Per-layer lists (``layer_types``, ``mlp_layer_types``, a per-layer pattern
string, a list of layer indices such as Llama-4's ``moe_layers``) keep one layer of each distinct
kind, in order, so that a hybrid keeps both its mixers and a MoE model its sparse blocks; the depth
becomes the number of kinds (at least ``LAYERS``). The few classes whose defaults do not shrink by
name get their values from one table, ``HAND_WRITTEN``. ``build(name)`` makes the model on the meta
device. Used by ``scripts/gen_coverage.py`` (docs/coverage.md) and tests/test_coverage.py.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

import torch

from tinit.tools import hf_families

WIDTH = 128
LAYERS = 2
HEADS = 4
KV_HEADS = 2
HEAD_DIM = 32
FFN = 256
EXPERT_FFN = 64
EXPERTS = 4
TOP_K = 2
VOCAB = 512
POSITIONS = 512

# (pattern a field's name fully matches, target): the first matching pattern decides; a field whose
# default is an int larger than the target gets the target (bools, floats and smaller ints stay).
SIZES: tuple[tuple[str, int], ...] = (
    (r"(num_)?(key_value|kv)_heads|n_kv_heads|num_kv_heads|multi_query_group_num|n_head_kv", KV_HEADS),
    (r"mamba_(n|num)_heads|mamba_nheads", 8),
    (r"mamba_(d_)?head(_dim)?|mamba_d_head", 32),
    (r"mamba_d_ssm", 2 * WIDTH),
    (r"(mamba_)?(n_groups|ngroups)|mamba_n_groups", 2),
    (r"(mamba_)?(d_state|state_size)|ssm_state_size|mamba_d_state", 16),
    (r"(mamba_)?chunk_size", 32),
    (r"time_step_rank|mamba_dt_rank|dt_rank", 8),
    (r"linear_num_key_heads", 2),
    (r"linear_num_(value_)?heads", HEADS),
    (r"linear_(key_|value_)?head_dim", HEAD_DIM),
    (r"q_lora_rank", 64),
    (r"(kv|o)_lora_rank", 32),
    (r"qk_rope_head_dim", 16),
    (r"qk_nope_head_dim|v_head_dim|index_head_dim|swa_head_dim|global_head_dim", HEAD_DIM),
    (r"qk_head_dim", 48),
    (r"index_topk", 8),
    (r"rotary_dim", HEAD_DIM // 2),
    (r".*head_dim|d_kv|kv_channels|dim_head|attention_head_dim|d_head|head_size", HEAD_DIM),
    (r".*_heads|n_head|num_heads|n_heads|heads", HEADS),
    (r"num_experts_per_tok(en)?|moe_topk|top_k|moe_k|num_selected_experts|experts_per_token", TOP_K),
    (r"n_shared_experts|num_shared_experts|moe_num_shared_experts", 1),
    (r"(num|n)_(local_|routed_)?experts|moe_num_experts|num_experts", EXPERTS),
    (r"n_group|num_expert_groups?", 2),
    (r"topk_group", 1),
    (r".*moe.*intermediate_size|.*expert.*intermediate_size|shared_intermediate_size|moe_ffn.*", EXPERT_FFN),
    (r".*intermediate_size.*|.*ffn_dim|d_ff|n_inner|.*ffn_hidden_size|dim_ff|dff|ffn_size|d_inner|mlp_dim", FFN),
    (r".*hidden_size|d_model|n_embd|dim|embed_dim|emb_dim|model_dim|hidden_dim|word_embed_proj_dim", WIDTH),
    (r"embedding_size|attention_hidden_size|hidden_size_global|projection_dim|out_hidden_size", WIDTH),
    (r".*vocab_size.*|vocab|encoder_hash_byte_group_vocab", VOCAB),
    (r"max_position_embeddings|n_positions|n_ctx|max_seq_len|max_sequence_length", POSITIONS),
    (r"original_max_position_embeddings", POSITIONS // 2),
    (
        r"(num_)?(hidden_)?layers|n_layers?|num_(decoder|encoder)_layers|(encoder|decoder)_layers|depth|num_blocks",
        LAYERS,
    ),
    (r"num_layers|num_hidden_layers", LAYERS),
)
_SIZES = tuple((re.compile(pattern), target) for pattern, target in SIZES)
# (field, field): kept equal when the defaults have them equal (multi-head attention's key/value
# heads; MLA's key/value heads, and its head_dim that is the rotary part).
EQUAL: tuple[tuple[str, str], ...] = (
    ("num_key_value_heads", "num_attention_heads"),
    ("head_dim", "qk_rope_head_dim"),
)
# The fields that hold a config's depth, first one present wins (the per-layer lists follow it).
DEPTH_FIELDS = ("num_hidden_layers", "num_layers", "n_layer", "n_layers", "decoder_layers", "depth")
# Fields never shrunk by name: ids, strides, kernels and rates whose names look like sizes.
KEEP = re.compile(r".*(_id|_ids|_index|token.*|_idx|stride|kernel.*|rate|_eps|epsilon|_theta|factor)")

# Classes whose defaults do not shrink by name alone: config fields set after the generic shrink
# (a held config's fields as a mapping under its name). Each entry says why.
HAND_WRITTEN: dict[str, dict] = {
    # Attention every 2nd layer from the 1st, experts every 2nd from the 2nd: one of each in 2 layers.
    "JambaForCausalLM": {"attn_layer_period": 2, "attn_layer_offset": 1, "expert_layer_period": 2},
    # Attention at one of the two layers (the defaults build Mamba blocks only).
    "BambaForCausalLM": {"attn_layer_indices": [1]},
    "GraniteMoeHybridForCausalLM": {"layer_types": ["linear_attention", "full_attention"]},
    # num_heads * head_dim must be expand * hidden_size (2 * 128): the reproducer.
    "Mamba2ForCausalLM": {"num_heads": 8, "head_dim": 32},
    # Two hybrid (shared-attention) blocks: the shared block is tied across them.
    # Its attention reads the hidden states and the embeddings side by side: twice the width.
    "ZambaForCausalLM": {
        "num_hidden_layers": 4,
        "layers_block_type": ["mamba", "mamba", "hybrid", "hybrid"],
        "attention_hidden_size": 2 * WIDTH,
    },
    # The defaults leave these None, and the model divides by them.
    "HunYuanDenseV1ForCausalLM": {"head_dim": HEAD_DIM},
    "HunYuanMoEV1ForCausalLM": {"head_dim": HEAD_DIM},
    "MinistralForCausalLM": {"head_dim": HEAD_DIM},
    "NemotronForCausalLM": {"num_key_value_heads": KV_HEADS},
    "DeepseekV2ForCausalLM": {"num_experts_per_tok": TOP_K},
    # block_types repeats every 3 layers: 3 layers hold both kinds.
    "RecurrentGemmaForCausalLM": {"num_hidden_layers": 3},
    "Dots1ForCausalLM": {"n_routed_experts": EXPERTS, "num_experts_per_tok": TOP_K, "n_shared_experts": 1},
    "Lfm2MoeForCausalLM": {"layer_types": ["conv", "full_attention"]},
    # Its validation wants as many key/value heads as heads; the sliding layers' MLA sizes are keywords.
    "Dots3NoteForCausalLM": {
        "num_key_value_heads": HEADS,
        "swa_num_attention_heads": HEADS,
        "swa_num_key_value_heads": HEADS,
        "swa_q_lora_rank": 64,
        "swa_kv_lora_rank": 32,
        "swa_head_dim": 48,
        "swa_qk_nope_head_dim": 32,
        "swa_v_head_dim": 32,
    },
    # The defaults refuse themselves (a per-layer input width where the assistant has none).
    "Gemma4AssistantForCausalLM": {
        "text_config": {
            "hidden_size_per_layer_input": 0,
            "vocab_size_per_layer_input": 0,
            "enable_moe_block": False,
            "use_double_wide_mlp": False,
            "num_kv_shared_layers": 0,
        }
    },
    # The last shared layers need a producer of each attention type before them.
    "Gemma3nForCausalLM": {"num_kv_shared_layers": 2},
    "Gemma4UnifiedAssistantForCausalLM": {"text_config": {"num_kv_shared_layers": LAYERS}},
    # attention_layers is derived from attention_types, which holds the depth in its own form.
    "GPTNeoForCausalLM": {"attention_types": [[["global", "local"], 1]]},
    # The model reads per-layer-type rope parameters the defaults do not give.
    "CohereCompassForCausalLM": {"rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e4}}},
    # The model reads attn_config.rope_theta, which DbrxAttentionConfig does not define.
    "DbrxForCausalLM": {"attn_config": {"rope_theta": 5e5, "clip_qkv": 8.0}},
    # The QSA indexer's fields have no defaults.
    "Qwen4ExpForCausalLM": {
        "indexer_n_heads": HEADS,
        "indexer_kv_heads": 1,
        "indexer_head_dim": HEAD_DIM,
        "indexer_budget": 64,
        "indexer_compress_ratio": 4,
    },
    # Axial position factors that sum to the width and multiply to the positions.
    "ReformerModelWithLMHead": {"axial_pos_embds_dim": [64, 64], "axial_pos_shape": [16, 32]},
    # kv_source_layers holds a layer index per layer (each a kind of its own to the shrink) and must agree with
    # layer_types; an indexer scores with at most the query heads of key head 0. Three layers: a sliding one with
    # the dense MLP, an indexer with its own K/V and a reindexer that reads them (no K/V projections), both MoE.
    "Kolibri1_1ForCausalLM": {
        "num_hidden_layers": 3,
        "layer_types": ["sliding_attention", "indexed_attention", "indexed_attention"],
        "index_layers": [1],
        "kv_source_layers": [0, 1, 1],
        "mlp_only_layers": [0],
        "index_num_heads": HEADS // KV_HEADS,
    },
    # Zero (identity) experts count as experts in the router's width.
    "LongcatFlashForCausalLM": {"zero_expert_num": EXPERTS},
    # The audio encoder's convolution channels have names of their own.
    "Phi4MultimodalForCausalLM": {
        "audio_config": {
            "ext_pw_out_channel": WIDTH,
            "depthwise_separable_out_channel": WIDTH,
            "nemo_conv_channels": WIDTH,
        }
    },
}


def causal_lm_classes() -> dict[str, str]:
    """The distinct causal-LM classes of transformers, each with the model type that configures it.

    Returns:
        {class name: model type}, in the mapping's order; for a class several model types name
        (``LlamaForCausalLM``: exaone, internlm3, llama, ...), the model type whose config class is
        the model class's ``config_class``, else the first.

    Raises:
        ImportError: transformers is not installed.
    """
    transformers = hf_families.import_transformers()
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    found: dict[str, list[str]] = {}
    for model_type, name in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items():
        found.setdefault(name, []).append(model_type)
    chosen = {}
    for name, types in found.items():
        config_class = getattr(getattr(transformers, name, None), "config_class", None)
        own = [t for t in types if CONFIG_MAPPING_NAMES.get(t) == getattr(config_class, "__name__", None)]
        chosen[name] = (own or types)[0]
    return chosen


def _target(key: str, value):
    """The shrunk value of field ``key`` (None to keep it): its ``SIZES`` target when smaller."""
    if isinstance(value, bool) or not isinstance(value, int) or KEEP.fullmatch(key):
        return None
    for pattern, target in _SIZES:
        if pattern.fullmatch(key):
            return target if value > target else None
    return None


def _is_config(value) -> bool:
    return hasattr(value, "to_dict") and isinstance(getattr(value, "model_type", None), str)


def _values(config) -> dict:
    """{field: value} of what ``config``'s constructor takes (a dataclass config's init fields)."""
    if dataclasses.is_dataclass(config):
        names = [f.name for f in dataclasses.fields(config) if f.init]
    else:
        names = [k for k in config.to_dict() if hf_families.settable(config, k)]
    missing = object()
    values = {name: vars(config).get(name, missing) for name in names}  # a per-layer getter may refuse
    for name in [n for n, v in values.items() if v is missing]:
        values[name] = _attribute(config, name, missing)
    return {name: value for name, value in values.items() if value is not missing}


def _attribute(config, name: str, default):
    """``getattr(config, name)``, ``default`` when the getter refuses (Gemma-4's per-layer fields)."""
    try:
        return getattr(config, name)
    except Exception:  # noqa: BLE001 - a getter that refuses leaves the field as it is
        return default


def _as_fields(config) -> dict:
    """``config`` as constructor fields, held configs as nested dicts with their ``model_type``."""
    values = {k: _as_fields(v) if _is_config(v) else v for k, v in _values(config).items()}
    return {"model_type": config.model_type, **values}


def _depth(values: Mapping) -> tuple[str | None, int | None]:
    for key in DEPTH_FIELDS:
        value = values.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return key, value
    return None, None


def _per_layer(values: Mapping, depth: int) -> dict[str, list]:
    """The fields that hold one entry per layer: lists of length ``depth``, pattern strings (NemotronH's
    ``M-M*``), dicts of per-layer configs keyed by layer index; and lists of layer indices (sorted,
    distinct, below ``depth``: Llama-4's ``moe_layers``) as one flag per layer."""
    found = {}
    for key, value in values.items():
        if value is None or isinstance(value, bool) or key in ("model_type", "id2label", "label2id"):
            continue
        if isinstance(value, str):
            if len(value) == depth and len(set(value)) <= 4 and not value.isalpha():
                found[key] = list(value)
        elif isinstance(value, Mapping):
            if value and all(str(k).isdigit() and isinstance(v, Mapping) for k, v in value.items()):
                found[key] = [value.get(str(i), value.get(i)) for i in range(depth)]
        elif isinstance(value, (list, tuple)) and value and all(type(v) is int for v in value):
            if list(value) == sorted(set(value)) and value[-1] < depth:
                found[key] = [i in value for i in range(depth)]
            elif len(value) == depth:
                found[key] = list(value)
        elif isinstance(value, (list, tuple)) and len(value) == depth:
            found[key] = list(value)
    return found


def _kept_layers(lists: Mapping[str, list], depth: int) -> list[int]:
    """The first layer of each distinct combination of per-layer entries, at least ``LAYERS`` layers."""
    kept, seen = [], set()
    for i in range(depth):
        kind = tuple(repr(entries[i]) for entries in lists.values())
        if kind not in seen:
            seen.add(kind)
            kept.append(i)
    kept += [i for i in range(depth) if i not in kept][: max(0, min(LAYERS, depth) - len(kept))]
    return sorted(kept)


def _relayer(values: Mapping) -> dict:
    """Fields that cut the depth to one layer of each kind, the per-layer fields cut alike."""
    key, depth = _depth(values)
    if key is None or depth <= LAYERS:
        return {}
    lists = _per_layer(values, depth)
    kept = _kept_layers(lists, depth)
    fields = {key: len(kept)}
    for name, entries in lists.items():
        value = values[name]
        if isinstance(value, str):
            fields[name] = "".join(entries[i] for i in kept)
        elif isinstance(value, Mapping):
            fields[name] = {str(j): entries[i] for j, i in enumerate(kept) if entries[i] is not None}
        elif all(isinstance(e, bool) for e in entries) and not all(isinstance(v, bool) for v in value):
            fields[name] = [j for j, i in enumerate(kept) if entries[i]]  # layer indices, renumbered
        else:
            fields[name] = [_target(name, entries[i]) or entries[i] for i in kept]
    return fields


def _shrunk(key: str, value):
    """``value`` shrunk by name: an int by ``SIZES``, a plain mapping entry by entry (None: unchanged)."""
    if isinstance(value, Mapping):
        inner = {k: _shrunk(str(k), v) for k, v in value.items()}
        return {k: value[k] if v is None else v for k, v in inner.items()} if any(inner.values()) else None
    return _target(key, value)


def shrink(config) -> dict:
    """The fields that make ``config`` (a ``transformers`` config) tiny: every size field by ``SIZES``,
    the depth and the per-layer fields by kind, held configs in turn (as full field dicts).

    Returns:
        {field: value}, held configs as dicts with their ``model_type``.
    """
    values = _values(config)
    fields = {}
    for key, value in values.items():
        if _is_config(value):
            fields[key] = hf_families.merge(_as_fields(value), shrink(value))
        elif (target := _shrunk(key, value)) is not None:
            fields[key] = target
    for key, value in _relayer(values).items():  # a per-layer dict's entries shrunk as above
        fields[key] = hf_families.merge(value, _shrunk(key, value) or {}) if isinstance(value, Mapping) else value
    for key, other in EQUAL:
        if key in fields and type(values.get(key)) is int and values.get(key) == values.get(other):
            fields[key] = fields.get(other, values[other])
    _keep_ids_in_vocab(values, fields)
    return fields


def _keep_ids_in_vocab(values: Mapping, fields: dict) -> None:
    """Token ids at or beyond the shrunk vocabulary moved inside it, kept distinct (top down)."""
    vocab = fields.get("vocab_size", values.get("vocab_size"))
    if not isinstance(vocab, int):
        return
    spare = vocab - 1
    for key, value in values.items():
        if not re.fullmatch(r".*token_(id|index)", key):
            continue
        entries = value if isinstance(value, list) else [value]
        if any(type(v) is int and v >= vocab for v in entries):
            moved = []
            for v in entries:
                outside = type(v) is int and v >= vocab
                moved.append(spare if outside else v)
                spare -= outside
            fields[key] = moved if isinstance(value, list) else moved[0]


def tiny_fields(name: str) -> dict:
    """The config fields of class ``name``'s tiny config: ``shrink`` of its defaults, ``HAND_WRITTEN`` last.

    Args:
        name: a key of ``causal_lm_classes()``.

    Returns:
        {field: value} for ``config_of(name, fields)``.

    Raises:
        ValueError: ``name`` is not a causal-LM class; its default config does not build.
    """
    classes = causal_lm_classes()
    if name not in classes:
        raise ValueError(f"{name!r} is not a class of MODEL_FOR_CAUSAL_LM_MAPPING_NAMES ({len(classes)} are)")
    hand = HAND_WRITTEN.get(name, {})
    try:
        defaults = _config_class(name)()
    except Exception:  # noqa: BLE001 - defaults that refuse themselves (Gemma-4's assistant): with the table's
        defaults = _config_class(name)(**hand)
    fields = shrink(defaults)
    if _values(defaults).get("is_decoder") is False and not defaults.is_encoder_decoder:
        fields["is_decoder"] = True  # a causal LM: BERT-like configs build an encoder unless told
    return hf_families.merge(fields, hand)


def _config_class(name: str):
    """The config class model class ``name`` declares (Emu3ForCausalLM: Emu3TextConfig, not emu3's)."""
    return getattr(hf_families.import_transformers(), name).config_class


def config_of(name: str, fields: Mapping | None = None):
    """Class ``name``'s config built from ``fields`` (``tiny_fields(name)`` when None).

    Returns:
        A ``transformers.PretrainedConfig`` of the class's model type.

    Raises:
        ValueError, TypeError: the config class refuses the fields.
    """
    fields = tiny_fields(name) if fields is None else fields
    return _config_class(name)(**fields)


def build(name: str, config=None, *, device: str | torch.device = "meta") -> torch.nn.Module:
    """Class ``name`` built from ``config`` (its tiny config when None) on ``device`` (meta by default).

    Returns:
        The model; on the meta device nothing is allocated.
    """
    transformers = hf_families.import_transformers()
    cls = getattr(transformers, name)
    config = config_of(name) if config is None else config
    with torch.device(device):
        return cls._from_config(config) if hasattr(cls, "_from_config") else cls(config)


__all__ = [
    "DEPTH_FIELDS",
    "EQUAL",
    "HAND_WRITTEN",
    "SIZES",
    "build",
    "causal_lm_classes",
    "config_of",
    "shrink",
    "tiny_fields",
]
