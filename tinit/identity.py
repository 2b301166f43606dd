"""Canonical parameter identity: the name a parameter has in the unwrapped, unsharded model.

A parameter's stream id is a hash of its name (``tinit.stream_for``), so the
name must not depend on how the model is wrapped or laid out. Wrappers put a
component into every name below them: ``torch.compile``'s ``OptimizedModule``
(``_orig_mod``), activation checkpointing's ``CheckpointWrapper``
(``_checkpoint_wrapped_module``), DDP (``module``), FSDP1
(``_fsdp_wrapped_module``), PEFT (``base_model.model`` and a LoRA layer's
``base_layer``). Frameworks that split a model number its members locally
(Megatron-Core's layers per pipeline stage, its experts per expert-parallel
rank). The canonical name drops the wrappers' components and maps the local
numbers to global ones; for a model with neither, it is the name
``named_parameters`` gives.

One registry, ``RENAMES``: a ``Rename`` per module type, matched against the
qualified names of a module's type and its bases (nothing is imported to
match, so tinit never imports torch.distributed, PEFT or Megatron for it).
Its ``paths`` maps a member path below a module of that type (a child, a
deeper module, a parameter or buffer, dotted, relative to that module) to its
canonical replacement, relative to the same module, or to None: drop the
path's components (a wrapper). ``register_wrapper`` and ``register_rename``
add entries; CONTRIBUTING lists the files to touch for a built-in one.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import NamedTuple

import torch

__all__ = ["RENAMES", "Rename", "canonical_name", "canonical_names", "register_rename", "register_wrapper"]


class Rename(NamedTuple):
    """How the members of one module type are named canonically.

    Attributes:
        owner: the qualified name of the module type (``f"{cls.__module__}.{cls.__qualname__}"``);
            a module matches when its type or one of its bases has this name.
        paths: ``paths(module) -> Mapping[str, str | None]``: dotted member paths relative to
            ``module`` to their canonical replacement (relative to ``module`` too) or None (the
            components are dropped); or a lazy reference ``"package.module:function"`` to such a
            function, imported on first match.
    """

    owner: str
    paths: Callable[[torch.nn.Module], Mapping[str, str | None]] | str


def _wrapper(attr: str) -> Callable[[torch.nn.Module], Mapping[str, None]]:
    """The ``paths`` of a wrapper that holds the wrapped module as its child ``attr``."""
    drop = {attr: None}

    def paths(module: torch.nn.Module) -> Mapping[str, None]:
        return drop

    paths.__qualname__ = f"wrapper({attr!r})"
    return paths


# torch's own wrappers' children; the components tinit drops from a bare name (``canonical_name``
# without a model) are the ones that are torch-private attribute names, so no user module has them.
_NAME_ONLY_WRAPPERS = ("_orig_mod", "_checkpoint_wrapped_module", "_fsdp_wrapped_module")

RENAMES: list[Rename] = [
    Rename("torch._dynamo.eval_frame.OptimizedModule", _wrapper("_orig_mod")),
    Rename(
        "torch.distributed.algorithms._checkpoint.checkpoint_wrapper.ActivationWrapper",
        _wrapper("_checkpoint_wrapped_module"),
    ),
    Rename("torch.nn.parallel.distributed.DistributedDataParallel", _wrapper("module")),
    Rename(
        "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel", _wrapper("_fsdp_wrapped_module")
    ),
    Rename("peft.peft_model.PeftModel", _wrapper("base_model")),
    Rename("peft.tuners.tuners_utils.BaseTuner", _wrapper("model")),
    Rename("peft.tuners.tuners_utils.BaseTunerLayer", _wrapper("base_layer")),
    # Megatron-Core: global layer and expert numbers, one identity for a tied output layer (tinit.megatron)
    Rename("megatron.core.transformer.transformer_block.TransformerBlock", "tinit.megatron:layer_paths"),
    Rename("megatron.core.transformer.moe.experts.SequentialMLP", "tinit.megatron:expert_paths"),
    Rename("megatron.core.transformer.moe.experts.TEGroupedMLP", "tinit.megatron:grouped_expert_paths"),
    Rename(
        "megatron.core.models.common.language_module.language_module.LanguageModule",
        "tinit.megatron:tied_output_paths",
    ),
]

# type -> its matching paths functions, RENAMES order; cleared when RENAMES changes
_BY_TYPE: dict[type, tuple] = {}
_SEEN = [tuple(RENAMES)]  # the registry the cache was filled from (it is a public list: compared whole)


def _qualified(owner, what: str) -> str:
    if isinstance(owner, type):
        return f"{owner.__module__}.{owner.__qualname__}"
    if not isinstance(owner, str) or not owner:
        raise TypeError(f"{what}: cls must be a class or its qualified name (a str), got {type(owner).__name__}")
    return owner


def register_wrapper(cls: type | str, attr: str) -> None:
    """Drop the component ``attr`` below every module of type ``cls`` from canonical names.

    For a wrapper module that holds the wrapped module as its child ``attr``
    (e.g. a framework's ``ModelWrapper(module=...)``): the wrapped module's
    parameters get the names they have unwrapped.

    Args:
        cls: the wrapper class, or its qualified name (``"package.module.Class"``; subclasses match).
        attr: the child's attribute name (one name component, no dots).

    Raises:
        TypeError: ``cls`` is neither a class nor a non-empty str, or ``attr`` is not a str.
        ValueError: ``attr`` is empty or has a dot.
    """
    owner = _qualified(cls, "register_wrapper")
    if not isinstance(attr, str):
        raise TypeError(f"register_wrapper: attr must be a str, got {type(attr).__name__}")
    if not attr or "." in attr:
        raise ValueError(f"register_wrapper: attr must be one name component, got {attr!r}")
    RENAMES.append(Rename(owner, _wrapper(attr)))


def register_rename(cls: type | str, paths: Callable[[torch.nn.Module], Mapping[str, str | None]] | str) -> None:
    """Rename members below every module of type ``cls`` in canonical names (``Rename``).

    Args:
        cls: the module class, or its qualified name (subclasses match).
        paths: ``paths(module) -> {relative dotted path: canonical relative path or None}``, or a
            lazy ``"package.module:function"`` reference to one.

    Raises:
        TypeError: ``cls`` is neither a class nor a non-empty str, or ``paths`` is neither callable
            nor a ``"module:function"`` str.
    """
    owner = _qualified(cls, "register_rename")
    if not (callable(paths) or (isinstance(paths, str) and paths.count(":") == 1)):
        raise TypeError(f"register_rename: paths must be callable or a 'module:function' str, got {paths!r}")
    RENAMES.append(Rename(owner, paths))


def _resolved(paths):
    if isinstance(paths, str):
        module, _, function = paths.partition(":")
        if function.startswith("_"):  # a lazy reference is a use across modules: public names only
            raise ValueError(f"a Rename's paths reference must name a public function, got {paths!r}")
        return getattr(importlib.import_module(module), function)
    return paths


def _renames_of(kind: type) -> tuple:
    if len(_SEEN[0]) != len(RENAMES) or any(a is not b for a, b in zip(_SEEN[0], RENAMES, strict=True)):
        _BY_TYPE.clear()
        _SEEN[0] = tuple(RENAMES)
    found = _BY_TYPE.get(kind)
    if found is None:
        names = {f"{base.__module__}.{base.__qualname__}" for base in kind.__mro__}
        found = _BY_TYPE[kind] = tuple(_resolved(r.paths) for r in RENAMES if r.owner in names)
    return found


def _join(base: str, rest: str | None) -> str:
    if not rest:
        return base
    return f"{base}.{rest}" if base else rest


def _rules(module: torch.nn.Module, base: str, pending: tuple) -> tuple:
    """``pending`` plus ``module``'s own rules: (remaining components, canonical base, replacement)."""
    own = _renames_of(type(module))
    if not own:
        return pending
    rules = list(pending)
    for paths in own:
        mapping = paths(module)
        if not isinstance(mapping, Mapping):
            raise TypeError(
                f"the Rename paths {getattr(paths, '__qualname__', paths)!r} of {type(module).__qualname__} "
                f"returned {type(mapping).__name__}, not a mapping of str paths to str or None"
            )
        for path, replacement in mapping.items():
            if not isinstance(path, str) or not (replacement is None or isinstance(replacement, str)):
                raise TypeError(
                    f"the Rename paths of {type(module).__qualname__} map str paths to str or None, "
                    f"got {path!r}: {replacement!r}"
                )
            rules.append((tuple(path.split(".")), base, replacement))
    return tuple(rules)


def _step(rules: tuple, component: str, canonical: str) -> tuple[str, tuple]:
    """(the canonical name of member ``component`` under a module named ``canonical``, its rules)."""
    name, deeper = _join(canonical, component), []
    for rest, base, replacement in rules:
        if rest[0] != component:
            continue
        if len(rest) == 1:
            name = _join(base, replacement)
        else:
            deeper.append((rest[1:], base, replacement))
    return name, tuple(deeper)


def _modules(model: torch.nn.Module, prefix: str) -> tuple[list, bool]:
    """(the model's ``named_modules(remove_duplicate=False)`` list, whether any of its types has a rule)."""
    modules = list(model.named_modules(remove_duplicate=False, prefix=prefix.removesuffix(".")))
    found = [_renames_of(kind) for kind in {type(module) for _, module in modules}]  # every type cached
    return modules, any(found)


def _walk(modules: list, root: str):
    """(raw name, canonical name, module, rules) of every module of ``modules`` (the model's own
    ``named_modules(remove_duplicate=False)``, an override of it included, as ``named_parameters``
    reads it), in its order. A module's rules reach the members below it."""
    by_type = _BY_TYPE  # filled for every type of ``modules`` by ``_modules``
    known: dict[str, tuple[str, tuple]] = {}
    for raw, module in modules:
        parent = known.get(raw.rpartition(".")[0]) if raw != root else None
        if raw == root:
            canonical, rules = root, ()
        elif parent is not None and not parent[1]:  # nothing renamed below the parent: the fast path
            canonical = raw if parent[0] == raw.rpartition(".")[0] else _join(parent[0], raw.rpartition(".")[2])
            rules = ()
        else:
            canonical, rules = _slow_step(known, raw)
        if by_type[type(module)]:
            rules = _rules(module, canonical, rules)
        known[raw] = canonical, rules
        yield raw, canonical, module, rules


def _slow_step(known: dict, raw: str) -> tuple[str, tuple]:
    """(canonical name, rules) of module ``raw`` from the nearest module above it that was walked."""
    base, _, component = raw.rpartition(".")
    rest = [component]
    while base and base not in known:  # an override's name below no module it listed
        base, _, component = base.rpartition(".")
        rest.append(component)
    canonical, rules = known.get(base, (base, ()))
    for component in reversed(rest):
        canonical, rules = _step(rules, component, canonical)
    return canonical, rules


def canonical_modules(model: torch.nn.Module, prefix: str = "") -> list[tuple[str, torch.nn.Module]]:
    """(canonical name, module) of every module of ``model``, in ``named_modules(remove_duplicate=False)``
    order (a wrapper and the module it wraps have the same name; the wrapped one comes later)."""
    modules, renamed = _modules(model, prefix)
    if not renamed:  # no wrapper, no renamed member: the canonical names are the raw ones
        return modules
    return [(canonical, module) for _, canonical, module, _ in _walk(modules, prefix.removesuffix("."))]


def canonical_names(model: torch.nn.Module, prefix: str = "") -> dict[str, str]:
    """Every parameter and buffer name of ``model`` mapped to its canonical name.

    Args:
        model: the (possibly wrapped, compiled or split) model.
        prefix: put before every name, raw and canonical (as ``named_parameters(prefix=...)``).

    Returns:
        ``{raw name: canonical name}`` for every name ``named_parameters(remove_duplicate=False)``
        and ``named_buffers(remove_duplicate=False)`` give (tied tensors: each name once).

    Raises:
        TypeError: ``model`` is not a ``torch.nn.Module`` or ``prefix`` is not a str.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"canonical_names: model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(prefix, str):
        raise TypeError(f"canonical_names: prefix must be a str, got {type(prefix).__name__}")
    names = {}
    modules, renamed = _modules(model, prefix)
    if not renamed:
        walked = ((raw, raw, module, ()) for raw, module in modules)
    else:
        walked = _walk(modules, prefix.removesuffix("."))
    for raw, canonical, module, rules in walked:
        for members in (module._parameters, module._buffers):
            for leaf, tensor in members.items():
                if tensor is not None:
                    names[_join(raw, leaf)] = _step(rules, leaf, canonical)[0] if rules else _join(canonical, leaf)
    return names


def canonical_name(name: str, model: torch.nn.Module | None = None) -> str:
    """The canonical name of a parameter or buffer.

    Without ``model`` only the components of torch's wrappers whose attribute
    names are torch-private are dropped (``_orig_mod`` of ``torch.compile``,
    ``_checkpoint_wrapped_module`` of activation checkpointing,
    ``_fsdp_wrapped_module`` of FSDP1, as
    ``torch.distributed.fsdp``'s ``clean_tensor_name`` drops the last two):
    a bare name cannot tell DDP's ``module`` from a user's child named so.
    With ``model`` every ``RENAMES`` entry applies (``canonical_names``).

    Args:
        name: a fully qualified name, as ``named_parameters`` gives it.
        model: the model ``name`` belongs to, or None.

    Returns:
        The canonical fully qualified name (``name`` itself for an unwrapped model's parameter).

    Raises:
        TypeError: ``name`` is not a str, or ``model`` is neither None nor a module.
        ValueError: ``model`` has no parameter or buffer ``name``.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str (a parameter's qualified name), got {type(name).__name__}")
    if model is not None:
        names = canonical_names(model)
        if name not in names:
            raise ValueError(f"canonical_name: the model has no parameter or buffer named {name!r}")
        return names[name]
    if "_orig_mod" not in name and "_wrapped_module" not in name:
        return name
    return ".".join(part for part in name.split(".") if part not in _NAME_ONLY_WRAPPERS)
