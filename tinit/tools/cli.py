"""``tinit init``: initialise a whole model through tinit and report what was written.

    tinit init                              # tinit's GPT-2 small, scheme gpt2
    tinit init --model hf-gpt2 --compare    # transformers.GPT2LMHeadModel(GPT2Config())
    tinit init --hf llama --scheme modern   # a reduced LlamaForCausalLM, no download
    tinit init --hf llama --set num_hidden_layers=80 --set hidden_size=8192   # any config field
    tinit init --config path/to/config.json --save out/   # the architecture you train, written out
    python -m tinit init --layers 2 --d-model 64 --scheme deepnorm
    tinit init --device cuda --backend triton   # on a GPU

The model is built on the meta device (no memory, no init), materialised on
``--device`` (the CPU by default) with ``to_empty`` (ties restored), then
every parameter is written once by ``tinit.init_model_``. The report gives
the parameter count, wall time, G elements/s and, per role, the intended and
the measured std. Every argument (configs, fields, ``--save``'s directory) is
checked before anything is allocated, and so is the memory the model will take
(``tinit.tools.memory``).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import time
from dataclasses import dataclass

import torch
from tqdm import tqdm

import tinit
from tinit import STREAM_VERSION, dispatch, materialise_, schemes
from tinit.tools import hf_families, info as _info, memory
from tinit.tools.cli_args import positive_int, seed_int
from tinit.tools.cli_models import (
    MODELS,
    Built,
    build_hf,
    check_save_dir,
    jsonable,
    load_config,
    make_model,
    parse_set,
    save,
    tied_groups,
)
from tinit.tools.report import add_parser as _add_report_parser

__all__ = [
    "DEVICES",
    "DTYPES",
    "Moments",
    "build_parser",
    "init_record",
    "main",
    "measure",
    "parse_overrides",
    "truncated_std",
]

DEVICES = ("cpu", "cuda")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "float64": torch.float64}
_CHUNK = 1 << 22  # elements per fp64 chunk when measuring moments


def truncated_std(std: float, alpha: float, beta: float) -> float:
    """Standard deviation of N(mu, std^2) truncated to [mu + alpha std, mu + beta std].

    Args:
        std: std of the parent normal, tensor units, > 0.
        alpha, beta: bounds in units of std, alpha < beta (either may be infinite).

    Returns:
        std * sqrt(1 + (alpha phi(alpha) - beta phi(beta)) / Z
        - ((phi(alpha) - phi(beta)) / Z)^2), Z = Phi(beta) - Phi(alpha)
        (Johnson, Kotz & Balakrishnan, Continuous Univariate Distributions
        vol. 1, 2nd ed., eq. 13.134). For +-2 std the factor is 0.879626.
        Computed on the mirrored window when it lies mostly above the mean,
        so one-sided tail windows keep their digits (a = 8, b = 100 -> 0.1197).
    """

    def pdf(x):
        return 0.0 if math.isinf(x) else math.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)

    def x_pdf(x):
        return 0.0 if math.isinf(x) else x * pdf(x)

    def cdf(x):  # accurate in the lower tail
        return 0.5 * math.erfc(-x / math.sqrt(2.0))

    if alpha + beta > 0:  # the same std on the mirrored window, which lies in the accurate tail
        alpha, beta = -beta, -alpha
    mass = cdf(beta) - cdf(alpha)
    shift = (pdf(alpha) - pdf(beta)) / mass
    return std * math.sqrt(1.0 + (x_pdf(alpha) - x_pdf(beta)) / mass - shift * shift)


@dataclass
class Moments:
    """Running fp64 moments of every element of a group of tensors.

    Attributes:
        tensors: tensors added; n: elements added.
        total, squares: fp64 sums of the values and of their squares.
        lo, hi: smallest and largest value.
    """

    tensors: int = 0
    n: int = 0
    total: float = 0.0
    squares: float = 0.0
    lo: float = math.inf
    hi: float = -math.inf

    def add(self, tensor: torch.Tensor) -> None:
        """Accumulate every element of ``tensor`` (any dtype and shape), in fp64 chunks."""
        self.tensors += 1
        for chunk in tensor.detach().reshape(-1).split(_CHUNK):
            c = chunk.double()
            self.n += c.numel()
            self.total += float(c.sum())
            self.squares += float(c.dot(c))
            if c.numel():
                self.lo, self.hi = min(self.lo, float(c.min())), max(self.hi, float(c.max()))

    @property
    def mean(self) -> float:
        """Mean of the elements (NaN when empty)."""
        return self.total / self.n if self.n else math.nan

    @property
    def std(self) -> float:
        """Sample standard deviation of the elements (NaN for fewer than two)."""
        if self.n < 2:
            return math.nan
        return math.sqrt(max(self.squares - self.total * self.mean, 0.0) / (self.n - 1))


def measure(summary, params: dict, progress=None) -> dict[tuple, Moments]:
    """Pooled moments of the written values per (role, spec).

    Args:
        summary: ``init_model_``'s list of ``ParamInit``.
        params: name -> tensor.
        progress: optional callable wrapping ``summary`` as it is read (``tqdm``).

    Returns:
        (role, InitSpec) -> moments over every element of those tensors.
    """
    groups: dict[tuple, Moments] = {}
    for entry in summary if progress is None else progress(summary):
        groups.setdefault((entry.role, entry.spec), Moments()).add(params[entry.name])
    return groups


def _torch_calls(spec: schemes.InitSpec) -> tuple[str, ...]:
    """The ``torch.nn.init`` functions that write the same distribution as ``spec``: the call the
    recipe's reference makes (``normal_`` for an untruncated normal, as Hugging Face's GPT-2 and
    Megatron's ``init_method_normal`` call; ``trunc_normal_`` with the bounds where it truncates).

    Args:
        spec: an ``InitSpec``.

    Returns:
        Function names, e.g. ("normal_",), ("trunc_normal_",), ("uniform_",), ("constant_",),
        or one per distinct slice of a fused spec, in slice order.
    """
    if spec.constant is not None:
        return ("constant_",)
    if spec.parts is not None:
        return tuple(dict.fromkeys(name for part in spec.parts for name in _torch_calls(part)))
    if spec.distribution == "uniform":
        return ("uniform_",)
    return ("normal_",) if _untruncated(spec) else ("trunc_normal_",)


def _untruncated(spec: schemes.InitSpec) -> bool:
    return all(math.isinf(bound) for bound in spec.bounds)


def _torch_label(summary) -> str:
    """What ``--compare`` timed: the torch.nn.init calls of the random specs (constants when all are)."""
    names = dict.fromkeys(name for entry in summary for name in _torch_calls(entry.spec))
    random = [name for name in names if name != "constant_"] or list(names)
    return "torch.nn.init." + "/".join(random)


def _fused_slices(param: torch.Tensor, spec: schemes.InitSpec):
    """(slice of ``param`` along ``spec.split_dim``, its part) of a fused spec, as tinit writes them:
    ``spec.segments`` ((part, length), ...) or, without them, equal consecutive slices."""
    size = param.shape[spec.split_dim]
    segments = spec.segments or tuple((i, size // len(spec.parts)) for i in range(len(spec.parts)))
    start = 0
    for part, length in segments:
        yield param.narrow(spec.split_dim, start, length), spec.parts[part]
        start += length


def _torch_spec_(param: torch.Tensor, spec: schemes.InitSpec) -> None:
    if spec.map is not None:  # a mapped draw (a state-space dt_bias): torch.nn.init has none, tinit writes it
        tinit.write_spec_(param, spec, seed=0)
    elif spec.constant is not None:
        torch.nn.init.constant_(param, spec.constant)
    elif spec.parts is not None:
        for view, part in _fused_slices(param, spec):
            _torch_spec_(view, part)
    elif spec.distribution == "uniform":
        torch.nn.init.uniform_(param, *spec.bounds)
    elif _untruncated(spec):
        torch.nn.init.normal_(param, spec.mean, spec.std)
    else:
        torch.nn.init.trunc_normal_(param, spec.mean, spec.std, *spec.bounds)


def _torch_init_(summary, params: dict, progress=None) -> None:
    """The same per-parameter distribution through ``torch.nn.init``."""
    with torch.no_grad():
        for entry in summary if progress is None else progress(summary):
            _torch_spec_(params[entry.name], entry.spec)


def _table(rows: list[list[str]]) -> str:
    """Plain-text table: first column left-aligned, the others right-aligned."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]

    def line(row):
        cells = [c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        return "  ".join(cells)

    return "\n".join(line(r) for r in rows)


def _labels(summary) -> dict[tuple, str]:
    """Row label per (role, spec): the role, plus stack and blocks when a role has several specs.

    E.g. "attn_out@3" (depth-scaled), "attn_v@enc0-5" (encoder-decoder).
    """
    found: dict[tuple, list] = {}
    for entry in summary:
        found.setdefault((entry.role, entry.spec), []).append(entry)
    per_role: dict = {}
    for role, _ in found:
        per_role[role] = per_role.get(role, 0) + 1
    labels = {}
    for (role, spec), entries in found.items():
        label = str(role)
        if per_role[role] > 1:
            stacks = sorted({e.stack[:3] for e in entries if e.stack})
            blocks = sorted({e.layer for e in entries if e.layer is not None})
            span = "" if not blocks else f"{blocks[0]}" if len(blocks) == 1 else f"{blocks[0]}-{blocks[-1]}"
            label += f"@{'+'.join(stacks)}{span or ('' if stacks else 'none')}"
        labels[(role, spec)] = label
    return labels


def _role_rows(summary, tinit_moments: dict, torch_moments: dict | None) -> list[list[str]]:
    head = ["role", "tensors", "elements", "parent_std", "trunc", "intended", "measured", "error", "mean"]
    if torch_moments is not None:
        head.append("torch_measured")
    rows = [head]
    labels = _labels(summary)
    for key, m in tinit_moments.items():
        label, spec = labels[key], key[1]
        if spec.constant is not None:
            constant = spec.constant
            row = [
                label,
                str(m.tensors),
                f"{m.n:,}",
                "-",
                "-",
                f"={constant:g}",
                f"{m.mean:g}",
                f"dev={max(abs(m.lo - constant), abs(m.hi - constant)):.2g}",
                "-",
            ]
            other = f"{torch_moments[key].mean:g}" if torch_moments is not None else None
        elif spec.map is not None:  # a mapped draw: its std is not the draw's (InitSpec.map)
            row = [label, str(m.tensors), f"{m.n:,}", f"map {spec.map[0]}", "-", "-", f"{m.std:.6f}", "-"]
            row.append(f"{m.mean:+.2e}")
            other = f"{torch_moments[key].std:.6f}" if torch_moments is not None else None
        else:
            intended = spec.realised_std
            if spec.parts is not None:
                parent, trunc = "parts", "/".join(f"{p.std:.3g}" for p in spec.parts)
            else:
                parent, trunc = f"{spec.std:.6g}", "U" if spec.distribution == "uniform" else f"{spec.trunc:g}"
            row = [
                label,
                str(m.tensors),
                f"{m.n:,}",
                parent,
                trunc,
                f"{intended:.6f}",
                f"{m.std:.6f}",
                f"{100 * (m.std / intended - 1):+.2f}%" if intended > 0 else "-",  # parts all constants: A_log
                f"{m.mean:+.2e}",
            ]
            other = f"{torch_moments[key].std:.6f}" if torch_moments is not None else None
        if other is not None:
            row.append(other)
        rows.append(row)
    return rows


def build_parser() -> argparse.ArgumentParser:
    """The ``tinit`` argument parser (sub-commands ``init``, ``report`` (tinit.report) and ``info``).

    Returns:
        An ``argparse.ArgumentParser``.
    """
    parser = argparse.ArgumentParser(prog="tinit", description="tinit: fast truncated-normal initialisation.")
    parser.add_argument(
        "--version",
        action="version",
        version=f"tinit {tinit.__version__} (stream version {tinit.STREAM_VERSION})",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    init = sub.add_parser(
        "init", help="initialise a whole model and report per-role stds", description=__doc__.split("\n\n")[0]
    )
    _add_model_arguments(init)
    _add_recipe_arguments(init)
    _add_run_arguments(init)
    _add_report_parser(sub)
    sub.add_parser(
        "info",
        help="print the build, the backends and what each can fill on this machine (tinit.tools.info)",
        description="The build (compiler flags, CUDA), each backend's devices, dtypes and reasons, the devices.",
    )
    return parser


def _add_model_arguments(init: argparse.ArgumentParser) -> None:
    """``tinit init``'s model: ``--model``, ``--hf`` or ``--config``, ``--set``, ``--save``."""
    init.add_argument(
        "--model",
        choices=MODELS,
        default="gpt2-small",
        help="gpt2-small: tinit's own GPT-2-small-shaped model (default); "
        "hf-gpt2: transformers.GPT2LMHeadModel(GPT2Config()), needs transformers",
    )
    source = init.add_mutually_exclusive_group()
    source.add_argument(
        "--hf",
        metavar="FAMILY",
        choices=sorted(hf_families.FAMILIES),
        help="a Hugging Face model of this family from a reduced default config (4 layers, "
        f"d_model 256, vocab 1024; no download; tinit.tools.hf_families): {', '.join(sorted(hf_families.FAMILIES))}; "
        "overrides --model",
    )
    source.add_argument(
        "--config",
        metavar="PATH_OR_JSON",
        help="a Hugging Face config: a config.json path, a saved model's directory (its config.json) or an "
        "inline JSON object with a model_type (built with its architectures' class or the family's Auto class; "
        "no weights downloaded, nothing from the network); fields its config class does not have are kept, "
        "with a warning; fields of a storage format (quantization_config) are dropped, with a warning; "
        "overrides --model",
    )
    init.add_argument(
        "--set",
        metavar="KEY=VALUE",
        action="append",
        help="set a config field (repeatable; after --layers/--d-model/--heads): VALUE is JSON, or a plain "
        "string when it does not start with {, [ or a double quote; a dotted KEY sets a held config's field "
        "(text_config.num_hidden_layers=8). A field the config does not have is refused, and so is a count "
        "or size (num_*, n_*, *_size) below 1 where the config's default is >= 1 (below 0 anywhere). "
        'E.g. --set num_hidden_layers=80 --set rope_scaling=\'{"type":"linear","factor":2}\'',
    )
    init.add_argument(
        "--save",
        metavar="DIR",
        help="write the initialised model to DIR: a transformers model by save_pretrained (model.safetensors, "
        "config.json), tinit's own by safetensors (one tensor per tie) and config.json; both with "
        "tinit_init.json (scheme, seed, options, tinit and stream versions, per-role specs). Written beside "
        "DIR first and moved into place when complete; DIR must be absent or empty unless --force",
    )
    init.add_argument(
        "--force",
        action="store_true",
        help="let --save replace DIR when it is an earlier save (it holds tinit_init.json; any other non-empty "
        "directory is refused): the old directory is moved aside and deleted only after the new one is in "
        "place, so an interruption never leaves a mix of the two",
    )


def _add_recipe_arguments(init: argparse.ArgumentParser) -> None:
    """``tinit init``'s recipe and shape: ``--scheme``, ``--seed``, the sizes, the truncation, ``--unclassified``."""
    init.add_argument(
        "--scheme",
        choices=sorted(schemes.SCHEMES),
        default="gpt2",
        help="initialisation recipe (tinit.schemes; default gpt2)",
    )
    init.add_argument("--seed", type=seed_int, default=0, help="Philox key (default 0)")
    init.add_argument(
        "--layers", type=positive_int, help="number of blocks (default 12; --hf: 4); every depth field of an HF config"
    )
    init.add_argument(
        "--d-model", type=positive_int, help="model width (default 768; --hf: 256); an HF config's MLP width becomes 4x"
    )
    init.add_argument(
        "--heads", type=positive_int, help="attention heads (default d_model // 64); key/value heads halve"
    )
    init.add_argument("--trunc", type=float, help="truncation in units of std (default: the recipe reference's)")
    init.add_argument(
        "--variance-preserving",
        action="store_true",
        help="scale each std so the realised (truncated) std equals the recipe's",
    )
    init.add_argument(
        "--unclassified",
        default="error",
        choices=["error", *schemes.ROLES],
        metavar="{error,ROLE}",
        help="a parameter no name rule or module type classifies: error (default) refuses it, naming it; "
        "a role name treats it as that role (the models here are built on the meta device, so there is "
        "no own init to leave in place: init_model_'s unclassified='skip' does not apply)",
    )
    init.add_argument(
        "--override",
        metavar="REGEX=ROLE",
        action="append",
        help="give the parameters whose name REGEX re.search-es the role ROLE (repeatable; init_model_'s "
        "overrides=, the first matching REGEX wins; split at the last '='), e.g. --override 'lm_head=head' "
        r"for a tied embedding and head, or --override 'stack\.(?P<layer>\d+)\.proj=attn_out' (the layer "
        "group gives the block index)",
    )


def _add_run_arguments(init: argparse.ArgumentParser) -> None:
    """Where and how ``tinit init`` runs: ``--device``, ``--backend``, ``--dtype``, ``--compare``, ``--no-progress``."""
    init.add_argument(
        "--device",
        choices=DEVICES,
        default="cpu",
        help="where the model is materialised and filled (default cpu); cuda needs a visible GPU",
    )
    init.add_argument(
        "--backend",
        choices=["auto", *dispatch.BACKENDS],
        default="auto",
        help="auto: the fastest that fills --device (default); cuda needs --device cuda; "
        "triton needs --device cuda, or TRITON_INTERPRET=1 on the CPU (its interpreter, slow)",
    )
    init.add_argument("--dtype", choices=list(DTYPES), default="float32")
    init.add_argument(
        "--compare",
        action="store_true",
        help="also time the scheme's torch.nn.init calls with the same distribution per parameter "
        "(trunc_normal_ with the same std and bounds, uniform_ with the same bounds, constant_)",
    )
    init.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bars on stderr. Measuring the stds and --compare's torch pass advance "
        "per tensor; the fill's bar advances once, when the grouped fill returns (one native "
        f"call on the CPU; on a GPU one launch per dtype, plus one per tensor over "
        f"{dispatch.BACKENDS['cuda'].table_max_numel:,} elements)",
    )


def parse_overrides(values: list[str] | None) -> dict[str, str]:
    """``--override REGEX=ROLE`` arguments as ``init_model_``'s ``overrides`` mapping.

    Args:
        values: the arguments, each "REGEX=ROLE" (split at the last "="); None for none.

    Returns:
        {regex: role}, in the order given.

    Raises:
        ValueError: an argument without "=", an empty or invalid REGEX, or a ROLE that is not
            one of ``tinit.schemes.ROLES``; the message names the argument.
    """
    overrides = {}
    for value in values or ():
        pattern, sep, role = value.rpartition("=")
        if not sep or not pattern:
            raise ValueError(f"--override {value!r}: expected REGEX=ROLE")
        if role not in schemes.ROLES:
            raise ValueError(f"--override {value!r}: unknown role {role!r}; known: {', '.join(schemes.ROLES)}")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"--override {value!r}: {pattern!r} is not a valid regex: {exc}") from None
        overrides[pattern] = role
    return overrides


