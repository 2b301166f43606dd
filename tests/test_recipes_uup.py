"""``u_mup`` and its parameter groups against graphcore-research/unit-scaling 0.3.5's own code.

unit-scaling (``pip install --no-deps unit-scaling==0.3.5 einops==0.8.2 tabulate==0.10.0``): the init
is compared with its modules' own (``uu.Linear``, ``uu.LinearReadout``, ``uu.Embedding``,
``uu.LayerNorm``, ``uu.RMSNorm``, ``uu.TransformerDecoder``, built eagerly under a torch seed) per role,
pooled (>= 10^6 samples: std within 1 %, a two-sample KS test, constants exact); the learning rates
and weight decays with ``unit_scaling.optim.scaled_parameters`` and its ``Adam``/``AdamW``/``SGD`` per
parameter, by tensor identity; the residual taus with ``transformer_residual_scaling_rule`` and the
taus ``uu.TransformerStack`` gives its layers.
"""

from __future__ import annotations

import copy
from collections import defaultdict

import pytest
import scipy.stats
import torch
from torch import nn

import tinit
from tinit import schemes

uu = pytest.importorskip(
    "unit_scaling", reason="reference package: pip install --no-deps unit-scaling==0.3.5 einops==0.8.2 tabulate==0.10.0"
)
from unit_scaling.core.functional import transformer_residual_scaling_rule  # noqa: E402 (after the importorskip)

LR, WD, EPS = 2.0**-6, 0.1, 1e-8
MIN_SAMPLES = 10**6
# uu.TransformerDecoder's names that tinit's rules do not read: the fused qkv and the readout are
# classified, the rest are plain linears without a residual role
DECODER_OVERRIDES = {
    r"\.linear_o\.weight$": "attn_out",
    r"\.mlp\.linear_(1|gate)\.weight$": "mlp_in",
    r"\.mlp\.linear_2\.weight$": "mlp_out",
    r"^projection\.weight$": "head",
}


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.input_layernorm = uu.LayerNorm(d, elementwise_affine=True)
        self.self_attn = nn.Module()
        for name in ("q_proj", "k_proj", "v_proj"):
            setattr(self.self_attn, name, uu.Linear(d, d, bias=True))
        self.self_attn.o_proj = uu.Linear(d, d)
        self.post_attention_layernorm = uu.RMSNorm(d, elementwise_affine=True)
        self.mlp = nn.Module()
        self.mlp.gate_proj = uu.Linear(d, 3 * d)
        self.mlp.up_proj = uu.Linear(d, 3 * d)
        self.mlp.down_proj = uu.Linear(3 * d, d, bias=True)


class Tiny(nn.Module):
    """A Llama-named u-μP model of unit-scaling's modules: every MupType, inside and outside the depth stack."""

    def __init__(self, d, n_layers=3, vocab=101):
        super().__init__()
        self.model = nn.Module()
        self.model.embed_tokens = uu.Embedding(vocab, d, padding_idx=0)
        self.model.layers = uu.DepthModuleList([Block(d) for _ in range(n_layers)])
        self.model.norm = uu.LayerNorm(d, elementwise_affine=True)
        self.lm_head = uu.LinearReadout(d, vocab, bias=True)


def _per_param(groups, keys):
    return {id(p): tuple(g.get(k) for k in keys) for g in groups for p in g["params"]}


def _assert_groups_equal(model, reference, ours, keys):
    want, got = _per_param(reference, keys), _per_param(ours, keys)
    names = {id(p): n for n, p in model.named_parameters()}
    assert set(got) == set(want) == set(names)
    for pid, values in want.items():
        assert got[pid] == pytest.approx(values, rel=1e-12), f"{names[pid]}: tinit {got[pid]}, unit-scaling {values}"


REFERENCE_OPTIMIZERS = {
    "adam": (lambda p: uu.optim.Adam(p, lr=LR, weight_decay=WD, eps=EPS), "adam", {}),
    "adamw": (lambda p: uu.optim.AdamW(p, lr=LR, weight_decay=WD, eps=EPS), "adam", {}),
    "sgd": (lambda p: uu.optim.SGD(p, lr=LR, weight_decay=WD), "sgd", {}),
    "sgd-to-output-scale": (
        lambda p: uu.optim.SGD(p, lr=LR, weight_decay=WD, readout_constraint="to_output_scale"),
        "sgd",
        {"readout_constraint": "to_output_scale"},
    ),
}


