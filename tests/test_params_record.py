"""The transform record is one record: tinit.params.TruncNormalParams and the C++
TruncNormalParams (transform.h) name the same fields in the same order, and
from_packed reads each packed value into the field of that name; tinit.params.Mode
is TransformMode (the same names and values), and transform.h's valid_mode accepts
exactly the values of Mode.

A small C++ program (params_record_dump.cpp, next to this file) includes
transform.h, builds the record from a packed list with from_packed and prints
every field by name, or prints TransformMode's enumerators and valid_mode's
answers; the test feeds it records of every mode, each field a distinct value.
Skipped, saying so, without a C++ compiler.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from tinit.params import (
    PARAM_COUNT,
    Mode,
    TruncNormalParams,
    transform_constants,
    uniform_constants,
)

ROOT = Path(__file__).resolve().parent.parent
CXX = shutil.which("g++") or shutil.which("c++")

pytestmark = pytest.mark.skipif(CXX is None, reason="no C++ compiler on PATH (g++ or c++)")


@pytest.fixture(scope="module")
def dump(tmp_path_factory) -> Path:
    exe = tmp_path_factory.mktemp("record") / "params_record_dump"
    subprocess.run(
        [
            CXX,
            "-std=c++17",
            "-O1",
            "-I",
            str(ROOT / "csrc" / "include"),
            "-o",
            str(exe),
            str(ROOT / "tests" / "params_record_dump.cpp"),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return exe


def _run(dump: Path, *args: str) -> list[list[str]]:
    out = subprocess.run([str(dump), *args], check=True, capture_output=True, text=True, timeout=30).stdout
    return [line.split() for line in out.splitlines()]


def _fields(dump: Path, packed) -> dict[str, float]:
    return {name: float(value) for name, value in _run(dump, *(repr(float(v)) for v in packed))}


def _python_mode_name(cpp_name: str) -> str:
    """kTwoSidedPrecise -> TWO_SIDED_PRECISE."""
    assert cpp_name.startswith("k"), cpp_name
    return re.sub(r"(?<!^)(?=[A-Z])", "_", cpp_name[1:]).upper()


def _packed_name(field: str) -> str:
    """a_cdf -> kPackedACdf: the PackedField enumerator of a field."""
    return "kPacked" + "".join(word[:1].upper() + word[1:] for word in field.split("_"))


def test_field_names_and_order_match_the_cpp_struct():
    header = (ROOT / "csrc" / "include" / "tinit" / "transform.h").read_text()
    enum = re.search(r"enum PackedField : int \{(.*?)\};", header, re.DOTALL).group(1)
    positions = re.findall(r"\b(kPacked\w+),", enum)
    assert positions == [*(_packed_name(f) for f in TruncNormalParams._fields), "kPackedFieldCount"]
    assert re.search(r"kParamCount = kPackedFieldCount;", header)
    reads = re.findall(r"r\.(\w+) = static_cast<[\w_]+>\(p\[(\w+)\]\)", header)
    assert [name for name, _ in reads] == list(TruncNormalParams._fields)
    assert [position for _, position in reads] == [_packed_name(f) for f in TruncNormalParams._fields]


def test_from_packed_reads_every_field_by_name(dump):
    # Distinct, exactly representable values: any swapped index shows.
    packed = TruncNormalParams(*[float(Mode.TAIL) if i == 0 else (i + 0.5) * (-1) ** i for i in range(PARAM_COUNT)])
    lines = _run(dump, *(repr(v) for v in packed))
    assert [name for name, _ in lines] == [*TruncNormalParams._fields, "flip", "unclamped"]
    got = {name: float(value) for name, value in lines}
    for name, value in packed._asdict().items():
        expect = float(int(value)) if name in ("mode", "split") else value
        assert got[name] == expect, f"field {name}: C++ read {got[name]}, Python packed {value}"
    assert got["flip"] == 2**32 - 1  # sign < 0: the mirrored frame


@pytest.mark.parametrize(
    "record",
    [
        pytest.param(uniform_constants(-0.1, 0.1, torch.float32), id="uniform"),
        pytest.param(transform_constants(0.0, 0.02, -2.0, 2.0, torch.float32), id="two_sided"),
        pytest.param(transform_constants(1.0, 1.0 / 7.0, -math.inf, 0.0, torch.float32), id="precise"),
        pytest.param(transform_constants(0.0, 1.0, 8.0, 100.0, torch.float32), id="tail"),
    ],
)
def test_records_of_every_mode_round_trip(dump, record):
    got = _fields(dump, record)
    assert got["mode"] == record.mode
    for name in TruncNormalParams._fields:
        assert got[name] == pytest.approx(getattr(record, name), rel=1e-15, abs=0.0), name


@pytest.mark.parametrize(
    ("record", "unclamped"),
    [
        pytest.param(transform_constants(0.0, 0.02, -2.0, 2.0, torch.float32), 1, id="default-window"),
        pytest.param(transform_constants(0.0, 1.0, -math.inf, math.inf, torch.float32), 1, id="untruncated"),
        pytest.param(transform_constants(0.0, 0.02, -0.04, 0.04, torch.float32), 0, id="2-std"),
        pytest.param(transform_constants(0.0, 1.0, -4.0, 4.0, torch.float32), 0, id="4-std"),
        pytest.param(uniform_constants(-0.1, 0.1, torch.float32), 0, id="uniform"),
        pytest.param(transform_constants(1.0, 1.0 / 7.0, -math.inf, 0.0, torch.float32), 0, id="precise"),
        pytest.param(transform_constants(0.0, 1.0, 8.0, 100.0, torch.float32), 0, id="tail"),
    ],
)
def test_unclamped_only_where_the_clamp_cannot_fire(dump, record, unclamped):
    # The CUDA kernels skip the clamp (kTwoSidedUnclamped) only for two-sided
    # windows wide enough that no value reaches a bound.
    assert _fields(dump, record)["unclamped"] == unclamped


def test_mode_is_transform_mode(dump):
    lines = _run(dump, "--modes")
    counts = [int(line[1]) for line in lines if line[0] == "kModeCount"]
    cpp = {_python_mode_name(line[1]): int(line[2]) for line in lines if line[0] == "mode"}
    assert counts == [len(Mode)]
    assert cpp == {m.name: m.value for m in Mode}
    assert [name for name in cpp] == [m.name for m in Mode]  # declaration order too


def test_valid_mode_accepts_exactly_the_modes(dump):
    answers = {float(line[1]): line[2] == "1" for line in _run(dump, "--modes") if line[0] == "valid"}
    assert len(answers) == len(Mode) + 5
    for m, valid in answers.items():
        assert valid == (m in {float(x) for x in Mode}), m
