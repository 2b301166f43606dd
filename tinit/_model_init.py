"""Initialise every parameter of a model through tinit: roles, depth, ties, meta models.

``init_model_`` runs in phases, each a function: the arguments (``_arguments``), one walk over
the modules that classification and the geometry share (``_walk``), where the parameters are
(``_placement``), which are written (``_select``), the gates and required roles (``_check_gates``),
one spec per parameter (``_Specs``), materialising what is on the meta device
(``_materialise_meta``), and the write, one ``tinit._plan.Plan``."""

from __future__ import annotations

import hashlib
import re
import warnings
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import NamedTuple

import torch
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from tinit import buffers, dispatch, schemes
from tinit._classify import (
    NO_OVERRIDE,
    Geometry,
    apply_unclassified,
    check_n_layers,
    check_unclassified,
    classify,
    compile_overrides,
    compile_pattern,
    count_or_none,
    depths,
    infer_d_model,
)
from tinit._plan import Item, Plan, check_seed, located
from tinit.identity import canonical_modules, canonical_name
from tinit.params import STREAM_VERSION, SUPPORTED_DTYPES, UninitializedError, is_uninitialized

_SUPPORTED = frozenset(SUPPORTED_DTYPES)


def stream_for(name: str) -> int:
    """Stream id of a parameter: the first 8 bytes of SHA-256 of its canonical name (uint64, little-endian).

    Deriving the stream from the fully qualified name makes a parameter's values
    independent of initialisation order, of which other parameters exist and of
    whether it is initialised alone. The name is first made canonical
    (``tinit.identity.canonical_name`` without a model: the components of
    ``torch.compile``'s, activation checkpointing's and FSDP1's wrappers are
    dropped), so a compiled or wrapped model's parameter has the stream of the
    unwrapped one. The stream of a raw name, as before that rule:
    ``int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")``.

    Args:
        name: a fully qualified parameter name (``named_parameters``'s, or a canonical one).

    Returns:
        The stream id, an int in [0, 2**64).

    Raises:
        TypeError: ``name`` is not a str.
        ValueError: a name with no UTF-8 form (a lone surrogate), named by its repr.
    """
    return int.from_bytes(hashlib.sha256(utf8_name(canonical_name(name), "stream_for")).digest()[:8], "little")


def utf8_name(name: str, where: str) -> bytes:
    """The UTF-8 bytes of a parameter's name, which its stream id hashes.

    Raises:
        ValueError: a name Python holds but UTF-8 cannot encode (a lone surrogate, as ``setattr`` or
            ``add_module`` accept), named by its repr, with ``where`` (the entry point) first.
    """
    try:
        return name.encode()
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"{where}: parameter name {name!r} has no UTF-8 form ({exc.reason}: {name[exc.start : exc.end]!r} at "
            f"index {exc.start}); tinit keys a parameter by the UTF-8 bytes of its name: rename the module or parameter"
        ) from None


