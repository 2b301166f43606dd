"""docs/coverage.md: up to date with scripts/gen_coverage.py, and every reference check it names exists."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers", reason="transformers is not installed (pip install transformers)")

from tinit import schemes
from tinit.tools import hf_families

ROOT = Path(__file__).resolve().parents[1]
# Families regenerated in full here: a dense decoder, fused GQA, MoE, MLA, sinks, encoder-decoder, vision + text.
SUBSET = ["gpt2", "phi3", "mixtral", "deepseek_v3", "gpt_oss", "t5", "llava"]


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generator():
    return _load(ROOT / "scripts" / "gen_coverage.py", "gen_coverage")


@pytest.fixture(scope="module")
def written() -> str:
    return (ROOT / "docs" / "coverage.md").read_text()


def _family_lines(text: str, family: str) -> list[str]:
    """The table rows of ``family`` from the families table on (families, refusals, references)."""
    return [line for line in text.splitlines() if line.startswith(f"| {family} |")]


def test_every_family_and_recipe_is_in_the_table(written):
    """Cheap staleness check over all rows: a family or recipe added since the table was generated fails here."""
    families = re.findall(r"^\| (\w+) \| \w+ \| [\d,]+ \|", written, re.MULTILINE)
    assert families == list(hf_families.FAMILIES)
    counts = set(re.findall(r"\| (\d+) of (\d+) \|", written))
    applicable = {int(total) for _, total in counts}
    assert applicable and max(applicable) <= len(schemes.SCHEMES)
    assert f"`tinit.schemes.SCHEMES` ({len(schemes.SCHEMES)} today)" in written


def test_rows_match_a_fresh_run(generator, written):
    """The roles/runs/refusals rows of a subset of families, regenerated, equal the file's (python
    scripts/gen_coverage.py --check compares every row)."""
    fresh = generator.render(generator.survey(SUBSET))
    for family in SUBSET:
        assert _family_lines(fresh, family) == _family_lines(written, family), (
            f"docs/coverage.md is out of date for {family}: run python scripts/gen_coverage.py"
        )


def test_reference_checks_exist(generator):
    """Every test REFERENCE_CHECKS and RECIPE_REFERENCES name is a test function of the suite."""
    nodes = {node for checks in generator.REFERENCE_CHECKS.values() for _, node in checks}
    nodes |= {node for checks in generator.RECIPE_REFERENCES.values() for _, node in checks}
    assert nodes
    for node in sorted(nodes):
        path, _, name = node.partition("::")
        name = name.split("[")[0]
        assert (ROOT / path).is_file(), node
        module = _load(ROOT / path, "coverage_check_" + Path(path).stem)
        assert callable(getattr(module, name, None)) and name.startswith("test_"), f"{node}: no such test"


def test_reference_checks_name_known_families_and_recipes(generator):
    for family, recipe in generator.REFERENCE_CHECKS:
        assert family in hf_families.FAMILIES, family
        assert recipe in schemes.SCHEMES or recipe == "buffers", recipe
    assert set(generator.RECIPE_REFERENCES) <= set(schemes.SCHEMES)


def test_refusal_cells(generator):
    """A refusal names the first parameters no rule classifies, or the parameter an error is about."""
    err = ValueError(
        "init_model_: scheme 'gpt2' needs each parameter's role but 5 parameter(s) match no rule: a.w, b.w, c.w, "
        "d.w, e.w; pass overrides={regex: role}"
    )
    assert generator._reason(err) == "unclassified: `a.w`, `b.w`, `c.w` (+2 more)"
    located = ValueError("fan_in/fan_out need a weight with >= 2 dims (init_model_: parameter x.sinks)")
    assert generator._reason(located) == "ValueError: `x.sinks`: fan_in/fan_out need a weight with >= 2 dims"
