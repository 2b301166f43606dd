"""Megatron-Core models initialised by canonical identity: the same values under any TP, PP and EP layout.

A Megatron-Core model built with ``perform_initialization=False`` holds plain tensors: each rank
keeps its block of every tensor-parallel weight, its pipeline stage's layers (numbered locally,
the global index in ``TransformerLayer.layer_number``) and its expert-parallel rank's experts
(numbered locally). ``init_model_`` fills each parameter from its canonical identity (the name it
has in the TP = PP = EP = 1 build, ``tinit.identity``) and its global shape, so every rank writes
exactly its slice of the single-process model's values, with no communication and no full
master weight on any rank (what ``use_cpu_initialization`` builds).

The partition comes from the module types and the config, because megatron-core 0.16.1 sets
``tensor_model_parallel`` / ``partition_dim`` / ``partition_stride`` only inside its
``_initialize_affine_weight_cpu`` / ``_initialize_affine_weight_gpu``, which
``perform_initialization=False`` skips (``megatron.core.tensor_parallel.layers``):

=====================================================  ===========================================
module type                                            what a rank holds
=====================================================  ===========================================
``ColumnParallelLinear``, ``TEColumnParallelLinear``,  weight and bias split on dim 0 (output);
``TELayerNormColumnParallelLinear``,                   ``linear_fc1`` of a gated MLP
``TEColumnParallelGroupedLinear`` (``weight<i>``)      (``gated_linear_unit``) with stride 2: the
                                                       rank's [gate block; up block] of the global
                                                       [gate; up] weight
``RowParallelLinear``, ``TERowParallelLinear``,        weight split on dim 1 (input); the bias
``TERowParallelGroupedLinear``                         whole
``VocabParallelEmbedding``                             weight split on dim 0 (vocabulary)
``GroupedMLP`` (legacy grouped GEMM)                   ``weight1`` (in, E*out) on dim 1, ``weight2``
                                                       (E*in, out) on dim 0: the expert-parallel
                                                       rank's experts, then the expert-TP block
``torch.nn.Embedding`` (position, token type),         whole (replicated)
norms (``*Norm``), routers (``*Router``), a shared
expert's ``gate_weight``
=====================================================  ===========================================

``linear_qkv`` is interleaved by query group in row order (``SelfAttention.get_query_key_value_tensors``),
so a rank's rows are one contiguous block of the global weight. Any other module type holding a
parameter is refused, naming it.

Canonical names (the renames ``tinit.identity.RENAMES`` holds for Megatron's types): a
``TransformerBlock``'s ``layers.<i>`` is ``layers.<layer_number - 1>``; a ``SequentialMLP``'s
``local_experts.<i>`` is ``local_experts.<ep_rank * num_local_experts + i>``; a ``TEGroupedMLP``'s
``linear_fc1.weight<i>`` is ``local_experts.<global id>.linear_fc1.weight`` (the SequentialMLP
name of the same expert, as Megatron's own ``TEGroupedMLP.sharded_state_dict`` maps it); the
last stage's ``output_layer.weight`` of a model that ties it to the embedding
(``share_embeddings_and_output_weights`` without ``pre_process``) is
``embedding.word_embeddings.weight``, so both stages write the same values.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from typing import NamedTuple

import torch

import tinit
from tinit import identity, schemes
from tinit._model_init import ParamInit
from tinit._plan import Item, Plan, check_seed
from tinit.families import FusedQKV

__all__ = ["init_model_"]

_WHERE = "tinit.megatron.init_model_"
_COLUMN = frozenset({"ColumnParallelLinear", "TEColumnParallelLinear", "TELayerNormColumnParallelLinear"})
_ROW = frozenset({"RowParallelLinear", "TERowParallelLinear"})
_GROUPED_COLUMN, _GROUPED_ROW = "TEColumnParallelGroupedLinear", "TERowParallelGroupedLinear"
_NUMBERED = re.compile(r"(weight|bias)(\d+)$")  # TE grouped linears: one weight<i>/bias<i> per local expert
_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")
# The role of a linear by its attribute name (``tinit.schemes``' roles, for scheme=).
_ROLES = {
    "linear_qkv": "attn_qkv",
    "linear_q_proj": "attn_q",
    "linear_q_up_proj": "attn_q",
    "linear_q_down_proj": "attn_q_down",
    "linear_kv_down_proj": "attn_kv_down",
    "linear_kv_up_proj": "attn_kv",
    "linear_proj": "attn_out",
    "linear_fc1": "mlp_in",
    "linear_fc2": "mlp_out",
    "output_layer": "head",
    "word_embeddings": "embedding",
    "position_embeddings": "embedding",
    "tokentype_embeddings": "embedding",
}


# --- canonical names: the renames tinit.identity.RENAMES holds for Megatron-Core's types ----------------------------


def _rank_size(group, expert: bool) -> tuple[int, int]:
    """(rank, size) in ``group`` (a ProcessGroup or anything with ``rank()``/``size()``); without one,
    Megatron's global (expert) tensor-parallel group from ``megatron.core.parallel_state``."""
    if group is not None and callable(getattr(group, "rank", None)):
        return group.rank(), group.size()
    from megatron.core import parallel_state as ps

    if expert:
        return ps.get_expert_tensor_parallel_rank(), ps.get_expert_tensor_parallel_world_size()
    return ps.get_tensor_model_parallel_rank(), ps.get_tensor_model_parallel_world_size()