@pytest.mark.parametrize("which", list(REFERENCE_OPTIMIZERS))
def test_param_groups_match_unit_scaling_optimizers(which):
    """Every parameter's lr and weight decay as unit-scaling's optimisers give it: weights fan_in^-1/2
    (embeddings: the hidden width), the readout 1, norms and biases 1 (SGD to_output_scale: fan_in^1/2 and
    the length), times L^-1/2 inside the DepthModuleList, weight decay divided by the lr."""
    build, optimizer, options = REFERENCE_OPTIMIZERS[which]
    model = Tiny(48, n_layers=3)
    reference = build(model.parameters()).param_groups
    eps = EPS if optimizer == "adam" else None
    ours = tinit.mup_param_groups(
        model, lr=LR, weight_decay=WD, eps=eps, optimizer=optimizer, scheme="u_mup", options=options
    )
    _assert_groups_equal(model, reference, ours, ("lr", "weight_decay") + (("eps",) if eps else ()))
    # the rules that tell the types apart are all exercised: weights of two fan_ins, vectors, the readout,
    # inside and outside the depth stack
    assert len({round(v[0] / LR, 12) for v in _per_param(reference, ("lr",)).values()}) >= 5
    assert (torch.optim.AdamW if optimizer == "adam" else torch.optim.SGD)(ours).param_groups


def test_param_groups_of_the_unit_scaling_decoder():
    """unit-scaling's own TransformerDecoder (fused qkv, SwiGLU, a TransformerStack of 4, the readout): tinit's
    groups equal ``scaled_parameters(lr_scale_func_adam)``'s, with and without independent weight decay, and
    the type tinit reads from each role is the parameter's own ``mup_type``."""
    torch.manual_seed(0)
    model = uu.TransformerDecoder(hidden_size=64, vocab_size=97, layers=4, heads=4)
    for independent in (True, False):
        reference = uu.optim.scaled_parameters(
            model.parameters(),
            uu.optim.lr_scale_func_adam,
            lr=LR,
            weight_decay=WD,
            independent_weight_decay=independent,
        )
        ours = tinit.mup_param_groups(
            model,
            lr=LR,
            weight_decay=WD,
            scheme="u_mup",
            overrides=DECODER_OVERRIDES,
            options={"independent_weight_decay": independent},
        )
        _assert_groups_equal(model, reference, ours, ("lr", "weight_decay"))
    roles = {e.name: e.role for e in tinit.init_model_(copy.deepcopy(model), "u_mup", overrides=DECODER_OVERRIDES)}
    for name, p in model.named_parameters():
        assert schemes.get("u_mup").mup_type(roles[name], tuple(p.shape)) == p.mup_type, name


def _pooled(model, names):
    return torch.cat([model.get_parameter(n).detach().double().flatten() for n in names])


def _compare_init(reference, ours, summary):
    groups = defaultdict(list)
    for entry in summary:
        groups[entry.role].append(entry.name)
    for role, names in groups.items():
        ref, got = _pooled(reference, names), _pooled(ours, names)
        if ref.std() == 0:
            torch.testing.assert_close(got, ref, rtol=0, atol=0, msg=f"{role}: constants differ")
            continue
        assert ref.numel() >= MIN_SAMPLES, f"{role}: {ref.numel()} samples"
        ratio = float(got.square().mean().sqrt() / ref.square().mean().sqrt())
        assert ratio == pytest.approx(1.0, abs=0.01), f"{role}: std ratio tinit/unit-scaling {ratio:.4f}"
        assert scipy.stats.ks_2samp(got.numpy(), ref.numpy()).pvalue > 1e-3, role
        assert got.abs().max() > 4.5, f"{role}: truncated (unit-scaling's nn.init.normal_ is not)"
    return groups


def test_init_matches_unit_scaling_modules():
    """unit-scaling's modules as built: weights, embeddings and the readout N(0, 1) untruncated, the padding
    row 0, norm gains 1 and biases 0."""
    torch.manual_seed(0)
    reference = Tiny(512, n_layers=4, vocab=2048)
    ours = copy.deepcopy(reference)
    with torch.no_grad():
        for p in ours.parameters():
            p.fill_(7.0)  # nothing of the reference's values is left
    summary = tinit.init_model_(ours, "u_mup", seed=5)
    groups = _compare_init(reference, ours, summary)
    assert {"embedding", "attn_q", "attn_out", "mlp_in", "mlp_out", "head", "norm", "bias"} <= set(groups)
    assert ours.model.embed_tokens.weight[0].abs().max() == 0
    assert ours.model.norm.weight.eq(1).all() and ours.lm_head.bias.eq(0).all()


