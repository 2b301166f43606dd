"""Write docs/coverage.md: every causal-LM class of transformers against its references, and which
Hugging Face families every tinit recipe initialises, and what refuses.

    python scripts/gen_coverage.py            # rewrite docs/coverage.md (a few minutes on 2 cores)
    python scripts/gen_coverage.py --check    # exit 1 when docs/coverage.md is out of date

The first section measures every distinct class of ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES`` (its tiny
config from ``tinit.tools.hf_classes``) under ``hf`` (where tinit has it) and ``normal`` against the
eager transformers build: ``scripts/coverage_classes.py`` says how, and gives each class a verdict
(faithful, refused, MISMATCH, unbuildable).

Each family of ``tinit.tools.hf_families.FAMILIES`` is built from its reduced config on the meta device,
materialised on the CPU (``tinit.materialise_``: ties restored, buffers recomputed), then
initialised by every recipe of ``tinit.schemes.SCHEMES`` with its default options (the table grows
as recipes are added). A recipe "runs" when ``init_model_`` writes every parameter; otherwise the
table gives the parameters it refused (first few) or its error. Roles are those ``init_model_``
reports under ``normal``. The last column names the tests that compare a family's init with the
model's own (``REFERENCE_CHECKS``); ``tests/test_coverage.py`` checks each test exists and that
this file matches a fresh run. Deterministic: no timings, no machine details beyond versions.
Framework models (``FRAMEWORK_MODELS``: torchtitan's debug models) get rows of their own where
their package imports; that section depends on what is installed and is not compared.
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
import warnings
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT, ROOT / "scripts"):  # this tree's tinit, and coverage_classes beside this script
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import coverage_classes  # noqa: E402 (after the sys.path lines above)

from tinit.tools import hf_families  # noqa: E402

OUTPUT = ROOT / "docs" / "coverage.md"
SEED = 0
SHOWN_NAMES = 3  # refused parameter names shown per cell

# (family, recipe) -> [(what is compared, pytest node id)]: the tests that check a family's init
# against the reference implementation's own code. "buffers" compares every buffer of the meta-built,
# materialised model with an eager CPU build, bit for bit.
REFERENCE_CHECKS: dict[tuple[str, str], list[tuple[str, str]]] = {
    ("gemma", "modern"): [
        (
            "norm weights = Gemma's _init_weights (zero)",
            "tests/test_model_init.py::test_gemma_norms_match_the_models_own_init",
        )
    ],
    ("gemma2", "modern"): [
        (
            "norm weights = Gemma2's _init_weights",
            "tests/test_model_init.py::test_gemma_norms_match_the_models_own_init",
        )
    ],
    ("gemma3", "modern"): [
        (
            "norm weights = Gemma3's _init_weights",
            "tests/test_model_init.py::test_gemma_norms_match_the_models_own_init",
        )
    ],
    ("bert", "normal"): [
        (
            "padding row zeroed as BERT's _init_weights",
            "tests/test_model_init.py::test_hf_bert_padding_row_matches_its_own_init",
        )
    ],
    ("gpt2", "gpt2"): [
        ("per-role std, truncation, constants = HF GPT-2", "tests/test_recipes_reference.py::test_gpt2_against_hf_gpt2")
    ],
    ("t5", "t5"): [
        ("per-role std, constants = HF T5 (relu, gated-gelu)", "tests/test_recipes_reference.py::test_t5_against_hf_t5")
    ],
    **{
        (family, "normal"): [
            (
                "per-role std = HF's default _init_weights",
                "tests/test_recipes_reference.py::test_normal_against_hf_default_init",
            ),
            (
                "which parameters are constant (and which constant) = the model's own _init_weights",
                "tests/test_architectures.py::test_constants_match_the_models_own_init",
            ),
        ]
        for family in ("llama", "bert")
    },
    ("llava", "gpt2"): [("L counted per tower", "tests/test_architectures.py::test_llava_depth_is_counted_per_tower")],
    ("gpt_oss", "depth_init"): [
        ("sinks as torchtitan's GPT-OSS sinks_init", "tests/test_architectures.py::test_gpt_oss_sinks_are_drawn")
    ],
    **{
        (family, "normal"): [
            (
                "which parameters are constant (and which constant) = the model's own _init_weights",
                "tests/test_architectures.py::test_constants_match_the_models_own_init",
            )
        ]
        for family in hf_families.FAMILIES
        if family not in ("llama", "bert")
    },
    **{
        (family, "normal"): [
            (
                "which parameters are constant (and which constant) = the model's own _init_weights",
                "tests/test_architectures.py::test_constants_match_the_models_own_init",
            ),
            (
                "A_log, D, dt_bias = the eager HF build's (exact, KS)",
                "tests/test_ssm_hybrids.py::test_the_state_is_the_eager_builds",
            ),
            (
                "matrices' pooled std = initializer_range, KS against the eager HF build",
                "tests/test_ssm_hybrids.py::test_normal_draws_the_matrices_from_the_configs_initializer_range",
            ),
        ]
        for family in ("mamba", "mamba2", "jamba", "bamba", "falcon_h1", "granitemoehybrid", "nemotron_h", "qwen3_next")
    },
    **{
        (family, "buffers"): [
            ("bit-exact vs an eager CPU build", "tests/test_meta_buffers.py::test_every_family_s_buffers_match_eager")
        ]
        for family in hf_families.FAMILIES
    },
}

# recipe -> [(reference implementation, pytest node id)]: the tests that initialise a model with the
# reference's own code and with the recipe and compare them (per-role std pooled to >= 10^6 samples,
# truncation, constants), whatever architecture the reference builds.
RECIPE_REFERENCES: dict[str, list[tuple[str, str]]] = {
    "normal": [
        (
            "transformers: Llama, BERT _init_weights",
            "tests/test_recipes_reference.py::test_normal_against_hf_default_init",
        )
    ],
    "gpt2": [("transformers: GPT2LMHeadModel", "tests/test_recipes_reference.py::test_gpt2_against_hf_gpt2")],
    "megatron": [
        (
            "megatron-core 0.16.1: GPTModel, dense and MoE",
            "tests/test_recipes_reference.py::test_megatron_against_megatron_core",
        )
    ],
    "depth_init": [
        ("torchtitan 0.3.0: Llama 3", "tests/test_recipes_reference.py::test_depth_init_against_torchtitan_llama3"),
        (
            "torchtitan 0.3.0: DeepSeek-V3 MoE",
            "tests/test_recipes_reference.py::test_depth_init_against_torchtitan_deepseek_v3_moe",
        ),
    ],
    "xavier_normal": [("torch.nn.init", "tests/test_recipes_reference.py::test_fan_schemes_against_torch_nn_init")],
    "kaiming_normal": [("torch.nn.init", "tests/test_recipes_reference.py::test_fan_schemes_against_torch_nn_init")],
    "lecun_normal": [("keras 3.15.1: LecunNormal", "tests/test_recipes_reference.py::test_lecun_normal_against_keras")],
    "small_init": [
        (
            "GPT-NeoX init_functions (vendored)",
            "tests/test_recipes_reference.py::test_small_and_wang_init_against_gpt_neox",
        )
    ],
    "wang_init": [
        (
            "GPT-NeoX init_functions (vendored)",
            "tests/test_recipes_reference.py::test_small_and_wang_init_against_gpt_neox",
        )
    ],
    "t5": [("transformers: T5", "tests/test_recipes_reference.py::test_t5_against_hf_t5")],
    "olmo_llama": [("ai2-olmo-core 3.0.0", "tests/test_recipes_reference.py::test_olmo_against_olmo_core")],
    "olmo_llama_depth": [("ai2-olmo-core 3.0.0", "tests/test_recipes_reference.py::test_olmo_against_olmo_core")],
    "olmo_fan_in": [("ai2-olmo-core 3.0.0", "tests/test_recipes_reference.py::test_olmo_against_olmo_core")],
    "olmo_normalized": [
        ("ai2-olmo-core 3.0.0", "tests/test_recipes_reference.py::test_olmo_normalized_against_olmo_core")
    ],
    "modded_nanogpt": [
        (
            "modded-nanogpt train_gpt.py (vendored)",
            "tests/test_recipes_reference.py::test_modded_nanogpt_against_its_init_statements",
        )
    ],
    "fixup": [
        (
            "Fixup transformer_zero.py (vendored)",
            "tests/test_recipes_fixup_deepnorm.py::test_fixup_matches_the_authors_transformer",
        )
    ],
    "deepnorm": [
        ("torchscale 0.3.0: Decoder", "tests/test_recipes_fixup_deepnorm.py::test_deepnorm_torchscale_decoder"),
        (
            "torchscale 0.3.0: EncoderDecoder",
            "tests/test_recipes_fixup_deepnorm.py::test_deepnorm_torchscale_encoder_decoder",
        ),
    ],
    "mup": [
        ("mup 1.0.0: init, MuReadout", "tests/test_recipes_mup.py::test_init_matches_mup_init"),
        ("mup 1.0.0: MuAdam/MuSGD groups", "tests/test_recipes_mup.py::test_param_groups_match_mup_optimizers"),
        ("Megatron-LM muP (vendored)", "tests/test_recipes_mup.py::test_init_depth_matches_megatron"),
    ],
    "u_mup": [
        ("unit-scaling 0.3.5: modules", "tests/test_recipes_uup.py::test_init_matches_unit_scaling_modules"),
        (
            "unit-scaling 0.3.5: Adam/AdamW/SGD groups",
            "tests/test_recipes_uup.py::test_param_groups_match_unit_scaling_optimizers",
        ),
    ],
    "depth_mup": [
        ("CompleteP Table 1, alpha 1/2", "tests/test_recipes_completep.py::test_param_groups_match_table1"),
    ],
    "completep": [
        ("CompleteP Table 1, alpha 1", "tests/test_recipes_completep.py::test_param_groups_match_table1"),
        ("CompleteP Table 1: init", "tests/test_recipes_completep.py::test_init_matches_table1"),
    ],
}


def _quiet():
    """Silence transformers' config warnings (special ids, unused fields): the table is the output."""
    warnings.simplefilter("ignore")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
    except ImportError:
        pass