def _first_expert(experts: torch.nn.Module) -> int:
    """Global id of an experts module's local expert 0: ep_rank * num_local_experts."""
    group = getattr(experts, "ep_group", None)
    if group is not None and callable(getattr(group, "rank", None)):
        rank = group.rank()
    else:
        from megatron.core import parallel_state as ps

        rank = ps.get_expert_model_parallel_rank()
    return rank * experts.num_local_experts


def layer_paths(block: torch.nn.Module) -> Mapping[str, str]:
    """A ``TransformerBlock``'s renames: ``layers.<i>`` -> ``layers.<layer_number - 1>``.

    ``TransformerLayer.layer_number`` is 1-based and global (megatron-core 0.16.1
    ``TransformerLayer.__init__``: ``layer_number + get_transformer_layer_offset(config)``), so a
    pipeline stage's local layer i gets the name it has in the single-stage model.

    Args:
        block: a ``TransformerBlock`` (its ``layers`` a ModuleList of ``TransformerLayer``).

    Returns:
        {relative path: canonical relative path} for the layers whose index differs.
    """
    found = {}
    for index, layer in enumerate(getattr(block, "layers", ()) or ()):
        number = getattr(layer, "layer_number", None)
        if type(number) is int and number - 1 != index:
            found[f"layers.{index}"] = f"layers.{number - 1}"
    return found


def expert_paths(experts: torch.nn.Module) -> Mapping[str, str]:
    """A ``SequentialMLP``'s renames: ``local_experts.<i>`` -> ``local_experts.<ep_rank * n + i>``.

    The global expert id is Megatron's own (``SequentialMLP.sharded_state_dict``:
    ``local_expert_indices_offset = ep_group.rank() * num_local_experts``).

    Args:
        experts: a ``SequentialMLP`` (``num_local_experts``, ``local_experts``, ``ep_group``).

    Returns:
        {relative path: canonical relative path}; empty on expert-parallel rank 0.
    """
    first = _first_expert(experts)
    if not first:
        return {}
    return {f"local_experts.{i}": f"local_experts.{first + i}" for i in range(len(experts.local_experts))}


