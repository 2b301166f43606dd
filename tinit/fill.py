"""Public fill entry points: the drop-in ``trunc_normal_``, the explicit-stream
``trunc_normal_at_`` and the scheme-driven ``fill_``."""

from __future__ import annotations

import torch

from tinit import dispatch, schemes
from tinit.params import check_dtype, transform_constants


def _draw_seed(generator: torch.Generator | None) -> int:
    """One Philox key from torch's RNG: a uniform int64 on [0, 2**63)."""
    return int(torch.empty((), dtype=torch.int64).random_(generator=generator))


@torch.no_grad()
def trunc_normal_at_(tensor: torch.Tensor, mean: float = 0.0, std: float = 1.0,
                     a: float = -2.0, b: float = 2.0, *, seed: int, stream: int = 0,
                     offset: int = 0, backend: str = "auto") -> torch.Tensor:
    """Fill ``tensor`` from an explicit position of the tinit stream.

    Element j of ``tensor`` (row-major over its logical shape, whatever its
    strides) receives the value at stream index ``offset + j`` of
    (``seed``, ``stream``); see README "The stream". Torch's RNG is not touched.

    Args:
        tensor: float32, float64, bfloat16 or float16 tensor of any shape, on
            any device a backend supports; views are filled in place (only
            their elements change). 0-element and meta tensors are checked
            and returned unchanged.
        mean, std: the parent normal N(mean, std^2), tensor units.
        a, b: absolute truncation bounds (tensor units, not multiples of std);
            a may be -inf and b +inf.
        seed: Philox key, an integer in [0, 2**64).
        stream: stream id (upper Philox counter words), in [0, 2**64).
        offset: stream index of the tensor's first element, >= 0.
        backend: "auto" or a name of ``tinit.dispatch.BACKENDS``.

    Returns:
        ``tensor``.

    Raises:
        TypeError: unsupported dtype or non-real arguments.
        ValueError: invalid mean/std/bounds (see ``tinit.params.transform_constants``),
            seed/stream out of range, negative offset.
        RuntimeError: no backend can fill the tensor.
    All checks happen before anything is written.

    Formula: inversion sampling, Phi^-1(Phi(alpha) + u (Phi(beta) - Phi(alpha))),
    with AS 241 (Wichura 1988) as Phi^-1; csrc/include/tinit/transform.h.
    """
    check_dtype(tensor)
    constants = transform_constants(mean, std, a, b, tensor.dtype)
    for name, value in (("seed", seed), ("stream", stream)):
        if not isinstance(value, int) or not 0 <= value < 2**64:
            raise ValueError(f"{name} must be an int in [0, 2**64), got {value!r}")
    if not isinstance(offset, int) or offset < 0 or offset + tensor.numel() > 2**63:
        raise ValueError(f"offset must be an int >= 0 with offset + numel <= 2**63, got {offset!r}")
    if tensor.numel() == 0 or tensor.device.type == "meta":
        return tensor
    target = tensor if tensor.is_contiguous() else torch.empty_like(tensor, memory_format=torch.contiguous_format)
    dispatch.select(target, backend).fill(target, seed, stream, offset, constants)
    if target is not tensor:
        tensor.copy_(target)
    return tensor


def trunc_normal_(tensor: torch.Tensor, mean: float = 0.0, std: float = 1.0,
                  a: float = -2.0, b: float = 2.0,
                  generator: torch.Generator | None = None) -> torch.Tensor:
    """Drop-in for ``torch.nn.init.trunc_normal_``: one fused pass, no host sync.

    Same signature, semantics and return value as torch's: values from
    N(mean, std^2) restricted to the absolute interval [a, b], written in place
    under ``torch.no_grad()``.

    What is drawn from torch's RNG: exactly one int64, via
    ``torch.empty((), dtype=torch.int64).random_(generator=generator)`` (a
    uniform integer on [0, 2**63) from ``generator``, or from torch's default
    CPU generator when it is None). It is the Philox key; the stream id is 0
    and the offset 0. So ``torch.manual_seed`` makes calls reproducible and
    consecutive calls give different tensors. For a fixed key use
    ``trunc_normal_at_``.

    Args:
        tensor: float32/float64/bfloat16/float16 tensor or Parameter, any
            shape; views, 0-element and meta tensors accepted.
        mean, std: parent normal, tensor units; std > 0.
        a, b: absolute bounds, a < b; -inf/+inf allowed.
        generator: a CPU ``torch.Generator`` or None.

    Returns:
        ``tensor``.

    Raises:
        TypeError, ValueError: bad dtype or arguments, before anything is
            written or drawn.
    """
    check_dtype(tensor)
    transform_constants(mean, std, a, b, tensor.dtype)
    return trunc_normal_at_(tensor, mean, std, a, b, seed=_draw_seed(generator))


def fill_(param: torch.Tensor, scheme: str = "normal", layer_idx: int | None = None, *,
          role: str | None = None, name: str | None = None, n_layers: int | None = None,
          seed: int | None = None, stream: int = 0, offset: int = 0,
          generator: torch.Generator | None = None, backend: str = "auto",
          **options) -> torch.Tensor:
    """Initialise one parameter by a named scheme (large-model setup entry point).

    The scheme (``tinit.schemes``) maps the parameter's role, depth and shape to
    a truncated normal (std and bounds in units of std) or a constant.

    Args:
        param: the tensor or Parameter to fill in place (see ``trunc_normal_at_``).
        scheme: a name in ``tinit.schemes.SCHEMES``, e.g. "normal", "gpt2".
        layer_idx: 0-based index of the block holding ``param`` (depth-scaled schemes).
        role: the parameter's role (``tinit.roles.ROLES``); inferred from
            ``name`` when None, and "weight" when both are None.
        name: fully qualified parameter name, e.g. "transformer.h.3.attn.c_proj.weight".
        n_layers: number of transformer blocks L (needed by depth-scaled schemes).
        seed: Philox key in [0, 2**64); when None one is drawn from
            ``generator`` as in ``trunc_normal_``. With a seed, torch's RNG is not touched.
        stream, offset: stream id and first stream index (see ``trunc_normal_at_``).
        generator: torch.Generator used only when ``seed`` is None.
        backend: "auto" or a backend name.
        **options: scheme options, e.g. ``std=0.01``, ``trunc=3.0`` (bounds in units of std).

    Returns:
        ``param``.

    Raises:
        KeyError: unknown scheme or role.
        ValueError: the scheme needs ``n_layers``/``layer_idx`` and it is missing,
            or invalid options; raised before anything is written.
    """
    from tinit.roles import infer_role

    if role is None:
        role = infer_role(name) if name is not None else "weight"
    spec = schemes.get(scheme).spec(role=role, layer_idx=layer_idx, n_layers=n_layers,
                                    shape=tuple(param.shape), **options)
    check_dtype(param)
    if spec.constant is not None:
        with torch.no_grad():
            return param.fill_(spec.constant)
    lo, hi = -spec.trunc * spec.std, spec.trunc * spec.std
    transform_constants(spec.mean, spec.std, spec.mean + lo, spec.mean + hi, param.dtype)
    if seed is None:
        seed = _draw_seed(generator)
    return trunc_normal_at_(param, spec.mean, spec.std, spec.mean + lo, spec.mean + hi,
                            seed=seed, stream=stream, offset=offset, backend=backend)
