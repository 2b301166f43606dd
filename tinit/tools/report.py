"""``tinit report``: what an initialisation scheme does to the signal at step zero.

    tinit report                                       # every scheme, 80-layer pre-LN, d 128
    tinit report --schemes normal gpt2 --layers 80 --d-model 256 --out report/
    tinit report --norm deepnorm --schemes deepnorm,normal   # comma lists work too
    tinit report --d-model 1024 --no-backward          # forward only: variances, no gradients

Each scheme initialises the same ``tinit.tools.toy_models.Stack`` through
``tinit.init_model_``; one forward pass on a fixed random input (unit-variance
input embeddings by default, as the design documents assume, or random
tokens) and one backward pass of the cross-entropy against random targets
record, for every sublayer l = 1..2L (attention and MLP of each block):

    Var(x_l)        the residual stream after sublayer l (x_0: the input)
    Var(F_l)        the (gated) sublayer output, as it joins the stream
    Var(sum)        the residual sum before the LayerNorm (post-LN, DeepNorm)
    Var(x_l - x_0)  the variance the branches have added (pre-LN)
    |grad theta_l|  Frobenius norm of the loss gradient over the sublayer's
                    parameters (its norm, projections and gate)
    rms grad x_l    RMS of the loss gradient with respect to x_l

The variances are over all batch x seq x d_model elements, in fp64. For a
pre-LN stack whose sublayers each add sigma_F^2, Var(x_l) = 1 + l sigma_F^2;
GPT-2's 1/sqrt(2L) output projections make it 1 + sigma_F^2 at l = 2L
(Radford et al. 2019; the project's design documents).

Outputs: a markdown table per scheme (one row per sublayer), a JSON file of
the same numbers, a PNG (matplotlib, Agg; the ``report`` extra) of variance
and gradients against depth with one line per scheme, and the ``Report``
returned. Without matplotlib the markdown and JSON are still written.

Note: ``tinit.report`` is the function ``report``; this module is ``tinit.tools.report``
(``from tinit.tools.report import run, Report, ...``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
import warnings
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch
from torch.nn import functional as F
from tqdm import tqdm

from tinit import init_model_, patch_torch_init, schemes as _schemes
from tinit.tools.cli_args import positive_int, seed_int
from tinit.tools.toy_models import NORMS, Stack, StackConfig

__all__ = [
    "INPUTS",
    "KINDS",
    "PNG_NEEDS",
    "Report",
    "SchemeList",
    "SchemeReport",
    "SublayerStats",
    "add_parser",
    "measure",
    "plot",
    "report",
    "run",
    "to_dict",
    "to_markdown",
]

INPUTS = ("embeds", "tokens")
KINDS = ("attn", "mlp")
_LOG_SPAN = 30.0  # a plot panel whose values span more than this factor gets a log y axis
_PARAM_PATTERN = re.compile(r"^layers\.(\d+)\.(attn|mlp)(?:\.|_norm\.|_gate$)")
# multipliers that describe the init (DeepNorm's beta, muP's width ratio, CompleteP's depth ratio): nothing to apply
_INIT_ONLY = ("beta", "width_mult", "depth_mult")
PNG_NEEDS = (
    "the PNG needs matplotlib, which tinit's `report` extra installs: pip install 'tinit[report]' "
    "(or pip install matplotlib)"
)


@dataclass(frozen=True)
class SublayerStats:
    """Step-zero numbers of one sublayer.

    Attributes:
        index: sublayer count l, 1..2L; ``resid_var`` is Var(x_l).
        layer: block index, 0..L-1.
        kind: "attn" or "mlp".
        resid_var: Var(x_l), the residual stream after this sublayer.
        branch_var: Var(F_l), the (gated) sublayer output that joins the residual sum.
        sum_var: Var of the residual sum itself: x_{l-1} + F_l (= Var(x_l)) in
            a pre-LN block, alpha x_{l-1} + F_l before the LayerNorm in a
            post-LN (alpha = 1) or DeepNorm block, whose 1/sqrt scales the
            gradient that flows back through the norm (Xiong et al. 2020).
        delta_var: Var(x_l - x_0). For a pre-LN stack this is the variance of
            the sum of the branch outputs so far, Var(x_l) - Var(x_0) without
            the sample covariance of x_0 with that sum (zero in expectation,
            but the noisiest term of Var(x_l) - Var(x_0) when the sum is small).
        grad_norm: Frobenius norm of d loss / d theta over the sublayer's
            parameters (``layers.<i>.<kind>.*``, ``layers.<i>.<kind>_norm.*``
            and the gate ``layers.<i>.<kind>_gate``).
        stream_grad_rms: RMS over elements of d loss / d x_l.
    """

    index: int
    layer: int
    kind: str
    resid_var: float
    branch_var: float
    sum_var: float
    delta_var: float
    grad_norm: float
    stream_grad_rms: float


@dataclass(frozen=True)
class SchemeReport:
    """One scheme's step-zero numbers.

    Attributes:
        scheme: scheme name.
        input_var: Var(x_0).
        input_grad_rms: RMS of d loss / d x_0.
        loss: the cross-entropy of the forward pass (nats).
        seconds: wall time of init, forward and backward.
        sublayers: one entry per sublayer, in order l = 1..2L.
        residual_scale: the multiplier of x in the residual sum that was used
            (DeepNorm's alpha on a deepnorm stack, else 1).
        notes: multipliers of the scheme (``Scheme.multipliers``) this stack
            could not apply, one line each.
        same_as: the earlier scheme of the report whose every parameter spec and forward
            multiplier this one shares, so whose weights and numbers are this one's (not run
            again; the plot draws the two as one curve); None when it ran.
    """

    scheme: str
    input_var: float
    input_grad_rms: float
    loss: float
    seconds: float
    sublayers: tuple[SublayerStats, ...]
    residual_scale: float = 1.0
    notes: tuple[str, ...] = ()
    same_as: str | None = None

    @property
    def resid_vars(self) -> list[float]:
        """[Var(x_0), Var(x_1), ..., Var(x_2L)]."""
        return [self.input_var] + [s.resid_var for s in self.sublayers]

    @property
    def added_var(self) -> float:
        """Var(x_2L) - Var(x_0): the variance the whole stack added to the stream."""
        return self.sublayers[-1].resid_var - self.input_var


@dataclass
class Report:
    """The result of ``report``.

    Attributes:
        config: the stack's shape.
        seed: seed of the weights (tinit) and of the random input and targets.
        batch, seq: input shape; samples per variance = batch * seq * d_model.
        inputs: "embeds" (x_0 ~ N(0, 1)) or "tokens" (random ids through ``embed_tokens``).
        results: per scheme that ran, in the order asked.
        skipped: scheme name -> why it did not run on this architecture.
        png, markdown_path, json_path: files written (None without ``out``;
            ``png`` also None when matplotlib is missing).
        png_skipped: why no PNG was written although ``out`` was given
            (matplotlib is not installed), else None.
    """

    config: StackConfig
    seed: int
    batch: int
    seq: int
    inputs: str
    results: dict[str, SchemeReport] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    png: Path | None = None
    markdown_path: Path | None = None
    json_path: Path | None = None
    png_skipped: str | None = None

    def markdown(self) -> str:
        """The report as markdown: a summary row per scheme, then a table per
        scheme with one row per sublayer (see ``to_markdown``)."""
        return to_markdown(self)


def _var(tensor: torch.Tensor) -> float:
    """Population variance of all elements, in fp64."""
    return float(torch.var(tensor.detach().double(), correction=0))


def _norm(tensor: torch.Tensor) -> float:
    """Euclidean norm of all elements, accumulated in fp64."""
    return float(torch.linalg.vector_norm(tensor.detach(), dtype=torch.float64))


def _rms(tensor: torch.Tensor) -> float:
    return _norm(tensor) / math.sqrt(tensor.numel())


def _init(model: Stack, scheme: str, seed: int) -> tuple:
    """``init_model_`` with the stack's L and d_model; the (name, spec) of every parameter written,
    which with the seed decides every value (the stream of a parameter is its name's)."""
    summary = init_model_(model, scheme, seed=seed, n_layers=model.config.n_layers, d_model=model.config.d_model)
    return tuple((entry.name, entry.spec) for entry in summary)


_MAX_NOTES = 3  # multipliers a stack cannot apply, named one per line up to this many


def _apply_multipliers(model: Stack, scheme: str) -> tuple[float, tuple[str, ...]]:
    """Apply the scheme's forward multipliers the stack supports; describe the others.

    A deepnorm stack takes ``residual_alpha`` (its own (2L)^(1/4) when the
    scheme gives none); DeepNorm's ``beta`` and muP's ``width_mult`` describe
    the init and need nothing; any other multiplier other than 1 is reported
    as not applied.
    """
    config = model.config
    found = getattr(_schemes.get(scheme), "multipliers", None)
    values = found(n_layers=config.n_layers, d_model=config.d_model) if found is not None else {}
    alpha, notes = config.residual_scale, []
    for key, value in values.items():
        if key == "residual_alpha" and config.norm == "deepnorm":
            alpha = value
        elif key not in _INIT_ONLY and value != 1.0:
            notes.append(
                f"multiplier {key} = {value:.4g} not applied: the {config.norm} stack has no place "
                "for it" + (" (--norm deepnorm has)" if key == "residual_alpha" else "")
            )
    if len(notes) > _MAX_NOTES:
        # Per-sublayer multipliers (u-muP's) would be one line each, hundreds on a deep stack.
        skipped = [(k, v) for k, v in values.items() if k not in _INIT_ONLY and v != 1.0 and k != "residual_alpha"]
        shown = ", ".join(f"{k} = {v:.4g}" for k, v in skipped[:_MAX_NOTES])
        summary = (
            f"{len(skipped)} multipliers not applied: the {config.norm} stack has no place for them "
            f"({shown}, ...; Scheme.multipliers lists them all)"
        )
        notes = [n for n in notes if n.startswith("multiplier residual_alpha ")] + [summary]
    if config.norm == "deepnorm":
        model.set_residual_scale(alpha)
    return alpha, tuple(notes)


def _inputs(config: StackConfig, batch: int, seq: int, inputs: str, seed: int):
    generator = torch.Generator().manual_seed(seed)
    embeds = torch.randn(batch, seq, config.d_model, generator=generator)
    ids = torch.randint(config.vocab, (batch, seq), generator=generator)
    targets = torch.randint(config.vocab, (batch, seq), generator=generator)
    return (embeds if inputs == "embeds" else ids), targets


def _record_hooks(model: Stack, resid: dict, delta: dict, branch: dict, sums: dict, grads: dict) -> list:
    """Forward hooks filling, per sublayer key (0: the input), Var(x), Var(x - x_0), Var(F), the sum's
    variance and the stream gradient's RMS; returns their handles."""
    first = []

    def resid_hook(key):
        def hook(module, args, output):
            resid[key] = _var(output)
            if key == 0:
                first.append(output.detach())
            else:
                delta[key] = _var(output.detach() - first[0])
            if output.requires_grad:
                output.register_hook(lambda g: grads.__setitem__(key, _rms(g)))

        return hook

    def var_hook(store, key):
        def hook(module, args, output):
            store[key] = _var(output)

        return hook

    handles = [model.embed_resid.register_forward_hook(resid_hook(0))]
    for i, block in enumerate(model.layers):
        for j, kind in enumerate(KINDS):
            key = 2 * i + j + 1
            handles.append(getattr(block, f"{kind}_resid").register_forward_hook(resid_hook(key)))
            handles.append(getattr(block, f"{kind}_branch").register_forward_hook(var_hook(branch, key)))
            handles.append(getattr(block, f"{kind}_sum").register_forward_hook(var_hook(sums, key)))
    return handles


def _forward_backward(model: Stack, x, targets: torch.Tensor, backward: bool) -> torch.Tensor:
    """One forward pass (embeddings or ids), the cross-entropy loss, and its backward pass when asked."""
    with torch.set_grad_enabled(backward):
        if x.is_floating_point():
            x = x.detach().to(next(model.parameters()).dtype).requires_grad_(backward)
            logits = model(inputs_embeds=x)
        else:
            logits = model(x)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())
    if backward:
        loss.backward()
    return loss


