"""``init_model_(model, "hf")``: a Hugging Face model's own init code, every random draw on tinit's stream.

Not a per-parameter recipe (``tinit.schemes.SCHEMES`` lists those): the values are what the model's
``_init_weights(module)`` writes, run by transformers' own ``PreTrainedModel.initialize_weights``
(``smart_apply``: children first, each sub-model by its own ``_init_weights``), as
``from_config`` and ``from_pretrained`` run it. The front end only prepares the model and runs that
method inside ``tinit.patch_torch_init(seed=s, model=model)``, so every random fill goes through the
patch's keyed functions (``tinit.nn.init.KEYED``, one ``tinit._plan.Plan`` per call): a parameter's
values come from its canonical name, a draw into a temporary from its module's name and the draw's
index in that call (docs/stream.md, "Keys under patch_torch_init"). Deterministic values (Mamba's
``A_log = log(1..H)``, ``D = 1``, zero-centred norms, the buffers ``_init_weights`` recomputes) are
the model's own.

Steps (``init_hf_``): the arguments and the model checked; meta tensors allocated on ``device``
(``tinit.materialise_``'s rules: ties restored, buffers recomputed by ``tinit.buffers``, the
floating-point buffers no recipe claims filled with NaN for the model's code to write); the
``_is_hf_initialized`` marks set as transformers' loader sets them (``_marks``); a tied output head
hidden behind a placeholder marked initialised while the model's code runs (``_hidden_ties``: the
tied tensor takes its source's init, as ``tie_weights`` after HF's own init leaves it); the model's
``initialize_weights``; every NaN buffer checked (MiniMax's ``slope_rate`` and decay buffers,
Falcon-H1's ``mup_vector``, Gemma-3n's ``per_layer_projection_scale`` and AltUp scales: computed by
the model's ``_init_weights``, no ``tinit.buffers`` recipe). Meta parameters start NaN too: one
the model's code never writes takes its constructor's value (``_replay_constructors``,
``_from_constructors``) or is refused, never returned as uninitialised memory. An in-place write the model's code makes
without transformers' guard (Mamba-2's ``rescale_prenorm_residual`` division) reaches a loaded
tensor of a module being initialised, as in transformers' own ``from_pretrained``.
"""

from __future__ import annotations

import contextlib
import math
import sys
import warnings

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from tinit._model_init import materialise_meta_, target_device
from tinit._patch import patch_torch_init
from tinit._plan import check_seed
from tinit.buffers import UninitialisedBufferError, constructor_args, rebuilt
from tinit.params import SUPPORTED_DTYPES, DtypeError

_MARK = "_is_hf_initialized"  # transformers' flag: a module or tensor its init must leave alone
_HF_MODULE = "transformers.modeling_utils"


def _pretrained_model_type():
    """transformers' ``PreTrainedModel``, or None when transformers is not imported (then no model is one)."""
    return getattr(sys.modules.get(_HF_MODULE), "PreTrainedModel", None)


def hf_tops(model: torch.nn.Module) -> list:
    """The topmost ``PreTrainedModel`` modules of ``model`` (itself, or those below a wrapper or a
    container), each once, in ``children()`` order."""
    kind = _pretrained_model_type()
    if kind is None:
        return []
    found, seen, stack = [], set(), [model]
    while stack:
        module = stack.pop()
        if id(module) in seen:
            continue
        seen.add(id(module))
        if isinstance(module, kind):
            found.append(module)
        else:
            stack.extend(reversed(list(module.children())))
    return found


def _tensors(module: torch.nn.Module):
    """(module, leaf, tensor) of every parameter and buffer of ``module``'s tree, tied ones each time."""
    for sub in module.modules():
        for members in (sub._parameters, sub._buffers):
            for leaf, tensor in members.items():
                if tensor is not None:
                    yield sub, leaf, tensor


# init_model_'s arguments that the model's own init does not take, at their defaults
_UNUSED = {
    "n_layers": None,
    "d_model": None,
    "overrides": None,
    "only": None,
    "prefix": "",
    "backend": "auto",
    "progress": None,
    "unclassified": "error",
}


def _refused(others: dict) -> None:
    """ValueError naming the ``init_model_`` arguments given that the model's own init does not take
    (any of ``_UNUSED`` off its default, any scheme option)."""
    given = {k: v for k, v in others.items() if k not in _UNUSED or not _is_default(v, _UNUSED[k])}
    if given:
        names = ", ".join(f"{k}={v!r}" for k, v in given.items())
        raise ValueError(
            f"init_model_: scheme 'hf' runs the model's own init code (its _init_weights), which takes none of "
            f"{names}; set what it reads on the model's config instead, or use a tinit recipe (tinit.schemes.SCHEMES)"
        )


