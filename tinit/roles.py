"""Which parameter is which: role, block index and stack from fully qualified names.

Roles (``ROLES``, the same tuple as ``tinit.schemes.ROLES``):
    embedding      token / position / token-type embeddings, T5's relative
                   attention bias table
    attn_q, attn_k, attn_v
                   separate query / key / value projections
    attn_qkv       a fused q/k/v projection (GPT-2 ``c_attn``, Megatron
                   ``query_key_value``/``linear_qkv``, ``in_proj_weight``)
    attn_out       the attention output projection (writes to the residual)
    mlp_in         MLP input projections: gate, up, fc1, c_fc, w1, w3, wi
    mlp_out        MLP output projection: down, fc2, w2, wo (writes to the residual)
    norm           LayerNorm / RMSNorm weights
    bias           any bias vector (norm biases included)
    head           the output (LM / classification) head
    residual_gate  a learnable multiplier of a residual branch (ReZero's
                   ``resweight``, ``res_gate``, ``attn_gate``, ...)

Names follow Hugging Face GPT-2, Llama, Mistral, Qwen2, T5, BERT, BART/OPT,
torchtitan's Llama, OLMo and Megatron-LM (legacy and core). Names that are
ambiguous alone (``c_proj``, ``wo``, ``dense``, ``q``/``k``/``v``/``o``) are
resolved by the enclosing module (attention vs MLP). A name matching nothing
gets role None; ``init_model_`` refuses it for schemes that need roles unless
an override pattern classifies it.
"""

from __future__ import annotations

import re

from tinit.schemes import ROLES

_NORM = re.compile(r"^(ln(_?\w+)?|\w*norm\w*)$", re.IGNORECASE)
_GATE = re.compile(
    r"^(resweight|re_?zero\w*|res(idual)?_?(gate|weight|scale|alpha)\w*|"
    r"(attn|attention|mlp|ffn)_(gate|alpha|scale)|(gate|alpha)_(attn|attention|mlp|ffn))$",
    re.IGNORECASE,
)
_LAYER = re.compile(r"(?:^|\.)(?:h|layers?|blocks?)\.(\d+)(?:\.|$)")

HEAD_NAMES = frozenset({"lm_head", "output", "output_layer", "score", "classifier", "embed_out", "qa_outputs"})
EMBEDDING_NAMES = frozenset(
    {
        "wte",
        "wpe",
        "embed_tokens",
        "tok_embeddings",
        "word_embeddings",
        "position_embeddings",
        "token_type_embeddings",
        "embed_positions",
        "shared",
        "relative_attention_bias",
        "embedding",
        "embeddings",
        "embed",
        "embed_in",
    }
)
ATTENTION_SCOPES = frozenset(
    {
        "attn",
        "attention",
        "self_attn",
        "self_attention",
        "selfattention",
        "encdecattention",
        "crossattention",
        "cross_attn",
        "encoder_attn",
        "inter_attention",
    }
)
MLP_SCOPES = frozenset({"mlp", "feed_forward", "feedforward", "ffn", "densereludense", "intermediate"})

# Leaf module names whose role does not depend on where they sit.
LEAF_ROLES = {
    **dict.fromkeys(("q_proj", "wq", "query", "linear_q", "q_lin", "to_q"), "attn_q"),
    **dict.fromkeys(("k_proj", "wk", "key", "linear_k", "k_lin", "to_k"), "attn_k"),
    **dict.fromkeys(("v_proj", "wv", "value", "linear_v", "v_lin", "to_v"), "attn_v"),
    **dict.fromkeys(
        ("c_attn", "qkv_proj", "qkv", "wqkv", "query_key_value", "linear_qkv", "in_proj", "to_qkv", "att_proj"),
        "attn_qkv",
    ),
    **dict.fromkeys(("o_proj", "out_proj", "linear_proj", "out_lin", "attn_out", "to_out"), "attn_out"),
    **dict.fromkeys(
        (
            "gate_proj",
            "up_proj",
            "gate_up_proj",
            "c_fc",
            "fc1",
            "w1",
            "w3",
            "w13",
            "wi",
            "wi_0",
            "wi_1",
            "dense_h_to_4h",
            "linear_fc1",
            "fc_in",
            "lin1",
            "ff_proj",
            "linear1",
        ),
        "mlp_in",
    ),
    **dict.fromkeys(("down_proj", "fc2", "w2", "dense_4h_to_h", "linear_fc2", "fc_out", "lin2", "linear2"), "mlp_out"),
}
# Leaf names that need the enclosing attention / MLP module.
SCOPED_ROLES = {
    "c_proj": ("attn_out", "mlp_out"),
    "wo": ("attn_out", "mlp_out"),
    "o": ("attn_out", None),
    "q": ("attn_q", None),
    "k": ("attn_k", None),
    "v": ("attn_v", None),
}