class ParamInit(NamedTuple):
    """How one parameter was initialised (an entry of ``init_model_``'s summary; a named tuple,
    cheap to build for models with thousands of tensors).

    Attributes:
        name: canonical fully qualified name (``tinit.identity``; the first of its tied names).
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
    """Allocate on ``device`` every parameter and buffer still on the meta device, keeping ties,
    and recompute those buffers.

    Only what is on the meta device is allocated (as ``Module.to_empty`` allocates it:
    ``torch.empty_like(t, device=device)``): a parameter or buffer that already holds values (a
    partly loaded checkpoint) keeps its tensor and its values. A tensor shared by several
    modules (GPT-2's ``lm_head``/``wte``) is allocated once, so every tie the model had is kept;
    the model's own ``tie_weights()`` is called when it has one, and a tie still broken is
    restored by pointing the later names at the first one's Parameter. Each meta buffer is
    recomputed on ``device`` by its module type's recipe (``tinit.buffers``: transformers'
    rotary ``inv_freq``, Gemma's ``embed_scale``, BERT-style ``position_ids``/``token_type_ids``,
    torch's BatchNorm statistics).

    Args:
        model: a module (typically on the meta device, wholly or in part).
        device: where to allocate storage.
        recompute_buffers: False leaves the allocated buffers uninitialised (for a checkpoint
            that fills them next); allocated parameters always are.

    Returns:
        ``model``, nothing left on the meta device: allocated parameters uninitialised,
        allocated buffers as a model built there eagerly has them.

    Raises:
        TypeError: ``model`` not a torch.nn.Module, ``device`` neither a str nor a
            torch.device, ``recompute_buffers`` not a bool.
        ValueError: a device torch does not know, 'meta', or a CUDA device that is not here.
        tinit.buffers.UninitialisedBufferError: (a RuntimeError) a buffer on the meta device
            that no recipe recomputes, raised before anything is allocated; or a recipe that
            failed, raised after materialising.
        RuntimeError: a tie could not be restored.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"materialise_: model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(recompute_buffers, bool):
        raise TypeError(
            f"materialise_: recompute_buffers must be True or False, got {type(recompute_buffers).__name__}"
        )
    _materialise(model, target_device(device, "materialise_"), recompute_buffers=recompute_buffers)
    return model


def materialise_meta_(model: torch.nn.Module, device: torch.device) -> list[str]:
    """``materialise_`` for a front end that runs the model's own init next (``init_model_``'s "hf"):
    a tie that a partly loaded checkpoint broke is restored first, and the floating-point buffers no
    ``tinit.buffers`` recipe claims are filled with NaN instead of refused (``tinit.buffers.plan``'s
    ``unclaimed="nan"``). ``device``: one ``target_device`` checked.

    Returns:
        The qualified names of those NaN buffers, for the caller to check once the model's code ran.

    Raises:
        tinit.buffers.UninitialisedBufferError: a meta buffer of another dtype that no recipe
            claims, before anything is allocated. RuntimeError: a tie could not be restored.
    """
    _retie_partly_loaded(model)
    buffer_plan = buffers.plan(model, unclaimed="nan")
    _materialise(model, device, recompute_buffers=True, buffer_plan=buffer_plan)
    return [name for name, _, _ in buffer_plan.unclaimed]


def _materialise(
    model: torch.nn.Module,
    device,
    *,
    recompute_buffers: bool,
    keep: set[int] | None = None,
    buffer_plan: buffers.BufferPlan | None = None,
) -> dict[int, torch.nn.Parameter]:
    """``materialise_``'s work; returns {id(a meta Parameter): the Parameter now in its place}.
    ``keep``: the ids of the meta Parameters to allocate (None: all); the others stay on meta.
    ``buffer_plan``: made by the caller (``tinit.buffers.plan``), else here when recomputing."""
    groups = tied_groups(model)
    if buffer_plan is None and recompute_buffers:
        buffer_plan = buffers.plan(model)
    fresh = _materialise_meta(model, torch.device(device), keep)
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
        raise RuntimeError(f"tied parameters could not be restored after materialising: {lost}")
    if recompute_buffers:
        buffers.recompute_(buffer_plan, device)
    return fresh


def _materialise_meta(
    model: torch.nn.Module, device: torch.device, keep: set[int] | None = None
) -> dict[int, torch.nn.Parameter]:
    """Allocate every parameter (of ``keep``'s ids, when given) and buffer of ``model`` on the meta
    device, once per tensor.

    A parameter gets what ``Module._apply`` gives it under ``to_empty``: a new Parameter, or, for
    a tensor subclass such as a DTensor (or under ``torch.__future__``'s swap flag), the same
    Parameter with its storage swapped in. Off-meta tensors are not touched.

    Returns:
        {id(the meta Parameter): the Parameter now in its place}.
    """
    swap = torch.__future__.get_swap_module_params_on_conversion()
    done: dict[int, torch.Tensor] = {}
    for module in _submodules(model):
        for leaf, param in module._parameters.items():
            if param is None or not param.is_meta or (keep is not None and id(param) not in keep):
                continue
            if id(param) not in done:
                done[id(param)] = _allocated(param, device, swap)
            module._parameters[leaf] = done[id(param)]
        for leaf, buffer in module._buffers.items():
            if buffer is not None and buffer.is_meta:
                if id(buffer) not in done:
                    done[id(buffer)] = torch.empty_like(buffer, device=device)
                module._buffers[leaf] = done[id(buffer)]
    return done


def _submodules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """Every module of the tree once, through ``children()`` as ``Module._apply`` walks it (so a
    module a ``named_modules`` override hides is reached, as ``to_empty`` reaches it)."""
    found, seen, stack = [], set(), [model]
    while stack:
        module = stack.pop()
        if id(module) in seen:
            continue
        seen.add(id(module))
        found.append(module)
        stack.extend(reversed(list(module.children())))
    return found


def _allocated(param: torch.nn.Parameter, device: torch.device, swap: bool) -> torch.nn.Parameter:
    """``param`` allocated on ``device`` as ``Module.to_empty`` allocates it (its grad dropped)."""
    with torch.no_grad():
        data = torch.empty_like(param, device=device)
    if swap or is_traceable_wrapper_subclass(data):
        param.grad = None  # a reference to the grad would keep the swap from happening
        torch.utils.swap_tensors(param, torch.nn.Parameter(data, requires_grad=param.requires_grad))
        return param
    return torch.nn.Parameter(data, param.requires_grad)


def target_device(device, where: str = "init_model_") -> torch.device:
    """``device`` as a torch.device a model can be materialised on; TypeError, ValueError otherwise."""
    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"{where}: device must be a str or torch.device, got {type(device).__name__}")
    try:
        device = torch.device(device)
    except RuntimeError as exc:
        raise ValueError(f"{where}: device {device!r} is not a device torch knows ({exc})") from None
    if device.type == "meta":
        raise ValueError(f"{where}: device='meta' allocates nothing to initialise; pass the target device")
    if device.type == "cuda" and (
        not torch.cuda.is_available() or (device.index is not None and device.index >= torch.cuda.device_count())
    ):
        raise ValueError(f"{where}: device {str(device)!r}: no such CUDA device here")
    return device


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


