"""``completep`` and ``depth_mup``: init, AdamW groups and multipliers against CompleteP's Table 1.

The oracle is Table 1 of Dey et al., "Don't be lazy: CompleteP enables compute-efficient deep
transformers" (arXiv:2505.01618), columns alpha = 1 and alpha = 1/2, written below per parameter group
of its reference implementation's GPT (EleutherAI/nanoGPT-mup, branch ``completep``,
``GPT.configure_optimizers``: embeddings, hidden LayerNorms, hidden weights, hidden biases, the final
LayerNorm, each selected by name as the reference selects it). The reference's code is not vendored:
the model below has its names and shapes, built here. The init is checked per role against the table's
stds with scipy (KS test, pooled std within 1 %, >= 10^6 samples, untruncated).
"""

from __future__ import annotations

import math
from collections import defaultdict

import pytest
import scipy.stats
import torch
from torch import nn

import tinit
from tinit import schemes

LR, WD, EPS = 1e-3, 0.1, 1e-12
ALPHAS = {"completep": 1.0, "depth_mup": 0.5}
MIN_SAMPLES = 10**6


class Block(nn.Module):
    """nanoGPT's Block with the names and shapes of the reference: ln_1, attn.c_attn/c_proj, ln_2, mlp.c_fc/c_proj."""

    def __init__(self, d):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = nn.Module()
        self.attn.c_attn = nn.Linear(d, 3 * d)
        self.attn.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = nn.Module()
        self.mlp.c_fc = nn.Linear(d, 4 * d)
        self.mlp.c_proj = nn.Linear(4 * d, d)


class GPT(nn.Module):
    """nanoGPT-mup's GPT layout: transformer.wte/wpe/h/ln_f and lm_head, tied to wte as the reference ties it."""

    def __init__(self, d, n_layers, vocab=101, block_size=64, tied=True):
        super().__init__()
        self.transformer = nn.Module()
        self.transformer.wte = nn.Embedding(vocab, d)
        self.transformer.wpe = nn.Embedding(block_size, d)
        self.transformer.h = nn.ModuleList([Block(d) for _ in range(n_layers)])
        self.transformer.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        if tied:
            self.transformer.wte.weight = self.lm_head.weight


def table1(name, alpha, m_n, m_l, eps_scope):
    """(lr, weight decay, eps) of parameter ``name`` by Table 1 (AdamW), grouped as the reference groups it."""
    depth_lr = m_l ** (alpha - 1)
    block_eps = EPS / m_n * m_l**-alpha
    other_eps = block_eps if eps_scope == "all" else EPS
    if name in ("transformer.wte.weight", "transformer.wpe.weight"):  # Embed LR eta_base, weight decay lambda
        return LR, WD, other_eps
    if ".ln_" in name and ".ln_f." not in name:  # Pre-LN LR eta_base m_L^(alpha-1); no decay
        return LR * depth_lr, 0.0, block_eps
    if name.endswith(("c_attn.weight", "c_fc.weight", "c_proj.weight")):  # Hidden LR and WD
        return LR * depth_lr / m_n, WD * m_n, block_eps
    if name.endswith(("c_attn.bias", "c_fc.bias", "c_proj.bias")):  # Hidden Bias LR; no decay
        return LR * depth_lr, 0.0, block_eps
    if ".ln_f." in name:  # Final-LN LR eta_base; no decay
        return LR, 0.0, other_eps
    raise AssertionError(f"no Table 1 row for {name}")


@pytest.mark.parametrize("eps_scope", ["blocks", "all"])
@pytest.mark.parametrize("scheme", list(ALPHAS))
@pytest.mark.parametrize(
    "width,base_width,depth,base_depth", [(256, 64, 8, 2), (128, 128, 6, 3), (96, 32, 4, 1), (64, 256, 3, 6)]
)
def test_param_groups_match_table1(scheme, eps_scope, width, base_width, depth, base_depth):
    """Every parameter's lr, weight decay and eps: Table 1's AdamW column alpha, m_N = width / base_width and
    m_L = depth / base_depth, in the reference's groups; eps_scope "all" scales every group's eps as the
    reference's configure_optimizers scales the optimiser's."""
    alpha, m_n, m_l = ALPHAS[scheme], width / base_width, depth / base_depth
    model = GPT(width, depth)
    groups = tinit.mup_param_groups(
        model,
        lr=LR,
        weight_decay=WD,
        eps=EPS,
        scheme=scheme,
        base_width=base_width,
        options={"base_depth": base_depth, "eps_scope": eps_scope},
    )
    got = {id(p): (g["lr"], g["weight_decay"], g["eps"]) for g in groups for p in g["params"]}
    seen = set()
    for name, p in model.named_parameters():  # the tied lm_head is wte: listed once, as the reference's group
        want = table1(name, alpha, m_n, m_l, eps_scope)
        assert got[id(p)] == pytest.approx(want, rel=1e-12), f"{name}: tinit {got[id(p)]}, Table 1 {want}"
        seen.add(id(p))
    assert seen == set(got)
    assert torch.optim.AdamW(groups).param_groups