def grouped_expert_paths(experts: torch.nn.Module) -> Mapping[str, str]:
    """A ``TEGroupedMLP``'s renames: ``linear_fc<k>.weight<i>`` (and ``bias<i>``) ->
    ``local_experts.<ep_rank * n + i>.linear_fc<k>.weight``, the ``SequentialMLP`` name of the same
    expert, as Megatron's ``TEGroupedMLP.sharded_state_dict`` maps them ("interchangeable with
    SequentialMLP's"): both implementations of an expert get the same values.

    Args:
        experts: a ``TEGroupedMLP`` (``num_local_experts``, ``ep_group``).

    Returns:
        {relative path: canonical relative path}.
    """
    first = _first_expert(experts)
    return {
        f"{linear}.{leaf}{i}": f"local_experts.{first + i}.{linear}.{leaf}"
        for linear in ("linear_fc1", "linear_fc2")
        for leaf in ("weight", "bias")
        for i in range(experts.num_local_experts)
    }


def tied_output_paths(model: torch.nn.Module) -> Mapping[str, str]:
    """A ``LanguageModule``'s renames: the last pipeline stage's copy of a tied output layer is
    ``embedding.word_embeddings.weight``.

    With ``share_embeddings_and_output_weights`` the stage without ``pre_process`` holds the output
    layer's own weight, which Megatron zeroes and all-reduces from the first stage's embedding
    (``LanguageModule.setup_embeddings_and_output_layer``): one tensor, one identity.

    Args:
        model: a ``LanguageModule`` (``GPTModel``).

    Returns:
        {"output_layer.weight": "embedding.word_embeddings.weight"} on such a stage, else {}.
    """
    tied = getattr(model, "share_embeddings_and_output_weights", False)
    if tied and not getattr(model, "pre_process", True) and getattr(model, "post_process", False):
        return {"output_layer.weight": "embedding.word_embeddings.weight"}
    return {}


# --- the partition: which block of which global tensor each parameter is ------------------------------------------


class _Param(NamedTuple):
    """One parameter to write: its canonical name, its tensor and where it lies in the global tensor."""

    name: str
    param: torch.Tensor
    role: str | None
    std: str | float  # "init", "output", "embedding" (the config's init methods) or a constant
    global_shape: tuple[int, ...]
    pieces: tuple  # ((local view, offsets in the global tensor), ...); ((param, None),) when whole
    layout: str = "out_in"
    experts: int | None = None


def _split(local: torch.Tensor, dim: int, rank: int, size: int, stride: int = 1) -> tuple[tuple, tuple]:
    """(global shape, pieces) of a block split on ``dim`` over ``size`` ranks with ``stride``:
    Megatron's ``_initialize_affine_weight_cpu`` gives rank r the chunks r, r + size, ... of the
    master weight cut into ``size * stride`` equal chunks along ``dim``."""
    shape = list(local.shape)
    shape[dim] *= size
    if size == 1 and stride == 1:
        return tuple(shape), ((local, None),)
    chunk = local.shape[dim] // stride
    pieces = []
    for s in range(stride):
        offsets = [0] * local.dim()
        offsets[dim] = (s * size + rank) * chunk
        pieces.append((local.narrow(dim, s * chunk, chunk), tuple(offsets)))
    return tuple(shape), tuple(pieces)


