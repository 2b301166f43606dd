"""Which parameter of a model is which: roles from names and module types, block indices, towers,
gates and their model-given values, overrides, the policy for parameters nothing classifies, and
the geometry (fused q/k/v and expert layouts) a parameter's family gives it.

One walk over the modules (``torch.nn.Module.named_modules``) gives one ``Param`` per tensor
(``classify``) and the modules ``Geometry`` reads; ``init_model_`` and ``mup_param_groups`` plan
from them. The name rules are in ``tinit.roles``, each family's quirks in ``tinit.families``."""

from __future__ import annotations

import difflib
import functools
import inspect
import math
import operator
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

import torch

from tinit import families, schemes
from tinit.identity import canonical_modules
from tinit.roles import LAYER_SCALE, infer_layer, infer_role, infer_stack, infer_tower, split_name, ssm_role

_OVERRIDE_KEYS = frozenset(
    {"role", "layer", "stack", "layout", "fan_in", "fan_out", "options", "qkv", "experts", "value"}
)
_WIDTH_ATTRS = ("hidden_size", "n_embd", "d_model", "dim")


def compile_pattern(pattern, what: str) -> re.Pattern:
    """``pattern`` compiled; TypeError for a non-str, ValueError naming ``what`` for a bad regex."""
    if not isinstance(pattern, str):
        raise TypeError(f"{what} must be a regex str, got {type(pattern).__name__} {pattern!r}")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"{what} {pattern!r} is not a valid regex: {exc}") from None


def count_or_none(value, what: str, low: int):
    """``value`` as an int >= ``low`` (numpy integers included), or None; TypeError, ValueError."""
    if value is None:
        return None
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(f"{what} must be an int >= {low} or None, got {type(value).__name__} {value!r}")
    value = operator.index(value)
    if value < low:
        raise ValueError(f"{what} must be an int >= {low} or None, got {value}")
    return value


def check_n_layers(n_layers):
    """``n_layers`` as ``depths`` takes it: None, an int >= 1, or a mapping of str keys to ints >= 1."""
    if isinstance(n_layers, Mapping):
        checked = {}
        for key, value in n_layers.items():
            if not isinstance(key, str):
                raise TypeError(f"init_model_: n_layers keys must be str (a stack or tower), got {key!r}")
            checked[key] = count_or_none(value, f"init_model_: n_layers[{key!r}]", 1)
            if checked[key] is None:
                raise TypeError(f"init_model_: n_layers[{key!r}] must be an int >= 1, got None")
        return checked
    return count_or_none(n_layers, "init_model_: n_layers", 1)


def compile_overrides(overrides) -> list[tuple[re.Pattern, dict]]:
    if overrides is not None and not isinstance(overrides, Mapping):
        raise TypeError(f"overrides must be a mapping {{regex: role or dict}}, got {type(overrides).__name__}")
    compiled = []
    for pattern, value in (overrides or {}).items():
        where = f"override {pattern!r}"
        if not isinstance(value, (str, Mapping)):
            raise TypeError(f"{where}: the value must be a role name or a dict, got {type(value).__name__}")
        entry = {"role": value} if isinstance(value, str) else dict(value)
        if "layer" in entry:
            entry["layer"] = count_or_none(entry["layer"], f"{where}: layer", 0)
        for key in ("fan_in", "fan_out"):
            if key in entry:
                entry[key] = count_or_none(entry[key], f"{where}: {key}", 1)
        if "layout" in entry and entry["layout"] not in schemes.LAYOUTS:
            raise ValueError(f"{where}: layout must be one of {schemes.LAYOUTS}, got {entry['layout']!r}")
        if "stack" in entry and entry["stack"] not in (None, "encoder", "decoder"):
            raise ValueError(f"{where}: stack must be None, 'encoder' or 'decoder', got {entry['stack']!r}")
        if "options" in entry and not isinstance(entry["options"], Mapping):
            raise TypeError(f"{where}: options must be a dict of scheme options, got {type(entry['options']).__name__}")
        unknown = set(entry) - _OVERRIDE_KEYS
        if unknown:
            raise ValueError(f"override {pattern!r}: unknown keys {sorted(unknown)}; allowed {sorted(_OVERRIDE_KEYS)}")
        if "role" in entry and entry["role"] not in schemes.ROLES:
            raise schemes.UnknownNameError.of("role", entry["role"], schemes.ROLES, where=f"override {pattern!r}: ")
        if "value" in entry:
            value = entry["value"]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"override {pattern!r}: value must be a finite number, got {value!r}")
            entry["value"] = float(value)
        compiled.append((compile_pattern(pattern, "override pattern"), entry))
    return compiled


