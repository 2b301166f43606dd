"""``patch_torch_init``: run existing model code's ``torch.nn.init`` calls on tinit's stream.

While a patch is active, the seven random initialisers of ``torch.nn.init``
(``uniform_``, ``normal_``, ``trunc_normal_``, ``xavier_uniform_``,
``xavier_normal_``, ``kaiming_uniform_``, ``kaiming_normal_``) and, when
``timm.layers.weight_init`` is imported, timm's ``trunc_normal_``,
``trunc_normal_tf_``, ``variance_scaling_`` and ``lecun_normal_`` fill
through ``tinit.nn.init``.

How calls are caught: the patch swaps the code object of each of these
function objects for a one-line trampoline into tinit, and puts the original
code back on exit (dropping, both ways, torch.compile's parameter list cached
for the function object, so a later trace binds the code it sees). Every
reference to them is routed, wherever it was taken:
``torch.nn.init.normal_``, ``nn.Linear.reset_parameters``, the copies bound
at import time (``from torch.nn.init import xavier_uniform_``,
Hugging Face's ``transformers.initialization.TORCH_INIT_FUNCTIONS``, a
``functools.partial(nn.init.trunc_normal_, std=0.02)`` in torchtitan's model
configs, timm models' ``from timm.layers import trunc_normal_``). Hugging
Face's guarded wrappers (``transformers.initialization.normal_`` and the
rest) are left as they are: they test ``_is_hf_initialized`` first and call
the table's function only for a tensor still to initialise, so the guards
keep working and a skipped tensor is not a call. ``torch.rand``,
``torch.randn``, ``torch.rand_like`` and ``torch.randn_like`` are routed only
inside a Hugging Face ``_initialize_weights(module)`` call (the scope rule of
``patch_torch_init``); elsewhere they are torch's own.

Tensor methods are C methods of ``torch._C.TensorBase``, whose code cannot
be swapped; but ``torch.Tensor`` is a Python class, and an attribute set on
it shadows the C method for every tensor (Parameters, ``.data``, DTensors).
With a seed the patch sets ``torch.Tensor.normal_`` and ``uniform_`` (routed
on a known parameter, torch's own on any other tensor) and ``new_empty``
(torch's, the new tensor keyed when made from a known parameter), the module
attributes ``torch.rand``, ``randn``, ``rand_like`` and ``randn_like`` (a
call through the ``torch`` module; a copy bound by ``from torch import rand``
is torch's own), and, when transformers is imported, the method
``PreTrainedModel._initialize_weights`` (the same method, run inside a scope
that names its module), and puts them back on exit. It is process-wide, as the function routing is, and costs
other torch calls nothing. A ``torch.overrides.TorchFunctionMode`` would see
the same calls, on the entering thread only, at a cost to every torch call
on it (about 2 us on this project's CPU, ``bench_patch_lookup``): the class
attributes were chosen for that cost.

Which parameter a call's tensor is, and where in it, is ``tinit._keys``: the
model parts' table, filled again when torch's registration hooks (installed
with the routing) report a change, and the modules registered inside the
patch.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import itertools
import math
import sys
import threading
import types
import warnings
from collections.abc import Iterable, Mapping
from typing import ClassVar

import torch
import torch.nn.init
from torch.nn.modules import module as torch_module

from tinit._keys import Keys, block_of
from tinit._model_init import stream_for
from tinit._plan import check_seed, eager_under_compile
from tinit.nn import init as tinit_init

__all__ = ["patch_torch_init"]

_TORCH_NAMES = (
    "uniform_",
    "normal_",
    "trunc_normal_",
    "xavier_uniform_",
    "xavier_normal_",
    "kaiming_uniform_",
    "kaiming_normal_",
)
_TIMM_MODULE = "timm.layers.weight_init"
_TIMM_NAMES = ("trunc_normal_", "trunc_normal_tf_", "variance_scaling_", "lecun_normal_")
# timm's constant: the std of a standard normal truncated to (-2, 2) (timm's variance_scaling_)
_TRUNC2_STD = 0.87962566103423978

# torch's own function objects, taken when tinit is imported (not at entry, when a library's own
# patch, e.g. transformers' guard_torch_init_functions, may hold the module attribute)
_TORCH_ORIGINALS = {name: torch.nn.init.__dict__[name] for name in _TORCH_NAMES}


def _trampoline(*args, _tinit_route, **kwargs):
    return _tinit_route(*args, **kwargs)


def _timm_trunc_normal_tf(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, *, seed, stream, block=None):
    """timm's ``trunc_normal_tf_``: N(0, 1) truncated to [a, b] (bounds in std), then * std + mean."""
    mean, std, a, b = (float(v) for v in (mean, std, a, b))
    if not a <= b:
        raise ValueError(f"timm.layers.trunc_normal_tf_ needs a <= b, got a={a}, b={b}")
    low, high = sorted((mean + a * std, mean + b * std))
    if std == 0:
        return tinit_init.KEYED["uniform_"](tensor, mean, mean, seed=seed, stream=stream, block=block)
    return tinit_init.KEYED["trunc_normal_"](tensor, mean, abs(std), low, high, seed=seed, stream=stream, block=block)


