"""``mup_param_groups``: optimiser param groups with muP's per-parameter learning rate, weight decay
and Adam eps (microsoft/mup's optimisers, or Megatron-Core's muP), or another recipe's (u-μP,
depth-muP, CompleteP). The rule is the recipe's own (``tinit.schemes.Scheme.param_group``,
``MuP.param_group``); this module finds each parameter's role, width dims, block and depth and
groups the parameters."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from tinit import schemes
from tinit._classify import (
    Geometry,
    apply_unclassified,
    check_n_layers,
    check_unclassified,
    classify,
    compile_overrides,
    depths,
    infer_d_model,
)


def mup_param_groups(
    model: torch.nn.Module,
    *,
    lr: float,
    base_width: int | None = None,
    d_model: int | None = None,
    n_layers: int | Mapping[str, int] | None = None,
    optimizer: str = "adam",
    readout: str = "zero",
    overrides: Mapping[str, str | Mapping] | None = None,
    weight_decay: float = 0.0,
    eps: float | None = None,
    reference: str = "mup",
    base_model: torch.nn.Module | Mapping[str, tuple[int, ...]] | None = None,
    delta_model: torch.nn.Module | Mapping[str, tuple[int, ...]] | None = None,
    unclassified: str = "error",
    scheme: str = "mup",
    options: Mapping | None = None,
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
    head's lr is ``tinit.schemes.MuP.lr_multiplier("head")`` (1 / m for Adam and SGD) and
    its weight decay follows lr * wd = base; with ``"multiplier"`` and
    ``"zero_multiplier"`` the head is mup's ``MuReadout`` and follows the
    rules above. Roles come from names as in ``init_model_`` (same
    ``overrides``). Parameters with equal (lr, weight_decay, eps) share a
    group; tied tensors appear once.

    ``scheme=`` another recipe: its ``Scheme.param_group`` decides, given each
    parameter's role, logical shape and layout (an expert stack's from its
    family, as ``init_model_`` reads it), block index and the blocks L of its
    stack (counted per tower as ``init_model_`` does, or ``n_layers``), d_model,
    ``base_width`` when given and the recipe's own ``options``:
    ``"u_mup"`` unit-scaling's ``lr_scale_func_adam`` / ``lr_scale_func_sgd``
    and ``scaled_parameters`` (``tinit.schemes.UnitMuP``), ``"completep"`` and
    ``"depth_mup"`` CompleteP's Table 1 AdamW rules (``tinit.schemes.CompleteP``).
    ``readout``, ``reference``, ``base_model`` and ``delta_model`` are muP's
    and refused with another scheme.

    Args:
        model: the model (may be on the meta device).
        lr: the learning rate tuned on the base-width model.
        base_width, readout: as for the ``mup`` scheme.
        d_model: the model's width; inferred as in ``init_model_`` when None.
        n_layers: blocks L, as for ``init_model_`` (counted per tower when None).
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
        scheme: the recipe whose optimiser rule applies (its ``Scheme.param_group``; the
            options above go to it).
        options: the recipe's own options (``{"base_depth": 2}`` for ``completep``), the same
            as ``init_model_``'s for it.
        **group_options: added to every group (e.g. ``betas=(0.9, 0.95)``).

    Returns:
        [{"params": [...], "lr": float, "lr_multiplier": float, "weight_decay": float,
        ("eps": float,) "names": [...]}, ...] ready for ``torch.optim.AdamW(groups)``
        (extra keys are kept by torch).

    Raises:
        ValueError: a parameter matches no role rule under
            ``unclassified="error"`` (all listed), a bad ``unclassified``, bad options,
            base shapes that do not match the model's names or ranks, or a tensor
            with more than two width dims; a muP argument with another scheme; the
            scheme's own refusals (an option out of range, an optimizer it has no rule for).
        TypeError: base_model/delta_model of another type, ``unclassified`` not a str,
            ``options`` not a mapping or holding an option the scheme does not take.
    """
    chosen = schemes.get(scheme)
    is_mup = isinstance(chosen, schemes.MuP)
    options = _check_options(
        chosen, is_mup, lr, weight_decay, eps, optimizer, readout, reference, base_model, delta_model, options
    )
    n_layers = check_n_layers(n_layers)
    policy = check_unclassified(unclassified, "mup_param_groups")
    modules = list(model.named_modules(remove_duplicate=False))
    entries = classify(model, "", compile_overrides(overrides), modules)
    if d_model is None:
        d_model = infer_d_model(model, entries)
    entries = apply_unclassified(entries, policy, "mup_param_groups")
    tower_depths, _ = depths(entries, n_layers)
    widths = None
    if is_mup and base_model is not None:
        widths = _mup_width_dims_from_base(entries, base_model, delta_model)
        base_width = None  # the width dims carry the multipliers
    elif is_mup and reference == "mup":
        widths = _mup_width_dims_from_roles(entries, d_model, schemes.MuP.width_mult(d_model, base_width))
    shared = {"d_model": d_model, **options}
    if is_mup:
        shared.update(base_width=base_width, readout=readout, reference=reference)
    elif base_width is not None:
        shared["base_width"] = base_width
    geometry = Geometry(modules)
    groups: dict[tuple, dict] = {}
    for entry in entries:
        settings = chosen.param_group(
            entry.role,
            width_mults=None if widths is None else widths[entry.name],
            ndim=entry.param.dim(),
            **_context(entry, geometry, tower_depths),
            lr=lr,
            weight_decay=weight_decay,
            eps=eps,
            optimizer=optimizer,
            **shared,
        )
        key = settings["lr_multiplier"], settings["weight_decay"], settings.get("eps")
        if key not in groups:
            groups[key] = {"params": [], "names": [], **settings, **group_options}
        groups[key]["params"].append(entry.param)
        groups[key]["names"].append(entry.name)
    return list(groups.values())


