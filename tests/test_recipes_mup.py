"""``mup`` and ``tinit.mup_param_groups`` against microsoft/mup 1.0.0 and Megatron-Core's muP.

mup (``pip install --no-deps mup==1.0.0``): the optimisers' param groups (``mup.optim.MuAdam``,
``MuAdamW``, ``MuSGD`` after ``mup.set_base_shapes``) are compared with tinit's per parameter, by
tensor identity: lr, weight decay and eps. The init is compared with ``mup.init.normal_`` and
``mup.MuReadout(readout_zero_init=True)`` per role, pooled over layers (>= 10^6 samples, within 1 %).
Megatron-Core: its functions vendored in ``reference.megatron_mup`` (Megatron-LM main, d98e8a6).
"""

from __future__ import annotations

import copy
import math
from collections import defaultdict

import pytest
import torch
from reference import megatron_mup
from torch import nn

import tinit
from tinit import schemes

mup = pytest.importorskip("mup", reason="reference package: pip install --no-deps mup==1.0.0")

VOCAB = 97
LR, WD, EPS = 1e-3, 0.1, 1e-8
BASE_STD = 0.02
MIN_SAMPLES = 10**6


class Block(nn.Module):
    def __init__(self, d, gate):
        super().__init__()
        self.input_layernorm = nn.LayerNorm(d)
        self.self_attn = nn.Module()
        for name in ("q_proj", "k_proj", "v_proj"):
            setattr(self.self_attn, name, nn.Linear(d, d, bias=True))
        self.self_attn.o_proj = nn.Linear(d, d, bias=False)
        self.post_attention_layernorm = nn.LayerNorm(d)
        self.mlp = nn.Module()
        self.mlp.gate_proj = nn.Linear(d, 3 * d, bias=False)
        self.mlp.up_proj = nn.Linear(d, 3 * d, bias=False)
        self.mlp.down_proj = nn.Linear(3 * d, d, bias=True)
        if gate:
            self.resweight = nn.Parameter(torch.ones(1))  # a scalar: no width dim


class Tiny(nn.Module):
    """A Llama-named transformer with mup's zero readout (with a bias: a tensor with no width dim)."""

    def __init__(self, d, n_layers=2, vocab=VOCAB, gate=True):
        super().__init__()
        self.model = nn.Module()
        self.model.embed_tokens = nn.Embedding(vocab, d)
        self.model.layers = nn.ModuleList([Block(d, gate) for _ in range(n_layers)])
        self.model.norm = nn.LayerNorm(d)
        self.lm_head = mup.MuReadout(d, vocab, bias=True, readout_zero_init=True)


def _with_base_shapes(width, **kwargs):
    torch.manual_seed(0)
    model = Tiny(width, **kwargs)
    with torch.device("meta"):
        base, delta = Tiny(32, **kwargs), Tiny(64, **kwargs)
    mup.set_base_shapes(model, base, delta=delta)
    return model, base, delta


def _per_param(groups, keys):
    return {id(p): tuple(g.get(k) for k in keys) for g in groups for p in g["params"]}


OPTIMIZERS = {
    "adam": (lambda params: mup.MuAdam(params, lr=LR, weight_decay=WD, eps=EPS), "adam", EPS),
    "adamw": (lambda params: mup.MuAdamW(params, lr=LR, weight_decay=WD, eps=EPS), "adam", EPS),
    "sgd": (lambda params: mup.MuSGD(params, lr=LR, weight_decay=WD), "sgd", None),
}


