"""Public fill entry points: the drop-in ``trunc_normal_``, the explicit-stream
``trunc_normal_at_``, the scheme-driven ``fill_`` and ``write_spec_``, which
writes a ``tinit.schemes.InitSpec`` (truncated normal, uniform, constant or
per-slice parts) from an explicit stream.

Every entry point takes a plain tensor, a DTensor (each rank writes its local
shard from the shard's global indices, ``tinit.sharding``), or a hand-made
shard described by ``global_shape`` and ``shard_offsets``."""

from __future__ import annotations

import math

import torch

from tinit import dispatch, schemes
from tinit.params import (
    TruncNormalParams,
    check_dtype,
    transform_constants,
    uniform_constants,
)
from tinit.sharding import ShardLayout, StreamRuns, is_dtensor


def _draw_seed(generator: torch.Generator | None) -> int:
    """One Philox key from torch's RNG: a uniform int64 on [0, 2**63)."""
    return int(torch.empty((), dtype=torch.int64).random_(generator=generator))


def _resolve(tensor: torch.Tensor, global_shape, shard_offsets) -> tuple[torch.Tensor, ShardLayout | None]:
    """(the tensor to write, its place in the logical tensor or None when it is the whole of it)."""
    if is_dtensor(tensor):
        if global_shape is not None or shard_offsets is not None:
            raise ValueError("a DTensor carries its own layout; do not pass global_shape/shard_offsets with it")
        layout = ShardLayout.of_dtensor(tensor)
        return tensor.to_local(), layout
    if global_shape is None and shard_offsets is None:
        return tensor, None
    if global_shape is None or shard_offsets is None:
        raise ValueError("a shard needs both global_shape and shard_offsets")
    return tensor, ShardLayout.from_offsets(tuple(global_shape), tuple(tensor.shape), tuple(shard_offsets))


def _check_stream(seed: int, stream: int, offset: int, logical_numel: int) -> None:
    if type(seed) is int and type(stream) is int and type(offset) is int and 0 <= seed < 2**64 \
            and 0 <= stream < 2**64 and 0 <= offset and offset + logical_numel <= 2**63:
        return  # the common case, checked without building the messages below
    for name, value in (("seed", seed), ("stream", stream)):
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**64:
            raise ValueError(f"{name} must be an int in [0, 2**64), got {value!r}")
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0 or offset + logical_numel > 2**63:
        raise ValueError(f"offset must be an int >= 0 with offset + numel <= 2**63, got {offset!r}")


def _runs(local: torch.Tensor, layout: ShardLayout | None, offset: int) -> StreamRuns:
    return StreamRuns(offset, local.numel()) if layout is None else layout.runs(offset)


def _logical_numel(local: torch.Tensor, layout: ShardLayout | None) -> int:
    return local.numel() if layout is None else math.prod(layout.global_shape)


def _trunc_normal_local(local: torch.Tensor, layout: ShardLayout | None, constants: tuple, seed: int, stream: int,
                        offset: int, backend: str) -> None:
    """Write the truncated normal into ``local`` (checked arguments), a shard when ``layout`` is given."""
    if local.numel() == 0 or local.device.type == "meta":
        return
    target = local if local.is_contiguous() else torch.empty_like(local, memory_format=torch.contiguous_format)
    dispatch.select(target, backend).fill_shard(target, seed, stream, _runs(local, layout, offset), constants)
    if target is not local:
        local.copy_(target)