def _is_default(value, default) -> bool:
    return value is None if default is None else isinstance(value, str) and value == default


def _checked_model(model, tops: list) -> None:
    """Refuse a model without a Hugging Face model, meta tensors no Hugging Face model holds (nothing
    would write them) and parameters of a dtype tinit cannot fill; before anything is written."""
    if not tops:
        raise TypeError(
            f"init_model_: scheme 'hf' runs a Hugging Face model's own init (transformers.PreTrainedModel"
            f"._init_weights); model ({type(model).__name__}) holds no PreTrainedModel"
        )
    inside = {id(t) for top in tops for _, _, t in _tensors(top)}
    outside = [n for n, t in _named_tensors(model) if id(t) not in inside and t.is_meta]
    if outside:
        raise ValueError(
            f"init_model_: scheme 'hf': {len(outside)} tensor(s) on the meta device belong to no Hugging Face "
            f"model, and no model code would write them: {', '.join(outside[:8])}; initialise them with a tinit "
            "recipe (init_model_(model, 'normal', only=...)) first"
        )
    for name, param in model.named_parameters():
        if id(param) in inside and param.is_floating_point() and param.dtype not in SUPPORTED_DTYPES:
            raise DtypeError(f"init_model_: scheme 'hf': parameter {name} is {param.dtype}, which tinit does not fill")


def _named_tensors(model: torch.nn.Module):
    yield from model.named_parameters()
    yield from model.named_buffers()


def constructor_made(tops: list) -> list:
    """The off-meta parameters of a meta-built Hugging Face model that its own constructor made off the
    meta device (DiffLlama's ``torch.normal`` lambdas, XLNet's ``torch.FloatTensor`` weights): no
    loaded values, to be initialised like the meta ones.

    The rule, per top model holding meta tensors: its class built again under ``torch.device("meta")``
    from its ``config`` names the parameters its constructor makes off meta; when every off-meta
    parameter of the model is one of those and none is marked ``_is_hf_initialized``, they are taken
    as the constructor's, not a user's. Any other off-meta parameter (a partly loaded checkpoint), a
    mark, or a class that cannot be rebuilt so: all are taken as loaded and left alone.
    """
    found = []
    for top in tops:
        params = dict(top.named_parameters())
        off = {n for n, p in params.items() if not p.is_meta}
        if not off or len(off) == len(params) or any(getattr(params[n], _MARK, False) for n in off):
            continue
        try:
            with torch.device("meta"), warnings.catch_warnings(), torch.random.fork_rng(devices=[]):
                warnings.simplefilter("ignore")
                again = type(top)(top.config)
        except Exception:  # noqa: BLE001, S112 - a model that cannot be rebuilt keeps every off-meta tensor
            continue
        made = {n for n, p in again.named_parameters() if not p.is_meta}
        if off <= made:
            found.extend(params[n] for n in sorted(off))
    return found


def _marks(tops: list, reinit_loaded: bool, made: set[int]) -> tuple[list, list]:
    """The ``_is_hf_initialized`` marks the model's init must see, read on the model before it is
    materialised: with ``reinit_loaded`` none (every module and tensor to unmark); else a module
    holding a meta tensor loses its mark (the tensor has no values), and when the model is partly on
    meta every tensor holding values is marked, as transformers' loader marks a loaded one, so the
    guarded init functions leave it alone, except the constructor's own (``made``: their ids, from
    ``_constructor_made``), which count as meta.

    Returns:
        (the modules and tensors to unmark, the off-meta tensors to mark), to apply once materialised.
    """
    held = [(module, tensor) for top in tops for module, _, tensor in _tensors(top)]
    if reinit_loaded:
        return [m for top in tops for m in top.modules()] + [tensor for _, tensor in held], []
    meta = [(module, tensor) for module, tensor in held if tensor.is_meta or id(tensor) in made]
    loaded = [tensor for _, tensor in held if not tensor.is_meta and id(tensor) not in made] if meta else []
    return [module for module, _ in meta], loaded


