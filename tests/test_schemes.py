"""The scheme registry (tinit.schemes): every recipe's std per role against its published formula.

Expected values are written from the formulas of the cited papers and codebases
(see each scheme's docstring), not computed by tinit.
"""

from __future__ import annotations

import math

import pytest
import scipy.stats
import torch

import tinit
from tinit import schemes, write_spec_

D, F, L, LAYER, V, KV = 768, 3072, 12, 3, 1000, 256
SHAPES = {  # nn.Linear layout (out, in); GQA key/value of width 256
    "embedding": (V, D),
    "attn_q": (D, D),
    "attn_k": (KV, D),
    "attn_v": (KV, D),
    "attn_qkv": (3 * D, D),
    "attn_out": (D, D),
    "mlp_in": (F, D),
    "mlp_out": (D, F),
    "head": (V, D),
    "norm": (D,),
    "bias": (D,),
    "residual_gate": (1,),
    "mlp_up": (F, D),
    "router": (8, D),
}
BETA = (8 * L) ** -0.25  # DeepNorm, decoder-only, L = 12
SMALL = math.sqrt(2 / (5 * D))
INF = math.inf
TRUNC2 = scipy.stats.truncnorm.std(-2, 2)  # JAX's .87962566103423978: lecun_normal divides by it
DEPTH = 0.02 / math.sqrt(2 * (LAYER + 1))  # torchtitan depth_scaled_std(0.02, layer_id)

