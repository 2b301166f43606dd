"""The models ``tinit init`` builds and writes: ``--model``, ``--hf FAMILY``, ``--config``, ``--set``, ``--save``.

Everything here runs before the model is materialised, so bad arguments (a config that is not
JSON, a field the config does not have, a directory that cannot be written) are reported before
anything is allocated; ``save`` runs after the fill. Hugging Face configs come from
``tinit.tools.hf_families``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import secrets
import shutil
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch

from tinit.tools import hf_families
from tinit.tools.toy_models import GPT, GPTConfig

__all__ = [
    "GENERIC_FIELDS",
    "MODELS",
    "RECORD_NAME",
    "Built",
    "build_hf",
    "build_model",
    "check_save_dir",
    "check_sizes",
    "generic_fields",
    "jsonable",
    "load_config",
    "make_model",
    "parse_set",
    "save",
    "tied_groups",
]

MODELS = ("gpt2-small", "hf-gpt2")
RECORD_NAME = "tinit_init.json"  # what --save writes beside the weights; --force replaces only such a directory


def tied_groups(model: torch.nn.Module) -> list[list[str]]:
    """Names that share one Parameter, e.g. [["transformer.wte.weight", "lm_head.weight"]].

    The tools' own copy of what ``tinit.init_model_`` writes once per tie, so that they use only
    tinit's public API.

    Args:
        model: any module (on the meta device too).

    Returns:
        One list per shared Parameter with more than one name, in ``named_parameters`` order.
    """
    groups = defaultdict(list)
    for name, param in model.named_parameters(remove_duplicate=False):
        groups[id(param)].append(name)
    return [names for names in groups.values() if len(names) > 1]


def parse_set(items: list[str] | None) -> dict:
    """``--set KEY=VALUE`` arguments as config fields.

    VALUE is JSON (``80``, ``true``, ``null``, ``{"type": "linear", "factor": 2}``); a value that
    is not JSON and does not start like JSON (``{``, ``[`` or a double quote) is taken as a string
    (``hidden_act=gelu``). A dotted KEY sets a field of a held config
    (``text_config.num_hidden_layers=8``). Later items win.

    Args:
        items: the ``--set`` strings, in order (None: none given).

    Returns:
        {field: value}, held configs as nested dicts.

    Raises:
        ValueError: an item without "=", an empty key, or a value that starts like JSON but is
            not (the item and the JSON error are named).
        TypeError: a dotted key below a field set to a value.
    """
    fields: dict = {}
    for item in items or ():
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key or any(not part for part in key.split(".")):
            raise ValueError(f"--set {item!r}: expected KEY=VALUE (e.g. --set num_hidden_layers=80)")
        try:
            value = json.loads(text)
        except json.JSONDecodeError as err:
            if text.lstrip()[:1] in ("{", "[", '"'):
                raise ValueError(f"--set {item!r}: the value is not valid JSON ({err})") from None
            value = text
        *parents, leaf = key.split(".")
        node = fields
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise TypeError(f"--set {item!r}: {part} was set to a value, not a config")
        node[leaf] = value
    return fields


# A field whose name says it counts or sizes something: num_hidden_layers, n_head, vocab_size, hidden_size.
_SIZE_FIELD = re.compile(r"^(num|n)_|_size$")


def _default(defaults, key: str):
    """``key``'s value in ``defaults``, a config (its class's defaults) or a dict; None when absent."""
    if isinstance(defaults, Mapping):
        return defaults.get(key)
    return getattr(defaults, key, None)


def check_sizes(fields: Mapping, defaults, where: str = "--set ") -> None:
    """Refuse a size field set to a count no model can have, as ``--layers 0`` is refused.

    The rule: an integer field whose name says it is a count or a size (it starts with ``num_`` or
    ``n_``, or ends in ``_size``: ``num_hidden_layers``, ``num_local_experts``, ``n_head``,
    ``vocab_size``, ``hidden_size``) must be >= 0, and >= 1 where the config class's default for it
    is >= 1: zero layers, experts or vocabulary entries build a model with empty or missing parts
    that transformers does not refuse. A field whose default is 0 or None (an optional count) may be
    0; an optional field is switched off with null. Held configs (``text_config``) are checked
    against their own defaults.

    Args:
        fields: the ``--set`` fields (``parse_set``'s dict, held configs as nested dicts).
        defaults: the config class's defaults (an instance built without arguments), or a dict.
        where: how the message names a field before its key.

    Raises:
        ValueError: the first such field, with its value and the class's default.
    """
    for key, value in fields.items():
        default = _default(defaults, key)
        if isinstance(value, Mapping):
            check_sizes(value, {} if default is None else default, f"{where}{key}.")
        elif type(value) is int and _SIZE_FIELD.search(key):
            floor = 1 if type(default) is int and default >= 1 else 0
            if value < floor:
                raise ValueError(
                    f"{where}{key}={value}: a count or size must be >= {floor} (the config's default is "
                    f"{default!r}); no model has {value} of them"
                )


def load_config(source: str) -> dict:
    """An HF config: a ``config.json`` path, a saved model's directory (its ``config.json``, as
    ``from_pretrained`` reads it), or inline JSON (text starting with ``{``, or ``[``, refused as
    not an object).

    Args:
        source: the ``--config`` argument.

    Returns:
        The config as a dict; it has a "model_type" (str).

    Raises:
        ValueError: unreadable or non-UTF-8 file, a directory without ``config.json``, or invalid JSON.
        TypeError: not a JSON object, or no ``model_type`` string.
    """
    if source.lstrip()[:1] in ("{", "["):  # JSON, not a path: a list is refused below as not an object
        what, text = "inline JSON", source
    else:
        what, path = source, Path(source)
        if path.is_dir():
            if not (path / "config.json").is_file():
                raise ValueError(f"--config {source}: a directory without a config.json (a saved model has one)")
            path = path / "config.json"
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as err:
            raise ValueError(f"--config {source}: cannot read it ({err.strerror or err})") from None
        except UnicodeDecodeError:
            raise ValueError(f"--config {source}: not a text file (a config.json is UTF-8 JSON)") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"--config {what}: not valid JSON ({err})") from None
    if not isinstance(data, dict):
        raise TypeError(f"--config {what}: expected a JSON object, got {type(data).__name__}")
    if not isinstance(data.get("model_type"), str):
        hint = ""
        if "n_layers" in data and "d_model" in data:  # the config.json --save writes for tinit's own model
            hint = (
                "; this is tinit's own gpt2-small config (--save of --model gpt2-small), which --config does not take"
            )
        raise TypeError(f'--config {what}: no "model_type" (a transformers model type, e.g. "llama"){hint}')
    return data


def _default_heads(d_model: int) -> int:
    """Heads of width 64 as in GPT-2 (768 -> 12); the largest divisor of d_model at most d_model // 64."""
    heads = max(1, d_model // 64)
    while d_model % heads:
        heads -= 1
    return heads


# The names HF configs give depth, width, heads and MLP width; --layers, --d-model and --heads set
# every one the config has (an encoder-decoder's two stacks alike). --d-model also sets the MLP width
# to 4 d_model, as GPT-2 has it.
GENERIC_FIELDS = {
    "layers": ("num_hidden_layers", "n_layer", "num_layers", "num_decoder_layers", "encoder_layers", "decoder_layers"),
    "d_model": ("hidden_size", "n_embd", "d_model"),
    "heads": ("num_attention_heads", "n_head", "num_heads", "encoder_attention_heads", "decoder_attention_heads"),
    "ffn": (
        "intermediate_size",
        "n_inner",
        "ffn_hidden_size",
        "d_ff",
        "ffn_dim",
        "encoder_ffn_dim",
        "decoder_ffn_dim",
    ),
}


def _present(config, key: str) -> bool:
    """A field of the config's own (not an ``attribute_map`` alias of another) that is set."""
    aliases = getattr(type(config), "attribute_map", {})
    return key not in aliases and hf_families.settable(config, key) and getattr(config, key, None) is not None


def generic_fields(config, *, layers: int | None, d_model: int | None, heads: int | None) -> dict:
    """Config fields for ``--layers``, ``--d-model`` and ``--heads`` on an HF config.

    Sets each name of ``GENERIC_FIELDS`` the config has; a multimodal config's ``text_config``
    (the language model) takes them. ``heads`` defaults to d_model // 64 when only d_model is
    given; key/value heads become heads / 2 (heads when odd, or when the config has as many as
    query heads, as MLA does); ``head_dim`` (and T5's ``d_kv``) follow d_model / heads where the
    config had them so.

    Args:
        config: the config the fields apply to (a family's reduced config, a ``--config``'s).
        layers, d_model, heads: the flags (None: not given).

    Returns:
        {field: value} (nested under "text_config" for a multimodal config); empty when no flag is given.

    Raises:
        ValueError: a value below 1, or heads not dividing d_model.
    """
    if layers is None and d_model is None and heads is None:
        return {}
    inner = getattr(config, "text_config", None)
    if inner is not None and hasattr(inner, "to_dict"):
        return {"text_config": generic_fields(inner, layers=layers, d_model=d_model, heads=heads)}
    if d_model is not None and heads is None:
        heads = _default_heads(d_model) if d_model >= 1 else 1
    old_width = next((getattr(config, k) for k in GENERIC_FIELDS["d_model"] if _present(config, k)), None)
    old_heads = next((getattr(config, k) for k in GENERIC_FIELDS["heads"] if _present(config, k)), None)
    width = d_model if d_model is not None else old_width
    for flag, value in (("--layers", layers), ("--d-model", d_model), ("--heads", heads)):
        if value is not None and value < 1:
            raise ValueError(f"{flag} must be >= 1, got {value}")
    if isinstance(width, int) and heads is not None and width % heads:
        raise ValueError(f"--heads {heads} must divide d_model {width}")
    fields = {}
    for group, value in (("layers", layers), ("d_model", d_model), ("heads", heads)):
        if value is not None:
            fields.update({key: value for key in GENERIC_FIELDS[group] if _present(config, key)})
    if d_model is not None:
        fields.update({key: 4 * d_model for key in GENERIC_FIELDS["ffn"] if _present(config, key)})
    if heads is not None:
        for key in ("num_key_value_heads", "num_kv_heads"):
            if _present(config, key):
                same = getattr(config, key) == old_heads
                fields[key] = heads if same or heads % 2 else heads // 2
    if isinstance(old_width, int) and isinstance(old_heads, int) and isinstance(width, int) and heads is not None:
        for key in ("head_dim", "d_kv"):
            if _present(config, key) and getattr(config, key) * old_heads == old_width:
                fields[key] = width // heads
    return fields


@dataclass
class Built:
    """A model built on the meta device, with what the report and ``--save`` need.

    Attributes:
        model: on the meta device.
        n_layers: blocks L for ``init_model_`` (None: counted from the names).
        description: one line for the report.
        config: the config as a JSON-able dict (``--save`` writes it for tinit's own model).
        hf: whether ``model`` is a transformers model (``save_pretrained``).
        notes: warnings for stderr (fields of a ``--config`` its model type does not have).
    """

    model: torch.nn.Module
    n_layers: int | None
    description: str
    config: dict
    hf: bool = False
    notes: list[str] = field(default_factory=list)


def build_model(
    name: str,
    *,
    layers: int | None = None,
    d_model: int | None = None,
    heads: int | None = None,
    fields: dict | None = None,
) -> tuple[torch.nn.Module, int, str]:
    """Build ``name`` on the meta device (no memory is allocated, nothing is initialised).

    Args:
        name: "gpt2-small" (``tinit.tools.toy_models.GPT``) or "hf-gpt2"
            (``transformers.GPT2LMHeadModel(GPT2Config(...))``, no download).
        layers, d_model, heads: override GPT-2 small's 12 / 768 / 12; ``heads``
            defaults to d_model // 64 (rounded down to a divisor of d_model).
        fields: config fields set last (``GPTConfig`` fields for gpt2-small, ``GPT2Config``'s for hf-gpt2).

    Returns:
        (model on the meta device, number of blocks L, one-line description).

    Raises:
        ImportError: "hf-gpt2" without transformers installed.
        ValueError: unknown model name, an unknown field or an invalid shape.
    """
    built = make_model(name, layers=layers, d_model=d_model, heads=heads, fields=fields)
    return built.model, built.n_layers, built.description


def make_model(name, *, layers, d_model, heads, fields) -> Built:
    """``build_model`` with its ``Built`` record (the config ``--save`` writes too).

    Args:
        name, layers, d_model, heads, fields: as ``build_model``'s.

    Returns:
        The ``Built`` model on the meta device.

    Raises:
        ImportError, ValueError: as ``build_model``.
    """
    sizes = {}
    if layers is not None:
        sizes["n_layers"] = layers
    if d_model is not None:
        sizes["d_model"] = d_model
        sizes["n_heads"] = _default_heads(d_model)
    if heads is not None:
        sizes["n_heads"] = heads
    if name == "gpt2-small":
        known = {f.name for f in dataclasses.fields(GPTConfig)}
        unknown = sorted(set(fields or ()) - known)
        if unknown:
            raise ValueError(f"GPTConfig has no field {', '.join(unknown)} (its fields: {', '.join(sorted(known))})")
        config = GPTConfig(**{**sizes, **(fields or {})})
        with torch.device("meta"):
            model = GPT(config)
        return Built(
            model,
            config.n_layers,
            (
                f"gpt2-small (tinit.tools.toy_models.GPT): {config.n_layers} layers, d_model {config.d_model}, "
                f"{config.n_heads} heads, vocab {config.vocab}, n_ctx {config.n_ctx}"
            ),
            {"model": "tinit.tools.toy_models.GPT", **dataclasses.asdict(config)},
        )
    if name == "hf-gpt2":
        try:
            import transformers
        except ImportError as err:
            raise ImportError(f"--model hf-gpt2 needs transformers (pip install transformers): {err}") from err
        renames = {"n_layers": "n_layer", "d_model": "n_embd", "n_heads": "n_head"}
        check_sizes(fields or {}, transformers.GPT2Config())
        config = hf_families.from_fields("gpt2", {**{renames[k]: v for k, v in sizes.items()}, **(fields or {})})
        with torch.device("meta"):
            model = transformers.GPT2LMHeadModel(config)
        return Built(
            model,
            config.n_layer,
            (
                f"hf-gpt2 (transformers {transformers.__version__} GPT2LMHeadModel): {config.n_layer} layers, "
                f"d_model {config.n_embd}, {config.n_head} heads, vocab {config.vocab_size}, n_ctx {config.n_positions}"
            ),
            config.to_dict(),
            hf=True,
        )
    raise ValueError(f"unknown model {name!r}; choose from {MODELS}")


def _shape_line(config) -> str:
    inner = getattr(config, "text_config", None)
    language = inner if inner is not None and hasattr(inner, "to_dict") else config
    parts = []
    for label, keys in (
        ("layers", GENERIC_FIELDS["layers"][:2]),
        ("d_model", GENERIC_FIELDS["d_model"]),
        ("heads", GENERIC_FIELDS["heads"][:2]),
        ("vocab", ("vocab_size",)),
    ):
        value = next((getattr(language, k) for k in keys if isinstance(getattr(language, k, None), int)), None)
        if value is not None:
            parts.append(f"{value} {label}" if label in ("layers", "heads") else f"{label} {value}")
    return ", ".join(parts)


# Config fields that describe how a checkpoint's tensors are stored rather than the model: a --save
# holds plain tensors, so a config that kept them would declare weights the file does not have
# (from_pretrained of a DeepSeek-V3 config with its fp8 quantization_config then asks for accelerate
# and fp8 kernels).
STORAGE_FIELDS = ("quantization_config",)


def build_hf(
    family: str | None = None,
    *,
    config: dict | None = None,
    layers: int | None = None,
    d_model: int | None = None,
    heads: int | None = None,
    fields: dict | None = None,
) -> Built:
    """A Hugging Face model on the meta device: a family's reduced config, or a given config; nothing downloaded.

    The config's fields, in order: the family's reduced config (``tinit.tools.hf_families``; 4 layers,
    d_model 256, vocab 1024) or the ``config`` dict (an HF ``config.json``); ``--layers``,
    ``--d-model``, ``--heads`` (``generic_fields``); ``fields`` (``--set``). The config is
    constructed from them (``transformers.AutoConfig.for_model``) and the model by
    ``hf_families.model_class``: the config's ``architectures``, the family's Auto class, or
    ``AutoModelForCausalLM`` / ``AutoModel``.

    Unknown names: a ``--set`` field the model type's config does not have is refused (an HF config
    keeps any keyword silently, so a typo would build the default); a ``config.json`` field it does
    not have is kept and reported in ``notes`` (files carry metadata and fields of custom code).

    Args:
        family: a key of ``tinit.tools.hf_families.FAMILIES`` (or None with ``config``).
        config: an HF config as a dict with "model_type".
        layers, d_model, heads: the generic flags.
        fields: config fields set last (held configs as nested dicts).

    Returns:
        A ``Built`` (``n_layers`` None: ``init_model_`` counts the blocks per stack from the names).

    Raises:
        ImportError: transformers is not installed.
        ValueError: unknown family, model type or ``fields`` name; an invalid shape; a config or
            model its class refuses to build.
    """
    transformers = hf_families.import_transformers()
    notes = []
    if config is not None:
        config = dict(config)
        model_type = config.pop("model_type")
        for key in STORAGE_FIELDS:
            if key in config:
                del config[key]
                notes.append(
                    f"the config's {key} describes a storage format tinit does not write (it writes plain "
                    "tensors of --dtype): dropped, so that a --save loads with from_pretrained as it is"
                )
        base = hf_families.from_fields(model_type, {}, check=False)
        unknown = hf_families.unknown_fields(base, config)
        if unknown:
            notes.append(f"the config's {', '.join(unknown)} are not fields of {type(base).__name__}: kept as given")
        source = "given config"
    else:
        model_type = hf_families.FAMILIES[family].model_type if family in hf_families.FAMILIES else None
        config = hf_families.fields(family)  # ValueError for an unknown family
        source = "reduced config"
    try:
        current = hf_families.from_fields(model_type, config, check=False)
        unknown = hf_families.unknown_fields(current, fields or {})
        if unknown:
            raise ValueError(f"--set: {type(current).__name__} has no field {', '.join(unknown)}")
        check_sizes(fields or {}, type(current)())
        merged = hf_families.canonical(current, config)
        for layer in (generic_fields(current, layers=layers, d_model=d_model, heads=heads), fields or {}):
            merged = hf_families.merge(merged, hf_families.canonical(current, layer))
        built_config = hf_families.from_fields(model_type, merged, check=False)
    except (TypeError, ValueError) as err:
        raise ValueError(str(err)) from None
    name = hf_families.model_class(built_config)
    try:
        model = hf_families.build(built_config)
    except Exception as err:  # noqa: BLE001 - any failure of the model's own constructor is the config's
        raise ValueError(f"{name} cannot be built from this config: {type(err).__name__}: {err}") from None
    label = family if family is not None else model_type
    return Built(
        model,
        None,
        f"hf {label} (transformers {transformers.__version__} {type(model).__name__}, {source}): "
        f"{_shape_line(built_config)}",
        built_config.to_dict(),
        hf=True,
        notes=notes,
    )


def check_save_dir(path: str, *, force: bool = False) -> str | None:
    """Why ``--save DIR`` cannot be written, in one line; None when it can (checked before anything is built).

    ``--force`` replaces only an earlier save (a directory with ``RECORD_NAME`` in it), never
    another directory: the flag exists to redo a save, and a typo in DIR must not delete a user's
    files. The current directory and its parents are refused too (``save`` renames the old
    directory aside, which the working directory cannot be).

    Args:
        path: the directory: absent (created, with its missing parents), empty, or, with ``force``,
            an earlier save, which ``save`` replaces whole.
        force: ``--force``: a non-empty earlier save at ``path`` may be replaced.

    Returns:
        The reason, or None.
    """
    target = Path(path)
    if target.exists() or target.is_symlink():
        if not target.is_dir():
            return f"--save {path}: exists and is not a directory"
        resolved, cwd = target.resolve(), Path.cwd().resolve()
        if resolved == cwd or resolved in cwd.parents:
            return f"--save {path}: is the current directory or one of its parents; name a directory inside it"
        if any(target.iterdir()):
            if not force:
                return (
                    f"--save {path}: the directory is not empty (pass --force to replace an earlier save "
                    "whole; the old one is removed only after the new one is complete)"
                )
            if not (target / RECORD_NAME).is_file():
                return (
                    f"--save {path}: --force replaces only an earlier tinit save, and this non-empty directory "
                    f"has no {RECORD_NAME}; nothing was written (choose a new or empty directory)"
                )
        parent = resolved.parent
    else:
        parent = target.parent
        while not parent.exists():
            parent = parent.parent
        if not parent.is_dir():
            return f"--save {path}: cannot create it, {parent} is not a directory"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"--save {path}: cannot write beside it, {parent} is not writable (the save is built there first)"
    return None


def jsonable(value):
    """``value`` with dataclasses as dicts and non-finite floats as strings ("inf"), for strict JSON."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def save(built: Built, directory: str, record: dict, *, progress: bool = True) -> list[str]:
    """Write the initialised model, its config and ``record`` to ``directory``, all or nothing.

    A transformers model: ``model.save_pretrained`` (``model.safetensors`` and ``config.json``;
    transformers handles the ties; ``safe_serialization=True`` where the version still takes it).
    tinit's own model: ``safetensors.torch.save_file`` with each tied tensor once, under the first
    name ``named_parameters`` gives, the other names in the metadata ("tied": {alias: name}), and
    ``config.json`` (its ``GPTConfig``). Then ``tinit_init.json`` (``record``).

    Everything is written into a new directory beside ``directory`` (same parent, a hidden
    ``.<name>.tinit-*`` name), which is renamed to ``directory`` only when complete. An existing
    ``directory`` (``check_save_dir`` allowed it: empty, or ``--force``) is first renamed aside and
    deleted after the new one is in place. An interruption therefore leaves either the old
    directory, or the complete new one, or (between the two renames) no ``directory`` and the old
    one under its hidden name beside it; never a mix of two saves.

    Args:
        built: the model, initialised.
        directory: the target (``check_save_dir`` passed).
        record: from ``init_record``.
        progress: let transformers show its progress bar while writing.

    Returns:
        The names of the files written.

    Raises:
        ImportError: safetensors is not installed (tinit's own model).
        OSError: the write failed (``directory`` is then as it was; the partial copy is removed).
    """
    target = Path(directory)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = _fresh_dir(target, "new")
    try:
        written = _write_save(built, staging, record, progress)
        aside = None
        if target.exists():
            aside = _fresh_dir(target, "old")
            os.replace(target, aside / target.name)
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)
    return written


def _fresh_dir(target: Path, what: str) -> Path:
    """A new empty directory beside ``target`` (mode by the umask, as ``mkdir`` gives)."""
    while True:
        path = target.parent / f".{target.name}.tinit-{what}-{secrets.token_hex(4)}"
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue


def _write_save(built: Built, target: Path, record: dict, progress: bool) -> list[str]:
    """``save``'s writes into the (new, empty) staging directory ``target``."""
    if built.hf:
        import inspect

        extra = {}
        if "safe_serialization" in inspect.signature(built.model.save_pretrained).parameters:
            extra["safe_serialization"] = True
        from transformers.utils import logging as hf_logging

        shown = hf_logging.is_progress_bar_enabled()
        if shown and not progress:
            hf_logging.disable_progress_bar()
        try:
            built.model.save_pretrained(target, **extra)
        finally:
            if shown and not progress:
                hf_logging.enable_progress_bar()
        written = [p.name for p in target.iterdir() if p.is_file()]
    else:
        try:
            from safetensors.torch import save_file
        except ImportError as err:
            raise ImportError(f"--save needs safetensors (pip install safetensors): {err}") from err
        alias = {name: group[0] for group in tied_groups(built.model) for name in group[1:]}
        tensors = {
            name: tensor.detach().cpu().contiguous()
            for name, tensor in built.model.state_dict().items()
            if name not in alias
        }
        save_file(tensors, str(target / "model.safetensors"), metadata={"format": "pt", "tied": json.dumps(alias)})
        (target / "config.json").write_text(json.dumps(built.config, indent=2) + "\n")
        written = ["model.safetensors", "config.json"]
    (target / RECORD_NAME).write_text(json.dumps(record, indent=2) + "\n")
    return sorted(set(written) | {RECORD_NAME})