@contextlib.contextmanager
def _hidden_ties(tops: list):
    """While the model's init runs, each tied target of ``all_tied_weights_keys`` (``lm_head.weight`` of
    a model tying it to its embeddings) is a meta placeholder marked initialised, so only its source's
    init writes the shared tensor: the values transformers' ``from_config`` leaves after its init and
    ``tie_weights``. Put back on exit."""
    hidden = []
    try:
        for top in tops:
            for target, source in dict(getattr(top, "all_tied_weights_keys", None) or {}).items():
                owner, _, leaf = target.rpartition(".")
                try:
                    module = top.get_submodule(owner)
                    shared, origin = module._parameters.get(leaf), top.get_parameter(source)
                except AttributeError:  # a tied key naming no parameter (a module-level tie): nothing hidden
                    continue
                if shared is None or shared is not origin:
                    continue
                placeholder = torch.nn.Parameter(torch.empty_like(shared, device="meta"), shared.requires_grad)
                setattr(placeholder, _MARK, True)
                module._parameters[leaf] = placeholder
                hidden.append((module, leaf, shared))
        yield
    finally:
        for module, leaf, shared in reversed(hidden):
            module._parameters[leaf] = shared


class _Writes(TorchDispatchMode):
    """Which of the fresh parameters the model's init writes, seen at the dispatcher.

    A NaN pre-fill and an ``isnan`` pass over every parameter would show the same, at two full
    passes over the model's memory (on a 1 B-parameter Llama, more than the init itself). Instead
    every aten op with a written argument (``Tensor(a!)`` in its schema: ``normal_``, ``fill_``,
    ``copy_``, tinit's own ``tinit::trunc_normal_``, ``out=`` variants), on the parameter or on any
    view or ``.data`` alias of its storage, is looked at before it runs:

    - a write over the parameter's whole storage range (a dense view covering it) marks it written;
    - a write over part of it (``weight.data[padding_idx].zero_()``) before any whole write first
      fills the parameter with NaN, so what the partial write leaves shows afterwards
      (``to_check``), as a full NaN pre-fill would have shown it.

    Writes the dispatcher does not see (``param.data = t``, a write through ``.numpy()``) are caught
    by the storage's address changing or by two NaN sentinels, the first and last element, being
    overwritten. ``unwritten`` then names the parameters to give their constructor's value or refuse,
    filled with NaN whole so ``_from_constructors`` writes every element.
    """

    def __init__(self, params: dict):
        super().__init__()
        self._params = params
        self._where = {}  # storage address -> [(name, first element, element count)]
        self._address = {}
        for name, param in params.items():
            address = param.untyped_storage().data_ptr()
            self._address[name] = address
            span = (param.storage_offset(), param.numel())
            self._where.setdefault(address, []).append((name, *span))
            with torch.no_grad():
                flat = param.detach().view(-1)
                if flat.numel():
                    flat[0] = math.nan
                    flat[-1] = math.nan
        self._whole: set[str] = set()
        self._partial: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        for i, spec in enumerate(func._schema.arguments):
            if spec.alias_info is None or not spec.alias_info.is_write:
                continue
            value = kwargs.get(spec.name) if spec.kwarg_only or i >= len(args) else args[i]
            for tensor in value if isinstance(value, (list, tuple)) else (value,):
                if isinstance(tensor, torch.Tensor):
                    self._seen(tensor)
        return func(*args, **kwargs)

    def _seen(self, tensor: torch.Tensor) -> None:
        if tensor.is_meta:  # a hidden tie's placeholder (``_hidden_ties``): no storage
            return
        held = self._where.get(tensor.untyped_storage().data_ptr())
        if not held:
            return
        start, count = tensor.storage_offset(), tensor.numel()
        end = (
            start + 1 + sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride(), strict=True))
            if count
            else start
        )
        # torch refuses in-place writes into internally overlapping views, so a written view is dense
        # exactly when its elements span as many storage slots as it has elements
        dense = end - start == count
        for name, first, n in held:
            if name in self._whole or end <= first or start >= first + n:  # written already, or not touched
                continue
            if dense and start <= first and start + count >= first + n:
                self._whole.add(name)
            elif name not in self._partial:
                self._partial.add(name)
                self._params[name].detach().fill_(math.nan)  # inside the mode's own dispatch: not seen

    def _untracked(self, name: str) -> bool:
        param = self._params[name]
        if param.untyped_storage().data_ptr() != self._address[name] or not param.numel():
            return True
        flat = param.detach().view(-1)
        return not (bool(torch.isnan(flat[0])) or bool(torch.isnan(flat[-1])))

    def unwritten(self) -> list[str]:
        """The parameters no write reached, each filled with NaN (call once the model's init ran)."""
        if not hasattr(self, "_unwritten"):
            self._unwritten = [
                n for n in self._params if n not in self._whole and n not in self._partial and not self._untracked(n)
            ]
            with torch.no_grad():
                for name in self._unwritten:
                    self._params[name].detach().fill_(math.nan)
        return self._unwritten

    def to_check(self) -> list[str]:
        """The parameters that may hold NaN left by the model's code: written in part, or not at all."""
        partial = [n for n in self._params if n in self._partial and n not in self._whole]
        return partial + [n for n in self.unwritten() if n not in self._partial]