@torch.no_grad()
def trunc_normal_at_(tensor: torch.Tensor, mean: float = 0.0, std: float = 1.0,
                     a: float = -2.0, b: float = 2.0, *, seed: int, stream: int = 0,
                     offset: int = 0, backend: str = "auto", global_shape=None,
                     shard_offsets=None) -> torch.Tensor:
    """Fill ``tensor`` from an explicit position of the tinit stream.

    Element j of ``tensor`` (row-major over its logical shape, whatever its
    strides) receives the value at stream index ``offset + j`` of
    (``seed``, ``stream``); see README "The stream". Torch's RNG is not touched.
    For a shard, j is the element's row-major index in the logical tensor, so
    the shards of all ranks together hold exactly the unsharded fill.

    Args:
        tensor: float32, float64, bfloat16 or float16 tensor of any shape, on
            any device a backend supports; views are filled in place (only
            their elements change). 0-element and meta tensors are checked
            and returned unchanged. A ``DTensor`` (Shard/Replicate placements,
            FSDP2 and tensor-parallel parameters) has each rank's local
            tensor written, no communication.
        mean, std: the parent normal N(mean, std^2), tensor units.
        a, b: absolute truncation bounds (tensor units, not multiples of std);
            a may be -inf and b +inf.
        seed: Philox key, an integer in [0, 2**64).
        stream: stream id (upper Philox counter words), in [0, 2**64).
        offset: stream index of the tensor's first element, >= 0.
        backend: "auto" or a name of ``tinit.dispatch.BACKENDS``.
        global_shape, shard_offsets: ``tensor`` is the block of a logical
            tensor of ``global_shape`` starting at ``shard_offsets`` (one int
            per dim), e.g. a Megatron column/row-parallel slice
            (``tinit.sharding.shard_offsets``); both or neither.

    Returns:
        ``tensor``.

    Raises:
        TypeError: unsupported dtype or non-real arguments.
        ValueError: invalid mean/std/bounds (see ``tinit.params.transform_constants``),
            seed/stream out of range, negative offset, a shard outside its
            ``global_shape``, a ``Partial`` DTensor.
        RuntimeError: no backend can fill the tensor.
    All checks happen before anything is written.

    Formula: inversion sampling, Phi^-1(Phi(alpha) + u (Phi(beta) - Phi(alpha))),
    stream version 2 (docs/stream.md): a table of polynomials as Phi^-1 in
    fp32 (AS 241, Wichura 1988, for fp64 tensors), the uniform mode for
    windows narrow against std, the excursion from the bound beyond 8 std;
    csrc/include/tinit/transform.h.
    """
    check_dtype(tensor)
    constants = transform_constants(mean, std, a, b, tensor.dtype)
    local, layout = _resolve(tensor, global_shape, shard_offsets)
    _check_stream(seed, stream, offset, _logical_numel(local, layout))
    _trunc_normal_local(local, layout, constants, seed, stream, offset, backend)
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

    A DTensor is filled shard by shard as by ``trunc_normal_at_``: every rank
    must draw the same key, i.e. seed its generator identically
    (``torch.manual_seed(s)`` on all ranks), as for any replicated init.

    Args:
        tensor: float32/float64/bfloat16/float16 tensor, Parameter or DTensor,
            any shape; views, 0-element and meta tensors accepted.
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
    local, _ = _resolve(tensor, None, None)
    if local.numel() and local.device.type != "meta":
        dispatch.select(local, "auto")  # a bad $TINIT_BACKEND raises before the draw
    return trunc_normal_at_(tensor, mean, std, a, b, seed=_draw_seed(generator))


def _check_spec(spec: schemes.InitSpec, dtype: torch.dtype) -> None:
    """Validate every distribution of ``spec`` for ``dtype`` before anything is written."""
    if spec.parts is not None:
        for part in spec.parts:
            _check_spec(part, dtype)
    elif spec.constant is not None:
        value = spec.constant
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or abs(value) > torch.finfo(dtype).max:
            raise ValueError(f"constant {value!r} is not a finite value of {dtype}")
    else:
        leaf_constants(spec, dtype)


def leaf_constants(spec: schemes.InitSpec, dtype: torch.dtype) -> TruncNormalParams:
    """The transform constants of a single-distribution, non-constant ``spec`` for ``dtype``.

    A uniform takes the transform's uniform mode (``tinit.params.uniform_constants``),
    a truncated normal ``transform_constants``: both are one native pass.

    Raises:
        TypeError, ValueError: as ``transform_constants`` / ``uniform_constants``.
    """
    if spec.distribution == "uniform":
        std = spec.std
        if isinstance(std, (int, float)) and not isinstance(std, bool) and not (math.isfinite(std) and std > 0):
            raise ValueError(f"std must be finite and > 0, got std={std}")
        lo, hi = spec.bounds
        return uniform_constants(lo, hi, dtype)
    lo, hi = spec.bounds
    return transform_constants(spec.mean, spec.std, lo, hi, dtype)


def _leaves(local: torch.Tensor, layout: ShardLayout | None, spec: schemes.InitSpec, offset: int):
    """Split ``spec`` into its single-distribution pieces.

    Yields:
        (view of ``local``, its layout or None, a spec without parts, stream
        index of the piece's logical element 0). Part i of a fused tensor is
        slice i along ``spec.split_dim`` of the logical tensor and starts at
        ``offset + i * slice_numel``.
    """
    if spec.parts is None:
        yield local, layout, spec, offset
        return
    if local.numel() == 0:  # e.g. a rank outside the DTensor's mesh: nothing to split or write
        return
    shape = layout.global_shape if layout is not None else tuple(local.shape)
    count = len(spec.parts)
    size = shape[spec.split_dim] // count
    if size * count != shape[spec.split_dim]:
        raise ValueError(f"dim {spec.split_dim} of shape {shape} does not split into {count}")
    part_numel = math.prod(shape) // count
    for i, part in enumerate(spec.parts):
        if layout is None:
            view, sub = local.narrow(spec.split_dim, i * size, size), None
        else:
            first, length, sub = layout.narrow(spec.split_dim, i * size, size)
            view = local.narrow(spec.split_dim, first, length)
        yield from _leaves(view, sub, part, offset + i * part_numel)


