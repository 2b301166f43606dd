"""Public fill entry points: the explicit-stream ``trunc_normal_at_``, the
scheme-driven ``fill_`` and ``write_spec_``, which writes a
``tinit.schemes.InitSpec`` (truncated normal, uniform, constant or per-slice
parts) from an explicit stream. The drop-in ``tinit.trunc_normal_`` is
``tinit.nn.init.trunc_normal_``, which draws its key with ``_draw_seed``.

Every entry point takes a plain tensor, a DTensor (each rank writes its local
shard from the shard's global indices, ``tinit.sharding``), or a hand-made
shard described by ``global_shape`` and ``shard_offsets``."""

from __future__ import annotations

import math

import torch

from tinit import dispatch, schemes
from tinit.params import (
    TruncNormalParams,
    _real,
    as_index,
    check_tensor,
    transform_constants,
    uniform_constants,
)
from tinit.sharding import ShardLayout, StreamRuns, is_dtensor


def _draw_seed(generator: torch.Generator | None) -> int:
    """One Philox key from torch's RNG: a uniform int64 on [0, 2**63).

    Drawn on the generator's device, and on the CPU when there is none: the
    CPU default generator (``torch.manual_seed``), whatever the default
    device (meta included), so a seed gives the same values everywhere.
    """
    device = "cpu" if generator is None else generator.device
    return int(torch.empty((), dtype=torch.int64, device=device).random_(generator=generator))


def _check_generator(generator) -> None:
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")


def _resolve(
    tensor: torch.Tensor, global_shape, shard_offsets, name: str = "tensor"
) -> tuple[torch.Tensor, ShardLayout | None]:
    """(the tensor to write, its place in the logical tensor or None when it is the whole of it).

    Raises:
        TypeError, ValueError: as ``tinit.params.check_tensor`` for the tensor
            written, or a bad shard description.
    """
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    if is_dtensor(tensor):
        if global_shape is not None or shard_offsets is not None:
            raise ValueError("a DTensor carries its own layout; do not pass global_shape/shard_offsets with it")
        local = tensor.to_local()
        check_tensor(local, f"{name} (local shard)")
        return local, ShardLayout.of_dtensor(tensor)
    check_tensor(tensor, name)
    if global_shape is None and shard_offsets is None:
        return tensor, None
    if global_shape is None or shard_offsets is None:
        raise ValueError("a shard needs both global_shape and shard_offsets")
    return tensor, ShardLayout.from_offsets(tuple(global_shape), tuple(tensor.shape), tuple(shard_offsets))


def _stream_position(seed, stream, offset, logical_numel: int) -> tuple[int, int, int]:
    """(seed, stream, offset) as ints, checked.

    Raises:
        TypeError: a bool, float or other non-integer.
        ValueError: seed or stream outside [0, 2**64), offset < 0 or offset + numel > 2**63.
    """
    if (
        type(seed) is int
        and type(stream) is int
        and type(offset) is int
        and 0 <= seed < 2**64
        and 0 <= stream < 2**64
        and 0 <= offset
        and offset + logical_numel <= 2**63
    ):
        return seed, stream, offset  # the common case, checked without building the messages below
    seed = as_index("seed", seed, 0, 2**64)
    stream = as_index("stream", stream, 0, 2**64)
    offset = as_index("offset", offset)
    if offset + logical_numel > 2**63:
        raise ValueError(
            f"offset must be an int >= 0 with offset + numel <= 2**63, got {offset!r} for {logical_numel} elements"
        )
    return seed, stream, offset


def _writes(tensor: torch.Tensor, local: torch.Tensor) -> bool:
    """Whether filling ``tensor`` (whose local part is ``local``) writes anything, on some rank:
    not on the meta device, nor for a tensor of no elements. A DTensor counts its logical
    elements, so a rank whose shard is empty still draws its key, as the others do."""
    return not local.is_meta and tensor.numel() > 0


