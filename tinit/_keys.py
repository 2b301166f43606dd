"""Which parameter a tensor is, and where in it: the name keys of ``tinit.patch_torch_init``.

A ``Table`` maps the parameters and buffers of a set of modules (the model
parts given to the patch, or the topmost module above a module built inside
it) to their canonical names (``tinit.identity.canonical_names``) and stream
ids (``tinit.stream_for``). A tensor is found in O(1): the parameter itself
by ``id()``, a view of one by its untyped storage (``data_ptr``, device) and
its byte span inside it; a meta tensor (``data_ptr`` 0) by ``id()`` only.
``block_of`` then says where the view's elements lie in the parameter's
logical (global) tensor: a box, as ``(view written, global shape, box start
or tinit.sharding.ShardLayout)`` for ``tinit.nn.init.KEYED``'s ``block``.

``Keys`` holds the state of one outermost patch entry: the parts' table
(rebuilt when a registration hook touches a part, or when the parts'
parameters were swapped since), and what torch's global registration hooks
report while the patch is active (``Keys.on_module``, ``on_tensor``): which
module registered each tensor and which module each module was attached to.
``Keys.module_name`` names a module the same way (its canonical name in the
part or the topmost module that holds it), for the draws a Hugging Face
``_init_weights(module)`` call makes into tensors that are no parameter.
"""

from __future__ import annotations

import math
import weakref
from typing import NamedTuple

import torch

from tinit._model_init import stream_for, utf8_name
from tinit.identity import canonical_modules, canonical_names
from tinit.params import is_fake, is_uninitialized
from tinit.sharding import ShardLayout, is_dtensor


class Entry(NamedTuple):
    """One parameter or buffer of a table.

    Attributes:
        tensor: the parameter (a Parameter, a DTensor, a buffer) as its module holds it.
        name: its canonical name.
        stream: ``tinit.stream_for(name)``.
        start, end: the byte span of its elements (a DTensor: of its local tensor) in its storage.
    """

    tensor: torch.Tensor
    name: str
    stream: int
    start: int
    end: int


def plain_of(tensor: torch.Tensor) -> torch.Tensor:
    """The plain tensor holding ``tensor``'s elements: itself, or a DTensor's local tensor."""
    return tensor._local_tensor if is_dtensor(tensor) else tensor


def storage_key(tensor: torch.Tensor):
    """(storage data_ptr, device) of a plain tensor, or None when it has no data (meta, fake, no storage)."""
    if is_uninitialized(tensor) or tensor.is_meta or is_fake(tensor):  # no data: found by identity only
        return None
    ptr = tensor.untyped_storage().data_ptr()
    return None if ptr == 0 else (ptr, tensor.device)


def byte_span(tensor: torch.Tensor) -> tuple[int, int]:
    """[first byte, end) of the elements of a plain tensor, relative to its storage's start."""
    size = tensor.element_size()
    start = tensor.storage_offset() * size
    if tensor.is_contiguous():  # the common case, without the Python sum over dims
        return start, start + tensor.numel() * size
    if tensor.numel() == 0:
        return start, start
    reach = sum((n - 1) * step for n, step in zip(tensor.shape, tensor.stride(), strict=True))
    return start, start + (reach + 1) * size