def init_record(args, summary, built: Built, count: int) -> dict:
    """What ``--save`` writes to ``tinit_init.json``: how the weights were made, enough to make them again.

    Args:
        args: the parsed ``tinit init`` arguments.
        summary: ``init_model_``'s list of ``ParamInit``.
        built: the model's ``Built`` record.
        count: parameters (tied counted once).

    Returns:
        A JSON-able dict: scheme, seed, options, dtype, versions (tinit, stream, torch, transformers),
        the model line, and one entry per (role, spec) with its tensors and elements.
    """
    labels = _labels(summary)
    roles: dict = {}
    for entry in summary:
        key = (entry.role, entry.spec)
        row = roles.setdefault(key, {"role": labels[key], "tensors": 0, "elements": 0, "spec": jsonable(entry.spec)})
        row["tensors"] += 1
        row["elements"] += entry.numel
    options = {"variance_preserving": bool(args.variance_preserving)}
    if args.trunc is not None:
        options["trunc"] = args.trunc
    overrides = parse_overrides(getattr(args, "override", None))
    if overrides:
        options["overrides"] = overrides
    record = {
        "scheme": args.scheme,
        "seed": args.seed,
        "options": options,
        "dtype": args.dtype,
        "tinit_version": tinit.__version__,
        "stream_version": STREAM_VERSION,
        "torch_version": torch.__version__,
        "model": built.description,
        "parameters": count,
        "tensors_written": len(summary),
        "roles": list(roles.values()),
    }
    if built.hf:
        import transformers

        record["transformers_version"] = transformers.__version__
    return jsonable(record)


