"""Which parameter is which: role, block index, stack and tower from fully qualified names.

Roles (``ROLES``, the same tuple as ``tinit.schemes.ROLES``):
    embedding      token / position / token-type embeddings (``pos_embed``,
                   ``position_embedding(s)``), T5's relative attention bias table
    attn_q, attn_k, attn_v
                   separate query / key / value projections (MLA's query up
                   projection ``q_b_proj``/``wq_b``/``linear_q_up_proj`` is attn_q)
    attn_qkv       a fused q/k/v projection (GPT-2 ``c_attn``, Megatron
                   ``query_key_value``/``linear_qkv``, ``in_proj_weight``, timm ``qkv``,
                   torchtitan ``wqkv``, OLMo-core ``w_qkv``)
    attn_out       the attention output projection (writes to the residual)
    attn_q_down, attn_kv_down
                   MLA's low-rank down projections (DeepSeek-V2/V3 ``q_a_proj``,
                   ``kv_a_proj_with_mqa``; torchtitan ``wq_a``, ``wkv_a``; Megatron-Core
                   ``linear_q_down_proj``, ``linear_kv_down_proj``)
    attn_kv        MLA's fused k/v up projection (``kv_b_proj``, ``wkv_b``, ``linear_kv_up_proj``)
    attn_sink      per-head attention-sink logits (GPT-OSS ``self_attn.sinks``, torchtitan ``attention.sinks``)
    mlp_in         MLP input projections: gate, fc1, c_fc, w1, wi, wi_0
    mlp_gate_up    the fused gate+up of a gated MLP (``gate_up_proj``, ``w13``, GPT-OSS
                   ``mlp1``): the gate's rows and the up projection's, each written by the
                   recipe's rule for its part (``Scheme.spec``'s ``gate_up``)
    mlp_up         a gated MLP's separate up projection (HF ``up_proj``, torchtitan /
                   OLMo-core ``w3``, T5 ``wi_1``)
    mlp_out        MLP output projection: down, fc2, w2, wo, GPT-OSS ``mlp2`` (writes to the residual)
    router         an MoE router's weight and bias (HF ``mlp.gate`` of Mixtral, Qwen2/3-MoE,
                   OLMoE, DeepSeek-V3; ``mlp.router`` of GPT-OSS and Megatron-Core;
                   torchtitan ``moe.router.gate``; OLMo-core ``feed_forward_moe.router``; a Linear
                   inside a router: HunYuan-MoE ``mlp.gate.wg``, ``router.<linear>``) and
                   the shared-expert gate (``shared_expert_gate``, Megatron ``gate_weight``)
    norm           LayerNorm / RMSNorm weights
    bias           any other bias vector (norm biases, expert biases included)
    head           the output (LM / classification) head (``lm_head``, OLMo-core ``lm_head.w_out``,
                   timm ``head``, BERT ``cls.predictions.decoder``, RoBERTa ``lm_head.decoder``)
    residual_gate  a learnable multiplier of a residual branch, at most 1-D (ReZero's
                   ``resweight``, ``res_gate``, ``attn_gate``, mllama's tanh gates, LayerScale's
                   ``ls1.gamma``/``layer_scale1.lambda1``); a matrix of such a name is not one
    token          learned tokens: ``cls_token``, ``class_embedding`` (CLIP/SigLIP, 1-D),
                   ``reg_token``/``register_tokens``, ``mask_token``, ``dist_token``
    patch_embed    the patch-embedding convolution (ViT ``patch_embeddings.projection``,
                   CLIP ``patch_embedding``, timm ``patch_embed.proj``)
    linear         a matrix no name rule places (a multimodal projector, OPT's
                   ``project_in``/``project_out``; ``init_model_`` also gives it to any
                   ``nn.Linear``/``nn.Conv*``/HF ``Conv1D`` weight the rules leave unclassified)
    ssm_in         a state-space or linear-attention mixer's input projections: Mamba's
                   ``in_proj``, ``x_proj``, ``dt_proj`` weight, a gated delta net's
                   ``in_proj_qkvz``/``in_proj_ba`` (not a fused q/k/v: only
                   ``nn.MultiheadAttention``'s ``in_proj_weight`` and an ``in_proj`` inside an
                   attention module are attn_qkv)
    ssm_conv       the mixer's causal depthwise convolution (``conv1d``)
    ssm_a, ssm_d, ssm_dt
                   the mixer's state: ``A_log``, the skip ``D``, the time-step bias ``dt_bias``
                   (Mamba's ``dt_proj.bias``); every recipe writes the model's own values
    (a mixer's ``out_proj`` writes to the residual stream: attn_out.) A mixer is a module named
    ``mixer``, ``mamba``, ``ssm`` or ``linear_attn``, or (``init_model_``) one holding ``A_log``.

Names follow Hugging Face (GPT-2, Llama, Mistral, Qwen2/3 and their MoE, Mixtral, OLMoE,
DeepSeek-V3, GPT-OSS, T5, BERT/RoBERTa, BART/OPT, ViT, CLIP/SigLIP, LLaVA, Dinov2, mllama),
torchtitan (Llama 3, DeepSeek-V3, GPT-OSS, Qwen3 of torchtitan 0.3.0, whose dimension-tagged
leaves such as ``w1_EFD`` read as ``w1``, and the earlier ``moe.experts.w1``), OLMo-core,
Megatron-LM (legacy and core, grouped experts ``linear_fc1.weight<e>`` and ``experts.weight1/2``)
and timm's ViT. Names that are ambiguous alone (``c_proj``, ``wo``, ``w_out``, ``dense``,
``proj``, ``gate``, ``q``/``k``/``v``/``o``) are resolved by the enclosing module (attention,
MLP, MoE, LM head). A registered ``tinit.families.Family`` may add names (its ``leaf_roles``).
A name matching nothing gets role None; ``init_model_`` then classifies
by module type where it can and otherwise applies its ``unclassified`` policy.
"""

