"""Model families: what a family's code says about its parameters that their names and shapes do not.

One ``Family`` record per family holds its quirks, each keyed the way the model states it, and
``register`` adds one (as ``tinit.buffers.register`` adds a buffer recipe):

=====================  ==============================  ===============================================
field                  keyed by                        read by
=====================  ==============================  ===============================================
``fused_qkv``          the config's ``model_type``     the fused q/k/v layout (``fused_qkv_of_config``)
``expert_stack``,      ``model_type``                  3-D expert stacks' layout, a fused gate+up's
``gate_up``                                            order (``expert_layout``, ``init_model_``)
``grouped_experts``    (module class, parameter)       2-D expert stacks (``expert_layout``)
``interleaved_gate_up``  parameter name                a fused gate+up read alternately (GPT-OSS)
``gates``              (module class, parameter)       the value a residual gate starts at
``gate_of_up``         parameter name                  an up projection's gate (gated MLP or not)
``offset_gain_norms``  norm class                      norms whose gain is 1 + weight (weight 0)
``leaf_roles``         parameter name                  roles of names ``tinit.roles`` does not know
``buffers``            module type (``claims``)        the family's ``tinit.buffers.BufferRecipe``\\ s
``inits``              (module class, parameter path)  the model's own init of a parameter (in a
                                                       model of the family's ``model_types``)
=====================  ==============================  ===============================================

Rules that hold for every family stay where they apply: the name rules of ``tinit.roles``, a
norm whose ``forward`` reads ``1 + self.weight`` (found from its source, as Gemma's), timm's
``LayerScale.init_values``, transformers' ``is_transposed`` expert flag and torchtitan's
dimension tags (``w1_EFD``).

Fused q/k/v projections: one weight holds the query, key and value projections along its
output dim; with MQA/GQA the parts have different widths (q = h * head_dim, k = v = kv *
head_dim) and some families interleave them per head or per key/value group. ``FusedQKV``
records the layout; ``fused_qkv_of_config`` reads it from a model's config, by family:

======================================  ==========================================
family (``model_type``)                 output dim, as the model's forward splits it
======================================  ==========================================
phi3, dbrx, ergo; falcon with           contiguous ``[q | k | v]``, k = v = kv * hd
``multi_query`` and not
``new_decoder_architecture``;
gpt_bigcode with ``multi_query``
falcon ``new_decoder_architecture``;    per key/value group ``[q * (h / kv), k, v]``
Megatron-Core ``linear_qkv``
(``num_query_groups``)
gpt_neox, gpt_neox_japanese, bloom,     per head ``[q, k, v]``
persimmon; falcon with neither flag;
gpt_bigcode without ``multi_query``
codegen                                 4 groups (``mp_num``) of ``[q, v, k]``
gpt2 (``Conv1D`` c_attn, dim 1), any    equal thirds ``[q | k | v]``
other family with kv == h
======================================  ==========================================

(transformers 5.24: ``FalconAttention._split_heads``, ``Phi3Attention.forward``,
``GPTBigCodeAttention.forward``, ``GPTNeoXAttention.forward``, ``BloomAttention._reshape``,
``DbrxAttention.forward``, ``CodeGenAttention.forward``; 5.25: ``ErgoAttention.forward``;
Megatron-Core ``SelfAttention.get_query_key_value_tensors``.) Any other family whose key/value heads differ
from its query heads is refused: its layout is unknown (register a ``Family`` with its
``fused_qkv``, or pass ``overrides={pattern: {"qkv": ...}}``).

Expert stacks: a mixture-of-experts layer may keep all its experts in one tensor; the fans of a
fan-based scheme are those of ONE expert's matrix. ``expert_layout`` tells the layout
(``tinit.schemes.LAYOUTS``): ``expert_out_in`` (E, out, in) for transformers 5's ``*Experts``
modules (``gate_up_proj`` (E, 2F, d) applied as ``F.linear`` per expert) and torchtitan's
``GroupedExperts`` (``w1_EFD`` (E, F, D), applied as ``x @ w.transpose(-2, -1)``);
``expert_in_out`` (E, in, out) for modules marked ``is_transposed``, GPT-OSS's
(``x @ gate_up_proj[e]``) and Llama-4's (``torch.bmm(x, gate_up_proj)``); the 2-D grouped
forms ``grouped_in_out`` (in, E * out) and
``stacked_in_out`` (E * in, out) for Megatron-Core's ``GroupedMLP`` ``weight1`` / ``weight2``
(viewed as (E, d, -1) and (E, -1, d) and multiplied untransposed), and ``stacked_out_in``
(E * out, in) for DBRX's ``w1`` / ``v1`` (``w2`` is ``stacked_in_out``). A 3-D stack's layout is
decided, in order, by transformers' ``is_transposed`` flag on its module (every
``@use_experts_implementation`` class), torchtitan's dimension tag, its family's ``expert_stack``,
then by how its module's ``forward`` multiplies it (``F.linear(x, W[e])``: (E, out, in); ``x @ W``
or ``torch.bmm(x, W)`` untransposed: (E, in, out)); a stack none of these decides is read as
(E, out, in) with a warning naming it. transformers 5.24's undecorated stacks:
``Llama4TextExperts`` (bmm, (E, in, out)), ``LongcatFlashExperts``, ``Step3p7Experts`` and
JetMoE's ``JetMoeParallelExperts`` (``F.linear``, (E, out, in)).
"""

from __future__ import annotations

import functools
import inspect
import math
import operator
import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import NamedTuple

from tinit import buffers

FUSED_LAYOUTS = ("contiguous", "grouped", "per_head")
_EXPERT_STACKS = ("expert_out_in", "expert_in_out")
_GATE_UP_ORDERS = ("halves", "interleaved")
_EMPTY = MappingProxyType({})


def positive_int(name: str, value) -> int:
    """``value`` as an int >= 1 (numpy integers included); TypeError or ValueError naming ``name``."""
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(f"{name} must be an int >= 1, got {type(value).__name__} {value!r}")
    value = operator.index(value)
    if value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value}")
    return value


