"""The native ops refuse bad input with the same words on every device, before anything is written.

Called directly (``torch.ops.tinit.*``, not through ``tinit.ops``, which checks first), the CPU and
CUDA bindings run one set of checks (``tinit::Where``, ``check_runs``, ...): each case below is
refused by both with the message given, and the tensors passed keep their contents. The Triton
backend has no native op; its launch-side checks are tested in test_triton.
"""

from __future__ import annotations

import pytest
import torch

import tinit.reference
from tinit.params import PARAM_COUNT, transform_constants

GOOD = list(transform_constants(0.0, 1.0, -2.0, 2.0, torch.float32))
BAD_MODE = [9.0] + GOOD[1:]
OPS = torch.ops.tinit


def _native(backend):
    if backend.name not in ("cpu", "cuda"):
        pytest.skip(f"{backend.id} has no native op (torch.ops.tinit.* are the cpu and cuda bindings')")
    return backend.device


def _full(shape, device, dtype=torch.float32):
    return torch.full(shape, 7, dtype=dtype, device=device)


# (id, message regex, call(device)): each call builds its tensors on the device and makes one op call.
def _single_cases():
    def fill(x, offset=0, transform=GOOD):
        OPS.trunc_normal_(x, 1, 2, offset, transform)
        return [x]

    def words(x, offset=0):
        OPS.philox_(x, 1, 2, offset)
        return [x]

    return [
        ("not-contiguous", "tinit::trunc_normal_ is not contiguous", lambda d: fill(_full((4, 4), d).t())),
        ("short-record", f"expected {PARAM_COUNT} transform constants", lambda d: fill(_full((8,), d), 0, GOOD[:-1])),
        ("bad-mode", r"transform mode must be 0\.\.3", lambda d: fill(_full((8,), d), 0, BAD_MODE)),
        ("negative-offset", "offset must be >= 0, got -1", lambda d: fill(_full((8,), d), -1)),
        ("offset-overflow", r"offset \+ numel must not exceed 2\^63", lambda d: fill(_full((8,), d), 2**63 - 4)),
        ("int-dtype", "unsupported dtype", lambda d: fill(_full((8,), d, torch.int32))),
        ("words-dtype", "int32 tensor for the uint32 words", lambda d: words(_full((8,), d))),
        ("words-offset", r"offset \+ numel must not exceed", lambda d: words(_full((8,), d, torch.int32), 2**63 - 4)),
    ]


def _grouped_cases():
    def grouped(xs, streams=None, offsets=None, transforms=None):
        n = len(xs)
        OPS.trunc_normal_grouped_(
            xs, 1, [0] * n if streams is None else streams, [0] * n if offsets is None else offsets,
            GOOD * n if transforms is None else transforms,
        )  # fmt: skip
        return xs

    return [
        ("lists", "one stream and one offset per tensor", lambda d: grouped([_full((8,), d)], streams=[0, 1])),
        (
            "records",
            f"{PARAM_COUNT} transform constants per tensor",
            lambda d: grouped([_full((8,), d)], transforms=GOOD[:-1]),
        ),
        ("view", "tensor 1 is not contiguous", lambda d: grouped([_full((8,), d), _full((4, 4), d).t()])),
        (
            "offset",
            "tensor 1: offset must be >= 0",
            lambda d: grouped([_full((8,), d), _full((2,), d)], offsets=[0, -1]),
        ),
        (
            "overflow",
            r"tensor 1: offset \+ numel",
            lambda d: grouped([_full((8,), d), _full((2,), d)], offsets=[0, 2**63 - 1]),
        ),
        (
            "mode",
            "tensor 1: transform mode",
            lambda d: grouped([_full((8,), d), _full((2,), d)], transforms=GOOD + BAD_MODE),
        ),
        ("dtype", "tensor 1: unsupported dtype", lambda d: grouped([_full((8,), d), _full((2,), d, torch.int32)])),
    ]


def _runs_cases():
    def runs(x, run, sizes, starts, words=False):
        if words:
            OPS.philox_runs_(x, 1, 0, 0, run, sizes, starts)
        else:
            OPS.trunc_normal_runs_(x, 1, 0, 0, run, sizes, starts, GOOD)
        return [x]

    return [
        (
            "cover",
            "5 runs of 4 elements do not cover the 24",
            lambda d: runs(_full((6, 4), d), 4, [5], [0, 8, 16, 24, 32]),
        ),
        ("starts", "expected 6 outer starts, got 2", lambda d: runs(_full((6, 4), d), 4, [6], [0, 8])),
        ("run", "run must be > 0", lambda d: runs(_full((6, 4), d), 0, [6], [0] * 6)),
        ("sizes", "outer sizes must be > 0", lambda d: runs(_full((6, 4), d), 4, [6, 0], [0] * 6)),
        ("product", "the outer sizes' product overflows int64", lambda d: runs(_full((6, 4), d), 4, [2**62, 4], [0])),
        (
            "negative-start",
            "outer starts must be >= 0",
            lambda d: runs(_full((6, 4), d), 4, [6], [0, 8, 16, 24, 32, -1]),
        ),
        (
            "index-overflow",
            r"outer starts \+ run must not exceed 2\^63",
            lambda d: runs(_full((6, 4), d), 4, [6], [0, 8, 16, 24, 32, 2**63 - 2]),
        ),
        ("words", "int32", lambda d: runs(_full((6, 4), d), 4, [6], [0, 8, 16, 24, 32, 40], words=True)),
    ]


CASES = [*_single_cases(), *_grouped_cases(), *_runs_cases()]