# (scheme, options, role, expected parent std, expected trunc); a None trunc means "constant std" value.
CASES = [
    ("normal", {}, "embedding", 0.02, INF),
    ("normal", {}, "attn_out", 0.02, INF),
    ("normal", {"std": 0.01}, "head", 0.01, INF),
    ("gpt2", {}, "attn_qkv", 0.02, INF),
    ("gpt2", {}, "mlp_in", 0.02, INF),
    ("gpt2", {}, "embedding", 0.02, INF),
    ("gpt2", {}, "attn_out", 0.02 / math.sqrt(2 * L), INF),
    ("gpt2", {}, "mlp_out", 0.02 / math.sqrt(2 * L), INF),
    ("megatron", {}, "mlp_out", 0.02 / math.sqrt(2 * L), INF),
    ("megatron", {"multiplier": 1.0}, "attn_out", 0.02 / math.sqrt(L), INF),
    ("depth_init", {}, "attn_q", 0.02, 2 / 0.02),  # torchtitan trunc_normal_'s absolute +-2
    ("depth_init", {}, "attn_qkv", 0.02, 2 / 0.02),
    ("depth_init", {}, "mlp_in", 0.02, 2 / 0.02),
    ("depth_init", {}, "attn_out", DEPTH, 2 / DEPTH),
    ("depth_init", {}, "mlp_out", DEPTH, 2 / DEPTH),
    ("depth_init", {}, "mlp_up", DEPTH, 2 / DEPTH),  # torchtitan's w3
    ("depth_init", {}, "router", DEPTH, 2 / DEPTH),  # DeepSeek-V3 gate_param_init=depth_init(layer_id)
    ("depth_init", {}, "embedding", 1.0, INF),  # nn.init.normal_(std=1.0)
    ("depth_init", {}, "head", D**-0.5, 3),  # +-3 s
    ("depth_init", {"embedding_std": 0.5, "head_std": 0.1}, "embedding", 0.5, INF),
    ("depth_init", {"embedding_std": 0.5, "head_std": 0.1}, "head", 0.1, 3),
    ("depth_init", {"trunc": 3.0, "variance_preserving": False}, "attn_out", DEPTH, 3),
    ("depth_init", {"trunc": 3.0}, "attn_out", DEPTH / scipy.stats.truncnorm.std(-3, 3), 3),
    ("xavier_normal", {}, "attn_q", math.sqrt(2 / (D + D)), INF),
    ("xavier_normal", {}, "attn_k", math.sqrt(2 / (D + KV)), INF),
    ("xavier_normal", {}, "attn_qkv", math.sqrt(2 / (D + D)), INF),  # fan_out of one of q, k, v
    ("xavier_normal", {}, "mlp_out", math.sqrt(2 / (F + D)), INF),
    ("xavier_normal", {"gain": 2.0}, "embedding", 2 * math.sqrt(2 / (V + D)), INF),
    ("kaiming_normal", {}, "attn_q", math.sqrt(2) / math.sqrt(D), INF),
    ("kaiming_normal", {}, "mlp_out", math.sqrt(2) / math.sqrt(F), INF),
    ("kaiming_normal", {"mode": "fan_out"}, "mlp_in", math.sqrt(2) / math.sqrt(F), INF),
    ("kaiming_normal", {"mode": "fan_out"}, "attn_k", math.sqrt(2) / math.sqrt(KV), INF),
    ("lecun_normal", {}, "attn_v", 1 / math.sqrt(D) / TRUNC2, 2),
    ("lecun_normal", {}, "mlp_out", 1 / math.sqrt(F) / TRUNC2, 2),
    ("small_init", {}, "attn_q", SMALL, INF),
    ("small_init", {}, "mlp_out", SMALL, INF),
    ("small_init", {}, "embedding", SMALL, INF),
    ("wang_init", {}, "mlp_in", SMALL, INF),
    ("wang_init", {}, "attn_out", 2 / (L * math.sqrt(D)), INF),
    ("wang_init", {}, "mlp_out", 2 / (L * math.sqrt(D)), INF),
    ("lecun_normal", {"variance_preserving": False}, "attn_q", 1 / math.sqrt(D), 2),
    ("lecun_normal", {"trunc": INF}, "attn_q", 1 / math.sqrt(D), INF),
    ("lecun_normal", {"d_head": 64}, "attn_q", 1 / math.sqrt(D * 64) / TRUNC2, 2),  # T5X's query_init
    ("lecun_normal", {"d_head": 64}, "attn_k", 1 / math.sqrt(D) / TRUNC2, 2),
    ("normal", {"trunc": 2.0}, "attn_q", 0.02 / TRUNC2, 2),  # truncating an untruncated reference keeps its std
    ("normal", {"trunc": 2.0, "variance_preserving": False}, "attn_q", 0.02, 2),
    ("gpt2", {"trunc": 3.0}, "attn_out", 0.02 / math.sqrt(2 * L) / scipy.stats.truncnorm.std(-3, 3), 3),
    ("mitchell", {"trunc": 2.0}, "attn_q", 1 / math.sqrt(D), 2),  # a truncated reference: not rescaled
    ("mitchell", {}, "embedding", 1 / math.sqrt(D), 3),
    ("mitchell", {}, "attn_qkv", 1 / math.sqrt(D), 3),
    ("mitchell", {}, "mlp_in", 1 / math.sqrt(D), 3),
    ("mitchell", {}, "head", 1 / math.sqrt(D), 3),
    ("mitchell", {}, "attn_out", 1 / math.sqrt(2 * D * (LAYER + 1)), 3),
    ("mitchell", {}, "mlp_out", 1 / math.sqrt(2 * F * (LAYER + 1)), 3),
    ("modern", {}, "embedding", 0.02, 3),
    ("modern", {}, "attn_q", SMALL, 3),
    ("modern", {}, "mlp_in", SMALL, 3),
    ("modern", {}, "head", SMALL, 3),
    ("modern", {}, "attn_out", SMALL / math.sqrt(2 * L), 3),
    ("modern", {}, "mlp_out", SMALL / math.sqrt(2 * L), 3),
    ("modern", {"base": "inv_sqrt_d"}, "attn_k", 1 / math.sqrt(D), 3),
    ("modern", {"base": "inv_sqrt_d"}, "mlp_out", 1 / math.sqrt(D) / math.sqrt(2 * L), 3),
    ("modern", {"trunc": 2.0}, "attn_q", SMALL, 2),
    ("olmo_llama", {}, "attn_q", 0.02, 3),
    ("olmo_llama", {}, "attn_qkv", 0.02, 3),
    ("olmo_llama", {}, "mlp_in", 0.02, 3),
    ("olmo_llama", {}, "mlp_up", 0.02 / math.sqrt(2 * L), 3),
    ("olmo_llama", {}, "mlp_out", 0.02 / math.sqrt(2 * L), 3),
    ("olmo_llama", {}, "attn_out", 0.02 / math.sqrt(2 * L), 3),
    ("olmo_llama", {}, "router", 0.02 / math.sqrt(2 * L), 3),
    ("olmo_llama", {}, "embedding", 1.0, INF),
    ("olmo_llama", {}, "head", D**-0.5, 3),
    ("olmo_llama_depth", {}, "attn_k", 0.02, 3),
    ("olmo_llama_depth", {}, "mlp_up", DEPTH, 3),
    ("olmo_llama_depth", {}, "mlp_out", DEPTH, 3),
    ("olmo_llama_depth", {}, "attn_out", DEPTH, 3),
    ("olmo_fan_in", {}, "attn_q", D**-0.5, 3),
    ("olmo_fan_in", {}, "mlp_out", F**-0.5, 3),
    ("olmo_fan_in", {}, "mlp_up", D**-0.5, 3),
    ("olmo_fan_in", {}, "embedding", 1.0, INF),
    ("olmo_fan_in", {"embed_scale": 4.0}, "embedding", 0.25, INF),
    ("olmo_fan_in", {}, "head", D**-0.5, 3),
    ("olmo_normalized", {}, "embedding", D**-0.5, INF),
    ("olmo_normalized", {}, "mlp_up", D**-0.5, 3),
    ("olmo_normalized", {}, "mlp_out", D**-0.5 / math.sqrt(2 * L), 3),
    ("olmo_normalized", {}, "attn_out", D**-0.5 / math.sqrt(2 * L), 3),
    ("olmo_full_megatron", {}, "embedding", 0.02, 3),
    ("olmo_full_megatron", {"embedding_std": 0.5}, "embedding", 0.5, 3),
    ("olmo_full_megatron", {}, "attn_qkv", 0.02, 3),
    ("olmo_full_megatron", {}, "mlp_in", 0.02, 3),
    ("olmo_full_megatron", {}, "attn_out", 0.02 / math.sqrt(2 * L), 3),
    ("olmo_full_megatron", {}, "mlp_out", 0.02 / math.sqrt(2 * L), 3),
    ("olmo_full_megatron", {}, "head", D**-0.5, 3),
    ("t5", {"d_kv": 64}, "attn_q", (D * 64) ** -0.5, INF),
    ("t5", {}, "attn_k", D**-0.5, INF),
    ("t5", {}, "attn_v", D**-0.5, INF),
    ("t5", {}, "attn_out", D**-0.5, INF),  # (h * d_kv)^-1/2, its fan_in
    ("t5", {}, "mlp_in", D**-0.5, INF),
    ("t5", {}, "mlp_out", F**-0.5, INF),
    ("t5", {}, "embedding", 1.0, INF),
    ("t5", {}, "head", 1.0, INF),
    ("t5", {"factor": 2.0}, "mlp_out", 2 * F**-0.5, INF),
    ("modded_nanogpt", {}, "head", 0.005, INF),
    ("modded_nanogpt", {}, "embedding", 0.005, INF),
    ("modded_nanogpt", {"variant": "2025-08"}, "embedding", 1.0, INF),
    ("deepnorm", {}, "attn_q", math.sqrt(2 / (D + D)), math.inf),
    ("deepnorm", {}, "attn_k", math.sqrt(2 / (D + KV)), math.inf),
    ("deepnorm", {}, "attn_v", BETA * math.sqrt(2 / (D + KV)), math.inf),
    ("deepnorm", {}, "attn_out", BETA * math.sqrt(2 / (D + D)), math.inf),
    ("deepnorm", {}, "mlp_in", BETA * math.sqrt(2 / (D + F)), math.inf),
    ("deepnorm", {}, "mlp_out", BETA * math.sqrt(2 / (F + D)), math.inf),
    ("deepnorm", {}, "embedding", D**-0.5, math.inf),
    ("deepnorm", {}, "head", D**-0.5, math.inf),
    ("rezero", {}, "attn_q", 0.02, INF),
    ("rezero", {"base": "xavier_normal"}, "mlp_in", math.sqrt(2 / (D + F)), INF),
    ("rezero", {"base": "modern"}, "attn_out", SMALL / math.sqrt(2 * L), 3),
    ("fixup", {"form": "paper"}, "attn_q", math.sqrt(2 / D) * (2 * L) ** -0.5, math.inf),
    ("fixup", {"form": "paper"}, "mlp_in", math.sqrt(2 / D) * (2 * L) ** -0.5, math.inf),
    ("fixup", {"form": "paper", "m": 3}, "attn_v", math.sqrt(2 / D) * (2 * L) ** -0.25, math.inf),
    ("fixup", {}, "embedding", D**-0.5, math.inf),
    ("mup", {"base_width": 256}, "embedding", 0.02, math.inf),
    ("mup", {"base_width": 256}, "attn_q", 0.02 / math.sqrt(D / 256), math.inf),
    ("mup", {"base_width": 256}, "mlp_out", 0.02 / math.sqrt(D / 256), math.inf),
    ("mup", {"base_width": 256, "readout": "scaled"}, "head", 0.02 / (D / 256), math.inf),
    ("mup", {"base_width": 256, "readout": "multiplier"}, "head", 0.02, math.inf),
    ("mup", {}, "attn_out", 0.02, math.inf),
]
CONSTANTS = [
    ("normal", {}, "norm", 1.0),
    ("normal", {}, "bias", 0.0),
    ("gpt2", {}, "residual_gate", 1.0),
    ("xavier_uniform", {}, "norm", 1.0),
    ("deepnorm", {}, "bias", 0.0),
    ("rezero", {}, "residual_gate", 0.0),
    ("rezero", {}, "norm", 1.0),
    ("fixup", {}, "attn_out", 0.0),
    ("fixup", {}, "mlp_out", 0.0),
    ("fixup", {}, "head", 0.0),
    ("fixup", {}, "residual_gate", 1.0),
    ("mup", {"base_width": 256}, "head", 0.0),
    ("t5", {"factor": 2.0}, "norm", 2.0),
    ("modded_nanogpt", {}, "mlp_out", 0.0),
    ("modded_nanogpt", {"variant": "2025-08"}, "attn_out", 0.0),
    ("modded_nanogpt", {"variant": "2025-08"}, "head", 0.0),
    ("olmo_llama", {}, "norm", 1.0),
]


