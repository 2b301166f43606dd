"""Whether tinit's recipes initialise every causal-LM class of transformers as their references do.

For each class of ``tinit.tools.hf_classes.causal_lm_classes()`` (its tiny config), the model is
built twice eagerly by transformers (``_from_config`` on the CPU, torch's RNG seeded ``HF_SEEDS``:
the reference) and, per recipe, on the meta device and initialised by
``tinit.init_model_(model, recipe, seed=0, device="cpu")``. Parameters are pooled per name template
(every layer or expert index replaced by ``*``) and compared, per template:

- deterministic in HF (both eager builds equal: norms, biases, ``A_log``, ``D``, zero inits): tinit's
  values must equal HF's exactly, under every recipe;
- random in HF: pooled std within ``max(1 %, 5 / sqrt(2 n))`` of the reference's (n: tinit's sample
  count) and a two-sample KS test (``scipy.stats.ks_2samp``, p >= ``KS_P``). The reference is HF's
  values for ``hf``. For ``normal`` (``N(0, initializer_range)`` for every matrix and embedding, HF's
  constants otherwise: docs/recipes.md) a matrix (>= 2 dims) passes against ``N(0, r)`` (KS against
  that cdf, ``scipy.stats.kstest``) or against HF's own values; a vector HF draws must follow HF's.
  ``r`` is the config's ``initializer_range`` (the held config's nearest to HF's own std, for a
  tower with its own), else 0.02. A template that fails is drawn again with seed 1 and fails only
  if it fails both times (a 1e-4 test over thousands of templates);
- every buffer equal to the eager build's, bit for bit; a forward pass on 8 tokens finite where HF's
  own is; ``save_pretrained`` then ``from_pretrained`` gives back every tensor unchanged.

A class is *faithful* under a recipe when every check passes, *refused* when ``init_model_`` raises
(the message's first line), *MISMATCH* when a check fails (silently wrong: what the coverage
targets forbid) and *unbuildable* when its tiny config, its meta build or its eager build fails.
"""

from __future__ import annotations

import math
import re
import tempfile
import warnings
from dataclasses import dataclass, field

import torch

from tinit.tools import hf_classes

HF_SEEDS = (1, 2)  # torch seeds of the two eager builds (two, to tell deterministic from random)
TINIT_SEEDS = (0, 1)  # a failing template is drawn again with the second
KS_P = 1e-4
KS_MAX = 200_000  # values per side in a KS test (an even subsample beyond it)
DEFAULT_STD = 0.02  # normal's default std, for a config without initializer_range
TOKENS = 8


@dataclass
class Failure:
    """One failed check: the name template (or "buffer ...", "forward", "round trip"), what, and the ratio."""

    template: str
    what: str
    ratio: float | None = None


@dataclass
class Result:
    """One class under one recipe: verdict, one-line reason, failures."""

    verdict: str  # faithful | refused | MISMATCH | unbuildable
    reason: str = ""
    failures: list[Failure] = field(default_factory=list)
    templates: int = 0


def quiet():
    """Silence transformers' warnings and logs: the table is the output."""
    warnings.simplefilter("ignore")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()  # save_pretrained/from_pretrained's bars


def recipes() -> tuple[list[str], str | None]:
    """The recipes checked: ``hf`` where tinit has it (in ``tinit.schemes.SCHEMES``, or a name
    ``init_model_`` accepts), and ``normal``; a note saying why when ``hf`` is left out."""
    import tinit
    from tinit import schemes

    if "hf" in schemes.SCHEMES:
        return ["hf", "normal"], None
    try:
        tinit.init_model_(torch.nn.Linear(2, 2), "hf", seed=0)
    except schemes.UnknownNameError:
        return ["normal"], "`init_model_` does not know the `hf` recipe here, so it has no column"
    except Exception:  # noqa: BLE001 - it knows the name (a plain Linear may still be refused)
        return ["hf", "normal"], None
    return ["hf", "normal"], None


def template(name: str) -> str:
    """``name`` with every integer component (a layer or expert index) replaced by ``*``."""
    return re.sub(r"(?<=\.)\d+(?=\.|$)", "*", name)


def templates_of(params: dict[str, torch.Tensor]) -> dict[str, list[str]]:
    """{template: names}; names of one template with different shapes (a Sequential's Linear and
    LayerNorm, both ``proj.*.weight``) are kept apart, their shape appended."""
    by_shape: dict[tuple, list[str]] = {}
    for name, value in params.items():
        by_shape.setdefault((template(name), tuple(value.shape)), []).append(name)
    count: dict[str, int] = {}
    for tmpl, _ in by_shape:
        count[tmpl] = count.get(tmpl, 0) + 1
    return {(t if count[t] == 1 else f"{t} {list(shape)}"): names for (t, shape), names in by_shape.items()}