def _linear(module, classes: set, leaf: str, param, attr: str, config, expert: bool) -> tuple | None:
    """(role, std kind, global shape, pieces) of a parameter of a tensor-parallel linear, or None."""
    numbered = _NUMBERED.match(leaf)
    kind = numbered.group(1) if numbered else leaf
    if kind == "layer_norm_weight":  # TELayerNormColumnParallelLinear's fused norm: whole on every rank
        return "norm", _norm_value(kind, config), tuple(param.shape), ((param, None),)
    if kind == "layer_norm_bias":
        return "bias", 0.0, tuple(param.shape), ((param, None),)
    grouped = bool(classes & {_GROUPED_COLUMN, _GROUPED_ROW})
    if kind not in ("weight", "bias") or grouped != (numbered is not None):
        return None
    column = bool(classes & _COLUMN) or _GROUPED_COLUMN in classes
    if not column and kind == "bias":  # RowParallelLinear: the bias is whole on every rank
        return "bias", 0.0, tuple(param.shape), ((param, None),)
    # ``MLP.__init__``: a gated linear_fc1 is built with stride 2 (1 under use_kitchen).
    stride = 2 if attr == "linear_fc1" and config.gated_linear_unit and not getattr(config, "use_kitchen", False) else 1
    if column and param.shape[0] % stride:
        return None
    rank, size = _rank_size(getattr(module, "tp_group", None), expert or grouped)
    shape, pieces = _split(param, 0 if column else 1, rank, size, stride if column else 1)
    if kind == "bias":
        return "bias", 0.0, shape, pieces
    role = _ROLES.get(attr, "linear")  # a linear no attribute name places: as init_model_'s nn.Linear
    if role == "mlp_in" and stride == 2:
        role = "mlp_gate_up"
    # Column-parallel layers take config.init_method, the row-parallel output projections
    # (linear_proj, linear_fc2) config.output_layer_init_method (SelfAttention, MLP, TEGroupedMLP).
    return role, ("init" if column else "output"), shape, pieces


def _norm_value(leaf: str, config) -> float:
    """A norm weight's constant: 1, or 0 with ``layernorm_zero_centered_gamma`` (the gain is
    1 + weight: Megatron's ``FusedLayerNorm.reset_parameters``, TE's ``zero_centered_gamma``)."""
    return 0.0 if getattr(config, "layernorm_zero_centered_gamma", False) else 1.0


def _grouped_mlp(module, leaf: str, param) -> tuple | None:
    """(role, std kind, global shape, pieces) of a legacy ``GroupedMLP``'s ``weight1`` / ``weight2``:
    the expert-parallel rank's stack of ``num_local_experts`` matrices cut in expert-TP blocks
    (``GroupedMLP.__init__``: ``_initialize_affine_weight_cpu`` on partition_dim 1, then 0)."""
    if leaf not in ("weight1", "weight2"):
        return None
    dim = 1 if leaf == "weight1" else 0
    tp_rank, tp_size = _rank_size(getattr(module, "tp_group", None), True)
    ep_rank, ep_size = _ep_rank_size(module)
    shape = list(param.shape)
    shape[dim] *= tp_size * ep_size
    offsets = [0, 0]
    offsets[dim] = (ep_rank * tp_size + tp_rank) * param.shape[dim]
    pieces = ((param, tuple(offsets)),) if tp_size * ep_size > 1 else ((param, None),)
    return ("mlp_in", "init", tuple(shape), pieces) if dim else ("mlp_out", "output", tuple(shape), pieces)


def _ep_rank_size(module) -> tuple[int, int]:
    group = getattr(module, "ep_group", None)
    if group is not None and callable(getattr(group, "rank", None)):
        return group.rank(), group.size()
    from megatron.core import parallel_state as ps

    return ps.get_expert_model_parallel_rank(), ps.get_expert_model_parallel_world_size()


def _whole(role: str | None, std, param) -> tuple:
    return role, std, tuple(param.shape), ((param, None),)