def _context(entry, geometry: Geometry, tower_depths: dict) -> dict:
    """What ``Scheme.param_group`` may know of ``entry``'s parameter besides its role: its logical shape,
    layout (an expert stack's by its family, as ``init_model_`` reads it), block and the blocks of its stack."""
    shape, layout, extra = tuple(entry.param.shape), entry.layout, {}
    if "experts" in entry.name or entry.override:
        layout, extra = geometry.args(entry.name, shape, entry.role, layout, entry.override)
    return {
        "shape": shape,
        "layout": layout,
        "experts": extra.get("experts"),
        "layer_idx": entry.layer,
        "n_layers": tower_depths.get(entry.tower),
    }


def _check_options(
    chosen, is_mup, lr, weight_decay, eps, optimizer, readout, reference, base_model, delta_model, options
) -> dict:
    """``mup_param_groups``'s own arguments checked before the model is read (ValueError naming them);
    the recipe's ``options`` as a dict."""
    if options is not None and not isinstance(options, Mapping):
        raise TypeError(f"mup_param_groups: options must be a mapping of the scheme's options, got {options!r}")
    if optimizer not in ("adam", "sgd"):
        raise ValueError(f"mup_param_groups: optimizer must be 'adam' or 'sgd', got {optimizer!r}")
    for name, value in (("lr", lr), ("weight_decay", weight_decay), ("eps", eps)):
        if value is None and name == "eps":
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0 or value == float("inf"):
            raise ValueError(f"mup_param_groups: {name} must be a finite number >= 0, got {value!r}")
    if not is_mup:
        given = [
            name
            for name, set_ in (
                ("readout", readout != "zero"),
                ("reference", reference != "mup"),
                ("base_model", base_model is not None),
                ("delta_model", delta_model is not None),
            )
            if set_
        ]
        if given:
            raise ValueError(
                f"mup_param_groups: {', '.join(given)} apply to scheme 'mup' only, not {chosen.name!r} "
                "(pass the scheme's own options in options=)"
            )
        return dict(options or {})
    if reference not in ("mup", "megatron"):
        raise ValueError(f"mup_param_groups: reference must be 'mup' or 'megatron', got {reference!r}")
    if reference == "megatron" and (base_model is not None or delta_model is not None):
        raise ValueError("mup_param_groups: base_model/delta_model apply to reference='mup' (mup's base shapes)")
    chosen.multipliers(readout=readout)  # checks readout
    return dict(options or {})


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
