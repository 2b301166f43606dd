"""Where a local tensor sits in its logical tensor, and which stream indices it takes.

tinit's value at stream index i depends only on (seed, stream, i, ...), and
the element at row-major flat index g of a logical tensor takes index
``offset + g``. A shard of that tensor (a DTensor's local tensor, or a
Megatron-style tensor-parallel slice) therefore needs no communication: each
rank writes its elements from their global indices, and the assembled tensor
is bit-identical to the single-device fill, whatever the layout.

``ShardLayout`` records, per dim, the global index of each local position
(a contiguous range for ``Shard``/``Replicate``, and the strided positions of
``_StridedShard``); ``ShardLayout.runs`` turns it into the contiguous stream
ranges (``StreamRuns``) the kernels fill.

Under torch's ``LocalTensorMode`` (``torch.distributed._local_tensor``: one
process simulating every rank of a mesh) a DTensor's local tensor is a
``LocalTensor`` holding one shard per simulated rank and the mesh
coordinates are per-rank integers; ``ShardLayout.local_shards`` gives each
rank's plain shard with that rank's layout, so every shard is written as
its own rank would write it.
"""

from __future__ import annotations

import contextlib
import math
import operator
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

__all__ = [
    "ShardLayout",
    "StreamRuns",
    "shard_offsets",
    "shard_shape",
]

# DTensor's and LocalTensorMode's modules are looked up, never imported (about 1.4 s of ``import
# tinit``): a DTensor exists only once torch.distributed.tensor is imported, and a LocalTensorMode
# is enabled only once its module is.
_DTENSOR_MODULE = "torch.distributed.tensor"


def enabled_local_mode():
    """The enabled ``torch.distributed._local_tensor.LocalTensorMode`` (one process simulating every
    rank), or None: none is enabled, that module is not imported, or this torch has none."""
    module = sys.modules.get(_LOCAL_TENSOR_MODULE)
    enabled = getattr(module, "enabled_local_tensor_mode", None)
    return None if enabled is None else enabled()


def _shard_types() -> tuple[type, ...]:
    """DTensor's slice placements along one dim: ``Shard`` and (FSDP2 x TP) ``_StridedShard``,
    which is not a subclass of ``Shard``."""
    from torch.distributed.tensor import Shard

    try:
        from torch.distributed.tensor.placement_types import _StridedShard
    except ImportError:
        return (Shard,)
    return (Shard, _StridedShard)


# torch's LocalTensorMode module: looked up, never imported (a LocalTensor exists only once it is)
_LOCAL_TENSOR_MODULE = "torch.distributed._local_tensor"


def _simulated_ranks(local) -> tuple[int, ...] | None:
    """The ranks a ``LocalTensor`` (LocalTensorMode) holds shards of, sorted; None for any other tensor."""
    module = sys.modules.get(_LOCAL_TENSOR_MODULE)
    if module is None or not isinstance(local, module.LocalTensor):
        return None
    return tuple(sorted(local._ranks))


def outside_local_mode():
    """A context in which torch's enabled ``LocalTensorMode``, if any, is disabled.

    Under an enabled mode every factory call (``torch.arange``, ``torch.empty``)
    makes a ``LocalTensor``; tinit's index tables, buffers and key draws are
    plain tensors of one process, so the engine builds and writes outside it.
    """
    mode = enabled_local_mode()
    return contextlib.nullcontext() if mode is None else mode.disable()


@contextlib.contextmanager
def _enabled(mode):
    """``mode`` (a disabled LocalTensorMode) enabled for the block, disabled again after it."""
    mode.enable_()
    try:
        yield
    finally:
        mode.disable_()