def _runs(local: torch.Tensor, layout: ShardLayout | None, offset: int) -> StreamRuns:
    return StreamRuns(offset, local.numel()) if layout is None else layout.runs(offset)


def _logical_numel(local: torch.Tensor, layout: ShardLayout | None) -> int:
    return local.numel() if layout is None else math.prod(layout.global_shape)


def _trunc_normal_local(
    local: torch.Tensor, layout: ShardLayout | None, constants: tuple, seed: int, stream: int, offset: int, backend: str
) -> None:
    """Write the truncated normal into ``local`` (checked arguments), a shard when ``layout`` is given."""
    if local.numel() == 0 or local.device.type == "meta":
        return
    target = local if local.is_contiguous() else torch.empty_like(local, memory_format=torch.contiguous_format)
    dispatch.select(target, backend).fill_shard(target, seed, stream, _runs(local, layout, offset), constants)
    if target is not local:
        local.copy_(target)


@torch.no_grad()
def trunc_normal_at_(
    tensor: torch.Tensor,
    mean: float = 0.0,
    std: float = 1.0,
    a: float = -2.0,
    b: float = 2.0,
    *,
    seed: int,
    stream: int = 0,
    offset: int = 0,
    backend: str = "auto",
    global_shape=None,
    shard_offsets=None,
) -> torch.Tensor:
    """Fill ``tensor`` from an explicit position of the tinit stream.

    Element j of ``tensor`` (row-major over its logical shape, whatever its
    strides) receives the value at stream index ``offset + j`` of
    (``seed``, ``stream``); see docs/stream.md. Torch's RNG is not touched.
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
        TypeError: unsupported dtype, a sparse, nested or negative-bit
            tensor, non-real mean/std/bounds, a seed/stream/offset that is
            not an int (bools and floats are refused; numpy integers are ints).
        ValueError: invalid mean/std/bounds (see ``tinit.params.transform_constants``;
            an int too large for a float included), seed/stream out of
            range, negative offset, a shard outside its ``global_shape``, a
            ``Partial`` DTensor.
        tinit.params.InternalOverlapError: a view whose elements share
            memory (``expand``, overlapping ``as_strided``); a ValueError and
            a RuntimeError.
        RuntimeError: no backend can fill the tensor.
    All checks happen before anything is written.

    Formula: inversion sampling, Phi^-1(Phi(alpha) + u (Phi(beta) - Phi(alpha))),
    stream version 2 (docs/stream.md): a table of polynomials as Phi^-1 in
    fp32 (AS 241, Wichura 1988, for fp64 tensors), the uniform mode for
    windows narrow against std, the excursion from the bound beyond 8 std
    (the native ``tinit::trunc_normal_value``).
    """
    local, layout = _resolve(tensor, global_shape, shard_offsets)
    constants = transform_constants(mean, std, a, b, local.dtype)
    seed, stream, offset = _stream_position(seed, stream, offset, _logical_numel(local, layout))
    _trunc_normal_local(local, layout, constants, seed, stream, offset, backend)
    return tensor


def _spec_constants(spec: schemes.InitSpec, dtype: torch.dtype, found: dict | None = None) -> dict:
    """Validate every distribution of ``spec`` for ``dtype`` before anything is written.

    Returns:
        ``{id(leaf): transform constants}`` for every single-distribution,
        non-constant piece of ``spec`` (``spec`` itself when it has no parts):
        the constants the write uses, computed here once.
    """
    found = {} if found is None else found
    if spec.parts is not None:
        for part in spec.parts:
            _spec_constants(part, dtype, found)
    elif spec.constant is not None:
        value = spec.constant
        try:
            finite = math.isfinite(_real("constant", value))
        except TypeError:
            finite = False
        if isinstance(value, bool) or not finite or abs(value) > torch.finfo(dtype).max:
            raise ValueError(f"constant {value!r} is not a finite value of {dtype}")
    else:
        found[id(spec)] = leaf_constants(spec, dtype)
    return found


