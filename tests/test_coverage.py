"""docs/coverage.md: up to date with scripts/gen_coverage.py, and every reference check it names exists.

The classes section (every causal-LM class of transformers) is checked three ways here: its rows list
exactly the mapping's classes with the digests of the tiny configs the generator would build now
(the manifest of its inputs, cheap), its counts agree with its rows, and ``coverage_classes.SUBSET``
(the hybrids, the families the coverage issue tried, common classes) is measured afresh and must
give the same rows. The full measurement is ``test_every_class_matches_a_fresh_run``, marked
``coverage_full`` (run with ``--run-coverage-full``; a few minutes on 2 cores). The checker itself is
tested on planted errors (``test_the_checker_*``): its oracle is the eager transformers build, scipy's
KS tests and the fp64 std.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest
import torch

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
    return [line for line in _section(text, FAMILIES_HEADING).splitlines() if line.startswith(f"| {family} |")]


def _section(text: str, heading: str) -> str:
    """From ``heading`` (a "## " line) up to the next "## " heading."""
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end >= 0 else len(text)]


FAMILIES_HEADING = "## Recipes on the families of `tinit.tools.hf_families`"


def test_every_family_and_recipe_is_in_the_table(written):
    """Cheap staleness check over all rows: a family or recipe added since the table was generated fails here."""
    families = re.findall(r"^\| (\w+) \| \w+ \| [\d,]+ \|", _section(written, FAMILIES_HEADING), re.MULTILINE)
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


# ------------------------------------------------------------------ every causal-LM class


@pytest.fixture(scope="module")
def classes():
    return _load(ROOT / "scripts" / "coverage_classes.py", "coverage_classes")


def _class_section(written: str) -> str:
    return _section(written, "## Every causal-LM class of transformers")


def _class_rows(written: str) -> dict[str, list[str]]:
    """{class: its cells} of the classes table."""
    table = _class_section(written).split("### Classes", 1)[1]
    rows = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 5 and cells[0] not in ("class", "---") and not cells[0].startswith("-"):
            rows[cells[0]] = cells
    return rows


def _lines_of(written: str, name: str) -> list[str]:
    """Every line of the classes section that names class ``name`` (its row, mismatches, refusals, notes)."""
    return [line for line in _class_section(written).splitlines() if f"| {name} |" in line]


def test_every_causal_lm_class_has_a_row(written):
    """The rows are transformers' distinct causal-LM classes (the mapping itself is the oracle), in its order."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    distinct = list(dict.fromkeys(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values()))
    assert list(_class_rows(written)) == distinct, "docs/coverage.md is out of date: run python scripts/gen_coverage.py"


def test_setup_pins_the_transformers_the_table_is_for(written):
    """scripts/setup.sh installs exactly the transformers docs/coverage.md was generated with: a release
    with new classes cannot reach CI unnoticed, and bumping the pin without regenerating fails here."""
    pinned = re.findall(r'^TRANSFORMERS_VERSION="([^"]+)"$', (ROOT / "scripts" / "setup.sh").read_text(), re.MULTILINE)
    generated = re.findall(r"^Versions: .*\btransformers ([^,\s]+),", written, re.MULTILINE)
    assert len(pinned) == 1 and len(generated) == 1, (pinned, generated)
    assert pinned == generated, "scripts/setup.sh's TRANSFORMERS_VERSION is not docs/coverage.md's: regenerate it"


def test_tiny_configs_match_the_recorded_manifest(classes, written):
    """Each row's config digest is the tiny config the generator builds now: a change to the shrinking
    rules, the hand-written table or transformers' defaults fails here until the table is regenerated."""
    rows = _class_rows(written)
    stale = [name for name, cells in rows.items() if cells[3].strip("`") != classes.config_digest(name)]
    assert not stale, (
        f"tiny configs changed for {stale[:5]} (+{max(0, len(stale) - 5)}): run python scripts/gen_coverage.py"
    )


def test_recipes_checked_are_the_ones_tinit_has(classes, written):
    """The table's columns are the recipes the generator would check now (``hf`` once it is registered)."""
    recipe_names, _ = classes.recipes()
    header = next(line for line in _class_section(written).splitlines() if line.startswith("| class | model type |"))
    assert header.split("|")[5:-1] == [f" {r} " for r in recipe_names]


def test_counts_agree_with_the_rows(classes, written):
    """The counts table is the verdicts of the classes table, counted (a hand edit of either fails)."""
    recipe_names, _ = classes.recipes()
    rows = _class_rows(written)
    section = _class_section(written)
    for i, recipe in enumerate(recipe_names):
        verdicts = [cells[4 + i].split(" ")[0] for cells in rows.values()]
        buildable = len(verdicts) - verdicts.count("unbuildable")
        counted = [len(verdicts), buildable] + [verdicts.count(v) for v in classes.VERDICTS]
        line = next(line for line in section.splitlines() if line.startswith(f"| {recipe} | {len(verdicts)} |"))
        cells = line.split("|")
        assert [int(c) for c in cells[2:8]] == counted, line
        assert cells[8].strip() == f"{100 * verdicts.count('faithful') / buildable:.1f} %", line