@dataclass(slots=True)
class Param:
    name: str
    param: torch.nn.Parameter
    tied: tuple[str, ...]
    role: str | None
    layer: int | None
    stack: str | None
    layout: str
    override: dict
    offset_gain: bool = False  # a norm whose effective gain is 1 + weight
    padding_idx: int | None = None  # an nn.Embedding's padding row, zeroed after the write
    tower: str | None = None  # the block container counted for L (depths)
    gate: tuple[float | None, str] | None = None  # a residual gate: (the model's value, its kind) (_gate)
    tied_roles: tuple[str | None, ...] = ()  # the role of each of ``tied``'s names, by the same rules
    model_spec: schemes.InitSpec | None = None  # the model's own init where tinit knows it (_model_spec)


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
_CONTAINERS = (torch.nn.ModuleList, torch.nn.Sequential, torch.nn.ModuleDict)  # what holds a model's blocks


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


def _gate(found: families.Index, model, module, name: str, leaf: str) -> tuple[float | None, str]:
    """(the value the model's own code gives residual gate ``name``, its kind).

    Kinds: "declared" (a value of its family's ``tinit.families.Family.gates`` or timm's
    ``LayerScale.init_values``), "layer scale" and "tanh gate" (the model decides the value and
    tinit does not know it: value None), "multiplier" (a plain ReZero-style multiplier: None, the
    scheme's own value applies).
    """
    getter = found.gates.get((type(module).__name__, leaf))
    value = getter(module, model) if getter is not None else None
    if value is None and leaf == "gamma":
        value = getattr(module, "init_values", None)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value), "declared"
    if LAYER_SCALE.match(split_name(name)[1]):
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
def _reads_offset_gain(cls: type) -> bool:
    """Whether norm class ``cls`` scales by 1 + weight (so weight 0 is the identity), read from
    the source of its ``forward`` (False where the source is not available)."""
    try:
        source = inspect.getsource(cls.forward)
    except (OSError, TypeError):
        return False
    return _OFFSET_GAIN.search(source) is not None


_BLOCK_NUMBER = re.compile(r"\.\d+(?=\.)")
NO_OVERRIDE: dict = {}


class _Walk(NamedTuple):
    """What every parameter of one ``classify`` call reads."""

    model: torch.nn.Module
    overrides: list
    families: families.Index
    roles: dict  # name template (block numbers replaced) -> (role, stack): they depend on a name's words only
    inits: Mapping  # the model family's ``tinit.families.Family.inits``
    init_classes: frozenset  # the module classes ``inits`` names
    modules: list  # the walk's (name, module) pairs
    by_name: dict  # name -> module, filled on first need (``_parent``)


def _parent(walk: _Walk, module_name: str) -> tuple:
    """(the module holding the module ``module_name``, or None at the root; the name under it)."""
    if not module_name:
        return None, ""
    if not walk.by_name:
        walk.by_name.update(walk.modules)
    parent_name, _, child = module_name.rpartition(".")
    return walk.by_name.get(parent_name), child


def _ssm_role_of(module, parent, child: str, leaf: str) -> str | None:
    """The role of a parameter of a state-space mixer (a module holding ``A_log``) or of one of its
    children (``in_proj``, ``conv1d``, ...) whatever the mixer is called (``tinit.roles.ssm_role``)."""
    if "A_log" in module._parameters:
        return ssm_role(leaf, leaf)
    if parent is not None and "A_log" in parent._parameters:
        return ssm_role(child, leaf)
    return None


def _time_steps(module, parent, model) -> tuple[float, float, float]:
    """(time_step_min, time_step_max, time_step_floor): the mixer's own (Mamba2Mixer keeps them), its
    config's, the model's config's, else mamba_ssm's (``tinit.schemes.TIME_STEP``)."""
    holders = [h for h in (module, parent) if h is not None]
    holders = [*holders, *(getattr(h, "config", None) for h in holders), getattr(model, "config", None)]
    found = []
    for key, default in zip(("time_step_min", "time_step_max", "time_step_floor"), schemes.TIME_STEP, strict=True):
        values = (getattr(h, key, None) for h in holders if h is not None)
        found.append(next((v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)), default))
    return found[0], found[1], found[2]