def _split(name: str) -> tuple[list[str], str]:
    """(module path components, the parameter's own leaf key).

    The leaf key is the owning module's name for ``weight``-like leaves
    ("attn.c_proj.weight" -> "c_proj") and the parameter's own name with a
    ``_weight`` suffix dropped otherwise ("self_attn.in_proj_weight" -> "in_proj").
    """
    parts = name.split(".")
    leaf = parts[-1]
    if leaf in ("weight", "scale", "gamma", "g") and len(parts) >= 2:
        return parts[:-1], parts[-2]
    return parts[:-1], leaf.removesuffix("_weight")


def infer_role(name: str) -> str | None:
    """The role of the parameter called ``name`` (see the module docstring).

    Args:
        name: fully qualified name, e.g. "transformer.h.0.attn.c_proj.weight".

    Returns:
        One of ``ROLES``, or None when the name matches no rule.
    """
    parts = name.split(".")
    leaf = parts[-1]
    if leaf == "bias" or leaf.endswith("_bias"):
        return "bias"
    path, key = _split(name)
    if leaf.endswith("norm_weight") or (path and _NORM.match(path[-1]) and key == path[-1]):
        return "norm"
    if _GATE.match(key):
        return "residual_gate"
    scopes = {p.lower() for p in path[:-1]} if key == (path[-1] if path else None) else {p.lower() for p in path}
    has_layer = infer_layer(name) is not None
    if key == "ff_out":  # OLMo: the block's MLP output, or the model's LM head outside the blocks
        return "mlp_out" if has_layer else "head"
    if key in HEAD_NAMES or (key == "decoder" and "predictions" in scopes):
        return "head"
    if key in EMBEDDING_NAMES:
        return "embedding"
    if key in LEAF_ROLES:
        return LEAF_ROLES[key]
    in_attention = bool(scopes & ATTENTION_SCOPES)
    in_mlp = bool(scopes & MLP_SCOPES)
    if key in SCOPED_ROLES:
        attention_role, mlp_role = SCOPED_ROLES[key]
        if in_attention:
            return attention_role
        return mlp_role if in_mlp else None
    if key == "dense":  # BERT / Megatron legacy
        if in_attention:
            return "attn_out"
        if "intermediate" in scopes or "pooler" in scopes or "transform" in scopes:
            return "mlp_in"
        if "output" in scopes:
            return "mlp_out"
    return None


def infer_layer(name: str) -> int | None:
    """The 0-based block index in ``name`` ("model.layers.7.mlp..." -> 7), or None.

    The first ``h.<i>``, ``layer(s).<i>`` or ``block(s).<i>`` component counts,
    so T5's "encoder.block.3.layer.1..." is block 3.
    """
    match = _LAYER.search(name)
    return int(match.group(1)) if match else None


def infer_stack(name: str) -> str | None:
    """ "encoder" or "decoder" when a component of ``name`` is exactly that word, else None.

    Whether a model is encoder-decoder is decided over all its names
    (``init_model_``): BERT's "bert.encoder.layer.0" and Megatron-core's
    "decoder.layers.0" are single stacks.
    """
    for part in name.split("."):
        if part in ("encoder", "decoder"):
            return part
    return None


__all__ = ["ROLES", "infer_layer", "infer_role", "infer_stack"]
