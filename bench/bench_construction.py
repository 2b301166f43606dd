"""Model construction time, side by side in one process: eager builds with and without
``tinit.patch_torch_init``, and a meta build initialised by ``tinit.init_model_`` against HF's own
``from_config``.

    python bench/bench_construction.py                 # both parts: Llama at 4 layers eager, 16 layers (1.1 B) meta
    python bench/bench_construction.py --part meta     # only init_model_ "hf" / "normal" against from_config
    python bench/bench_construction.py --tiny --repeats 1          # a smoke run (hidden 256, 2 layers)

Eager part: each case builds the model eagerly on the CPU, allocation and every init
included: ``LlamaForCausalLM(config)`` (transformers: ``nn.Linear`` and
``nn.Embedding`` fill in their constructors, then the model's
``_init_weights`` redraws them through ``transformers.initialization``) and
``timm.create_model("vit_base_patch16_224", pretrained=False)``, under
torch's own ``torch.nn.init``, under ``patch_torch_init()`` (keys from
torch's RNG) and under ``patch_torch_init(seed=0)`` (keys by name).

Meta part: the same Llama shapes at --meta-layers blocks (16: 1.1 B parameters with the untied
32000-token head, Llama-3.2-1B's width), built three ways: ``AutoModelForCausalLM.from_config(config)``
(HF's own init, torch's RNG); built under ``torch.device("meta")`` then
``init_model_(model, "normal", seed=0, device="cpu")``; the same with ``"hf"`` (the model's own
``_init_weights`` under the patch). Materialisation is included: the figure is the meta build plus
``init_model_`` (the ``init_model_`` call alone is reported too). Targets: ``"hf"`` within 20 % of
``"normal"``, and at least 5x faster than ``from_config``.

The modes alternate within each repeat so that the machine's load falls on all of them alike; the
figure is the median of --repeats builds. The first build of each mode is validated before any is
timed: every parameter finite, the attention and MLP weights' std within 3 % of the config's
``initializer_range`` (HF's ``_init_weights``), the norms 1, and tinit's weights not torch's. Prints
markdown tables and writes them with JSON (machine, versions, commit, load average) under
bench/results/.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from pathlib import Path

import torch
from _env import environment, load_average, write_report  # bench/_env.py

import tinit

MODES = {
    "torch": lambda: _Null(),
    "patch_torch_init()": lambda: tinit.patch_torch_init(),
    "patch_torch_init(seed=0)": lambda: tinit.patch_torch_init(seed=0),
}


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


def _llama_config(layers: int, tiny: bool = False):
    from transformers import LlamaConfig

    width = {"hidden_size": 256, "intermediate_size": 1024, "vocab_size": 2048} if tiny else {}
    return LlamaConfig(
        **{"hidden_size": 2048, "intermediate_size": 8192, "vocab_size": 32000, **width},
        num_hidden_layers=layers,
        num_attention_heads=32 if not tiny else 4,
        num_key_value_heads=8 if not tiny else 2,
        tie_word_embeddings=False,
    )


def _llama(layers: int, tiny: bool = False):
    from transformers import LlamaForCausalLM

    config = _llama_config(layers, tiny)
    return (lambda: LlamaForCausalLM(config)), config.initializer_range


def _timm_vit():
    import timm  # needs torchvision

    return (lambda: timm.create_model("vit_base_patch16_224", pretrained=False)), None


def _validate(model, std: float | None, reference: dict | None, what: str) -> dict:
    values = {}
    for name, param in model.named_parameters():
        value = param.detach()
        if not bool(torch.isfinite(value).all()):
            raise AssertionError(f"{what}: {name} has non-finite values")
        if std is not None and name.endswith(("q_proj.weight", "down_proj.weight")):
            got = float(value.std())
            if abs(got / std - 1) > 0.03:
                raise AssertionError(f"{what}: {name} std {got:.5f}, the config's initializer_range is {std}")
        if value.numel() >= 1000 and float(value.std()) > 0:
            values[name] = value.flatten()[:1000].clone()
    if reference is not None:
        same = [n for n, v in values.items() if torch.equal(v, reference[n])]
        if same:
            raise AssertionError(f"{what}: {len(same)} random parameters hold torch's values, e.g. {same[0]}")
    return values


def _measure(build, std, repeats: int, label: str) -> dict:
    torch_values = None
    for mode, context in MODES.items():  # validation builds, untimed
        torch.manual_seed(0)
        with context():
            model = build()
        values = _validate(model, std, torch_values if mode != "torch" else None, f"{label} {mode}")
        if mode == "torch":
            torch_values = values
        n_params = sum(p.numel() for p in model.parameters())
        del model
        gc.collect()
    times = {mode: [] for mode in MODES}
    for _ in range(repeats):
        for mode, context in MODES.items():
            torch.manual_seed(0)
            start = time.perf_counter()
            with context():
                model = build()
            times[mode].append(time.perf_counter() - start)
            del model
            gc.collect()
    return {
        "model": label,
        "params": n_params,
        "times_s": times,
        "median_s": {m: statistics.median(t) for m, t in times.items()},
    }


def table(rows: list[dict]) -> str:
    modes = list(MODES)
    lines = [
        "| model | parameters | " + " | ".join(f"`{m}`" for m in modes) + " | speed-up (seed=0) |",
        "| --- | ---: | " + " | ".join("---:" for _ in modes) + " | ---: |",
    ]
    for r in rows:
        if "skipped" in r:
            lines.append(f"| {r['model']} | | " + " | ".join("" for _ in modes) + f" | skipped: {r['skipped']} |")
            continue
        med = r["median_s"]
        cells = " | ".join(f"{med[m]:.2f} s" for m in modes)
        lines.append(f"| {r['model']} | {r['params'] / 1e6:.0f} M | {cells} | {med['torch'] / med[modes[-1]]:.1f}x |")
    return "\n".join(lines)


META_MODES = ("from_config", 'init_model_(…, "normal")', 'init_model_(…, "hf")')


def _meta_builds(config) -> dict:
    """mode -> a build returning (model, seconds in init_model_ or None): HF's eager ``from_config``, and a
    meta build initialised by ``init_model_`` with "normal" and with "hf" (materialisation included)."""
    from transformers import AutoModelForCausalLM

    def from_config():
        return AutoModelForCausalLM.from_config(config), None

    def recipe(scheme: str):
        def build():
            with torch.device("meta"):
                model = AutoModelForCausalLM.from_config(config)
            start = time.perf_counter()
            tinit.init_model_(model, scheme, seed=0, device="cpu")
            return model, time.perf_counter() - start

        return build

    return dict(zip(META_MODES, (from_config, recipe("normal"), recipe("hf")), strict=True))


def _validate_meta(model, std: float, reference: dict | None, what: str) -> dict:
    """``_validate`` plus every norm weight 1 (HF's ``_init_weights``: ``init.ones_``)."""
    values = _validate(model, std, reference, what)
    for name, param in model.named_parameters():
        if name.endswith("norm.weight") and not bool((param.detach() == 1).all()):
            raise AssertionError(f"{what}: {name} is not all ones")
    return values


def _measure_meta(config, repeats: int, label: str) -> dict:
    builds, std = _meta_builds(config), config.initializer_range
    reference, n_params = None, 0
    for mode, build in builds.items():  # validation builds, untimed
        model, _ = build()
        values = _validate_meta(model, std, reference, f"{label} {mode}")
        if mode == "from_config":
            reference = values
        n_params = sum(p.numel() for p in model.parameters())
        del model
        gc.collect()
    times, init_times = {m: [] for m in builds}, {m: [] for m in builds}
    for _ in range(repeats):
        for mode, build in builds.items():
            torch.manual_seed(0)
            start = time.perf_counter()
            model, init_s = build()
            times[mode].append(time.perf_counter() - start)
            if init_s is not None:
                init_times[mode].append(init_s)
            del model
            gc.collect()
    return {
        "model": label,
        "params": n_params,
        "times_s": times,
        "init_model_s": {m: t for m, t in init_times.items() if t},
        "median_s": {m: statistics.median(t) for m, t in times.items()},
        "median_init_model_s": {m: statistics.median(t) for m, t in init_times.items() if t},
    }


def meta_table(rows: list[dict]) -> str:
    hf, normal = META_MODES[2], META_MODES[1]
    lines = [
        "| model | parameters | "
        + " | ".join(f"`{m}`" for m in META_MODES)
        + " | `hf` / `normal` | from_config / `hf` |",
        "| --- | ---: | " + " | ".join("---:" for _ in META_MODES) + " | ---: | ---: |",
    ]
    for r in rows:
        med, init = r["median_s"], r["median_init_model_s"]
        cells = [f"{med['from_config']:.2f} s"] + [
            f"{med[m]:.2f} s (init_model_ {init[m]:.2f} s)" for m in META_MODES[1:]
        ]
        ratios = f"{med[hf] / med[normal]:.2f} | {med['from_config'] / med[hf]:.1f}x"
        lines.append(f"| {r['model']} | {r['params'] / 1e6:.0f} M | " + " | ".join(cells) + f" | {ratios} |")
    return "\n".join(lines)


def _eager_rows(args) -> list[dict]:
    build, std = _llama(args.layers, args.tiny)
    width = "hidden 256, ffn 1024" if args.tiny else "hidden 2048, ffn 8192"
    rows = [_measure(build, std, args.repeats, f"HF LlamaForCausalLM ({width}, {args.layers} layers)")]
    if args.tiny:
        return rows
    try:
        build, std = _timm_vit()
    except Exception as exc:  # noqa: BLE001  recorded in the table instead
        rows.append({"model": "timm vit_base_patch16_224", "skipped": f"timm does not import ({type(exc).__name__})"})
    else:
        rows.append(_measure(build, std, args.repeats, "timm vit_base_patch16_224"))
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("eager", "meta", "all"), default="all", help="which tables (default all)")
    parser.add_argument("--layers", type=int, default=4, help="Llama decoder layers, eager part (default 4)")
    parser.add_argument("--meta-layers", type=int, default=16, help="Llama decoder layers, meta part (16: 1.1 B)")
    parser.add_argument("--tiny", action="store_true", help="hidden 256, ffn 1024, vocab 2048: a smoke run")
    parser.add_argument("--repeats", type=int, default=3, help="timed builds per mode (median)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    load_before = load_average()
    rows = _eager_rows(args) if args.part != "meta" else []
    meta_rows = []
    if args.part != "eager":
        config = _llama_config(args.meta_layers, args.tiny)
        width = f"hidden {config.hidden_size}, ffn {config.intermediate_size}"
        label = f"HF LlamaForCausalLM ({width}, {args.meta_layers} layers)"
        meta_rows.append(_measure_meta(config, args.repeats, label))
    load_after = load_average()
    env = environment()
    env["load_average_1_5_15"] = {"before": load_before, "after": load_after}
    header = (
        f"Construction time on CPU, {args.threads} threads, median of {args.repeats} (allocation and every "
        f"init included); tinit {tinit.__version__} (stream version {tinit.STREAM_VERSION}); load average "
        f"{load_before[0]:.2f} before, {load_after[0]:.2f} after; {env}"
    )
    parts = [header]
    if rows:
        parts.append("Eager builds:\n\n" + table(rows))
    if meta_rows:
        parts.append(
            "Meta build + init_model_ (materialisation included) against HF's from_config:\n\n" + meta_table(meta_rows)
        )
    md = "\n\n".join(parts) + "\n"
    print(md)
    payload = {"threads": args.threads, "rows": rows, "meta_rows": meta_rows}
    write_report(args.out, env, "_construction", md, payload)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