def _sync(device: str) -> None:
    if device == "cuda":  # kernels run asynchronously: time them, not their launches
        torch.cuda.synchronize()


def _bar(args, desc: str, total: int | None = None, items=None):
    return tqdm(items, desc=desc, total=total, unit="tensor", file=sys.stderr, disable=args.no_progress)


def _timed_init(model, args, n_layers: int, desc: str) -> tuple[list, float]:
    scratch = torch.empty(4096, dtype=DTYPES[args.dtype], device=args.device)
    tinit.trunc_normal_at_(scratch, 0.0, 0.02, -0.04, 0.04, seed=args.seed, backend=args.backend)  # warm-up
    _sync(args.device)
    options = {"variance_preserving": True} if args.variance_preserving else {}
    if args.trunc is not None:
        options["trunc"] = args.trunc
    # The grouped fill reports no progress of its own (one native call), so
    # the bar is told the tensors at once when it returns.
    with _bar(args, desc, total=len(list(model.parameters()))) as bar:
        start = time.perf_counter()
        summary = tinit.init_model_(
            model,
            args.scheme,
            seed=args.seed,
            n_layers=n_layers,
            d_model=args.d_model,
            backend=args.backend,
            unclassified=args.unclassified,
            overrides=parse_overrides(args.override) or None,
            **options,
        )
        _sync(args.device)
        seconds = time.perf_counter() - start
        bar.update(len(summary))
    return summary, seconds


