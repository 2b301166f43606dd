"""``patch_torch_init``: run existing model code's ``torch.nn.init`` calls on tinit's stream.

While a patch is active, the seven random initialisers of ``torch.nn.init``
(``uniform_``, ``normal_``, ``trunc_normal_``, ``xavier_uniform_``,
``xavier_normal_``, ``kaiming_uniform_``, ``kaiming_normal_``) and, when
``timm.layers.weight_init`` is imported, timm's ``trunc_normal_``,
``trunc_normal_tf_``, ``variance_scaling_`` and ``lecun_normal_`` fill
through ``tinit.nn.init``.

How calls are caught: the patch swaps the code object of each of these
function objects for a one-line trampoline into tinit, and puts the original
code back on exit. Every reference to them is routed, wherever it was taken:
``torch.nn.init.normal_``, ``nn.Linear.reset_parameters``, the copies bound
at import time (``from torch.nn.init import xavier_uniform_``,
Hugging Face's ``transformers.initialization.TORCH_INIT_FUNCTIONS``, a
``functools.partial(nn.init.trunc_normal_, std=0.02)`` in torchtitan's model
configs, timm models' ``from timm.layers import trunc_normal_``). Hugging
Face's guarded wrappers (``transformers.initialization.normal_`` and the
rest) are left as they are: they test ``_is_hf_initialized`` first and call
the table's function only for a tensor still to initialise, so the guards
keep working and a skipped tensor is not a call. Tensor methods
(``tensor.normal_()``) and ``torch.randn`` are not routed.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import sys
import threading
import types
from typing import ClassVar

import torch
import torch.nn.init

from tinit.nn import init as _tinit_init

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


def _timm_trunc_normal_tf(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, *, seed, stream):
    """timm's ``trunc_normal_tf_``: N(0, 1) truncated to [a, b] (bounds in std), then * std + mean."""
    mean, std, a, b = (float(v) for v in (mean, std, a, b))
    if not a <= b:
        raise ValueError(f"timm.layers.trunc_normal_tf_ needs a <= b, got a={a}, b={b}")
    low, high = sorted((mean + a * std, mean + b * std))
    if std == 0:
        return _tinit_init.KEYED["uniform_"](tensor, mean, mean, seed=seed, stream=stream)
    return _tinit_init.KEYED["trunc_normal_"](tensor, mean, abs(std), low, high, seed=seed, stream=stream)


def _timm_variance_scaling(tensor, scale=1.0, mode="fan_in", distribution="normal", *, seed, stream):
    """timm's ``variance_scaling_``: var = scale / fan (fan_in, fan_out or their mean), returns None."""
    fan_in, fan_out = torch.nn.init._calculate_fan_in_and_fan_out(tensor)
    fans = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2}
    if mode not in fans:
        raise ValueError(f"timm.layers.variance_scaling_: mode must be one of {list(fans)}, got {mode!r}")
    variance = scale / fans[mode]
    if distribution == "truncated_normal":
        _timm_trunc_normal_tf(tensor, std=math.sqrt(variance) / _TRUNC2_STD, seed=seed, stream=stream)
    elif distribution == "normal":
        _tinit_init.KEYED["normal_"](tensor, 0.0, math.sqrt(variance), seed=seed, stream=stream)
    elif distribution == "uniform":
        bound = math.sqrt(3 * variance)
        _tinit_init.KEYED["uniform_"](tensor, -bound, bound, seed=seed, stream=stream)
    else:
        raise ValueError(f"invalid distribution {distribution}")


def _timm_lecun_normal(tensor, *, seed, stream):
    _timm_variance_scaling(tensor, mode="fan_in", distribution="truncated_normal", seed=seed, stream=stream)


_TIMM_KEYED = {
    "trunc_normal_": _tinit_init.KEYED["trunc_normal_"],
    "trunc_normal_tf_": _timm_trunc_normal_tf,
    "variance_scaling_": _timm_variance_scaling,
    "lecun_normal_": _timm_lecun_normal,
}


class _State:
    """The one process-wide routing: who is inside, with which seed, and what to put back."""

    lock = threading.RLock()
    depth = 0
    seed: int | None = None
    counter = itertools.count()
    saved: ClassVar[list[tuple[types.FunctionType, types.CodeType, tuple | None, dict | None]]] = []


def _eager(fn):
    """``fn``, run eagerly under ``torch.compile`` (a graph break at the call): dynamo cannot trace the
    host-side transform constants, and the call counter must advance once per call, not once per trace.
    Outside compilation ``fn`` is called directly, without the disabled wrapper's cost."""
    disabled = torch.compiler.disable(fn)

    def run(*args, **kwargs):
        if torch.compiler.is_compiling():
            return disabled(*args, **kwargs)
        return fn(*args, **kwargs)

    return run


def _route(keyed, seed: int | None, public=None):
    """The function a patched call runs: ``public`` (or ``keyed`` with a drawn key) when seed is None,
    else ``keyed`` with key ``seed`` and stream id the call's number since the outermost entry."""
    if seed is None:
        if public is not None:
            return _eager(public)

        def drawn(*args, **kwargs):
            return keyed(*args, seed=None, stream=0, **kwargs)

        return _eager(drawn)

    def counted(*args, **kwargs):
        # taken before any check, so a meta, empty, refused or no-op call still uses up its number
        return keyed(*args, seed=seed, stream=next(_State.counter), **kwargs)

    return _eager(counted)