def leaf_constants(spec: schemes.InitSpec, dtype: torch.dtype) -> TruncNormalParams:
    """The transform constants of a single-distribution, non-constant ``spec`` for ``dtype``.

    A uniform takes the transform's uniform mode (``tinit.params.uniform_constants``),
    a truncated normal ``transform_constants``: both are one native pass.

    Raises:
        TypeError, ValueError: as ``transform_constants`` / ``uniform_constants``.
    """
    if spec.distribution == "uniform":
        std = _real("std", spec.std)
        if not (math.isfinite(std) and std > 0):
            raise ValueError(f"std must be finite and > 0, got std={spec.std}")
        lo, hi = spec.bounds
        return uniform_constants(lo, hi, dtype)
    lo, hi = spec.bounds
    return transform_constants(spec.mean, spec.std, lo, hi, dtype)


def _segments(spec: schemes.InitSpec, size: int) -> tuple[tuple[int, int], ...]:
    """((part, length), ...) of a fused ``spec`` along a split dim of ``size``: its ``segments``, or
    equal consecutive slices (``size`` divisible by the part count, checked by ``_split_checked``)."""
    if spec.segments is not None:
        return spec.segments
    length = size // len(spec.parts)
    return tuple((i, length) for i in range(len(spec.parts)))


def _leaves(local: torch.Tensor, layout: ShardLayout | None, spec: schemes.InitSpec, offset: int):
    """Split ``spec`` into its single-distribution pieces (a checked spec: ``_split_checked``).

    Yields:
        (view of ``local``, its layout or None, a spec without parts, stream
        index of the piece's logical element 0). Segment j of a fused tensor
        (``_segments``: the spec's segments or equal slices) is its slice
        along ``spec.split_dim`` of the logical tensor and starts at
        ``offset`` + the numel of segments 0..j-1 (for equal slices, slice i
        at ``offset + i * slice_numel``).
    """
    if spec.parts is None:
        yield local, layout, spec, offset
        return
    if local.numel() == 0:  # e.g. a rank outside the DTensor's mesh: nothing to split or write
        return
    shape = layout.global_shape if layout is not None else tuple(local.shape)
    dim = spec.split_dim
    row_numel = math.prod(shape) // shape[dim]  # elements per index of the split dim
    start = 0
    for part, length in _segments(spec, shape[dim]):
        if layout is None:
            view, sub = local.narrow(dim, start, length), None
        else:
            first, local_length, sub = layout.narrow(dim, start, length)
            view = local.narrow(dim, first, local_length)
        yield from _leaves(view, sub, spec.parts[part], offset + start * row_numel)
        start += length


def _write_leaf(
    local: torch.Tensor,
    layout: ShardLayout | None,
    spec: schemes.InitSpec,
    constants: dict,
    *,
    seed: int,
    stream: int,
    offset: int,
    backend: str,
) -> None:
    """Write a checked single-distribution ``spec`` (a constant, a uniform or a truncated normal);
    ``constants``: its ``_spec_constants``."""
    if spec.constant is not None:
        local.fill_(spec.constant)
    else:
        _trunc_normal_local(local, layout, constants[id(spec)], seed, stream, offset, backend)