def _device_error(args) -> str | None:
    """Why ``args.device`` and ``args.backend`` cannot fill ``args.dtype``, in one line; None when they can."""
    if args.device == "cuda" and not torch.cuda.is_available():
        build = "is a CPU-only build" if torch.version.cuda is None else f"(CUDA {torch.version.cuda}) sees no GPU"
        return f"--device cuda: no CUDA device is available (torch {torch.__version__} {build})"
    if args.device == "cpu" and args.backend == "cuda":
        return "--backend cuda fills CUDA tensors only; add --device cuda"
    probe = torch.empty(1, dtype=DTYPES[args.dtype], device=args.device)
    try:
        dispatch.select(probe, args.backend)
    except (RuntimeError, ValueError) as err:
        if args.device == "cpu" and args.backend == "triton" and "TRITON_INTERPRET" in str(err):
            return (
                "--backend triton runs on the CPU only in the Triton interpreter: set TRITON_INTERPRET=1 "
                "(slow; a test tool), or use --device cuda"
            )
        return f"--backend {args.backend} --device {args.device} --dtype {args.dtype}: {err}"
    return None


def _memory_error(args, built: Built) -> str | None:
    """Why the model does not fit in the memory this process may still allocate on ``args.device``, in
    one line with both figures and where the available one came from; None when it fits (or when no
    figure can be read: ``tinit.tools.memory.available``)."""
    needed = memory.model_bytes(built.model, DTYPES[args.dtype])
    free = memory.available(args.device)
    if free is None or needed <= free.bytes:
        return None
    return (
        f"the model's parameters and buffers need {memory.describe(needed)} in {args.dtype}, more than the "
        f"{memory.describe(free.bytes)} available on {args.device} ({free.source}); make it smaller "
        "(--layers, --d-model, --set) or use a smaller --dtype"
    )