def _check_backend_fills(backend: str, device: torch.device, dtypes) -> None:
    """Before a meta model is materialised: ValueError when ``backend`` cannot fill ``dtypes`` on
    ``device`` (each backend says why), so a refused call leaves the model on the meta device."""
    for dtype in sorted(dtypes & _SUPPORTED, key=str):
        try:
            dispatch.select(torch.empty(1, dtype=dtype, device=device), backend)
        except RuntimeError as exc:
            raise ValueError(f"init_model_: backend {backend!r} cannot fill {dtype} on {device}: {exc}") from None


def _tied_embeddings(model) -> tuple | None:
    """(input embeddings, output embeddings) of a Hugging Face model whose config ties them, or None."""
    if not getattr(getattr(model, "config", None), "tie_word_embeddings", False):
        return None
    try:
        inputs, outputs = model.get_input_embeddings(), model.get_output_embeddings()
    except (AttributeError, NotImplementedError):
        return None
    return None if inputs is None or outputs is None else (inputs, outputs)


def _retie_partly_loaded(model) -> None:
    """A Hugging Face model whose config ties the output head to the input embeddings, one of them
    loaded and the other still on meta (``load_state_dict(assign=True)`` of one of the two
    replaces its Parameter and unties them): point the meta one at the loaded Parameter, so the
    loaded values are kept and written nowhere (``tie_weights()`` would instead keep the input
    embeddings, losing a loaded head)."""
    pair = _tied_embeddings(model)
    if pair is None or pair[1].weight is pair[0].weight:
        return
    inputs, outputs = pair
    loaded_in, loaded_out = not inputs.weight.is_meta, not outputs.weight.is_meta
    if loaded_in != loaded_out and inputs.weight.shape == outputs.weight.shape:
        loaded = inputs.weight if loaded_in else outputs.weight
        inputs.weight = outputs.weight = loaded


def _check_hf_tie(model) -> None:
    pair = _tied_embeddings(model)
    if pair is not None and pair[1].weight is not pair[0].weight:
        raise ValueError(
            "init_model_: the model's config ties the output head to the input embeddings but they "
            "are separate tensors (to_empty unties them); call model.tie_weights() or materialise "
            "with tinit.materialise_(model, device) or init_model_(..., device=...)"
        )


class _Args(NamedTuple):
    """``init_model_``'s arguments, checked (``_arguments``)."""

    scheme: schemes.Scheme
    scheme_name: str
    seed: int
    policy: str
    only: Callable[[str], bool] | None
    n_layers: int | Mapping[str, int] | None
    d_model: int | None
    overrides: list
    prefix: str
    device: object
    backend: str
    grouped: bool
    reinit_loaded: bool
    options: dict