def _refused_names(err: Exception) -> tuple[list[str], int] | None:
    """The parameter names an error refuses, and how many there were in all; None for other errors."""
    names = getattr(err, "names", None)
    if isinstance(names, (list, tuple)) and names:
        return list(names), len(names)
    text = str(err)
    found = re.search(r"(\d+) parameter\(s\) match no (?:role )?rule(?: and no module type)?: (.*?); pass", text)
    if found:
        return [n.strip() for n in found.group(2).split(",")], int(found.group(1))
    return None


def _reason(err: Exception) -> str:
    """One short cell for a refusal: the first names refused, or the error's first sentence."""
    names = _refused_names(err)
    if names is not None:
        shown, total = names
        more = f" (+{total - SHOWN_NAMES} more)" if total > SHOWN_NAMES else ""
        return "unclassified: " + ", ".join(f"`{n}`" for n in shown[:SHOWN_NAMES]) + more
    text = re.sub(r"^init_model_: ", "", str(err).split("\n")[0])
    where = re.search(r"\s*\(init_model_: parameter (\S+?)\)$", text)
    if where:  # the parameter first, so that cutting the message keeps it
        text = f"`{where.group(1)}`: {text[: where.start()]}"
    if len(text) > 180:
        text = text[:177].rstrip() + "..."
    return f"{type(err).__name__}: {text}".replace("|", "\\|")