def _simulated_coordinates(mesh, ranks: tuple[int, ...]) -> dict[int, tuple[int, ...]]:
    """{rank: its coordinate on ``mesh``} for the simulated ``ranks``.

    LocalTensorMode patches ``DeviceMesh.get_coordinate`` to give one SymInt
    per mesh dim whose node holds every rank's value, and caches it per mesh
    in the mode: the innermost mode is asked (enabled for the call when the
    engine runs with it disabled); without one holding ``ranks``, a mode of
    those ranks is entered for the call.
    """
    module = sys.modules[_LOCAL_TENSOR_MODULE]
    mode = module.local_tensor_mode()
    if mode is None or not mode.ranks >= frozenset(ranks):
        context = module.LocalTensorMode(frozenset(ranks))
    elif module.enabled_local_tensor_mode() is None:
        context = _enabled(mode)
    else:
        context = contextlib.nullcontext()
    with context:
        coordinate = mesh.get_coordinate()
    return {rank: tuple(int(module._map_to_rank_local_val(c, rank)) for c in coordinate) for rank in ranks}


def _strided_positions(size: int, chunks: int, rank: int, placement) -> torch.Tensor:
    """Positions (int64, increasing) of rank ``rank``'s part of a dim of ``size`` under ``_StridedShard``.

    DTensor's rule (``_StridedShard._split_tensor``): the dim is cut into
    ``split_factor`` pieces as ``torch.chunk`` cuts it, each piece into
    ``chunks`` the same way, and the rank holds its chunk of every piece,
    in piece order. torch computes it by splitting an ``arange`` of the
    whole dim into every rank's chunks, which grows with the mesh; this is
    the same arithmetic on ``split_factor`` ranges (tests check it against
    torch's ``local_shard_size_and_offset``).
    """
    split = int(placement.split_factor)
    piece = -(-size // split)
    ranges = []
    for j in range(split):
        first, length = min(j * piece, size), min((j + 1) * piece, size) - min(j * piece, size)
        step = -(-length // chunks)
        start, end = min(rank * step, length), min((rank + 1) * step, length)
        if end > start:
            if ranges and ranges[-1][1] == first + start:  # adjacent pieces (one chunk each): one range
                ranges[-1] = (ranges[-1][0], first + end)
            else:
                ranges.append((first + start, first + end))
    if not ranges:
        return torch.zeros(0, dtype=torch.int64, device="cpu")
    lengths = {hi - lo for lo, hi in ranges}
    if len(lengths) == 1:  # the even case: one broadcast add, not one arange per piece
        starts = torch.tensor([lo for lo, _ in ranges], dtype=torch.int64, device="cpu")
        return (starts.unsqueeze(1) + torch.arange(lengths.pop(), dtype=torch.int64, device="cpu")).reshape(-1)
    return torch.cat([torch.arange(lo, hi, dtype=torch.int64, device="cpu") for lo, hi in ranges])


def is_dtensor(tensor) -> bool:
    """True when ``tensor`` is a ``torch.distributed.tensor.DTensor`` (or a Parameter holding one)."""
    module = sys.modules.get(_DTENSOR_MODULE)
    return module is not None and isinstance(tensor, module.DTensor)


@dataclass(frozen=True)
class StreamRuns:
    """A local tensor as rows of ``run`` elements, each a contiguous range of the stream.

    Local element j (row-major) takes stream index
    ``base + sum_k outer_starts_k[i_k] + j % run``, where (i_0, ...) is row
    ``j // run`` over ``outer_sizes`` (row-major) and ``outer_starts`` holds
    the per-position contributions of dim 0, then dim 1, ... concatenated.
    No outer dims: the tensor is one range starting at ``base``.
    """

    base: int
    run: int
    outer_sizes: tuple[int, ...] = ()
    outer_starts: tuple[int, ...] = ()

    @property
    def contiguous(self) -> bool:
        """True when the whole tensor is one stream range starting at ``base``."""
        return not self.outer_sizes

    @property
    def rows(self) -> int:
        """Number of runs."""
        return math.prod(self.outer_sizes)

    def row_start(self, row: int) -> int:
        """Stream index of the first element of run ``row``."""
        start, first = self.base, len(self.outer_starts)
        for size in reversed(self.outer_sizes):
            first -= size
            row, i = divmod(row, size)
            start += self.outer_starts[first + i]
        return start

    def row_starts(self) -> torch.Tensor:
        """Stream index of the first element of every run, in row order: int64 CPU tensor of ``rows`` elements."""
        starts = torch.full((), self.base, dtype=torch.int64, device="cpu")
        first = 0
        for size in self.outer_sizes:
            table = torch.tensor(self.outer_starts[first : first + size], dtype=torch.int64, device="cpu")
            starts = (starts.unsqueeze(-1) + table).reshape(-1)
            first += size
        return starts.reshape(-1)

    def stream_indices(self) -> torch.Tensor:
        """Stream index of every local element in row-major order: int64 CPU tensor of ``rows * run`` elements."""
        return (self.row_starts().reshape(-1, 1) + torch.arange(self.run, dtype=torch.int64, device="cpu")).reshape(-1)


def _as_int(value):
    """Integer scalars (numpy's) as ints; anything else unchanged, for the checks that name it."""
    if type(value) is int or isinstance(value, bool) or not hasattr(type(value), "__index__"):
        return value
    return operator.index(value)


def _is_range(index: torch.Tensor) -> bool:
    return index.numel() <= 1 or bool((index[1:] - index[:-1] == 1).all())


@dataclass(frozen=True, eq=False)
class ShardLayout:
    """A local tensor's place in a row-major logical tensor of ``global_shape``.

    Attributes:
        global_shape: the logical shape (what fans are computed from).
        indices: per dim, an int64 CPU tensor with the global index of each
            local position along that dim, increasing; its length is the
            local size.
    """

    global_shape: tuple[int, ...]
    indices: tuple[torch.Tensor, ...]
    # runs(offset) per offset: a layout is immutable, and the engine asks one shared layout (see
    # local_shards' cache) for the same runs once per tensor
    _runs: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def local_shape(self) -> tuple[int, ...]:
        """The shape the local tensor must have."""
        return tuple(int(i.numel()) for i in self.indices)

    @classmethod
    def full(cls, shape: Sequence[int]) -> ShardLayout:
        """The whole tensor: every position of every dim."""
        shape = tuple(int(s) for s in shape)
        return cls(shape, tuple(torch.arange(s, dtype=torch.int64, device="cpu") for s in shape))

    @classmethod
    def from_offsets(
        cls, global_shape: Sequence[int], local_shape: Sequence[int], offsets: Sequence[int]
    ) -> ShardLayout:
        """A block ``[offsets[k], offsets[k] + local_shape[k])`` on every dim k.

        Raises:
            ValueError: lengths differ, or the block is not inside ``global_shape``.
        """
        global_shape, local_shape = tuple(_as_int(v) for v in global_shape), tuple(local_shape)
        offsets = tuple(_as_int(v) for v in offsets)
        if not len(global_shape) == len(local_shape) == len(offsets):
            raise ValueError(
                f"global_shape {global_shape}, local shape {local_shape} and shard_offsets "
                f"{offsets} must have one entry per dim"
            )
        for dim, (size, local, start) in enumerate(zip(global_shape, local_shape, offsets, strict=True)):
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in (size, start)):
                raise ValueError(f"global_shape and shard_offsets must be ints, got {size!r}, {start!r} (dim {dim})")
            if size < 0 or start < 0 or start + local > size:
                raise ValueError(
                    f"dim {dim}: a shard of {local} at offset {start} does not fit in the global "
                    f"size {size} (global_shape {global_shape}, shard_offsets {offsets})"
                )
        return cls(
            global_shape,
            tuple(
                torch.arange(o, o + n, dtype=torch.int64, device="cpu")
                for o, n in zip(offsets, local_shape, strict=True)
            ),
        )

    @classmethod
    def of_dtensor(cls, tensor, rank: int | None = None) -> ShardLayout:
        """The layout of a DTensor's local tensor on this rank (no communication).

        ``Shard(d)`` (uneven shards included) and ``Replicate`` on every mesh
        dim, and FSDP2's ``_StridedShard`` (FSDP x TP on one dim), applied
        left to right over the mesh as DTensor does.

        Args:
            tensor: a DTensor (or a Parameter holding one).
            rank: for a DTensor simulated by torch's ``LocalTensorMode`` (its
                local tensor a ``LocalTensor`` holding one shard per rank), the
                global rank whose shard is meant; None otherwise.

        Returns:
            The layout; on a rank outside the mesh, one of no elements.

        Raises:
            ValueError: a ``Partial`` placement (its local tensors are summands,
                not slices), or one tinit does not know; ``rank`` missing for a
                simulated DTensor, given for another one, or not one it holds.
            NotImplementedError: ``_StridedShard`` on a torch without
                ``torch.distributed.tensor._utils._get_shard_size_and_offsets``.
        """
        local = tensor._local_tensor
        ranks = _simulated_ranks(local)
        if ranks is None:
            if rank is not None:
                raise ValueError(f"rank={rank!r} is only for a DTensor simulated by LocalTensorMode")
            mesh = tensor.device_mesh
            coordinate = tuple(mesh.get_coordinate()) if mesh._is_current_rank_part_of_mesh() else None
            return cls._at_coordinate(tensor, coordinate, tuple(local.shape))
        if rank not in ranks:
            raise ValueError(f"rank must be one of the simulated ranks {ranks[0]}..{ranks[-1]}, got {rank!r}")
        coordinate = _simulated_coordinates(tensor.device_mesh, ranks)[rank]
        with outside_local_mode():
            return cls._at_coordinate(tensor, coordinate, tuple(local._local_tensors[rank].shape))

    @classmethod
    def local_shards(cls, tensor, cache: dict | None = None) -> tuple[tuple[torch.Tensor, ShardLayout], ...]:
        """Every shard of a DTensor this process holds, with its layout (no communication).

        Args:
            tensor: a DTensor (or a Parameter holding one).
            cache: a dict the caller keeps for one pass over DTensors whose
                meshes it holds unchanged (``tinit._plan.Plan.build``): the
                layout of a (global shape, placements, mesh, local shape) seen
                before is taken from it, so a model's hundreds of tensors cost
                their few distinct layouts, whatever the world size. Not used
                for a simulated DTensor.

        Returns:
            ((local tensor, its layout), ...): one pair in a real process
            group (``tensor.to_local()``); under torch's ``LocalTensorMode``
            one per simulated rank in rank order, each rank's plain shard
            (a view of the ``LocalTensor``'s storage) with that rank's layout.

        Raises:
            ValueError, NotImplementedError: as ``of_dtensor``.
        """
        local = tensor._local_tensor
        ranks = _simulated_ranks(local)
        if ranks is None:
            if cache is None:
                return ((tensor.to_local(), cls.of_dtensor(tensor)),)
            mesh = tensor.device_mesh
            # the mesh object itself is kept beside its layout, so its id is not reused while cached
            key = (tuple(tensor.shape), tuple(tensor.placements), id(mesh), tuple(local.shape))
            hit = cache.get(key)
            if hit is None:
                hit = cache[key] = (cls.of_dtensor(tensor), mesh)
            return ((tensor.to_local(), hit[0]),)
        coordinates = _simulated_coordinates(tensor.device_mesh, ranks)
        with outside_local_mode():
            return tuple(
                (shard, cls._at_coordinate(tensor, coordinates[rank], tuple(shard.shape)))
                for rank, shard in ((rank, local._local_tensors[rank]) for rank in ranks)
            )

    @classmethod
    def _at_coordinate(cls, tensor, coordinate: tuple[int, ...] | None, local_shape: tuple[int, ...]) -> ShardLayout:
        """The layout of the shard at mesh ``coordinate`` (None: a rank outside the mesh), checked against
        the shard's ``local_shape``; see ``of_dtensor``. Plain ints and tensors only: outside LocalTensorMode."""
        from torch.distributed.tensor import _utils as dtensor_utils

        shards = _shard_types()
        placements, mesh = tensor.placements, tensor.device_mesh
        for placement in placements:
            if not (placement.is_replicate() or isinstance(placement, shards)):
                raise ValueError(
                    f"cannot initialise a DTensor with placement {placement!r} "
                    f"(placements {placements}): only Shard and Replicate layouts are slices "
                    "of the logical tensor; redistribute it first"
                )
        global_shape = tuple(int(s) for s in tensor.shape)
        if coordinate is None:
            return cls(global_shape, tuple(torch.zeros(0, dtype=torch.int64, device="cpu") for _ in global_shape))
        per_dim = getattr(dtensor_utils, "_get_shard_size_and_offsets", None)
        if per_dim is None:  # older torch: only the first offset per dim is public
            if any(type(p).__name__ == "_StridedShard" for p in placements):
                raise NotImplementedError(
                    f"this torch ({torch.__version__}) does not expose the strided "
                    f"shard offsets tinit needs for placements {placements}"
                )
            local_shape, offsets = dtensor_utils.compute_local_shape_and_global_offset(global_shape, mesh, placements)
            return cls.from_offsets(global_shape, local_shape, offsets)
        indices: dict[int, torch.Tensor] = {}
        local = list(global_shape)
        # DTensor's own left-to-right rule (the one behind
        # compute_local_shape_and_global_offset), keeping every index, not
        # only the first: a _StridedShard dim is not one range.
        for mesh_dim, placement in enumerate(placements):
            if not isinstance(placement, shards):
                continue
            dim = placement.dim if placement.dim >= 0 else placement.dim + len(global_shape)
            if isinstance(placement, shards[1:]):  # _StridedShard
                index = _strided_positions(local[dim], mesh.size(mesh_dim), coordinate[mesh_dim], placement)
            else:  # torch.chunk's cut, as Shard.local_shard_size_and_offset (plain ints: no tensor per call)
                step = -(-local[dim] // mesh.size(mesh_dim))
                start = min(coordinate[mesh_dim] * step, local[dim])
                stop = start + min(step, local[dim] - start)
                local[dim] = stop - start
                # a range of what the earlier mesh dims left: a slice of their positions
                indices[dim] = (
                    torch.arange(start, stop, dtype=torch.int64, device="cpu")
                    if dim not in indices
                    else indices[dim][start:stop]
                )
                continue
            local[dim] = int(index.numel())
            indices[dim] = index if dim not in indices else indices[dim][index]
        layout = cls(
            global_shape,
            tuple(indices.get(d, torch.arange(s, dtype=torch.int64, device="cpu")) for d, s in enumerate(global_shape)),
        )
        if layout.local_shape != local_shape:
            raise ValueError(
                f"DTensor layout not understood: computed local shape {layout.local_shape}, "
                f"local tensor has {local_shape} (placements {placements})"
            )
        return layout

    def narrow(self, dim: int, start: int, length: int) -> tuple[int, int, ShardLayout]:
        """The part of this shard inside global slice [start, start + length) of ``dim``.

        Returns:
            (local start, local length, layout of that part within a logical
            tensor whose ``dim`` has size ``length``, indices re-based to 0).
        """
        index = self.indices[dim]
        inside = (index >= start) & (index < start + length)
        positions = inside.nonzero().flatten()
        first = int(positions[0]) if positions.numel() else 0
        count = int(positions.numel())
        shape = list(self.global_shape)
        shape[dim] = length
        sub = list(self.indices)
        sub[dim] = index[first : first + count] - start
        return first, count, ShardLayout(tuple(shape), tuple(sub))

    def local_narrow(self, dim: int, start: int, length: int) -> ShardLayout:
        """The layout of ``local.narrow(dim, start, length)``: local positions [start, start + length)
        of ``dim``, in the same logical tensor (``tinit._plan`` writes a large view slab by slab)."""
        indices = list(self.indices)
        indices[dim] = indices[dim][start : start + length]
        return ShardLayout(self.global_shape, tuple(indices))

    def runs(self, offset: int = 0) -> StreamRuns:
        """The stream ranges of the local tensor when the logical tensor starts at stream index ``offset``.

        Trailing dims held whole, plus the innermost partial dim when it is one
        range, form the run; the dims before it are outer dims (size-1 ones
        folded into ``base``).
        """
        known = self._runs.get(offset)
        if known is not None:
            return known
        shape, index = self.global_shape, self.indices
        strides = [math.prod(shape[k + 1 :]) for k in range(len(shape))]
        base, run, d = offset, 1, len(shape) - 1
        while (
            d >= 0 and index[d].numel() == shape[d] and (shape[d] == 0 or int(index[d][0]) == 0) and _is_range(index[d])
        ):
            run *= shape[d]
            d -= 1
        if d >= 0 and _is_range(index[d]):
            base += (int(index[d][0]) if index[d].numel() else 0) * strides[d]
            run *= index[d].numel()
            d -= 1
        sizes, starts = [], []
        for k in range(d + 1):
            if index[k].numel() == 1:
                base += int(index[k][0]) * strides[k]
            else:
                sizes.append(int(index[k].numel()))
                starts.extend((index[k] * strides[k]).tolist())
        found = self._runs[offset] = StreamRuns(base, run, tuple(sizes), tuple(starts))
        return found

    def flat_index(self) -> torch.Tensor:
        """Global row-major flat index of every local element (int64, local shape); tests and the reference backend."""
        shape = self.global_shape
        flat = torch.zeros(self.local_shape, dtype=torch.int64, device="cpu")
        for k, index in enumerate(self.indices):
            view = [1] * len(shape)
            view[k] = -1
            flat += index.view(view) * math.prod(shape[k + 1 :])
        return flat


def shard_offsets(global_shape: Sequence[int], dim: int, rank: int, world_size: int) -> tuple[int, ...]:
    """Offsets of rank ``rank``'s block when ``dim`` is split into ``world_size`` chunks.

    ``torch.chunk`` / DTensor ``Shard`` semantics: chunks of
    ceil(size / world_size), the last ones smaller or empty. Megatron's
    column-parallel weights split dim 0 (out_features), row-parallel ones
    dim 1 (in_features), into equal chunks: the same offsets when the size
    divides.

    Args:
        global_shape: logical shape.
        dim: the split dim (negative counts from the end).
        rank: this rank's index in [0, world_size).
        world_size: number of chunks, >= 1.

    Returns:
        Offsets, one per dim (0 except on ``dim``), for ``fill_(...,
        global_shape=..., shard_offsets=...)``; pair them with
        ``shard_shape`` for the local shape.

    Raises:
        ValueError: rank or world_size out of range, or dim out of range.
    """
    return _chunk(global_shape, dim, rank, world_size)[0]


def shard_shape(global_shape: Sequence[int], dim: int, rank: int, world_size: int) -> tuple[int, ...]:
    """Local shape of rank ``rank``'s block (see ``shard_offsets``)."""
    return _chunk(global_shape, dim, rank, world_size)[1]


def _chunk(global_shape, dim, rank, world_size):
    shape = tuple(int(s) for s in global_shape)
    dim, rank, world_size = _as_int(dim), _as_int(rank), _as_int(world_size)
    if not isinstance(dim, int) or isinstance(dim, bool) or not -len(shape) <= dim < len(shape):
        raise ValueError(f"dim {dim} out of range for shape {shape}")
    if not (isinstance(world_size, int) and world_size >= 1 and isinstance(rank, int) and 0 <= rank < world_size):
        raise ValueError(f"need 0 <= rank < world_size, got rank {rank!r}, world_size {world_size!r}")
    dim %= len(shape)
    chunk = -(-shape[dim] // world_size)
    start = min(rank * chunk, shape[dim])
    offsets = [0] * len(shape)
    offsets[dim] = start
    local = list(shape)
    local[dim] = min(chunk, shape[dim] - start)
    return tuple(offsets), tuple(local)
