"""Stream version 3 against version 2: fp64 values changed, fp32, bf16 and fp16 did not.

``tests/data/stream_digests.json`` (``scripts/gen_stream_digests.py``) holds per-dtype digests
of a fixed case list covering every mode; its fp32, bf16 and fp16 digests were recorded on the
tree before version 3 (and equal version 2's, tinit 0.2.0), its ``superseded_fp64`` the fp64
digests of version 2 and of the commits between (libm-free constants, libm log).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

import tinit

ROOT = Path(__file__).resolve().parent.parent
RECORD = json.loads((ROOT / "tests" / "data" / "stream_digests.json").read_text())


def _generator():
    spec = importlib.util.spec_from_file_location("gen_stream_digests", ROOT / "scripts" / "gen_stream_digests.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def found():
    return _generator().digests()


@pytest.mark.parametrize("name", ["fp32", "bf16", "fp16"])
def test_low_precision_values_are_version_2s(found, name):
    """fp32, bf16 and fp16: every case's digest equals the one recorded before version 3."""
    moved = {k: v for k, v in found[name]["cases"].items() if RECORD[name]["cases"][k] != v}
    assert not moved, f"{name}: {len(moved)} cases moved, e.g. {sorted(moved)[:3]}"
    assert found[name]["digest"] == RECORD[name]["digest"]


def test_fp64_values_are_version_3s(found):
    """fp64: the pinned version-3 digest, none of the superseded ones."""
    assert RECORD["stream_version"] == tinit.STREAM_VERSION == 3
    assert RECORD["fp64"]["digest"] not in RECORD["superseded_fp64"].values()
    moved = {k: v for k, v in found["fp64"]["cases"].items() if RECORD["fp64"]["cases"][k] != v}
    assert not moved, f"fp64: {len(moved)} cases moved, e.g. {sorted(moved)[:3]}"
    assert found["fp64"]["digest"] == RECORD["fp64"]["digest"]