from __future__ import annotations

import re

from tinit import families
from tinit.schemes import ROLES

_NORM = re.compile(r"^(ln(_?\w+)?|\w*norm\w*)$", re.IGNORECASE)
_GATE = re.compile(
    r"^(resweight|re_?zero\w*|res(idual)?_?(gate|weight|scale|alpha)\w*|"
    r"(cross_attn_)?(attn|attention|mlp|ffn|ffw)_(gate|alpha|scale)|(gate|alpha)_(attn|attention|mlp|ffn|ffw))$",
    re.IGNORECASE,
)
# LayerScale (Touvron et al., "Going deeper with Image Transformers", arXiv:2103.17239): timm's
# ``ls1.gamma``, HF Dinov2's ``layer_scale1.lambda1``, BEiT's ``lambda_1``/``gamma_1``, ConvNeXt's
# ``layer_scale_parameter``. Its value is the model's ``init_values`` (``init_model_`` reads it).
LAYER_SCALE = re.compile(r"^(ls\d|layer_?scale\w*|lambda_?\d|gamma_\d)$", re.IGNORECASE)
_LAYER = re.compile(r"(?:^|\.)(?:h|layers?|blocks?)\.(\d+)(?:\.|$)")
# torchtitan's dimension-order tags on a parameter's own name ("w1_EFD", "mlp1_weight_EGD").
_DIM_TAG = re.compile(r"_[A-Z]{2,4}$")
_WEIGHT_N = re.compile(r"^weight\d+$")  # Megatron-Core TE grouped experts: one weight<e> per expert