def _place(module, leaf: str, param, raw: str, canonical: str, config) -> _Param:
    """Where ``param`` (``module``'s ``leaf``) lies in its global tensor and how Megatron initialises it.

    Raises:
        ValueError: the module type and config give no partition (named).
    """
    classes = {kind.__name__ for kind in type(module).__mro__}
    attr = raw.rsplit(".", 2)[-2] if "." in raw else ""
    layout, experts, found = "out_in", None, None
    if classes & _COLUMN or classes & _ROW or classes & {_GROUPED_COLUMN, _GROUPED_ROW}:
        found = _linear(module, classes, leaf, param, attr, config, ".experts." in f".{raw}")
    elif "VocabParallelEmbedding" in classes:
        if leaf == "weight":
            rank, size = _rank_size(getattr(module, "tp_group", None), False)
            found = ("embedding", "embedding", *_split(param, 0, rank, size))
    elif "GroupedMLP" in classes:
        found = _grouped_mlp(module, leaf, param)
        layout = "grouped_in_out" if leaf == "weight1" else "stacked_in_out"
        experts = _ep_rank_size(module)[1] * module.num_local_experts
    elif isinstance(module, torch.nn.Embedding):  # LanguageModelEmbedding's position / token-type embeddings
        found = _whole("embedding", "embedding", param) if leaf == "weight" else None
    elif type(module).__name__.endswith("Norm"):
        if leaf in ("weight", "bias"):
            found = _whole("norm", _norm_value(leaf, config), param) if leaf == "weight" else _whole("bias", 0.0, param)
    elif any(name.endswith("Router") for name in classes):
        # TopKRouter.reset_parameters: config.init_method on the weight and on the bias alike
        found = _whole("router", "init", param) if leaf in ("weight", "bias") else None
    elif "SharedExpertMLP" in classes and leaf == "gate_weight":  # SharedExpertMLP.__init__: config.init_method
        found = _whole("router", "init", param)
    if found is None:
        raise ValueError(
            f"{_WHERE}: parameter {raw}: no partition is known for {leaf!r} of a {type(module).__name__} "
            "(megatron-core sets none with perform_initialization=False); the types tinit.megatron knows "
            "are listed in its docstring"
        )
    role, std, shape, pieces = found
    if canonical.endswith("embedding.word_embeddings.weight"):  # a tied output layer: the embedding's init
        role, std = "embedding", "embedding"
    return _Param(canonical, param, role, std, shape, pieces, layout, experts)


# --- the stds: Megatron's own config, or a tinit recipe --------------------------------------------------------------


def _normal_std(config, field: str) -> float:
    """The std of ``config.<field>`` when it is Megatron's ``init_method_normal`` /
    ``scaled_init_method_normal``: ``functools.partial(torch.nn.init.normal_, mean=0.0, std=s)``
    (``megatron.core.utils``).

    Raises:
        ValueError: any other init method (tinit cannot know what it draws).
    """
    method = getattr(config, field, None)
    if (
        isinstance(method, functools.partial)
        and method.func is torch.nn.init.normal_
        and not method.args
        and set(method.keywords) <= {"mean", "std"}
        and method.keywords.get("mean", 0.0) == 0.0
        and isinstance(method.keywords.get("std"), (int, float))
    ):
        return float(method.keywords["std"])
    raise ValueError(
        f"{_WHERE}: config.{field} is {method!r}, not megatron.core.utils' init_method_normal or "
        "scaled_init_method_normal, so tinit does not know what it draws; pass scheme= (a tinit recipe)"
    )


def _megatron_stds(config) -> dict[str, float]:
    """The three stds a TransformerConfig's init methods draw (``TransformerConfig.__post_init__``,
    megatron-core 0.16.1): ``init_method`` N(0, init_method_std), ``output_layer_init_method``
    N(0, init_method_std / sqrt(2 * num_layers)) (multiplier 1 for hybrid models; num_layers is
    the whole model's, not a stage's), ``embedding_init_method`` N(0, embedding_init_method_std),
    which defaults to init_method_std."""
    return {
        "init": _normal_std(config, "init_method"),
        "output": _normal_std(config, "output_layer_init_method"),
        "embedding": _normal_std(config, "embedding_init_method"),
    }


def _qkv_layout(config) -> FusedQKV:
    """``linear_qkv``'s rows: per query group [q (heads / groups heads), k, v], kv_channels each
    (``SelfAttention.get_query_key_value_tensors``)."""
    heads = config.num_attention_heads
    groups = getattr(config, "num_query_groups", None) or heads
    return FusedQKV.from_heads(heads, groups, config.kv_channels, "grouped")