def _split_checked(spec: schemes.InitSpec, shape: tuple[int, ...]) -> None:
    """Raise ValueError, before anything is written, when a fused spec does not split ``shape``: a
    ``split_dim`` outside it, equal slices that do not divide it, or ``segments`` that are not
    (part index, length >= 1) pairs covering it exactly and naming every part."""
    if spec.parts is None:
        if spec.segments is not None:
            raise ValueError("a spec with segments needs parts (one spec per part index)")
        return
    count = len(spec.parts)
    dim = spec.split_dim
    if type(dim) is not int or not 0 <= dim < len(shape):
        raise ValueError(f"split_dim {dim!r} is not a dim of shape {shape}")
    if spec.segments is None:
        if shape[dim] % count:
            raise ValueError(f"dim {dim} of shape {shape} does not split into {count}")
    else:
        segments = spec.segments
        if not isinstance(segments, tuple) or not all(
            isinstance(s, tuple)
            and len(s) == 2
            and type(s[0]) is int
            and type(s[1]) is int
            and 0 <= s[0] < count
            and s[1] >= 1
            for s in segments
        ):
            raise ValueError(
                f"segments must be a tuple of (part index in [0, {count}), length >= 1) tuples, got {segments!r}"
            )
        covered = sum(length for _, length in segments)
        if covered != shape[dim]:
            raise ValueError(f"segments cover {covered} of dim {dim} of shape {shape}, not all {shape[dim]}")
        unused = set(range(count)) - {part for part, _ in segments}
        if unused:
            raise ValueError(f"segments never place part(s) {sorted(unused)} of {count}")
    checked = set()
    for part, length in _segments(spec, shape[dim]):
        if (part, length) not in checked:  # a per-head layout repeats a few (part, length) pairs many times
            checked.add((part, length))
            sub = list(shape)
            sub[dim] = length
            _split_checked(spec.parts[part], tuple(sub))


def _checked_spec(local: torch.Tensor, layout: ShardLayout | None, spec: schemes.InitSpec) -> dict:
    """Check ``spec`` against the (checked) tensor it will be written to, even one of no elements;
    returns its ``_spec_constants``."""
    if not isinstance(spec, schemes.InitSpec):
        raise TypeError(f"spec must be a tinit.schemes.InitSpec, got {type(spec).__name__}")
    constants = _spec_constants(spec, local.dtype)
    _split_checked(spec, tuple(local.shape) if layout is None else layout.global_shape)
    return constants


def _write_spec_checked(
    local: torch.Tensor,
    layout: ShardLayout | None,
    spec: schemes.InitSpec,
    constants: dict,
    *,
    seed: int,
    stream: int,
    offset: int,
    backend: str,
) -> None:
    with torch.no_grad():
        for view, sub, leaf, leaf_offset in _leaves(local, layout, spec, offset):
            _write_leaf(view, sub, leaf, constants, seed=seed, stream=stream, offset=leaf_offset, backend=backend)


def _draws(spec: schemes.InitSpec) -> bool:
    """Whether writing ``spec`` reads the stream (some piece is not a constant)."""
    if spec.parts is not None:
        return any(_draws(part) for part in spec.parts)
    return spec.constant is None


def write_spec_(
    param: torch.Tensor,
    spec: schemes.InitSpec,
    *,
    seed: int,
    stream: int = 0,
    offset: int = 0,
    backend: str = "auto",
    global_shape=None,
    shard_offsets=None,
) -> torch.Tensor:
    """Write ``spec`` into ``param`` from stream (``seed``, ``stream``), element j at ``offset + j``.

    Constants are filled directly; a uniform takes low + (high - low) u_j
    with u_j = (w_j + 1/2) / 2**32 from the same stream words, in the
    transform's uniform mode (one native pass, like the normal); parts (fused
    tensors) are written segment by segment along ``spec.split_dim`` of the
    logical tensor (``spec.segments``, or equal slices), segment j starting
    at stream index ``offset`` + the numel of segments 0..j-1, row-major
    within the segment (equal slices: slice i at ``offset + i * slice_numel``;
    docs/stream.md). DTensors and hand-made shards
    (``global_shape``, ``shard_offsets``) as in ``trunc_normal_at_``;
    0-element and meta tensors are checked and returned unchanged.

    Args:
        param: the tensor, Parameter or DTensor to write in place.
        spec: what to write (``tinit.schemes.InitSpec``).
        seed, stream, offset: the stream position, as for ``trunc_normal_at_``
            (ints, numpy integers included).
        backend: "auto" or a backend name.
        global_shape, shard_offsets: a hand-made shard, as for ``trunc_normal_at_``.

    Returns:
        ``param``.

    Raises:
        TypeError, ValueError: as ``trunc_normal_at_``; checked for every part
            before anything is written.
    """
    local, layout = _resolve(param, global_shape, shard_offsets, "param")
    constants = _checked_spec(local, layout, spec)
    seed, stream, offset = _stream_position(seed, stream, offset, _logical_numel(local, layout))
    _write_spec_checked(local, layout, spec, constants, seed=seed, stream=stream, offset=offset, backend=backend)
    return param