def _timm_variance_scaling(tensor, scale=1.0, mode="fan_in", distribution="normal", *, seed, stream, block=None):
    """timm's ``variance_scaling_``: var = scale / fan (fan_in, fan_out or their mean), returns None."""
    fan_in, fan_out = torch.nn.init._calculate_fan_in_and_fan_out(tensor)
    fans = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2}
    if mode not in fans:
        raise ValueError(f"timm.layers.variance_scaling_: mode must be one of {list(fans)}, got {mode!r}")
    variance = scale / fans[mode]
    if distribution == "truncated_normal":
        _timm_trunc_normal_tf(tensor, std=math.sqrt(variance) / _TRUNC2_STD, seed=seed, stream=stream, block=block)
    elif distribution == "normal":
        tinit_init.KEYED["normal_"](tensor, 0.0, math.sqrt(variance), seed=seed, stream=stream, block=block)
    elif distribution == "uniform":
        bound = math.sqrt(3 * variance)
        tinit_init.KEYED["uniform_"](tensor, -bound, bound, seed=seed, stream=stream, block=block)
    else:
        raise ValueError(f"invalid distribution {distribution}")


def _timm_lecun_normal(tensor, *, seed, stream, block=None):
    _timm_variance_scaling(
        tensor, mode="fan_in", distribution="truncated_normal", seed=seed, stream=stream, block=block
    )


_TIMM_KEYED = {
    "trunc_normal_": tinit_init.KEYED["trunc_normal_"],
    "trunc_normal_tf_": _timm_trunc_normal_tf,
    "variance_scaling_": _timm_variance_scaling,
    "lecun_normal_": _timm_lecun_normal,
}


class _State:
    """The one process-wide routing: who is inside, with which seed and keys, and what to put back."""

    lock = threading.RLock()
    depth = 0
    seed: int | None = None
    counter = itertools.count()
    keys: Keys | None = None
    warn = 0  # active entries with warn_unkeyed=True
    hooks: ClassVar[list] = []
    saved: ClassVar[list[tuple[types.FunctionType, types.CodeType, tuple | None, dict | None]]] = []
    # (owner, attribute, what its __dict__ held or None): torch.Tensor's methods, torch's random factories,
    # transformers' PreTrainedModel._initialize_weights
    methods: ClassVar[list[tuple[object, str, object]]] = []
    traced: tuple | None = None  # torch's fake and functional tensor types, imported on first use
    inside = threading.local()  # .method / .maker: this thread is inside a routed tensor method;
    # .scopes: the _Scope of each Hugging Face _initialize_weights(module) call this thread is inside