def test_untied_head_and_the_blocks_counted_per_tower():
    """An untied head (absent from the reference) is an unembedding: lr eta and weight decay lambda, as the
    embedding; L is counted from the blocks when n_layers is not given, and n_layers overrides it."""
    model = GPT(64, 6, tied=False)
    for n_layers, m_l in ((None, 6 / 2), (12, 12 / 2)):
        groups = tinit.mup_param_groups(
            model, lr=LR, weight_decay=WD, eps=EPS, scheme="completep", n_layers=n_layers, options={"base_depth": 2}
        )
        got = {n: (g["lr"], g["weight_decay"], g["eps"]) for g in groups for n in g["names"]}
        assert got["lm_head.weight"] == pytest.approx((LR, WD, EPS))
        assert got["transformer.h.0.ln_1.weight"] == pytest.approx((LR, 0.0, EPS / m_l))


@pytest.mark.parametrize("scheme", list(ALPHAS))
def test_multipliers_match_table1(scheme):
    """The residual branch multiplier m_L^-alpha (Table 1's MHA and MLP residuals) and the unembedding's
    forward multiplier m_N^-1."""
    alpha = ALPHAS[scheme]
    got = schemes.multipliers(scheme, n_layers=24, d_model=1024, base_width=256, base_depth=3)
    assert got == pytest.approx({"width_mult": 4.0, "depth_mult": 8.0, "branch": 8.0**-alpha, "output": 0.25})
    assert schemes.multipliers(scheme, n_layers=16)["branch"] == pytest.approx(16.0**-alpha)


def _pooled(model, names):
    return torch.cat([model.get_parameter(n).detach().double().flatten() for n in names])


@pytest.mark.parametrize("scheme", list(ALPHAS))
def test_init_matches_table1(scheme):
    """Embed and Unembed N(0, sigma^2), Hidden N(0, sigma^2 / m_N), LayerNorms 1 and 0, biases 0; no depth
    factor (Table 1's init variances have no m_L)."""
    width, base_width, sigma = 512, 128, 0.03
    stds = {"embedding": sigma, "head": sigma, "attn_qkv": sigma / 2, "attn_out": sigma / 2}
    stds.update(mlp_in=sigma / 2, mlp_out=sigma / 2)
    model = GPT(width, 4, vocab=2048, tied=False)
    summary = tinit.init_model_(model, scheme, seed=2, std=sigma, base_width=base_width, base_depth=1)
    by_role = defaultdict(list)
    for entry in summary:
        by_role[entry.role].append(entry.name)
    assert _pooled(model, by_role["norm"]).eq(1).all() and _pooled(model, by_role["bias"]).eq(0).all()
    for role, std in stds.items():
        values = _pooled(model, by_role[role])
        assert values.numel() >= MIN_SAMPLES, role
        assert float(values.square().mean().sqrt()) / std == pytest.approx(1.0, abs=0.01), role
        assert scipy.stats.kstest(values.numpy() / std, "norm").pvalue > 1e-3, role
        assert values.abs().max() > 4.5 * std, f"{role}: truncated (the reference's normal_ is not)"
    chosen = schemes.get(scheme)
    for role, shape in (("attn_out", (width, width)), ("mlp_out", (width, 4 * width)), ("embedding", (2048, width))):
        specs = {
            chosen.spec(role=role, shape=shape, d_model=width, n_layers=n, layer_idx=n - 1, base_depth=b, std=sigma)
            for n, b in ((1, 1), (4, 1), (48, 3))
        }
        assert len(specs) == 1, (role, specs)


@pytest.mark.parametrize("scheme", list(ALPHAS))
@pytest.mark.parametrize(
    "options,error,match",
    [
        ({"base_depth": 0}, ValueError, "base_depth"),
        ({"base_width": -1}, ValueError, "base_width"),
        ({"std": math.inf}, ValueError, "std"),
        ({"eps_scope": "embeddings"}, ValueError, "eps_scope"),
        ({"alpha": 0.75}, TypeError, "alpha"),
    ],
    ids=["base-depth", "base-width", "std", "eps-scope", "unknown-option"],
)
def test_bad_options_are_refused_before_anything_is_written(scheme, options, error, match):
    model = GPT(16, 2)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    with pytest.raises(error, match=match):
        tinit.init_model_(model, scheme, seed=1, **options)
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.detach(), before[name], rtol=0, atol=0, msg=f"{name} was written")
    with pytest.raises(error, match=match):
        tinit.mup_param_groups(model, lr=LR, eps=EPS, scheme=scheme, options=options)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"optimizer": "sgd"}, "optimizer"),
        ({"eps": None}, "eps"),
        ({"readout": "zero_multiplier"}, "readout"),
        ({"delta_model": {}}, "delta_model"),
    ],
    ids=["sgd", "no-eps", "readout", "delta-model"],
)
def test_param_groups_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        tinit.mup_param_groups(GPT(16, 2), scheme="completep", **{"lr": LR, "eps": EPS, **kwargs})


def test_multipliers_need_the_depth():
    with pytest.raises(ValueError, match="n_layers"):
        schemes.multipliers("completep", d_model=64)
    with pytest.raises(ValueError, match="n_layers"):
        schemes.get("depth_mup").param_group("attn_q", layer_idx=0, eps=EPS)