@dataclass(frozen=True)
class FusedQKV:
    """The layout of a fused q/k/v projection's output dim.

    The output dim holds ``groups`` repeats of one block; each block holds the
    parts in ``order`` (0 = q, 1 = k, 2 = v), part q ``q`` rows wide, k ``k``
    and v ``v`` (rows of an (out, in) weight; columns of an (in, out) one).
    E.g. Llama-style GQA fused contiguously, h = 8, kv = 2, head_dim 64:
    ``FusedQKV(1, 512, 128, 128)``; Falcon's new decoder architecture with the
    same heads: ``FusedQKV(2, 256, 64, 64)``; GPT-NeoX with 8 heads of 64:
    ``FusedQKV(8, 64, 64, 64)``.

    Attributes:
        groups: repeats of the block, >= 1.
        q, k, v: width of each part within one block, >= 1.
        order: the parts' order within a block, a permutation of (0, 1, 2).

    Raises:
        TypeError, ValueError: a count that is not an int >= 1, an order that
            is not a permutation of (0, 1, 2).
    """

    groups: int
    q: int
    k: int
    v: int
    order: tuple[int, int, int] = (0, 1, 2)

    def __post_init__(self):
        for name in ("groups", "q", "k", "v"):
            object.__setattr__(self, name, positive_int(f"FusedQKV.{name}", getattr(self, name)))
        order = tuple(self.order)
        if sorted(order) != [0, 1, 2] or any(type(i) is not int for i in order):
            raise ValueError(f"FusedQKV.order must be a permutation of (0, 1, 2), got {self.order!r}")
        object.__setattr__(self, "order", order)

    @classmethod
    def from_heads(cls, heads: int, kv_heads: int, head_dim: int, layout: str = "contiguous") -> FusedQKV:
        """The layout of h query heads and kv key/value heads of ``head_dim`` each.

        Args:
            heads: query heads h, >= 1.
            kv_heads: key/value heads (query groups) kv, >= 1, dividing h.
            head_dim: width of one head, >= 1.
            layout: "contiguous" (``[q | k | v]``), "grouped" (per key/value
                group ``[q * (h / kv), k, v]``) or "per_head" (per head
                ``[q, k, v]``, needs kv == h; the same as "grouped" then).

        Returns:
            A ``FusedQKV``.

        Raises:
            ValueError: an unknown layout, kv not dividing h, or "per_head" with kv != h.
        """
        heads = positive_int("heads", heads)
        kv_heads = positive_int("kv_heads", kv_heads)
        head_dim = positive_int("head_dim", head_dim)
        if layout not in FUSED_LAYOUTS:
            raise ValueError(f"fused q/k/v layout must be one of {FUSED_LAYOUTS}, got {layout!r}")
        if heads % kv_heads:
            raise ValueError(f"{kv_heads} key/value heads do not divide {heads} query heads")
        if layout == "contiguous":
            return cls(1, heads * head_dim, kv_heads * head_dim, kv_heads * head_dim)
        if layout == "per_head" and kv_heads != heads:
            raise ValueError(
                f"a per-head [q, k, v] layout needs as many key/value heads as heads, got {kv_heads} != {heads}"
            )
        return cls(kv_heads, heads // kv_heads * head_dim, head_dim, head_dim)

    @property
    def widths(self) -> tuple[int, int, int]:
        """(q, k, v) widths over the whole output dim: the fan_out of each part as a separate matrix."""
        return self.groups * self.q, self.groups * self.k, self.groups * self.v

    @property
    def width(self) -> int:
        """The output dim the layout spans."""
        return sum(self.widths)

    @property
    def equal_thirds(self) -> bool:
        """Whether the layout is three equal contiguous slices q, k, v (``InitSpec`` without segments)."""
        return self.groups == 1 and self.q == self.k == self.v and self.order == (0, 1, 2)

    def segments(self) -> tuple[tuple[int, int], ...]:
        """((part, length), ...) in output-dim order: ``InitSpec.segments``."""
        block = tuple((part, (self.q, self.k, self.v)[part]) for part in self.order)
        return block * self.groups


def as_fused_qkv(value, name: str = "qkv") -> FusedQKV:
    """A ``FusedQKV`` from itself or a (heads, kv_heads, head_dim[, layout]) tuple (an override's "qkv").

    Raises:
        TypeError, ValueError: anything else, naming ``name``.
    """
    if isinstance(value, FusedQKV):
        return value
    if isinstance(value, (tuple, list)) and len(value) in (3, 4):
        try:
            return FusedQKV.from_heads(*value)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{name}: {exc}") from None
    raise TypeError(
        f"{name} must be a tinit.families.FusedQKV or (heads, kv_heads, head_dim[, layout]) with layout in "
        f"{FUSED_LAYOUTS}, got {value!r}"
    )


def _frozen(mapping, what: str) -> Mapping:
    if not isinstance(mapping, Mapping):
        raise TypeError(f"Family.{what} must be a mapping, got {type(mapping).__name__}")
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True, eq=False)
class Family:
    """One model family's quirks, each keyed as the model states it (the module docstring's table).

    Every field but ``name`` is optional: a family lists only what differs from the rules every
    family shares. ``register`` adds one to ``FAMILIES``.

    Attributes:
        name: the key in ``FAMILIES``.
        model_types: its configs' ``model_type`` values (transformers' ``config.model_type``).
        config_test: for configs without a ``model_type`` (Megatron-Core's ``TransformerConfig``),
            a predicate on the config that recognises the family; None otherwise.
        fused_qkv: how its fused q/k/v projection lays out the parts: "contiguous", "grouped" or
            "per_head" (``FusedQKV.from_heads``), or a callable ``(config, heads, kv_heads,
            head_dim) -> FusedQKV | None`` (kv_heads None where the config names none); None:
            unknown (equal thirds are still recognised).
        expert_stack: the layout of its 3-D expert stacks ("expert_out_in", "expert_in_out");
            None: "expert_out_in".
        gate_up: the order of its fused gate+up projection's parts along the output dim,
            "halves" or "interleaved"; None: "halves".
        interleaved_gate_up: leaf-name prefixes of fused gate+up projections read alternately
            whatever the config (torchtitan's GPT-OSS ``mlp1``).
        grouped_experts: {(module class name, parameter name): (layout, attribute of the module
            holding the expert count)} of its 2-D expert stacks (``tinit.schemes.GROUPED_LAYOUTS``).
        gates: {(module class name, parameter name): value(module, model)}: the value its code
            gives a residual gate (a float, or None where it cannot tell).
        gate_of_up: {an up projection's leaf name: its gate's}: an up projection with its gate
            beside it is a gated MLP's (role mlp_up), without one the MLP's input (mlp_in).
        offset_gain_norms: class names of norms whose gain is 1 + weight (written 0), for norms
            whose ``forward`` source does not read ``1 + self.weight``.
        leaf_roles: {leaf name: role} for names ``tinit.roles`` does not know (a known name keeps
            its role: ``register`` refuses a contradiction).
        buffers: its ``tinit.buffers.BufferRecipe`` instances (``register`` puts them first in
            ``tinit.buffers.RECIPES``).
        inits: {(module class name, parameter path under that module): value(module, model, param)}:
            how the family's own code initialises a parameter where tinit's rules do not say
            (a ``tinit.schemes.InitSpec``, a float constant, or None where it cannot tell), e.g.
            HF Mamba-2's ``("Mamba2Mixer", "conv1d.weight")``, kaiming-uniform. The model's
            config must be the family's (``family_of``: its ``model_types`` or ``config_test``;
            every model for a family with neither).
            State-space state parameters (``tinit.schemes.STATE_ROLES``) take it under every
            recipe, other parameters under ``normal`` (``Scheme.spec``'s ``model_spec``).

    Raises:
        TypeError, ValueError: a field of the wrong type or an unknown layout, order or role.
    """

    name: str
    model_types: tuple[str, ...] = ()
    config_test: Callable[[object], bool] | None = None
    fused_qkv: str | Callable | None = None
    expert_stack: str | None = None
    gate_up: str | None = None
    interleaved_gate_up: tuple[str, ...] = ()
    grouped_experts: Mapping[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    gates: Mapping[tuple[str, str], Callable] = field(default_factory=dict)
    gate_of_up: Mapping[str, str] = field(default_factory=dict)
    offset_gain_norms: frozenset[str] = frozenset()
    leaf_roles: Mapping[str, str] = field(default_factory=dict)
    buffers: tuple[buffers.BufferRecipe, ...] = ()
    inits: Mapping[tuple[str, str], Callable] = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"Family.name must be a non-empty str, got {self.name!r}")
        for what in ("model_types", "interleaved_gate_up", "offset_gain_norms"):
            value = getattr(self, what)
            if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                raise TypeError(f"Family {self.name!r}: {what} must be a collection of str, got {value!r}")
        object.__setattr__(self, "model_types", tuple(self.model_types))
        object.__setattr__(self, "interleaved_gate_up", tuple(self.interleaved_gate_up))
        object.__setattr__(self, "offset_gain_norms", frozenset(self.offset_gain_norms))
        for what in ("grouped_experts", "gates", "gate_of_up", "leaf_roles", "inits"):
            object.__setattr__(self, what, _frozen(getattr(self, what), what))
        if self.config_test is not None and not callable(self.config_test):
            raise TypeError(f"Family {self.name!r}: config_test must be callable or None")
        if not (self.fused_qkv is None or callable(self.fused_qkv) or self.fused_qkv in FUSED_LAYOUTS):
            raise ValueError(f"Family {self.name!r}: fused_qkv must be one of {FUSED_LAYOUTS}, a callable or None")
        if self.expert_stack not in (None, *_EXPERT_STACKS):
            raise ValueError(f"Family {self.name!r}: expert_stack must be one of {_EXPERT_STACKS} or None")
        if self.gate_up not in (None, *_GATE_UP_ORDERS):
            raise ValueError(f"Family {self.name!r}: gate_up must be one of {_GATE_UP_ORDERS} or None")
        if any(layout not in _GROUPED for layout, _ in self.grouped_experts.values()):
            raise ValueError(f"Family {self.name!r}: grouped_experts layouts must be in {_GROUPED}")
        for what in ("gates", "inits"):
            if not all(callable(value) for value in getattr(self, what).values()):
                raise TypeError(f"Family {self.name!r}: {what} must map (class, parameter) to a callable")
        object.__setattr__(self, "buffers", tuple(self.buffers))
        if not all(isinstance(recipe, buffers.BufferRecipe) for recipe in self.buffers):
            raise TypeError(f"Family {self.name!r}: buffers must be tinit.buffers.BufferRecipe instances")