def _spec(scheme, role, **options):
    return schemes.get(scheme).spec(role=role, layer_idx=LAYER, n_layers=L, d_model=D, shape=SHAPES[role], **options)


@pytest.mark.parametrize(
    "scheme,options,role,std,trunc", CASES, ids=[f"{c[0]}-{c[2]}-{i}" for i, c in enumerate(CASES)]
)
def test_std_per_role(scheme, options, role, std, trunc):
    spec = _spec(scheme, role, **options)
    assert spec.constant is None and spec.parts is None and spec.distribution == "trunc_normal"
    assert spec.std == pytest.approx(std, rel=1e-12), f"{scheme} {role}: std {spec.std}, formula {std}"
    assert spec.trunc == pytest.approx(trunc, rel=1e-12)
    if math.isfinite(trunc):
        assert spec.bounds == pytest.approx((-trunc * spec.std, trunc * spec.std))


@pytest.mark.parametrize("scheme,options,role,value", CONSTANTS, ids=[f"{c[0]}-{c[2]}" for c in CONSTANTS])
def test_constants(scheme, options, role, value):
    assert _spec(scheme, role, **options).constant == value


@pytest.mark.parametrize(
    "scheme,role,options,std",
    [
        ("xavier_uniform", "attn_q", {}, math.sqrt(6 / (D + D)) / math.sqrt(3)),
        ("xavier_uniform", "mlp_in", {"gain": 0.5}, 0.5 * math.sqrt(6 / (D + F)) / math.sqrt(3)),
        ("kaiming_uniform", "mlp_out", {}, math.sqrt(2) * math.sqrt(3 / F) / math.sqrt(3)),
        ("kaiming_uniform", "mlp_out", {"gain": 3**-0.5}, (1 / math.sqrt(F)) / math.sqrt(3)),  # nn.Linear default
        ("modded_nanogpt", "attn_q", {}, 0.5 * D**-0.5),  # U(-sqrt(3) s, sqrt(3) s), s = 0.5 d^-1/2
        ("modded_nanogpt", "attn_out", {}, 0.5 * D**-0.5),
        ("modded_nanogpt", "mlp_in", {"variant": "2025-08"}, 0.5 * D**-0.5),
    ],
)
def test_uniform_schemes(scheme, role, options, std):
    spec = _spec(scheme, role, **options)
    assert spec.distribution == "uniform"
    assert spec.std == pytest.approx(std, rel=1e-12)
    assert spec.bounds[1] == pytest.approx(std * math.sqrt(3), rel=1e-12)