def _init(args, built: Built) -> int:
    model, n_layers = built.model, built.n_layers
    dtype, device = DTYPES[args.dtype], args.device
    model.to(dtype=dtype)
    start = time.perf_counter()
    materialise_(model, device)
    _sync(device)
    materialise_s = time.perf_counter() - start
    params = dict(model.named_parameters())
    count = sum(p.numel() for p in params.values())
    backend = dispatch.select(torch.empty(1, dtype=dtype, device=device), args.backend).name

    try:
        summary, seconds = _timed_init(model, args, n_layers, f"tinit fill ({args.scheme})")
    except (KeyError, TypeError, ValueError) as err:
        hint = " (here: --override REGEX=ROLE)" if "overrides=" in str(err) else ""
        print(f"tinit init: error: {err}{hint}", file=sys.stderr)
        return 2
    written = [params[e.name].data_ptr() for e in summary if e.numel]
    ok = len(written) == len(set(written)) and sum(e.numel for e in summary) == count
    print(f"tinit init: {built.description}")
    print(f"stream version {STREAM_VERSION} (tinit {tinit.__version__}; docs/stream.md)")
    print(
        f"scheme {args.scheme}, seed {args.seed}, dtype {args.dtype}, backend {backend}, "
        f"{torch.get_num_threads()} threads"
    )
    print(f"materialised on {device} with to_empty in {materialise_s:.3f} s")
    ok = _print_writes(model, summary, params, written, count, seconds) and ok

    def moments(desc: str) -> dict[tuple, Moments]:
        return measure(summary, params, progress=lambda items: _bar(args, desc, items=items))

    tinit_moments = moments("measuring stds")
    if args.save is not None:  # before --compare, which overwrites the weights with torch's draws
        files = save(built, args.save, init_record(args, summary, built, count), progress=not args.no_progress)
        print(f"saved to {args.save}: {', '.join(files)}")
    torch_moments = None
    if args.compare:
        torch_moments, same = _compare(args, built, summary, params, seconds, moments, tinit_moments)
        ok = ok and same
    _print_roles(summary, tinit_moments, torch_moments)
    if not ok:
        print(
            "error: a tensor was written more than once, the element counts disagree, "
            "or the same seed gave different values",
            file=sys.stderr,
        )
        return 1
    return 0