def _roles(model) -> tuple[list[str], int]:
    """The roles ``init_model_`` finds under ``normal``, in ``tinit.schemes.ROLES`` order, and how many
    parameters no rule classifies (skipped where ``init_model_`` takes an ``unclassified`` policy)."""
    import tinit
    from tinit import schemes

    kwargs = {}
    if "unclassified" in inspect.signature(tinit.init_model_).parameters:
        kwargs["unclassified"] = "skip"
    try:
        summary = tinit.init_model_(model, "normal", seed=SEED, **kwargs)
    except Exception:  # noqa: BLE001 - the refusal shows in the recipe columns
        return [], 0
    found = {e.role for e in summary if e.role is not None}
    classified = {e.name for e in summary if e.role is not None}
    total = {name for name, _ in model.named_parameters()}
    order = list(schemes.ROLES)
    return sorted(found, key=lambda r: order.index(r) if r in order else len(order)), len(total - classified)


def _survey_model(label: str, build) -> dict:
    """One row: ``build()`` (a model on the meta device), materialised on the CPU, under every recipe."""
    import tinit
    from tinit import schemes

    row = {"family": label, "recipes": {}, "not_applicable": {}, "class": "-", "parameters": 0}
    try:
        model = build()
        row["class"] = type(model).__name__
        row["parameters"] = sum(p.numel() for p in model.parameters())
        tinit.materialise_(model, "cpu")
    except Exception as err:  # noqa: BLE001 - a model that cannot be built is a row of the table
        row.update({"roles": [], "unclassified": 0, "build_error": _reason(err)})
        return row
    row["roles"], row["unclassified"] = _roles(model)
    for name, scheme in schemes.SCHEMES.items():
        absent = [role for role in getattr(scheme, "required_roles", ()) if role not in row["roles"]]
        if absent and row["roles"]:  # a recipe for blocks this model does not have (ReZero's gates)
            row["not_applicable"][name] = absent
            continue
        try:
            tinit.init_model_(model, name, seed=SEED)
        except Exception as err:  # noqa: BLE001 - every refusal is reported, whatever its type
            row["recipes"][name] = _reason(err)
        else:
            row["recipes"][name] = None
    return row