def test_layout_conv1d():
    """HF Conv1D weights are (in, out): the fans swap with the layout, the shape alone would mislead."""
    lecun = schemes.get("lecun_normal")  # realised std: JAX's variance_scaling rescales its +-2 std draw
    assert lecun.spec(role="mlp_in", shape=(D, F), layout="in_out").realised_std == pytest.approx(1 / math.sqrt(D))
    assert lecun.spec(role="mlp_in", shape=(D, F)).realised_std == pytest.approx(1 / math.sqrt(F))
    assert lecun.spec(role="mlp_in", shape=(D, F), fan_in=4096, fan_out=D).realised_std == pytest.approx(1 / 64)


def test_lecun_normal_query_scaling_on_a_fused_qkv():
    """T5X's query_init on a fused q/k/v: only the q rows take 1/sqrt(d_head)."""
    spec = _spec("lecun_normal", "attn_qkv", d_head=64)
    assert [p.std for p in spec.parts] == pytest.approx([x / math.sqrt(D) / TRUNC2 for x in (1 / 8, 1, 1)])
    with pytest.raises(ValueError, match="d_head"):
        _spec("lecun_normal", "attn_q", d_head=0)


def test_deepnorm_fused_qkv_parts():
    for layout, shape, split in (("out_in", (3 * D, D), 0), ("in_out", (D, 3 * D), 1)):
        spec = schemes.get("deepnorm").spec(role="attn_qkv", n_layers=L, shape=shape, layout=layout)
        assert spec.split_dim == split
        xavier = math.sqrt(2 / (D + D))
        assert [p.std for p in spec.parts] == pytest.approx([xavier, xavier, BETA * xavier])
        assert spec.realised_std == pytest.approx(math.sqrt((2 * xavier**2 + (BETA * xavier) ** 2) / 3))