class _Scope:
    """One ``PreTrainedModel._initialize_weights(module)`` call: its module, the module's canonical name
    (looked up on the first draw that needs it) and the draws into unknown tensors made so far."""

    __slots__ = ("count", "module", "name")
    unresolved = object()

    def __init__(self, module) -> None:
        self.module, self.name, self.count = module, _Scope.unresolved, 0


def _scope_stream() -> int | None:
    """The stream of the next draw into a tensor that is no known parameter, by the scope rule: inside
    Hugging Face's ``_initialize_weights(module)``, ``stream_for(f"{name}:_init_weights[{k}]")``, name
    the module's canonical name and k the draw's index inside that call; None outside such a call or
    for a module no known model holds (the caller then takes its own rule)."""
    scopes = _State.inside.__dict__.get("scopes")
    keys = _State.keys
    if not scopes or keys is None or _State.seed is None:
        return None
    scope = scopes[-1]
    if scope.name is _Scope.unresolved:
        scope.name = keys.module_name(scope.module)
    if scope.name is None:
        return None
    index, scope.count = scope.count, scope.count + 1
    return stream_for(f"{scope.name}:_init_weights[{index}]")


_eager = eager_under_compile


def _numbered(call: str, tensor) -> int:
    """The next number of the call-number rule; a UserWarning naming the call under ``warn_unkeyed``."""
    stream = next(_State.counter)
    if _State.warn:
        shape = tuple(tensor.shape) if isinstance(tensor, torch.Tensor) else type(tensor).__name__
        warnings.warn(
            f"tinit.patch_torch_init: {call} on a tensor of shape {shape} that is no known model's parameter "
            f"(or its module is not attached yet): keyed by the call-number rule, stream {stream}",
            UserWarning,
            stacklevel=5,
        )
    return stream


def _route(keyed, seed: int | None, public=None, call: str = ""):
    """The function a patched call runs: ``public`` (or ``keyed`` with a drawn key) when seed is None,
    else ``keyed`` with key ``seed`` and the stream of the parameter the tensor is (``Keys.find``:
    ``stream_for`` of its canonical name, the view placed in its logical tensor), or when no known
    module holds it the call's number among such calls since the outermost entry."""
    if seed is None:
        if public is not None:
            return _eager(public)

        def drawn(*args, **kwargs):
            return keyed(*args, seed=None, stream=0, **kwargs)

        return _eager(drawn)

    def keyed_call(*args, **kwargs):
        tensor = args[0] if args else kwargs.get("tensor")
        keys = _State.keys
        entry = None if keys is None else keys.find(tensor, call)
        if entry is None:
            stream = _scope_stream()
            if stream is None:
                # taken before any check, so a meta, empty, refused or no-op call still uses up its number
                stream = _numbered(call, tensor)
            return keyed(*args, seed=seed, stream=stream, **kwargs)
        block = block_of(tensor, entry, call)
        return keyed(*args, seed=seed, stream=entry.stream, block=block, **kwargs)

    return _eager(keyed_call)


# Tensor methods routed with a seed, by the keyed function they fill as (``uniform_``'s bounds are
# called ``from`` and ``to`` there), and the method that makes a new tensor from a parameter
# (torchtitan's fused-qkv init draws into ``new_empty`` temporaries, then copies them in).
_METHODS = ("normal_", "uniform_")
_MAKERS = ("new_empty",)
_UNIFORM_KWARGS = {"from": "a", "to": "b"}