def _check_written(model: torch.nn.Module, names: list[str], integral: bool = False) -> None:
    """UninitialisedBufferError naming the NaN-filled buffers the model's init left (partly) NaN
    (``integral``: the integral buffers of ``names``, none rebuilt)."""
    if not names:
        return
    left = names if integral else [name for name in names if bool(torch.isnan(model.get_buffer(name)).any())]
    if left:
        raise UninitialisedBufferError(
            f"init_model_: scheme 'hf': the model's _init_weights did not compute {len(left)} buffer(s) that tinit "
            f"cannot recompute either: {', '.join(left[:8])}; register a tinit.buffers.BufferRecipe for the module "
            "type (tinit.buffers.register)",
            left,
        )


def _conv1d_type():
    """transformers' ``Conv1D`` (GPT-style transposed linear), or None when transformers is not imported."""
    return getattr(sys.modules.get("transformers.pytorch_utils"), "Conv1D", None)


def _replay_constructors(model: torch.nn.Module, names: list[str]) -> None:
    """Inside the patch: the values a constructor draws that the model's ``_init_weights`` does not
    write again, for the module types whose constructor is known. transformers' ``Conv1D.__init__``
    (``pytorch_utils``): ``weight`` ``normal_(std=0.02)``, ``bias`` zeros; OpenAI GPT's
    ``_init_weights`` leaves both to it. ``names``: the parameters the model's code never wrote
    (``_Writes.unwritten``)."""
    conv1d = _conv1d_type()
    if conv1d is None:
        return
    for name in names:
        owner, _, leaf = name.rpartition(".")
        module = model.get_submodule(owner)
        tensor = model.get_parameter(name)
        if type(module) is not conv1d:
            continue
        if leaf == "weight":
            torch.nn.init.normal_(tensor, std=0.02)
        elif leaf == "bias":
            torch.nn.init.zeros_(tensor)


def _from_constructors(model: torch.nn.Module, names: list[str]) -> list[str]:
    """Give each tensor the model's code left NaN (never written: a constructor's value, such as
    Data2Vec's or Reformer's ``lm_head.bias = nn.Parameter(torch.zeros(n))``, or a buffer the model's
    ``__init__`` computes) the value its owning module's own constructor gives, where that value is
    deterministic: the module built again on the CPU from its arguments (``tinit.buffers.constructor_args``)
    under two torch seeds (``tinit.buffers.rebuilt``), the tensor taken when both
    builds agree. Whole Hugging Face models are not rebuilt. Only the NaN entries are written.

    Returns:
        The names not resolved (no arguments, a build that fails, a random or mismatching value).
    """
    by_owner: dict[str, list[str]] = {}
    for name in names:
        by_owner.setdefault(name.rpartition(".")[0], []).append(name)
    kind, left = _pretrained_model_type(), []
    for owner, group in by_owner.items():
        module = model.get_submodule(owner)
        leaf0 = group[0].rpartition(".")[2]
        first = module._parameters.get(leaf0, module._buffers.get(leaf0))
        dtype = first.dtype if first.is_floating_point() else None
        whole = kind is not None and isinstance(module, kind)  # a whole model is not rebuilt
        args = None if whole else constructor_args(model, owner, module, dtype)
        builds = (None if args is None else rebuilt(module, args)) or []
        for name in group:
            leaf = name.rpartition(".")[2]
            target = module._parameters.get(leaf)
            if target is None:
                target = module._buffers.get(leaf)
            values = [b._parameters.get(leaf, b._buffers.get(leaf)) for b in builds]
            if (
                len(values) != 2
                or any(v is None or v.shape != target.shape or v.dtype != target.dtype for v in values)
                or not torch.equal(values[0], values[1])
            ):
                left.append(name)
                continue
            with torch.no_grad():
                if target.is_floating_point():
                    target.copy_(torch.where(torch.isnan(target), values[0].to(target.device), target))
                else:  # an integral buffer cannot show what was written: all of it is the constructor's
                    target.copy_(values[0])
    return left