def _model_spec(walk: _Walk, module, parent, child: str, leaf: str, role: str | None, param):
    """The init the model's own code gives a parameter, where tinit knows it: its family's
    ``tinit.families.Family.inits`` (by the class of the module holding it, or of that module's
    parent and the path under it), else for a time-step bias (ssm_dt) the inverse softplus of dt
    log-uniform in the mixer's [time_step_min, time_step_max]; None otherwise (the other state roles'
    defaults depend on the shape only: ``Scheme.spec``)."""
    getter, owner = None, module
    if walk.init_classes:
        if type(module).__name__ in walk.init_classes:
            getter = walk.inits.get((type(module).__name__, leaf))
        if getter is None and parent is not None and type(parent).__name__ in walk.init_classes:
            getter, owner = walk.inits.get((type(parent).__name__, f"{child}.{leaf}")), parent
    value = getter(owner, walk.model, param) if getter is not None else None
    if isinstance(value, schemes.InitSpec):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return schemes.InitSpec(constant=float(value))
    if value is not None:
        raise TypeError(f"the family init of {type(owner).__name__}'s {leaf} gave {value!r}: not an InitSpec or number")
    if role == "ssm_dt":
        return schemes.dt_bias_spec(*_time_steps(module, parent, walk.model))
    return None


def classify(model, prefix: str, overrides, modules=None) -> list[Param]:
    """Every parameter once, with its role, block, stack, tower and (for gates) the model's value.

    Roles: the name rules (``tinit.roles.infer_role``), then the module's type
    (``_role_from_module``), then ``overrides``. A role that writes a constant
    checks the shape it means: a residual gate or an attention sink has at
    most 1 dim, so a matrix with a gate's name (esmfold's ``attn_gate``
    ``nn.Linear``) is classified by its module type instead.

    Args:
        model: the model.
        prefix: put before every name.
        overrides: ``compile_overrides``'s list.
        modules: the model's ``tinit.identity.canonical_modules`` when the caller walked them
            already (``init_model_`` shares its walk with ``Geometry``); walked when None. Names
            are canonical: a wrapped or compiled model's parameters get their unwrapped names.

    Returns:
        One ``Param`` per tensor, in ``named_parameters`` order; a tensor's other names are its
        ``tied``.
    """
    if modules is None:
        modules = canonical_modules(model)
    inits = families.inits_of(getattr(model, "config", None))
    walk = _Walk(model, overrides, families.index(), {}, inits, frozenset(cls for cls, _ in inits), modules, {})
    aliases: dict[int, list[str]] = {}
    owners: dict[int, Param] = {}  # id(tensor) -> its entry, for the roles of its other names
    entries = []
    for module_name, module in modules:
        params = module._parameters
        if not params:
            continue
        base = f"{prefix}{module_name}." if module_name else prefix
        parsed = None
        for leaf, param in params.items():
            if param is None:
                continue
            names = aliases.get(id(param))
            if names is not None:  # a tie: recorded under the first name's entry
                names.append(base + leaf)
                _tie(walk, owners[id(param)], module, base + leaf, leaf)
                continue
            names = aliases[id(param)] = [base + leaf]
            if parsed is None:  # a module's name is parsed once for all its parameters
                layer = infer_layer(base[:-1]) if base.endswith(".") else None
                parsed = _BLOCK_NUMBER.sub(".0", base), layer, module_name
            entries.append(_entry(walk, module, base, leaf, param, names, parsed))
            owners[id(param)] = entries[-1]
    _ungated_up_projections(entries, walk.families)
    for entry in entries:  # the other names of a tied tensor, once the walk has seen them all
        entry.tied = tuple(entry.tied[1:]) if len(entry.tied) > 1 else ()
    _refuse_unmatched(overrides, [name for names in aliases.values() for name in names], prefix)
    return entries


def _refuse_unmatched(overrides: list, names: list[str], prefix: str) -> None:
    """A ValueError for the first override pattern that ``re.search``-es no parameter name: a typo
    (or a name of another model) would otherwise leave the parameter it meant to the default rule."""
    for pattern, _ in overrides:
        if not any(pattern.search(name) for name in names):
            close = difflib.get_close_matches(pattern.pattern, names, n=1, cutoff=0.5)
            hint = f" (the closest name: {close[0]!r})" if close else ""
            where = f" under prefix {prefix!r}" if prefix else ""
            raise ValueError(
                f"override {pattern.pattern!r} matches no parameter name{where} of the model{hint}; "
                "patterns are re.search-ed against the canonical names (named_parameters, wrappers removed)"
            )


