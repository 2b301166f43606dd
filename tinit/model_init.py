"""Initialise every parameter of a model through tinit: roles, depth, ties, meta models."""

from __future__ import annotations

import functools
import gc
import hashlib
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import NamedTuple

import torch

from tinit import architecture, buffers, dispatch, schemes
from tinit._fill import FillItem, write_grouped_
from tinit._plan import check_seed, local_of
from tinit._plan import located as _located
from tinit.classify import (
    _NO_OVERRIDE,
    _apply_unclassified,
    _check_n_layers,
    _check_unclassified,
    _classify,
    _compile_overrides,
    _count_or_none,
    _depths,
    _infer_d_model,
    _pattern,
)
from tinit.params import STREAM_VERSION, SUPPORTED_DTYPES

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
        local, layout = local_of(model.get_parameter(name))
        if local.numel() == 0 or local.is_meta:
            continue
        if layout is None:
            local[index].zero_()
        else:
            first, length, _ = layout.narrow(0, index, 1)
            if length:
                local.narrow(0, first, length).zero_()


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
    parameter, and the collections that thousands of parameters trigger walk
    the heap. The benchmark ``bench_init_model_overhead`` measures what the
    pause saves of the planning time of a 1,803-tensor Llama: 6.3 % in the
    median of ten runs on a loaded 2-core machine (-2 to 11 %, above 5 % in
    seven); keep it only while it pays more than 5 %. Nothing the call makes
    outlives it in a cycle, so nothing is left to collect.
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
            native call (``tinit.write_grouped_``); False writes them
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
        TypeError: ``model`` not a torch.nn.Module; ``device`` neither a str nor a torch.device; ``unclassified``
            not a str; ``prefix`` not a str, ``grouped`` not a bool, ``only``
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
            missing; a lost HF tie.
        TypeError: a parameter dtype tinit cannot fill, or an unknown option.
        All raised before anything is written.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"init_model_: model must be a torch.nn.Module, got {type(model).__name__}")
    chosen = schemes.get(scheme)
    seed = check_seed(seed)
    policy = _check_unclassified(unclassified, "init_model_")
    if not isinstance(prefix, str):
        raise TypeError(f"init_model_: prefix must be a str, got {type(prefix).__name__} {prefix!r}")
    if not isinstance(grouped, bool):
        raise TypeError(f"init_model_: grouped must be True or False, got {type(grouped).__name__} {grouped!r}")
    if only is not None and not callable(only):
        only = _pattern(only, "init_model_: only").search
    n_layers = _check_n_layers(n_layers)
    d_model = _count_or_none(d_model, "init_model_: d_model", 1)
    if backend != "auto" and backend not in dispatch.BACKENDS:
        raise ValueError(f"unknown tinit backend {backend!r}; choose from {sorted(dispatch.BACKENDS)} or 'auto'")
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
    if meta is not None and backend != "auto":
        _check_backend_fills(backend, device, {e.param.dtype for e in entries})
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
        match = only
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
    add_item, add_summary = items.append, summary.append
    for entry in selected:
        param, override = entry.param, entry.override
        if param.dtype not in _SUPPORTED:
            raise TypeError(
                f"init_model_: parameter {entry.name} has dtype {param.dtype}; tinit fills "
                "float32, float64, bfloat16 and float16"
            )
        shape, layout, geometric = param.shape, entry.layout, _NO_OVERRIDE
        if entry.role in ("attn_qkv", "mlp_gate_up") or "experts" in entry.name or override:
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
        add_item(FillItem(param, spec, stream, 0))
        add_summary(
            ParamInit(
                entry.name,
                entry.role,
                entry.layer,
                param.numel(),
                spec,
                entry.stack,
                entry.tied,
                STREAM_VERSION,
                entry.tower,
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