HEAD_NAMES = frozenset(
    {"lm_head", "output", "output_layer", "score", "classifier", "embed_out", "qa_outputs", "head", "output_projection"}
)
EMBEDDING_NAMES = frozenset(
    {
        "wte",
        "wpe",
        "embed_tokens",
        "tok_embeddings",
        "word_embeddings",
        "position_embeddings",
        "position_embedding",
        "pos_embed",
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
TOKEN_NAMES = frozenset(
    {
        "cls_token",
        "class_embedding",
        "reg_token",
        "reg_tokens",
        "register_tokens",
        "mask_token",
        "dist_token",
        "distillation_token",
    }
)
PATCH_EMBED_NAMES = frozenset({"patch_embedding", "patch_embeddings", "patch_embed"})
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
# Modules that hold an MoE layer: a "gate" directly under one is its router, not a GLU gate.
MOE_SCOPES = frozenset({"mlp", "moe", "block_sparse_moe", "feed_forward_moe", "sparse_moe", "mixer"})
# Multimodal projectors: matrices outside every residual stream.
PROJECTOR_SCOPES = frozenset({"multi_modal_projector", "mm_projector", "visual_projection", "text_projection"})

# Leaf module names whose role does not depend on where they sit.
LEAF_ROLES = {
    **dict.fromkeys(("q_proj", "wq", "query", "linear_q", "q_lin", "to_q", "w_q"), "attn_q"),
    **dict.fromkeys(("q_b_proj", "wq_b", "linear_q_up_proj", "linear_q_proj"), "attn_q"),
    **dict.fromkeys(("k_proj", "wk", "key", "linear_k", "k_lin", "to_k", "w_k"), "attn_k"),
    **dict.fromkeys(("v_proj", "wv", "value", "linear_v", "v_lin", "to_v", "w_v"), "attn_v"),
    **dict.fromkeys(
        (
            "c_attn",
            "qkv_proj",
            "qkv",
            "wqkv",
            "Wqkv",
            "w_qkv",
            "query_key_value",
            "linear_qkv",
            "to_qkv",
            "att_proj",
        ),
        "attn_qkv",
    ),
    **dict.fromkeys(("q_a_proj", "wq_a", "linear_q_down_proj"), "attn_q_down"),
    **dict.fromkeys(("kv_a_proj_with_mqa", "wkv_a", "linear_kv_down_proj"), "attn_kv_down"),
    **dict.fromkeys(("kv_b_proj", "wkv_b", "linear_kv_up_proj"), "attn_kv"),
    **dict.fromkeys(("o_proj", "out_proj", "linear_proj", "out_lin", "attn_out", "to_out"), "attn_out"),
    **dict.fromkeys(
        (
            "gate_proj",
            "c_fc",
            "fc1",
            "w1",
            "wi",
            "wi_0",
            "dense_h_to_4h",
            "linear_fc1",
            "fc_in",
            "lin1",
            "ff_proj",
            "linear1",
        ),
        "mlp_in",
    ),
    **dict.fromkeys(("up_proj", "w3", "wi_1"), "mlp_up"),
    **dict.fromkeys(("gate_up_proj", "w13", "mlp1"), "mlp_gate_up"),
    **dict.fromkeys(
        ("down_proj", "fc2", "w2", "dense_4h_to_h", "linear_fc2", "fc_out", "lin2", "linear2", "mlp2"), "mlp_out"
    ),
    **dict.fromkeys(("router", "shared_expert_gate"), "router"),
    **dict.fromkeys(("sinks", "attn_sinks"), "attn_sink"),
    **dict.fromkeys(TOKEN_NAMES, "token"),
    **dict.fromkeys(("project_in", "project_out"), "linear"),  # OPT's word_embed_proj_dim <-> hidden_size
}
# Leaf names that need the enclosing attention / MLP module.
SCOPED_ROLES = {
    "c_proj": ("attn_out", "mlp_out"),
    "wo": ("attn_out", "mlp_out"),
    "w_out": ("attn_out", "mlp_out"),
    "proj": ("attn_out", None),
    "o": ("attn_out", None),
    "q": ("attn_q", None),
    "k": ("attn_k", None),
    "v": ("attn_v", None),
}


# State-space and linear-attention mixers (HF Mamba, Mamba-2, Jamba, Bamba, Falcon-H1, GraniteMoeHybrid,
# Nemotron-H, Qwen3-Next's gated delta net): the mixer's own parameters and its children's leaf names.
SSM_SCOPES = frozenset({"mixer", "mamba", "ssm", "linear_attn"})
SSM_STATE = {"A_log": "ssm_a", "D": "ssm_d", "dt_bias": "ssm_dt"}
SSM_LEAVES = {"in_proj": "ssm_in", "x_proj": "ssm_in", "dt_proj": "ssm_in", "conv1d": "ssm_conv"}


def ssm_role(key: str, leaf: str) -> str | None:
    """The role of a mixer's parameter (a child's ``key`` such as "in_proj", or the mixer's own
    ``leaf`` such as "A_log"), or None: its state, its input projections (``in_proj_*`` included)
    and its convolution; ``dt_proj.bias`` is the time-step bias."""
    if key == leaf and leaf in SSM_STATE:
        return SSM_STATE[leaf]
    if key == "dt_proj" and leaf == "bias":
        return "ssm_dt"
    if leaf in ("weight", "bias") and leaf != key:
        role = SSM_LEAVES.get(key) or ("ssm_in" if key.startswith("in_proj_") else None)
        return role if leaf == "weight" or role is None else "bias"
    return None


def _mixer_role(parts: list[str], leaf: str, owner: str) -> str | None:
    """The role of a state-space mixer's parameter from its name (``ssm_role``): ``A_log`` and
    ``dt_bias`` anywhere, ``D`` and the children of a module named as a mixer (``SSM_SCOPES``);
    None for anything else, a child's bias included (a bias)."""
    if leaf in ("A_log", "dt_bias") or (len(parts) >= 3 and parts[-3].lower() in SSM_SCOPES):
        found = ssm_role(parts[-2] if leaf in ("weight", "bias") else leaf, leaf)
        return None if found == "bias" else found
    return "ssm_d" if leaf == "D" and owner in SSM_SCOPES else None


def split_name(name: str) -> tuple[list[str], str]:
    """(module path components, the parameter's own leaf key).

    The leaf key is the owning module's name for ``weight``-like leaves
    ("attn.c_proj.weight" -> "c_proj", Megatron's "linear_fc1.weight3" -> "linear_fc1") and the
    parameter's own name otherwise, without a torchtitan dimension tag or a ``_weight`` suffix
    ("self_attn.in_proj_weight" -> "in_proj", "experts.mlp1_weight_EGD" -> "mlp1").
    """
    parts = name.split(".")
    leaf = parts[-1]
    grouped_mlp = parts[-2:-1] == ["experts"] and leaf in ("weight1", "weight2")  # Megatron's legacy GroupedMLP
    if len(parts) >= 2 and (leaf in ("weight", "scale", "gamma", "g") or _WEIGHT_N.match(leaf)) and not grouped_mlp:
        return parts[:-1], parts[-2]
    return parts[:-1], _DIM_TAG.sub("", leaf).removesuffix("_weight")


def _is_bias(leaf: str) -> bool:
    leaf = _DIM_TAG.sub("", leaf)
    return leaf == "bias" or leaf.endswith("_bias")


def _router(parts: list[str]) -> tuple[bool, bool]:
    """(whether the parameter called ``parts`` is an MoE router module's own, whether it is that of a
    Linear inside a router module)."""
    owner, above, top = (["", "", ""] + [p.lower() for p in parts[-4:-1]])[-3:][::-1]
    owner_is_router = owner in ("router", "shared_expert_gate") or (
        owner == "gate" and (above in MOE_SCOPES or above == "router")
    )
    # A router holding its logits' Linear: HunYuan-MoE's mlp.gate.wg, JetMoE's router.layer,
    # LongCat-Flash's router.classifier (HunYuanMoEV1Gate.forward: router_logits = self.wg(x)).
    inside = len(parts) >= 4 and (above == "router" or (above == "gate" and top in MOE_SCOPES))
    return owner_is_router, inside


def infer_role(name: str) -> str | None:
    """The role of the parameter called ``name`` (see the module docstring).

    Names only: ``init_model_`` adds what module types and shapes say (an unnamed
    ``nn.Linear`` is "linear"; a gate name on a matrix is not a residual gate).

    Args:
        name: fully qualified name, e.g. "transformer.h.0.attn.c_proj.weight".

    Returns:
        One of ``ROLES``, or None when the name matches no rule.
    """
    parts = name.split(".")
    leaf = parts[-1]
    router_owner, in_router = _router(parts)
    owner = parts[-2].lower() if len(parts) >= 2 else ""
    if (found := _mixer_role(parts, leaf, owner)) is not None:
        return found
    if _is_bias(leaf):
        # An MoE router's bias is part of its logits (HF GptOss draws it like the weight).
        return "router" if leaf == "bias" and (router_owner or in_router) else "bias"
    path, key = split_name(name)
    if leaf.endswith("norm_weight") or (path and _NORM.match(path[-1]) and key == path[-1]):
        return "norm"
    if _GATE.match(key) or LAYER_SCALE.match(key):
        return "residual_gate"
    if in_router and key == path[-1]:
        return "router"
    scopes = {p.lower() for p in path[:-1]} if key == (path[-1] if path else None) else {p.lower() for p in path}
    has_layer = infer_layer(name) is not None
    if key == "ff_out":  # OLMo: the block's MLP output, or the model's LM head outside the blocks
        return "mlp_out" if has_layer else "head"
    if key == "w_out" and "lm_head" in scopes:  # OLMo-core's LMHead
        return "head"
    if key in PATCH_EMBED_NAMES or (key in ("projection", "proj") and scopes & PATCH_EMBED_NAMES):
        return "patch_embed"
    if scopes & PROJECTOR_SCOPES or key in PROJECTOR_SCOPES:
        return "linear"
    if key in HEAD_NAMES or (key == "decoder" and scopes & {"predictions", "lm_head"}):  # BERT, RoBERTa
        return "head"
    if key in EMBEDDING_NAMES:
        return "embedding"
    if key == "gate" and router_owner:
        return "router"
    if key == "gate" and scopes & {"shared_experts", "shared_expert"}:  # Megatron-Core's gate_weight
        return "router"
    if key in LEAF_ROLES:
        return LEAF_ROLES[key]
    if key == "in_proj":  # nn.MultiheadAttention's in_proj_weight, or an attention's fused in_proj
        return "attn_qkv" if leaf == "in_proj_weight" or scopes & ATTENTION_SCOPES else None
    added = families.index().leaf_roles  # names a registered tinit.families.Family adds
    if key in added:
        return added[key]
    if path[-1:] == ["experts"] and key in ("weight1", "weight2"):  # Megatron's GroupedMLP: fc1, fc2 of all experts
        return "mlp_in" if key == "weight1" else "mlp_out"
    if key == "v1" and "experts" in scopes:  # DBRX's stacked experts: act(x w1^T) * (x v1^T), then w2
        return "mlp_up"
    in_attention = bool(scopes & ATTENTION_SCOPES)
    in_mlp = bool(scopes & MLP_SCOPES)
    if key in SCOPED_ROLES:
        attention_role, mlp_role = SCOPED_ROLES[key]
        if in_attention:
            return attention_role
        return mlp_role if in_mlp else None
    if key == "dense":  # BERT / Megatron legacy; RoBERTa's LM-head transform
        if in_attention:
            return "attn_out"
        if scopes & {"intermediate", "pooler", "transform", "lm_head"}:
            return "mlp_in"
        if "output" in scopes:
            return "mlp_out"
    return None


def infer_tower(name: str) -> str | None:
    """The block container of ``name``: its path up to the first block index, or None outside blocks.

    "model.language_model.layers.3.self_attn.o_proj.weight" -> "model.language_model.layers",
    "model.vision_tower.encoder.layers.0.mlp.fc1.weight" -> "model.vision_tower.encoder.layers",
    T5's "encoder.block.3.layer.1..." -> "encoder.block". ``init_model_`` counts L per tower.
    """
    match = _LAYER.search(name)
    if match is None:
        return None
    return name[: match.start(1) - 1]  # up to the "." before the block index


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


__all__ = [
    "ROLES",
    "infer_layer",
    "infer_role",
    "infer_stack",
    "infer_tower",
]