_GROUPED = ("grouped_in_out", "stacked_in_out", "stacked_out_in")  # tinit.schemes.GROUPED_LAYOUTS
_HEADS = ("num_attention_heads", "n_head", "n_heads", "num_heads")
_KV_HEADS = ("num_key_value_heads", "num_kv_heads", "n_kv_heads", "num_query_groups", "kv_n_heads")
_HEAD_DIM = ("head_dim", "kv_channels", "head_size")
_WIDTH = ("hidden_size", "n_embd", "d_model", "dim")


def _int_field(config, names) -> tuple[str | None, int | None]:
    for name in names:
        value = config.get(name) if isinstance(config, dict) else getattr(config, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return name, value
    return None, None


def _flag(config, name: str) -> bool:
    return bool(config.get(name) if isinstance(config, dict) else getattr(config, name, False))


def _model_type(config) -> str | None:
    return config.get("model_type") if isinstance(config, dict) else getattr(config, "model_type", None)


def _falcon_qkv(config, heads: int, kv_heads: int | None, head_dim: int) -> FusedQKV:
    if _flag(config, "new_decoder_architecture"):
        return FusedQKV.from_heads(heads, _int_field(config, ("num_kv_heads",))[1] or heads, head_dim, "grouped")
    if _flag(config, "multi_query"):
        return FusedQKV.from_heads(heads, 1, head_dim, "contiguous")
    return FusedQKV.from_heads(heads, heads, head_dim, "per_head")


def _bigcode_qkv(config, heads: int, kv_heads: int | None, head_dim: int) -> FusedQKV:
    if _flag(config, "multi_query"):
        return FusedQKV.from_heads(heads, 1, head_dim, "contiguous")
    return FusedQKV.from_heads(heads, heads, head_dim, "per_head")


def _codegen_qkv(config, heads: int, kv_heads: int | None, head_dim: int) -> FusedQKV:
    local = heads * head_dim // 4  # CodeGenAttention: mp_num = 4 groups, each [q, v, k]
    if local * 4 != heads * head_dim:
        raise ValueError(
            "the fused q/k/v layout of a codegen config needs a hidden size divisible by 4 (mp_num) "
            f"(found heads={heads}, kv heads={kv_heads}, head_dim={head_dim})"
        )
    return FusedQKV(4, local, local, local, order=(0, 2, 1))


def _is_megatron_core(config) -> bool:
    """A Megatron-Core ``TransformerConfig``: no ``model_type``, key/value heads as ``num_query_groups``."""
    return _model_type(config) is None and _int_field(config, _KV_HEADS)[0] == "num_query_groups"


def _config_value(model, key: str):
    """``key`` of the model's config, or of a config it holds (a multimodal model's ``vision_config``)."""
    config = getattr(model, "config", None)
    seen = 0
    while config is not None and seen < 4:
        value = getattr(config, key, None)
        if value is not None:
            return value
        config = next(
            (
                getattr(config, sub)
                for sub in ("vision_config", "text_config", "backbone_config")
                if hasattr(config, sub)
            ),
            None,
        )
        seen += 1
    return None


def _recipes(*kinds: type) -> tuple[buffers.BufferRecipe, ...]:
    """The instances of ``tinit.buffers.RECIPES`` of these classes (the built-in recipes)."""
    return tuple(recipe for recipe in buffers.RECIPES if type(recipe) in kinds)


def _layer_scale_value(module, model):
    return _config_value(model, "layerscale_value")


# The values of residual gates are the model's own code's: Meta's and HF's mllama
# (``MllamaVisionEncoderLayer.__init__``: pi/4, a tanh gate that starts at tanh(pi/4) = 0.66;
# ``MllamaCrossAttentionDecoderLayer``: 0, closed), HF Evolla (``EvollaSequenceAlignerCrossAttention``:
# 0), HF Dinov2 (``Dinov2LayerScale``: ``config.layerscale_value``), OLMo-core's nGPT block
# (``NormalizedTransformerBlock``: ``*_alpha_init_scaling``).
_BUILT_IN = (
    Family(
        "transformers",  # what transformers' models share: the gated MLP's names, the buffers' recipes
        gate_of_up={"up_proj": "gate_proj"},
        buffers=_recipes(
            buffers.HFRotaryEmbedding,
            buffers.HFScaledWordEmbedding,
            buffers.HFInputIds,
            buffers.HFSinusoidalPositions,
            buffers.HFCausalMask,
            buffers.HFZeroBuffers,
            buffers.HFConstructorBuffers,  # the last resort: recomputes what no named recipe claims
        ),
    ),
    Family("torchtitan", gate_of_up={"w3": "w1"}, buffers=_recipes(buffers.TorchtitanBuffers)),
    Family("torch", buffers=_recipes(buffers.BatchNormStats)),
    Family("t5", gate_of_up={"wi_1": "wi_0"}),
    Family("falcon", model_types=("falcon",), fused_qkv=_falcon_qkv),
    Family("gpt_bigcode", model_types=("gpt_bigcode",), fused_qkv=_bigcode_qkv),
    Family("gpt_neox", model_types=("gpt_neox", "gpt_neox_japanese"), fused_qkv="per_head"),
    Family("bloom", model_types=("bloom",), fused_qkv="per_head"),
    Family("persimmon", model_types=("persimmon",), fused_qkv="per_head"),
    Family("codegen", model_types=("codegen",), fused_qkv=_codegen_qkv),
    Family("phi3", model_types=("phi3", "phi4_multimodal"), fused_qkv="contiguous"),
    Family("exaone4_5_vision", model_types=("exaone4_5_vision",), fused_qkv="contiguous"),
    Family(
        "dbrx",  # DbrxExperts: x @ w1[e].T, x @ v1[e].T, then @ w2[e]
        model_types=("dbrx",),
        fused_qkv="contiguous",
        grouped_experts={
            ("DbrxExpertGLU", "w1"): ("stacked_out_in", "moe_num_experts"),
            ("DbrxExpertGLU", "v1"): ("stacked_out_in", "moe_num_experts"),
            ("DbrxExpertGLU", "w2"): ("stacked_in_out", "moe_num_experts"),
        },
    ),
    Family(
        "megatron_core",  # linear_qkv per query group; the legacy grouped GEMM's GroupedMLP
        config_test=_is_megatron_core,
        fused_qkv="grouped",
        grouped_experts={
            ("GroupedMLP", "weight1"): ("grouped_in_out", "num_local_experts"),
            ("GroupedMLP", "weight2"): ("stacked_in_out", "num_local_experts"),
        },
    ),
    # Llama4TextExperts: torch.bmm(x, gate_up_proj) with gate_up_proj (E, d, 2F), then
    # gate, up = chunk(2, dim=-1); torch.bmm(h, down_proj) with down_proj (E, F, d).
    Family("llama4", model_types=("llama4", "llama4_text"), expert_stack="expert_in_out"),
    Family(
        "gpt_oss",  # HF's gate_up_proj and torchtitan's mlp1: gate = x[..., ::2], up = x[..., 1::2]
        model_types=("gpt_oss",),
        expert_stack="expert_in_out",  # x @ gate_up_proj[e]
        gate_up="interleaved",
        interleaved_gate_up=("mlp1",),
    ),
    Family(
        "mllama",
        model_types=("mllama",),
        gates={
            ("MllamaVisionEncoderLayer", "gate_attn"): lambda module, model: math.pi / 4,
            ("MllamaVisionEncoderLayer", "gate_ffn"): lambda module, model: math.pi / 4,
            ("MllamaCrossAttentionDecoderLayer", "cross_attn_attn_gate"): lambda module, model: 0.0,
            ("MllamaCrossAttentionDecoderLayer", "cross_attn_mlp_gate"): lambda module, model: 0.0,
        },
    ),
    Family(
        "evolla",
        model_types=("evolla",),
        gates={
            ("EvollaSequenceAlignerCrossAttention", "gate_attention"): lambda module, model: 0.0,
            ("EvollaSequenceAlignerCrossAttention", "gate_ffw"): lambda module, model: 0.0,
        },
    ),
    Family(
        "dinov2",
        model_types=("dinov2", "dinov2_with_registers"),
        gates={
            ("Dinov2LayerScale", "lambda1"): _layer_scale_value,
            ("Dinov2WithRegistersLayerScale", "lambda1"): _layer_scale_value,
        },
    ),
    Family(
        "olmo_core",
        gates={
            ("NormalizedTransformerBlock", "attn_alpha"): lambda module, model: module.attn_alpha_init_scaling,
            ("NormalizedTransformerBlock", "mlp_alpha"): lambda module, model: module.mlp_alpha_init_scaling,
        },
    ),
)


# State-space and gated-delta-net hybrids: what each model's own code gives the parameters tinit's
# rules do not decide (the roles' defaults, tinit.schemes' log_arange_spec and dt_bias_spec, hold for
# the rest). transformers 5.24, each family's PreTrainedModel._init_weights (and MambaMixer's
# init_mamba_weights, Mamba2Mixer's init_mamba2_weights).
def _schemes():
    """``tinit.schemes``, imported at first use (it imports this module's ``FusedQKV``)."""
    from tinit import schemes

    return schemes


def _kaiming(rescaled: bool, only_rescaled: bool = False) -> Callable:
    """``init.kaiming_uniform_(w, a=sqrt(5))``, divided by sqrt(num_hidden_layers) when ``rescaled``
    and the config's ``rescale_prenorm_residual`` (None without it when ``only_rescaled``: the
    parameter is the generic N(0, initializer_range) then, as Nemotron-H's ``out_proj``)."""

    def value(module, model, param):
        scale = 1.0
        if rescaled and _config_value(model, "rescale_prenorm_residual"):
            layers = _config_value(model, "num_hidden_layers")
            if not isinstance(layers, int) or layers < 1:
                return None
            scale = layers**-0.5
        elif only_rescaled:
            return None
        return _schemes().kaiming_uniform_spec(tuple(param.shape), scale=scale)

    return value


def _mamba_dt_proj(module, model, param):
    """MambaMixer.init_mamba_weights: dt_proj.weight = dt_init_std (``time_step_init_scheme``
    "constant") or U(+-dt_init_std) ("random"), dt_init_std = time_step_rank^-1/2 * time_step_scale."""
    config = getattr(module, "config", None)
    rank, scale = getattr(config, "time_step_rank", None), getattr(config, "time_step_scale", None)
    if not isinstance(rank, int) or rank < 1 or not isinstance(scale, (int, float)) or not scale > 0:
        return None
    std = rank**-0.5 * scale
    kind = getattr(config, "time_step_init_scheme", None)
    if kind == "constant":
        return std
    return _schemes().uniform_spec(-std, std) if kind == "random" else None


def _one(module, model, param):
    return 1.0


def _zero(module, model, param):
    return 0.0


def _qwen3_next_a_log(module, model, param):
    """Qwen3NextPreTrainedModel._init_weights: A_log = log(U(0.01, 16))."""
    return _schemes().uniform_spec(0.01, 16.0, map=("log",))


def _log_uniform(low: float, high: float) -> Callable:
    """``A_log = log(U(low, high))`` per value head, as each gated-delta-net family's
    ``_init_weights`` draws it (``torch.empty(num_v_heads).uniform_(low, high).log_()``)."""

    def value(module, model, param):
        return _schemes().uniform_spec(low, high, map=("log",))

    return value


def _gated_delta_nets(low_by_class: Mapping[str, float]) -> dict:
    """The ``inits`` of gated-delta-net mixers: ``dt_bias`` 1, ``A_log`` log U(low, 16)."""
    inits = {}
    for cls, low in low_by_class.items():
        inits[(cls, "dt_bias")] = _one
        inits[(cls, "A_log")] = _log_uniform(low, 16.0)
    return inits


def _refuse(why: str) -> Callable:
    """A family init that refuses the parameter (a value tinit's plan cannot write), saying why."""

    def value(module, model, param):
        raise ValueError(f"{why}; initialise it with the model's own code (recipe 'hf') or an override")

    return value


_SINUSOIDS = "deterministic sinusoidal positions ({}.create_weight): not a distribution tinit draws"


def _xlstm_gate(kind: str) -> Callable:
    """xLSTMPreTrainedModel._init_weights, ``weight_mode`` "single": every nn.Linear whose name holds
    "gate" gets weight 0; the input gate's bias -10, the forget gate's ``torch.linspace(3, 6, n)``
    (float32, as torch computes it: each value its own constant part), the others' bias 0. The
    "fused" mode's biases are left to the recipe (HF's own fused-bias code does not broadcast)."""

    def value(module, model, param):
        if kind == "weight":
            return 0.0
        if _config_value(model, "weight_mode") != "single":
            return None
        if kind == "igate":
            return -10.0
        if kind == "fgate":
            import torch

            values = torch.linspace(3.0, 6.0, param.shape[-1], dtype=torch.float32).tolist()
            core = _schemes()
            return core.InitSpec(parts=tuple(core.InitSpec(constant=v) for v in values), split_dim=0)
        return 0.0

    return value


def _xielu(which: str) -> Callable:
    """``XIELUActivation.__init__`` (transformers ``activations.py``; its ``_init_weights`` leaves it):
    alpha_p = log(expm1(alpha_p_init)), alpha_n = log(expm1(alpha_n_init - beta)), computed in the
    parameter's dtype as the module does, with Apertus's defaults alpha_p_init = alpha_n_init = 0.8
    and the module's own beta (``_beta_scalar``, 0.5)."""

    def value(module, model, param):
        import torch

        beta = getattr(module, "_beta_scalar", None)
        if not isinstance(beta, float):
            return None
        start = 0.8 if which == "alpha_p" else 0.8 - beta
        return float(torch.log(torch.expm1(torch.tensor(start, dtype=param.dtype))))

    return value


class _HFConstantBuffers(buffers.BufferRecipe):
    """Buffers of transformers modules that hold one constant each, the module's own value.

    ``constants``: {module class name: {buffer leaf: value(module) -> float}}; each claimed
    buffer is filled with the value rounded once to its dtype (``torch.full``), as the module's
    ``nn.Buffer(torch.tensor(value, dtype=...))`` and ``init.constant_`` do.
    """

    def __init__(self, name: str, constants: Mapping[str, Mapping[str, Callable]]):
        self.name = name
        self.constants = constants

    def claims(self, module):
        kind = type(module)
        own = self.constants.get(kind.__name__) if kind.__module__.startswith("transformers.") else None
        if not own:
            return ()
        found = tuple(leaf for leaf in own if module._buffers.get(leaf) is not None)
        return found if all(own[leaf](module) is not None for leaf in found) else ()

    def values(self, module):
        import torch

        own = self.constants[type(module).__name__]
        found = {leaf: module._buffers[leaf] for leaf in own if module._buffers.get(leaf) is not None}
        return {leaf: torch.full(b.shape, own[leaf](module), dtype=b.dtype) for leaf, b in found.items()}


def _config_field(key: str, power: float) -> Callable:
    """``module.config.<key> ** power`` (None when the module has no such positive number)."""

    def value(module):
        found = getattr(getattr(module, "config", None), key, None)
        ok = isinstance(found, (int, float)) and not isinstance(found, bool) and found > 0
        return float(found) ** power if ok else None

    return value


class _HFPerLayerRotary(buffers.BufferRecipe):
    """Rotary embeddings with one init function per layer type and a per-layer-type config
    (``Gemma4TextRotaryEmbedding``, ``Gemma4UnifiedTextRotaryEmbedding``): ``{t}_inv_freq`` and
    ``{t}_original_inv_freq`` = ``module.rope_init_fns[t](config.per_layer_config[t], layer_type=t)[0]``,
    as ``Gemma4PreTrainedModel._init_weights`` computes them (the global config's ``head_dim`` is
    ambiguous there). Put first in ``tinit.buffers.RECIPES``: it claims only such modules."""

    name = "hf_per_layer_rotary"

    @staticmethod
    def _plan(module):
        functions = getattr(module, "rope_init_fns", None)
        per_layer = getattr(getattr(module, "config", None), "per_layer_config", None)
        if (
            not isinstance(functions, dict)
            or per_layer is None
            or not type(module).__module__.startswith("transformers.")
        ):
            return None
        return functions, per_layer

    def claims(self, module):
        found = self._plan(module)
        if found is None:
            return ()
        names = []
        for layer_type, function in found[0].items():
            pair = (f"{layer_type}_inv_freq", f"{layer_type}_original_inv_freq")
            if not callable(function) or any(module._buffers.get(name) is None for name in pair):
                return ()
            names.extend(pair)
        return tuple(names)

    def values(self, module):
        functions, per_layer = self._plan(module)
        out = {}
        for layer_type, function in functions.items():
            inv_freq = function(per_layer[layer_type], layer_type=layer_type)[0]
            out[f"{layer_type}_inv_freq"] = inv_freq
            out[f"{layer_type}_original_inv_freq"] = inv_freq.clone()
        return out


_PER_LAYER_ROTARY = buffers.register(_HFPerLayerRotary(), first=True)
# Appended to tinit.buffers.RECIPES (first=False): they claim only buffers no other recipe recomputes.
# Gemma-4's per-layer ``layer_scalar``: Gemma4TextDecoderLayer.__init__'s nn.Buffer(torch.ones(1)),
# set again by Gemma4PreTrainedModel._init_weights (init.ones_; Gemma4Unified's the same).
_LAYER_SCALAR = buffers.register(
    _HFConstantBuffers(
        "hf_gemma4_layer_scalar",
        {
            cls: {"layer_scalar": lambda module: 1.0}
            for cls in ("Gemma4TextDecoderLayer", "Gemma4UnifiedTextDecoderLayer")
        },
    ),
    first=False,
)
# Gemma3nPreTrainedModel._init_weights: router_input_scale = hidden_size^-1 (Gemma3nTextAltUp),
# per_layer_projection_scale = hidden_size^-0.5 and per_layer_input_scale = 1 / sqrt(2) (Gemma3nTextModel).
_GEMMA3N_SCALES = buffers.register(
    _HFConstantBuffers(
        "hf_gemma3n_scales",
        {
            "Gemma3nTextAltUp": {"router_input_scale": _config_field("hidden_size", -1.0)},
            "Gemma3nTextModel": {
                "per_layer_projection_scale": _config_field("hidden_size", -0.5),
                "per_layer_input_scale": lambda module: 1 / math.sqrt(2.0),
            },
        },
    ),
    first=False,
)


_SSM_BUILT_IN = (
    Family(
        "mamba",
        model_types=("mamba",),
        inits={
            ("MambaMixer", "conv1d.weight"): _kaiming(False),
            ("MambaMixer", "out_proj.weight"): _kaiming(True),
            ("MambaMixer", "dt_proj.weight"): _mamba_dt_proj,
        },
    ),
    Family(
        "mamba2",
        model_types=("mamba2",),
        inits={
            ("Mamba2Mixer", "conv1d.weight"): _kaiming(False),
            ("Mamba2Mixer", "out_proj.weight"): _kaiming(True),
        },
    ),
    Family("jamba", model_types=("jamba",), inits={("JambaMambaMixer", "dt_proj.bias"): _zero}),  # nn.Linear's
    Family("bamba", model_types=("bamba",), inits={("BambaMixer", "dt_bias"): _one}),
    Family(
        "falcon_h1",
        model_types=("falcon_h1",),
        inits={("FalconH1Mixer", "dt_bias"): _one},
        buffers=_recipes(buffers.HFFalconH1MupVector),
    ),
    Family(
        "granitemoehybrid",
        model_types=("granitemoehybrid",),
        inits={("GraniteMoeHybridMambaLayer", "dt_bias"): _one},
    ),
    Family(
        "nemotron_h",
        model_types=("nemotron_h",),
        inits={("NemotronHMamba2Mixer", "out_proj.weight"): _kaiming(True, only_rescaled=True)},
    ),
    Family(
        "qwen3_next",
        model_types=("qwen3_next",),
        inits={
            ("Qwen3NextGatedDeltaNet", "dt_bias"): _one,
            ("Qwen3NextGatedDeltaNet", "A_log"): _qwen3_next_a_log,
        },
    ),
)
# Other families whose own _init_weights writes a value tinit's role rules do not (transformers 5.24).
_OWN_INITS_BUILT_IN = (
    Family(
        "qwen3_5",  # Qwen3_5PreTrainedModel._init_weights and its MoE / Qwen4-Exp / Lara-Mini copies
        model_types=("qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text", "qwen4_exp", "qwen4_exp_text"),
        inits=_gated_delta_nets(
            {"Qwen3_5GatedDeltaNet": 0.01, "Qwen3_5MoeGatedDeltaNet": 0.01, "Qwen4ExpTextGatedDeltaNet": 0.01}
        ),
    ),
    Family("lara_mini", model_types=("lara_mini",), inits=_gated_delta_nets({"LaraMiniGatedDeltaNet": 1.0})),
    # GraniteSWAPreTrainedModel._init_weights: init.zeros_(module.sinks) (GPT-OSS draws its sinks)
    Family("granite_swa", model_types=("granite_swa",), inits={("GraniteSWAAttention", "sinks"): _zero}),
    Family("granitemoe_swa", model_types=("granitemoe_swa",), inits={("GraniteMoeSWAAttention", "sinks"): _zero}),
    # AfmoePreTrainedModel._init_weights: init.zeros_(module.gate.weight) of AfmoeTokenChoiceRouter
    Family("afmoe", model_types=("afmoe",), inits={("AfmoeTokenChoiceRouter", "gate.weight"): _zero}),
    # ErgoPreTrainedModel._init_weights (transformers 5.25): init.zeros_(weight) of ErgoResidualGate. Not a
    # ReZero gate (role residual_gate): its forward mixes sigmoid(w) * branch + sqrt(1 + sigmoid(w)) *
    # exp(-softplus(w) / 2) * residual, so w = 0 is the variance-preserving 0.5 / 0.87 mix, the model's value
    # under every recipe.
    # ErgoAttention.forward: qkv_proj(x).view(..., -1, head_dim).split((h, kv, kv), dim=-2), contiguous parts.
    Family("ergo", model_types=("ergo",), fused_qkv="contiguous", inits={("ErgoResidualGate", "weight"): _zero}),
    # NemotronPreTrainedModel._init_weights: init.ones_(weight) of NemotronLayerNorm1P, although its
    # forward scales by weight + 1 (so the initial gain is 2, as HF writes it)
    Family("nemotron", model_types=("nemotron",), inits={("NemotronLayerNorm1P", "weight"): _one}),
    Family(
        "marian",
        model_types=("marian",),
        inits={
            ("MarianSinusoidalPositionalEmbedding", "weight"): _refuse(
                _SINUSOIDS.format("MarianSinusoidalPositionalEmbedding")
            )
        },
    ),
    Family(
        "pegasus",
        model_types=("pegasus",),
        inits={
            ("PegasusSinusoidalPositionalEmbedding", "weight"): _refuse(
                _SINUSOIDS.format("PegasusSinusoidalPositionalEmbedding")
            )
        },
    ),
    Family(
        "roformer",
        model_types=("roformer",),
        inits={
            ("RoFormerSinusoidalPositionalEmbedding", "weight"): _refuse(
                _SINUSOIDS.format("RoFormerSinusoidalPositionalEmbedding")
            )
        },
    ),
    Family(
        "gemma4",
        model_types=(
            "gemma4",
            "gemma4_text",
            "gemma4_assistant",
            "gemma4_unified",
            "gemma4_unified_text",
            "gemma4_unified_assistant",
        ),
        buffers=(_PER_LAYER_ROTARY, _LAYER_SCALAR),
    ),
    # Gemma3nPreTrainedModel._init_weights: init.zeros_(module.correct_output_scale) of Gemma3nTextAltUp
    Family(
        "gemma3n",
        model_types=("gemma3n", "gemma3n_text"),
        inits={("Gemma3nTextAltUp", "correct_output_scale"): _zero},
        buffers=(_GEMMA3N_SCALES,),
    ),
    Family(
        "apertus",
        model_types=("apertus", "apertus1p5", "apertus1p5_text"),
        inits={("XIELUActivation", "alpha_p"): _xielu("alpha_p"), ("XIELUActivation", "alpha_n"): _xielu("alpha_n")},
    ),
    Family(
        "xlstm",
        model_types=("xlstm",),
        inits={
            ("xLSTMLayer", "ogate_preact.weight"): _xlstm_gate("weight"),
            ("xLSTMLayer", "ogate_preact.bias"): _xlstm_gate("other"),
            ("xLSTMLayer", "igate_preact.weight"): _xlstm_gate("weight"),
            ("xLSTMLayer", "igate_preact.bias"): _xlstm_gate("igate"),
            ("xLSTMLayer", "fgate_preact.weight"): _xlstm_gate("weight"),
            ("xLSTMLayer", "fgate_preact.bias"): _xlstm_gate("fgate"),
            ("xLSTMLayer", "ifgate_preact.weight"): _xlstm_gate("weight"),
            ("xLSTMFeedForward", "proj_up_gate.weight"): _xlstm_gate("weight"),
            ("xLSTMFeedForward", "proj_up_gate_z.weight"): _xlstm_gate("weight"),
        },
    ),
)
FAMILIES: dict[str, Family] = {family.name: family for family in (*_BUILT_IN, *_SSM_BUILT_IN, *_OWN_INITS_BUILT_IN)}


class Index(NamedTuple):
    """The registered families' facts merged, each by its key (``index``); ``inits`` only those of
    the families that name no configs (``inits_of`` adds the model's family's)."""

    by_model_type: Mapping[str, Family]
    config_tests: tuple[Family, ...]
    grouped_experts: Mapping[tuple[str, str], tuple[str, str]]
    interleaved_gate_up: tuple[str, ...]
    gates: Mapping[tuple[str, str], Callable]
    gate_of_up: Mapping[str, str]
    up_key: re.Pattern | None  # the up projections' names in a parameter name (``gate_of_up``'s keys)
    offset_gain_norms: frozenset[str]
    leaf_roles: Mapping[str, str]
    inits: Mapping[tuple[str, str], Callable]


_cache: dict = {"families": None, "index": None}


def index() -> Index:
    """The facts of every family in ``FAMILIES``, merged per key; rebuilt when ``FAMILIES`` changed."""
    current = tuple(FAMILIES.values())
    if _cache["families"] != current:
        merged: dict[str, dict] = {k: {} for k in ("model_types", "grouped", "gates", "up", "roles")}
        for family in current:
            merged["model_types"].update(dict.fromkeys(family.model_types, family))
            merged["grouped"].update(family.grouped_experts)
            merged["gates"].update(family.gates)
            merged["up"].update(family.gate_of_up)
            merged["roles"].update(family.leaf_roles)
        ups = "|".join(re.escape(up) for up in merged["up"])
        _cache["index"] = Index(
            MappingProxyType(merged["model_types"]),
            tuple(f for f in current if f.config_test is not None),
            MappingProxyType(merged["grouped"]),
            tuple(prefix for f in current for prefix in f.interleaved_gate_up),
            MappingProxyType(merged["gates"]),
            MappingProxyType(merged["up"]),
            re.compile(rf"(?:^|\.)({ups})(?=\.|$|_[A-Z]{{2,4}}$)") if ups else None,
            frozenset(name for f in current for name in f.offset_gain_norms),
            MappingProxyType(merged["roles"]),
            MappingProxyType(
                {k: v for f in current if not f.model_types and f.config_test is None for k, v in f.inits.items()}
            ),
        )
        _cache["families"] = current
    return _cache["index"]


def inits_of(config) -> Mapping[tuple[str, str], Callable]:
    """The ``Family.inits`` that apply to a model of ``config``: those of the families that name no
    configs, and of the config's family (``family_of``; its ``text_config``'s when it has none)."""
    shared = index().inits
    family = family_of(config)
    if family is None and config is not None and not isinstance(config, dict):
        family = family_of(getattr(config, "text_config", None))
    own = family.inits if family is not None else _EMPTY
    return {**shared, **own} if own else shared


def family_of(config) -> Family | None:
    """The registered family a model config belongs to: by its ``model_type``, else by a family's
    ``config_test``; None for a config no family claims (or None)."""
    if config is None:
        return None
    found = index()
    model_type = _model_type(config)
    if isinstance(model_type, str) and model_type in found.by_model_type:
        return found.by_model_type[model_type]
    return next((f for f in found.config_tests if f.config_test(config)), None)


def _conflicts(family: Family, others) -> list[str]:
    """The keys ``family`` claims that another registered family claims differently."""
    clashes = []
    for other in others:
        clashes += [f"model_type {t!r} ({other.name})" for t in family.model_types if t in other.model_types]
        for what in ("grouped_experts", "gates", "gate_of_up", "leaf_roles"):
            mine, theirs = getattr(family, what), getattr(other, what)
            clashes += [f"{what} {key!r} ({other.name})" for key in mine if key in theirs]
    return clashes


def register(family: Family, *, replace: bool = False) -> Family:
    """Add a model family to ``FAMILIES`` (and its buffer recipes to ``tinit.buffers.RECIPES``).

    Args:
        family: a ``Family``.
        replace: replace a registered family of the same name; False refuses the name.

    Returns:
        ``family`` (so a module can register its family where it defines it).

    Raises:
        TypeError: ``family`` is not a ``Family``.
        ValueError: its name is registered (and ``replace`` is False); a key it claims (a
            ``model_type``, a gate, a grouped expert stack, an up projection, a leaf role) is
            another family's; a leaf role that is no role of ``tinit.schemes.ROLES``, or that
            contradicts the role ``tinit.roles`` gives that name.
    """
    if not isinstance(family, Family):
        raise TypeError(f"register: expected a tinit.families.Family, got {type(family).__name__}")
    if family.name in FAMILIES and not replace:
        raise ValueError(f"register: a family {family.name!r} is registered (pass replace=True to replace it)")
    clashes = _conflicts(family, [f for name, f in FAMILIES.items() if name != family.name])
    if clashes:
        raise ValueError(f"register: family {family.name!r} claims what other families do: {', '.join(clashes)}")
    _check_leaf_roles(family)
    FAMILIES[family.name] = family
    for recipe in reversed(family.buffers):
        if not any(recipe is known for known in buffers.RECIPES):
            buffers.register(recipe)
    return family


def _check_leaf_roles(family: Family) -> None:
    if not family.leaf_roles:
        return
    from tinit import roles  # roles reads this module's index: imported when first needed

    for leaf, role in family.leaf_roles.items():
        if role not in roles.ROLES:
            raise ValueError(f"register: family {family.name!r}: leaf {leaf!r} has no role {role!r}")
        known = roles.LEAF_ROLES.get(leaf)
        if known is not None and known != role:
            raise ValueError(f"register: family {family.name!r}: tinit.roles gives {leaf!r} the role {known!r}")


def fused_qkv_of_config(config, width: int | None = None) -> FusedQKV | None:
    """The fused q/k/v layout a model config describes (see the module docstring's table).

    Args:
        config: a ``transformers`` config, a dict of its fields, a Megatron-Core
            ``TransformerConfig`` (``num_query_groups``, ``kv_channels``) or a torchtitan
            ``ModelArgs`` (``n_heads``, ``n_kv_heads``, ``dim``).
        width: the fused projection's output dim, when known: in a family of unknown layout
            with kv != h, a width of 3 * h * head_dim proves the parts equal (a tensor of h
            heads each, e.g. a vision tower's qkv under a GQA text config).

    Returns:
        A ``FusedQKV``, or None where the parts are equal thirds (kv == h, or a config that
        names no heads): ``tinit.schemes`` splits those by default.

    Raises:
        ValueError: a family whose layout is unknown with kv != h, or a config missing the
            fields its family needs; the message names the fields.
    """
    model_type = _model_type(config)
    _, heads = _int_field(config, _HEADS)
    if heads is None:
        return None
    kv_name, kv = _int_field(config, _KV_HEADS)
    _, head_dim = _int_field(config, _HEAD_DIM)
    if head_dim is None:
        _, hidden = _int_field(config, _WIDTH)
        head_dim = hidden // heads if hidden is not None and hidden % heads == 0 else None
    if head_dim is None:
        raise ValueError(
            f"the fused q/k/v layout of a {model_type or 'model'} config needs head_dim or a hidden size "
            f"divisible by the {heads} heads (found heads={heads}, kv heads={kv}, head_dim={head_dim})"
        )
    family = family_of(config)
    layout = None if family is None else family.fused_qkv
    if callable(layout):
        return layout(config, heads, kv, head_dim)
    if layout is not None:
        return FusedQKV.from_heads(heads, heads if layout == "per_head" else kv or heads, head_dim, layout)
    if kv is None or kv == heads or width == 3 * heads * head_dim:
        return None
    raise ValueError(
        f"a fused q/k/v projection of a {model_type or 'model'} config with {kv} key/value heads "
        f"({kv_name}) and {heads} query heads: tinit does not know how this family lays out q, k and v; "
        'register a tinit.families.Family with its fused_qkv, or pass overrides={pattern: {"qkv": '
        f"(heads, kv_heads, head_dim, layout)}}}} with layout in {FUSED_LAYOUTS}"
    )


_TORCHTITAN_EXPERT = re.compile(r"_E[A-Z]{2}$")  # torchtitan's w1_EFD / w2_EDF: (experts, out, in)
# After a stack handed to a matmul as its right operand: a transpose makes it (E, out, in).
_TRANSPOSED = re.compile(r"\s*\.\s*(?:transpose\(|permute\(|mT\b|T\b|t\(\))")


def _enclosing_call(source: str, pos: int) -> tuple[str | None, int | None]:
    """(the name of the call whose argument list holds position ``pos`` of ``source``, the index
    of the argument there), or (None, None) outside a call (or inside brackets)."""
    depth, commas = 0, 0
    for i in range(pos - 1, -1, -1):
        char = source[i]
        if char in ")]}":
            depth += 1
        elif char in "([{":
            if depth == 0:
                name = re.search(r"([\w.]+)\s*$", source[:i]) if char == "(" else None
                return (name.group(1) if name else None), commas
            depth -= 1
        elif char == "," and depth == 0:
            commas += 1
    return None, None


@functools.cache
def _forward_layout(cls: type, leaf: str) -> str | None:
    """The layout of 3-D parameter ``leaf`` as ``cls.forward`` multiplies it, read from its source:
    "expert_out_in" when it is ``F.linear``'s weight (``F.linear(x, self.w[e])``) or a matmul's
    right operand transposed (``x @ self.w.transpose(-2, -1)``), "expert_in_out" when a matmul's
    right operand as it is (Llama-4's ``torch.bmm(x, self.gate_up_proj)``, ``x @ self.w[e]``);
    None where the source is unavailable, does not use it so, or says both."""
    try:
        source = inspect.getsource(cls.forward)
    except (OSError, TypeError):
        return None
    found = set()
    for use in re.finditer(rf"\bself\.{re.escape(leaf)}\b(\s*\[[^\]]*\])?", source):
        before = source[: use.start()].rstrip()
        name, argument = _enclosing_call(source, use.start())
        if name is not None and name.split(".")[-1] == "linear" and argument == 1:
            found.add("expert_out_in")
        elif before.endswith("@") or (
            name is not None and name.split(".")[-1] in ("bmm", "matmul", "mm") and argument == 1
        ):
            found.add("expert_out_in" if _TRANSPOSED.match(source, use.end()) else "expert_in_out")
    return found.pop() if len(found) == 1 else None


def expert_layout(module, leaf: str, ndim: int, model_type: str | None = None) -> tuple[str, int | None] | None:
    """The expert layout of parameter ``leaf`` of ``module`` inside an ``experts`` scope.

    Args:
        module: the module holding the parameter.
        leaf: the parameter's name in ``module``.
        ndim: the parameter's number of dims.
        model_type: the model config's ``model_type`` (its family's ``expert_stack``).

    Returns:
        (layout, expert count or None), or None for a parameter that is not an expert stack (a
        2-D parameter of an ordinary module, a bias). A 3-D stack's layout: the module's
        ``is_transposed`` flag, a torchtitan dimension tag, the family's ``expert_stack``, how the
        module's ``forward`` multiplies it (``_forward_layout``), else "expert_out_in" with a
        UserWarning naming it.
    """
    if ndim == 3:
        transposed = getattr(module, "is_transposed", None)
        if isinstance(transposed, bool):  # transformers' use_experts_implementation records it
            return ("expert_in_out" if transposed else "expert_out_in"), None
        if _TORCHTITAN_EXPERT.search(leaf):
            return "expert_out_in", None
        family = index().by_model_type.get(model_type) if isinstance(model_type, str) else None
        if family is not None and family.expert_stack:
            return family.expert_stack, None
        read = _forward_layout(type(module), leaf) if module is not None else None
        if read is None:
            warnings.warn(
                f"expert stack {type(module).__name__}.{leaf}: neither an is_transposed flag, a family's "
                "expert_stack nor its forward says whether it is (experts, out, in) or (experts, in, out); "
                "tinit reads it as (experts, out, in) (F.linear per expert); if the forward multiplies x @ W, "
                "pass overrides={pattern: {'layout': 'expert_in_out'}} (or register a tinit.families.Family "
                "with expert_stack)",
                UserWarning,
                stacklevel=2,
            )
        return read or "expert_out_in", None
    if ndim != 2:
        return None
    found = index().grouped_experts.get((type(module).__name__, leaf))
    if found is None:
        return None
    layout, count = found
    experts = getattr(module, count, None)
    return (layout, experts) if isinstance(experts, int) and experts > 0 else None


__all__ = [
    "FAMILIES",
    "Family",
    "FusedQKV",
    "family_of",
    "register",
]