class Table:
    """tensor -> ``Entry`` for the parameters and buffers of some modules."""

    __slots__ = ("by_id", "by_name", "by_storage", "module_names", "modules", "names", "parts", "probes")

    def __init__(self) -> None:
        self.by_id: dict[int, Entry] = {}
        self.by_name: dict[str, Entry] = {}  # the part being filed
        self.names: set[str] = set()  # every name of every part
        self.by_storage: dict[tuple, list[Entry]] = {}
        self.modules: set[int] = set()
        self.probes: list[tuple] = []  # (members dict, leaf name, tensor, storage key) of every tensor
        self.parts: tuple = ()
        self.module_names: dict[int, str] | None = None  # id(module) -> canonical name, made on first use

    @classmethod
    def of(cls, parts) -> Table:
        """The table of every parameter and buffer of ``parts`` (modules), canonical names per part.

        Raises:
            ValueError: two different tensors with one canonical name (a wrapper or a rename that
                maps a member onto another's name, or two parts holding the same names).
        """
        table = cls()
        table.parts = tuple(parts)
        for part in table.parts:
            names = canonical_names(part)
            table.by_name = {}  # one name, one tensor within a part; across parts a name is one
            # logical tensor that several stages hold a copy of (a buffer every stage keeps)
            for raw, module in part.named_modules(remove_duplicate=False):
                table.modules.add(id(module))
                base = f"{raw}." if raw else ""
                for members in (module._parameters, module._buffers):
                    for leaf, tensor in members.items():
                        if tensor is not None:
                            table.probes.append((members, leaf, tensor, storage_key(plain_of(tensor))))
                            table.add(tensor, names.get(base + leaf, base + leaf))
        return table

    def add(self, tensor: torch.Tensor, name: str) -> None:
        """File ``tensor`` under ``name``; a tensor already filed (tied) keeps its first name.

        Raises:
            ValueError: another tensor is filed under ``name``.
        """
        if id(tensor) in self.by_id:
            return
        other = self.by_name.get(name)
        if other is not None:
            raise ValueError(
                f"tinit.patch_torch_init: two different tensors have the canonical name {name!r} (shapes "
                f"{tuple(other.tensor.shape)} and {tuple(tensor.shape)}): a wrapper or rename maps one member "
                "onto another's name, or two model parts hold the same names"
            )
        plain = plain_of(tensor)
        start, end = (0, 0) if is_uninitialized(plain) else byte_span(plain)  # a lazy module's: no elements yet
        utf8_name(name, "tinit.patch_torch_init")  # refused here naming the patch, not inside stream_for
        entry = Entry(tensor, name, stream_for(name), start, end)
        self.by_id[id(tensor)] = entry
        self.by_name[name] = entry
        self.names.add(name)
        key = storage_key(plain)
        if key is not None and end > start:
            self.by_storage.setdefault(key, []).append(entry)

    def module_name(self, module: torch.nn.Module) -> str | None:
        """The canonical name of ``module`` in its part (the first, when several hold it), or None when
        no part holds it. The names are made on the first call (``tinit.identity.canonical_modules``)."""
        if self.module_names is None:
            self.module_names = {}
            for part in self.parts:
                for name, member in canonical_modules(part):
                    self.module_names.setdefault(id(member), name)
        return self.module_names.get(id(module))

    def stale(self) -> bool:
        """Whether a tensor of the parts was replaced or moved to other memory since the table was built
        (``to_empty`` of a submodule, FSDP2's sharding, ``p.data = ...``, a module swapped in): the
        entries may be out of date. One identity and storage test per tensor."""
        for members, leaf, tensor, key in self.probes:
            if members.get(leaf) is not tensor or storage_key(plain_of(tensor)) != key:
                return True
        return False

    def find(self, tensor: torch.Tensor, call: str) -> Entry | None:
        """The entry whose elements ``tensor`` views, or None when none has any of them.

        Raises:
            ValueError: ``tensor`` views elements of two entries, or of one and memory outside it.
        """
        entry = self.by_id.get(id(tensor))
        if entry is not None and entry.tensor is tensor:
            return entry
        plain = plain_of(tensor)
        key = storage_key(plain)
        if key is None:
            return None
        start, end = byte_span(plain)
        hits = [e for e in self.by_storage.get(key, ()) if e.start < end and start < e.end]
        if not hits:
            return None
        if len(hits) > 1:
            names = ", ".join(repr(e.name) for e in hits)
            raise ValueError(f"{call}: the tensor of shape {tuple(tensor.shape)} views parameters {names} at once")
        entry = hits[0]
        if not (entry.start <= start and end <= entry.end):
            raise ValueError(
                f"{call}: the tensor of shape {tuple(tensor.shape)} views parameter {entry.name!r} and memory "
                "outside it"
            )
        return entry


