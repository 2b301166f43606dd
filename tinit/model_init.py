"""Initialise every parameter of a model through tinit."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch

from tinit import schemes
from tinit.fill import fill_
from tinit.params import check_dtype
from tinit.roles import infer_layer, infer_role


def stream_for(name: str) -> int:
    """Stream id of a parameter: the first 8 bytes of SHA-256 of its name (uint64).

    Deriving the stream from the fully qualified name makes a parameter's values
    independent of initialisation order and of which other parameters exist.
    """
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")


@dataclass(frozen=True)
class ParamInit:
    """How one parameter was initialised (an entry of ``init_model_``'s summary)."""

    name: str
    role: str
    layer: int | None
    numel: int
    std: float | None
    trunc: float | None
    constant: float | None


def _count_layers(names) -> int | None:
    layers = [infer_layer(n) for n in names]
    layers = [x for x in layers if x is not None]
    return max(layers) + 1 if layers else None


def init_model_(model: torch.nn.Module, scheme: str = "gpt2", *, seed: int = 0,
                n_layers: int | None = None, backend: str = "auto", progress=None,
                **options) -> list[ParamInit]:
    """Initialise every parameter of ``model`` in place by ``scheme``.

    Roles and layer indices come from parameter names (``tinit.roles``). Tied
    parameters (the same tensor under two names) are written once, under the
    first name ``named_parameters`` gives. Each parameter's stream id is
    ``stream_for(name)`` and its key is ``seed``, so values do not depend on
    order or on the other parameters.

    Args:
        model: any ``nn.Module``; parameters must not be on the meta device
            (materialise with ``model.to_empty(device=...)`` first).
        scheme: name in ``tinit.schemes.SCHEMES``.
        seed: Philox key in [0, 2**64).
        n_layers: number of blocks L; inferred from names ("h.<i>", "layers.<i>") when None.
        backend: "auto" or a backend name.
        progress: optional callable wrapping the parameter list (e.g. ``tqdm``).
        **options: scheme options (``std=``, ``trunc=``).

    Returns:
        One ``ParamInit`` per parameter written, in ``named_parameters`` order.

    Raises:
        KeyError: unknown scheme; ValueError: a scheme needs a value that is
        missing, or a parameter is on the meta device; TypeError: a parameter
        has a dtype tinit cannot fill. All raised before anything is written.
    """
    named = list(model.named_parameters())
    on_meta = [name for name, param in named if param.device.type == "meta"]
    if on_meta:
        raise ValueError(f"init_model_: {len(on_meta)} parameters are on the meta device "
                         f"(first: {on_meta[0]}); materialise with model.to_empty(device=...) first")
    if n_layers is None:
        n_layers = _count_layers(n for n, _ in named)
    plan = []
    for name, param in named:
        role = infer_role(name)
        layer = infer_layer(name)
        spec = schemes.get(scheme).spec(role=role, layer_idx=layer, n_layers=n_layers,
                                        shape=tuple(param.shape), **options)
        check_dtype(param)
        plan.append((name, param, role, layer, spec))
    summary = []
    items = progress(plan) if progress is not None else plan
    for name, param, role, layer, spec in items:
        fill_(param, scheme, layer, role=role, n_layers=n_layers, seed=seed,
              stream=stream_for(name), backend=backend, **options)
        summary.append(ParamInit(name, role, layer, param.numel(),
                                 None if spec.constant is not None else spec.std,
                                 None if spec.constant is not None else spec.trunc,
                                 spec.constant))
    return summary