def _method_route(name: str, original):
    """``torch.Tensor.<name>`` while patched: name-keyed on a known parameter, else ``original``."""
    call = f"Tensor.{name}"

    def keyed(self, *args, **kwargs):
        keys, seed = _State.keys, _State.seed
        # torch's own method where torch would refuse it (an in-place write on a leaf, or a view of
        # one, that requires grad while grad is on): its error, not a silent write
        if keys is None or seed is None or (self.requires_grad and torch.is_grad_enabled()):
            return original(self, *args, **kwargs)
        entry = keys.find(self, call)
        if entry is None:
            stream, block = _scope_stream(), None
            if stream is None:  # no known parameter's, outside a scope: torch's own method and RNG, never numbered
                return original(self, *args, **kwargs)
        else:
            stream, block = entry.stream, block_of(self, entry, call)
        if name == "uniform_":
            kwargs = {_UNIFORM_KWARGS.get(k, k): v for k, v in kwargs.items()}
        tinit_init.KEYED[name](self, *args, seed=seed, stream=stream, block=block, **kwargs)
        return self

    def method(self, *args, **kwargs):
        if _State.inside.__dict__.get("method"):
            # a TorchFunctionMode (torch.set_default_device's DeviceContext, ...) hands the call back
            # to this attribute from inside ``original``: once is the call, the rest is torch's
            return original(self, *args, **kwargs)
        _State.inside.method = True
        try:
            return routed_method(self, *args, **kwargs)
        finally:
            _State.inside.method = False

    def routed_method(self, *args, **kwargs):
        if isinstance(self, _traced_types()):
            # dynamo traces a tensor method on fake tensors and records it as a graph node: the
            # "eager" backend calls this attribute again at run time (keyed), the aot and inductor
            # backends run aten's op (torch's RNG): said so, once per trace
            warnings.warn(
                f"tinit.patch_torch_init: {call} traced by torch.compile is keyed only where the compiled graph "
                "calls the method (backend 'eager'); aot and inductor backends run torch's own op (torch's RNG). "
                "Call torch.nn.init's function instead (a graph break, keyed) or the method outside compiled code",
                UserWarning,
                stacklevel=2,
            )
            return original(self, *args, **kwargs)
        return keyed(self, *args, **kwargs)

    method.__name__, method.__qualname__ = name, call
    return method


def _traced_types() -> tuple[type, ...]:
    """The tensor types torch's tracers run tensor methods on (fake and functional tensors)."""
    if _State.traced is None:
        from torch._subclasses.fake_tensor import FakeTensor
        from torch._subclasses.functional_tensor import FunctionalTensor

        _State.traced = (FakeTensor, FunctionalTensor)
    return _State.traced


def _maker_route(name: str, original):
    """``torch.Tensor.<name>`` while patched: ``original``, the new tensor keyed by a name derived from
    the parameter it was made from (``tinit._keys.Keys.derive``)."""

    def maker(self, *args, **kwargs):
        if _State.inside.__dict__.get("maker"):  # handed back by a TorchFunctionMode (``method``)
            return original(self, *args, **kwargs)
        _State.inside.maker = True
        try:
            made = original(self, *args, **kwargs)
        finally:
            _State.inside.maker = False
        keys = _State.keys
        if keys is None or _State.seed is None or isinstance(self, _traced_types()):
            return made
        try:
            source = keys.find(self, name)
            if source is not None:
                block_of(self, source, name)
        except ValueError:  # a view that is no box of one parameter: an untracked temporary
            source = None
        if source is not None and isinstance(made, torch.Tensor):
            keys.derive(made, source, name)
        return made

    maker.__name__, maker.__qualname__ = name, f"Tensor.{name}"
    return maker


# torch's random factories routed inside a scope (``_scope_stream``): name -> (the tinit.nn.init fill,
# the factory that makes the tensor without drawing)
_FACTORIES = {
    "rand": ("uniform_", torch.empty),
    "randn": ("normal_", torch.empty),
    "rand_like": ("uniform_", torch.empty_like),
    "randn_like": ("normal_", torch.empty_like),
}
_HF_MODULE = "transformers.modeling_utils"


def _factory_route(name: str, original, fill: str, make):
    """``torch.<name>`` while patched: inside a scope, the tensor ``make`` gives (torch's arguments, the
    generator checked and not drawn from) filled by ``tinit.nn.init.KEYED[fill]`` (U(0, 1) or N(0, 1))
    at the scope's stream; elsewhere ``original``."""

    def factory(*args, **kwargs):
        if not torch.compiler.is_compiling():
            generator = kwargs.pop("generator", None)
            stream = _scope_stream()
            if stream is not None:
                if generator is not None and not isinstance(generator, torch.Generator):
                    raise TypeError(
                        f"torch.{name}: generator must be a torch.Generator, got {type(generator).__name__}"
                    )
                made = make(*args, **kwargs)
                with torch.no_grad():
                    tinit_init.KEYED[fill](made, 0.0, 1.0, seed=_State.seed, stream=stream)
                return made
            if generator is not None:
                kwargs["generator"] = generator
        return original(*args, **kwargs)

    factory.__name__, factory.__qualname__ = name, name
    return factory


