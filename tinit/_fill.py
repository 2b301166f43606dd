"""The fill front ends: they build ``tinit._plan.Item``s, ``tinit._plan.Plan`` validates and writes.

``trunc_normal_at_`` (a truncated normal from an explicit stream position),
``write_spec_`` (a ``tinit.schemes.InitSpec``: truncated normal, uniform,
constant or per-slice parts), ``fill_`` (one parameter by a named scheme)
and ``write_grouped_`` (many tensors in a few native calls). The drop-in
``tinit.trunc_normal_`` is ``tinit.nn.init.trunc_normal_``.

Every entry point takes a plain tensor, a DTensor (each rank writes its local
shard from the shard's global indices, ``tinit.sharding``), or a hand-made
shard described by ``global_shape`` and ``shard_offsets``."""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import torch

from tinit import schemes
from tinit._plan import Item, Plan, check_seed, located
from tinit.params import as_real, trunc_normal_record


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
    stream version 3 (docs/stream.md): a table of polynomials as Phi^-1 in
    fp32 (AS 241, Wichura 1988, refined by a Newton step, for fp64 tensors), the uniform mode for
    windows narrow against std, the excursion from the bound beyond 8 std
    (the native ``tinit::trunc_normal_value``).
    """

    def record(dtype: torch.dtype):
        if not (type(mean) is float and type(std) is float and type(a) is float and type(b) is float):
            return trunc_normal_record(
                as_real("mean", mean), as_real("std", std), as_real("a", a), as_real("b", b), dtype
            )
        return trunc_normal_record(mean, std, a, b, dtype)

    item = Item(tensor, record, stream, offset, None, global_shape, shard_offsets)
    Plan.build((item,), seed=check_seed(seed), backend=backend, where=None).run()
    return tensor


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
    item = Item(param, _spec_of(spec), stream, offset, None, global_shape, shard_offsets)
    Plan.build((item,), seed=check_seed(seed), backend=backend, where=None).run()
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
            ``tinit.families.FusedQKV``), ``experts`` (the expert count
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

    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be a str (a parameter's qualified name) or None, got {type(name).__name__}")
    if role is None and name is not None:
        role = infer_role(name)
    if layer_idx is None and name is not None:
        layer_idx = infer_layer(name)

    def spec(dtype: torch.dtype) -> schemes.InitSpec:  # after the tensor's checks, before any draw
        shape = tuple(param.shape) if global_shape is None else tuple(operator.index(v) for v in global_shape)
        return schemes.get(scheme).spec(
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

    item = Item(param, spec, stream, offset, None, global_shape, shard_offsets)
    Plan.build((item,), seed=seed, generator=generator, backend=backend, where=None).run()
    return param


class FillItem(NamedTuple):
    """One tensor of a grouped fill.

    Attributes:
        tensor: tensor, Parameter or DTensor (float32/float64/bfloat16/float16).
        spec: what to write (``tinit.schemes.InitSpec``).
        stream: stream id in [0, 2**64), e.g. ``tinit.stream_for(name)``.
        offset: stream index of the logical tensor's element 0.
    """

    tensor: torch.Tensor
    spec: schemes.InitSpec
    stream: int
    offset: int = 0


def write_grouped_(
    items: Iterable[FillItem],
    *,
    seed: int,
    backend: str = "auto",
    sequential: bool = False,
    progress=None,
    names: Sequence[str] | None = None,
) -> None:
    """Write every item's spec into its tensor, batching the native calls.

    Equivalent to ``write_spec_(item.tensor, item.spec, seed=seed,
    stream=item.stream, offset=item.offset, backend=backend)`` for each item
    in order, bit for bit. Truncated-normal and uniform pieces (whole tensors,
    fused-projection segments, shards whose stream indices are one range) go
    into one table per device and backend (``tinit.dispatch.Backend.fill_grouped``):
    the CPU backend's ``tinit::trunc_normal_grouped_`` call, whose threads
    share all the elements; on a GPU (``cuda`` and ``triton``) one launch per
    dtype for the tensors of up to ``tinit.dispatch.Backend.table_max_numel``
    elements, larger ones one launch each. Zero constants (biases) are
    written by ``torch._foreach_zero_``, other constants (norm gains) by
    ``fill_``; shards split along an inner dim, views that are not contiguous
    and tensors of the reference backend are written one by one.

    Args:
        items: FillItems, or (tensor, spec, stream[, offset]) tuples (any
            iterable; read once). Tensors whose memory overlaps (the same
            tensor twice, or two Parameters sharing storage) make the whole
            call sequential, in list order, with a RuntimeWarning: later
            items overwrite earlier ones, as with ``write_spec_`` one by one.
        seed: Philox key in [0, 2**64), shared by all items (required: a
            grouped fill never draws from torch's RNG).
        backend: "auto" or a backend name, as for ``trunc_normal_at_``.
        sequential: write the items one by one, in order, after checking all
            of them (``init_model_(grouped=False)``).
        progress: optional callable wrapping the list of items as they are
            written one by one (``tqdm``); unused by a batched write.
        names: one label (str) per item for the error messages, as many
            as there are items; "item i" when None.

    Raises:
        TypeError, ValueError: the seed, or any item's tensor (dtype, a
            sparse or nested tensor), spec (e.g. a constant the dtype cannot
            hold), stream, offset or layout (e.g. a ``Partial`` DTensor) is
            invalid; the message names the item.
        tinit.params.InternalOverlapError: an item's tensor has elements that
            share memory (an expanded view); a ValueError and a RuntimeError.
        RuntimeError: no backend fills one of the tensors.
        tinit.params.InferenceTensorError: an inference tensor outside
            ``torch.inference_mode`` (a ValueError and a RuntimeError).
        All checked for every item before anything is written.
    """
    if not isinstance(sequential, bool):
        raise TypeError(f"write_grouped_: sequential must be True or False, got {type(sequential).__name__}")
    if names is not None and (isinstance(names, str) or not isinstance(names, Sequence)):
        raise TypeError(f"write_grouped_: names must be a sequence of str, got {type(names).__name__}")
    items = _named(items, names)
    if names is not None and len(names) != len(items):
        raise ValueError(f"write_grouped_: {len(names)} names for {len(items)} items")
    plan = Plan.build(items, seed=check_seed(seed), backend=backend, sequential=sequential, where="write_grouped_")
    plan.run(progress)


def _spec_of(spec):
    """``spec`` for an ``Item``; anything but an InitSpec is refused after the tensor's checks."""
    if isinstance(spec, schemes.InitSpec):
        return spec

    def refuse(dtype: torch.dtype):
        raise TypeError(f"spec must be a tinit.schemes.InitSpec, got {type(spec).__name__}")

    return refuse


def _named(items: Iterable, names: Sequence[str] | None) -> list[Item]:
    """``items`` as ``Item``s of a spec each, labelled by ``names`` when given.

    Raises:
        TypeError: an item that is not a (tensor, spec, stream[, offset]) tuple (named).
    """
    found = []
    for index, item in enumerate(items):
        name = None if names is None or index >= len(names) else names[index]
        try:
            tensor, spec, stream, offset = item if type(item) is FillItem else FillItem(*item)
        except TypeError as exc:
            label = f"item {index}" if name is None else f"parameter {name}"
            raise located(exc, f"write_grouped_: {label}") from exc
        found.append(Item(tensor, _spec_of(spec), stream, offset, name))
    return found