# The design document's table (shared/seeds/003): alpha = (2L)^(1/4), beta = (8L)^(-1/4), 1/sqrt(2L).
DEEPNORM_TABLE = [
    (12, 2.213, 0.319, 0.204),
    (32, 2.828, 0.250, 0.125),
    (80, 3.557, 0.199, 0.079),
    (200, 4.472, 0.158, 0.050),
    (1000, 6.687, 0.106, 0.022),
]


@pytest.mark.parametrize("n_layers,alpha,beta,megatron", DEEPNORM_TABLE, ids=[str(r[0]) for r in DEEPNORM_TABLE])
def test_deepnorm_decoder_only_table(n_layers, alpha, beta, megatron):
    got = schemes.multipliers("deepnorm", n_layers=n_layers)
    assert round(got["residual_alpha"], 3) == alpha
    assert round(got["beta"], 3) == beta
    spec = schemes.get("deepnorm").spec(role="attn_out", n_layers=n_layers, shape=(D, D))
    assert round(spec.std / math.sqrt(2 / (D + D)), 3) == beta
    gpt2 = schemes.get("gpt2").spec(role="attn_out", n_layers=n_layers, shape=(D, D), std=1.0)
    assert round(gpt2.std, 3) == megatron


@pytest.mark.parametrize("n,m", [(6, 6), (18, 18), (100, 100), (12, 6)])
def test_deepnorm_encoder_decoder_constants(n, m):
    """Wang et al. 2022, Figure 2: encoder 0.81 (N^4 M)^(1/16), 0.87 (N^4 M)^(-1/16);
    decoder (3M)^(1/4), (12M)^(-1/4)."""
    got = schemes.multipliers("deepnorm", encoder_layers=n, decoder_layers=m)
    assert got["encoder_residual_alpha"] == pytest.approx(0.81 * (n**4 * m) ** (1 / 16))
    assert got["encoder_beta"] == pytest.approx(0.87 * (n**4 * m) ** (-1 / 16))
    assert got["decoder_residual_alpha"] == pytest.approx((3 * m) ** 0.25)
    assert got["decoder_beta"] == pytest.approx((12 * m) ** -0.25)
    # Not the single-stack constants the design document lists for encoder-decoder models.
    assert got["encoder_residual_alpha"] != pytest.approx((2 * n) ** 0.25, rel=1e-3)
    assert got["decoder_beta"] != pytest.approx((8 * m) ** -0.25, rel=1e-3)
    for stack in ("encoder", "decoder"):
        spec = schemes.get("deepnorm").spec(
            role="mlp_in", shape=(F, D), stack=stack, encoder_layers=n, decoder_layers=m
        )
        assert spec.std == pytest.approx(got[f"{stack}_beta"] * math.sqrt(2 / (D + F)))