def _transformers_models():
    """transformers' ``modeling_utils`` when transformers is imported (importing it then: the package
    loads its submodules lazily, and a model built inside the patch needs the method routed), else None."""
    if "transformers" not in sys.modules:
        return None
    try:
        return importlib.import_module(_HF_MODULE)
    except Exception:  # noqa: BLE001  a transformers that does not import: no Hugging Face model to route
        return None


def _scoped(original):
    """``PreTrainedModel._initialize_weights`` while patched: ``original`` inside a ``_Scope`` of its module."""

    @functools.wraps(original)
    def _initialize_weights(self, module, *args, **kwargs):
        scopes = _State.inside.__dict__.setdefault("scopes", [])
        scopes.append(_Scope(module))
        try:
            return original(self, module, *args, **kwargs)
        finally:
            scopes.pop()

    return _initialize_weights


def _set(owner, name: str, value) -> None:
    _State.methods.append((owner, name, owner.__dict__.get(name)))
    setattr(owner, name, value)


def _set_methods(hf_models) -> None:
    for name, route in [(n, _method_route) for n in _METHODS] + [(n, _maker_route) for n in _MAKERS]:
        _set(torch.Tensor, name, route(name, getattr(torch._C.TensorBase, name)))
    for name, (fill, make) in _FACTORIES.items():
        _set(torch, name, _factory_route(name, torch.__dict__[name], fill, make))
    model = getattr(hf_models, "PreTrainedModel", None)
    if isinstance(model, type) and "_initialize_weights" in model.__dict__:
        _set(model, "_initialize_weights", _scoped(model.__dict__["_initialize_weights"]))


# torch.compile's argument binder caches each function's parameter list, read from its ``__code__``, per
# function object (``_spec_cache`` there, torch 2.10 on), and ``torch._dynamo.reset`` keeps it: a code swap
# must drop the function's entry both ways, or a later trace binds arguments to the other code's names.
_DYNAMO_BINDER = "torch._dynamo.variables.functions"


def _forget_traced(fn: types.FunctionType) -> None:
    """Drop torch.compile's cached parameter list of ``fn`` (nothing when dynamo is not imported)."""
    cache = getattr(sys.modules.get(_DYNAMO_BINDER), "_spec_cache", None)
    if cache is not None:
        cache.pop(fn, None)


def _swap(fn: types.FunctionType, route) -> None:
    if fn.__code__.co_freevars:  # a closure's code cannot be swapped for the trampoline's
        raise RuntimeError(f"tinit.patch_torch_init cannot route {fn.__module__}.{fn.__qualname__} (a closure)")
    code = _trampoline.__code__.replace(co_name=fn.__name__)
    if hasattr(code, "co_qualname"):
        code = code.replace(co_qualname=fn.__qualname__)
    _State.saved.append((fn, fn.__code__, fn.__defaults__, fn.__kwdefaults__))
    fn.__code__, fn.__defaults__, fn.__kwdefaults__ = code, None, {"_tinit_route": route}
    _forget_traced(fn)


