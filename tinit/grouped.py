"""Grouped fills: many parameters in a few native calls.

A model has thousands of parameter tensors, most of them small (norm gains,
biases, per-head projections); one Python call and one kernel call each
costs more than filling them. ``write_grouped_`` validates every item, then
writes all truncated-normal pieces on a device in one call of
``tinit::trunc_normal_grouped_`` from a table of (tensor, stream, offset,
transform constants). Each tensor gets exactly the values ``write_spec_``
gives it alone: the value at a stream index does not depend on how the
tensors are batched.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import NamedTuple

import torch

from tinit import dispatch, ops, schemes
from tinit.fill import (
    _check_spec,
    _check_stream,
    _leaves,
    _logical_numel,
    _resolve,
    _runs,
    _split_checked,
    _write_leaf,
)
from tinit.params import check_dtype, transform_constants


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


def _grouped_kernel(device: torch.device) -> bool:
    return device.type == "cpu" and ops.has_kernel("trunc_normal_grouped_", "CPU")


def write_grouped_(items: Iterable[FillItem], *, seed: int, backend: str = "auto",
                   sequential: bool = False, progress=None) -> None:
    """Write every item's spec into its tensor, batching the native calls.

    Equivalent to ``write_spec_(item.tensor, item.spec, seed=seed,
    stream=item.stream, offset=item.offset, backend=backend)`` for each item
    in order, bit for bit. Truncated-normal pieces (whole tensors,
    fused-projection parts along dim 0, FSDP2 ``Shard(0)`` shards) on CPU
    tensors that the native CPU backend fills go into one
    ``tinit::trunc_normal_grouped_`` call per device, whose threads share all
    their elements. Constants 0 and 1 (biases, norm gains) are written by
    ``torch._foreach_zero_``/``_foreach_add_``, other constants by ``fill_``;
    uniforms, fused parts along dim 1, shards split along an inner dim and
    tensors on other backends (CUDA and Triton: one launch per tensor or row
    run; reference) are written one by one.

    Args:
        items: FillItems (any iterable; read once). Tensors whose memory
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

    Raises:
        TypeError, ValueError: the seed, or any item's dtype, spec, stream,
            offset or layout (e.g. a ``Partial`` DTensor) is invalid;
            RuntimeError: no backend fills one of the tensors. All checked
            for every item before anything is written.
    """
    items = list(items)  # keeps every spec alive: the constants below are cached by id(spec)
    _check_stream(seed, 0, 0, 0)
    chosen: dict[tuple[torch.device, torch.dtype], dispatch.Backend] = {}
    known: dict[tuple[int, torch.dtype], tuple] = {}  # specs are shared between a model's blocks
    checked = []
    for item in items:
        tensor, spec = item.tensor, item.spec
        check_dtype(tensor)
        local, layout = _resolve(tensor, None, None)
        device, dtype = local.device, local.dtype
        constants = None
        if spec.parts is None and spec.constant is None and spec.distribution != "uniform":
            constants = known.get((id(spec), dtype))
            if constants is None:
                lo, hi = spec.bounds
                constants = known[id(spec), dtype] = transform_constants(spec.mean, spec.std, lo, hi, dtype)
        elif spec.parts is not None or spec.constant is None:  # fused parts, or a uniform
            _check_spec(spec, dtype)
            _split_checked(spec, tuple(tensor.shape) if layout is None else layout.global_shape)
        _check_stream(seed, item.stream, item.offset, _logical_numel(local, layout))
        chosen_backend = chosen.get((device, dtype))
        if chosen_backend is None and local.numel() and device.type != "meta":
            chosen_backend = chosen[device, dtype] = dispatch.select(local, backend)
        checked.append((local, layout, item, constants, device))

    shared = _overlaps([entry[0] for entry in checked])
    if shared:
        warnings.warn(f"write_grouped_: {shared} of the tensors share memory with an earlier one; writing all "
                      "items one by one in list order (later items overwrite earlier ones)", RuntimeWarning,
                      stacklevel=2)
    with torch.no_grad():
        if sequential or shared:
            for local, layout, item, _, _ in (progress(checked) if progress is not None else checked):
                for view, sub, leaf, offset in _leaves(local, layout, item.spec, item.offset):
                    _write_leaf(view, sub, leaf, seed=seed, stream=item.stream, offset=offset, backend=backend)
            return
        _write_batched(checked, chosen, seed, backend)


def _write_batched(checked: list, chosen: dict, seed: int, backend: str) -> None:
    """Write checked items whose tensors do not overlap: a table per device, foreach constants, the rest alone."""
    table: dict[torch.device, tuple[list, list, list, list]] = {}
    later, constant_groups = [], {}
    for local, layout, item, constants, device in checked:
        spec = item.spec
        if constants is not None and layout is None and _groupable(local, chosen, device):
            _add(table, local, item.stream, item.offset, constants, device)
        elif spec.parts is None and spec.constant in (0.0, 1.0):
            constant_groups.setdefault((device, spec.constant), []).append(local)
        else:
            later.append((local, layout, item))
    # Norm gains and biases: foreach calls instead of one fill_ each (0 + 1
    # is exact in every dtype, so the values are fill_'s).
    for (_, value), tensors in constant_groups.items():
        torch._foreach_zero_(tensors)
        if value:
            torch._foreach_add_(tensors, 1.0)
    for local, layout, item in later:
        for view, sub, leaf, offset in _leaves(local, layout, item.spec, item.offset):
            groupable = leaf.constant is None and _groupable(view, chosen, view.device)
            runs = _runs(view, sub, offset) if groupable else None
            if runs is not None and runs.contiguous and leaf.distribution != "uniform":
                lo, hi = leaf.bounds
                _add(table, view, item.stream, runs.base, transform_constants(leaf.mean, leaf.std, lo, hi, view.dtype),
                     view.device)
            else:
                _write_leaf(view, sub, leaf, seed=seed, stream=item.stream, offset=offset, backend=backend)
    for tensors, streams, offsets, packed in table.values():
        ops.trunc_normal_grouped_native(tensors, seed, streams, offsets, packed)


def _overlaps(tensors: list[torch.Tensor]) -> int:
    """How many of ``tensors`` share memory with another one (0-element and meta tensors never do)."""
    spans = []
    for t in tensors:
        if t.is_meta or not t.numel():
            continue
        start = t.data_ptr()
        if t.is_contiguous():
            end = start + t.nbytes
        else:
            reach = sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))
            end = start + (reach + 1) * t.element_size()
        spans.append((t.get_device(), start, end))  # device index, -1 for CPU
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


def _groupable(view: torch.Tensor, chosen: dict, device: torch.device) -> bool:
    """Whether the grouped CPU kernel can take ``view`` (non-empty, contiguous, filled by the native CPU backend)."""
    return (device.type == "cpu" and view.numel() > 0 and view.is_contiguous()
            and chosen[device, view.dtype].name == "cpu" and _grouped_kernel(device))


def _add(table: dict, view: torch.Tensor, stream: int, offset: int, constants: tuple, device: torch.device) -> None:
    tensors, streams, offsets, packed = table.setdefault(device, ([], [], [], []))
    tensors.append(view)
    streams.append(stream)
    offsets.append(offset)
    packed.append(constants)
