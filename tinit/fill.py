"""Public fill entry points: the drop-in ``trunc_normal_``, the explicit-stream
``trunc_normal_at_``, the scheme-driven ``fill_`` and ``write_spec_``, which
writes a ``tinit.schemes.InitSpec`` (truncated normal, uniform, constant or
per-slice parts) from an explicit stream."""

from __future__ import annotations

import torch

from tinit import dispatch, ops, reference, schemes
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
    if tensor.numel() and tensor.device.type != "meta":
        dispatch.select(tensor, "auto")  # a bad $TINIT_BACKEND raises before the draw
    return trunc_normal_at_(tensor, mean, std, a, b, seed=_draw_seed(generator))


def _check_spec(spec: schemes.InitSpec, dtype: torch.dtype) -> None:
    """Validate every distribution of ``spec`` for ``dtype`` before anything is written."""
    if spec.parts is not None:
        for part in spec.parts:
            _check_spec(part, dtype)
    elif spec.constant is None:
        lo, hi = spec.bounds
        transform_constants(spec.mean, spec.std, lo, hi, dtype)


@torch.no_grad()
def _uniform_at_(tensor: torch.Tensor, low: float, high: float, *, seed: int, stream: int, offset: int) -> None:
    """U(low, high) from the tinit stream: element j gets low + (high - low) (w_j + 1/2) / 2**32.

    w_j is the uint32 word at stream index offset + j (README "The stream"),
    the same words the truncated normal inverts. Computed in fp64 in chunks
    of 2**22 elements (native words when the extension covers the device,
    else ``tinit.reference``), then rounded once to the tensor's dtype.
    """
    if tensor.numel() == 0 or tensor.device.type == "meta":
        return
    native = ops.native_available() and (tensor.device.type == "cpu"
                                         or (tensor.device.type == "cuda" and ops.native_has_cuda()))
    target = tensor if tensor.is_contiguous() else torch.empty_like(tensor, memory_format=torch.contiguous_format)
    flat = target.view(-1)
    chunk = 1 << 22
    for start in range(0, flat.numel(), chunk):
        count = min(chunk, flat.numel() - start)
        if native:
            words = ops.philox_words(count, seed, stream, offset + start, device=tensor.device)
        else:
            words = reference.stream_words(count, seed, stream, offset + start, device=tensor.device)
        u = words.to(torch.float64) * 2.0**-32 + 2.0**-33
        flat[start:start + count].copy_(low + (high - low) * u)
    if target is not tensor:
        tensor.copy_(target)


def write_spec_(param: torch.Tensor, spec: schemes.InitSpec, *, seed: int, stream: int = 0, offset: int = 0,
                backend: str = "auto") -> torch.Tensor:
    """Write ``spec`` into ``param`` from stream (``seed``, ``stream``), element j at ``offset + j``.

    Constants are filled directly; a uniform uses ``_uniform_at_``; parts
    (fused tensors) are written slice by slice along ``spec.split_dim``,
    slice i starting at stream index ``offset + i * slice_numel``.

    Raises:
        TypeError, ValueError: as ``trunc_normal_at_``; checked for every part
            before anything is written.
    """
    check_dtype(param)
    _check_spec(spec, param.dtype)
    with torch.no_grad():
        if spec.constant is not None:
            param.fill_(spec.constant)
        elif spec.parts is not None:
            count = len(spec.parts)
            size = param.shape[spec.split_dim] // count
            if size * count != param.shape[spec.split_dim]:
                raise ValueError(f"dim {spec.split_dim} of shape {tuple(param.shape)} does not split into {count}")
            for i, part in enumerate(spec.parts):
                view = param.narrow(spec.split_dim, i * size, size)
                write_spec_(view, part, seed=seed, stream=stream, offset=offset + i * view.numel(),
                            backend=backend)
        elif spec.distribution == "uniform":
            lo, hi = spec.bounds
            _uniform_at_(param, lo, hi, seed=seed, stream=stream, offset=offset)
        else:
            lo, hi = spec.bounds
            trunc_normal_at_(param, spec.mean, spec.std, lo, hi, seed=seed, stream=stream, offset=offset,
                             backend=backend)
    return param


def fill_(param: torch.Tensor, scheme: str = "normal", layer_idx: int | None = None, *,
          role: str | None = None, name: str | None = None, n_layers: int | None = None,
          d_model: int | None = None, fan_in: int | None = None, fan_out: int | None = None,
          layout: str = "out_in", seed: int | None = None, stream: int = 0, offset: int = 0,
          generator: torch.Generator | None = None, backend: str = "auto",
          **options) -> torch.Tensor:
    """Initialise one parameter by a named scheme (large-model setup entry point).

    The scheme (``tinit.schemes``) maps the parameter's role, depth, width and
    logical shape to a truncated normal (std in tensor units, bounds in units
    of std), a uniform, a constant, or one of those per slice of a fused
    projection, which is then written from the tinit stream.

    Args:
        param: the tensor or Parameter to fill in place (see ``trunc_normal_at_``).
        scheme: a name in ``tinit.schemes.SCHEMES``, e.g. "normal", "gpt2", "mup".
        layer_idx: 0-based index of the block holding ``param`` (depth-scaled
            schemes); inferred from ``name`` when None.
        role: the parameter's role (``tinit.roles.ROLES``); inferred from
            ``name`` when None. Schemes whose result depends on the role
            refuse a parameter whose role is unknown.
        name: fully qualified parameter name, e.g. "transformer.h.3.attn.c_proj.weight".
        n_layers: number of blocks L of the parameter's stack.
        d_model: residual stream width d (schemes written in d).
        fan_in, fan_out: override the fans computed from ``param.shape`` (pass
            the LOGICAL fans when ``param`` is a shard).
        layout: "out_in" for ``nn.Linear`` / ``nn.Embedding`` weights,
            "in_out" for Hugging Face ``Conv1D`` (GPT-2).
        seed: Philox key in [0, 2**64); when None one is drawn from
            ``generator`` as in ``trunc_normal_``. With a seed, torch's RNG is not touched.
        stream, offset: stream id and first stream index (see ``trunc_normal_at_``).
        generator: torch.Generator used only when ``seed`` is None.
        backend: "auto" or a backend name.
        **options: ``trunc`` (bounds in units of std), ``variance_preserving``,
            ``stack``/``encoder_layers``/``decoder_layers`` (encoder-decoder
            models) and the scheme's own options, e.g. ``std=0.01``.

    Returns:
        ``param``.

    Raises:
        KeyError: unknown scheme or role.
        ValueError: the scheme needs a role, ``n_layers``, ``layer_idx`` or
            ``d_model`` that is missing, or invalid options; raised before
            anything is written.
        TypeError: an option the scheme does not take, or an unsupported dtype.
    """
    from tinit.roles import infer_layer, infer_role

    if role is None and name is not None:
        role = infer_role(name)
    if layer_idx is None and name is not None:
        layer_idx = infer_layer(name)
    spec = schemes.get(scheme).spec(role=role, layer_idx=layer_idx, n_layers=n_layers, shape=tuple(param.shape),
                                    d_model=d_model, fan_in=fan_in, fan_out=fan_out, layout=layout, **options)
    check_dtype(param)
    _check_spec(spec, param.dtype)
    if seed is None and spec.constant is None:
        seed = _draw_seed(generator)
    return write_spec_(param, spec, seed=seed if seed is not None else 0, stream=stream, offset=offset,
                       backend=backend)