def _install(seed: int | None) -> None:
    for name, fn in _TORCH_ORIGINALS.items():
        if fn.__module__ != "torch.nn.init":  # tinit imported while another library's patch held the name
            raise RuntimeError(f"tinit.patch_torch_init: torch.nn.init.{name} was {fn.__module__}.{fn.__qualname__}")
    hf_models = None if seed is None else _transformers_models()  # imported before anything is routed
    try:
        for name in _TORCH_NAMES:
            keyed = tinit_init.KEYED[name]
            _swap(_TORCH_ORIGINALS[name], _route(keyed, seed, getattr(tinit_init, name), f"torch.nn.init.{name}"))
        timm_init = sys.modules.get(_TIMM_MODULE)
        if timm_init is not None:
            for name in _TIMM_NAMES:
                fn = getattr(timm_init, name, None)
                if isinstance(fn, types.FunctionType):
                    _swap(fn, _route(_TIMM_KEYED[name], seed, call=f"timm.layers.{name}"))
        if seed is not None:
            _set_methods(hf_models)
            keys = _State.keys
            _State.hooks = [
                torch_module.register_module_module_registration_hook(keys.on_module),
                torch_module.register_module_parameter_registration_hook(keys.on_tensor),
                torch_module.register_module_buffer_registration_hook(keys.on_tensor),
            ]
    except BaseException:
        _uninstall()
        raise


def _uninstall() -> None:
    while _State.methods:
        owner, name, held = _State.methods.pop()
        if held is None:
            delattr(owner, name)  # the C method of torch._C.TensorBase shows through again
        else:
            setattr(owner, name, held)
    while _State.hooks:
        _State.hooks.pop().remove()
    while _State.saved:
        fn, code, defaults, kwdefaults = _State.saved.pop()
        fn.__code__, fn.__defaults__, fn.__kwdefaults__ = code, defaults, kwdefaults
        _forget_traced(fn)


def _checked_seed(seed):
    """None, or ``seed`` as ``tinit._plan.check_seed`` takes it (numpy integers too, as every entry point)."""
    return None if seed is None else check_seed(seed)


class _ModelError(TypeError, ValueError):
    """A ``model`` that is neither a module nor an iterable of modules (a TypeError and a ValueError)."""


def _checked_parts(model) -> tuple[torch.nn.Module, ...]:
    """``model`` as a tuple of model parts (modules), read once.

    Raises:
        _ModelError: anything else, naming ``model`` (or ``model[i]``).
    """
    if model is None:
        return ()
    if isinstance(model, torch.nn.Module):
        return (model,)
    if isinstance(model, (str, bytes, torch.Tensor, Mapping)) or not isinstance(model, Iterable):
        raise _ModelError(
            f"model must be a torch.nn.Module, an iterable of them (model parts) or None, got {type(model).__name__}"
        )
    parts = tuple(model)
    for index, part in enumerate(parts):
        if not isinstance(part, torch.nn.Module):
            raise _ModelError(f"model[{index}] must be a torch.nn.Module (a model part), got {type(part).__name__}")
    return parts