def survey(families=None) -> list[dict]:
    """One record per family: class, parameters, roles, and per recipe None (runs) or the refusal.

    Args:
        families: names of ``tinit.tools.hf_families.FAMILIES`` (all when None).

    Returns:
        [{"family", "class", "parameters", "roles", "unclassified", "not_applicable",
        "recipes": {name: None | str}}] (with "build_error" for a family that cannot be built).
    """

    _quiet()
    return [
        _survey_model(family, lambda family=family: hf_families.build(family))
        for family in families or hf_families.FAMILIES
    ]


def _torchtitan(family: str, *args: str):
    """torchtitan's own ``debugmodel`` config of ``family``, built on the meta device."""
    import importlib

    module = importlib.import_module(f"torchtitan.models.{family}")
    registry = next(v for k, v in vars(module).items() if k.endswith("_configs") and isinstance(v, dict))
    config = registry["debugmodel"](*args)
    with torch.device("meta"):
        return config.build()


# (label, package, build): framework models built from their own small configs where the package imports.
FRAMEWORK_MODELS = (
    ("torchtitan llama3 debugmodel", "torchtitan", lambda: _torchtitan("llama3", "flex")),
    ("torchtitan deepseek_v3 debugmodel", "torchtitan", lambda: _torchtitan("deepseek_v3", "flex", "standard")),
)
# Frameworks whose models are not built here, and why (shown when their package does not import either).
FRAMEWORK_NOTES = {
    "olmo_core": "OLMo-core's models need its dependencies (cached_path, ...) beyond `pip install --no-deps`",
    "megatron.core": "Megatron-Core's models need its parallel state initialised (torch.distributed)",
    "timm": "timm's models need torchvision",
}


_DISTRIBUTIONS = {"olmo_core": "ai2-olmo-core", "megatron.core": "megatron-core"}