def _strided_box(view: torch.Tensor, base: torch.Tensor, delta: int):
    """(view of ``view`` in ``base``'s dim order, box start, box lengths) when every dim of ``view`` of
    size > 1 steps along its own dim of ``base``; else None."""
    shape, strides = tuple(base.shape), base.stride()
    dim_of = {step: k for k, (n, step) in enumerate(zip(shape, strides, strict=True)) if n > 1}
    pairs = []  # (base dim, view dim)
    for j, (n, step) in enumerate(zip(view.shape, view.stride(), strict=True)):
        if n > 1:
            k = dim_of.get(step)
            if k is None:
                return None
            pairs.append((k, j))
    if len({k for k, _ in pairs}) != len(pairs):
        return None
    lengths = [1] * len(shape)
    for k, j in pairs:
        lengths[k] = view.shape[j]
    starts, rest = [0] * len(shape), delta
    for k in sorted((k for k in range(len(shape)) if shape[k] > 1), key=lambda k: -strides[k]):
        starts[k], rest = divmod(rest, strides[k])
    if rest or any(not 0 <= s <= n - m for s, n, m in zip(starts, shape, lengths, strict=True)):
        return None
    if view.dim() == len(shape) and all(k == j for k, j in pairs):
        return view, tuple(starts), tuple(lengths)
    order = sorted(range(len(pairs)), key=lambda i: pairs[i][0])
    squeezed = view.reshape([view.shape[j] for _, j in pairs]) if view.numel() else view
    return squeezed.permute(order).view(lengths), tuple(starts), tuple(lengths)