def _grad_squares(model: Stack) -> dict[int, float]:
    """Squared Frobenius norm of the parameter gradients, summed per sublayer key."""
    squares = {}
    for name, param in model.named_parameters():
        match = _PARAM_PATTERN.match(name)
        if match and param.grad is not None:
            key = 2 * int(match.group(1)) + KINDS.index(match.group(2)) + 1
            squares[key] = squares.get(key, 0.0) + _norm(param.grad) ** 2
    return squares


def measure(
    model: Stack, scheme: str, x, targets: torch.Tensor, *, seed: int = 0, backward: bool = True
) -> SchemeReport:
    """Initialise ``model`` by ``scheme`` and record one forward and backward pass.

    Args:
        model: a materialised ``Stack`` (CPU or any device tinit fills).
        scheme: name in ``tinit.schemes.SCHEMES``.
        x: float input embeddings (batch, seq, d_model) or int64 ids (batch, seq),
            on the model's device.
        targets: int64 (batch, seq) in [0, vocab), the cross-entropy targets.
        seed: Philox key of the weights.
        backward: False runs the forward pass alone under ``torch.no_grad``
            (a third of the work, no stored activations); the gradient fields
            are then NaN.

    Returns:
        The scheme's ``SchemeReport``. On a deepnorm stack the scheme's
        ``residual_alpha`` multiplier (if any) is set on the model.

    Raises:
        Whatever ``tinit.init_model_`` raises for a scheme that does not apply
        (KeyError, ValueError, TypeError, NotImplementedError), before any
        weight is written.
    """
    start = time.perf_counter()
    _init(model, scheme, seed)
    alpha, notes = _apply_multipliers(model, scheme)
    return _observe(model, scheme, x, targets, backward, start, alpha, notes)


