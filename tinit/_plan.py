"""STAND-IN for the engine's ``tinit._plan`` (written in parallel on another branch; replaced when
the branches merge). It implements the engine's contract (``Item``, ``Plan.build``/``Plan.run``,
``check_seed``, ``located``, ``local_of``) on top of ``tinit.grouped.write_grouped_``, with an
``Item``'s ``zero_rows`` written after the fill, so ``init_model_`` can be coded and tested against
the contract now. It uses only public names of the modules it calls."""

from __future__ import annotations

from typing import NamedTuple

import torch

from tinit import schemes
from tinit.grouped import FillItem, write_grouped_
from tinit.params import as_index, check_tensor
from tinit.sharding import ShardLayout, is_dtensor


class Item(NamedTuple):
    """One tensor to write (the engine's contract).

    Attributes:
        tensor: tensor, Parameter or DTensor.
        what: a ``tinit.schemes.InitSpec`` or a float constant.
        stream: stream id in [0, 2**64).
        offset: stream index of the logical element 0.
        name: label in error messages ("parameter <name>"); None: "item <i>".
        global_shape, shard_offsets: a hand-made shard (unused by this stand-in's callers).
        zero_rows: dim-0 rows written 0 after ``what`` (``nn.Embedding``'s ``padding_idx``).
    """

    tensor: torch.Tensor
    what: object
    stream: int = 0
    offset: int = 0
    name: str | None = None
    global_shape: tuple | None = None
    shard_offsets: tuple | None = None
    zero_rows: tuple[int, ...] = ()


def check_seed(seed) -> int:
    """``seed`` as an int in [0, 2**64); TypeError, ValueError otherwise."""
    return as_index("seed", seed, 0, 2**64)


def located(exc: Exception, where: str) -> Exception:
    """``exc`` again, its message followed by the item it is about (same class)."""
    try:
        return type(exc)(f"{exc} ({where})")
    except TypeError:  # a class whose constructor takes other arguments
        exc.add_note(where)
        return exc


def local_of(tensor) -> tuple:
    """(the tensor to write, its ``tinit.sharding.ShardLayout`` or None for a whole tensor)."""
    if is_dtensor(tensor):
        local = tensor.to_local()
        check_tensor(local, "tensor (local shard)")
        return local, ShardLayout.of_dtensor(tensor)
    check_tensor(tensor)
    return tensor, None


class Plan:
    """Checked items and how to write them (the stand-in defers the checks to ``write_grouped_``,
    which checks every item before writing any)."""

    def __init__(self, items: list[Item], seed: int, backend: str, sequential: bool):
        self.items, self.seed, self.backend, self.sequential = items, seed, backend, sequential

    @classmethod
    def build(cls, items, *, seed=None, generator=None, backend="auto", sequential=False) -> Plan:
        """The plan of ``items``; ``seed`` given (the stand-in draws no key)."""
        if seed is None or generator is not None:
            raise NotImplementedError("the stand-in tinit._plan takes an explicit seed only")
        return cls(list(items), check_seed(seed), backend, sequential)

    def run(self, progress=None) -> None:
        """Write every item, then its ``zero_rows``."""
        fills = [
            FillItem(
                i.tensor,
                i.what if isinstance(i.what, schemes.InitSpec) else schemes.InitSpec(constant=i.what),
                i.stream,
                i.offset,
            )
            for i in self.items
        ]
        names = [i.name if i.name is not None else f"item {n}" for n, i in enumerate(self.items)]
        write_grouped_(
            fills, seed=self.seed, backend=self.backend, sequential=self.sequential, progress=progress, names=names
        )
        with torch.no_grad():
            for item in self.items:
                if item.zero_rows:
                    _zero_rows(item.tensor, item.zero_rows)


def _zero_rows(tensor, rows) -> None:
    """Zero dim-0 rows ``rows`` of ``tensor``; of a DTensor, the part of each row its shard holds."""
    local, layout = local_of(tensor)
    if local.numel() == 0 or local.is_meta:
        return
    for index in rows:
        if layout is None:
            local[index].zero_()
            continue
        first, length, _ = layout.narrow(0, index, 1)
        if length:
            local.narrow(0, first, length).zero_()
