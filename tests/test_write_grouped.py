"""``tinit.write_grouped_`` called directly: every case equals ``write_spec_`` item by
item (constants, strided and fused parts, empty and meta tensors, overlapping views, extreme
stream ids), and a bad last item writes nothing.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import pytest
import torch
from helpers import BITS, assert_same_bits
from helpers.grouped import (
    SEED,
    S,
    bits,
)
from torch import nn

from tinit import FillItem, write_grouped_, write_spec_

# --- write_grouped_ directly -------------------------------------------------


def _on_one_storage(views) -> list[FillItem]:
    """Two items on views of one (10, 10) tensor: a normal, then a uniform."""
    first, second = views(torch.full((10, 10), 7.0))
    return [
        FillItem(first, S(std=1.0), 1),
        FillItem(second, S(std=0.5, trunc=math.sqrt(3.0), distribution="uniform"), 2),
    ]


QKV = S(parts=(S(std=0.5), S(constant=0.0), S(std=2.0, trunc=3.0)))
UNIFORM = S(std=0.1, trunc=math.sqrt(3.0), distribution="uniform")
CASES = {
    "constant-0.5-bf16": lambda: [FillItem(torch.full((5, 3), 7.0, dtype=torch.bfloat16), S(constant=0.5), 1)],
    "constant-third-mixed": lambda: [
        FillItem(torch.full((4,), 7.0, dtype=d), S(constant=1 / 3), i) for i, d in enumerate(BITS)
    ],
    "zeros-non-contiguous-mixed": lambda: [
        FillItem(torch.full((4, 6), 7.0, dtype=d)[:, ::2], S(constant=0.0), i) for i, d in enumerate(BITS)
    ],
    "transposed-normal": lambda: [FillItem(nn.Parameter(torch.full((6, 5), 7.0).t()), S(std=0.1), 3, 7)],
    "transposed-uniform": lambda: [FillItem(nn.Parameter(torch.full((6, 5), 7.0).t()), UNIFORM, 3, 7)],
    "parts-dim0-strided": lambda: [FillItem(torch.full((9, 30), 7.0).t(), QKV, 3, 5)],
    "parts-dim1": lambda: [
        FillItem(torch.full((5, 9), 7.0, dtype=torch.float16), dataclasses.replace(QKV, split_dim=1), 3, 7)
    ],
    "parts-dim1-strided": lambda: [FillItem(torch.full((9, 5), 7.0).t(), dataclasses.replace(QKV, split_dim=1), 3)],
    "empty-and-meta": lambda: [
        FillItem(torch.empty(0, 6), QKV, 3),
        FillItem(torch.empty(0), S(std=1.0), 1),
        FillItem(torch.empty(6, 4, device="meta"), QKV, 2),
        FillItem(torch.full((3,), 7.0), S(std=1.0), 4),
    ],
    "overlapping-slices": lambda: _on_one_storage(lambda base: (nn.Parameter(base[:5]), nn.Parameter(base[3:]))),
    "interleaved-views": lambda: _on_one_storage(lambda base: (base[:, ::2], base[:, 1::2])),
    "extreme-ids": lambda: [
        FillItem(torch.full((9,), 7.0), S(std=1.0), 2**64 - 1, 2**63 - 9),
        FillItem(torch.full((9,), 7.0, dtype=torch.bfloat16), S(std=1.0), 2**63, 0),
    ],
    "neg-zero-constant": lambda: [FillItem(torch.full((4,), 7.0), S(constant=-0.0), 0)],
}


def _run_both(make, seed=SEED, **kwargs):
    """(grouped items, the same items written one by one with write_spec_)."""
    items = make()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # shared memory: written in order
        write_grouped_(items, seed=seed, **kwargs)
    alone = make()
    for item in alone:
        write_spec_(item.tensor, item.spec, seed=seed, stream=item.stream, offset=item.offset, **kwargs)
    return items, alone


def _params(cases: dict) -> list:
    """pytest.param per case, id = its key; a case given as pytest.param(...) keeps its marks."""
    return [
        pytest.param(*case.values, marks=case.marks, id=key)
        if hasattr(case, "marks")
        else pytest.param(*(case if isinstance(case, tuple) else (case,)), id=key)
        for key, case in cases.items()
    ]


@pytest.mark.parametrize("make", _params(CASES))
def test_write_grouped_equals_write_spec(make):
    items, alone = _run_both(make)
    for i, (got, want) in enumerate(zip(items, alone, strict=True)):
        if not got.tensor.is_meta:
            assert_same_bits(got.tensor, want.tensor, f"item {i} {tuple(got.tensor.shape)} {got.tensor.dtype}")


def test_zero_element_parts_with_a_non_dividing_dim_are_checked():
    """aef9101 and write_spec_ check the split of an empty fused tensor too."""
    tensor = torch.full((3,), 7.0)
    with pytest.raises(ValueError, match="does not split"):
        write_grouped_(
            [FillItem(tensor, S(std=1.0), 1), FillItem(torch.empty(0, 4), dataclasses.replace(QKV, split_dim=1), 2)],
            seed=SEED,
        )
    assert torch.equal(tensor, torch.full((3,), 7.0))


def _bad_last(last):
    return lambda: [
        FillItem(torch.full((4,), 7.0), S(std=1.0), 1),
        FillItem(torch.full((4,), 7.0), S(constant=0.0), 2),
        FillItem(torch.full((2, 4), 7.0, dtype=torch.bfloat16), S(constant=2.0), 3),
        FillItem(torch.full((6, 4), 7.0), QKV, 4),
        FillItem(torch.full((5,), 7.0), UNIFORM, 5),
        last(),
    ]


BAD_LAST = {
    "int32": (lambda: FillItem(torch.zeros(3, dtype=torch.int32), S(constant=0.0), 6), TypeError, "int32"),
    "complex64": (lambda: FillItem(torch.zeros(3, dtype=torch.complex64), S(std=1.0), 6), TypeError, "complex64"),
    "stream-2**64": (lambda: FillItem(torch.zeros(3), S(std=1.0), 2**64), ValueError, "stream"),
    "stream-bool": (lambda: FillItem(torch.zeros(3), S(std=1.0), True), TypeError, "stream"),
    "offset-past-2**63": (lambda: FillItem(torch.zeros(3), S(std=1.0), 6, 2**63 - 2), ValueError, "offset"),
    "bad-split": (lambda: FillItem(torch.zeros(4, 5), dataclasses.replace(QKV, split_dim=1), 6), ValueError, "split"),
    "uniform-bad-std": (lambda: FillItem(torch.zeros(3), dataclasses.replace(UNIFORM, std=-1.0), 6), ValueError, "std"),
    "inf-std": (lambda: FillItem(torch.zeros(3), S(std=math.inf), 6), ValueError, "std"),
    "fp16-unrepresentable-constant": (
        lambda: FillItem(torch.zeros(3, dtype=torch.float16), S(constant=1e10), 6),
        ValueError,
        "float16",
    ),
    "nan-constant": (lambda: FillItem(torch.zeros(3), S(constant=math.nan), 6), ValueError, "finite"),
    "short-tuple": (lambda: (torch.zeros(3),), TypeError, "spec"),
}


@pytest.mark.parametrize("sequential", [False, True], ids=["grouped", "sequential"])
@pytest.mark.parametrize(("make_last", "error", "match"), _params(BAD_LAST))
def test_bad_last_item_writes_nothing(make_last, error, match, sequential):
    items = _bad_last(make_last)()
    before = [bits(i[0]).clone() for i in items]
    with pytest.raises(error, match=match):
        write_grouped_(items, seed=SEED, sequential=sequential)
    for i, (item, old) in enumerate(zip(items, before, strict=True)):
        assert torch.equal(bits(item[0]), old), f"item {i} ({item[0].dtype}) was written by a call that raised"


def test_plain_tuples_are_taken_as_fill_items():
    """(tensor, spec, stream[, offset]) tuples give what FillItems give."""
    tuples = [t for t in (_bad_last(lambda: (torch.full((7,), 7.0), UNIFORM, 6, 3))())]
    tuples = [tuple(t) for t in tuples]
    items = [FillItem(torch.full_like(t[0], 7.0), *t[1:]) for t in tuples]
    write_grouped_(tuples, seed=SEED)
    write_grouped_(items, seed=SEED)
    for i, (got, want) in enumerate(zip(tuples, items, strict=True)):
        assert_same_bits(got[0], want.tensor, f"item {i}")