def _check_params_written(model: torch.nn.Module, names: list[str]) -> None:
    """ValueError naming the materialised parameters still (partly) NaN: neither the model's init nor
    its constructors' values (``_from_constructors``) wrote them; never returned as uninitialised memory."""
    if names:
        raise ValueError(
            f"init_model_: scheme 'hf': the model's _init_weights does not write {len(names)} parameter(s) of this "
            f"meta-built model, and their constructor's value cannot be recomputed (random, or the module cannot be "
            f"rebuilt): {', '.join(names[:8])}{', ...' if len(names) > 8 else ''}; initialise them with a tinit "
            "recipe (init_model_(model, 'normal', only=...)) or build the model off the meta device"
        )


def init_hf_(model: torch.nn.Module, *, seed, device, reinit_loaded, others: dict) -> list:
    """``init_model_(model, "hf", ...)``: the model's own init on tinit's stream (the module docstring).

    Args:
        model: a module holding one or more Hugging Face models (a compiled or wrapped one too).
        seed: the Philox key, an int in [0, 2**64).
        device: where to materialise meta tensors (required when there are any), or None.
        reinit_loaded: remove every ``_is_hf_initialized`` mark first, so the whole model is written.
        others: the other ``init_model_`` arguments and scheme options (refused unless at their defaults).

    Returns:
        An empty list: the model's code decides each value, no per-parameter spec is chosen.

    Raises:
        TypeError, ValueError, tinit.params.DtypeError: refused arguments or model, before anything is
            written; a parameter neither the model's init nor its constructor's value
            (``_from_constructors``) writes (ValueError, after). tinit.buffers.UninitialisedBufferError:
            a meta buffer no recipe, no model code and no constructor computes (after allocating).
            RuntimeError: a tie could not be restored.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"init_model_: model must be a torch.nn.Module, got {type(model).__name__}")
    seed = check_seed(seed)
    if not isinstance(reinit_loaded, bool):
        raise TypeError(f"init_model_: reinit_loaded must be True or False, got {type(reinit_loaded).__name__}")
    _refused(others)
    tops = hf_tops(model)
    _checked_model(model, tops)
    meta = next((n for n, t in _named_tensors(model) if t.is_meta), None)
    if meta is not None and device is None:
        raise ValueError(
            f"init_model_: parameters are on the meta device (first: {meta}); pass device=... "
            "or materialise with tinit.materialise_(model, device)"
        )
    target = None if device is None else target_device(device)
    made = {id(t) for t in constructor_made(tops)} if meta is not None else set()
    unmark, mark = _marks(tops, reinit_loaded, made)
    # Meta parameters start NaN, so one the model's code never writes shows (then takes its
    # constructor's value, or is refused) instead of being returned as uninitialised memory.
    fresh = [n for n, p in model.named_parameters() if (p.is_meta or id(p) in made) and p.is_floating_point()]
    nan_buffers = materialise_meta_(model, target) if meta is not None else []
    integral = [n for n in nan_buffers if not model.get_buffer(n).is_floating_point()]
    nan_buffers = [n for n in nan_buffers if n not in set(integral)]
    if integral:  # not NaN-checkable (DeepseekV4's tid2eid): the constructor's value, before the model's init
        _check_written(model, _from_constructors(model, integral), integral=True)
    writes = _Writes({name: model.get_parameter(name) for name in fresh})
    for holder in unmark:
        holder.__dict__.pop(_MARK, None)
    marked = [tensor for tensor in mark if not getattr(tensor, _MARK, False)]
    for tensor in marked:
        setattr(tensor, _MARK, True)
    try:
        if all(getattr(m, _MARK, False) for top in tops for m in top.modules()):
            warnings.warn(
                "init_model_: every module of the model is marked initialised by transformers "
                "(_is_hf_initialized: built and initialised by Hugging Face, or loaded), so scheme 'hf' writes "
                "nothing; pass reinit_loaded=True to run the model's init again on tinit's stream",
                UserWarning,
                stacklevel=3,
            )
        else:
            with _hidden_ties(tops), patch_torch_init(seed=seed, model=model):
                with writes:
                    for top in tops:
                        top.initialize_weights()
                _replay_constructors(model, writes.unwritten())
    finally:
        for tensor in marked:
            tensor.__dict__.pop(_MARK, None)
    left = [n for n in writes.to_check() if bool(torch.isnan(model.get_parameter(n)).any())]
    left_buffers = [n for n in nan_buffers if bool(torch.isnan(model.get_buffer(n)).any())]
    unresolved = set(_from_constructors(model, left + left_buffers))
    _check_params_written(model, [n for n in left if n in unresolved])
    _check_written(model, [n for n in left_buffers if n in unresolved])
    return []