def one_line(err: BaseException) -> str:
    text = str(err).strip().split("\n")[0] or type(err).__name__
    text = text if len(text) <= 200 else text[:197] + "..."
    # No backticks: a message's code spans would read as identifiers the docs name (tests/test_docs.py).
    return f"{type(err).__name__}: {text}".replace("|", "\\|").replace("`", "'")


def _params(model) -> dict[str, torch.Tensor]:
    return {k: p.detach() for k, p in model.named_parameters() if p.is_floating_point()}


def _cat(params, names) -> torch.Tensor:
    return torch.cat([params[n].reshape(-1).double() for n in names])


def _eager(name: str, config, seed: int):
    torch.manual_seed(seed)
    with torch.device("cpu"):
        return hf_classes.build(name, config, device="cpu")


def _ranges(config) -> list[float]:
    """Every ``initializer_range`` of the config and the configs it holds."""
    found = []
    value = getattr(config, "initializer_range", None)
    if isinstance(value, float) and value > 0:
        found.append(value)
    for inner in vars(config).values():
        if hasattr(inner, "to_dict") and isinstance(getattr(inner, "model_type", None), str):
            found += _ranges(inner)
    return found


def _tolerance(n: int) -> float:
    return max(0.01, 5 / math.sqrt(2 * max(n, 1)))


def _sub(x: torch.Tensor) -> torch.Tensor:
    if x.numel() <= KS_MAX:
        return x
    step = x.numel() / KS_MAX
    return x[(torch.arange(KS_MAX, dtype=torch.float64) * step).long()]


