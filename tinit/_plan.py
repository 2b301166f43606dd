"""The one engine under every fill: items in, one plan validated once, one write body.

The front ends (``tinit.trunc_normal_at_``, ``tinit.write_spec_``,
``tinit.fill_``, ``tinit.write_grouped_``, the ``tinit.nn.init`` fills,
``tinit.init_model_`` and ``tinit.patch_torch_init``) only build ``Item``s.
``Plan.build`` resolves each tensor once (a DTensor or a hand-made shard
becomes its local tensor and its ``tinit.sharding.ShardLayout``), validates
everything before anything is written or drawn (tensor, dtype, layout,
overlap, inference tensors, fused splits, stream range, backend), computes
each transform record once, picks the backend once per (device, dtype) and
sorts the pieces into zeros (one ``torch._foreach_zero_`` per device), other
constants, one table per backend and device for its grouped call, and single
writes. ``Plan.run`` draws the key when no seed was given and writes.

A view that is not contiguous is written slab by slab through one contiguous
buffer of at most ``CHUNK_BYTES`` (4 MiB): no temporary of the view's size.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import operator
import warnings
from collections.abc import Iterable
from typing import NamedTuple

import torch

from tinit import dispatch, schemes
from tinit.params import (
    SUPPORTED_DTYPES,
    TruncNormalParams,
    as_real,
    check_tensor,
    is_fake,
    trunc_normal_record,
    uniform_record,
)
from tinit.sharding import ShardLayout, StreamRuns, enabled_local_mode, is_dtensor, outside_local_mode

# The largest buffer a view that is not contiguous is written through.
CHUNK_BYTES = 4 << 20

_PLAIN = frozenset({torch.Tensor, torch.nn.Parameter})
_STRIDED = torch.strided
_SUPPORTED = frozenset(SUPPORTED_DTYPES)
_U64, _I63 = 2**64, 2**63
_DISTRIBUTIONS = ("trunc_normal", "uniform")  # tinit.schemes.InitSpec.distribution
# What an item writes, decided once per (spec, dtype).
_RECORD, _ZERO, _CONSTANT, _PARTS, _MAPPED = range(5)
_HOST = torch.device("cpu")  # where a mapped draw is made and mapped (``_write_mapped``)


def _softplus_inverse_exp(x: torch.Tensor, floor: float) -> torch.Tensor:
    dt = torch.exp(x).clamp(min=floor)
    return dt + torch.log(-torch.expm1(-dt))  # softplus^-1(dt), as HF Mamba2Mixer.init_mamba2_weights writes it


# The per-element maps of ``tinit.schemes.InitSpec.map`` (docs/stream.md, "Mapped draws"): name ->
# (how many numbers follow the name, the function of a float64 tensor and those numbers). Each is
# increasing, so its values at the draw's bounds bound all of them.
MAPS = {
    "log": (0, torch.log),
    "softplus_inverse_exp": (1, _softplus_inverse_exp),
}


class Item(NamedTuple):
    """One tensor of a plan.

    Attributes:
        tensor: tensor, Parameter or DTensor (float32/float64/bfloat16/float16).
        what: a ``tinit.schemes.InitSpec``, a ``tinit.params.TruncNormalParams``
            record, a float constant, or a callable taking the tensor's dtype
            and returning one of those (a front end's own argument checks,
            run after the tensor's and before anything is drawn).
        stream: stream id in [0, 2**64).
        offset: stream index of the logical tensor's element 0.
        name: label of the item in error messages ("parameter <name>"); None: "item <i>".
        global_shape, shard_offsets: ``tensor`` is the block at
            ``shard_offsets`` of a logical tensor of ``global_shape``; both or neither.
            ``shard_offsets`` may also be a ``tinit.sharding.ShardLayout`` of that
            logical tensor (a block of a strided shard: the global index of each position).
        zero_rows: dim-0 rows of the logical tensor written 0 after ``what``
            (``nn.Embedding``'s padding row); a shard zeroes the part it holds.
    """

    tensor: torch.Tensor
    what: object
    stream: int = 0
    offset: int = 0
    name: str | None = None
    global_shape: tuple | None = None
    shard_offsets: tuple | None = None
    zero_rows: tuple[int, ...] = ()


def _as_index(name: str, value, low: int = 0, high: int | None = None) -> int:
    """``value`` as a Python int in [low, high): ints and integer scalars (numpy's included).

    Raises:
        TypeError: a bool, a float, a tensor or anything else without ``__index__``.
        ValueError: outside [low, high).
    """
    if type(value) is not int:
        if isinstance(value, bool) or not hasattr(type(value), "__index__") or isinstance(value, torch.Tensor):
            raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
        value = operator.index(value)
    if value < low or (high is not None and value >= high):
        bound = f"[{low}, 2**64)" if high == _U64 else (f"[{low}, {high})" if high is not None else f">= {low}")
        raise ValueError(f"{name} must be an int in {bound}, got {value!r}")
    return value


def eager_under_compile(fn):
    """``fn``, run eagerly under ``torch.compile`` (one graph break at the call): its host-side fp64
    constants, cached checks, a key's draw (a host read of a tensor) and a call counter are not
    graph material. Outside compilation ``fn`` is called directly, without the disabled wrapper's
    cost.

    The disabled wrapper is torch's ``torch._disable_dynamo``, which imports ``torch._dynamo`` at
    its first call (only ever made while compiling, when dynamo is loaded), not at decoration:
    ``torch.compiler.disable`` imports it at once, about 1.5 s of ``import tinit``. Dynamo skips
    that wrapper's frame as torch's own code, so the call runs eagerly. A torch without it falls
    back to ``torch.compiler.disable``.

    Args:
        fn: the function.

    Returns:
        A function of the same signature.
    """
    lazy = getattr(torch, "_disable_dynamo", None)
    disabled = lazy(fn) if lazy is not None else torch.compiler.disable(fn)

    @functools.wraps(fn)
    def run(*args, **kwargs):
        if torch.compiler.is_compiling():
            return disabled(*args, **kwargs)
        return fn(*args, **kwargs)

    return run


def check_seed(seed) -> int:
    """``seed`` as an int, checked: a Philox key in [0, 2**64) (numpy integers are ints).

    Raises:
        TypeError: a bool, float or other non-integer.
        ValueError: outside [0, 2**64).
    """
    if type(seed) is int and 0 <= seed < _U64:
        return seed
    return _as_index("seed", seed, 0, _U64)


def _position(stream, offset, numel: int) -> tuple[int, int]:
    """(stream, offset) as ints, checked for a logical tensor of ``numel`` elements.

    Raises:
        TypeError: a bool, float or other non-integer.
        ValueError: stream outside [0, 2**64), offset < 0 or offset + numel > 2**63.
    """
    stream = _as_index("stream", stream, 0, _U64)
    offset = _as_index("offset", offset)
    if offset + numel > _I63:
        raise ValueError(
            f"offset must be an int >= 0 with offset + numel <= 2**63, got {offset!r} for {numel} elements"
        )
    return stream, offset


def located(exc: Exception, where: str) -> Exception:
    """``exc`` again, its message followed by ``where`` (same class, so ``except`` clauses hold)."""
    try:
        return type(exc)(f"{exc} ({where})")
    except TypeError:  # a class whose constructor takes other arguments
        exc.add_note(where)
        return exc


def shards_of(
    tensor: torch.Tensor, global_shape=None, shard_offsets=None, name: str = "tensor", cache: dict | None = None
) -> tuple[tuple[torch.Tensor, ShardLayout | None], ...]:
    """((a tensor to write, its place in the logical tensor or None when it is the whole of it), ...).

    One pair, except for a DTensor simulated by torch's ``LocalTensorMode``:
    one per simulated rank (``tinit.sharding.ShardLayout.local_shards``).

    Args:
        tensor: a tensor, Parameter or DTensor (its local tensors are written).
        global_shape, shard_offsets: a hand-made shard (``Item``); both or neither.
        name: how the messages name the tensor.
        cache: a DTensor's layout cache for one pass (``ShardLayout.local_shards``).

    Raises:
        TypeError, ValueError: as ``tinit.params.check_tensor`` for a tensor
            written, or a bad shard description.
    """
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    if is_dtensor(tensor):
        if global_shape is not None or shard_offsets is not None:
            raise ValueError("a DTensor carries its own layout; do not pass global_shape/shard_offsets with it")
        shards = ShardLayout.local_shards(tensor, cache)
        for local, _ in shards:
            check_tensor(local, f"{name} (local shard)")
        return shards
    check_tensor(tensor, name)
    if global_shape is None and shard_offsets is None:
        return ((tensor, None),)
    if global_shape is None or shard_offsets is None:
        raise ValueError("a shard needs both global_shape and shard_offsets")
    if isinstance(shard_offsets, ShardLayout):
        if shard_offsets.local_shape != tuple(tensor.shape) or shard_offsets.global_shape != tuple(global_shape):
            raise ValueError(
                f"a shard layout of local shape {shard_offsets.local_shape} in {shard_offsets.global_shape} "
                f"does not describe a tensor of shape {tuple(tensor.shape)} in {tuple(global_shape)}"
            )
        return ((tensor, shard_offsets),)
    for label, value in (("global_shape", global_shape), ("shard_offsets", shard_offsets)):
        if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
            raise TypeError(f"{label} must be a sequence of ints (one per dim), got {type(value).__name__}")
    return ((tensor, ShardLayout.from_offsets(tuple(global_shape), tuple(tensor.shape), tuple(shard_offsets))),)


def _draw_key(generator: torch.Generator | None) -> int:
    """One Philox key from torch's RNG: a uniform int64 on [0, 2**63).

    Drawn on the generator's device, and on the CPU when there is none: the
    CPU default generator (``torch.manual_seed``), whatever the default
    device (meta included), so a seed gives the same values everywhere.

    Under torch's ``LocalTensorMode`` the default generator is each simulated
    rank's own (every rank draws, as it would in its process) and the ranks
    must agree; a ``generator`` given is one object, drawn from once.

    Raises:
        RuntimeError: simulated ranks whose RNG states give different keys.
    """
    if generator is not None:
        with outside_local_mode():
            return int(torch.empty((), dtype=torch.int64, device=generator.device).random_(generator=generator))
    (key,) = torch.empty(1, dtype=torch.int64, device="cpu").random_().tolist()  # the same draw as 0-d
    if type(key) is not int:  # a LocalTensorMode SymInt: the simulated ranks drew different keys
        raise RuntimeError(f"the simulated ranks' RNG states give different keys ({key}): pass seed= or a generator")
    return key


def leaf_record(spec: schemes.InitSpec, dtype: torch.dtype) -> TruncNormalParams:
    """The transform record of a single-distribution, non-constant ``spec`` for a supported ``dtype``.

    A uniform takes the transform's uniform mode (``tinit.params.uniform_constants``),
    a truncated normal ``tinit.params.transform_constants``: both are one native pass.

    Raises:
        TypeError, ValueError: as ``transform_constants`` / ``uniform_constants``.
    """
    if spec.distribution not in _DISTRIBUTIONS:
        raise ValueError(f"distribution must be 'trunc_normal' or 'uniform', got {spec.distribution!r}")
    lo, hi = spec.bounds
    if spec.distribution == "uniform":
        std = as_real("std", spec.std)
        if not (math.isfinite(std) and std > 0):
            raise ValueError(f"std must be finite and > 0, got std={spec.std}")
        return uniform_record(as_real("low", lo), as_real("high", hi), dtype)
    return trunc_normal_record(
        as_real("mean", spec.mean), as_real("std", spec.std), as_real("a", lo), as_real("b", hi), dtype
    )


def _mapped(spec: schemes.InitSpec, dtype: torch.dtype) -> tuple:
    """(the float64 transform record of ``spec``'s draw, its map's function, the map's numbers) for a
    spec with a ``map``, checked for a tensor of ``dtype``.

    Raises:
        ValueError: a map on a constant or a fused spec, an unknown map or wrong numbers for it (a
            negative floor), or a map whose values over the draw's support are not finite values of
            ``dtype`` (log of a support reaching 0).
    """
    value = spec.map
    if spec.parts is not None or spec.constant is not None:
        raise ValueError(f"map {value!r} applies to a drawn spec, not to a constant or a fused spec of parts")
    if not isinstance(value, tuple) or not value or value[0] not in MAPS:
        raise ValueError(f"map must be a tuple (name, *numbers) with name in {sorted(MAPS)}, got {value!r}")
    count, function = MAPS[value[0]]
    numbers = value[1:]
    if len(numbers) != count or not all(type(n) in (int, float) and math.isfinite(n) for n in numbers):
        raise ValueError(f"map {value[0]!r} takes {count} finite number(s) after its name, got {value!r}")
    if value[0] == "softplus_inverse_exp" and numbers[0] < 0:
        raise ValueError(f"map 'softplus_inverse_exp' needs a floor >= 0, got {numbers[0]!r}")
    record = leaf_record(dataclasses.replace(spec, map=None), torch.float64)
    ends = function(torch.tensor(spec.bounds, dtype=torch.float64), *numbers)
    if not (torch.isfinite(ends).all() and ends.abs().max() <= torch.finfo(dtype).max):
        raise ValueError(
            f"map {value!r} of the draw's support {spec.bounds} gives {ends.tolist()}: not finite values of {dtype}"
        )
    return record, function, numbers


def _constant(value, dtype: torch.dtype) -> float:
    """A constant to write, checked: a finite value of ``dtype`` (bools refused).

    Raises:
        ValueError: anything else.
    """
    try:
        real = as_real("constant", value)
    except TypeError:
        real = math.nan
    if isinstance(value, bool) or not math.isfinite(real) or abs(real) > torch.finfo(dtype).max:
        raise ValueError(f"constant {value!r} is not a finite value of {dtype}")
    return real


def _spec_records(spec: schemes.InitSpec, dtype: torch.dtype, found: dict) -> dict:
    """Validate every piece of ``spec`` for ``dtype``; ``found`` gets ``{id(leaf): record}`` for every
    single-distribution, non-constant piece (computed here once) and is returned."""
    if spec.parts is not None:
        if not isinstance(spec.parts, tuple) or not spec.parts:
            raise ValueError(f"parts must be a non-empty tuple of tinit.schemes.InitSpec, got {spec.parts!r}")
        for part in spec.parts:
            if not isinstance(part, schemes.InitSpec):
                raise TypeError(f"parts must hold tinit.schemes.InitSpec, got {type(part).__name__}")
            if part.map is not None:
                raise ValueError(f"map {part.map!r} applies to a whole spec, not to a part of a fused one")
            _spec_records(part, dtype, found)
    elif spec.constant is not None:
        _constant(spec.constant, dtype)
    else:
        found[id(spec)] = leaf_record(spec, dtype)
    return found


def _draws(spec: schemes.InitSpec) -> bool:
    """Whether writing ``spec`` reads the stream (some piece is not a constant)."""
    if spec.parts is not None:
        return any(_draws(part) for part in spec.parts)
    return spec.constant is None


def _segments(spec: schemes.InitSpec, size: int) -> tuple[tuple[int, int], ...]:
    """((part, length), ...) of a fused ``spec`` along a split dim of ``size``: its ``segments``, or
    equal consecutive slices (``size`` divisible by the part count, checked by ``_split_checked``)."""
    if spec.segments is not None:
        return spec.segments
    length = size // len(spec.parts)
    return tuple((i, length) for i in range(len(spec.parts)))


def leaves(local: torch.Tensor, layout: ShardLayout | None, spec: schemes.InitSpec, offset: int):
    """Split a checked ``spec`` into its single-distribution pieces.

    Yields:
        (view of ``local``, its layout or None, a spec without parts, stream
        index of the piece's logical element 0). Segment j of a fused tensor
        (``_segments``) is its slice along ``spec.split_dim`` of the logical
        tensor and starts at ``offset`` + the numel of segments 0..j-1.
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
        yield from leaves(view, sub, spec.parts[part], offset + start * row_numel)
        start += length


def _split_checked(spec: schemes.InitSpec, shape: tuple[int, ...]) -> None:
    """Raise ValueError when a fused spec does not split ``shape``: a ``split_dim`` outside it, equal
    slices that do not divide it, or ``segments`` that are not (part index, length >= 1) pairs
    covering it exactly and naming every part."""
    if spec.parts is None:
        if spec.segments is not None:
            raise ValueError("a spec with segments needs parts (one spec per part index)")
        return
    count, dim, segments = len(spec.parts), spec.split_dim, spec.segments
    if type(dim) is not int or not 0 <= dim < len(shape):
        raise ValueError(f"split_dim {dim!r} is not a dim of shape {shape}")
    if segments is None:
        if shape[dim] % count:
            raise ValueError(f"dim {dim} of shape {shape} does not split into {count}")
    else:
        if (
            not isinstance(segments, tuple)
            or not all(
                isinstance(s, tuple) and len(s) == 2 and type(s[0]) is int and type(s[1]) is int for s in segments
            )
            or not all(0 <= part < count and length >= 1 for part, length in segments)
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


def _rows_checked(rows, layout: ShardLayout | None, local: torch.Tensor) -> tuple[int, ...]:
    """``zero_rows`` as ints, each a dim-0 index of the logical tensor.

    Raises:
        TypeError: not a tuple of ints.
        ValueError: a tensor of no dims, or a row outside dim 0.
    """
    shape = tuple(local.shape) if layout is None else layout.global_shape
    if not isinstance(rows, tuple):
        raise TypeError(f"zero_rows must be a tuple of ints, got {type(rows).__name__}")
    if not shape:
        raise ValueError("zero_rows needs a tensor of at least one dim")
    return tuple(_as_index("zero_rows entry", row, 0, shape[0]) for row in rows)


def _pieces(view: torch.Tensor, layout: ShardLayout | None, offset: int, limit: int, dim: int = 0):
    """Split ``view`` into consecutive blocks of at most ``limit`` elements, in row-major order.

    Each block is a slab along ``dim`` (every dim before it already of size
    1) holding the dims after it whole; a single index of ``dim`` too large
    is split along the next dim.

    Yields:
        (block of ``view``, its layout or None, stream index of its element 0
        for a block without layout; the logical tensor's ``offset`` with one).
    """
    if view.numel() <= limit:
        yield view, layout, offset
        return
    size, inner = view.shape[dim], math.prod(view.shape[dim + 1 :])
    step = max(1, limit // inner)
    for start in range(0, size, step):
        length = min(step, size - start)
        block = view.narrow(dim, start, length)
        sub = None if layout is None else layout.local_narrow(dim, start, length)
        at = offset + start * inner if layout is None else offset
        if inner > limit:
            yield from _pieces(block, sub, at, limit, dim + 1)
        else:
            yield block, sub, at


def _write(
    backend: dispatch.Backend,
    local: torch.Tensor,
    layout: ShardLayout | None,
    record: TruncNormalParams,
    seed: int,
    stream: int,
    offset: int,
) -> None:
    """Write ``record`` from stream (``seed``, ``stream``) into the checked ``local``: the one write body.

    ``local``'s element j (row-major) takes stream index ``offset + j``, or
    for a shard the index ``layout`` gives it. A contiguous tensor is filled
    in place; any other view slab by slab (``_pieces``) through one buffer
    of at most ``CHUNK_BYTES``, each slab then copied into the view.
    """
    if local.is_contiguous():
        runs = StreamRuns(offset, local.numel()) if layout is None else layout.runs(offset)
        backend.fill_shard(local, seed, stream, runs, record)
        return
    limit = max(1, CHUNK_BYTES // local.element_size())
    buffer = torch.empty(min(limit, local.numel()), dtype=local.dtype, device=local.device)
    for piece, sub, at in _pieces(local, layout, offset, limit):
        runs = StreamRuns(at, piece.numel()) if sub is None else sub.runs(at)
        if piece.is_contiguous():
            backend.fill_shard(piece, seed, stream, runs, record)
        else:
            target = buffer[: piece.numel()].view(piece.shape)
            backend.fill_shard(target, seed, stream, runs, record)
            piece.copy_(target)


def _write_mapped(
    backend: dispatch.Backend,
    local: torch.Tensor,
    layout: ShardLayout | None,
    mapped: tuple,
    seed: int,
    stream: int,
    offset: int,
) -> None:
    """Write a mapped draw (``_mapped``'s record, function, numbers) into ``local``: the draw in
    float64 at the stream indices ``_write`` gives ``local``'s elements, into a host buffer of its
    shape, the map there, then one copy into ``local`` (rounding to its dtype, onto its device)."""
    record, function, numbers = mapped
    buffer = torch.empty(tuple(local.shape), dtype=torch.float64, device=_HOST)
    _write(backend, buffer, layout, record, seed, stream, offset)
    local.copy_(function(buffer, *numbers))


def _zero_rows(local: torch.Tensor, layout: ShardLayout | None, rows: tuple[int, ...]) -> None:
    """Zero dim-0 rows ``rows`` of the logical tensor: of a shard, the part of each row it holds."""
    for index in rows:
        if layout is None:
            local[index].zero_()
        else:
            first, length, _ = layout.narrow(0, index, 1)
            if length:
                local.narrow(0, first, length).zero_()


def _span(local: torch.Tensor) -> tuple[int, int, int]:
    """(device index, first byte, end) of the memory a non-empty ``local`` reaches (device -1: the CPU)."""
    start = local.data_ptr()
    if local.is_contiguous():
        reach = local.numel() - 1
    else:
        reach = sum((n - 1) * step for n, step in zip(local.shape, local.stride(), strict=True))
    return local.get_device(), start, start + (reach + 1) * local.element_size()


def _overlaps(spans: list[tuple[int, int, int]]) -> int:
    """How many of the byte ranges ``spans`` ((device index, start, end), one per non-empty tensor)
    overlap an earlier one."""
    spans.sort()
    count, device, reach = 0, None, 0
    for dev, start, end in spans:
        if dev == device and start < reach:
            count += 1
        if dev != device:
            device, reach = dev, end
        else:
            reach = max(reach, end)
    return count


class Plan:
    """Checked items sorted into what is written how; built by ``Plan.build``, written by ``Plan.run``.

    Nothing is written or drawn before ``run``. Items whose memory overlaps
    make the plan sequential (item order, later items overwriting earlier
    ones) with a RuntimeWarning.
    """

    __slots__ = (
        "_backends",
        "_kinds",
        "_layouts",
        "backend",
        "deferred",
        "draw_on_write",
        "draws",
        "entries",
        "fills",
        "generator",
        "mapped",
        "rows",
        "seed",
        "sequential",
        "singles",
        "tables",
        "where",
        "writes",
        "zeros",
    )

    @classmethod
    def build(
        cls,
        items: Iterable,
        *,
        seed: int | None = None,
        generator: torch.Generator | None = None,
        backend: str = "auto",
        sequential: bool = False,
        where: str | None = "",
        draw_on_write: bool = False,
    ) -> Plan:
        """Validate every item once and sort it; raises before any write or draw.

        Args:
            items: ``Item``s, or tuples of their fields (a ``tinit.FillItem``
                included); any iterable, read once.
            seed: Philox key in [0, 2**64) shared by all items; None: ``run``
                draws one from ``generator`` (torch's RNG).
            generator: the ``torch.Generator`` the key is drawn from, or None.
            backend: "auto" or a name of ``tinit.dispatch.BACKENDS``.
            sequential: write the items one by one, in order.
            where: how errors name the item: "<where>: parameter <name>" (or
                "item <i>") after the message; None raises them unchanged (a
                single-tensor front end whose messages name the argument).
            draw_on_write: draw the key when something is written even if it
                is all constants (the ``tinit.nn.init`` rule: one key per
                writing call); by default only when a written piece is random.

        Returns:
            The plan.

        Raises:
            TypeError, ValueError: a bad seed, generator, tensor (dtype:
                ``tinit.params.DtypeError``), spec, stream, offset, layout or
                zero row; ``InternalOverlapError``, ``InferenceTensorError``
                (both ValueErrors) as ``tinit.params.check_tensor``.
            RuntimeError: no backend fills one of the tensors.
        """
        plan = object.__new__(cls)
        plan.seed = None if seed is None else check_seed(seed)
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
        plan.generator, plan.backend, plan.sequential, plan.draw_on_write = (
            generator,
            backend,
            sequential,
            draw_on_write,
        )
        plan.writes = plan.draws = False
        plan.where = where
        plan.entries, plan.fills, plan.rows, plan.singles, plan.deferred = [], [], [], [], []
        plan.mapped = []
        plan.zeros, plan.tables, plan._kinds, plan._backends, plan._layouts = {}, {}, {}, {}, {}
        index, item = -1, None
        mode = enabled_local_mode()  # torch's LocalTensorMode: tinit's own tensors are plain ones
        try:
            with contextlib.nullcontext() if mode is None else mode.disable():
                for item in items:
                    index += 1
                    plan._add(item)
        except (TypeError, ValueError) as exc:
            if where is None:
                raise
            name = getattr(item, "name", None)
            label = f"item {index}" if name is None else f"parameter {name}"
            raise located(exc, f"{where}: {label}" if where else label) from exc
        plan._check_overlaps()
        return plan

    def bind(self, fresh) -> Plan:
        """File the items whose tensors were on the meta device at ``build`` and have been allocated
        since (``tinit.init_model_`` checks a meta model, then allocates it, then writes it).

        Args:
            fresh: {id(a meta tensor given to ``build``): the tensor now in its place}; a tensor
                missing from it is looked at as it is now (a DTensor swapped in place).

        Returns:
            The plan. Items still on the meta device stay unwritten.
        """
        deferred, self.deferred = self.deferred, []
        for tensor, global_shape, shard_offsets, kind, what, records, stream, offset, rows in deferred:
            tensor = fresh.get(id(tensor), tensor)
            if type(tensor) in _PLAIN and global_shape is None and shard_offsets is None:
                shards = ((tensor, None),)
            else:
                with outside_local_mode():
                    shards = shards_of(tensor, global_shape, shard_offsets, cache=self._layouts)
            for local, layout in shards:
                if not local.is_meta:
                    self._enter(tensor, local, layout, kind, what, records, stream, offset, rows)
        self._check_overlaps()
        return self

    def _check_overlaps(self) -> None:
        """Items whose memory overlaps make the plan sequential, with a RuntimeWarning."""
        shared = _overlaps([_span(entry[0]) for entry in self.entries]) if len(self.entries) > 1 else 0
        if shared and not self.sequential:
            warnings.warn(
                f"{self.where or 'tinit'}: {shared} of the tensors share memory with an earlier one; writing "
                "all items one by one in list order (later items overwrite earlier ones)",
                RuntimeWarning,
                stacklevel=4,
            )
        self.sequential = self.sequential or bool(shared)

    def _add(self, item) -> None:
        """Check one item and file what it writes."""
        if type(item) is not Item:
            item = Item(*item)
        tensor, what, stream, offset, _, global_shape, shard_offsets, rows = item
        shards = None
        if type(tensor) in _PLAIN and global_shape is None and shard_offsets is None:
            local, layout = tensor, None
            if (
                local.dtype not in _SUPPORTED
                or local.is_nested
                or local.layout is not _STRIDED
                or local.is_neg()
                or not local.is_contiguous()
                or local.is_inference()
            ):
                check_tensor(local)  # the full check, which raises when it must
        else:
            shards = shards_of(tensor, global_shape, shard_offsets, cache=self._layouts)
            local, layout = shards[0]  # the checks below read only what every rank's shard shares
        dtype = local.dtype
        if callable(what):  # a front end's own checks, after the tensor's
            what = what(dtype)
        if type(what) is TruncNormalParams:
            kind, records = _RECORD, None
        else:
            kind, what, records = self._kind(what, dtype)
        if kind == _PARTS:
            _split_checked(what, tuple(local.shape) if layout is None else layout.global_shape)
        numel = local.numel()
        if not (
            layout is None
            and type(stream) is int
            and type(offset) is int
            and 0 <= stream < _U64
            and 0 <= offset <= _I63 - numel
        ):  # else the full check, which raises when it must
            stream, offset = _position(stream, offset, numel if layout is None else math.prod(layout.global_shape))
        if rows:
            rows = _rows_checked(rows, layout, local)
        if tensor.numel() == 0:
            return  # checked; nothing to write, so nothing drawn
        if type(local) not in _PLAIN and is_fake(local):
            return  # a tracer's tensor (FakeTensorMode): checked; no data, so nothing written or drawn, as by torch
        if local.is_meta:  # checked; written only once allocated (``bind``)
            self.deferred.append((tensor, global_shape, shard_offsets, kind, what, records, stream, offset, rows))
            return
        for shard, shard_layout in shards or ((local, layout),):
            self._enter(tensor, shard, shard_layout, kind, what, records, stream, offset, rows)

    def _enter(self, tensor, local, layout, kind, what, records, stream: int, offset: int, rows) -> None:
        """File a checked item that writes: pick its backend, sort its pieces."""
        self.writes = True
        random = kind in (_RECORD, _MAPPED) or (kind == _PARTS and _draws(what))
        self.draws = self.draws or random
        if local.numel() == 0:
            return  # an empty shard of this rank: it draws as the others do
        if kind == _MAPPED:
            self._host_backend()
        elif random:
            dtype = local.dtype
            found = self._backends.get((local.device, dtype))
            if found is None:  # also raises when no backend fills the tensor
                found = self._backends[local.device, dtype] = dispatch.select(local, self.backend)
        self.entries.append((local, layout, kind, what, records, stream, offset, rows))
        if kind == _RECORD:
            self._file_record(local, layout, what, stream, offset)
        else:
            self._file(local, layout, kind, what, records, stream, offset)
        if rows:
            self.rows.append((local, layout, rows))

    def _host_backend(self) -> dispatch.Backend:
        """The backend of mapped draws (float64 on the host): the plan's own where it runs there,
        else "auto" (every backend writes the same values)."""
        found = self._backends.get((_HOST, torch.float64))
        if found is None:
            named = dispatch.BACKENDS.get(self.backend)
            name = self.backend if named is not None and (not named.devices or "cpu" in named.devices) else "auto"
            found = dispatch.select(torch.empty(0, dtype=torch.float64), name)
            self._backends[_HOST, torch.float64] = found
        return found

    def _kind(self, what, dtype: torch.dtype) -> tuple:
        """(kind, what to write, records) of a spec or constant, computed once per (spec, dtype).

        Raises:
            TypeError: ``what`` is none of the kinds ``Item`` takes.
            TypeError, ValueError: a piece of the spec is invalid for ``dtype``.
        """
        if isinstance(what, schemes.InitSpec):
            key = (id(what), dtype)
            known = self._kinds.get(key)
            if known is not None:
                return known[0]
            if what.parts is None and what.segments is not None:
                _split_checked(what, ())  # raises: segments need parts
            if what.map is not None:
                found = _MAPPED, _mapped(what, dtype), None
            elif what.parts is not None:
                found = _PARTS, what, _spec_records(what, dtype, {})
            elif what.constant is None:
                found = _RECORD, leaf_record(what, dtype), None
            else:
                found = self._constant_kind(_constant(what.constant, dtype))
            self._kinds[key] = found, what  # the spec kept alive while its id is a key
            return found
        if type(what) in (float, int):
            return self._constant_kind(_constant(what, dtype))
        raise TypeError(f"spec must be a tinit.schemes.InitSpec, got {type(what).__name__}")

    @staticmethod
    def _constant_kind(value: float) -> tuple:
        # -0.0 is a constant of its own: zero_ would write +0.0
        return (_ZERO if value == 0 and math.copysign(1.0, value) > 0 else _CONSTANT), value, None

    def _file(self, local, layout, kind, what, records, stream: int, offset: int) -> None:
        """Sort a written item's pieces into zeros, constants, tables and single writes."""
        if kind == _ZERO:
            self.zeros.setdefault(local.device, []).append(local)
        elif kind == _CONSTANT:
            self.fills.append((local, what))
        elif kind == _RECORD:
            self._file_record(local, layout, what, stream, offset)
        elif kind == _MAPPED:
            self.mapped.append((local, layout, what, stream, offset))
        else:
            for view, sub, leaf, leaf_offset in leaves(local, layout, what, offset):
                if not view.numel():
                    continue
                if leaf.constant is None:
                    self._file_record(view, sub, records[id(leaf)], stream, leaf_offset)
                else:
                    self._file(view, sub, *self._constant_kind(leaf.constant), stream, leaf_offset)

    def _file_record(self, view, layout, record, stream: int, offset: int) -> None:
        """A random piece: into its backend's table when it takes one call there, else a single write.

        A shard split along an inner dim (``StreamRuns`` of several rows) joins the table on a backend
        with ``fill_grouped_runs``, so a rank's row-parallel shards cost what its whole tensors do.
        """
        backend = self._backends[view.device, view.dtype]
        if view.is_contiguous() and view.numel() <= backend.table_max_numel:
            base, runs = offset, None
            if layout is not None:
                runs = layout.runs(offset)
                if runs.contiguous:
                    base, runs = runs.base, None
                elif backend.fill_grouped_runs is None:
                    base = None
            if base is not None:
                key = (backend.name, view.device)
                table = self.tables.get(key)
                if table is None:
                    table = self.tables[key] = (backend, [], [], [], [], [])
                table[1].append(view)
                table[2].append(stream)
                table[3].append(base)
                table[4].append(record)
                table[5].append(runs)
                return
        self.singles.append((backend, view, layout, record, stream, offset))

    def run(self, progress=None) -> None:
        """Draw the key when the plan has no seed (one draw from torch's RNG, only when something is
        written and, unless ``draw_on_write``, something written is random), then write every item.

        Args:
            progress: optional callable wrapping the list of items as they are
                written one by one (``tqdm``); a sequential plan only.
        """
        seed = self.seed
        if seed is None:
            seed = _draw_key(self.generator) if self.draws or (self.draw_on_write and self.writes) else 0
        mode = enabled_local_mode()  # torch's LocalTensorMode: buffers are plain tensors
        with torch.no_grad(), contextlib.nullcontext() if mode is None else mode.disable():
            if self.sequential:
                self._run_in_order(seed, progress)
                return
            for tensors in self.zeros.values():
                torch._foreach_zero_(tensors)
            for tensor, value in self.fills:
                tensor.fill_(value)
            for backend, tensors, streams, offsets, records, runs in self.tables.values():
                if not any(runs):
                    if len(tensors) == 1:
                        backend.fill(tensors[0], seed, streams[0], offsets[0], records[0])
                    else:
                        backend.fill_grouped(tensors, seed, streams, offsets, records)
                    continue
                layouts = [
                    StreamRuns(offset, tensor.numel()) if layout is None else layout
                    for tensor, offset, layout in zip(tensors, offsets, runs, strict=True)
                ]
                backend.fill_grouped_runs(tensors, seed, streams, layouts, records)
            for backend, view, layout, record, stream, offset in self.singles:
                _write(backend, view, layout, record, seed, stream, offset)
            for local, layout, mapped, stream, offset in self.mapped:
                _write_mapped(self._backends[_HOST, torch.float64], local, layout, mapped, seed, stream, offset)
            for local, layout, rows in self.rows:
                _zero_rows(local, layout, rows)

    def _run_in_order(self, seed: int, progress) -> None:
        """Every item in order, each one written whole (its zero rows included) before the next."""
        entries = self.entries if progress is None else progress(self.entries)
        for local, layout, kind, what, records, stream, offset, rows in entries:
            if kind in (_ZERO, _CONSTANT):
                local.fill_(what)
            elif kind == _RECORD:
                _write(self._backends[local.device, local.dtype], local, layout, what, seed, stream, offset)
            elif kind == _MAPPED:
                _write_mapped(self._backends[_HOST, torch.float64], local, layout, what, seed, stream, offset)
            else:
                for view, sub, leaf, leaf_offset in leaves(local, layout, what, offset):
                    if not view.numel():
                        continue
                    if leaf.constant is not None:
                        view.fill_(leaf.constant)
                    else:
                        backend = self._backends[view.device, view.dtype]
                        _write(backend, view, sub, records[id(leaf)], seed, stream, leaf_offset)
            if rows:
                _zero_rows(local, layout, rows)