def _flat_box(view: torch.Tensor, base: torch.Tensor, delta: int):
    """(view reshaped, box start, box lengths) when the contiguous ``view`` is a row-major range of the
    contiguous ``base`` that is a box (whole trailing dims, a range of one dim); else None."""
    shape, count = tuple(base.shape), view.numel()
    if delta < 0 or delta + count > base.numel():
        return None
    for k in range(len(shape)):
        inner = math.prod(shape[k + 1 :])
        if delta % inner or count % inner:
            continue
        rows, first = count // inner, (delta // inner) % shape[k]
        if first + rows <= shape[k]:
            starts = tuple((delta // math.prod(shape[d + 1 :])) % shape[d] for d in range(len(shape)))
            lengths = (1,) * k + (rows,) + shape[k + 1 :]
            return view.view(lengths), starts, lengths
    return None


def block_of(view: torch.Tensor, entry: Entry, call: str):
    """Where ``view`` lies in ``entry``'s logical tensor: None (it is the whole of it, as given) or
    ``(view written, stream offset, global shape, box start or ShardLayout)`` for
    ``tinit.nn.init.KEYED``'s ``block``: a box that is a row-major range of the logical tensor is
    written from its offset, any other box as a block of it.

    A DTensor parameter's local tensor is itself a block of the logical tensor
    (``ShardLayout.of_dtensor``); a box of it composes with that layout.

    Raises:
        ValueError: ``view`` is not a box of the parameter (a transposed or reshaped view across rows,
            another dtype), or a DTensor other than the parameter's whole.
    """
    param = entry.tensor
    if view is param or view.numel() == 0:
        return None
    if is_dtensor(view):
        whole = is_dtensor(param) and view.shape == param.shape and view.placements == param.placements
        if whole and _same_view(view._local_tensor, param._local_tensor):
            return None
        raise ValueError(f"{call}: a DTensor view of parameter {entry.name!r} that is not the whole parameter")
    dtensor = is_dtensor(param)
    base = param._local_tensor if dtensor else param
    if not dtensor and view.dtype == base.dtype:
        if _same_view(view, base):
            return None  # .data, detach(): the parameter's own elements in its own order
        if view.is_contiguous() and base.is_contiguous():
            # a row-major range of the parameter (a slice of rows, a chunk, a flat range; ``find``
            # checked it lies inside): its elements are the stream's from its offset, in order
            return view, view.storage_offset() - base.storage_offset(), None, None
    found = None
    if view.dtype == base.dtype:
        delta = view.storage_offset() - base.storage_offset()
        found = _strided_box(view, base, delta)
        if found is None and view.is_contiguous() and base.is_contiguous():
            found = _flat_box(view, base, delta)
    if found is None:
        raise ValueError(
            f"{call}: the tensor of shape {tuple(view.shape)}, strides {view.stride()} is a view of parameter "
            f"{entry.name!r} (shape {tuple(base.shape)}) that is not a box of it; give the parameter or a slice"
        )
    target, starts, lengths = found
    global_shape = tuple(param.shape)
    if dtensor:
        starts = _sub_layout(ShardLayout.of_dtensor(param), starts, lengths)
        if isinstance(starts, ShardLayout):
            return target, 0, global_shape, starts
    offset = _range_start(global_shape, starts, lengths)
    if offset is not None:
        return target, offset, None, None
    return target, 0, global_shape, starts


def _range_start(shape, starts, lengths) -> int | None:
    """The row-major flat index of the box's first element when the box is one row-major range of a
    tensor of ``shape`` (dims of length 1, then one partial dim, then whole dims); else None."""
    dims = len(shape)
    k = 0
    while k < dims and lengths[k] == 1:
        k += 1
    for d in range(k + 1, dims):
        if lengths[d] != shape[d]:
            return None
    flat, step = 0, 1
    for d in range(dims - 1, -1, -1):
        flat += starts[d] * step
        step *= shape[d]
    return flat


def _same_view(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.storage_offset() == b.storage_offset() and a.shape == b.shape and a.stride() == b.stride()


def _sub_layout(layout: ShardLayout, starts, lengths):
    """The box (``starts``, ``lengths``) of a local tensor laid out by ``layout``: its start in the
    logical tensor when every dim is one range there, else a ``ShardLayout``."""
    indices = tuple(index[s : s + n] for index, s, n in zip(layout.indices, starts, lengths, strict=True))
    if all(n <= 1 or bool((index[1:] - index[:-1] == 1).all()) for index, n in zip(indices, lengths, strict=True)):
        return tuple(int(index[0]) if index.numel() else 0 for index in indices)
    return ShardLayout(layout.global_shape, indices)


class Keys:
    """The name keys of one outermost patch entry (``tinit.patch_torch_init``)."""

    def __init__(self) -> None:
        self.parts: list[torch.nn.Module] = []
        self.table = Table()
        self.dirty = False
        self.generation = 0
        self.owners: dict[int, tuple] = {}  # id(tensor) -> (ref tensor, ref module)
        self.owners_at: dict[tuple, list[tuple]] = {}  # storage key -> [(ref tensor, ref module, start, end)]
        self.parents: dict[int, tuple] = {}  # id(module) -> (ref module, ref parent, name)
        self.tops: dict[int, tuple] = {}  # id(topmost module) -> (ref, generation, Table)
        self.used: dict[str, weakref.ref] = {}  # name keyed under a topmost module -> that module
        self.derived: dict[int, tuple] = {}  # id(temporary made from a parameter) -> (ref, Entry)
        self.made: dict[str, int] = {}  # parameter name -> temporaries made from it so far

    def derive(self, made: torch.Tensor, source: Entry, how: str) -> None:
        """Key ``made``, a new tensor ``how`` made from ``source``'s parameter (``new_empty``), by the
        name ``f"{source.name}:{how}[k]"``, k counting the tensors made from that parameter."""
        count = self.made.get(source.name, 0)
        self.made[source.name] = count + 1
        name = f"{source.name}:{how}[{count}]"
        self.derived[id(made)] = (weakref.ref(made), Entry(made, name, stream_for(name), 0, 0))

    def add_parts(self, parts) -> None:
        """Know ``parts`` (modules) too: their tensors are keyed by their canonical names."""
        for part in parts:
            if not any(part is known for known in self.parts):
                self.parts.append(part)
        self.table = Table.of(self.parts)
        self.dirty = False

    def on_module(self, module, name, submodule) -> None:
        """torch's module registration hook: ``submodule`` attached to ``module`` as ``name``."""
        self.generation += 1
        if submodule is not None:
            self.parents[id(submodule)] = (weakref.ref(submodule), weakref.ref(module), name)
        if id(module) in self.table.modules:
            self.dirty = True

    def on_tensor(self, module, name, tensor) -> None:
        """torch's parameter and buffer registration hooks: ``tensor`` registered on ``module``."""
        self.generation += 1
        if id(module) in self.table.modules:
            self.dirty = True
        if not isinstance(tensor, torch.Tensor):
            return
        record = (weakref.ref(tensor), weakref.ref(module))
        self.owners[id(tensor)] = record
        plain = plain_of(tensor)
        key = storage_key(plain)
        if key is not None:
            self.owners_at.setdefault(key, []).append((*record, *byte_span(plain)))

    def find(self, tensor, call: str) -> Entry | None:
        """The entry ``tensor`` is keyed by, or None for the call-number rule (``tinit.patch_torch_init``).

        Raises:
            ValueError: ``tensor`` views two parameters, or one and memory outside it.
        """
        if not isinstance(tensor, torch.Tensor):
            return None
        if self.derived:
            made = self.derived.get(id(tensor))
            if made is not None and made[0]() is tensor:
                return made[1]
        if self.parts:
            if self.dirty:
                self.add_parts(())
            entry = self.table.find(tensor, call)
            if entry is None and self.table.stale():
                self.add_parts(())
                entry = self.table.find(tensor, call)
            if entry is not None:
                return entry
        module = self._owner(tensor)
        if module is None:
            return None
        top = self._top(module)
        if top is module:  # not attached to anything (yet): inside its constructor, or standalone
            return None
        entry = self._table_of(top).find(tensor, call)
        if entry is None:
            return None
        first = self.used.setdefault(entry.name, weakref.ref(top))()
        if first is not None and first is not top:  # another live module tree already took this name
            return None
        if entry.name in self.table.names and self.table.by_id.get(id(entry.tensor)) is None:
            return None  # a model part holds this name: another tensor
        return entry

    def module_name(self, module: torch.nn.Module) -> str | None:
        """The canonical name of ``module`` by the rules that name its tensors (``find``): in the model
        parts, else in the topmost module above it when it is attached to one; None otherwise."""
        if self.parts:
            if self.dirty:
                self.add_parts(())
            name = self.table.module_name(module)
            if name is not None:
                return name
        top = self._top(module)
        if top is module:  # not attached to anything: inside its constructor, or standalone
            return None
        return self._table_of(top).module_name(module)

    def _owner(self, tensor):
        """The module that registered ``tensor`` (or the tensor it views) while the patch was active."""
        record = self.owners.get(id(tensor))
        if record is not None and record[0]() is tensor:
            return record[1]()
        plain = plain_of(tensor)
        key = storage_key(plain)
        if key is None:
            return None
        start, end = byte_span(plain)
        for ref, module_ref, first, last in self.owners_at.get(key, ()):
            if first < end and start < last and ref() is not None:
                return module_ref()
        return None

    def _top(self, module):
        """The topmost module above ``module`` by the attachments seen (each link still in place)."""
        for _ in range(1 << 16):  # a bound, against a cycle of links
            link = self.parents.get(id(module))
            if link is None:
                break
            child, parent, name = link[0](), link[1](), link[2]
            if child is not module or parent is None or parent._modules.get(name) is not module:
                break
            module = parent
        return module

    def _table_of(self, top) -> Table:
        cached = self.tops.get(id(top))
        if cached is not None and cached[0]() is top and cached[1] == self.generation:
            return cached[2]
        table = Table.of((top,))
        self.tops[id(top)] = (weakref.ref(top), self.generation, table)
        return table