def _version(package: str) -> str | None:
    """The installed version of the distribution that provides ``package``; None when it does not import."""
    import importlib
    import importlib.metadata

    try:
        importlib.import_module(package)
    except Exception:  # noqa: BLE001 - any failure to import means: not here
        return None
    try:
        return importlib.metadata.version(_DISTRIBUTIONS.get(package, package))
    except importlib.metadata.PackageNotFoundError:
        return "?"


def survey_frameworks() -> tuple[list[dict], list[str]]:
    """Rows for ``FRAMEWORK_MODELS`` whose package imports here, and a line for each that does not."""
    _quiet()
    rows, notes = [], []
    for label, package, build in FRAMEWORK_MODELS:
        version = _version(package)
        if version is None:
            notes.append(f"- {label}: `{package}` is not installed here.")
            continue
        rows.append({**_survey_model(label, build), "family": f"{label} ({package} {version})"})
    for package, why in FRAMEWORK_NOTES.items():
        version = _version(package)
        notes.append(f"- `{package}`: {'not installed here' if version is None else f'{version} installed'}; {why}.")
    return rows, notes


def _runs_cell(recipes: dict) -> str:
    runs = sum(reason is None for reason in recipes.values())
    return f"{runs} of {len(recipes)}"


def _not_applicable(rows: list[dict]) -> list[str]:
    """One line per recipe that does not apply to some families (the roles it needs are absent)."""
    found: dict[tuple[str, tuple], list[str]] = {}
    for row in rows:
        for name, absent in row.get("not_applicable", {}).items():
            found.setdefault((name, tuple(absent)), []).append(row["family"])
    lines = []
    for (name, absent), families in found.items():
        which = "every family" if len(families) == len(rows) else ", ".join(families)
        lines.append(f"- `{name}` needs parameters with role {', '.join(absent)}: not applicable to {which}.")
    return lines


def _references(family: str) -> str:
    cells = []
    for (name, recipe), checks in sorted(REFERENCE_CHECKS.items()):
        if name == family:
            cells.extend(f"{recipe}: {what} (`{node.split('::')[-1]}`)" for what, node in checks)
    return "; ".join(cells) or "-"


def render(
    rows: list[dict], frameworks: tuple[list[dict], list[str]] | None = None, classes: tuple | None = None
) -> str:
    """docs/coverage.md from ``survey``'s rows (versions first; the tables follow), ``survey_frameworks``'
    rows and notes when given, and ``coverage_classes.survey()``'s (recipes, note, rows) when given."""
    import transformers

    import tinit
    from tinit import schemes

    lines = [
        "# Coverage: Hugging Face models under tinit's recipes",
        "",
        "Generated by `scripts/gen_coverage.py` (do not edit by hand; `python scripts/gen_coverage.py`",
        "rewrites it, `tests/test_coverage.py` fails when it is out of date).",
        "",
        (
            f"Versions: tinit {tinit.__version__}, transformers {transformers.__version__}, torch "
            f"{torch.__version__.split('+')[0]}."
        ),
        "",
        *(coverage_classes.render(*classes) + [""] if classes is not None else []),
        "## Recipes on the families of `tinit.tools.hf_families`",
        "",
        "### How it is made",
        "",
        (
            "Each family of `tinit.tools.hf_families.FAMILIES` is built from its reduced config (depth "
            f"{hf_families.REDUCED['num_hidden_layers']}, width {hf_families.REDUCED['hidden_size']}, vocabulary "
            f"{hf_families.REDUCED['vocab_size']}, a few experts) on the meta device, materialised on the CPU "
            "(`tinit.materialise_`: ties restored, buffers recomputed), and initialised by every recipe of "
            f"`tinit.schemes.SCHEMES` ({len(schemes.SCHEMES)} today) with its default options. A recipe *runs* "
            "when `init_model_` writes every parameter; *refused by* lists the recipes that refused, and the "
            "refusals table what: the first parameter names no rule classifies, or the error. *Roles* are the "
            "roles `init_model_` assigns under `normal`; *unclassified* counts the parameters no rule "
            "classifies. *Checked against a reference* names the tests that compare the family's init with the "
            "model's own code (`REFERENCE_CHECKS` in "
            "the script)."
        ),
        "",
        "### Families",
        "",
    ]
    lines += _tables(rows)
    lines += ["", "### Checked against a reference", "", "| family | checks |", "|---|---|"]
    lines += [f"| {row['family']} | {_references(row['family'])} |" for row in rows]
    lines += [
        "",
        "### Recipes checked against their reference code",
        "",
        "| recipe | reference | test |",
        "|---|---|---|",
    ]
    for recipe in sorted(schemes.SCHEMES):
        checks = RECIPE_REFERENCES.get(recipe) or [("none here", "")]
        for what, node in checks:
            lines.append(f"| `{recipe}` | {what} | {f'`{node.split(chr(58) * 2)[-1]}`' if node else '-'} |")
    lines += ["", FRAMEWORKS, ""]
    if frameworks is not None:
        framework_rows, notes = frameworks
        if framework_rows:
            lines += _tables(framework_rows) + [""]
        lines += [*notes, ""]
    return "\n".join(lines)