@pytest.mark.parametrize(("message", "call"), [pytest.param(m, c, id=i) for i, m, c in CASES])
def test_refused_with_the_same_words(backend, message, call):
    device = _native(backend)
    with pytest.raises(RuntimeError, match=message):
        call(device)


@pytest.mark.parametrize("make", ["single", "grouped", "runs"])
def test_nothing_written_before_the_refusal(backend, make):
    """A refused call leaves every tensor it was given as it was: the checks all run before any write."""
    device = _native(backend)
    first, second = _full((8,), device), _full((6, 4), device)
    with pytest.raises(RuntimeError):
        if make == "single":
            OPS.trunc_normal_(first, 1, 2, 2**63 - 4, GOOD)
        elif make == "grouped":
            OPS.trunc_normal_grouped_([first, second], 1, [0, 0], [0, 0], GOOD + BAD_MODE)
        else:
            OPS.trunc_normal_runs_(second, 1, 0, 0, 4, [6], [0, 8, 16, 24, 32, 2**63 - 2], GOOD)
    if device == "cuda":
        torch.cuda.synchronize()
    assert bool((first == 7).all()) and bool((second == 7).all()), "a refused call wrote"


def test_the_last_stream_index_is_accepted(backend):
    """Stream index 2**63 - 1 is the last one (offset + numel <= 2**63, as tinit._plan.Plan allows): a fill, a
    grouped entry and a runs row that end on it are accepted, with the reference's words there."""
    device = _native(backend)
    last = 2**63 - 1
    want = tinit.reference.stream_words(8, 1, 2, last - 7).to(torch.int64)
    words = torch.zeros(8, dtype=torch.int32, device=device)
    OPS.philox_(words, 1, 2, last - 7)
    assert torch.equal(words.cpu().to(torch.int64) & 0xFFFFFFFF, want)
    cpu = torch.zeros(8)
    OPS.trunc_normal_(cpu, 1, 2, last - 7, GOOD)
    x = torch.zeros(8, device=device)
    OPS.trunc_normal_(x, 1, 2, last - 7, GOOD)
    assert torch.equal(x.cpu(), cpu) and bool(((cpu >= -2) & (cpu <= 2)).all())
    grouped = [torch.zeros(3, device=device), torch.zeros(8, device=device)]
    OPS.trunc_normal_grouped_(grouped, 1, [5, 2], [0, last - 7], GOOD + GOOD)
    assert torch.equal(grouped[1].cpu(), cpu)
    rows = torch.zeros(2, 4, device=device)
    OPS.trunc_normal_runs_(rows, 1, 2, 0, 4, [2], [last - 7, last - 3], GOOD)
    assert torch.equal(rows.reshape(-1).cpu(), cpu)


def _grouped_runs(xs, runs, dims, sizes, starts, offsets=None):
    n = len(xs)
    OPS.trunc_normal_grouped_runs_(
        xs, 1, [0] * n, [0] * n if offsets is None else offsets, runs, dims, sizes, starts, GOOD * n
    )


GROUPED_RUNS_CASES = [
    (
        "lists",
        "one run and one outer dim count per tensor",
        lambda: _grouped_runs([_full((6, 4), "cpu")], [4], [], [], []),
    ),
    (
        "dims",
        "tensor 0: 2 outer dims, 1 sizes left",
        lambda: _grouped_runs([_full((6, 4), "cpu")], [4], [2], [6], [0] * 6),
    ),
    ("starts-left", "exceeds the starts left", lambda: _grouped_runs([_full((6, 4), "cpu")], [4], [1], [6], [0] * 5)),
    (
        "cover",
        "5 runs of 4 elements do not cover the 24",
        lambda: _grouped_runs([_full((6, 4), "cpu")], [4], [1], [5], [0] * 5),
    ),
    (
        "unused",
        "1 outer sizes and 6 outer starts belong to no tensor",
        lambda: _grouped_runs([_full((24,), "cpu")], [24], [0], [6], [0] * 6),
    ),
    (
        "overflow",
        r"outer starts \+ run must not exceed 2\^63",
        lambda: _grouped_runs([_full((2, 4), "cpu")], [4], [1], [2], [0, 2**63 - 2]),
    ),
    (
        "view",
        "tensor 1 is not contiguous",
        lambda: _grouped_runs([_full((8,), "cpu"), _full((4, 4), "cpu").t()], [8, 4], [0, 1], [4], [0] * 4),
    ),
]


@pytest.mark.parametrize(("message", "call"), [pytest.param(m, c, id=i) for i, m, c in GROUPED_RUNS_CASES])
def test_grouped_runs_refused_before_any_write(message, call):
    """The CPU-only ``trunc_normal_grouped_runs_`` checks every tensor's layout before writing any."""
    with pytest.raises(RuntimeError, match=message):
        call()


def test_grouped_runs_refusal_writes_nothing():
    first, second = _full((8,), "cpu"), _full((6, 4), "cpu")
    with pytest.raises(RuntimeError):
        _grouped_runs([first, second], [8, 4], [0, 1], [6], [0, 8, 16, 24, 32, 2**63 - 2])
    assert bool((first == 7).all()) and bool((second == 7).all()), "a refused call wrote"


def test_opcheck_grouped_runs():
    tensors = [torch.empty(6, 4), torch.empty(37, dtype=torch.bfloat16)]
    args = (tensors, 3, [1, 2], [5, 2**40], [4, 37], [1, 0], [6], [0, 8, 16, 24, 32, 40], GOOD * 2)
    torch.library.opcheck(torch.ops.tinit.trunc_normal_grouped_runs_.default, args)