def _observe(model: Stack, scheme: str, x, targets, backward: bool, start: float, alpha: float, notes) -> SchemeReport:
    """``measure``'s pass over the initialised ``model``."""
    model.zero_grad(set_to_none=True)
    n = model.config.n_layers
    resid, delta, branch, sums, grads = {}, {}, {}, {}, {}
    handles = _record_hooks(model, resid, delta, branch, sums, grads)
    try:
        loss = _forward_backward(model, x, targets, backward)
    finally:
        for handle in handles:
            handle.remove()
    squares = _grad_squares(model)
    sublayers = tuple(
        SublayerStats(
            index=layer,
            layer=(layer - 1) // 2,
            kind=KINDS[(layer - 1) % 2],
            resid_var=resid[layer],
            branch_var=branch[layer],
            sum_var=sums[layer],
            delta_var=delta[layer],
            grad_norm=math.sqrt(squares.get(layer, 0.0)) if backward else math.nan,
            stream_grad_rms=grads.get(layer, math.nan),
        )
        for layer in range(1, 2 * n + 1)
    )
    return SchemeReport(
        scheme=scheme,
        input_var=resid[0],
        input_grad_rms=grads.get(0, math.nan),
        loss=loss.item(),
        seconds=time.perf_counter() - start,
        sublayers=sublayers,
        residual_scale=alpha,
        notes=notes,
    )