class _Specs:
    """One ``InitSpec`` per parameter: Megatron's own init (``scheme=None``) or a tinit recipe."""

    def __init__(self, config, scheme: str | None, options: dict):
        self.config, self.options, self.cache = config, options, {}
        self.scheme = None if scheme is None else schemes.get(scheme)
        self.stds = _megatron_stds(config) if scheme is None else None
        self.zero_centered = bool(getattr(config, "layernorm_zero_centered_gamma", False))

    def of(self, entry: _Param, layer: int | None) -> schemes.InitSpec:
        if self.scheme is None:
            if isinstance(entry.std, float):
                return schemes.InitSpec(constant=entry.std)
            return schemes.InitSpec(std=self.stds[entry.std], trunc=math.inf)  # torch.nn.init.normal_
        key = (entry.role, layer, entry.global_shape, entry.layout, entry.experts)
        spec = self.cache.get(key)
        if spec is None:
            try:
                spec = self.scheme.spec(
                    role=entry.role,
                    layer_idx=layer,
                    n_layers=self.config.num_layers,
                    shape=entry.global_shape,
                    d_model=self.config.hidden_size,
                    layout=entry.layout,
                    experts=entry.experts,
                    qkv=_qkv_layout(self.config) if entry.role == "attn_qkv" else None,
                    **self.options,
                )
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"{_WHERE}: parameter {entry.name}: {exc}") from exc
            if entry.role == "norm" and self.zero_centered and spec.constant is not None:
                spec = schemes.InitSpec(constant=spec.constant - 1.0)  # the gain is 1 + weight
            self.cache[key] = spec
        return spec


# --- the entry point ----------------------------------------------------------------------------------------------


def _chunks(model) -> list[torch.nn.Module]:
    if isinstance(model, torch.nn.Module):
        return [model]
    if not isinstance(model, (list, tuple)) or not model:
        raise TypeError(
            f"{_WHERE}: model must be a torch.nn.Module or a non-empty list of model chunks, "
            f"got {type(model).__name__}{' (empty)' if isinstance(model, (list, tuple)) else ''}"
        )
    for index, chunk in enumerate(model):
        if not isinstance(chunk, torch.nn.Module):
            raise TypeError(
                f"{_WHERE}: model[{index}] must be a torch.nn.Module (a model chunk), got {type(chunk).__name__}"
            )
    return list(model)


def _params(chunks: list, config) -> list[_Param]:
    """Every parameter of the chunks once, placed (``_place``); raises before anything is written."""
    found, seen = [], set()
    for chunk in chunks:
        names = identity.canonical_names(chunk)
        for module_name, module in chunk.named_modules(remove_duplicate=False):
            for leaf, param in module._parameters.items():
                if param is None or id(param) in seen:
                    continue
                seen.add(id(param))
                raw = f"{module_name}.{leaf}" if module_name else leaf
                if param.is_meta:
                    raise ValueError(f"{_WHERE}: parameter {raw} is on the meta device; allocate the model first")
                found.append(_place(module, leaf, param, raw, names[raw], config))
    return found