def _print_writes(model, summary, params: dict, written: list[int], count: int, seconds: float) -> bool:
    """Print what the fill wrote (ties once, distinct tensors, its speed); whether each tie was written once."""
    ok = True
    print(f"parameters: {count:,} in {len(params)} unique tensors (tied counted once)")
    for group in tied_groups(model):
        ptr = model.get_parameter(group[0]).data_ptr()
        print(f"tied: {' = '.join(group)}: data_ptr {ptr:#x} written {written.count(ptr)}x")
        ok = ok and written.count(ptr) == 1
    print(f"tensors written: {len(summary)}, distinct data_ptr: {len(set(written))}")
    print(
        f"tinit:                       {seconds:8.3f} s  {count / seconds / 1e9:8.3f} G elements/s"
        "  (includes the first touch of the memory to_empty allocated)"
    )
    return ok


def _compare(args, built: Built, summary, params: dict, seconds: float, moments, tinit_moments):
    """``--compare``: time torch.nn.init's calls, then tinit again on the touched memory, and print both.

    Returns:
        (torch's moments, whether tinit's second pass wrote the first pass's values).
    """
    dtype, device = DTYPES[args.dtype], args.device
    count = sum(p.numel() for p in params.values())
    label = _torch_label(summary)
    probe = torch.empty(4096, dtype=dtype, device=device)
    torch.nn.init.trunc_normal_(probe, 0.0, 0.02, -0.04, 0.04)  # warm-up
    torch.manual_seed(args.seed)
    _sync(device)
    start = time.perf_counter()
    _torch_init_(summary, params, progress=lambda items: _bar(args, label, items=items))
    _sync(device)
    torch_s = time.perf_counter() - start
    torch_moments = moments(f"measuring {label}")
    _, warm_s = _timed_init(built.model, args, built.n_layers, f"tinit fill again ({args.scheme})")
    same = {k: (m.total, m.squares) for k, m in moments("measuring again").items()} == {
        k: (m.total, m.squares) for k, m in tinit_moments.items()
    }
    what = "the recipe reference's call" + ("s" if "/" in label else "")
    print(
        f"{label + ':':<29}{torch_s:8.3f} s  {count / torch_s / 1e9:8.3f} G elements/s"
        f"  ({what}, same distribution per parameter, constants by constant_; torch {torch.__version__})"
    )
    print(
        f"tinit again:                 {warm_s:8.3f} s  {count / warm_s / 1e9:8.3f} G elements/s"
        f"  (same seed: values {'identical to' if same else 'DIFFERENT from'} the first pass;"
        " memory already touched, as for torch)"
    )
    print(f"speed-up: {torch_s / warm_s:.1f}x over {label} ({torch_s / seconds:.1f}x counting tinit's first touch)")
    return torch_moments, same