def _entry(walk: _Walk, module, base: str, leaf: str, param, names: list[str], parsed: tuple) -> Param:
    """The ``Param`` of ``module``'s parameter ``leaf`` (``base``: the module's name and a dot)."""
    full = base + leaf
    # A ParameterList's leaves are numbers, and a prefix without a trailing dot runs into the
    # root's leaves: parse the whole name.
    if leaf.isdigit() or not base.endswith("."):
        template, layer = _BLOCK_NUMBER.sub(".0", full), infer_layer(full)
    else:
        template, layer = parsed[0] + leaf, parsed[1]
    found = walk.roles.get(template)
    if found is None:
        found = walk.roles[template] = infer_role(full), infer_stack(full)
    role, stack = found
    if role in ("residual_gate", "attn_sink") and param.dim() > 1:
        role = None
    if leaf == "weight" and role != "norm" and isinstance(module, _NORM_TYPES):
        role = "norm"  # torch's own norm layer whatever its name (Git's nn.Sequential(Linear, LayerNorm))
    parent = child = None
    if role is None:
        parent, child = _parent(walk, parsed[2])
        role = _ssm_role_of(module, parent, child, leaf) or _role_from_module(module, leaf)
    entry = Param(full, param, names, role, layer, stack, _layout(module), NO_OVERRIDE)
    _override(entry, walk.overrides, full)
    if entry.role == "norm" and leaf == "weight":
        kind = type(module)
        entry.offset_gain = kind.__name__ in walk.families.offset_gain_norms or _reads_offset_gain(kind)
    if entry.role == "residual_gate":
        entry.gate = _gate(walk.families, walk.model, module, full, leaf)
    if walk.init_classes or entry.role == "ssm_dt":
        if child is None:
            parent, child = _parent(walk, parsed[2])
        try:
            entry.model_spec = _model_spec(walk, module, parent, child, leaf, entry.role, param)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"parameter {full}: {exc}") from None
        spec = entry.model_spec
        if entry.offset_gain and spec is not None and spec.constant is not None and spec.parts is None:
            # A family init gives the stored weight w; a recipe's norm constant is the gain 1 + w
            # (init_model_ writes gain - 1): NemotronLayerNorm1P's w = 1 is gain 2.
            entry.model_spec = schemes.InitSpec(constant=spec.constant + 1.0)
    if leaf == "weight" and isinstance(module, torch.nn.Embedding) and module.padding_idx is not None:
        entry.padding_idx = module.padding_idx  # nn.Embedding keeps it in [0, num_embeddings)
    return entry


def _override(entry: Param, overrides: list, name: str) -> None:
    r"""Apply to ``entry`` the first override whose pattern ``re.search``-es ``name`` (its own name or
    one of its tied names). A pattern's group named ``layer`` (``r"stack\.(?P<layer>\d+)\.proj"``)
    gives the block index, and the name up to it the block container (the tower), unless the
    override sets ``layer``."""
    pattern, override, match = next(((p, o, m) for p, o in overrides if (m := p.search(name))), (None, None, None))
    if not override:
        return
    entry.override = override
    entry.role = override.get("role") or entry.role
    entry.layer = override.get("layer", entry.layer)
    if "layer" not in override and "layer" in pattern.groupindex and (match.group("layer") or "").isdigit():
        entry.layer = int(match.group("layer"))
        entry.tower = name[: match.start("layer")].rstrip(".") or None
    entry.stack = override.get("stack", entry.stack)
    entry.layout = override.get("layout") or entry.layout


def _tie(walk: _Walk, entry: Param, module, full: str, leaf: str) -> None:
    """Record the role of ``full``, another name of ``entry``'s tensor (an override of it applies to
    the tensor when its first name has none).

    A tensor's role does not depend on which of its names was registered first: when the names seen
    so far give none, this name's role (and its module's layout and padding row) is the tensor's;
    names with different roles are then ``init_model_``'s tie rules' to decide."""
    role = infer_role(full)
    if role in ("residual_gate", "attn_sink") and entry.param.dim() > 1:
        role = None
    role = role or _role_from_module(module, leaf)
    entry.tied_roles += (role,)
    if entry.role is None and role is not None:
        entry.role, entry.layout = role, _layout(module)
    if entry.padding_idx is None and leaf == "weight" and isinstance(module, torch.nn.Embedding):
        entry.padding_idx = module.padding_idx
    if entry.override is NO_OVERRIDE:
        _override(entry, walk.overrides, full)