def _arguments(model, scheme, options: dict, **given) -> _Args:
    """Phase 1: every argument checked, in the order the messages are documented; raises
    TypeError, ValueError or ``tinit.schemes.UnknownNameError`` naming the argument."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"init_model_: model must be a torch.nn.Module, got {type(model).__name__}")
    chosen = schemes.get(scheme)
    seed = check_seed(given["seed"])
    policy = check_unclassified(given["unclassified"], "init_model_")
    prefix = given["prefix"]
    if not isinstance(prefix, str):
        raise TypeError(f"init_model_: prefix must be a str, got {type(prefix).__name__} {prefix!r}")
    for flag in ("grouped", "reinit_loaded"):
        if not isinstance(given[flag], bool):
            value = given[flag]
            raise TypeError(f"init_model_: {flag} must be True or False, got {type(value).__name__} {value!r}")
    only = given["only"]
    if only is not None and not callable(only):
        only = compile_pattern(only, "init_model_: only").search
    n_layers = check_n_layers(given["n_layers"])
    d_model = count_or_none(given["d_model"], "init_model_: d_model", 1)
    backend = given["backend"]
    if backend != "auto" and backend not in dispatch.BACKENDS:
        raise ValueError(f"unknown tinit backend {backend!r}; choose from {sorted(dispatch.BACKENDS)} or 'auto'")
    overrides = compile_overrides(given["overrides"])
    return _Args(
        chosen,
        scheme,
        seed,
        policy,
        only,
        n_layers,
        d_model,
        overrides,
        prefix,
        given["device"],
        backend,
        given["grouped"],
        given["reinit_loaded"],
        options,
    )


def _walk(model: torch.nn.Module, args: _Args) -> tuple[list, Geometry]:
    """Phase 2: one walk over the modules, shared by classification and the geometry."""
    modules = canonical_modules(model)
    entries = classify(model, args.prefix, args.overrides, modules)
    for entry in entries:  # the name a stream id hashes, refused here rather than mid-plan
        utf8_name(entry.name, "init_model_")
    return entries, Geometry(modules, args.prefix)


def _placement(model, entries: list, args: _Args) -> tuple[str | None, torch.device | None]:
    """Phase 3: (the first meta parameter's name or None, the checked device or None). Refuses
    meta parameters without ``device``, a bad device, a backend that cannot fill the dtypes on it
    (before a meta model is materialised), a lost HF tie on a model with nothing on meta."""
    lazy = next((e.name for e in entries if is_uninitialized(e.param)), None)
    if lazy is not None:  # before anything reads its shape (torch's RuntimeError names no parameter)
        raise UninitializedError.of(f"init_model_: parameter {lazy}")
    meta = next((e.name for e in entries if e.param.is_meta), None)
    if meta is not None and args.device is None:
        raise ValueError(
            f"init_model_: parameters are on the meta device (first: {meta}); pass device=... "
            "or materialise with tinit.materialise_(model, device)"
        )
    device = None if args.device is None else target_device(args.device)
    if meta is not None and args.backend != "auto":
        _check_backend_fills(args.backend, device, {e.param.dtype for e in entries})
    if meta is None:
        _check_hf_tie(model)
    return meta, device


def _select(model, entries: list, args: _Args, meta: str | None) -> list:
    """Phase 4: the parameters to write. ``only=`` decides when given; otherwise every parameter of
    a model with none on meta, or with ``reinit_loaded``, and only the meta ones of a partly
    loaded model (a loaded weight is never overwritten unless asked for). Then the
    ``unclassified`` policy."""
    if args.only is not None:
        match = args.only
        selected = [e for e in entries if any(match(n) for n in (e.name, *e.tied))]
        if not selected and entries:  # names are canonical: a raw wrapper prefix matches nothing
            warnings.warn(
                f"init_model_: only= matches no parameter, nothing is written (names are canonical, without "
                f"wrappers' prefixes, e.g. {entries[0].name!r})",
                UserWarning,
                stacklevel=3,
            )
    elif meta is not None and not args.reinit_loaded:
        # parameters a meta build's own constructor made off meta (DiffLlama's torch.normal lambdas)
        # hold no loaded values: written like the meta ones, by the rule of tinit._hf_init's
        # constructor_made (anything else off meta stays as loaded)
        from tinit._hf_init import constructor_made, hf_tops

        made = {id(p) for p in constructor_made(hf_tops(model))}
        selected = [e for e in entries if e.param.is_meta or id(e.param) in made]
    else:
        selected = entries
    return apply_unclassified(selected, args.policy, "init_model_")


def _check_gates(selected: list, entries: list, args: _Args) -> None:
    """Phase 5: refuse residual gates whose model value tinit does not know (unless the scheme sets
    gates or an override gives the value) and a scheme's required roles the model lacks."""
    sets_gates = "residual_gate" in args.scheme.required_roles
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
    missing = [r for r in args.scheme.required_roles if not any(e.role == r for e in entries)]
    if missing:
        raise ValueError(
            f"init_model_: scheme {args.scheme_name!r} needs parameters with role(s) {missing} and the model "
            "has none (name them e.g. 'resweight', or classify them with overrides)"
        )


class _Specs:
    """Phase 6: the ``InitSpec`` of each parameter. A model's blocks repeat: one spec per distinct
    input (the block index counts only for depth-dependent schemes)."""

    def __init__(self, model, args: _Args, geometry: Geometry, towers: tuple[dict, dict], d_model: int | None):
        self.args, self.geometry, self.cache, self.d_model = args, geometry, {}, d_model
        self.depths, context = towers
        self.shared = {**context, **_config_options(model, args.scheme, args.options), **args.options}
        self.depth = args.scheme.depends_on_depth(**self.shared)
        self.sets_gates = "residual_gate" in args.scheme.required_roles

    def of(self, entry) -> schemes.InitSpec:
        """The spec written into ``entry``'s parameter; raises naming the parameter."""
        override = entry.override
        if "value" in override:  # the user's constant, whatever the scheme
            return schemes.InitSpec(constant=override["value"])
        if entry.role is None and entry.model_spec is not None:  # no role rule: the family's own init
            return entry.model_spec
        if entry.tied_roles and "role" not in override:
            self._tied(entry)
        spec = self._drawn(entry)
        if entry.gate is not None and entry.gate[0] is not None and not self.sets_gates:
            return schemes.InitSpec(constant=entry.gate[0])  # the model's own value for its gate
        if entry.offset_gain and spec.constant is not None and spec.parts is None:
            # The scheme's gain g is the effective 1 + w: write w = g - 1 (0 for the usual g = 1).
            return schemes.InitSpec(constant=spec.constant - 1.0)
        return spec

    def treats_outputs_apart(self) -> bool:
        """Whether the scheme gives the residual output projections (``tinit.schemes.OUTPUT_ROLES``)
        another rule than a plain matrix (depth scaling, a zero init), probed on a 64 x 64 weight of
        the last of 4 blocks; False for a scheme the probe cannot run."""
        probe = {"layer_idx": 3, "n_layers": 4, "shape": (64, 64), "d_model": 64, **self.shared}
        try:
            plain = self.args.scheme.spec(role="linear", **probe)
            return any(self.args.scheme.spec(role=role, **probe) != plain for role in schemes.OUTPUT_ROLES)
        except (TypeError, ValueError):
            return False

    def _tied(self, entry) -> None:
        """A tensor with several names whose roles differ (tied input embeddings and LM head): when
        the scheme's rules for them differ, give ``entry`` the role whose rule the scheme's reference
        applies (``Scheme.tied_role``), or refuse the tensor naming its names and roles."""
        roles = tuple(dict.fromkeys(r for r in (entry.role, *entry.tied_roles) if r is not None))
        if len(roles) < 2:
            return
        scheme = self.args.scheme
        chosen = scheme.tied_role(roles, **self.shared)
        if chosen is not None:
            entry.role = chosen
            return
        specs = [self._drawn(replace(entry, role=role)) for role in roles]
        if all(spec == specs[0] for spec in specs):
            return
        named = ", ".join(
            f"{n} ({r})" for n, r in zip((entry.name, *entry.tied), (entry.role, *entry.tied_roles), strict=True)
        )
        raise ValueError(
            f"init_model_: {named} are one tensor, and scheme {self.args.scheme_name!r} initialises roles "
            f"{' and '.join(roles)} differently ({'; '.join(map(_described, specs))}) with no rule for a tensor "
            f"shared by them; say which rule it takes: overrides={{{re.escape(entry.name)!r}: {roles[-1]!r}}} (or "
            f"{roles[0]!r})"
        )

    def _drawn(self, entry) -> schemes.InitSpec:
        """The scheme's spec for ``entry``, shared with every parameter of the same inputs."""
        shape, layout, geometric, override = tuple(entry.param.shape), entry.layout, NO_OVERRIDE, entry.override
        if entry.role in ("attn_qkv", "mlp_gate_up") or "experts" in entry.name or override:
            try:
                layout, geometric = self.geometry.args(entry.name, shape, entry.role, layout, override)
            except (TypeError, ValueError) as exc:
                raise located(exc, "init_model_") from exc
        extra = {**self.shared, **override["options"]} if "options" in override else self.shared
        by_block = self.depth if extra is self.shared else self.args.scheme.depends_on_depth(**extra)
        key = (entry.role, entry.layer if by_block else None, entry.tower, entry.stack, layout, shape)
        if entry.model_spec is not None:
            key += (entry.model_spec,)
        if override or geometric:
            key += (
                tuple(sorted(geometric.items())),
                override.get("fan_in"),
                override.get("fan_out"),
                tuple(sorted(extra.items())) if extra is not self.shared else None,
            )
        try:
            spec = self.cache.get(key)
        except TypeError:  # an unhashable option value: no sharing
            key, spec = None, None
        if spec is None:
            spec = self._scheme_spec(entry, shape, layout, geometric, extra)
            if key is not None:
                self.cache[key] = spec
        return spec

    def _scheme_spec(self, entry, shape: tuple, layout: str, geometric: dict, extra: dict) -> schemes.InitSpec:
        try:
            return self.args.scheme.spec(
                role=entry.role,
                layer_idx=entry.layer,
                n_layers=self.depths.get(entry.tower),
                shape=shape,
                d_model=self.d_model,
                layout=layout,
                fan_in=entry.override.get("fan_in"),
                fan_out=entry.override.get("fan_out"),
                stack=entry.stack,
                model_spec=entry.model_spec,
                **geometric,
                **extra,
            )
        except (TypeError, ValueError) as exc:
            raise located(exc, f"init_model_: parameter {entry.name}") from exc


def _warn_unplaced_blocks(entries: list, geometry: Geometry, specs: _Specs, scheme: str) -> None:
    """Phase 6: warn when a scheme that treats residual output projections apart finds none in a
    model's repeated blocks (``Geometry.unplaced_blocks``): every matrix there gets the plain rule,
    and no depth scaling. The warning names the container, its first block's matrices and the
    override that classifies them (a ``(?P<layer>...)`` group gives the block index)."""
    unplaced = geometry.unplaced_blocks(entries, schemes.OUTPUT_ROLES)
    if not unplaced or not specs.treats_outputs_apart():
        return
    for container, count, kind, matrices in unplaced:
        listed = ", ".join(f"{name} ({role})" for name, role in matrices[:6]) or "none"
        example = next((name for name, role in matrices if role in ("linear", None)), None) or (
            matrices[-1][0] if matrices else f"{container}.0.proj.weight"
        )
        block = re.escape(container) + r"\.(?P<layer>\d+)\."
        pattern = block + re.escape(example[len(container) + 1 :].partition(".")[2])
        indexed = all(entry.layer is not None for entry in entries if entry.name.startswith(f"{container}."))
        warnings.warn(
            f"init_model_: scheme {scheme!r} gives residual output projections (roles "
            f"{', '.join(schemes.OUTPUT_ROLES)}) their own rule, but no parameter of {container!r} ({count} "
            f"blocks of {kind}) has one of those roles"
            + ("" if indexed else " and its names carry no block index tinit reads (h.<i>, layer(s).<i>, block(s).<i>)")
            + f": its matrices (first block: {listed}) get a plain matrix's rule, not the output projections' "
            "(their depth scaling or zero init). Classify the "
            f"output projections with init_model_'s overrides=, e.g. overrides={{{pattern!r}: 'attn_out'}} "
            "(mlp_out for the MLP's), whose (?P<layer>...) group gives each its block index",
            UserWarning,
            stacklevel=3,
        )


def _described(spec: schemes.InitSpec) -> str:
    """``spec`` in a few characters, for a message: "N(0, 0.02^2) +-3 std", "U(+-0.1)", "= 0"."""
    if spec.constant is not None:
        return f"= {spec.constant:g}"
    if spec.parts is not None:
        return "parts " + " / ".join(map(_described, spec.parts))
    if spec.distribution == "uniform":
        return f"U(+-{spec.std * spec.trunc:.4g})"
    return f"N(0, {spec.std:.4g}^2)" + ("" if spec.trunc == float("inf") else f" +-{spec.trunc:.4g} std")


def _summary(entry, spec: schemes.InitSpec) -> ParamInit:
    return ParamInit(
        entry.name,
        entry.role,
        entry.layer,
        entry.param.numel(),
        spec,
        entry.stack,
        entry.tied,
        STREAM_VERSION,
        entry.tower,
    )


def _items(planned: list) -> list[Item]:
    """Phase 8: one ``tinit._plan.Item`` per parameter written (``Plan.bind`` moves a meta one onto
    its allocated tensor). A constant draws nothing: its stream id is never read."""
    items = []
    for entry, spec in planned:
        drawn = spec.constant is None or spec.parts is not None
        items.append(
            Item(
                entry.param,
                spec,
                stream_for(entry.name) if drawn else 0,
                0,
                name=entry.name,
                zero_rows=() if entry.padding_idx is None else (entry.padding_idx,),
            )
        )
    return items


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
    reinit_loaded: bool = False,
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
    (``tinit.families``: transformers' ``is_transposed`` flag, torchtitan's
    tags, the family's ``expert_stack``, else how the module's ``forward``
    multiplies the stack). A tensor shared by several names is written once,
    under the first name ``named_parameters`` gives; when its names' roles get
    different rules from the scheme (tied embeddings and LM head), it takes
    the role ``Scheme.tied_role`` names (the rule of the scheme's reference:
    ``depth_init`` the head's, the OLMo recipes the embedding's), else it is
    refused. A scheme that treats residual output projections apart warns
    when the model's repeated blocks hold none it recognises, naming the
    override that classifies them. Each parameter's stream
    id is ``stream_for(fully qualified name)`` and its key ``seed``, so its
    values do not depend on order, on the other parameters or on writing it
    alone (``only=``, or a submodule with ``prefix=``). Names are canonical
    (``tinit.identity.canonical_names``): a compiled, checkpointed, DDP,
    FSDP1 or PEFT-wrapped model is classified, keyed, selected by ``only=``
    and summarised under its unwrapped names, and gets the unwrapped model's
    values.

    Meta models and loaded weights: a model with every parameter off the
    meta device is written as asked (all of it, or what ``only=`` selects).
    A model with some parameters on the meta device (a partly loaded
    checkpoint) has only its meta parameters (and meta buffers) materialised
    on ``device`` and written: a parameter that holds values is neither
    re-allocated nor written unless ``only=`` selects it or
    ``reinit_loaded=True`` (docs/usage.md, "Meta models and loaded weights").

    Sharded models: DTensor parameters (FSDP2 ``fully_shard``, tensor
    parallel) are written shard by shard from their global indices, with no
    communication; fans come from the logical shapes, so every rank's shards
    assemble into exactly the unsharded model's initial weights.

    Args:
        model: any ``nn.Module``. Parameters on the meta device need ``device``.
        scheme: name in ``tinit.schemes.SCHEMES``, or "hf": a Hugging Face model's own init code
            (its ``_init_weights``, run by transformers' ``initialize_weights``) with every random
            draw keyed by name under ``tinit.patch_torch_init(seed=seed, model=model)``, meta
            tensors materialised first (docs/usage.md, "The model's own init: hf"); it takes
            ``seed``, ``device`` and ``reinit_loaded`` (remove every ``_is_hf_initialized`` mark
            first) only, refuses the other arguments and options, and returns an empty list.
        seed: Philox key in [0, 2**64).
        n_layers: blocks L: an int for every tower, or a mapping from
            "encoder"/"decoder" (an encoder-decoder model's N and M) or tower
            names ("model.language_model.layers") to L; counted per tower
            from names when None, and for the towers a mapping leaves out.
        d_model: residual width; inferred when None.
        overrides: {regex: role} or {regex: {"role", "layer", "stack",
            "layout", "fan_in", "fan_out", "options", "qkv", "experts",
            "value"}}; the first pattern that ``re.search``-es a fully
            qualified name (or one of a tied tensor's names) wins over
            inference; a group named ``layer`` in the pattern gives the
            block index, the name up to it the block container. "qkv": a fused q/k/v
            projection's layout, a ``tinit.families.FusedQKV`` or (heads,
            kv_heads, head_dim, layout); "experts": the expert count of a 2-D
            grouped layout; "value": a finite constant written whatever the
            scheme.
        only: write only parameters whose name (or a tied alias) matches this
            regex or predicate; the others still count for L and d_model, and
            those on the meta device stay there. It selects loaded parameters
            of a partly meta model explicitly.
        prefix: prepended to every name (initialise a submodule under its
            name in the full model, e.g. "model.layers.3."; pass n_layers).
        device: when parameters are on the meta device, materialise them
            there first (``materialise_``: only what is on the meta device is
            allocated, ties kept, meta buffers recomputed); checked (a known,
            present device, not meta) whenever given, and otherwise unused.
        backend: "auto" or a backend name.
        progress: optional callable wrapping the list of parameters (``tqdm``)
            as they are written one by one; used with ``grouped=False`` only
            (a grouped fill is one call).
        grouped: fill the truncated normals of all CPU parameters in one
            native call (``tinit.write_grouped_``); False writes them one at a
            time, as ``write_spec_`` would. The values are identical; both
            check every parameter before writing any.
        unclassified: what to do with parameters no rule, module type or
            override classifies: "error" (default) refuses, naming them;
            "skip" leaves them as they are (refused for a model on the meta
            device, whose memory ``to_empty`` leaves uninitialised); a role
            of ``tinit.schemes.ROLES`` initialises them as that role.
        reinit_loaded: on a model with some parameters on the meta device,
            also write the parameters that are not (a loaded checkpoint's);
            False (default) writes only the meta ones unless ``only=`` selects
            others. No effect on a model with no meta parameter.
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
        TypeError: ``model`` not a torch.nn.Module; ``device`` neither a str nor a torch.device; ``unclassified``
            not a str; ``prefix`` not a str, ``grouped`` or ``reinit_loaded`` not a bool, ``only``
            neither a regex str nor a callable, ``n_layers`` / ``d_model`` /
            an override's ``layer``, ``fan_in``, ``fan_out`` not ints,
            ``overrides`` not a mapping.
        ValueError: an invalid regex in ``only`` or ``overrides``; ``n_layers``
            or ``d_model`` < 1; a ``backend`` that cannot fill the model's
            dtypes on ``device`` (checked before a meta model is materialised);
            parameters on the meta device without ``device``; a
            ``device`` torch does not know, 'meta', or a CUDA device that is not
            here; parameters no rule classifies under ``unclassified="error"``
            (named), or under "skip" on a meta model; an ``unclassified`` that
            is no policy or role; a residual gate whose model value is unknown
            (named); ``n_layers`` keys naming no stack or tower; a model
            without residual gates for ``rezero``; a value the scheme needs is
            missing; a lost HF tie; a tensor tied between roles the scheme
            initialises differently with no rule for it (named, with its roles).
        TypeError: a parameter dtype tinit cannot fill, or an unknown option.
        All raised before anything is written.
    """
    if isinstance(scheme, str) and scheme == "hf":  # the model's own init code, not a per-parameter recipe
        from tinit._hf_init import init_hf_  # imported here: it builds on this module and on the patch

        others = {"n_layers": n_layers, "d_model": d_model, "overrides": overrides, "only": only, "prefix": prefix}
        others.update(backend=backend, progress=progress, unclassified=unclassified)
        return init_hf_(model, seed=seed, device=device, reinit_loaded=reinit_loaded, others={**others, **options})
    args = _arguments(
        model,
        scheme,
        options,
        seed=seed,
        unclassified=unclassified,
        prefix=prefix,
        grouped=grouped,
        reinit_loaded=reinit_loaded,
        only=only,
        n_layers=n_layers,
        d_model=d_model,
        backend=backend,
        overrides=overrides,
        device=device,
    )
    _retie_partly_loaded(model)
    entries, geometry = _walk(model, args)
    meta, target = _placement(model, entries, args)
    # Everything below up to materialising reads names and shapes only, so a meta model is
    # checked, and its specs chosen, before it is allocated.
    towers = depths(entries, args.n_layers)  # L per tower; gives every entry its tower
    d_model = args.d_model if args.d_model is not None else infer_d_model(model, entries)
    selected = _select(model, entries, args, meta)
    _check_gates(selected, entries, args)
    specs = _Specs(model, args, geometry, towers, d_model)
    _warn_unplaced_blocks(entries, geometry, specs, args.scheme_name)
    planned = [(entry, specs.of(entry)) for entry in selected]
    summary = [_summary(entry, spec) for entry, spec in planned]
    # Phase 8: every item checked (loaded ones included) before anything is allocated or written.
    plan = Plan.build(
        _items(planned), seed=args.seed, backend=args.backend, sequential=not args.grouped, where="init_model_"
    )
    if meta is not None:  # phase 7: only the meta parameters written (and meta buffers) are allocated
        keep = {id(entry.param) for entry, _ in planned if entry.param.is_meta}
        plan.bind(_materialise(model, target, recompute_buffers=True, keep=keep))
        _check_hf_tie(model)
    plan.run(progress)
    return summary