def test_subset_rows_match_a_fresh_run(classes, written):
    """The subset (>= 30 classes, the seven SSM / linear-attention hybrids among them) measured afresh gives
    the rows, mismatches and refusals the file has. About a minute on 2 cores."""
    hybrids = {"Mamba2", "Jamba", "Bamba", "FalconH1", "GraniteMoeHybrid", "NemotronH", "Qwen3Next"}
    assert len(classes.SUBSET) >= 30 and {f"{h}ForCausalLM" for h in hybrids} <= set(classes.SUBSET)
    fresh = "\n".join(classes.render(*classes.survey(classes.SUBSET)))
    for name in classes.SUBSET:
        assert _lines_of(fresh, name) == _lines_of(written, name), (
            f"docs/coverage.md is out of date for {name}: run python scripts/gen_coverage.py"
        )


@pytest.mark.coverage_full
def test_every_class_matches_a_fresh_run(generator, classes, written):
    """Every class measured afresh gives the file's classes section (budget: 10 minutes on 2 cores)."""
    fresh = "\n".join(classes.render(*classes.survey()))
    assert fresh.strip() == _class_section(written).strip(), "run python scripts/gen_coverage.py"


# ------------------------------------------------------------------ the checker, on planted errors


@pytest.fixture(scope="module")
def llama(classes):
    """The tiny Llama's HF reference, and a model that passes it (the eager build under another seed)."""
    classes.quiet()
    config = classes.hf_classes.config_of("LlamaForCausalLM")
    return config, classes.reference("LlamaForCausalLM", config)


def _eager(classes, config, seed):
    torch.manual_seed(seed)
    return classes.hf_classes.build("LlamaForCausalLM", config, device="cpu")


def test_the_checker_passes_the_models_own_init(classes, llama):
    """A third eager build (torch seed 3) is HF's own init: no template fails under either rule."""
    config, ref = llama
    model = _eager(classes, config, 3)
    for recipe in ("hf", "normal"):
        assert classes.check_params(recipe, ref, model) == []
    assert classes.check_buffers(ref, model) == []


def test_the_checker_flags_a_std_off_by_3_percent(classes, llama):
    config, ref = llama
    model = _eager(classes, config, 3)
    with torch.no_grad():
        model.model.layers[0].mlp.down_proj.weight.mul_(1.03)
        model.model.layers[1].mlp.down_proj.weight.mul_(1.03)
    failures = classes.check_params("hf", ref, model)
    assert [f.template for f in failures] == ["model.layers.*.mlp.down_proj.weight"]
    assert failures[0].ratio == pytest.approx(1.03, abs=0.01)


def test_the_checker_flags_a_uniform_of_the_same_std(classes, llama):
    """KS catches what the std cannot: U(-a, a) with a = sqrt(3) std has the normal's std."""
    config, ref = llama
    model = _eager(classes, config, 3)
    weight = model.model.embed_tokens.weight
    with torch.no_grad():
        weight.uniform_(-(3**0.5) * 0.02, 3**0.5 * 0.02, generator=torch.Generator().manual_seed(0))
    failures = classes.check_params("normal", ref, model)
    assert [f.template for f in failures] == ["model.embed_tokens.weight"]
    assert failures[0].ratio == pytest.approx(1, abs=0.02)


def test_the_checker_flags_a_changed_constant_and_buffer(classes, llama):
    config, ref = llama
    model = _eager(classes, config, 3)
    with torch.no_grad():
        model.model.norm.weight[0] = 1.5
    model.model.rotary_emb.inv_freq[1] += 1e-6
    assert [f.template for f in classes.check_params("normal", ref, model)] == ["model.norm.weight"]
    assert [f.template for f in classes.check_buffers(ref, model)] == ["buffer model.rotary_emb.inv_freq"]


def test_the_checker_keeps_a_sequential_s_linear_and_norm_apart(classes):
    """``proj.0.weight`` (a matrix) and ``proj.1.weight`` (a norm) share a template, not a pool."""
    params = {"proj.0.weight": torch.zeros(4, 3), "proj.1.weight": torch.zeros(4), "layers.2.w": torch.zeros(2)}
    assert classes.templates_of(params) == {
        "proj.*.weight [4, 3]": ["proj.0.weight"],
        "proj.*.weight [4]": ["proj.1.weight"],
        "layers.*.w": ["layers.2.w"],
    }