def _output_folder(out: str | Path) -> Path:
    """``report``'s ``out``, created and checked writable before any scheme runs (a bad path would
    otherwise fail only after minutes of work); ValueError naming ``out`` when it cannot be."""
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"report: out {str(out)!r} exists and is not a directory")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"report: out {str(out)!r} cannot be created: {err.strerror or err}") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"report: out {str(out)!r} is not writable")
    return folder


def report(
    model: Stack | None = None,
    schemes=None,
    *,
    n_layers: int = 80,
    d_model: int = 128,
    norm: str = "pre",
    d_ff: int | None = None,
    n_heads: int | None = None,
    vocab: int = 512,
    seed: int = 0,
    batch: int = 4,
    seq: int = 128,
    inputs: str = "embeds",
    backward: bool = True,
    out: str | Path | None = None,
    progress=None,
) -> Report:
    """Step-zero signal report of several initialisation schemes on one stack.

    Every scheme initialises the same model (in place, through
    ``tinit.init_model_``) and sees the same input and targets, so the
    differences between schemes are the schemes'.

    Args:
        model: a ``tinit.tools.toy_models.Stack`` to use (its config wins over
            ``n_layers``, ``d_model``, ``norm``, ``d_ff``, ``n_heads``,
            ``vocab``); None builds one on the CPU (meta device, then
            ``to_empty``: no torch init is spent).
        schemes: scheme names, in plot order (a string: one name, or names separated by commas or
            spaces, as ``--schemes`` takes them); None: every scheme of
            ``tinit.schemes.SCHEMES``. A scheme that ``init_model_`` refuses for
            this architecture is skipped and listed in ``Report.skipped``.
        n_layers, d_model, norm, d_ff, n_heads, vocab: the stack to build
            (``StackConfig``); norm is "pre", "post" or "deepnorm". A
            deepnorm stack multiplies x by the scheme's ``residual_alpha``
            (``Scheme.multipliers``) where it has one, else by (2L)^(1/4);
            multipliers a stack cannot apply are listed in ``SchemeReport.notes``.
        seed: Philox key of the weights, and seed of the torch generator that
            draws the input (N(0, 1) embeddings or uniform ids) and the targets.
        batch, seq: input shape; each variance averages batch * seq * d_model values.
        inputs: "embeds" feeds x_0 ~ N(0, 1) (Var(x_0) = 1, the design
            documents' assumption); "tokens" feeds random ids through
            ``embed_tokens`` (Var(x_0) = the embedding's std^2).
        backward: False skips the backward pass (gradient fields NaN, their
            plot panels empty): a third of the time and far less memory.
        out: folder for ``report.md``, ``report.json`` and ``report.png``
            (created); None writes nothing. Without matplotlib the PNG is
            skipped with a RuntimeWarning (``Report.png_skipped`` says why)
            and the markdown and JSON are written all the same.
        progress: optional callable taking a line of text (e.g. ``print``),
            told as each scheme finishes.

    Returns:
        A ``Report`` with one ``SchemeReport`` per scheme that ran.

    Raises:
        TypeError: ``model`` is not a ``Stack``.
        ValueError: bad shape or option (``StackConfig``), inputs not in
            ("embeds", "tokens"), batch or seq < 1, ``out`` not a directory that can be
            created and written (checked before any scheme runs), no scheme ran.
        KeyError: a scheme name that is not registered.
    """
    if model is not None and not isinstance(model, Stack):
        raise TypeError(
            f"report: model must be a tinit.tools.toy_models.Stack, got {type(model).__name__} "
            "(the report reads the stream at its hook points; see tinit.tools.toy_models)"
        )
    if inputs not in INPUTS:
        raise ValueError(f"report: inputs must be one of {INPUTS}, got {inputs!r}")
    for name, value in (("batch", batch), ("seq", seq)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"report: {name} must be an int >= 1, got {value!r}")
    if isinstance(schemes, str):  # "gpt2" or "normal,gpt2", as --schemes takes them; not its letters
        schemes = [name for name in re.split(r"[\s,]+", schemes) if name]
    names = list(_schemes.SCHEMES) if schemes is None else list(schemes)
    for name in names:
        _schemes.get(name)
    folder = None if out is None else _output_folder(out)
    if model is None:
        config = StackConfig(n_layers=n_layers, d_model=d_model, norm=norm, d_ff=d_ff, n_heads=n_heads, vocab=vocab)
        # Under the patch the constructors' torch.nn.init calls write nothing on meta: torch's own
        # meta normal_ (a Python decomposition) would import dynamo, seconds of a short report.
        with torch.device("meta"), patch_torch_init():
            model = Stack(config)
        model.to_empty(device="cpu")
    config = model.config
    x, targets = _inputs(config, batch, seq, inputs, seed)
    device = next(model.parameters()).device
    x, targets = x.to(device), targets.to(device)
    result = Report(config=config, seed=seed, batch=batch, seq=seq, inputs=inputs)
    seen: dict[tuple, str] = {}  # (every parameter's name and spec, residual scale) -> first scheme
    for name in names:
        note = _run_scheme(result, seen, model, name, x, targets, seed, backward)
        if progress is not None:
            progress(f"{name}: {note}")
    if not result.results:
        raise ValueError(f"report: no scheme ran on this stack; {result.skipped}")
    if folder is not None:
        try:
            result.png = plot(result, folder / "report.png")
        except ImportError as err:
            # The numbers are the point of the report; the plot is optional.
            result.png_skipped = str(err)
            warnings.warn(result.png_skipped, RuntimeWarning, stacklevel=2)
        result.markdown_path = folder / "report.md"
        result.markdown_path.write_text(to_markdown(result))
        result.json_path = folder / "report.json"
        result.json_path.write_text(json.dumps(to_dict(result), indent=1, allow_nan=True))
    return result