def test_deepnorm_encoder_decoder_numbers():
    """6L-6L, written out: 0.81 * 7776^(1/16) = 1.418, 0.87 / 7776^(1/16) = 0.497, 18^(1/4) = 2.060,
    72^(-1/4) = 0.343."""
    got = schemes.multipliers("deepnorm", encoder_layers=6, decoder_layers=6)
    assert [
        round(got[k], 3) for k in ("encoder_residual_alpha", "encoder_beta", "decoder_residual_alpha", "decoder_beta")
    ] == [1.418, 0.497, 2.060, 0.343]


def test_mup_zero_query():
    assert _spec("mup", "attn_q", zero_query=True).constant == 0.0
    fused = _spec("mup", "attn_qkv", zero_query=True, base_width=256)
    assert fused.parts[0].constant == 0.0
    assert [p.std for p in fused.parts[1:]] == pytest.approx([0.02 / math.sqrt(3)] * 2)
    values = write_spec_(
        torch.empty(3 * 64, 64), schemes.get("mup").spec(role="attn_qkv", shape=(192, 64), zero_query=True), seed=1
    )
    assert (values[:64] == 0).all() and (values[64:] != 0).all()


def test_multipliers():
    assert schemes.multipliers("gpt2", n_layers=12) == {}
    assert schemes.multipliers("mup", d_model=1024, base_width=256, readout="multiplier") == {
        "width_mult": 4.0,
        "output": 0.25,
    }
    assert schemes.multipliers("mup", d_model=1024, base_width=256)["output"] == 1.0
    assert schemes.multipliers("rezero", base="deepnorm", n_layers=80)["residual_alpha"] == pytest.approx(160**0.25)
    assert schemes.multipliers("deepnorm", n_layers=6, stack="decoder", encoder_layers=6, decoder_layers=6)[
        "residual_alpha"
    ] == pytest.approx(18**0.25)


@pytest.mark.parametrize(
    "optimizer,expected",
    [
        ("adam", {"embedding": 1, "attn_q": 1 / 4, "mlp_out": 1 / 4, "head": 1 / 4, "norm": 1, "bias": 1}),
        ("sgd", {"embedding": 4, "attn_q": 1, "mlp_out": 1, "head": 1 / 4, "norm": 4, "bias": 4}),
    ],
)
def test_mup_lr_multipliers(optimizer, expected):
    """TP5 Table 3 at width multiplier 4 (Adam: hidden and output 1/m; SGD: input and biases m, output 1/m)."""
    mup = schemes.get("mup")
    got = {r: mup.lr_multiplier(r, d_model=1024, base_width=256, optimizer=optimizer) for r in expected}
    assert got == pytest.approx(expected)
    table8 = mup.lr_multiplier("head", d_model=1024, base_width=256, optimizer=optimizer, readout="multiplier")
    assert table8 == pytest.approx({"adam": 1.0, "sgd": 4.0}[optimizer])


TARGETS = [
    ("small_init", "mlp_in", 2.0),
    ("small_init", "mlp_in", 3.0),
    ("gpt2", "attn_out", 2.0),
    ("deepnorm", "attn_v", 1.0),
    ("mitchell", "mlp_out", None),
]


@pytest.mark.parametrize("variance_preserving", [False, True], ids=["plain", "vp"])
@pytest.mark.parametrize("scheme,role,trunc", TARGETS, ids=[f"{s}-{t}" for s, _, t in TARGETS])
def test_realised_std(scheme, role, trunc, variance_preserving):
    """10^6 samples: realised std within 1 % of the target (scipy's truncnorm factor when not preserving)."""
    options = {"variance_preserving": variance_preserving}
    if trunc is not None:
        options["trunc"] = trunc
    spec = _spec(scheme, role, **options)
    target = _spec(scheme, role).std  # the recipe's std
    t = spec.trunc
    factor = scipy.stats.truncnorm.std(-t, t)
    expected = target if variance_preserving else target * factor
    assert spec.std == pytest.approx(target / factor if variance_preserving else target, rel=1e-9)
    values = write_spec_(torch.empty(10**6), spec, seed=11, stream=hash((scheme, role)) & 0xFFFF).double()
    got = float(values.std())
    print(f"{scheme} {role} trunc {t} vp={variance_preserving}: realised {got:.6g}, expected {expected:.6g}")
    assert abs(got / expected - 1) < 0.01
    assert float(values.abs().max()) <= t * spec.std * (1 + 1e-6)