def test_init_matches_the_unit_scaling_decoder_on_meta():
    """uu.TransformerDecoder built on meta and initialised by tinit equals, per role, the one its own
    constructor initialises."""
    torch.manual_seed(0)
    kwargs = {"hidden_size": 512, "vocab_size": 2048, "layers": 4, "heads": 8}
    reference = uu.TransformerDecoder(**kwargs)
    with torch.device("meta"):
        ours = uu.TransformerDecoder(**kwargs)
    summary = tinit.init_model_(ours, "u_mup", seed=6, device="cpu", overrides=DECODER_OVERRIDES)
    groups = _compare_init(reference, ours, summary)
    assert {"embedding", "attn_qkv", "attn_out", "mlp_in", "mlp_out", "head"} <= set(groups)


@pytest.mark.parametrize(
    "n_layers,residual_mult,residual_attn_ratio", [(1, 1.0, 1.0), (4, 1.0, 1.0), (7, 0.5, 2.0), (12, 3.0, 0.25)]
)
def test_residual_taus_match_the_scaling_rule(n_layers, residual_mult, residual_attn_ratio):
    """``multipliers``' taus: ``transformer_residual_scaling_rule`` at branch 2l (attention) and 2l + 1 (MLP) of
    2L, and the mhsa_tau/mlp_tau that uu.TransformerDecoder's TransformerStack gives each of its layers."""
    rule = transformer_residual_scaling_rule(residual_mult, residual_attn_ratio)
    with torch.device("meta"):  # its layers are a TransformerStack
        decoder = uu.TransformerDecoder(hidden_size=8, vocab_size=5, layers=n_layers, heads=2, residual_scaling=rule)
    stack = decoder.layers
    got = schemes.multipliers(
        "u_mup", n_layers=n_layers, residual_mult=residual_mult, residual_attn_ratio=residual_attn_ratio
    )
    want = {}
    for layer, block in enumerate(stack):
        want[f"attn_tau.{layer}"] = block.mhsa_tau
        want[f"mlp_tau.{layer}"] = block.mlp_tau
        assert block.mhsa_tau == rule(2 * layer, 2 * n_layers) and block.mlp_tau == rule(2 * layer + 1, 2 * n_layers)
    assert got == pytest.approx(want, rel=1e-14)


@pytest.mark.parametrize(
    "options,error,match",
    [
        ({"residual_mult": 0.0}, ValueError, "residual_mult"),
        ({"residual_attn_ratio": float("nan")}, ValueError, "residual_attn_ratio"),
        ({"readout_constraint": "to_input_scale"}, ValueError, "readout_constraint"),
        ({"independent_weight_decay": 1}, TypeError, "independent_weight_decay"),
        ({"std": 0.02}, TypeError, "std"),
    ],
    ids=["residual-mult", "attn-ratio", "constraint", "independent-wd", "unknown-option"],
)
def test_bad_options_are_refused_before_anything_is_written(options, error, match):
    model = Tiny(16, n_layers=2)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    with pytest.raises(error, match=match):
        tinit.init_model_(model, "u_mup", seed=1, **options)
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.detach(), before[name], rtol=0, atol=0, msg=f"{name} was written")
    with pytest.raises(error, match=match):
        tinit.mup_param_groups(model, lr=LR, scheme="u_mup", options=options)


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"lr": 0.0}, ValueError, "lr"),
        ({"readout": "multiplier"}, ValueError, "readout"),
        ({"reference": "megatron"}, ValueError, "reference"),
        ({"base_model": {}}, ValueError, "base_model"),
        ({"base_width": 8}, TypeError, "base_width"),
        ({"options": [("residual_mult", 2.0)]}, TypeError, "options"),
        ({"optimizer": "lion"}, ValueError, "optimizer"),
    ],
    ids=["lr-zero", "readout", "reference", "base-model", "base-width", "options-type", "optimizer"],
)
def test_param_groups_bad_input(kwargs, error, match):
    with pytest.raises(error, match=match):
        tinit.mup_param_groups(Tiny(16, n_layers=2), scheme="u_mup", **{"lr": LR, **kwargs})


def test_multipliers_need_the_depth():
    with pytest.raises(ValueError, match="n_layers"):
        schemes.multipliers("u_mup", d_model=64)
    with pytest.raises(ValueError, match="n_layers"):
        schemes.get("u_mup").param_group("attn_q", shape=(8, 8), layer_idx=0)