def _run_scheme(result: Report, seen: dict, model: Stack, name: str, x, targets, seed: int, backward: bool) -> str:
    """``report``'s step for one scheme: into ``result.results`` (or ``skipped``); its progress line.
    A scheme whose specs and residual scale an earlier one had (``seen``) takes that one's numbers."""
    start = time.perf_counter()
    try:
        written = _init(model, name, seed)
        alpha, notes = _apply_multipliers(model, name)
    except (KeyError, ValueError, TypeError, NotImplementedError) as err:
        result.skipped[name] = f"{type(err).__name__}: {err}"
        return f"skipped ({result.skipped[name]})"
    first = seen.setdefault((written, alpha), name)
    if first != name:  # the same weights and stack as an earlier scheme: its numbers
        done = time.perf_counter() - start
        result.results[name] = replace(result.results[first], scheme=name, seconds=done, same_as=first)
        return f"same specs as {first}: not run again"
    r = result.results[name] = _observe(model, name, x, targets, backward, start, alpha, notes)
    return f"Var(x_2L) {r.sublayers[-1].resid_var:.4g}, {r.seconds:.2f} s"


def _describe(r: Report) -> str:
    c = r.config
    alpha = f", alpha {c.residual_scale:.4g}" if c.norm == "deepnorm" else ""
    source = "x_0 ~ N(0, 1)" if r.inputs == "embeds" else "random tokens"
    return (
        f"{c.norm} stack, L {c.n_layers} ({2 * c.n_layers} sublayers), d_model {c.d_model}, "
        f"d_ff {c.ff}, heads {c.heads}{alpha}; {source}, batch {r.batch} x seq {r.seq}, seed {r.seed}"
    )


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" for _ in header) + "|"]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def _summary_table(r: Report) -> list[str]:
    """``to_markdown``'s first table: one row per scheme."""
    pre = r.config.norm == "pre"
    rows = []
    for name, s in r.results.items():
        attn = [x.branch_var for x in s.sublayers if x.kind == "attn"]
        mlp = [x.branch_var for x in s.sublayers if x.kind == "mlp"]
        stream = (
            [f"{s.added_var:.4g}", f"{s.sublayers[-1].delta_var:.4g}"]
            if pre
            else [f"{max(x.sum_var for x in s.sublayers):.4g}"]
        )
        rows.append(
            [
                name,
                f"{s.input_var:.4g}",
                f"{s.sublayers[-1].resid_var:.4g}",
                *stream,
                f"{sum(attn) / len(attn):.3g}",
                f"{sum(mlp) / len(mlp):.3g}",
                f"{s.sublayers[0].grad_norm:.3g}",
                f"{s.sublayers[-1].grad_norm:.3g}",
                f"{s.loss:.4f}",
            ]
        )
    stream = ["Var(x_2L) - Var(x_0)", "Var(x_2L - x_0)"] if pre else ["max Var(sum before LN)"]
    return _table(
        [
            "scheme",
            "Var(x_0)",
            "Var(x_2L)",
            *stream,
            "mean Var(F) attn",
            "mean Var(F) mlp",
            "grad first",
            "grad last",
            "loss",
        ],
        rows,
    )


