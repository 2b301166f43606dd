"""Grouped fills: many parameters in a few native calls.

A model has thousands of parameter tensors, most of them small (norm gains,
biases, per-head projections); one Python call and one kernel call each
costs more than filling them. ``write_grouped_`` validates every item, then
writes the truncated-normal pieces on a device with the backend's grouped
call, from a table of (tensor, stream, offset, transform constants): one
``tinit::trunc_normal_grouped_`` call on the CPU, one launch per dtype on
CUDA (the native ``grouped_kernel``) and Triton
(``tinit.triton_kernels.trunc_normal_grouped``). Each tensor gets exactly
the values ``write_spec_`` gives it alone: the value at a stream index does
not depend on how the tensors are batched.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import torch

from tinit import dispatch, ops, schemes
from tinit.fill import (
    _leaves,
    _logical_numel,
    _resolve,
    _runs,
    _spec_constants,
    _split_checked,
    _stream_position,
    _write_leaf,
)
from tinit.params import SUPPORTED_DTYPES, InferenceTensorError, check_tensor


class FillItem(NamedTuple):
    """One tensor of a grouped fill.

    Attributes:
        tensor: tensor, Parameter or DTensor (float32/float64/bfloat16/float16).
        spec: what to write (``tinit.schemes.InitSpec``).
        stream: stream id in [0, 2**64), e.g. ``tinit.model_init.stream_for(name)``.
        offset: stream index of the logical tensor's element 0.
    """

    tensor: torch.Tensor
    spec: schemes.InitSpec
    stream: int
    offset: int = 0


_PLAIN = frozenset({torch.Tensor, torch.nn.Parameter})
_STRIDED = torch.strided
_U64, _I63 = 2**64, 2**63
_SUPPORTED = frozenset(SUPPORTED_DTYPES)
# What an item's spec asks for, decided once per (spec, dtype).
_NORMAL, _ZERO, _CONSTANT, _OTHER = range(4)


# On a GPU a tensor this large keeps a launch of its own: the single-tensor
# kernels keep more blocks resident (CUDA: fewer registers than the table
# walk) and store vectors (Triton: a pointer read from the table has no known
# alignment), and one launch more costs microseconds next to such a fill. On
# the CPU the grouped op runs the same loop, so every tensor joins the table.
# Not yet measured on a GPU (bench/bench_gpu_grouped.py compares the two).
GPU_TABLE_MAX_NUMEL = 1 << 20


def _grouped_writer(backend: dispatch.Backend) -> tuple:
    """(the backend's many-tensors call ``fill_grouped(tensors, seed, streams, offsets, constants)`` or
    None, the largest numel it takes)."""
    if backend.fill_grouped is None:
        return None, 0
    if backend.name in ("cpu", "cuda") and not ops.has_kernel("trunc_normal_grouped_", backend.name.upper()):
        return None, 0  # an extension built before the grouped op
    return backend.fill_grouped, (2**63 if backend.name == "cpu" else GPU_TABLE_MAX_NUMEL)


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
    in order, bit for bit. Truncated-normal pieces (whole tensors,
    fused-projection segments along dim 0, FSDP2 ``Shard(0)`` shards) go into
    one table per device and backend: the CPU backend's
    ``tinit::trunc_normal_grouped_`` call, whose threads share all the
    elements; on a GPU (``cuda`` and ``triton``) one launch per dtype for the
    tensors of up to ``GPU_TABLE_MAX_NUMEL`` elements, larger ones one launch
    each; uniforms join the same table (the transform's uniform mode). Zero
    constants (biases) are written by ``torch._foreach_zero_``, other
    constants (norm gains) by ``fill_``; fused segments along dim 1, shards
    split along an inner dim (one runs call each) and tensors of the
    reference backend are written one by one.

    Args:
        items: FillItems, or (tensor, spec, stream[, offset]) tuples (any
            iterable; read once). Tensors whose memory
            overlaps (the same tensor twice, or two Parameters sharing
            storage) make the whole call sequential, in list order, with a
            RuntimeWarning: later items overwrite earlier ones, as with
            ``write_spec_`` one by one.
        seed: Philox key in [0, 2**64), shared by all items.
        backend: "auto" or a backend name, as for ``trunc_normal_at_``.
        sequential: write the items one by one, in order, after checking all
            of them (``init_model_(grouped=False)``).
        progress: optional callable wrapping the list of items as they are
            written one by one (``tqdm``); unused by a batched write.
        names: one label per item for the error messages (``init_model_``
            passes the parameter names); "item i" when None.

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
    items = list(items)  # keeps every spec alive: the kinds below are cached by id(spec)
    seed = _stream_position(seed, 0, 0, 0)[0]
    plan = _Plan(backend)
    plan.add(items, seed, names)
    shared = _overlaps(plan.spans)
    if shared:
        warnings.warn(
            f"write_grouped_: {shared} of the tensors share memory with an earlier one; writing all "
            "items one by one in list order (later items overwrite earlier ones)",
            RuntimeWarning,
            stacklevel=2,
        )
    with torch.no_grad():
        if sequential or shared:
            checked = plan.checked
            for local, layout, item in progress(checked) if progress is not None else checked:
                constants = plan.constants_of(item.spec, local.dtype)
                for view, sub, leaf, offset in _leaves(local, layout, item.spec, item.offset):
                    _write_leaf(
                        view, sub, leaf, constants, seed=seed, stream=item.stream, offset=offset, backend=backend
                    )
            return
        plan.write(seed)


class _Plan:
    """Checked items sorted into what is written how: one table per grouped
    writer (device), zeros for one foreach call per device, other constants,
    the rest one by one.

    ``add`` validates items and files them; nothing is written before ``write``.
    """

    def __init__(self, backend: str):
        self.backend = backend
        self.checked: list[tuple] = []  # (local tensor, layout or None, item), in item order
        self.tables: dict = {}  # (writer, device) -> (tensors, streams, offsets, constants)
        self.zeros: dict = {}  # device -> tensors
        self.fills: list[tuple] = []  # (tensor, constant)
        self.later: list[tuple] = []  # (local, layout, item)
        self._kinds: dict = {}  # (id(spec), dtype) -> (kind, its _spec_constants)
        self._writers: dict = {}  # (device, dtype) -> (grouped writer or None, largest numel it takes)
        self.spans: list[tuple] = []  # (device index, first byte, end) of every tensor written

    def _kind(self, spec: schemes.InitSpec, dtype: torch.dtype) -> tuple:
        """(kind, ``_spec_constants``) of a spec not seen yet, computed once per (spec, dtype);
        raises for a bad dtype or spec."""
        if dtype not in _SUPPORTED:
            raise TypeError(f"tinit fills floating tensors of dtype float32, float64, bfloat16 or float16; got {dtype}")
        constants = _spec_constants(spec, dtype)
        if spec.parts is None and spec.constant is None:
            kind = _NORMAL
        elif spec.parts is None:  # -0.0 is a constant of its own: zero_ would write +0.0
            kind = _ZERO if spec.constant == 0 and math.copysign(1.0, spec.constant) > 0 else _CONSTANT
        else:
            kind = _OTHER
        found = self._kinds[id(spec), dtype] = kind, constants
        return found

    def constants_of(self, spec: schemes.InitSpec, dtype: torch.dtype) -> dict:
        """The ``_spec_constants`` of a spec ``add`` has filed."""
        return self._kinds[id(spec), dtype][1]

    def add(self, items: list[FillItem], seed: int, names: Sequence[str] | None = None) -> None:
        """Check and file ``items``; raises (TypeError, ValueError, RuntimeError) for the first bad one,
        naming it (``names[i]``, or "item i")."""
        # Runs once per parameter of a model: one loop over local names, the
        # rare cases (DTensors, a spec not seen yet) in calls of their own.
        kinds, writers, tables, zeros = self._kinds, self._writers, self.tables, self.zeros
        checked, spans, later, fills = self.checked.append, self.spans.append, self.later.append, self.fills.append
        index = 0
        try:
            for index, item in enumerate(items):
                if type(item) is not FillItem:
                    item = FillItem(*item)  # a plain (tensor, spec, stream[, offset]) tuple
                tensor, spec, stream, offset = item
                if type(tensor) in _PLAIN:
                    local, layout = tensor, None
                    if local.is_nested or local.layout is not _STRIDED or local.is_neg() or not local.is_contiguous():
                        check_tensor(local)  # the full check, which raises when it must
                else:
                    local, layout = _resolve(tensor, None, None)
                if not isinstance(spec, schemes.InitSpec):
                    raise TypeError(f"spec must be a tinit.schemes.InitSpec, got {type(spec).__name__}")
                if local.is_inference() and not torch.is_inference_mode_enabled():
                    raise InferenceTensorError(
                        "write_grouped_: an inference tensor (made under torch.inference_mode) can be "
                        "written only inside torch.inference_mode(); nothing was written"
                    )
                dtype = local.dtype
                kind, constants = kinds.get((id(spec), dtype)) or self._kind(spec, dtype)
                numel = local.numel()
                if kind == _OTHER and spec.parts is not None:
                    _split_checked(spec, tuple(local.shape) if layout is None else layout.global_shape)
                if not (
                    layout is None
                    and type(stream) is int
                    and type(offset) is int
                    and 0 <= stream < _U64
                    and 0 <= offset <= _I63 - numel
                ):  # else the full check, which raises when it must
                    _, stream, offset = _stream_position(
                        seed, stream, offset, numel if layout is None else _logical_numel(local, layout)
                    )
                    item = FillItem(tensor, spec, stream, offset)
                checked((local, layout, item))
                if not numel or local.is_meta:
                    if kind == _OTHER:  # uniforms and parts went through their checks; nothing to write
                        later((local, layout, item))
                    continue
                device = local.device
                if kind == _NORMAL or kind == _OTHER:  # constants need no backend
                    found = writers.get((device, dtype))
                    if found is None:  # also raises when no backend fills the tensor
                        found = writers[device, dtype] = _grouped_writer(dispatch.select(local, self.backend))
                    writer, largest = found
                start = local.data_ptr()
                if local.is_contiguous():
                    spans((local.get_device(), start, start + numel * local.element_size()))  # device -1: CPU
                    if kind == _NORMAL and layout is None and numel <= largest:
                        table = tables.get((writer, device)) or tables.setdefault((writer, device), ([], [], [], []))
                        table[0].append(local)
                        table[1].append(stream)
                        table[2].append(offset)
                        table[3].append(constants[id(spec)])
                        continue
                else:
                    reach = sum((n - 1) * step for n, step in zip(local.shape, local.stride()))
                    spans((local.get_device(), start, start + (reach + 1) * local.element_size()))
                if kind == _ZERO:
                    zeros.setdefault(device, []).append(local)
                elif kind == _CONSTANT:
                    fills((local, spec.constant))
                else:
                    later((local, layout, item))
        except (TypeError, ValueError) as exc:
            where = f"parameter {names[index]}" if names is not None else f"item {index}"
            raise _located(exc, f"write_grouped_: {where}") from exc

    def _add(self, writer, device, view, stream, offset, constants) -> None:
        tensors, streams, offsets, packed = self.tables.setdefault((writer, device), ([], [], [], []))
        tensors.append(view)
        streams.append(stream)
        offsets.append(offset)
        packed.append(constants)

    def write(self, seed: int) -> None:
        """Write everything filed (the tensors do not overlap, so the order does not matter)."""
        # Biases, then norm gains: one foreach call per device for the zeros
        # (the values are zero_'s), fill_ for the rest (foreach_add_ of 1 onto
        # zeros costs more than fill_ per tensor on the CPU).
        for tensors in self.zeros.values():
            torch._foreach_zero_(tensors)
        for tensor, value in self.fills:
            tensor.fill_(value)
        for local, layout, item in self.later:
            constants = self.constants_of(item.spec, local.dtype)
            for view, sub, leaf, offset in _leaves(local, layout, item.spec, item.offset):
                if leaf.constant is None and view.numel() and not view.is_meta and view.is_contiguous():
                    writer, largest = self._writers[view.device, view.dtype]  # set by add for this tensor
                    runs = _runs(view, sub, offset) if view.numel() <= largest else None
                    if runs is not None and runs.contiguous:
                        self._add(writer, view.device, view, item.stream, runs.base, constants[id(leaf)])
                        continue
                _write_leaf(
                    view, sub, leaf, constants, seed=seed, stream=item.stream, offset=offset, backend=self.backend
                )
        for (writer, _), (tensors, streams, offsets, packed) in self.tables.items():
            writer(tensors, seed, streams, offsets, packed)


def _located(exc: Exception, where: str) -> Exception:
    """``exc`` again, its message followed by the item it is about (same class, so ``except`` clauses hold)."""
    try:
        return type(exc)(f"{exc} ({where})")
    except TypeError:  # a class whose constructor takes other arguments
        exc.add_note(f"write_grouped_: {where}")
        return exc


def _overlaps(spans: list[tuple[int, int, int]]) -> int:
    """How many of the byte ranges ``spans`` ((device index, start, end), one per non-empty tensor) overlap an earlier one."""
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