@pytest.mark.parametrize("shapes", ["roles", "base_model"])
@pytest.mark.parametrize("which", list(OPTIMIZERS))
def test_param_groups_match_mup_optimizers(which, shapes):
    """Every parameter's lr, weight decay (and eps) as MuAdam/MuAdamW/MuSGD give it, width 256 on base 32."""
    build, optimizer, eps = OPTIMIZERS[which]
    model, base, delta = _with_base_shapes(256)
    reference = build(model.parameters()).param_groups
    extra = {"base_model": base, "delta_model": delta} if shapes == "base_model" else {"base_width": 32}
    ours = tinit.mup_param_groups(
        model, lr=LR, optimizer=optimizer, readout="zero_multiplier", weight_decay=WD, eps=eps, **extra
    )
    keys = ("lr", "weight_decay") + (("eps",) if eps is not None else ())
    want, got = _per_param(reference, keys), _per_param(ours, keys)
    names = {id(p): n for n, p in model.named_parameters()}
    assert set(got) == set(want) == set(names)
    for pid, values in want.items():
        assert got[pid] == pytest.approx(values, rel=1e-12), f"{names[pid]}: tinit {got[pid]}, mup {values}"
    # The parameters that tell the rules apart are all there: hidden matrices, vectors, scalars.
    lrs = {round(v[0] / LR, 9) for v in want.values()}
    assert lrs == ({1.0, 1 / 8} if optimizer == "adam" else {1.0, 8.0})
    assert (torch.optim.AdamW if optimizer == "adam" else torch.optim.SGD)(ours).param_groups


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_param_groups_table3_readout(optimizer):
    """readout "zero" (no logit multiplier, TP5 Table 3): the head's lr is lr / m under Adam and SGD, its
    weight decay wd * m; everything else as mup's optimisers, from base shapes or from base_width alike."""
    model, base, delta = _with_base_shapes(256)
    by_width = tinit.mup_param_groups(model, lr=LR, base_width=32, optimizer=optimizer, weight_decay=WD)
    by_shapes = tinit.mup_param_groups(
        model, lr=LR, base_model=base, delta_model=delta, optimizer=optimizer, weight_decay=WD
    )
    keys = ("lr", "weight_decay")
    width, shapes = _per_param(by_width, keys), _per_param(by_shapes, keys)
    assert set(width) == set(shapes)
    for pid, values in shapes.items():
        assert width[pid] == pytest.approx(values, rel=1e-12)
    head = _per_param(by_shapes, keys)[id(model.lm_head.weight)]
    assert head == pytest.approx((LR / 8, WD * 8), rel=1e-12)
    assert schemes.get("mup").lr_multiplier("head", d_model=256, base_width=32, optimizer=optimizer) == 1 / 8


def test_param_groups_megatron():
    """reference="megatron": lr and eps as Megatron-Core's get_mup_config_overrides scales them (weight
    decay unscaled); embeddings and the output layer marked as LanguageModule marks them."""
    model, _, _ = _with_base_shapes(256)
    model.model.embed_tokens.weight.is_embedding_parameter = True
    model.lm_head.weight.is_embedding_parameter = True
    for optimizer in ("adam", "sgd"):
        overrides = megatron_mup.get_mup_config_overrides(
            megatron_mup.OptimizerConfig(lr=LR, adam_eps=EPS), 256 / 32, optimizer
        )
        ours = tinit.mup_param_groups(
            model,
            lr=LR,
            base_width=32,
            optimizer=optimizer,
            readout="multiplier",
            weight_decay=WD,
            eps=EPS,
            reference="megatron",
        )
        got = _per_param(ours, ("lr", "eps", "weight_decay"))
        for name, p in model.named_parameters():
            want = {"max_lr": LR, "eps": EPS}
            for key, override in overrides.items():
                if key.with_name_predicate.fn(p, name):
                    want.update(override)
            assert got[id(p)] == pytest.approx((want["max_lr"], want["eps"], WD), rel=1e-12), name


def _pooled_rms(model, names):
    values = torch.cat([model.get_parameter(n).detach().double().flatten() for n in names])
    return values.numel(), float(values.square().mean().sqrt())


def _compare_init(reference, ours, summary):
    groups = defaultdict(list)
    for entry in summary:
        groups[entry.role].append(entry.name)
    for role, names in groups.items():
        ref = torch.cat([reference.get_parameter(n).detach().flatten() for n in names])
        got = torch.cat([ours.get_parameter(n).detach().flatten() for n in names])
        if ref.std() == 0:
            torch.testing.assert_close(got, ref, rtol=0, atol=0, msg=f"{role}: constants differ")
            continue
        n, ref_rms = _pooled_rms(reference, names)
        assert n >= MIN_SAMPLES, f"{role}: {n} samples"
        ratio = _pooled_rms(ours, names)[1] / ref_rms
        assert ratio == pytest.approx(1.0, abs=0.01), f"{role}: std ratio tinit/reference {ratio:.4f}"
    return groups


