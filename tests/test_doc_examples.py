"""Every Python block of README.md and docs/*.md runs: alone, in a fresh interpreter, on this
machine. A block that cannot (a GPU, nccl, a framework's own process groups) starts with
``# not run here: <why> (<the test that runs it>)``, names an existing test file, and still compiles."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NOT_RUN = re.compile(r"# not run here: .*\((tests/test_\w+\.py|tests/test_\w+\*\.py)[^)]*\)")


def _blocks():
    for doc in DOCS:
        for k, match in enumerate(re.finditer(r"```python\n(.*?)```", doc.read_text(encoding="utf-8"), re.DOTALL)):
            yield pytest.param(doc, match.group(1), id=f"{doc.name}-{k}")


@pytest.mark.parametrize(("doc", "code"), list(_blocks()))
def test_python_block_runs(doc, code, tmp_path):
    first = code.splitlines()[0]
    if first.startswith("# not run here:"):
        named = NOT_RUN.match(first)
        assert named, f"{doc.name}: a skipped block names why and the test that runs it: {first!r}"
        pattern = named.group(1).replace("tests/", "")
        assert list((ROOT / "tests").glob(pattern)), f"{doc.name}: no {named.group(1)}"
        compile(code, f"{doc.name} block", "exec")
        return
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, f"{doc.name} block failed:\n{code}\n--- stderr ---\n{done.stderr[-3000:]}"
