"""Initialise every parameter of a model through tinit: roles, depth, ties, meta models."""

from __future__ import annotations

import functools
import gc
import hashlib
import inspect
import math
import re
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

import torch

from tinit import architecture, buffers, dispatch, schemes
from tinit.fill import _resolve, _stream_position
from tinit.grouped import FillItem, _located, write_grouped_
from tinit.params import STREAM_VERSION, SUPPORTED_DTYPES
from tinit.roles import LAYER_SCALE, _split, infer_layer, infer_role, infer_stack, infer_tower
from tinit.schemes.mup import _package_lr_multiplier

_OVERRIDE_KEYS = frozenset(
    {"role", "layer", "stack", "layout", "fan_in", "fan_out", "options", "qkv", "experts", "value"}
)
_WIDTH_ATTRS = ("hidden_size", "n_embd", "d_model", "dim")
_SUPPORTED = frozenset(SUPPORTED_DTYPES)


def stream_for(name: str) -> int:
    """Stream id of a parameter: the first 8 bytes of SHA-256 of its name (uint64, little-endian).

    Deriving the stream from the fully qualified name makes a parameter's values
    independent of initialisation order, of which other parameters exist and of
    whether it is initialised alone.

    Raises:
        TypeError: ``name`` is not a str.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str (a parameter's qualified name), got {type(name).__name__}")
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")


class ParamInit(NamedTuple):
    """How one parameter was initialised (an entry of ``init_model_``'s summary; a named tuple,
    cheap to build for models with thousands of tensors).

    Attributes:
        name: fully qualified name (the first of its tied names).
        role: its role (``tinit.roles.ROLES``), None when unclassified.
        layer: 0-based block index, None outside the blocks.
        numel: elements written.
        spec: the ``tinit.schemes.InitSpec`` written.
        stack: "encoder"/"decoder" in an encoder-decoder model, else None.
        tied: the other names of the same tensor (not written again).
        stream_version: the version of the values (``tinit.STREAM_VERSION``,
            docs/stream.md): the same seed gives the same tensor only under
            the same version.
        tower: the block container whose L the parameter's spec used (e.g.
            "model.language_model.layers"), None when no block counts for it.
    """

    name: str
    role: str | None
    layer: int | None
    numel: int
    spec: schemes.InitSpec
    stack: str | None = None
    tied: tuple[str, ...] = ()
    stream_version: int = STREAM_VERSION
    tower: str | None = None

    @property
    def std(self) -> float | None:
        """Std of the parent normal (of the uniform); None for constants and fused parts."""
        return None if self.spec.constant is not None or self.spec.parts is not None else self.spec.std

    @property
    def trunc(self) -> float | None:
        """Bounds in units of std; None for constants and fused parts."""
        return None if self.std is None else self.spec.trunc

    @property
    def constant(self) -> float | None:
        """The value written, for constants."""
        return self.spec.constant

    @property
    def bounds(self) -> tuple[float, float] | None:
        """Absolute bounds (tensor units); None for constants and fused parts."""
        return self.spec.bounds


def tied_groups(model: torch.nn.Module) -> list[list[str]]:
    """Names that share one Parameter, e.g. [["transformer.wte.weight", "lm_head.weight"]].

    Returns:
        One list per shared Parameter with more than one name, in
        ``named_parameters`` order (the first name is the one tinit writes).
    """
    groups = defaultdict(list)
    for name, param in model.named_parameters(remove_duplicate=False):
        groups[id(param)].append(name)
    return [names for names in groups.values() if len(names) > 1]


def materialise_(
    model: torch.nn.Module, device: str | torch.device = "cpu", *, recompute_buffers: bool = True
) -> torch.nn.Module:
    """``to_empty(device=...)``, restore every tie the model had before, recompute the buffers.

    ``to_empty`` replaces each module's parameters one module at a time, so a
    Parameter shared by two modules (GPT-2's ``lm_head``/``wte``) comes back
    as two tensors. The model's own ``tie_weights()`` is called when it has
    one; any tie still broken is restored by pointing the later names at the
    first one's Parameter. ``to_empty`` also leaves every buffer
    uninitialised: each is recomputed on ``device`` by its module type's
    recipe (``tinit.buffers``: transformers' rotary ``inv_freq``, Gemma's
    ``embed_scale``, BERT-style ``position_ids``/``token_type_ids``, torch's
    BatchNorm statistics), and a buffer already off the meta device keeps
    its values.

    Args:
        model: a module (typically on the meta device).
        device: where to allocate storage.
        recompute_buffers: False leaves the buffers uninitialised (for a
            checkpoint that fills them next); parameters always are.

    Returns:
        ``model`` on ``device``: parameters uninitialised, buffers as a model
        built there eagerly has them.

    Raises:
        tinit.buffers.UninitialisedBufferError: (a RuntimeError) a buffer on
            the meta device that no recipe recomputes, raised before anything
            is allocated; or a recipe that failed, raised after materialising.
        RuntimeError: a tie could not be restored.
    """
    groups = tied_groups(model)
    buffer_plan = buffers.plan(model) if recompute_buffers else None
    model.to_empty(device=device)
    if callable(getattr(model, "tie_weights", None)):
        model.tie_weights()
    for first, *others in groups:
        shared = model.get_parameter(first)
        for name in others:
            if model.get_parameter(name) is not shared:
                owner, _, leaf = name.rpartition(".")
                setattr(model.get_submodule(owner), leaf, shared)
    lost = [g for g in groups if len({id(model.get_parameter(n)) for n in g}) != 1]
    if lost:
        raise RuntimeError(f"tied parameters could not be restored after to_empty: {lost}")
    if buffer_plan is not None:
        buffers.recompute_(buffer_plan, device)
    return model


def _target_device(device) -> torch.device:
    """``device`` as a torch.device a model can be materialised on; TypeError, ValueError otherwise."""
    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"init_model_: device must be a str or torch.device, got {type(device).__name__}")
    try:
        device = torch.device(device)
    except RuntimeError as exc:
        raise ValueError(f"init_model_: device {device!r} is not a device torch knows ({exc})") from None
    if device.type == "meta":
        raise ValueError("init_model_: device='meta' allocates nothing to initialise; pass the target device")
    if device.type == "cuda" and (
        not torch.cuda.is_available() or (device.index is not None and device.index >= torch.cuda.device_count())
    ):
        raise ValueError(f"init_model_: device {str(device)!r}: no such CUDA device here")
    return device


@torch.no_grad()
def _zero_padding_rows(model: torch.nn.Module, rows: list[tuple[str, int]]) -> None:
    """Zero row ``index`` of each embedding weight ``name``, as ``nn.Embedding.reset_parameters``
    and Hugging Face's ``_init_weights`` do (the padding token's vector). Of a DTensor, each rank
    zeroes the part of the row its shard holds."""
    for name, index in rows:
        local, layout = _resolve(model.get_parameter(name), None, None)
        if local.numel() == 0 or local.is_meta:
            continue
        if layout is None:
            local[index].zero_()
        else:
            first, length, _ = layout.narrow(0, index, 1)
            if length:
                local.narrow(0, first, length).zero_()


def _compile_overrides(overrides) -> list[tuple[re.Pattern, dict]]:
    compiled = []
    for pattern, value in (overrides or {}).items():
        entry = {"role": value} if isinstance(value, str) else dict(value)
        unknown = set(entry) - _OVERRIDE_KEYS
        if unknown:
            raise ValueError(f"override {pattern!r}: unknown keys {sorted(unknown)}; allowed {sorted(_OVERRIDE_KEYS)}")
        if "role" in entry and entry["role"] not in schemes.ROLES:
            raise schemes.UnknownNameError(
                f"override {pattern!r}: unknown role {entry['role']!r}; known: {list(schemes.ROLES)}"
            )
        if "value" in entry:
            value = entry["value"]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"override {pattern!r}: value must be a finite number, got {value!r}")
            entry["value"] = float(value)
        compiled.append((re.compile(pattern), entry))
    return compiled


@dataclass(slots=True)
class _Param:
    name: str
    param: torch.nn.Parameter
    tied: tuple[str, ...]
    role: str | None
    layer: int | None
    stack: str | None
    layout: str
    override: dict
    offset_gain: bool = False  # a norm whose effective gain is 1 + weight (_offset_gain)
    padding_idx: int | None = None  # an nn.Embedding's padding row, zeroed after the write
    tower: str | None = None  # the block container counted for L (_depths)
    gate: tuple[float | None, str] | None = None  # a residual gate: (the model's value, its kind) (_gate)


def _layout(module: torch.nn.Module) -> str:
    return "in_out" if type(module).__name__ == "Conv1D" else "out_in"


_NORM_TYPES = tuple(
    t
    for t in (
        torch.nn.LayerNorm,
        torch.nn.GroupNorm,
        torch.nn.modules.batchnorm._NormBase,
        getattr(torch.nn, "RMSNorm", None),
    )
    if t is not None
)


_MATRIX_TYPES = (torch.nn.Linear, torch.nn.modules.conv._ConvNd)


def _role_from_module(module: torch.nn.Module, leaf: str) -> str | None:
    """The role of a parameter whose name says nothing, from its module's type.

    The weight of a normalisation layer (LayerNorm, RMSNorm, GroupNorm,
    BatchNorm/InstanceNorm, or a class whose name ends in "Norm") is a norm
    gain; the weight and bias of a class whose name ends in "Router" (HF's
    ``MixtralTopKRouter``, ``GptOssTopKRouter``, ...) are the router's; the
    weight of ``nn.Embedding`` is an embedding; the weight of ``nn.Linear``,
    ``nn.Conv1d/2d/3d`` (and transposed) or HF ``Conv1D`` is "linear", and
    its bias (as a norm's) a bias.
    Anything else (a raw ``nn.Parameter`` of a custom module) stays None.
    """
    kind = type(module).__name__.lower()
    is_norm = isinstance(module, _NORM_TYPES) or kind.endswith("norm")
    if leaf in ("weight", "bias") and kind.endswith("router"):
        return "router"
    is_matrix = isinstance(module, _MATRIX_TYPES) or type(module).__name__ == "Conv1D"
    if leaf == "bias" and (is_norm or is_matrix):
        return "bias"
    if leaf != "weight":
        return None
    if is_norm:
        return "norm"
    if isinstance(module, torch.nn.Embedding):
        return "embedding"
    return "linear" if is_matrix else None


def _config_value(model: torch.nn.Module, key: str):
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


# The value a model's own code gives a residual gate, by (module class, parameter): Meta's and HF's
# mllama (``MllamaVisionEncoderLayer.__init__``: pi/4, a tanh gate that starts at tanh(pi/4) =
# 0.66; ``MllamaCrossAttentionDecoderLayer``: 0, closed), HF Evolla
# (``EvollaSequenceAlignerCrossAttention``: 0), HF Dinov2 (``Dinov2LayerScale``:
# ``config.layerscale_value``), OLMo-core's nGPT block (``NormalizedTransformerBlock``:
# ``*_alpha_init_scaling``). timm's ``LayerScale`` keeps its ``init_values`` on the module.
_GATE_VALUES: dict[tuple[str, str], Callable] = {
    ("MllamaVisionEncoderLayer", "gate_attn"): lambda module, model: math.pi / 4,
    ("MllamaVisionEncoderLayer", "gate_ffn"): lambda module, model: math.pi / 4,
    ("MllamaCrossAttentionDecoderLayer", "cross_attn_attn_gate"): lambda module, model: 0.0,
    ("MllamaCrossAttentionDecoderLayer", "cross_attn_mlp_gate"): lambda module, model: 0.0,
    ("EvollaSequenceAlignerCrossAttention", "gate_attention"): lambda module, model: 0.0,
    ("EvollaSequenceAlignerCrossAttention", "gate_ffw"): lambda module, model: 0.0,
    ("Dinov2LayerScale", "lambda1"): lambda module, model: _config_value(model, "layerscale_value"),
    ("Dinov2WithRegistersLayerScale", "lambda1"): lambda module, model: _config_value(model, "layerscale_value"),
    ("NormalizedTransformerBlock", "attn_alpha"): lambda module, model: module.attn_alpha_init_scaling,
    ("NormalizedTransformerBlock", "mlp_alpha"): lambda module, model: module.mlp_alpha_init_scaling,
}


@functools.cache
def _tanh_gated(cls: type, leaf: str) -> bool:
    """Whether ``cls.forward`` passes parameter ``leaf`` through tanh (``self.gate.tanh()``,
    ``torch.tanh(self.gate)``): a gate whose identity value is not 1 (False without the source)."""
    try:
        source = inspect.getsource(cls.forward)
    except (OSError, TypeError):
        return False
    leaf = re.escape(leaf)
    return re.search(rf"\bself\.{leaf}\.tanh\(|tanh\(\s*self\.{leaf}\b", source) is not None


def _gate(model: torch.nn.Module, module: torch.nn.Module, name: str, leaf: str) -> tuple[float | None, str]:
    """(the value the model's own code gives residual gate ``name``, its kind).

    Kinds: "declared" (a value from ``_GATE_VALUES`` or timm's ``LayerScale.init_values``),
    "layer scale" and "tanh gate" (the model decides the value and tinit does not know it: value
    None), "multiplier" (a plain ReZero-style multiplier: None, the scheme's own value applies).
    """
    getter = _GATE_VALUES.get((type(module).__name__, leaf))
    value = getter(module, model) if getter is not None else None
    if value is None and leaf == "gamma":
        value = getattr(module, "init_values", None)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value), "declared"
    if LAYER_SCALE.match(_split(name)[1]):
        return None, "layer scale"
    if _tanh_gated(type(module), leaf):
        return None, "tanh gate"
    return None, "multiplier"


# "(1.0 + self.weight" or "self.weight + 1.0" in a norm's forward: Gemma's RMSNorm
# (HF GemmaRMSNorm: output * (1.0 + self.weight.float())) and its kind
# (Gemma2/3, RecurrentGemma, T5Gemma, VaultGemma, Qwen3-Next, Qwen3.5,
# Nemotron's LayerNorm1P, ...), whose own init sets the weight to 0.
_OFFSET_GAIN = re.compile(r"\(\s*1(?:\.0*)?\s*\+\s*self\.weight\b|\bself\.weight\s*\+\s*1(?:\.0*)?\b")


@functools.cache
def _offset_gain(cls: type) -> bool:
    """Whether norm class ``cls`` scales by 1 + weight (so weight 0 is the identity), read from
    the source of its ``forward`` (False where the source is not available)."""
    import inspect

    try:
        source = inspect.getsource(cls.forward)
    except (OSError, TypeError):
        return False
    return _OFFSET_GAIN.search(source) is not None


_BLOCK_NUMBER = re.compile(r"\.\d+(?=\.)")
_NO_OVERRIDE: dict = {}


def _named_modules(model: torch.nn.Module):
    """``model.named_modules(remove_duplicate=False)`` in the same (pre-)order, as a list.

    One loop instead of torch's recursive generators (each yield passes
    through every level of ``yield from``). When any module's class
    overrides ``named_modules``, torch's own walk is used, which calls it.
    """
    plain = torch.nn.Module.named_modules
    found, stack = [], [("", model)]
    while stack:
        name, module = stack.pop()
        if type(module).named_modules is not plain:  # a class that decides what it yields
            return list(model.named_modules(remove_duplicate=False))
        found.append((name, module))
        children = module._modules
        if children:
            stack.extend(
                reversed(
                    [(f"{name}.{key}" if name else key, child) for key, child in children.items() if child is not None]
                )
            )
    return found


def _classify(model, prefix: str, overrides) -> list[_Param]:
    """Every parameter once, with its role, block, stack, tower and (for gates) the model's value.

    Roles: the name rules (``tinit.roles.infer_role``), then the module's type
    (``_role_from_module``), then ``overrides``. A role that writes a constant
    checks the shape it means: a residual gate or an attention sink has at
    most 1 dim, so a matrix with a gate's name (esmfold's ``attn_gate``
    ``nn.Linear``) is classified by its module type instead.
    """
    # One walk over the modules: each parameter with its owning module, every
    # name of a shared one (ties), in named_parameters order. A module's name
    # is parsed once for all its parameters (a parameter name is its module's
    # name plus a leaf without dots): block index, and the template (block
    # numbers replaced) under which roles and stacks are cached, since they
    # depend on a name's words only.
    aliases: dict[int, list[str]] = {}
    entries, roles = [], {}
    for module_name, module in _named_modules(model):
        params = module._parameters
        if not params:
            continue
        base = f"{prefix}{module_name}." if module_name else prefix
        module_template = None
        for leaf, param in params.items():
            if param is None:
                continue
            full = base + leaf
            names = aliases.get(id(param))
            if names is not None:  # a tie: recorded under the first name's entry
                names.append(full)
                continue
            names = aliases[id(param)] = [full]
            if module_template is None:
                module_template = _BLOCK_NUMBER.sub(".0", base)
                module_layer = infer_layer(base[:-1]) if base.endswith(".") else None
                layout = _layout(module)
            # A ParameterList's leaves are numbers, and a prefix without a
            # trailing dot runs into the root's leaves: parse the whole name.
            if leaf.isdigit() or not base.endswith("."):
                template, layer = _BLOCK_NUMBER.sub(".0", full), infer_layer(full)
            else:
                template, layer = module_template + leaf, module_layer
            found = roles.get(template)
            if found is None:
                found = roles[template] = infer_role(full), infer_stack(full)
            role, stack = found
            if role in ("residual_gate", "attn_sink") and param.dim() > 1:
                role = None
            if role is None:
                role = _role_from_module(module, leaf)
            entry = _Param(full, param, names, role, layer, stack, layout, _NO_OVERRIDE)
            if overrides:
                override = next((o for pattern, o in overrides if pattern.search(full)), _NO_OVERRIDE)
                if override:
                    entry.override = override
                    entry.role = override.get("role") or entry.role
                    entry.layer = override.get("layer", layer)
                    entry.stack = override.get("stack", stack)
                    entry.layout = override.get("layout") or entry.layout
            if entry.role == "norm" and leaf == "weight" and _offset_gain(type(module)):
                entry.offset_gain = True
            if entry.role == "residual_gate":
                entry.gate = _gate(model, module, full, leaf)
            if leaf == "weight" and isinstance(module, torch.nn.Embedding) and module.padding_idx is not None:
                entry.padding_idx = module.padding_idx  # nn.Embedding keeps it in [0, num_embeddings)
            entries.append(entry)
    _ungated_up_projections(entries)
    for entry in entries:  # the other names of a tied tensor, once the walk has seen them all
        entry.tied = tuple(entry.tied[1:]) if len(entry.tied) > 1 else ()
    return entries


_GATE_OF_UP = {"up_proj": "gate_proj", "w3": "w1", "wi_1": "wi_0"}
_UP_KEY = re.compile(r"(?:^|\.)(up_proj|w3|wi_1)(?=\.|$|_[A-Z]{2,4}$)")


def _ungated_up_projections(entries: list[_Param]) -> None:
    """An up projection with no gate beside it (a plain MLP's ``up_proj``, as in
    ``tinit.report_models``) is the MLP's input projection: mlp_in, not the gated MLP's mlp_up."""
    names = None
    for entry in entries:
        if entry.role != "mlp_up" or "role" in entry.override:
            continue
        if names is None:
            names = {name for e in entries for name in e.tied}
        match = _UP_KEY.search(entry.name)
        if match is None:
            continue
        key = match.group(1)
        gate = entry.name[: match.start(1)] + _GATE_OF_UP[key] + entry.name[match.end(1) :]
        if gate not in names:
            entry.role = "mlp_in"


def _common_parts(a: str, b: str) -> int:
    """How many leading dot-separated components ``a`` and ``b`` share."""
    count = 0
    for x, y in zip(a.split("."), b.split(".")):
        if x != y:
            break
        count += 1
    return count


def _depths(entries, n_layers) -> tuple[dict, dict]:
    """(tower -> L, the N and M context of an encoder-decoder model, empty for others).

    A tower is a block container (``tinit.roles.infer_tower``: "model.language_model.layers",
    "model.vision_tower.encoder.layers", T5's "encoder.block"); its L is the number of blocks in
    it, so each tower of a multimodal model has its own depth. Each parameter is given a tower
    (``entry.tower``): its own for a block's parameter, else the tower sharing the longest
    name prefix with it (ties: the last tower before it in ``named_parameters`` order, so an LM
    head after the language model counts that model's blocks). In an encoder-decoder model
    (blocks under both "encoder" and "decoder"), a parameter outside both stacks (T5's shared
    embedding) counts no tower, as before towers: N is the encoder's L, M the decoder's.

    ``n_layers``: an int for every tower; or a mapping whose keys are "encoder"/"decoder" (the
    towers of that stack) or tower names; other keys are refused (ValueError).
    """
    stacks = {e.stack for e in entries if e.layer is not None}
    enc_dec = {"encoder", "decoder"} <= stacks
    if not enc_dec:
        for entry in entries:
            entry.stack = None
    counted: dict = {}
    tower_stack: dict = {}
    last_tower, preceding = None, []
    for entry in entries:
        if entry.layer is not None:
            tower = infer_tower(entry.name) or entry.name.rpartition(".")[0]
            entry.tower = tower
            counted[tower] = max(counted.get(tower, 0), entry.layer + 1)
            tower_stack.setdefault(tower, entry.stack)
            last_tower = tower
        preceding.append(last_tower)
    for entry, before in zip(entries, preceding, strict=True):
        if entry.tower is not None or not counted:
            continue
        if enc_dec:
            entry.tower = next((t for t, st in tower_stack.items() if st == entry.stack), None) if entry.stack else None
            continue
        best = max(_common_parts(entry.name, t) for t in counted)
        near = [t for t in counted if _common_parts(entry.name, t) == best]
        entry.tower = before if before in near else near[0]
    depths = dict(counted)
    if isinstance(n_layers, Mapping):
        known = set(counted) | ({"encoder", "decoder"} if enc_dec else set())
        unknown = [key for key in n_layers if key not in known]
        if unknown:
            raise ValueError(
                f"init_model_: n_layers keys {unknown} name no stack or tower of this model; use "
                f"{sorted(known, key=str)} (or an int for every tower)"
            )
        for key, value in n_layers.items():
            if key in ("encoder", "decoder") and key not in counted:
                depths.update({t: value for t, st in tower_stack.items() if st == key})
        depths.update({key: value for key, value in n_layers.items() if key in counted})
    elif n_layers is not None:
        # a model with no blocks (a submodule initialised under a prefix) has no tower: key None
        depths = dict.fromkeys(counted, n_layers) if counted else {None: n_layers}
    context = {}
    if enc_dec:
        for stack in ("encoder", "decoder"):
            values = [depths[t] for t, st in tower_stack.items() if st == stack]
            context[f"{stack}_layers"] = max(values) if values else None
    return depths, context


_POLICIES = ("error", "skip")


def _check_unclassified(unclassified, where: str) -> str:
    """``unclassified`` checked: "error", "skip" or a role of ``tinit.schemes.ROLES``."""
    if not isinstance(unclassified, str):
        raise TypeError(
            f"{where}: unclassified must be a str ('error', 'skip' or a role), got {type(unclassified).__name__}"
        )
    if unclassified not in _POLICIES and unclassified not in schemes.ROLES:
        raise ValueError(
            f"{where}: unclassified must be 'error', 'skip' or a role in {list(schemes.ROLES)}, got {unclassified!r}"
        )
    return unclassified


def _apply_unclassified(entries: list, policy: str, where: str, *, meta: bool = False) -> list:
    """``entries`` under the ``unclassified`` policy: the parameters without a role refused
    (ValueError naming them), left out ("skip"; refused for parameters on the meta device,
    whose memory would stay uninitialised), or given the role ``policy``. A parameter an
    override gives a ``value`` is classified by it."""
    unknown = [e for e in entries if e.role is None and "value" not in e.override]
    if not unknown:
        return entries
    names = ", ".join(e.name for e in unknown[:8]) + (f", ... ({len(unknown)} in all)" if len(unknown) > 8 else "")
    if policy == "error":
        raise ValueError(
            f"{where}: {len(unknown)} parameter(s) match no role rule and no module type: {names}; pass "
            f"overrides={{regex: role}} with a role in {list(schemes.ROLES)}, or unclassified='skip' "
            "(leave them as they are) or unclassified=<role>"
        )
    if policy == "skip":
        if meta:  # to_empty leaves every parameter of the model uninitialised
            raise ValueError(
                f"{where}: unclassified='skip' would leave parameter(s) of a meta-device model uninitialised "
                f"after materialising: {names}; classify them (overrides=, or unclassified=<role>)"
            )
        skipped = {id(e) for e in unknown}
        return [e for e in entries if id(e) not in skipped]
    for entry in unknown:
        entry.role = policy
    return entries


def _infer_d_model(model, entries) -> int | None:
    for holder in (getattr(model, "config", None), getattr(model, "model_args", None)):
        for attr in _WIDTH_ATTRS:
            value = getattr(holder, attr, None)
            if isinstance(value, int) and value > 0:
                return value
    for entry in entries:
        if entry.role == "embedding" and entry.param.dim() == 2 and entry.layer is None:
            return int(entry.param.shape[1])
    return None


def _config_options(model, scheme: schemes.Scheme, options: Mapping) -> dict:
    """The options ``scheme`` reads from a model's config (``Scheme.config_options``) that the caller
    did not pass: the first of their fields the model's ``config`` (or its ``text_config``) has."""
    found = {}
    config = getattr(model, "config", None)
    holders = [c for c in (config, getattr(config, "text_config", None)) if c is not None]
    for option, fields in scheme.config_options.items():
        if option in options:
            continue
        value = next((getattr(h, f) for h in holders for f in fields if getattr(h, f, None) is not None), None)
        if value is not None:
            found[option] = value
    return found


def _check_hf_tie(model) -> None:
    config = getattr(model, "config", None)
    if not getattr(config, "tie_word_embeddings", False):
        return
    try:
        inputs, outputs = model.get_input_embeddings(), model.get_output_embeddings()
    except (AttributeError, NotImplementedError):
        return
    if inputs is not None and outputs is not None and outputs.weight is not inputs.weight:
        raise ValueError(
            "init_model_: the model's config ties the output head to the input embeddings but they "
            "are separate tensors (to_empty unties them); call model.tie_weights() or materialise "
            "with tinit.materialise_(model, device) or init_model_(..., device=...)"
        )


def _without_gc_passes(function):
    """Run ``function`` with Python's cyclic garbage collector paused (and restored after).

    Planning a model's init allocates a few short-lived objects per
    parameter; in a process holding a large model, the collections that
    thousands of parameters trigger each walk the whole heap and cost more
    than the planning itself (about 3 ms of 23 for 2,008 tensors here).
    Nothing the call makes outlives it in a cycle, so nothing is left to
    collect.
    """

    @functools.wraps(function)
    def paused(*args, **kwargs):
        enabled = gc.isenabled()
        gc.disable()
        try:
            return function(*args, **kwargs)
        finally:
            if enabled:
                gc.enable()

    return paused


@_without_gc_passes
def init_model_(
    model: torch.nn.Module,
    scheme: str = "gpt2",
    *,
    seed: int = 0,
    n_layers: int | Mapping[str, int] | None = None,
    d_model: int | None = None,
    overrides: Mapping[str, str | Mapping] | None = None,
    only: str | Callable[[str], bool] | None = None,
    prefix: str = "",
    device: str | torch.device | None = None,
    backend: str = "auto",
    progress=None,
    grouped: bool = True,
    unclassified: str = "error",
    **options,
) -> list[ParamInit]:
    """Initialise every parameter of ``model`` in place by ``scheme``.

    Roles, block indices and (encoder-decoder) stacks come from parameter
    names (``tinit.roles``), then module types (an ``nn.Linear``/``nn.Conv*``
    weight no name rule places is "linear", an ``nn.Embedding`` weight
    "embedding", a ``*Router`` module's parameters "router"), refined by
    ``overrides``. A parameter none of these classifies is handled by
    ``unclassified``: refused by default under every scheme, never given
    silent noise. L is counted per tower, the block container
    (``tinit.roles.infer_tower``): a multimodal model's language-model
    projections count the language model's blocks, its vision tower's its
    own; an encoder-decoder model's N and M are its encoder's and decoder's.
    d_model comes from the model's config
    (``hidden_size``, ``n_embd``, ``d_model``, ``dim``) or the embedding width.

    Residual gates (role residual_gate, at most 1-D): a scheme that sets gates
    itself (one that requires them: ``rezero`` writes 0) writes its value;
    every other scheme writes the value the model's own code gives the gate
    where tinit knows it (mllama's tanh gates pi/4 and 0, Evolla's 0, HF
    Dinov2's ``config.layerscale_value``, timm ``LayerScale.init_values``,
    OLMo-core nGPT's alpha scaling), else the scheme's value for a plain
    multiplier (1: the branch passes unchanged). A LayerScale or tanh gate
    whose value tinit does not know is refused with its name; an override
    ``{"value": v}`` sets it (or any parameter) to the constant v under
    every scheme.
    Fans come from each parameter's logical shape, with HF ``Conv1D`` weights
    read as (in, out), a fused q/k/v projection split by its config's head
    counts and an expert stack's fans those of one expert
    (``tinit.architecture``). A tensor shared by several names is written once,
    under the first name ``named_parameters`` gives. Each parameter's stream
    id is ``stream_for(fully qualified name)`` and its key ``seed``, so its
    values do not depend on order, on the other parameters or on writing it
    alone (``only=``, or a submodule with ``prefix=``).

    Sharded models: DTensor parameters (FSDP2 ``fully_shard``, tensor
    parallel) are written shard by shard from their global indices, with no
    communication; fans come from the logical shapes, so every rank's shards
    assemble into exactly the unsharded model's initial weights.

    Args:
        model: any ``nn.Module``. Parameters on the meta device need ``device``.
        scheme: name in ``tinit.schemes.SCHEMES``.
        seed: Philox key in [0, 2**64).
        n_layers: blocks L: an int for every tower, or a mapping from
            "encoder"/"decoder" (an encoder-decoder model's N and M) or tower
            names ("model.language_model.layers") to L; counted per tower
            from names when None, and for the towers a mapping leaves out.
        d_model: residual width; inferred when None.
        overrides: {regex: role} or {regex: {"role", "layer", "stack",
            "layout", "fan_in", "fan_out", "options", "qkv", "experts",
            "value"}}; the first pattern that ``re.search``-es a fully
            qualified name wins over inference. "qkv": a fused q/k/v
            projection's layout, a ``tinit.architecture.FusedQKV`` or (heads,
            kv_heads, head_dim, layout); "experts": the expert count of a 2-D
            grouped layout; "value": a finite constant written whatever the
            scheme.
        only: write only parameters whose name (or a tied alias) matches this
            regex or predicate; the others still count for L and d_model.
        prefix: prepended to every name (initialise a submodule under its
            name in the full model, e.g. "model.layers.3."; pass n_layers).
        device: when parameters are on the meta device, materialise them
            there first (``materialise_``: ``to_empty`` plus restored ties and
            recomputed buffers); checked (a known, present device, not meta)
            whenever given, and otherwise unused.
        backend: "auto" or a backend name.
        progress: optional callable wrapping the list of parameters (``tqdm``)
            as they are written one by one; used with ``grouped=False`` only
            (a grouped fill is one call).
        grouped: fill the truncated normals of all CPU parameters in one
            native call (``tinit.grouped.write_grouped_``); False writes them
            one at a time, as ``write_spec_`` would. The values are
            identical; both check every parameter before writing any.
        unclassified: what to do with parameters no rule, module type or
            override classifies: "error" (default) refuses, naming them;
            "skip" leaves them as they are (refused for a model on the meta
            device, whose memory ``to_empty`` leaves uninitialised); a role
            of ``tinit.schemes.ROLES`` initialises them as that role.
        **options: scheme options (``std=``, ``trunc=``,
            ``variance_preserving=``, ...), for every parameter. Options a
            scheme reads from a model's config (``Scheme.config_options``:
            ``t5``'s ``d_kv`` and ``factor``) come from ``model.config`` when
            not passed.

    Returns:
        One ``ParamInit`` per tensor written (role, layer, tower, spec: std
        and bounds), in ``named_parameters`` order. Parameters skipped by
        ``unclassified="skip"`` are not written and not listed.

    Raises:
        tinit.schemes.UnknownNameError: unknown scheme or override role (a KeyError and a
            ValueError).
        TypeError: ``device`` neither a str nor a torch.device; ``unclassified``
            not a str.
        ValueError: parameters on the meta device without ``device``; a
            ``device`` torch does not know, 'meta', or a CUDA device that is not
            here; parameters no rule classifies under ``unclassified="error"``
            (named), or under "skip" on a meta model; an ``unclassified`` that
            is no policy or role; a residual gate whose model value is unknown
            (named); ``n_layers`` keys naming no stack or tower; a model
            without residual gates for ``rezero``; a value the scheme needs is
            missing; a lost HF tie.
        TypeError: a parameter dtype tinit cannot fill, or an unknown option.
        All raised before anything is written.
    """
    chosen = schemes.get(scheme)
    seed = _stream_position(seed, 0, 0, 0)[0]
    policy = _check_unclassified(unclassified, "init_model_")
    compiled = _compile_overrides(overrides)
    entries = _classify(model, prefix, compiled)
    meta = next((e.name for e in entries if e.param.is_meta), None)
    if meta is not None and device is None:
        raise ValueError(
            f"init_model_: parameters are on the meta device (first: {meta}); pass device=... "
            "or materialise with tinit.materialise_(model, device)"
        )
    if device is not None:
        device = _target_device(device)
    if backend != "auto" and backend not in dispatch.BACKENDS:
        raise ValueError(f"unknown tinit backend {backend!r}; choose from {sorted(dispatch.BACKENDS)} or 'auto'")
    if meta is None:
        _check_hf_tie(model)
    # Everything below up to materialising reads names and shapes only, so a
    # meta model is checked, and its specs chosen, before it is allocated.
    depths, context = _depths(entries, n_layers)
    if d_model is None:
        d_model = _infer_d_model(model, entries)
    if only is None:
        selected = entries
    else:
        match = only if callable(only) else re.compile(only).search
        selected = [e for e in entries if any(match(n) for n in (e.name, *e.tied))]

    selected = _apply_unclassified(selected, policy, "init_model_", meta=meta is not None)
    sets_gates = "residual_gate" in chosen.required_roles
    unknown_gates = [
        f"{e.name} ({e.gate[1]})"
        for e in selected
        if e.role == "residual_gate" and e.gate is not None and e.gate[0] is None and e.gate[1] != "multiplier"
        if "value" not in e.override and not sets_gates
    ]
    if unknown_gates:
        raise ValueError(
            f"init_model_: the initial value of {len(unknown_gates)} residual gate(s) is the model's own and "
            f"tinit does not know it: {', '.join(unknown_gates[:8])}; pass overrides={{regex: {{'value': v}}}}"
        )
    missing = [r for r in chosen.required_roles if not any(e.role == r for e in entries)]
    if missing:
        raise ValueError(
            f"init_model_: scheme {scheme!r} needs parameters with role(s) {missing} and the model "
            "has none (name them e.g. 'resweight', or classify them with overrides)"
        )
    # A model's blocks repeat: one spec per distinct input (the block index
    # counts only for depth-dependent schemes).
    specs: dict = {}
    shared = {**context, **_config_options(model, chosen, options), **options}
    depth = chosen.depends_on_depth(**shared)
    geometry = architecture.ModelGeometry(model, prefix)  # fused q/k/v and expert layouts, read where needed
    items, summary = [], []
    add_item, add_summary, new_tuple = items.append, summary.append, tuple.__new__
    for entry in selected:
        param, override = entry.param, entry.override
        if param.dtype not in _SUPPORTED:
            raise TypeError(
                f"init_model_: parameter {entry.name} has dtype {param.dtype}; tinit fills "
                "float32, float64, bfloat16 and float16"
            )
        shape, layout, geometric = param.shape, entry.layout, _NO_OVERRIDE
        if entry.role == "attn_qkv" or "experts" in entry.name or override:
            try:
                layout, geometric = geometry.args(entry.name, tuple(shape), entry.role, layout, override)
            except (TypeError, ValueError) as exc:
                raise _located(exc, "init_model_") from exc
        if not override and not geometric:
            extra = shared
            key = (entry.role, entry.layer if depth else None, entry.tower, entry.stack, layout, shape)
        else:
            extra = {**shared, **override["options"]} if "options" in override else shared
            by_block = depth if extra is shared else chosen.depends_on_depth(**extra)
            key = (
                entry.role,
                entry.layer if by_block else None,
                entry.tower,
                entry.stack,
                layout,
                shape,
                tuple(sorted(geometric.items())),
                override.get("fan_in"),
                override.get("fan_out"),
                tuple(sorted(extra.items())) if extra is not shared else None,
            )
        try:
            spec = specs.get(key)
        except TypeError:  # an unhashable option value: no sharing
            key, spec = None, None
        if "value" in override:  # the user's constant, whatever the scheme
            spec = schemes.InitSpec(constant=override["value"])
        elif spec is None:
            try:
                spec = chosen.spec(
                    role=entry.role,
                    layer_idx=entry.layer,
                    n_layers=depths.get(entry.tower),
                    shape=tuple(shape),
                    d_model=d_model,
                    layout=layout,
                    fan_in=override.get("fan_in"),
                    fan_out=override.get("fan_out"),
                    stack=entry.stack,
                    **geometric,
                    **extra,
                )
            except (TypeError, ValueError) as exc:
                raise _located(exc, f"init_model_: parameter {entry.name}") from exc
            if key is not None:
                specs[key] = spec
        if "value" in override:
            pass
        elif entry.gate is not None and entry.gate[0] is not None and not sets_gates:
            spec = schemes.InitSpec(constant=entry.gate[0])  # the model's own value for its gate
        elif entry.offset_gain and spec.constant is not None and spec.parts is None:
            # The scheme's gain g is the effective 1 + w: write w = g - 1 (0 for the usual g = 1).
            spec = schemes.InitSpec(constant=spec.constant - 1.0)
        # A constant draws nothing: its stream id is never read.
        stream = 0 if spec.constant is not None and spec.parts is None else stream_for(entry.name)
        # tuple.__new__ skips the NamedTuples' Python-level __new__ (one call per parameter)
        add_item(new_tuple(FillItem, (param, spec, stream, 0)))
        add_summary(
            new_tuple(
                ParamInit,
                (
                    entry.name,
                    entry.role,
                    entry.layer,
                    param.numel(),
                    spec,
                    entry.stack,
                    entry.tied,
                    STREAM_VERSION,
                    entry.tower,
                ),
            )
        )
    if meta is not None:
        materialise_(model, device)
        _check_hf_tie(model)
        fresh = {e.name: e.param for e in _classify(model, prefix, compiled)}
        items = [item._replace(tensor=fresh[entry.name]) for item, entry in zip(items, selected)]
    write_grouped_(
        items,
        seed=seed,
        backend=backend,
        sequential=not grouped,
        progress=progress,
        names=[entry.name for entry in selected],
    )
    _zero_padding_rows(model, [(e.name, e.padding_idx) for e in selected if e.padding_idx is not None])
    return summary


def mup_param_groups(
    model: torch.nn.Module,
    *,
    lr: float,
    base_width: int | None = None,
    d_model: int | None = None,
    optimizer: str = "adam",
    readout: str = "zero",
    overrides: Mapping[str, str | Mapping] | None = None,
    weight_decay: float = 0.0,
    eps: float | None = None,
    reference: str = "mup",
    base_model: torch.nn.Module | Mapping[str, tuple[int, ...]] | None = None,
    delta_model: torch.nn.Module | Mapping[str, tuple[int, ...]] | None = None,
    unclassified: str = "error",
    **group_options,
) -> list[dict]:
    """Optimiser param groups with muP's per-parameter learning rate, weight decay and Adam eps.

    ``reference="mup"`` (default): what microsoft/mup 1.0.0's ``MuAdam`` /
    ``MuAdamW`` / ``MuSGD`` (``mup.optim``) build for the same model after
    ``mup.set_base_shapes(model, base_model, delta=delta_model)``. Each
    parameter's dims are width dims or fixed (mup's ``InfShape``):
        Adam/AdamW: two width dims (hidden matrices): lr / m_in,
                    weight_decay * m_in (m_in: the fan_in dim's multiplier);
                    everything else: lr, weight_decay.
        SGD:        one width dim (embeddings, readout, biases, norms): lr * m,
                    weight_decay / m; two: lr * m_out / m_in, weight_decay *
                    m_in / m_out; none (scalars, a readout's bias): lr, weight_decay.
    So every parameter's lr * weight_decay equals the base model's: mup
    scales weight decay the same way for coupled (Adam, SGD) and decoupled
    (AdamW) decay, which keeps AdamW's per-step shrink lr * wd width-free.
    mup does not scale Adam's eps (``MuAdam`` passes it unchanged to every
    group): with ``eps`` given, every group gets it as is. The width dims
    come from ``base_model`` (and ``delta_model``) exactly as mup's
    ``set_base_shapes`` finds them (a dim is a width dim where the base and
    delta shapes, or without a delta the base and this model's shapes,
    differ; its multiplier is this model's dim over the base's); without a
    base model, from the roles: hidden matrices have two width dims;
    embeddings, heads, routers and patch/token embeddings one; a 1-D
    parameter one when its length is a dim of a hidden matrix (or d_model),
    else none; all with multiplier m = d_model / base_width.

    ``reference="megatron"``: Megatron-Core's muP groups
    (``megatron.core.optimizer.get_mup_config_overrides``, NVIDIA/Megatron-LM
    main at d98e8a6): one multiplier m; a parameter is vector-like when it is
    an embedding or the output layer (role embedding/head/token) or has <= 1
    dim. Adam/AdamW: hidden (the rest) lr / m and eps / m; vector-like lr, eps.
    SGD: vector-like lr * m, hidden lr. Weight decay is not scaled.

    ``readout="zero"``/``"scaled"`` (TP5 Table 3, no logit multiplier): the
    head's lr is ``MuP.lr_multiplier("head")`` (1 / m for Adam and SGD) and
    its weight decay follows lr * wd = base; with ``"multiplier"`` and
    ``"zero_multiplier"`` the head is mup's ``MuReadout`` and follows the
    rules above. Roles come from names as in ``init_model_`` (same
    ``overrides``). Parameters with equal (lr, weight_decay, eps) share a
    group; tied tensors appear once.

    Args:
        model: the model (may be on the meta device).
        lr: the learning rate tuned on the base-width model.
        base_width, readout: as for the ``mup`` scheme.
        d_model: the model's width; inferred as in ``init_model_`` when None.
        optimizer: "adam" (Adam, AdamW) or "sgd".
        overrides: as for ``init_model_``.
        weight_decay: the base model's weight decay (>= 0).
        eps: Adam's eps for the base model; None leaves it to the optimiser's default.
        reference: "mup" or "megatron".
        base_model, delta_model: models (meta is fine) or {name: shape} at the
            base (and a second) width, as for ``mup.set_base_shapes``;
            reference "mup" only.
        unclassified: as for ``init_model_``: "error" (default) refuses the
            parameters nothing classifies, naming them; "skip" leaves them out
            of every group (the caller adds them to the optimiser itself);
            a role gives them that role's multiplier.
        **group_options: added to every group (e.g. ``betas=(0.9, 0.95)``).

    Returns:
        [{"params": [...], "lr": float, "lr_multiplier": float, "weight_decay": float,
        ("eps": float,) "names": [...]}, ...] ready for ``torch.optim.AdamW(groups)``
        (extra keys are kept by torch).

    Raises:
        ValueError: a parameter matches no role rule under
            ``unclassified="error"`` (all listed), a bad ``unclassified``, bad options,
            base shapes that do not match the model's names or ranks, or a tensor
            with more than two width dims.
        TypeError: base_model/delta_model of another type, ``unclassified`` not a str.
    """
    mup = schemes.get("mup")
    if reference not in ("mup", "megatron"):
        raise ValueError(f"mup_param_groups: reference must be 'mup' or 'megatron', got {reference!r}")
    if optimizer not in ("adam", "sgd"):
        raise ValueError(f"mup_param_groups: optimizer must be 'adam' or 'sgd', got {optimizer!r}")
    for name, value in (("lr", lr), ("weight_decay", weight_decay), ("eps", eps)):
        if value is None and name == "eps":
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0 or value == float("inf"):
            raise ValueError(f"mup_param_groups: {name} must be a finite number >= 0, got {value!r}")
    if reference == "megatron" and (base_model is not None or delta_model is not None):
        raise ValueError("mup_param_groups: base_model/delta_model apply to reference='mup' (mup's base shapes)")
    mup.multipliers(readout=readout)  # checks readout
    policy = _check_unclassified(unclassified, "mup_param_groups")
    entries = _classify(model, "", _compile_overrides(overrides))
    if d_model is None:
        d_model = _infer_d_model(model, entries)
    entries = _apply_unclassified(entries, policy, "mup_param_groups")
    m = mup.width_mult(d_model, base_width) if base_model is None else None
    if base_model is not None:
        widths = _mup_width_dims_from_base(entries, base_model, delta_model)
    elif reference == "mup":
        widths = _mup_width_dims_from_roles(entries, d_model, m)
    groups: dict[tuple, dict] = {}
    for entry in entries:
        base_role = schemes.BASE_ROLE.get(entry.role, entry.role)
        eps_mult = 1.0
        if base_role == "head" and readout in ("zero", "scaled"):
            # TP5 Table 3's readout: lr / m under Adam and SGD (MuP.lr_multiplier), m its width dim's
            width = m if reference == "megatron" else next((w for w in widths[entry.name] if w is not None), 1.0)
            mult = 1.0 / width
            decay = weight_decay / mult if reference == "mup" else weight_decay
        elif reference == "mup":
            mult = _package_lr_multiplier(widths[entry.name], optimizer)
            decay = weight_decay / mult
        else:
            vector_like = entry.role in ("embedding", "head", "token") or entry.param.dim() <= 1
            if optimizer == "adam":
                mult = 1.0 if vector_like else 1.0 / m
                eps_mult = 1.0 if vector_like else 1.0 / m
            else:
                mult = m if vector_like else 1.0
            decay = weight_decay
        group_eps = None if eps is None else eps * eps_mult
        key = (mult, decay, group_eps)
        if key not in groups:
            groups[key] = {
                "params": [],
                "names": [],
                "lr": lr * mult,
                "lr_multiplier": mult,
                "weight_decay": decay,
                **({} if group_eps is None else {"eps": group_eps}),
                **group_options,
            }
        groups[key]["params"].append(entry.param)
        groups[key]["names"].append(entry.name)
    return list(groups.values())


def _mup_shapes(what, label: str) -> dict[str, tuple[int, ...]]:
    if isinstance(what, torch.nn.Module):
        return {name: tuple(p.shape) for name, p in what.named_parameters()}
    if isinstance(what, Mapping):
        return {name: tuple(shape) for name, shape in what.items()}
    raise TypeError(f"mup_param_groups: {label} must be an nn.Module or a {{name: shape}} mapping")


def _mup_width_dims_from_base(entries, base_model, delta_model) -> dict[str, tuple[float | None, ...]]:
    """Per parameter, each dim's width multiplier (None: fixed), as ``mup.set_base_shapes`` finds them."""
    base = _mup_shapes(base_model, "base_model")
    delta = None if delta_model is None else _mup_shapes(delta_model, "delta_model")
    widths = {}
    for entry in entries:
        shape = tuple(entry.param.shape)
        base_shape = base.get(entry.name)
        other = shape if delta is None else delta.get(entry.name)
        if base_shape is None or other is None or not len(base_shape) == len(other) == len(shape):
            raise ValueError(
                f"mup_param_groups: parameter {entry.name!r} {shape} has no base shape of its rank "
                f"(base {base_shape}, delta {other if delta is not None else '-'})"
            )
        widths[entry.name] = tuple(
            None if b == o else size / b for b, o, size in zip(base_shape, other, shape, strict=True)
        )
    return widths


def _mup_width_dims_from_roles(entries, d_model, m) -> dict[str, tuple[float | None, ...]]:
    """Per parameter, each dim's width multiplier guessed from its role (see ``mup_param_groups``)."""
    hidden = [
        e for e in entries if e.role != "router" and schemes.BASE_ROLE.get(e.role, e.role) in schemes.HIDDEN_ROLES
    ]
    sizes = {size for e in hidden for size in e.param.shape[-2:]} | ({d_model} if d_model else set())
    widths = {}
    for entry in entries:
        shape = tuple(entry.param.shape)
        base_role = schemes.BASE_ROLE.get(entry.role, entry.role)
        if entry.role != "router" and base_role in schemes.HIDDEN_ROLES and len(shape) >= 2:
            widths[entry.name] = (None,) * (len(shape) - 2) + (m, m)
        elif len(shape) >= 2 or (entry.param.numel() > 1 and shape[0] in sizes):
            widths[entry.name] = (m,)  # embedding-like, or a vector as wide as a hidden dim
        else:
            widths[entry.name] = (None,) * len(shape)
    return widths