def init_model_(
    model: torch.nn.Module | list[torch.nn.Module],
    config=None,
    *,
    seed: int = 0,
    scheme: str | None = None,
    backend: str = "auto",
    **options,
) -> list[ParamInit]:
    """Initialise a Megatron-Core model on this rank: its shards of the single-process model's values.

    Call it on every rank after building the model with ``perform_initialization=False`` (and
    ``use_cpu_initialization`` or not: the tensors are written where they are). Each parameter
    gets the values the TP = PP = EP = 1 build gets at the same global indices: its stream is
    ``tinit.stream_for(canonical name)`` (local layer and expert indices mapped to global ones,
    a tied last-stage output layer named as the embedding; see the module docstring) and its
    block of the global tensor comes from its module type and the config (column-parallel on dim
    0, a gated ``linear_fc1`` with stride 2, row-parallel on dim 1, ``VocabParallelEmbedding`` on
    dim 0, experts by their expert-parallel rank). No communication; no master weight.

    With ``scheme=None`` the values follow Megatron's own init (megatron-core 0.16.1,
    ``TransformerConfig.__post_init__`` and ``megatron.core.utils``), read from the config's
    init methods: column-parallel weights (``linear_qkv``, ``linear_fc1``, ``output_layer``), routers
    (weight and bias, ``TopKRouter.reset_parameters``) and a shared expert's gate from
    ``init_method``, N(0, init_method_std^2); the row-parallel output projections (``linear_proj``,
    ``linear_fc2``) from ``output_layer_init_method``, N(0, init_method_std^2 / (2 * num_layers));
    embeddings (word, position, token type) from ``embedding_init_method``, N(0,
    embedding_init_method_std^2); all untruncated (``torch.nn.init.normal_``); linear biases 0
    (``ColumnParallelLinear``/``RowParallelLinear``: "Always initialize bias to zero"); norm
    weights 1, or 0 with ``layernorm_zero_centered_gamma``, norm biases 0. ``scheme="name"``
    takes a tinit recipe instead (``tinit.schemes.SCHEMES``), each parameter specified by its
    role, global shape, block index (``layer_number - 1``), L = ``num_layers``, d =
    ``hidden_size``, ``linear_qkv`` split per query group and a gated ``linear_fc1`` as [gate; up].

    Args:
        model: a ``GPTModel`` (or any ``MegatronModule`` built of the types above), or the list of
            a pipeline rank's model chunks (virtual pipeline).
        config: its ``TransformerConfig``; None: ``model.config``.
        seed: Philox key in [0, 2**64), the same on every rank.
        scheme: None (Megatron's own init) or a name in ``tinit.schemes.SCHEMES``.
        backend: "auto" or a name of ``tinit.dispatch.BACKENDS``.
        **options: the recipe's options (``std=``, ``trunc=``, ...); only with ``scheme``.

    Returns:
        One ``ParamInit`` per parameter written on this rank (canonical name, role, block
        index, local element count, spec), in ``named_parameters`` order.

    Raises:
        TypeError: ``model`` not a module or list of modules, a ``config`` without a
            TransformerConfig's fields, ``options`` without ``scheme``, a bad seed type.
        ValueError: a parameter whose module type and config give no partition, or one on the
            meta device (named); with ``scheme=None``, an init method of the config that is not
            Megatron's normal; a seed out of range; a scheme's refusal (named).
        tinit.schemes.UnknownNameError: an unknown ``scheme`` (a KeyError and a ValueError).
        All raised before anything is written.
    """
    chunks = _chunks(model)
    config = getattr(chunks[0], "config", None) if config is None else config
    if not all(hasattr(config, f) for f in ("num_layers", "hidden_size", "gated_linear_unit", "num_attention_heads")):
        raise TypeError(f"{_WHERE}: config must be a Megatron-Core TransformerConfig, got {type(config).__name__}")
    seed = check_seed(seed)
    if scheme is not None and not isinstance(scheme, str):
        raise TypeError(f"{_WHERE}: scheme must be a tinit scheme name or None, got {type(scheme).__name__}")
    if options and scheme is None:
        raise TypeError(f"{_WHERE}: options {sorted(options)} need scheme= (Megatron's own init takes none)")
    specs = _Specs(config, scheme, options)
    items, summary = [], []
    for entry in _params(chunks, config):
        found = _LAYER.search(entry.name)
        layer = None if found is None else int(found.group(1))
        spec = specs.of(entry, layer)
        stream = tinit.stream_for(entry.name)
        for view, offsets in entry.pieces:
            shape = None if offsets is None else entry.global_shape
            items.append(Item(view, spec, stream, 0, entry.name, shape, offsets))
        summary.append(ParamInit(entry.name, entry.role, layer, entry.param.numel(), spec))
    Plan.build(items, seed=seed, backend=backend, where=_WHERE).run()
    return summary