def _print_roles(summary, tinit_moments, torch_moments) -> None:
    """The per-role table and its legend."""
    print()
    print(_table(_role_rows(summary, tinit_moments, torch_moments)))
    print(
        "\nrole: the parameters' role (@blocks when it has several specs); parent_std: std of the parent\n"
        "normal (of the uniform; 'parts' for a fused tensor written per slice, trunc then lists the slices' stds);\n"
        "trunc: bounds +-trunc x parent_std around the mean (U: uniform)\n"
        "intended: std of the values the spec draws (truncated normal: parent_std x truncation factor;\n"
        "=value for constants)\n"
        "measured: std of the values written (their value for constants); mean: their mean\n"
        "error: measured / intended - 1 (max |value - constant| for constants)"
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``tinit`` console script and of ``python -m tinit``.

    Args:
        argv: arguments without the program name; ``sys.argv[1:]`` when None.

    Returns:
        Exit status: 0 on success, 1 when a tied tensor was written more than
        once, the element counts disagree or (``--compare``) the second tinit
        pass with the same seed wrote different values, 2 on bad usage (argparse's
        convention, also for ``--model hf-gpt2``/``--hf``/``--config`` without transformers;
        a ``--config`` that is not valid JSON, not readable or has no model_type; a
        ``--set`` field the config does not have, or a value that is not JSON; a
        ``--save`` directory that cannot be written; a config its model class refuses;
        for a scheme that cannot initialise the model, e.g. ``rezero``
        without residual gates, and for ``--device``/``--backend`` that this
        machine cannot run: no GPU for ``--device cuda``, ``--backend
        triton`` on the CPU without ``TRITON_INTERPRET=1``; a model whose
        parameters and buffers need more bytes than the process may still
        allocate there, ``tinit.tools.memory.available``, checked on meta).
        ``tinit report``: see ``tinit.tools.report.run``; ``tinit info``: 0.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "report":
        return args.func(args)
    if args.command == "info":
        print(_info.report())
        return 0
    sizes = {"layers": args.layers, "d_model": args.d_model, "heads": args.heads}
    # Everything a user can get wrong is checked here, before the model is materialised (allocated).
    try:
        if args.force and args.save is None:
            raise ValueError("--force applies to --save DIR (replace an earlier save), and there is no --save")
        problem = None if args.save is None else check_save_dir(args.save, force=args.force)
        if problem is not None:
            raise ValueError(problem)
        fields = parse_set(args.set)
        parse_overrides(args.override)
        if args.config is not None:
            built = build_hf(config=load_config(args.config), fields=fields, **sizes)
        elif args.hf is not None:
            built = build_hf(args.hf, fields=fields, **sizes)
        else:
            built = make_model(args.model, fields=fields, **sizes)
        if args.save is not None and not built.hf:  # the writer of tinit's own models, needed after the fill
            try:
                import safetensors  # noqa: F401
            except ImportError as err:
                raise ImportError(f"--save needs safetensors (pip install safetensors): {err}") from err
    except (ImportError, TypeError, ValueError) as err:
        parser.exit(2, f"tinit {args.command}: error: {err}\n")
    problem = _device_error(args) or _memory_error(args, built)
    if problem is not None:  # one line, no usage: the arguments are well formed, the machine lacks something
        parser.exit(2, f"tinit {args.command}: error: {problem}\n")
    for note in built.notes:
        print(f"tinit {args.command}: warning: {note}", file=sys.stderr)
    return _init(args, built)
