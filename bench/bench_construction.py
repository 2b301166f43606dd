"""Model construction time with and without ``tinit.patch_torch_init``, side by side in one process.

    python bench/bench_construction.py                 # Llama (1 B shapes, 4 layers), timm ViT-B if timm imports
    python bench/bench_construction.py --layers 2 --repeats 1          # a smoke run

Each case builds the model eagerly on the CPU, allocation and every init
included: ``LlamaForCausalLM(config)`` (transformers: ``nn.Linear`` and
``nn.Embedding`` fill in their constructors, then the model's
``_init_weights`` redraws them through ``transformers.initialization``) and
``timm.create_model("vit_base_patch16_224", pretrained=False)``, under
torch's own ``torch.nn.init``, under ``patch_torch_init()`` (keys from
torch's RNG) and under ``patch_torch_init(seed=0)`` (keys from the call
counter). The modes alternate within each repeat so that the machine's load
falls on all of them alike; the figure is the median of --repeats builds.
The first build of each mode is validated before any is timed: every
parameter finite, the attention and MLP weights' std within 3 % of the
config's ``initializer_range`` (HF's ``_init_weights``), and the patched
weights not torch's. Prints a markdown table and writes it with JSON
(machine, versions, commit, load average) under bench/results/.
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


def _llama(layers: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        hidden_size=2048,
        intermediate_size=8192,
        num_hidden_layers=layers,
        num_attention_heads=32,
        num_key_value_heads=8,
        vocab_size=32000,
        tie_word_embeddings=False,
    )
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=4, help="Llama decoder layers (default 4)")
    parser.add_argument("--repeats", type=int, default=3, help="timed builds per mode (median)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    load_before = load_average()
    build, std = _llama(args.layers)
    rows = [_measure(build, std, args.repeats, f"HF LlamaForCausalLM (hidden 2048, ffn 8192, {args.layers} layers)")]
    try:
        build, std = _timm_vit()
    except Exception as exc:  # noqa: BLE001  recorded in the table instead
        rows.append({"model": "timm vit_base_patch16_224", "skipped": f"timm does not import ({type(exc).__name__})"})
    else:
        rows.append(_measure(build, std, args.repeats, "timm vit_base_patch16_224"))
    load_after = load_average()
    env = environment()
    env["load_average_1_5_15"] = {"before": load_before, "after": load_after}
    header = (
        f"Construction time, eager on CPU, {args.threads} threads, median of {args.repeats} (allocation and every "
        f"init included); tinit {tinit.__version__} (stream version {tinit.STREAM_VERSION}); load average "
        f"{load_before[0]:.2f} before, {load_after[0]:.2f} after; {env}"
    )
    md = f"{header}\n\n{table(rows)}\n"
    print(md)
    write_report(args.out, env, "_construction", md, {"threads": args.threads, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
