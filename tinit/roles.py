"""Which parameter is which: roles inferred from fully qualified names.

Roles:
    embedding  token / position embedding tables (wte, wpe, embed_tokens, ...)
    residual   residual output projections, whose output is added straight to
               the residual stream (attention output, MLP down projection):
               c_proj, o_proj, down_proj, out_proj, fc2, w2, wo, dense_4h_to_h
    head       the output (LM) head, when not tied to the embedding
    norm       LayerNorm / RMSNorm weights
    bias       any bias vector
    weight     any other matrix (q/k/v, fused qkv, MLP input, ...)
"""

from __future__ import annotations

import re

ROLES = ("embedding", "residual", "head", "norm", "bias", "weight")

RESIDUAL_NAMES = ("c_proj", "o_proj", "down_proj", "out_proj", "fc2", "w2", "wo", "dense_4h_to_h")
EMBEDDING_NAMES = ("wte", "wpe", "embed_tokens", "tok_embeddings", "word_embeddings",
                   "position_embeddings", "embed_positions", "token_type_embeddings")
HEAD_NAMES = ("lm_head", "output", "score")
NORM_PATTERN = re.compile(r"(^|\.)(ln_?\w*|\w*norm\w*|layer_norm\w*)$", re.IGNORECASE)
_LAYER_PATTERN = re.compile(r"(?:^|\.)(?:h|layers?|blocks?|block)\.(\d+)(?:\.|$)")


def infer_role(name: str) -> str:
    """The role of the parameter called ``name`` (see module docstring).

    Args:
        name: fully qualified name, e.g. "transformer.h.0.attn.c_proj.weight".

    Returns:
        One of ROLES.
    """
    parts = name.split(".")
    module = ".".join(parts[:-1])
    leaf = parts[-2] if len(parts) >= 2 else ""
    if parts[-1] == "bias":
        return "bias"
    if NORM_PATTERN.search(module):
        return "norm"
    if leaf in EMBEDDING_NAMES:
        return "embedding"
    if leaf in RESIDUAL_NAMES:
        return "residual"
    if leaf in HEAD_NAMES:
        return "head"
    return "weight"


def infer_layer(name: str) -> int | None:
    """The 0-based block index in ``name`` ("model.layers.7.mlp..." -> 7), or None."""
    match = _LAYER_PATTERN.search(name)
    return int(match.group(1)) if match else None