def _scheme_section(r: Report, name: str, s: SchemeReport) -> list[str]:
    """``to_markdown``'s section of one scheme: one row per sublayer."""
    alpha = f", residual alpha {s.residual_scale:.4g}" if r.config.norm == "deepnorm" else ""
    lines = [
        "",
        f"## {name}",
        "",
        f"Var(x_0) = {s.input_var:.6g}, rms grad x_0 = {s.input_grad_rms:.4g}{alpha}",
        "",
    ]
    pre = r.config.norm == "pre"
    lines += _table(
        [
            "l",
            "layer",
            "sublayer",
            "Var(x_l)",
            "Var(x_l - x_0)" if pre else "Var(sum before LN)",
            "Var(F_l)",
            "grad norm theta_l",
            "rms grad x_l",
        ],
        [
            [
                str(x.index),
                str(x.layer),
                x.kind,
                f"{x.resid_var:.6g}",
                f"{x.delta_var if pre else x.sum_var:.4g}",
                f"{x.branch_var:.4g}",
                f"{x.grad_norm:.4g}",
                f"{x.stream_grad_rms:.4g}",
            ]
            for x in s.sublayers
        ],
    )
    return lines


def to_markdown(r: Report) -> str:
    """The report as markdown.

    A summary table (one row per scheme: Var(x_0), Var(x_2L), for a pre-LN
    stack the variance added Var(x_2L) - Var(x_0) and Var(x_2L - x_0), else
    the largest variance of a sum before its LayerNorm; the mean Var(F_l) of attention and MLP sublayers, the parameter
    gradient norm of the first and last sublayer, the loss), the skipped
    schemes with their reasons, the multipliers not applied, then per scheme a section ``## <scheme>`` whose
    table has exactly one row per sublayer l = 1..2L (Var(x_l - x_0) for a
    pre-LN stack, the variance of the sum before the LayerNorm otherwise).

    Args:
        r: a ``Report``.

    Returns:
        Markdown text.
    """
    lines = ["# tinit step-zero report", "", _describe(r), "", *_summary_table(r)]
    if r.skipped:
        lines += ["", "Skipped (the scheme does not apply to this stack):", ""]
        lines += [f"- `{name}`: {why}" for name, why in r.skipped.items()]
    notes = [f"- `{name}`: {note}" for name, s in r.results.items() for note in s.notes]
    notes += [
        f"- `{name}`: the same spec for every parameter as `{s.same_as}` (the same weights): its numbers"
        for name, s in r.results.items()
        if s.same_as is not None
    ]
    if notes:
        lines += ["", "Notes:", "", *notes]
    for name, s in r.results.items():
        if s.same_as is None:
            lines += _scheme_section(r, name, s)
    return "\n".join(lines) + "\n"


def to_dict(r: Report) -> dict:
    """The report as plain JSON-ready data (config, options, results, skipped, paths)."""
    return {
        "config": asdict(r.config),
        "residual_scale": r.config.residual_scale,
        "seed": r.seed,
        "batch": r.batch,
        "seq": r.seq,
        "inputs": r.inputs,
        "results": {
            name: {**asdict(s), "sublayers": [asdict(x) for x in s.sublayers]} for name, s in r.results.items()
        },
        "skipped": r.skipped,
        "png_skipped": r.png_skipped,
        "files": {
            k: None if v is None else str(v)
            for k, v in (("png", r.png), ("markdown", r.markdown_path), ("json", r.json_path))
        },
    }


def _positive(values) -> list[float]:
    """The values a log axis can draw: NaN for zero, negative and non-finite ones."""
    return [v if v > 0 and math.isfinite(v) else float("nan") for v in values]


# (panel row, column, title of the legend note) of plot's four panels
_PANELS = ((0, 0, "stream"), (0, 1, "Var(F_l)"), (1, 0, "grad norm"), (1, 1, "stream grad"))
# a scheme's marker after its colour: 10 colours x 8 markers before a pair repeats
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def _groups(r: Report) -> list[list[str]]:
    """The schemes that ran, grouped with those that share their numbers (``same_as``), in order."""
    groups: dict[str, list[str]] = {}
    for name, s in r.results.items():
        groups.setdefault(s.same_as or name, []).append(name)
    return list(groups.values())


def _series(r: Report, name: str) -> dict[tuple[int, int], list[tuple[str, list, list]]]:
    """A scheme's curves per panel: (kind's line style, x, y)."""
    s = r.results[name]
    stream = s.resid_vars if r.config.norm == "pre" else [s.input_var] + [x.sum_var for x in s.sublayers]
    grads = [s.input_grad_rms] + [x.stream_grad_rms for x in s.sublayers]
    out = {(0, 0): [("-", list(range(len(stream))), stream)], (1, 1): [("-", list(range(len(grads))), grads)]}
    for key, attr in (((0, 1), "branch_var"), ((1, 0), "grad_norm")):
        out[key] = []
        for kind, style in (("mlp", "-"), ("attn", "--")):
            picked = [x for x in s.sublayers if x.kind == kind]
            out[key].append((style, [x.index for x in picked], [getattr(x, attr) for x in picked]))
    return out