def _tables(rows: list[dict]) -> list[str]:
    """The families table, the recipes left out as not applicable, and the refusals table."""
    lines = [
        "| family | class | parameters | roles | unclassified | recipes run | refused by |",
        "|---|---|---:|---|---:|---|---|",
    ]
    for row in rows:
        if "build_error" in row:
            lines.append(f"| {row['family']} | {row['class']} | - | - | - | none | build: {row['build_error']} |")
            continue
        refused = [name for name, reason in row["recipes"].items() if reason is not None]
        lines.append(
            f"| {row['family']} | {row['class']} | {row['parameters']:,} | {', '.join(row['roles']) or '-'} "
            f"| {row['unclassified']} | {_runs_cell(row['recipes'])} | {', '.join(refused) or '-'} |"
        )
    absent = _not_applicable(rows)
    if absent:
        lines += ["", "Recipes for blocks a model does not have are left out of *recipes run*:", "", *absent]
    lines += ["", "#### Refusals", "", "| family | recipes | what was refused |", "|---|---|---|"]
    for row in rows:
        grouped: dict[str, list[str]] = {}
        for name, reason in row["recipes"].items():
            if reason is not None:
                grouped.setdefault(reason, []).append(name)
        for reason, names in grouped.items():
            lines.append(f"| {row['family']} | {', '.join(names)} | {reason} |")
    return lines


CLASSES_HEADING = "## Every causal-LM class of transformers"
FRAMEWORKS = """## Frameworks

Models of training frameworks, built from the framework's own small configs where its package
imports here (installed with `pip install --no-deps`), initialised the same way. This section
depends on what is installed, so `--check` and `tests/test_coverage.py` leave it out."""


def comparable(text: str) -> str:
    """The part of the file that ``--check`` compares: from the classes section up to "## Frameworks" (the
    versions line above may differ between machines, the frameworks below with what is installed)."""
    start = text.find(CLASSES_HEADING)
    end = text.find("## Frameworks")
    return text[max(start, 0) : end if end >= 0 else len(text)]


def main(argv: list[str] | None = None) -> int:
    """Write (or ``--check``) docs/coverage.md.

    Returns:
        0, or 1 with ``--check`` when the file differs from a fresh run (from the families table on).
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    text = render(survey(), None if args.check else survey_frameworks(), coverage_classes.survey())
    if args.check:
        current = args.output.read_text() if args.output.exists() else ""
        if comparable(current) != comparable(text):
            print(f"{args.output} is out of date: run python scripts/gen_coverage.py", file=sys.stderr)
            return 1
        return 0
    args.output.write_text(text)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