@pytest.mark.parametrize(
    "scheme,role,trunc,preserved",
    [
        ("gpt2", "attn_out", 2.0, True),  # HF's normal_, truncated by the caller: rescaled
        ("xavier_normal", "mlp_in", 3.0, True),
        ("depth_init", "mlp_up", 2.5, True),  # torchtitan's +-2 absolute is +-100 std: untruncated in effect
        ("mitchell", "mlp_out", 2.0, False),  # OLMo's own +-3 std is not rescaled: neither is the caller's
        ("lecun_normal", "attn_q", None, True),  # JAX's rescaled +-2
        ("lecun_normal", "attn_q", 3.0, True),
    ],
    ids=lambda v: str(v),
)
def test_default_variance_preservation(scheme, role, trunc, preserved):
    """variance_preserving=None: 10^6 samples realise the recipe's std (within 1 %) exactly when the
    reference rescales or the caller truncates an untruncated reference; else the truncated normal's."""
    options = {} if trunc is None else {"trunc": trunc}
    spec = _spec(scheme, role, **options)
    target = _spec(scheme, role, trunc=math.inf, variance_preserving=False).std  # the recipe's std
    expected = target if preserved else target * scipy.stats.truncnorm.std(-spec.trunc, spec.trunc)
    values = write_spec_(torch.empty(10**6), spec, seed=13, stream=hash((scheme, role)) & 0xFFFF).double()
    assert abs(float(values.std()) / expected - 1) < 0.01, (float(values.std()), expected)
    assert float(values.abs().max()) <= spec.trunc * spec.std * (1 + 1e-6)


@pytest.mark.parametrize("scheme", ["xavier_uniform", "kaiming_uniform"])
def test_realised_std_uniform(scheme):
    spec = _spec(scheme, "mlp_in", variance_preserving=True)  # no effect on a uniform
    values = write_spec_(torch.empty(1000, 1000), spec, seed=5, stream=9).double()
    assert abs(float(values.std()) / spec.std - 1) < 0.01
    bound = spec.bounds[1]
    assert float(values.max()) <= bound and float(values.min()) >= -bound
    assert float(values.max()) > 0.999 * bound and float(values.min()) < -0.999 * bound
    scipy_p = scipy.stats.kstest(values.flatten().numpy()[:100_000], scipy.stats.uniform(-bound, 2 * bound).cdf).pvalue
    assert scipy_p > 1e-4


def test_parts_follow_the_stream():
    """Slices of a fused (out, in) weight take consecutive stream indices: equal parts equal one fill."""
    whole = schemes.InitSpec(std=0.02)
    parts = schemes.InitSpec(parts=(whole, whole, whole), split_dim=0)
    a = write_spec_(torch.empty(3 * 64, 64), whole, seed=3, stream=4)
    b = write_spec_(torch.empty(3 * 64, 64), parts, seed=3, stream=4)
    torch.testing.assert_close(b, a, rtol=0, atol=0)


def test_fill_routes_context():
    w = torch.empty(D, 3 * D)  # GPT-2 Conv1D c_attn
    tinit.fill_(w, "deepnorm", name="transformer.h.0.attn.c_attn.weight", n_layers=L, layout="in_out", seed=1)
    xavier = math.sqrt(2 / (D + D))  # deepnorm draws untruncated, as DeepNet's xavier_normal_
    for i, scale in enumerate((1.0, 1.0, BETA)):
        got = float(w[:, i * D : (i + 1) * D].std())
        assert abs(got / (scale * xavier) - 1) < 0.01, (i, got)
    small = torch.empty(256, 256)
    tinit.fill_(small, "small_init", d_model=256, seed=2)  # GPT-NeoX's normal_: untruncated
    assert abs(float(small.std()) / math.sqrt(2 / 1280) - 1) < 0.02