class patch_torch_init(contextlib.ContextDecorator):
    """Route ``torch.nn.init``'s random initialisers (and timm's) to tinit while active.

    Use as ``with tinit.patch_torch_init(seed=0, model=parts): ...`` or as a
    decorator ``@tinit.patch_torch_init(seed=0)``. Inside, the seven random
    initialisers of ``torch.nn.init`` fill as ``tinit.nn.init``'s functions
    of the same name (torch's signatures, fans, gains, absolute bounds,
    no-grad writes, return values; values from tinit's stream, the same
    distribution as torch's, not torch's values); timm's ``trunc_normal_``
    (absolute bounds) as ``tinit.nn.init.trunc_normal_``, and its
    ``trunc_normal_tf_`` / ``variance_scaling_`` / ``lecun_normal_`` (bounds
    in units of std) with their own semantics. Every reference to these
    functions is routed, including copies taken at import time (the module
    docstring says how); the deterministic ones (``zeros_``, ``ones_``, ...),
    ``orthogonal_``, ``sparse_`` and ``torch.randn`` are not. With a seed,
    the tensor methods ``Tensor.normal_`` and ``Tensor.uniform_`` are routed
    too, on a known parameter only (below).

    Keys (docs/stream.md, "Keys under patch_torch_init"):
        seed=None: each call that writes something draws its Philox key from
            torch's RNG (or its ``generator``), as ``tinit.nn.init`` does, so
            ``torch.manual_seed`` makes the build reproducible; ``model`` is
            checked and not used, tensor methods are not routed.
        seed=s, the name rule: a call whose tensor is a known parameter or
            buffer, or a view of one (``.data``, ``detach()``, basic slices,
            ``narrow``, a ``torch.chunk`` / ``split`` piece, a DTensor
            parameter, its local tensor, a view of FSDP2's padded local
            storage), fills with key s and stream ``tinit.stream_for(name)``,
            name the canonical name (``tinit.identity.canonical_names``); the
            view gets exactly the elements ``tinit.nn.init.KEYED[f](whole,
            *args, seed=s, stream=stream_for(name))`` writes at its positions
            in the parameter's logical (unsharded) tensor. Order and subset
            of the calls do not matter; every layout gets the same values.
            Fans (xavier, kaiming, timm's variance scaling) are those of the
            tensor the call was given, as torch computes them: a slice gets
            the slice's fans, a DTensor its logical shape's.
            Known parameters are (1) those of ``model``'s parts (canonical
            names per part: pipeline stages that keep the global names, as
            torchtitan's split, give the whole model's values), also modules
            attached to a part inside the patch; (2) those registered while
            the patch is active (torch's global registration hooks) on a
            module that has since been attached to a parent: named under the
            topmost module above it, as ``named_parameters`` of that module
            names it (e.g. Hugging Face's ``_init_weights`` after the
            modules are built). A name already keyed under another live
            topmost module (a second model built in the same entry, two
            towers with the same member names) falls back to the call rule.
            (3) a tensor made by ``p.new_empty(...)`` from a known
            parameter ``p``, e.g. the q, k, v temporaries torchtitan's
            fused-qkv init draws and then copies into the parameter: keyed
            as a whole tensor of its own by the name
            ``f"{name}:new_empty[k]"``, k counting the tensors made from that
            parameter since the outermost entry.
        seed=s, the scope rule: inside Hugging Face's
            ``PreTrainedModel._initialize_weights(module)`` (which runs the
            model's ``_init_weights(module)``), a draw into a tensor that is
            no known parameter (a temporary: Mamba-2's ``torch.rand`` whose
            result becomes ``dt_bias``, Qwen3-Next's
            ``torch.empty(...).uniform_`` for ``A_log``) fills with key s and
            stream ``tinit.stream_for(f"{name}:_init_weights[{k}]")``, name
            the module's canonical name (known as a parameter's module is:
            in a ``model`` part, or in the topmost module above it) and
            k = 0, 1, ... the index of the draw among such draws inside that
            call, element i at stream index i. Such draws are the routed
            functions, the tensor methods ``normal_`` / ``uniform_`` and
            ``torch.rand`` / ``randn`` / ``rand_like`` / ``randn_like``
            (U(0, 1), N(0, 1), made by ``torch.empty`` / ``empty_like`` with
            the call's arguments). Outside such a call, or for a module no
            known model holds, the factories and tensor methods are torch's
            own and the functions take the call-number rule.
        seed=s, the call-number rule: every other routed function call
            (inside ``nn.Linear``'s constructor, before the module is
            attached; a module built before the patch and not given as
            ``model``; a plain tensor) takes the next number n = 0, 1, 2, ...
            among such calls since the outermost entry and fills with key s
            and stream id n, element i at stream index i (a DTensor's logical
            element i). Every such call takes a number, also one that writes
            nothing (a meta or empty tensor, a refused argument), so ranks
            stay in step; the same model code must then make the same calls
            in the same order everywhere. ``warn_unkeyed=True`` warns
            (UserWarning naming the call) each time. A tensor method on a
            tensor that is not a known parameter's is torch's own (torch's
            RNG), never numbered. Calls from several threads interleave their
            numbers in whatever order they run.
        A meta tensor is found by identity only (a meta parameter itself, not
        a view of it). torch's RNG is neither read nor advanced with a seed;
        a ``generator`` argument is checked and not drawn from.

    Scope: the routing is process-wide while active, so calls from other
    threads are routed too, by the same rules: the functions by a code swap,
    the tensor methods ``normal_``, ``uniform_`` and ``new_empty`` by
    attributes set on the Python class ``torch.Tensor``, which shadow
    ``torch._C.TensorBase``'s C methods (no ``TorchFunctionMode``: other torch
    calls pay nothing; the module docstring says why). Entering and leaving are serialised by a lock; the routing and
    the registration hooks are installed on the first entry and removed on
    the last exit (a reference count), also when the body raises. Nested
    entries (and entries from other threads while one is active) must give
    the same seed as the active one, share its call counter and add their
    ``model`` parts until the outermost exit; another seed raises.

    Args:
        seed: None, or the Philox key of every call: an int in [0, 2**64).
        model: None, a ``torch.nn.Module``, or an iterable of them (the model
            parts of a pipeline stage), read once.
        warn_unkeyed: warn each time a call is keyed by the call-number rule.

    Returns:
        A context manager that is also a decorator (``contextlib.ContextDecorator``);
        ``with`` binds the patch object itself. It may be entered any number of times. One
        that is freed without ever being entered or used as a decorator (a bare
        ``tinit.patch_torch_init()`` statement, which routes nothing) warns (RuntimeWarning).

    Raises:
        TypeError: ``seed`` is not an int or None (bool and float refused);
            ``model`` is not a module, an iterable of modules or None (also a
            ValueError; it names ``model`` or ``model[i]``); ``warn_unkeyed``
            is not a bool. All before anything is installed.
        ValueError: ``seed`` outside [0, 2**64); on entry, a seed other
            than the one of the patch already active; on a call, a tensor
            that views two parameters, or one and memory outside it, or that
            is not a box of the parameter (a transposed or reshaped view
            across rows), before anything is written.
        RuntimeError: on entry, a function to route that cannot be (a
            closure); nothing is left routed then.
    """

    def __init__(self, seed: int | None = None, model=None, *, warn_unkeyed: bool = False) -> None:
        self.seed = _checked_seed(seed)
        self.parts = _checked_parts(model)
        if type(warn_unkeyed) is not bool:
            raise TypeError(f"warn_unkeyed must be a bool, got {type(warn_unkeyed).__name__}")
        self.warn_unkeyed = warn_unkeyed
        self._used = False

    def __call__(self, func):
        self._used = True
        return super().__call__(func)

    def __del__(self) -> None:
        # A bare ``tinit.patch_torch_init()`` statement routes nothing: say so, as CPython does for a
        # coroutine never awaited, rather than let the model be built by torch's own init unnoticed.
        if not getattr(self, "_used", True):
            warnings.warn(
                "tinit.patch_torch_init() was created and never entered, so it routed nothing: use "
                "`with tinit.patch_torch_init(...):` around the model's construction, or decorate a function",
                RuntimeWarning,
                stacklevel=2,
            )

    def __enter__(self):
        self._used = True
        with _State.lock:
            if _State.depth == 0:
                keys = Keys()
                if self.seed is not None:
                    keys.add_parts(self.parts)
                _State.counter, _State.keys = itertools.count(), keys
                try:
                    _install(self.seed)
                except BaseException:
                    _State.keys = None
                    raise
                _State.seed = self.seed
            elif self.seed != _State.seed:
                raise ValueError(
                    f"tinit.patch_torch_init(seed={self.seed!r}) entered while patch_torch_init(seed={_State.seed!r}) "
                    "is active: nested patches must give the same seed"
                )
            elif self.parts and self.seed is not None:
                _State.keys.add_parts(self.parts)
            _State.depth += 1
            _State.warn += self.warn_unkeyed
        return self

    def __exit__(self, *exc_info) -> None:
        with _State.lock:
            _State.depth -= 1
            _State.warn -= self.warn_unkeyed
            if _State.depth == 0:
                _uninstall()
                _State.seed = _State.keys = None