def _against_sample(x: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    """(std ratio, KS p) of tinit's values ``x`` against a reference sample."""
    from scipy import stats

    ratio = x.std().item() / ref.std().item() if ref.std().item() > 0 else math.inf
    p = stats.ks_2samp(_sub(x).numpy(), _sub(ref).numpy()).pvalue if x.numel() > 1 else 1.0
    return ratio, float(p)


def _against_normal(x: torch.Tensor, std: float) -> tuple[float, float]:
    """(std ratio, KS p) of ``x`` against N(0, std^2)."""
    from scipy import stats

    ratio = x.std().item() / std
    p = stats.kstest(_sub(x).numpy(), "norm", args=(0.0, std)).pvalue if x.numel() > 1 else 1.0
    return ratio, float(p)


def _passes(ratio: float, p: float, n: int) -> bool:
    return math.isfinite(ratio) and abs(ratio - 1) <= _tolerance(n) and p >= KS_P


@dataclass
class Reference:
    """What the eager HF builds give: per template its names, values (both builds) and whether random."""

    params: dict
    templates: dict
    random: dict
    buffers: dict
    ranges: list
    forward: str | None  # None when HF's own forward runs and is finite, else why not


def reference(name: str, config) -> Reference:
    """The eager builds of class ``name``, pooled per template."""
    first, second = (_eager(name, config, seed) for seed in HF_SEEDS)
    a, b = _params(first), _params(second)
    templates = templates_of(a)
    random = {t: any(not torch.equal(a[n], b[n]) for n in names) for t, names in templates.items()}
    values = {
        t: torch.cat([_cat(a, names), _cat(b, names)]) if random[t] else _cat(a, names)
        for t, names in templates.items()
    }
    buffers = {k: v.detach().clone() for k, v in first.named_buffers()}
    return Reference(values, templates, random, buffers, _ranges(config) or [DEFAULT_STD], _forward(first))


def _inputs(model) -> dict:
    config = model.config
    vocab = getattr(config, "vocab_size", None) or getattr(getattr(config, "text_config", None), "vocab_size", 64)
    ids = (torch.arange(TOKENS).reshape(1, TOKENS) * 7 + 3) % max(4, min(int(vocab), 64))
    return {"input_ids": ids}


def _logits(model) -> torch.Tensor:
    model.eval()
    with torch.no_grad():
        out = model(**_inputs(model))
    logits = getattr(out, "logits", None)
    return logits if logits is not None else out[0]


def _forward(model) -> str | None:
    """None when ``model``'s forward on a few tokens is finite, else why not (one line)."""
    try:
        logits = _logits(model)
    except Exception as err:  # noqa: BLE001 - any failure is recorded, the forward check then skipped
        return one_line(err)
    return None if torch.isfinite(logits).all() else "logits not finite"


def _expected_std(ref: Reference, values: torch.Tensor) -> float:
    """normal's std for a template: the config's initializer_range nearest HF's own std (a tower's own)."""
    hf_std = values.std().item()
    return min(ref.ranges, key=lambda r: abs(math.log(max(hf_std, 1e-12) / r)))


def check_template(recipe: str, ref: Reference, tmpl: str, x: torch.Tensor, matrix: bool) -> Failure | None:
    """One template of tinit's values ``x`` against the recipe's reference; None when it passes."""
    hf = ref.params[tmpl]
    if not torch.isfinite(x).all():
        return Failure(tmpl, "values not finite")
    if not ref.random[tmpl]:
        if torch.equal(x, hf):
            return None
        diff = (x - hf).abs().max().item()
        means = f"HF mean {hf.mean().item():.4g}, tinit mean {x.mean().item():.4g}"
        return Failure(tmpl, f"HF's deterministic values differ (max abs difference {diff:.3g}, {means})")
    ratio, p = _against_sample(x, hf)
    if _passes(ratio, p, x.numel()):
        return None
    if recipe == "normal" and matrix:
        std = _expected_std(ref, hf)
        rule_ratio, rule_p = _against_normal(x, std)
        if _passes(rule_ratio, rule_p, x.numel()):
            return None
        rule = f"N(0, {std:g}) (ratio {rule_ratio:.3f}, KS p {rule_p:.1e})"
        return Failure(tmpl, f"neither {rule} nor HF's (KS p {p:.1e})", ratio)
    return Failure(tmpl, f"std ratio {ratio:.3f} to HF's, KS p {p:.1e} (n {x.numel()})", ratio)


LEFT_AS_BUILT = "built off the meta device by the model's constructor: init_model_ leaves it as built (unwritten)"


def check_params(recipe: str, ref: Reference, model, only: set | None = None, unwritten=()) -> list[Failure]:
    """Every template of ``model``'s parameters (those in ``only`` when given) against the reference.
    A template with a name in ``unwritten`` (left as a meta build made it off the meta device, its values
    whatever the allocator held) fails as such, its values unread: they differ from run to run."""
    params = _params(model)
    failures = []
    for tmpl, names in ref.templates.items():
        if only is not None and tmpl not in only:
            continue
        missing = [n for n in names if n not in params]
        if missing:
            failures.append(Failure(tmpl, f"missing from tinit's model: {missing[0]}"))
            continue
        if any(n in unwritten for n in names):
            failures.append(Failure(tmpl, LEFT_AS_BUILT))
            continue
        matrix = all(params[n].dim() >= 2 for n in names)
        found = check_template(recipe, ref, tmpl, _cat(params, names), matrix)
        if found is not None:
            failures.append(found)
    return failures


def check_buffers(ref: Reference, model) -> list[Failure]:
    failures = []
    for name, buf in model.named_buffers():
        want = ref.buffers.get(name)
        if want is None:
            continue
        same = want.shape == buf.shape and want.dtype == buf.dtype and torch.equal(want.nan_to_num(), buf.nan_to_num())
        if not same:
            failures.append(Failure(f"buffer {name}", "differs from the eager build's"))
    return failures


def check_round_trip(name: str, model) -> list[Failure]:
    """save_pretrained then from_pretrained: every tensor of the state dict back unchanged."""
    cls = type(model)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            model.save_pretrained(tmp)
            loaded = cls.from_pretrained(tmp)
        except Exception as err:  # noqa: BLE001 - recorded as a failure, not raised
            return [Failure("round trip", one_line(err))]
    mine, theirs = model.state_dict(), loaded.state_dict()
    for key, value in mine.items():
        other = theirs.get(key)
        if other is None or other.shape != value.shape or not torch.equal(other.nan_to_num(), value.nan_to_num()):
            return [Failure("round trip", f"{key} changed by save_pretrained/from_pretrained")]
    return []


def _init(name: str, config, recipe: str, seed: int):
    """The meta-built model initialised by ``recipe``, and the names of the parameters the meta build
    made off the meta device that ``init_model_`` left as they were."""
    import tinit

    model = hf_classes.build(name, config)
    before = {k: p.detach().clone() for k, p in model.named_parameters() if not p.is_meta}
    tinit.init_model_(model, recipe, seed=seed, device="cpu")
    after = dict(model.named_parameters())
    unwritten = {k for k, v in before.items() if torch.equal(v.nan_to_num(), after[k].detach().nan_to_num())}
    return model, unwritten


def check_recipe(name: str, config, recipe: str, ref: Reference) -> Result:
    """Class ``name`` under ``recipe`` against the reference: the verdict and its failures."""
    try:
        model, unwritten = _init(name, config, recipe, TINIT_SEEDS[0])
    except Exception as err:  # noqa: BLE001 - a refusal is a verdict
        return Result("refused", one_line(err))
    failures = check_params(recipe, ref, model, unwritten=unwritten)
    drawn = {f.template for f in failures if ref.random.get(f.template) and f.ratio is not None}
    if drawn:  # a second draw: a template fails only if it fails twice
        again_model, _ = _init(name, config, recipe, TINIT_SEEDS[1])
        again = {f.template for f in check_params(recipe, ref, again_model, drawn)}
        failures = [f for f in failures if f.template not in drawn or f.template in again]
    failures += check_buffers(ref, model)
    if ref.forward is None and not unwritten:  # unwritten memory makes the forward run-dependent
        why = _forward(model)
        if why is not None:
            failures.append(Failure("forward", why))
    failures += check_round_trip(name, model)
    verdict = "MISMATCH" if failures else "faithful"
    reason = "; ".join(f"{f.template}: {f.what}" for f in failures[:3])
    return Result(verdict, reason, failures, len(ref.templates))


def measure(name: str, recipe_names: list[str]) -> dict:
    """Class ``name``: model type, parameter count and a ``Result`` per recipe.

    Returns:
        {"class", "model_type", "parameters", "forward", "results": {recipe: Result}}.
    """
    row = {"class": name, "model_type": hf_classes.causal_lm_classes()[name], "parameters": 0}
    row.update(forward=None, off_meta=[])
    try:
        config = hf_classes.config_of(name)
        meta = hf_classes.build(name, config)
        row["parameters"] = sum(p.numel() for p in meta.parameters())
        # Built off the meta device inside torch.device("meta") (torch.FloatTensor(...), torch.normal(...)):
        # init_model_ takes them for loaded weights and leaves them as they are.
        row["off_meta"] = [k for k, p in meta.named_parameters() if not p.is_meta]
        ref = reference(name, config)
    except Exception as err:  # noqa: BLE001 - a class that cannot be built is a row of the table
        row["results"] = {r: Result("unbuildable", one_line(err)) for r in recipe_names}
        return row
    row["forward"] = ref.forward
    row["results"] = {r: check_recipe(name, config, r, ref) for r in recipe_names}
    return row


# Checked in the default test suite (tests/test_coverage.py): the seven state-space / linear-attention
# hybrids, the other families the coverage issue tried, common dense / MoE / MLA / sinks / encoder /
# encoder-decoder / multimodal classes, and one class of each verdict seen so far.
SUBSET = (
    "Mamba2ForCausalLM",
    "JambaForCausalLM",
    "BambaForCausalLM",
    "FalconH1ForCausalLM",
    "GraniteMoeHybridForCausalLM",
    "NemotronHForCausalLM",
    "Qwen3NextForCausalLM",
    "Llama4ForCausalLM",
    "Glm4MoeForCausalLM",
    "Olmo3ForCausalLM",
    "SmolLM3ForCausalLM",
    "Ernie4_5_MoeForCausalLM",
    "HunYuanDenseV1ForCausalLM",
    "HunYuanMoEV1ForCausalLM",
    "Cohere2ForCausalLM",
    "MiniMaxForCausalLM",
    "Gemma3nForCausalLM",
    "LlamaForCausalLM",
    "GPT2LMHeadModel",
    "MistralForCausalLM",
    "Qwen2ForCausalLM",
    "Qwen3ForCausalLM",
    "Qwen3MoeForCausalLM",
    "MixtralForCausalLM",
    "DeepseekV3ForCausalLM",
    "GptOssForCausalLM",
    "Phi3ForCausalLM",
    "GemmaForCausalLM",
    "Gemma2ForCausalLM",
    "OlmoeForCausalLM",
    "FalconForCausalLM",
    "BloomForCausalLM",
    "MambaForCausalLM",
    "BertLMHeadModel",
    "BartForCausalLM",
    "Gemma3ForConditionalGeneration",
    "XLNetLMHeadModel",
    "MiniCPM3ForCausalLM",
    "Gemma3nForConditionalGeneration",
)
VERDICTS = ("faithful", "refused", "MISMATCH", "unbuildable")
SHOWN_FAILURES = 6  # failures listed per class and recipe


def survey(names=None) -> tuple[list[str], str | None, list[dict]]:
    """(recipes checked, the note when ``hf`` is left out, one ``measure`` row per class)."""
    quiet()
    recipe_names, note = recipes()
    names = list(hf_classes.causal_lm_classes()) if names is None else list(names)
    return recipe_names, note, [measure(name, recipe_names) for name in names]


def config_digest(name: str) -> str:
    """8 hex digits of the tiny config (its ``to_dict``, versions left out), or "-" when it does not build:
    the manifest of the generator's inputs that tests/test_coverage.py checks without measuring."""
    import hashlib
    import json

    try:
        data = hf_classes.config_of(name).to_dict()
    except Exception:  # noqa: BLE001 - a config that does not build has no digest
        return "-"
    data.pop("transformers_version", None)
    text = json.dumps(data, sort_keys=True, default=repr)
    return hashlib.sha1(text.encode()).hexdigest()[:8]


def _cell(result: Result) -> str:
    if result.verdict == "MISMATCH":
        return f"MISMATCH ({len(result.failures)})"
    return result.verdict


def class_line(row: dict, recipe_names: list[str]) -> str:
    """The class's row of the classes table."""
    cells = " | ".join(_cell(row["results"][r]) for r in recipe_names)
    built = f"{row['parameters']:,}" if row["parameters"] else "-"
    return f"| {row['class']} | {row['model_type']} | {built} | `{config_digest(row['class'])}` | {cells} |"


def failure_lines(row: dict, recipe_names: list[str]) -> list[str]:
    """The class's rows of the mismatches table: recipe, class, template, what was measured."""
    lines = []
    for recipe in recipe_names:
        failures = row["results"][recipe].failures
        for f in failures[:SHOWN_FAILURES]:
            lines.append(f"| {recipe} | {row['class']} | `{f.template}` | {f.what.replace('|', chr(92) + '|')} |")
        if len(failures) > SHOWN_FAILURES:
            lines.append(f"| {recipe} | {row['class']} | (+{len(failures) - SHOWN_FAILURES} more) | |")
    return lines


def refusal_lines(row: dict, recipe_names: list[str]) -> list[str]:
    return [
        f"| {recipe} | {row['class']} | {row['results'][recipe].reason} |"
        for recipe in recipe_names
        if row["results"][recipe].verdict == "refused"
    ]


def unbuildable_line(row: dict) -> str | None:
    first = next(iter(row["results"].values()))
    return f"| {row['class']} | {first.reason} |" if first.verdict == "unbuildable" else None


def off_meta_line(row: dict) -> str | None:
    if not row.get("off_meta"):
        return None
    names = ", ".join(f"`{n}`" for n in row["off_meta"][:3]) + (" ..." if len(row["off_meta"]) > 3 else "")
    return f"| {row['class']} | {len(row['off_meta'])} | {names} |"


def refusal_kind(reason: str) -> str:
    """A refusal's kind, for the summary: unclassified parameters, buffers, ties, or the error type."""
    if "match no role rule" in reason:
        return "parameters no role rule classifies"
    if "UninitialisedBufferError" in reason:
        return "buffers tinit cannot recompute on the meta device"
    if "ties the output head" in reason:
        return "a tie the meta build loses"
    return reason.split(":")[0]


def counts(rows: list[dict], recipe_names: list[str]) -> dict[str, dict[str, int]]:
    """{recipe: {verdict: classes}}."""
    return {r: {v: sum(row["results"][r].verdict == v for row in rows) for v in VERDICTS} for r in recipe_names}


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f} %" if whole else "-"