def _ungated_up_projections(entries: list[Param], found: families.Index) -> None:
    """An up projection with no gate beside it (a plain MLP's ``up_proj``, as in
    ``tinit.tools.toy_models.Stack``) is the MLP's input projection: mlp_in, not the gated MLP's
    mlp_up. The pairs are the families' ``tinit.families.Family.gate_of_up``."""
    names = None
    for entry in entries:
        if entry.role != "mlp_up" or "role" in entry.override or found.up_key is None:
            continue
        if names is None:
            names = {name for e in entries for name in e.tied}
        match = found.up_key.search(entry.name)
        if match is None:
            continue
        key = match.group(1)
        gate = entry.name[: match.start(1)] + found.gate_of_up[key] + entry.name[match.end(1) :]
        if gate not in names:
            entry.role = "mlp_in"


def _common_parts(a: str, b: str) -> int:
    """How many leading dot-separated components ``a`` and ``b`` share."""
    count = 0
    for x, y in zip(a.split("."), b.split("."), strict=False):
        if x != y:
            break
        count += 1
    return count


def depths(entries, n_layers) -> tuple[dict, dict]:
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
            tower = entry.tower or infer_tower(entry.name) or entry.name.rpartition(".")[0]
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


def check_unclassified(unclassified, where: str) -> str:
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


def apply_unclassified(entries: list, policy: str, where: str) -> list:
    """``entries`` under the ``unclassified`` policy: the parameters without a role refused
    (ValueError naming them), left out ("skip"; refused for parameters on the meta device,
    whose memory would stay uninitialised once materialised), or given the role ``policy``. A
    parameter an override gives a ``value`` is classified by it, one whose family gives its own init
    (``Param.model_spec``: XIELU's ``alpha_p``) by that."""
    unknown = [e for e in entries if e.role is None and "value" not in e.override and e.model_spec is None]
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
        on_meta = [e.name for e in unknown if e.param.is_meta]
        if on_meta:  # materialising leaves their memory uninitialised
            listed = ", ".join(on_meta[:8]) + (f", ... ({len(on_meta)} in all)" if len(on_meta) > 8 else "")
            raise ValueError(
                f"{where}: unclassified='skip' would leave parameter(s) of a meta-device model uninitialised "
                f"after materialising: {listed}; classify them (overrides=, or unclassified=<role>)"
            )
        skipped = {id(e) for e in unknown}
        return [e for e in entries if id(e) not in skipped]
    for entry in unknown:
        entry.role = policy
    return entries


def infer_d_model(model, entries) -> int | None:
    for holder in (getattr(model, "config", None), getattr(model, "model_args", None)):
        for attr in _WIDTH_ATTRS:
            value = getattr(holder, attr, None)
            if isinstance(value, int) and value > 0:
                return value
    for entry in entries:
        if entry.role == "embedding" and entry.param.dim() == 2 and entry.layer is None:
            return int(entry.param.shape[1])
    return None