def fill_(
    param: torch.Tensor,
    scheme: str = "normal",
    layer_idx: int | None = None,
    *,
    role: str | None = None,
    name: str | None = None,
    n_layers: int | None = None,
    d_model: int | None = None,
    fan_in: int | None = None,
    fan_out: int | None = None,
    layout: str = "out_in",
    seed: int | None = None,
    stream: int = 0,
    offset: int = 0,
    generator: torch.Generator | None = None,
    backend: str = "auto",
    global_shape=None,
    shard_offsets=None,
    **options,
) -> torch.Tensor:
    """Initialise one parameter by a named scheme (large-model setup entry point).

    The scheme (``tinit.schemes``) maps the parameter's role, depth, width and
    logical shape to a truncated normal (std in tensor units, bounds in units
    of std), a uniform, a constant, or one of those per slice of a fused
    projection, which is then written from the tinit stream. A tensor of no
    elements, or one on the meta device, is checked and returned unchanged,
    for fan-based schemes too (a weight with a zero fan has no std to give).

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
        fan_in, fan_out: override the fans computed from the logical shape (ints >= 1).
        layout: "out_in" for ``nn.Linear`` / ``nn.Embedding`` weights,
            "in_out" for Hugging Face ``Conv1D`` (GPT-2), or an expert
            stack's layout (``tinit.schemes.LAYOUTS``: the fans of one expert).
        seed: Philox key in [0, 2**64); when None one is drawn from
            ``generator`` as in ``tinit.trunc_normal_`` (only when something is
            written and the spec is not a constant). With a seed, torch's RNG
            is not touched.
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
            models), ``qkv`` (a fused q/k/v projection's
            ``tinit.architecture.FusedQKV``), ``experts`` (the expert count
            of a 2-D grouped layout) and the scheme's own options, e.g.
            ``std=0.01``.

    Returns:
        ``param``.

    Raises:
        tinit.schemes.UnknownNameError: unknown scheme or role (a KeyError and a ValueError).
        ValueError: the scheme needs a role, ``n_layers``, ``layer_idx`` or
            ``d_model`` that is missing, or invalid options, stream position
            or tensor (see ``trunc_normal_at_``).
        TypeError: an option the scheme does not take, an unsupported
            dtype or tensor kind, a non-integer seed/stream/offset.
        All raised before anything is written or drawn.
    """
    from tinit.roles import infer_layer, infer_role

    if role is None and name is not None:
        role = infer_role(name)
    if layer_idx is None and name is not None:
        layer_idx = infer_layer(name)
    local, shard = _resolve(param, global_shape, shard_offsets, "param")
    _check_generator(generator)
    shape = tuple(param.shape) if shard is None else shard.global_shape
    spec = schemes.get(scheme).spec(
        role=role,
        layer_idx=layer_idx,
        n_layers=n_layers,
        shape=shape,
        d_model=d_model,
        fan_in=fan_in,
        fan_out=fan_out,
        layout=layout,
        **options,
    )
    constants = _checked_spec(local, shard, spec)
    numel = _logical_numel(local, shard)
    stream_seed = 0 if seed is None else seed
    stream_seed, stream, offset = _stream_position(stream_seed, stream, offset, numel)
    if seed is None and _draws(spec) and _writes(param, local):
        if local.numel():
            dispatch.select(local, backend)  # a bad backend raises before the draw
        stream_seed = _draw_seed(generator)
    _write_spec_checked(local, shard, spec, constants, seed=stream_seed, stream=stream, offset=offset, backend=backend)
    return param
