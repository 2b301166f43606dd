"""docs/recipes.md: its generated tables match scripts/gen_recipes.py, and every recipe has its sources."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from tinit import schemes

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "recipes.md"


@pytest.fixture(scope="module")
def generator():
    spec = importlib.util.spec_from_file_location("gen_recipes", ROOT / "scripts" / "gen_recipes.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_recipes"] = module
    spec.loader.exec_module(module)
    return module


def test_generated_part_is_current(generator):
    """The part between the markers equals a fresh render (python scripts/gen_recipes.py rewrites it)."""
    text = DOC.read_text()
    assert text.count(generator.BEGIN) == 1 and text.count(generator.END) == 1
    assert generator.splice(text, generator.render()) == text, (
        "docs/recipes.md is out of date: run python scripts/gen_recipes.py"
    )


def test_every_recipe_is_in_both_tables(generator):
    """A recipe added to the registry shows up in the registry table and in the per-role table."""
    generated = generator.render()
    for name in schemes.SCHEMES:
        assert len(re.findall(rf"^\| `{name}` \|", generated, re.MULTILINE)) == 2, name


def test_every_recipe_has_sources_and_disputes():
    """Each recipe is named in a heading of "Sources and disputes" (recipes may share a heading)."""
    notes = DOC.read_text().split("## Sources and disputes", 1)[1]
    headed = {name for heading in re.findall(r"^### (.+)$", notes, re.MULTILINE) for name in heading.split(", ")}
    assert headed == set(schemes.SCHEMES)


def test_a_stale_table_is_detected(generator):
    """The check is not vacuous: a changed cell makes splice differ from the file."""
    text = DOC.read_text()
    stale = text.replace("| `gpt2` |", "| `gpt2` | stale |", 1)
    assert generator.splice(stale, generator.render()) != stale