def _draw_curves(axes, r: Report, colours: list) -> list:
    """``plot``'s curves, one colour and marker per group of schemes with the same numbers; the
    legend handles, each labelled with its schemes and the panels where it is all zero (a log axis
    cannot draw those, so the label says it)."""
    from matplotlib.lines import Line2D

    handles = []
    for k, group in enumerate(_groups(r)):
        colour, marker = colours[k % len(colours)], _MARKERS[(k // len(colours)) % len(_MARKERS)]
        zero = []
        series = _series(r, group[0])
        for row, col, title in _PANELS:
            curves, drawn = series[row, col], False
            for style, xs, ys in curves:
                shown = _positive(ys)
                drawn = drawn or any(math.isfinite(v) for v in shown)
                axes[row, col].plot(
                    xs, shown, linestyle=style, color=colour, marker=marker, markevery=max(1, len(xs) // 8), ms=4
                )
            if not drawn and any(math.isfinite(v) for _, _, ys in curves for v in ys):
                zero.append(title)
        label = " = ".join(group) + (f" (zero: {', '.join(zero)})" if zero else "")
        handles.append(Line2D([], [], color=colour, marker=marker, ms=4, label=label))
    return handles


def _style_panel(ax, title: str, ylabel: str, scalar_formatter) -> None:
    """Title, label, grid and a log y axis when the panel's values span more than ``_LOG_SPAN``."""
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    values = [v for line in ax.get_lines() for v in line.get_ydata() if v > 0 and math.isfinite(v)]
    if values and max(values) > _LOG_SPAN * min(values):
        ax.set_yscale("log")
    else:
        ax.yaxis.set_major_formatter(scalar_formatter(useOffset=False))
    if not values:
        ax.text(
            0.5,
            0.5,
            "nothing to draw (no backward pass, or all zero)",
            transform=ax.transAxes,
            ha="center",
            va="center",
            color="grey",
        )
    ax.grid(True, which="both", alpha=0.3)


def plot(r: Report, path: str | Path) -> Path:
    """Write the report's PNG: four panels against the sublayer count l.

    Residual-stream variance Var(x_l) (l = 0 is the input; for post-LN and
    DeepNorm stacks, whose stream is a LayerNorm output, the variance of the
    sum before the norm instead), sublayer output variance Var(F_l), parameter gradient norm per
    sublayer, and RMS of the stream gradient; MLP sublayers solid and attention
    sublayers dashed. Schemes with the same spec for every parameter (``SchemeReport.same_as``)
    are one curve, labelled "a = b"; ten colours, each with a marker per round of ten, keep any
    number of groups apart. A panel whose values span more than a factor of 30 gets a log y axis
    (zeros, e.g. zero-initialised projections, are then not drawn, and the legend label says
    "zero: <panel>"), a narrower one a linear axis without offset.

    Args:
        r: a ``Report`` with at least one result.
        path: the PNG to write (its folder must exist).

    Returns:
        ``path`` as a ``Path``.

    Raises:
        ImportError: matplotlib is not installed (the ``report`` extra:
            ``pip install 'tinit[report]'``).
    """
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        from matplotlib import pyplot as plt
        from matplotlib.lines import Line2D
        from matplotlib.ticker import ScalarFormatter
    except ImportError as err:
        raise ImportError(f"tinit report: {PNG_NEEDS}; {type(err).__name__}: {err}") from err
    path = Path(path)
    fig, axes = plt.subplots(2, 2, figsize=(15, 9), sharex=True, layout="constrained")
    pre = r.config.norm == "pre"
    # tab10's ten hues, each with a marker per round of ten (_MARKERS): no two groups look alike
    colours = [plt.get_cmap("tab10")(i) for i in range(10)]
    panels = [
        (
            axes[0, 0],
            "Residual stream variance Var(x_l)"
            if pre
            else "Residual sum before the LayerNorm: Var(alpha x_(l-1) + F_l)",
            "Var(x_l)" if pre else "Var(sum)",
        ),
        (axes[0, 1], "Sublayer output variance Var(F_l)", "Var(F_l)"),
        (axes[1, 0], "Parameter gradient norm per sublayer", "||d loss / d theta_l||"),
        (axes[1, 1], "Stream gradient RMS", "rms(d loss / d x_l)"),
    ]

    handles = _draw_curves(axes, r, colours)
    for ax, title, ylabel in panels:
        _style_panel(ax, title, ylabel, ScalarFormatter)
    for ax in axes[1]:
        ax.set_xlabel(f"sublayer l (2 per block, L = {r.config.n_layers})")
    kinds = [
        Line2D([], [], color="black", linestyle="-", label="MLP sublayer"),
        Line2D([], [], color="black", linestyle="--", label="attention sublayer"),
    ]
    fig.legend(handles=[*handles, *kinds], title="scheme", loc="outside right upper", fontsize="small")
    fig.suptitle(f"tinit step-zero report: {_describe(r)}", fontsize="medium")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


class SchemeList(argparse.Action):
    """``--schemes``: names separated by spaces, commas or both, checked as they are parsed.

    ``--schemes normal gpt2``, ``--schemes normal,gpt2`` and ``--schemes
    normal, gpt2`` all give ["normal", "gpt2"]; repeating the option extends
    the list; a name given twice runs once. An unknown name or an empty list
    is a usage error (``parser.error``, exit status 2).
    """

    def __call__(self, parser, namespace, values, option_string=None):
        """Split ``values`` on commas and append the new names to ``namespace``.

        Args:
            parser: the parser, for its ``error``.
            namespace: the namespace being filled.
            values: the strings after the option (``nargs="+"``).
            option_string: the option as typed.

        Raises:
            SystemExit: (through ``parser.error``) an unknown scheme or no name.
        """
        names = list(getattr(namespace, self.dest, None) or [])
        for value in values:
            for name in (part.strip() for part in value.split(",")):
                if not name:
                    continue
                if name not in _schemes.SCHEMES:
                    parser.error(f"{option_string}: unknown tinit scheme {name!r}; known: {sorted(_schemes.SCHEMES)}")
                if name not in names:
                    names.append(name)
        if not names:
            parser.error(f"{option_string}: no scheme name given")
        setattr(namespace, self.dest, names)


def add_parser(sub) -> argparse.ArgumentParser:
    """Add the ``report`` sub-command to ``tinit``'s sub-parsers.

    Args:
        sub: the object ``ArgumentParser.add_subparsers`` returned.

    Returns:
        The ``report`` parser; its ``func`` default is ``run``.
    """
    parser = sub.add_parser(
        "report",
        help="step-zero signal report: variance and gradients against depth",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument("--layers", type=positive_int, default=80, help="blocks L (default 80)")
    parser.add_argument("--d-model", type=positive_int, default=128, help="width (default 128)")
    parser.add_argument("--d-ff", type=positive_int, help="MLP width (default 4 * d_model)")
    parser.add_argument("--heads", type=positive_int, help="attention heads (default d_model // 64)")
    parser.add_argument(
        "--norm",
        choices=NORMS,
        default="pre",
        help="pre: x + F(LN(x)); post: LN(x + F(x)); deepnorm: LN(alpha x + F(x))",
    )
    parser.add_argument(
        "--schemes",
        nargs="+",
        action=SchemeList,
        metavar="NAME",
        help="scheme names, space- or comma-separated (normal gpt2, or normal,gpt2); default: every registered scheme",
    )
    parser.add_argument("--seed", type=seed_int, default=0, help="weights and input seed (default 0)")
    parser.add_argument("--batch", type=positive_int, default=4, help="batch (default 4)")
    parser.add_argument("--seq", type=positive_int, default=128, help="sequence length (default 128)")
    parser.add_argument(
        "--input",
        choices=INPUTS,
        default="embeds",
        help="embeds: x_0 ~ N(0, 1) (default); tokens: random ids through the embedding",
    )
    parser.add_argument(
        "--no-backward",
        action="store_true",
        help="forward pass only (no gradient panels): a third of the time, far less memory",
    )
    parser.add_argument(
        "--out",
        default="tinit-report",
        help="output folder for report.md, report.json and report.png (default ./tinit-report); "
        "the PNG needs matplotlib (the `report` extra), the others do not",
    )
    parser.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bar on stderr (the bar advances once per scheme; the one-line "
        "result per scheme is printed either way)",
    )
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Run ``tinit report`` from parsed arguments; prints the summary and the files written.

    Progress (a bar over the schemes unless ``args.no_progress``, and one
    line per scheme) goes to stderr, the summary table to stdout.

    Args:
        args: the ``report`` sub-command's namespace.

    Returns:
        0 on success (also when matplotlib is missing: the markdown and JSON
        are written and stderr says the PNG needs the ``report`` extra), 2
        on bad usage (bad shape, no scheme ran).
    """
    names = list(_schemes.SCHEMES) if args.schemes is None else args.schemes
    bar = tqdm(total=len(names), desc="tinit report", unit="scheme", file=sys.stderr, disable=args.no_progress)

    def progress(line: str) -> None:
        bar.write(line, file=sys.stderr)
        bar.update()

    try:
        with warnings.catch_warnings():
            # run reports a missing matplotlib itself, below, in its own words
            warnings.filterwarnings("ignore", message="tinit report: the PNG", category=RuntimeWarning)
            result = report(
                schemes=names,
                n_layers=args.layers,
                d_model=args.d_model,
                norm=args.norm,
                d_ff=args.d_ff,
                n_heads=args.heads,
                seed=args.seed,
                batch=args.batch,
                seq=args.seq,
                inputs=args.input,
                backward=not args.no_backward,
                out=args.out,
                progress=progress,
            )
    except (KeyError, ValueError) as err:
        print(f"tinit report: error: {err}", file=sys.stderr)
        return 2
    finally:
        bar.close()
    text = result.markdown()
    print(text[: text.index("\n## ")] if "\n## " in text else text)
    written = [p for p in (result.markdown_path, result.json_path, result.png) if p is not None]
    print(f"\nwrote {', '.join(str(p) for p in written)}")
    if result.png_skipped is not None:
        print(f"{result.png_skipped}; no report.png was written", file=sys.stderr)
    return 0