def counts_lines(rows: list[dict], recipe_names: list[str]) -> list[str]:
    lines = [
        "| recipe | classes | buildable | faithful | refused | MISMATCH | unbuildable | faithful of buildable |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for recipe, c in counts(rows, recipe_names).items():
        buildable = len(rows) - c["unbuildable"]
        lines.append(
            f"| {recipe} | {len(rows)} | {buildable} | {c['faithful']} | {c['refused']} | {c['MISMATCH']} "
            f"| {c['unbuildable']} | {_percent(c['faithful'], buildable)} |"
        )
    return lines


def kinds_lines(rows: list[dict], recipe_names: list[str]) -> list[str]:
    lines = ["| recipe | refused because | classes |", "|---|---|---:|"]
    for recipe in recipe_names:
        kinds: dict[str, int] = {}
        for row in rows:
            result = row["results"][recipe]
            if result.verdict == "refused":
                kinds[refusal_kind(result.reason)] = kinds.get(refusal_kind(result.reason), 0) + 1
        lines += [f"| {recipe} | {kind} | {n} |" for kind, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))]
    return lines


HOW = """Each distinct class of transformers' `MODEL_FOR_CAUSAL_LM_MAPPING_NAMES` gets a tiny config
(`tinit.tools.hf_classes`: its config class's defaults with every size field shrunk by name, one layer
of each kind kept, a few classes from the hand-written table `HAND_WRITTEN`; *config* is a digest of
it). The model is built twice eagerly by transformers (`_from_config`, torch's RNG seeded 1 and 2: the
reference) and, per recipe, on the meta device and initialised by
`init_model_(model, recipe, seed=0, device="cpu")`. Per name template (layer and expert indices
replaced by `*`): values HF gives deterministically (the two eager builds agree: norms, biases,
`A_log`, zero inits) must be equal exactly; random ones must have their pooled std within
max(1 %, 5/sqrt(2n)) of the reference's and pass a KS test (p >= 1e-4; a template that fails is
drawn again with seed 1 and fails only if it fails twice). The reference is HF's values for `hf`;
for `normal` (docs/recipes.md: N(0, std) for every matrix and embedding, HF's constants elsewhere) a
matrix passes against N(0, `initializer_range`) or against HF's values, a vector HF draws against
HF's. Every buffer must equal the eager build's bit for bit, a forward pass on 8 tokens must be
finite where HF's own is, and `save_pretrained` then `from_pretrained` must give every tensor back.
*faithful*: every check passes; *refused*: `init_model_` raised (its message names the parameter or
buffer); *MISMATCH*: a check failed, silently (what the coverage targets forbid); *unbuildable*: the
tiny config, its meta build or its eager build fails. The checks are `scripts/coverage_classes.py`."""