@pytest.mark.parametrize(
    "call,error,match",
    [
        (lambda: schemes.get("gpt2").spec(role=None, shape=(8, 8)), ValueError, "role"),
        (lambda: schemes.get("gpt2").spec(role="residual", shape=(8, 8)), KeyError, "unknown role"),
        (lambda: schemes.get("gpt2").spec(role="attn_out", shape=(8, 8)), ValueError, "n_layers"),
        (lambda: schemes.get("small_init").spec(role="attn_q", shape=(8, 8)), ValueError, "d_model"),
        (lambda: schemes.get("depth_init").spec(role="mlp_out", shape=(8, 8)), ValueError, "layer_idx"),
        (lambda: schemes.get("normal").spec(role="attn_q", shape=(8, 8), stdd=0.1), TypeError, "stdd"),
        (lambda: schemes.get("normal").spec(role="attn_q", shape=(8, 8), trunc=0.0), ValueError, "trunc"),
        (
            lambda: schemes.get("normal").spec(role="attn_q", shape=(8, 8), variance_preserving="yes"),
            TypeError,
            "variance_preserving",
        ),
        (lambda: schemes.get("normal").spec(role="attn_q", shape=(8, 8), std=-1.0), ValueError, "std"),
        (lambda: schemes.get("modern").spec(role="attn_q", shape=(8, 8), d_model=8, base="big"), ValueError, "base"),
        (lambda: schemes.get("mup").spec(role="head", shape=(8, 8), readout="none"), ValueError, "readout"),
        (lambda: schemes.get("mup").spec(role="head", shape=(8, 8), base_width=4), ValueError, "d_model"),
        (lambda: schemes.get("xavier_normal").spec(role="attn_qkv", shape=(8, 8)), ValueError, "3 equal parts"),
        (lambda: schemes.get("xavier_normal").spec(role=None, shape=(8,)), ValueError, ">= 2 dims"),
        (lambda: schemes.get("kaiming_normal").spec(role="attn_q", shape=(8, 8), mode="avg"), ValueError, "mode"),
        (lambda: schemes.get("fixup").spec(role="attn_q", shape=(8, 8), n_layers=2, m=1), ValueError, "m "),
        (
            lambda: schemes.get("deepnorm").spec(role="attn_v", shape=(8, 8), encoder_layers=2, decoder_layers=2),
            ValueError,
            "stack",
        ),
        (lambda: schemes.get("rezero").spec(role="attn_q", shape=(8, 8), base="rezero"), ValueError, "base"),
        (lambda: schemes.get("nope"), KeyError, "known"),
    ],
    ids=[
        "needs-role",
        "unknown-role",
        "n_layers",
        "d_model",
        "layer_idx",
        "unknown-option",
        "trunc",
        "variance_preserving-type",
        "std",
        "modern-base",
        "mup-readout",
        "mup-width",
        "qkv-split",
        "fan-1d",
        "kaiming-mode",
        "fixup-m",
        "deepnorm-stack",
        "rezero-base",
        "unknown-scheme",
    ],
)
def test_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_fill_refuses_before_writing():
    param = torch.full((8, 8), 3.0)
    with pytest.raises(ValueError, match="role"):
        tinit.fill_(param, "gpt2", n_layers=2, seed=1)
    with pytest.raises(ValueError, match="d_model"):
        tinit.fill_(param, "small_init", seed=1)
    assert (param == 3.0).all(), "fill_ wrote before raising"


def test_truncation_factor_matches_scipy():
    for t in (0.5, 1.0, 2.0, 3.0, 6.0):
        assert schemes.truncation_factor(t) == pytest.approx(scipy.stats.truncnorm.std(-t, t), rel=1e-12)
    assert schemes.truncation_factor(math.inf) == 1.0


@pytest.mark.parametrize("scheme", sorted(schemes.SCHEMES))
def test_depth_dependent_flag(scheme):
    """``init_model_`` shares one spec between blocks unless ``depth_dependent``: the flag must say the truth."""
    chosen = schemes.get(scheme)
    options = (
        [{}, {"base_width": 256}]
        if scheme == "mup"
        else [{}, {"base": "modern"}, {"base": "depth_init"}, {"base": "mitchell"}]
        if scheme == "rezero"
        else [{"d_kv": 64}]
        if scheme == "t5"
        else [{}]
    )
    for opts in options:
        differs = False
        for role, shape in SHAPES.items():
            first = chosen.spec(role=role, layer_idx=0, n_layers=L, d_model=D, shape=shape, **opts)
            later = chosen.spec(role=role, layer_idx=7, n_layers=L, d_model=D, shape=shape, **opts)
            if not chosen.depends_on_depth(**opts):
                assert first == later, (role, opts)
            differs |= first != later
        assert differs == chosen.depends_on_depth(**opts), opts