def _write_leaf(local: torch.Tensor, layout: ShardLayout | None, spec: schemes.InitSpec, *, seed: int, stream: int,
                offset: int, backend: str) -> None:
    """Write a checked single-distribution ``spec`` (a constant, a uniform or a truncated normal)."""
    if spec.constant is not None:
        local.fill_(spec.constant)
    else:
        _trunc_normal_local(local, layout, leaf_constants(spec, local.dtype), seed, stream, offset, backend)


def _split_checked(spec: schemes.InitSpec, shape: tuple[int, ...]) -> None:
    """Raise ValueError, before anything is written, when a fused spec does not split ``shape``."""
    if spec.parts is not None:
        count = len(spec.parts)
        if shape[spec.split_dim] % count:
            raise ValueError(f"dim {spec.split_dim} of shape {shape} does not split into {count}")
        part = list(shape)
        part[spec.split_dim] //= count
        for sub in spec.parts:
            _split_checked(sub, tuple(part))


def write_spec_(param: torch.Tensor, spec: schemes.InitSpec, *, seed: int, stream: int = 0, offset: int = 0,
                backend: str = "auto", global_shape=None, shard_offsets=None) -> torch.Tensor:
    """Write ``spec`` into ``param`` from stream (``seed``, ``stream``), element j at ``offset + j``.

    Constants are filled directly; a uniform takes low + (high - low) u_j
    with u_j = (w_j + 1/2) / 2**32 from the same stream words, in the
    transform's uniform mode (one native pass, like the normal); parts (fused
    tensors) are written slice by slice along ``spec.split_dim`` of the
    logical tensor, slice i starting at stream index
    ``offset + i * slice_numel``. DTensors and hand-made shards
    (``global_shape``, ``shard_offsets``) as in ``trunc_normal_at_``.

    Raises:
        TypeError, ValueError: as ``trunc_normal_at_``; checked for every part
            before anything is written.
    """
    check_dtype(param)
    _check_spec(spec, param.dtype)
    local, layout = _resolve(param, global_shape, shard_offsets)
    _split_checked(spec, tuple(param.shape) if layout is None else layout.global_shape)
    _check_stream(seed, stream, offset, _logical_numel(local, layout))
    with torch.no_grad():
        for view, sub, leaf, leaf_offset in _leaves(local, layout, spec, offset):
            _write_leaf(view, sub, leaf, seed=seed, stream=stream, offset=leaf_offset, backend=backend)
    return param


def fill_(param: torch.Tensor, scheme: str = "normal", layer_idx: int | None = None, *,
          role: str | None = None, name: str | None = None, n_layers: int | None = None,
          d_model: int | None = None, fan_in: int | None = None, fan_out: int | None = None,
          layout: str = "out_in", seed: int | None = None, stream: int = 0, offset: int = 0,
          generator: torch.Generator | None = None, backend: str = "auto",
          global_shape=None, shard_offsets=None, **options) -> torch.Tensor:
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
        fan_in, fan_out: override the fans computed from the logical shape.
        layout: "out_in" for ``nn.Linear`` / ``nn.Embedding`` weights,
            "in_out" for Hugging Face ``Conv1D`` (GPT-2).
        seed: Philox key in [0, 2**64); when None one is drawn from
            ``generator`` as in ``trunc_normal_``. With a seed, torch's RNG is not touched.
        stream, offset: stream id and first stream index (see ``trunc_normal_at_``).
        generator: torch.Generator used only when ``seed`` is None.
        backend: "auto" or a backend name.
        global_shape, shard_offsets: ``param`` is the block at
            ``shard_offsets`` of a logical weight of ``global_shape``
            (tensor parallelism by hand, e.g. Megatron's column/row-parallel
            layers): fans come from ``global_shape`` and the block gets the
            values of the same block of the unsharded fill. A DTensor needs
            neither (its ``shape`` is already the logical one).
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
    _resolve(param, global_shape, shard_offsets)  # a bad shard raises before the draw
    shape = tuple(param.shape) if global_shape is None else tuple(global_shape)
    spec = schemes.get(scheme).spec(role=role, layer_idx=layer_idx, n_layers=n_layers, shape=shape,
                                    d_model=d_model, fan_in=fan_in, fan_out=fan_out, layout=layout, **options)
    check_dtype(param)
    _check_spec(spec, param.dtype)
    if seed is None and spec.constant is None:
        seed = _draw_seed(generator)
    return write_spec_(param, spec, seed=seed if seed is not None else 0, stream=stream, offset=offset,
                       backend=backend, global_shape=global_shape, shard_offsets=shard_offsets)