def render(recipe_names: list[str], note: str | None, rows: list[dict]) -> list[str]:
    """The "Every causal-LM class" section of docs/coverage.md."""
    lines = ["## Every causal-LM class of transformers", "", HOW, ""]
    checked = f"Recipes checked: {', '.join(f'`{r}`' for r in recipe_names)}."
    lines += [checked + (f" Note: {note}." if note else ""), ""]
    lines += ["### Counts", "", *counts_lines(rows, recipe_names), "", *kinds_lines(rows, recipe_names), ""]
    lines += ["### Mismatches", "", "| recipe | class | template | measured |", "|---|---|---|---|"]
    lines += [line for row in rows for line in failure_lines(row, recipe_names)]
    lines += ["", "### Refused", "", "| recipe | class | why |", "|---|---|---|"]
    lines += [line for row in rows for line in refusal_lines(row, recipe_names)]
    lines += ["", "### Unbuildable", "", "| class | why |", "|---|---|"]
    lines += [line for row in rows if (line := unbuildable_line(row))]
    lines += [
        "",
        "### Parameters a meta build leaves on the CPU",
        "",
        "Made by calls that ignore `torch.device(\"meta\")` (XLNet's `torch.FloatTensor(...)`, DiffLlama's",
        "`torch.normal(...)`): tinit's recipes take them for loaded weights and leave them as they are",
        "(uninitialised memory, or the constructor's draw from torch's global RNG: not keyed by `seed`);",
        "`hf` initialises them by the model's code when every off-meta parameter is its constructor's.",
        "",
        "| class | parameters | first |",
        "|---|---:|---|",
    ]
    lines += [line for row in rows if (line := off_meta_line(row))]
    lines += ["", "### Classes whose own forward fails (forward check skipped)", "", "| class | why |", "|---|---|"]
    lines += [f"| {row['class']} | {row['forward']} |" for row in rows if row.get("forward")]
    header = " | ".join(recipe_names)
    lines += ["", "### Classes", "", f"| class | model type | parameters | config | {header} |"]
    lines += ["|---|---|---:|---|" + "---|" * len(recipe_names)]
    lines += [class_line(row, recipe_names) for row in rows]
    return lines


__all__ = [
    "HOW",
    "SUBSET",
    "VERDICTS",
    "Failure",
    "Result",
    "check_buffers",
    "check_params",
    "check_recipe",
    "check_round_trip",
    "config_digest",
    "counts",
    "measure",
    "recipes",
    "reference",
    "render",
    "survey",
    "template",
    "templates_of",
]