def _swap(fn: types.FunctionType, route) -> None:
    if fn.__code__.co_freevars:  # a closure's code cannot be swapped for the trampoline's
        raise RuntimeError(f"tinit.patch_torch_init cannot route {fn.__module__}.{fn.__qualname__} (a closure)")
    code = _trampoline.__code__.replace(co_name=fn.__name__)
    if hasattr(code, "co_qualname"):
        code = code.replace(co_qualname=fn.__qualname__)
    _State.saved.append((fn, fn.__code__, fn.__defaults__, fn.__kwdefaults__))
    fn.__code__, fn.__defaults__, fn.__kwdefaults__ = code, None, {"_tinit_route": route}


def _install(seed: int | None) -> None:
    for name, fn in _TORCH_ORIGINALS.items():
        if fn.__module__ != "torch.nn.init":  # tinit imported while another library's patch held the name
            raise RuntimeError(f"tinit.patch_torch_init: torch.nn.init.{name} was {fn.__module__}.{fn.__qualname__}")
    try:
        for name in _TORCH_NAMES:
            keyed = _tinit_init.KEYED[name]
            _swap(_TORCH_ORIGINALS[name], _route(keyed, seed, getattr(_tinit_init, name)))
        timm_init = sys.modules.get(_TIMM_MODULE)
        if timm_init is not None:
            for name in _TIMM_NAMES:
                fn = getattr(timm_init, name, None)
                if isinstance(fn, types.FunctionType):
                    _swap(fn, _route(_TIMM_KEYED[name], seed))
    except BaseException:
        _uninstall()
        raise


def _uninstall() -> None:
    while _State.saved:
        fn, code, defaults, kwdefaults = _State.saved.pop()
        fn.__code__, fn.__defaults__, fn.__kwdefaults__ = code, defaults, kwdefaults


def _checked_seed(seed):
    if seed is None:
        return None
    if type(seed) is not int:  # bool, float, numpy ints: refused rather than silently converted
        raise TypeError(f"seed must be an int in [0, 2**64) or None, got {type(seed).__name__}")
    if not 0 <= seed < 2**64:
        raise ValueError(f"seed must be an int in [0, 2**64) or None, got {seed}")
    return seed


class patch_torch_init(contextlib.ContextDecorator):
    """Route ``torch.nn.init``'s random initialisers (and timm's) to tinit while active.

    Use as ``with tinit.patch_torch_init(seed=0): model = build()`` or as a
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
    ``orthogonal_``, ``sparse_``, tensor methods and ``torch.randn`` are not.

    Keys (docs/stream.md, "patch_torch_init"):
        seed=None: each call that writes something draws its Philox key from
            torch's RNG (or its ``generator``), as ``tinit.nn.init`` does, so
            ``torch.manual_seed`` makes the build reproducible.
        seed=s: the n-th routed call since the outermost entry (n = 0, 1, 2,
            ...) fills with Philox key s and stream id n; element i of the
            tensor takes stream index i (row-major over its logical shape, so
            a DTensor or FSDP2 shard gets the unsharded values). torch's RNG
            is neither read nor advanced; a ``generator`` argument is checked
            and not drawn from. Every routed call takes a number, also one
            that writes nothing (a meta or empty tensor, a refused argument),
            so ranks stay in step. Calls cannot be keyed by parameter name:
            a ``torch.nn.init`` call is not told one. The limit: the same
            model code must make the same routed calls in the same order on
            every rank (and in every run meant to give the same model); a
            call made on one rank only, or a different module order, shifts
            every later call's stream. Calls from several threads interleave
            their numbers in whatever order they run.

    Scope: the routing is process-wide while active, so calls from other
    threads are routed too. Entering and leaving are serialised by a lock;
    the routing is installed on the first entry and removed on the last exit
    (a reference count), also when the body raises. Nested entries (and
    entries from other threads while one is active) must give the same seed
    as the active one and share its call counter; another seed raises.

    Args:
        seed: None, or the Philox key of every call: an int in [0, 2**64).

    Returns:
        A context manager that is also a decorator (``contextlib.ContextDecorator``);
        ``with`` binds the patch object itself. It may be entered any number of times.

    Raises:
        TypeError: ``seed`` is not an int or None (bool and float refused).
        ValueError: ``seed`` outside [0, 2**64); on entry, a seed other
            than the one of the patch already active.
        RuntimeError: on entry, a function to route that cannot be (a
            closure); nothing is left routed then.
    """

    def __init__(self, seed: int | None = None) -> None:
        self.seed = _checked_seed(seed)

    def __enter__(self):
        with _State.lock:
            if _State.depth == 0:
                _State.counter = itertools.count()
                _install(self.seed)
                _State.seed = self.seed
            elif self.seed != _State.seed:
                raise ValueError(
                    f"tinit.patch_torch_init(seed={self.seed!r}) entered while patch_torch_init(seed={_State.seed!r}) "
                    "is active: nested patches must give the same seed"
                )
            _State.depth += 1
        return self

    def __exit__(self, *exc_info) -> None:
        with _State.lock:
            _State.depth -= 1
            if _State.depth == 0:
                _uninstall()
                _State.seed = None