def test_init_matches_mup_init():
    """mup's init at width 512 on base 64: ``mup.init.normal_(p, std=0.02)`` on every matrix (hidden ones
    0.02 / sqrt(8), embeddings 0.02), MuReadout's zero readout and bias, norms 1, biases 0."""
    torch.manual_seed(0)
    reference = Tiny(512, n_layers=4, vocab=2048, gate=False)
    with torch.device("meta"):
        base, delta = Tiny(64, n_layers=4, vocab=2048, gate=False), Tiny(128, n_layers=4, vocab=2048, gate=False)
    mup.set_base_shapes(reference, base, delta=delta)
    ours = copy.deepcopy(reference)
    with torch.no_grad():
        for name, p in reference.named_parameters():
            if p.dim() >= 2 and not name.startswith("lm_head"):
                mup.init.normal_(p, std=BASE_STD)
            elif name.endswith("bias") and not name.startswith("lm_head"):
                p.zero_()  # set_base_shapes rescaled nn.Linear's default biases
    summary = tinit.init_model_(ours, "mup", base_width=64, std=BASE_STD, readout="zero_multiplier", seed=7)
    groups = _compare_init(reference, ours, summary)
    assert {"attn_q", "attn_out", "mlp_in", "mlp_out", "embedding", "head"} <= set(groups)
    assert schemes.multipliers("mup", d_model=512, base_width=64, readout="zero_multiplier")["output"] == pytest.approx(
        1 / reference.lm_head.width_mult()
    )


def test_init_depth_matches_megatron():
    """depth=True: Megatron-Core's init_method_normal(std / sqrt(m)) for hidden matrices,
    mup_scaled_init_method_normal(std, L, m) for the output projections, the embedding init for an
    untied output layer (``TransformerConfig.__post_init__`` and ``GPTModel``'s output_layer)."""
    n_layers, width, base_width = 4, 512, 64
    m = width / base_width
    torch.manual_seed(0)
    reference = Tiny(width, n_layers=n_layers, vocab=2048, gate=False)
    ours = copy.deepcopy(reference)
    embedding_init = megatron_mup.init_method_normal(BASE_STD)
    init_method = megatron_mup.init_method_normal(BASE_STD / math.sqrt(m))
    output_layer_init = megatron_mup.mup_scaled_init_method_normal(BASE_STD, n_layers, m)
    with torch.no_grad():
        for name, p in reference.named_parameters():
            if name.endswith("bias"):
                p.zero_()
            elif name.endswith(("o_proj.weight", "down_proj.weight")):
                output_layer_init(p)
            elif name.startswith(("lm_head", "model.embed_tokens")):
                embedding_init(p)
            elif p.dim() >= 2:
                init_method(p)
    summary = tinit.init_model_(
        ours, "mup", base_width=base_width, std=BASE_STD, readout="multiplier", depth=True, seed=8
    )
    groups = _compare_init(reference, ours, summary)
    assert {"attn_out", "mlp_out", "head"} <= set(groups)


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"reference": "maxtext"}, ValueError, "reference"),
        ({"weight_decay": -0.1}, ValueError, "weight_decay"),
        ({"eps": float("nan")}, ValueError, "eps"),
        ({"reference": "megatron", "base_model": {}}, ValueError, "base_model"),
        ({"base_model": 3}, TypeError, "base_model"),
        ({"base_model": {"model.norm.weight": (32,)}}, ValueError, "base shape"),
        ({"readout": "none"}, ValueError, "readout"),
    ],
    ids=["reference", "weight-decay", "eps", "megatron-base", "base-type", "base-missing", "readout"],
)
def test_param_groups_bad_input(kwargs, error, match):
    model = Tiny(64)
    with pytest.raises(error, match=match):
        tinit.mup_param_groups(model, lr=LR, **{"base_width": 32, **kwargs})