class Geometry:
    """Per-parameter geometry of one model, for ``tinit.init_model_``: fused q/k/v layouts from the
    nearest config and expert-stack layouts (``tinit.families``), looked up only for the parameters
    that need them.

    Args:
        modules: the model's ``named_modules(remove_duplicate=False)`` (the walk ``classify`` read).
        prefix: the prefix ``init_model_`` puts before every name.
    """

    def __init__(self, modules, prefix: str = ""):
        self._modules = dict(modules)
        self._prefix = prefix
        self._layouts: dict = {}  # (id(config), width) -> (FusedQKV or None, the ValueError's message or None)

    def _config(self, path: str):
        """The config of the deepest module at or above ``path`` that has one (a tower's own config)."""
        while True:
            module = self._modules.get(path)
            for attr in ("config", "model_args"):
                config = getattr(module, attr, None) if module is not None else None
                if config is not None and not callable(config):
                    return config
            if not path:
                return None
            path = path.rpartition(".")[0]

    def _fused_qkv(self, name: str, path: str, width: int):
        """The fused q/k/v layout of parameter ``name`` from its config (None: equal thirds or no config)."""
        config = self._config(path)
        if config is None:
            return None
        key = id(config), width
        if key not in self._layouts:
            try:
                self._layouts[key] = families.fused_qkv_of_config(config, width), None
            except ValueError as exc:
                self._layouts[key] = None, str(exc)
        found, error = self._layouts[key]
        if error is not None:
            raise ValueError(f"parameter {name}: {error}")
        return found

    def args(self, name: str, shape: tuple[int, ...], role: str | None, layout: str, override) -> tuple[str, dict]:
        """(layout, extra ``Scheme.spec`` arguments) of parameter ``name`` of logical ``shape``.

        A fused q/k/v projection gets ``qkv`` (the override's, else its config's layout); a fused
        gate+up projection its family's ``gate_up`` order; a parameter under an ``experts`` scope
        its expert layout (and ``experts`` count), unless the override sets ``layout``.

        Raises:
            ValueError, TypeError: an unknown fused layout or a bad override, naming the parameter.
        """
        ndim = len(shape)
        local = name[len(self._prefix) :] if self._prefix and name.startswith(self._prefix) else name
        path, _, leaf = local.rpartition(".")
        extra = {}
        if "experts" in override:
            extra["experts"] = override["experts"]
        if "qkv" in override:
            extra["qkv"] = families.as_fused_qkv(override["qkv"], f"override qkv of parameter {name}")
        elif role == "attn_qkv" and ndim == 2:
            found = self._fused_qkv(name, path, shape[1] if layout == "in_out" else shape[0])
            if found is not None:
                extra["qkv"] = found
        if role == "mlp_gate_up":
            # transformers' use_experts_implementation records the order on the module
            # (is_concatenated=False: GptOssExperts' gate_up[..., ::2], gate_up[..., 1::2]).
            concatenated = getattr(self._modules.get(path), "is_concatenated", None)
            if isinstance(concatenated, bool):
                interleaved = not concatenated
            else:
                family = families.family_of(self._config(path))
                interleaved = leaf.startswith(families.index().interleaved_gate_up) or (
                    family is not None and family.gate_up == "interleaved"
                )
            if interleaved:
                extra["gate_up"] = "interleaved"
        if "layout" not in override and ndim >= 2 and ".experts." in f".{local}":
            model_type = getattr(self._config(path), "model_type", None) if ndim == 3 else None
            model_type = model_type if isinstance(model_type, str) else None
            found = families.expert_layout(self._modules.get(path), leaf, ndim, model_type)
            if found is not None:
                layout, experts = found
                if experts is not None and "experts" not in extra:
                    extra["experts"] = experts
        return layout, extra

    def unplaced_blocks(self, entries, roles) -> list[tuple[str, int, str, list]]:
        """The outermost containers of repeated blocks in which no parameter of ``entries`` has one of
        ``roles`` (a depth-scaled recipe's residual output projections).

        A container of repeated blocks is an ``nn.ModuleList``, ``nn.Sequential`` or
        ``nn.ModuleDict`` of two or more modules of one class that have submodules, one of them
        holding a matrix: the blocks of a transformer, whatever they are called.

        Returns:
            (the container's name, its blocks, their class name, the (name, role) of the first
            block's matrices), one per such container.
        """
        found, outer = [], None
        for path, module in self._modules.items():
            if outer is not None and (path + ".").startswith(outer):
                continue  # inside a container already looked at
            if not isinstance(module, _CONTAINERS):
                continue
            blocks = list(module.named_children())
            first = blocks[0][1] if len(blocks) >= 2 else None
            if first is None or len({type(b) for _, b in blocks}) != 1 or next(first.children(), None) is None:
                continue
            if not any(p.dim() >= 2 for p in first.parameters()):
                continue
            outer = f"{path}." if path else ""
            inside = f"{self._prefix}{outer}"
            if any(e.role in roles for e in entries if e.name.startswith(inside)):
                continue
            head = f"{inside}{blocks[0][0]}."
            matrices = [(e.name, e.role) for e in entries if e.name.startswith(head) and e.param.dim() >= 2]
            found.append(((inside or self._prefix).rstrip("."), len(blocks), type(first).__name__, matrices))
        return found
