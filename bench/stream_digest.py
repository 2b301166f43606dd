"""SHA-256 digests of what tinit writes, through the public API only, to show that a change moved no value.

    python bench/stream_digest.py OUT.json                        # this checkout
    PYTHONPATH=/path/to/other/checkout python bench/stream_digest.py OTHER.json   # another tree, then diff

248 cases: every dtype and mode of ``tinit.trunc_normal_at_`` on contiguous, transposed and
hand-sharded tensors, the seven ``tinit.nn.init`` fills under ``torch.manual_seed``, ``tinit.fill_``
by 9 schemes, every recipe on the toy GPT grouped and one by one, 12 Hugging Face families under
5 recipes built on meta, one grouped fill. Only public names are used, so an older release runs it
too. A case that raises records its error class. Writes {case: digest} as JSON.
"""

import hashlib
import importlib
import json
import math
import sys
import warnings

import torch

import tinit
from tinit import nn as tnn
from tinit.schemes import InitSpec
from tinit.tools import hf_families
from tinit.tools.toy_models import GPT, GPTConfig

warnings.simplefilter("ignore")
out = {}


def h(t):
    if isinstance(t, torch.nn.Module):
        m = hashlib.sha256()
        for k, v in sorted(t.state_dict().items()):
            m.update(k.encode())
            m.update(v.detach().contiguous().view(torch.uint8).numpy().tobytes() if v.numel() else b"")
        return m.hexdigest()[:16]
    return hashlib.sha256(t.detach().contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()[:16]


def rec(key, fn):
    try:
        out[key] = fn()
    except Exception as exc:  # noqa
        out[key] = f"ERR {type(exc).__name__}"


dtypes = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
windows = [
    (0, 0.02, -0.04, 0.04),
    (0, 0.02, -2, 2),
    (0, 1, -math.inf, math.inf),
    (1, 0.5, 3, 5),
    (0, 1, 9, 12),
    (0, 1, -0.001, 0.001),
]
for dt in dtypes:
    for w in windows:

        def f(dt=dt, w=w):
            x = torch.empty(37, 129, dtype=dt)
            tinit.trunc_normal_at_(x, *w, seed=7, stream=3, offset=11)
            return h(x)

        rec(f"at {dt} {w}", f)

        def g(dt=dt, w=w):
            x = torch.empty(129, 37, dtype=dt).t()
            tinit.trunc_normal_at_(x, *w, seed=7, stream=3)
            return h(x)

        rec(f"at-T {dt} {w}", g)

        def s(dt=dt, w=w):
            x = torch.empty(16, 40, dtype=dt)
            tinit.trunc_normal_at_(x, *w, seed=7, global_shape=(64, 80), shard_offsets=(16, 40))
            return h(x)

        rec(f"at-shard {dt} {w}", s)
big = torch.empty(3000, 700).t()
rec("big-T", lambda: (tinit.trunc_normal_at_(big, 0, 0.02, -0.04, 0.04, seed=1), h(big))[1])
for name in tnn.init.KEYED:  # the seven random fills
    for dt in dtypes:

        def f(name=name, dt=dt):
            torch.manual_seed(5)
            x = torch.empty(64, 33, dtype=dt)
            getattr(tnn.init, name)(x)
            return h(x)

        rec(f"nn {name} {dt}", f)

        def g(name=name, dt=dt):
            torch.manual_seed(5)
            x = torch.empty(33, 64, dtype=dt).t()
            getattr(tnn.init, name)(x)
            return h(x)

        rec(f"nn-T {name} {dt}", g)


def tdrop():
    torch.manual_seed(3)
    x = torch.empty(100, 50)
    tinit.trunc_normal_(x, std=0.02)
    return h(x)


rec("trunc_normal_ top", tdrop)
for scheme in [
    "normal",
    "gpt2",
    "megatron",
    "depth_init",
    "xavier_uniform",
    "mup",
    "deepnorm",
    "small_init",
    "lecun_normal",
]:

    def f(scheme=scheme):
        x = torch.empty(96, 64)
        tinit.fill_(x, scheme, name="transformer.h.1.attn.c_proj.weight", n_layers=4, d_model=64, seed=9)
        return h(x)

    rec(f"fill {scheme}", f)
for scheme in sorted(tinit.schemes.SCHEMES):
    for grouped in (True, False):

        def f(scheme=scheme, grouped=grouped):
            torch.manual_seed(0)
            m = GPT(GPTConfig(n_layers=2, d_model=64, n_heads=4, vocab=128, n_ctx=32))
            tinit.init_model_(m, scheme, seed=3, grouped=grouped)
            return h(m)

        rec(f"gpt {scheme} {grouped}", f)
for fam in [
    "gpt2",
    "llama",
    "mixtral",
    "gpt_neox",
    "deepseek_v3",
    "gpt_oss",
    "t5",
    "bert",
    "gemma",
    "llava",
    "phi3",
    "falcon",
]:
    for scheme in ["normal", "depth_init", "xavier_normal", "megatron", "mup"]:

        def f(fam=fam, scheme=scheme):
            m = hf_families.build(fam)
            tinit.init_model_(m, scheme, seed=4, device="cpu")
            return h(m)

        rec(f"hf {fam} {scheme}", f)
wg = getattr(tinit, "write_grouped_", None)
if wg is None:  # tinit 0.2.0 and older
    wg = importlib.import_module("tinit.grouped").write_grouped_


def grp():
    ts = [torch.empty(5, 7), torch.empty(300), torch.empty(64, 64, dtype=torch.bfloat16), torch.empty(3)]
    specs = [
        InitSpec(std=0.02),
        InitSpec(std=0.1, trunc=3.0),
        InitSpec(std=0.05, distribution="uniform", trunc=math.sqrt(3)),
        InitSpec(constant=1.0),
    ]
    wg([(t, s, i + 1, 5) for i, (t, s) in enumerate(zip(ts, specs, strict=True))], seed=11)
    return [h(t) for t in ts]


rec("grouped", grp)
with open(sys.argv[1], "w") as file:
    json.dump(out, file, indent=0, sort_keys=True)
print(len(out), "cases;", sum(1 for v in out.values() if isinstance(v, str) and v.startswith("ERR")), "errors")
