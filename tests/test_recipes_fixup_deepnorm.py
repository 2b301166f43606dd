"""``fixup`` and ``deepnorm`` against their authors' code: the realised std per role, pooled.

Fixup: the Transformer init of github.com/hongyi-zhang/Fixup (commit f3fa449), vendored in
``reference.fixup_transformer_zero``. DeepNorm: microsoft/torchscale 0.3.0 (``pip install --no-deps
torchscale==0.3.0``); its modules import fairscale and timm only for wrappers and drop-path used
in the forward pass, stubbed here when they are missing (construction never calls them).

Each model is built twice from one class: once initialised by the reference itself, once by
``tinit.init_model_``; every role's values are pooled over the layers (>= 10^6 samples, so the
std's sampling error is ~0.07 %) and compared within 1 %; constants must match exactly.
"""

from __future__ import annotations

import argparse
import copy
import importlib
import math
import sys
import types
from collections import defaultdict

import pytest
import torch
from reference import fixup_transformer_zero as fixup_ref

import tinit
from tinit import schemes

MIN_SAMPLES = 10**6


def _pooled(model, names):
    values = torch.cat([model.get_parameter(n).detach().double().flatten() for n in names])
    return values


def _compare(reference, ours, groups, *, uniform):
    """Per group: equal constants, or stds (and, for uniforms, max |x|) within 1 % on >= 10^6 samples."""
    for key, names in groups.items():
        ref, got = _pooled(reference, names), _pooled(ours, names)
        if ref.std() == 0:
            torch.testing.assert_close(got, ref, rtol=0, atol=0, msg=f"{key}: constants differ")
            continue
        assert ref.numel() >= MIN_SAMPLES, f"{key}: only {ref.numel()} samples"
        ratio = float(got.square().mean().sqrt() / ref.square().mean().sqrt())
        assert ratio == pytest.approx(1.0, abs=0.01), f"{key}: std ratio tinit/reference {ratio:.4f}"
        if uniform:
            spread = float(got.abs().max() / ref.abs().max())
            assert spread == pytest.approx(1.0, abs=0.01), f"{key}: max |x| ratio {spread:.4f} (not a uniform?)"


# --- Fixup -------------------------------------------------------------------------------------

FIXUP_ARGS = argparse.Namespace(
    encoder_embed_dim=384,
    decoder_embed_dim=384,
    encoder_attention_heads=6,
    decoder_attention_heads=6,
    encoder_ffn_embed_dim=1536,
    decoder_ffn_embed_dim=1536,
    encoder_layers=2,
    decoder_layers=3,
    attention_dropout=0.0,
    dropout=0.0,
    relu_dropout=0.0,
    encoder_normalize_before=False,
    decoder_normalize_before=False,
)
FIXUP_OVERRIDES = {
    r"scale\d\.weight$": "residual_gate",  # LayerScale: a scalar multiplier
    r"shift\d\.bias$": "bias",  # LayerShift: a scalar bias
    # The reference builds the decoder's cross-attention without num_blocks: the default 12.
    r"encoder_attn\.in_proj_weight$": {"role": "attn_qkv", "options": {"branches": 12}},
}


def test_fixup_matches_the_authors_transformer():
    """Encoder-decoder (2 + 3 layers, one count B = 2 N + 3 M = 13): q/k/v Xavier over the fused in_proj
    times B^(-1/6), fc1 Xavier times B^(-1/2), out_proj/fc2/embed_out 0, embeddings N(0, 1/d)."""
    torch.manual_seed(0)
    reference = fixup_ref.TinyTransformerZero(FIXUP_ARGS, vocab=1400)
    ours = copy.deepcopy(reference)
    summary = tinit.init_model_(ours, "fixup", seed=3, overrides=FIXUP_OVERRIDES)
    groups = defaultdict(list)
    for entry in summary:
        kind = "cross" if "encoder_attn" in entry.name else "self"
        groups[(entry.role, kind if entry.role == "attn_qkv" else "")].append(entry.name)
    assert set(groups) >= {("attn_qkv", "self"), ("attn_qkv", "cross"), ("mlp_in", ""), ("embedding", "")}
    randoms = {k: v for k, v in groups.items() if k[0] != "embedding"}
    _compare(reference, ours, randoms, uniform=True)
    _compare(reference, ours, {"embedding": groups[("embedding", "")]}, uniform=False)
    for stack in ("encoder", "decoder"):
        assert ours.get_parameter(f"{stack}.embed_tokens.weight")[1].count_nonzero() == 0  # padding_idx 1


def test_fixup_separate_qkv_are_slices_of_the_fused_projection():
    """A separate q, k or v (d x d) gets the std of the rows of the fused (3d x d) in_proj it stands for."""
    fixup = schemes.get("fixup")
    d, n = 768, 12
    fused = fixup.spec(role="attn_qkv", shape=(3 * d, d), n_layers=n, d_model=d)
    for role in ("attn_q", "attn_k", "attn_v"):
        assert fixup.spec(role=role, shape=(d, d), n_layers=n, d_model=d).std == pytest.approx(fused.std, rel=1e-12)
    # L = 12 decoder-only: B = 24 branches; Xavier(d, 3d) * 24^(-1/6) and Xavier(d, 4d) * 24^(-1/2).
    assert fused.std == pytest.approx(math.sqrt(2 / (4 * d)) * 24 ** (-1 / 6), rel=1e-12)
    mlp = fixup.spec(role="mlp_in", shape=(4 * d, d), n_layers=n, d_model=d)
    assert mlp.std == pytest.approx(math.sqrt(2 / (5 * d)) / math.sqrt(24), rel=1e-12)
    assert fused.distribution == mlp.distribution == "uniform"


def test_fixup_paper_form():
    """Section 3 of the paper: He init times B^(-1/(2m-2)), normal, for q/k/v and mlp_in alike."""
    fixup = schemes.get("fixup")
    for m in (2, 3):
        spec = fixup.spec(role="attn_v", shape=(768, 768), n_layers=12, form="paper", m=m)
        assert spec.distribution == "trunc_normal" and math.isinf(spec.trunc)
        assert spec.std == pytest.approx(math.sqrt(2 / 768) * 24 ** (-1 / (2 * m - 2)), rel=1e-12)


def test_fixup_truncated_normal_keeps_the_reference_std():
    """distribution="normal" with the mission's truncation: variance-preserving, the realised std is the code's."""
    fixup = schemes.get("fixup")
    uniform = fixup.spec(role="mlp_in", shape=(3072, 768), n_layers=12)
    normal = fixup.spec(
        role="mlp_in", shape=(3072, 768), n_layers=12, distribution="normal", trunc=2.0, variance_preserving=True
    )
    assert normal.distribution == "trunc_normal" and normal.trunc == 2.0
    assert normal.realised_std == pytest.approx(uniform.realised_std, rel=1e-12)


@pytest.mark.parametrize(
    "options,match",
    [
        ({"form": "code"}, "form"),
        ({"distribution": "laplace"}, "distribution"),
        ({"branches": 0}, "branches"),
        ({"form": "paper", "m": 1}, "m "),
    ],
    ids=["form", "distribution", "branches", "m"],
)
def test_fixup_bad_options(options, match):
    with pytest.raises(ValueError, match=match):
        schemes.get("fixup").spec(role="attn_q", shape=(8, 8), n_layers=2, **options)


# --- DeepNorm against torchscale ------------------------------------------------------------------


@pytest.fixture(scope="module")
def torchscale():
    """torchscale's architecture modules, with fairscale's wrappers and timm's drop_path stubbed when
    not installed (torchscale imports them at module level; building a model never calls them)."""
    pytest.importorskip("torchscale", reason="reference package: pip install --no-deps torchscale==0.3.0")
    saved = {}
    stubs = {
        "fairscale.nn": {"checkpoint_wrapper": lambda m, **_: m, "wrap": lambda m, **_: m},
        "timm.models.layers": {"drop_path": lambda x, *_, **__: x},
    }
    for module, names in stubs.items():
        try:
            importlib.import_module(module)
            continue
        except ImportError:
            pass
        parts = module.split(".")
        for i in range(1, len(parts) + 1):
            name = ".".join(parts[:i])
            saved[name] = sys.modules.get(name)
            sys.modules[name] = types.ModuleType(name)
        for attr, value in names.items():
            setattr(sys.modules[module], attr, value)
    try:
        config = importlib.import_module("torchscale.architecture.config")
        decoder = importlib.import_module("torchscale.architecture.decoder")
        encoder_decoder = importlib.import_module("torchscale.architecture.encoder_decoder")
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
    return types.SimpleNamespace(config=config, decoder=decoder, encoder_decoder=encoder_decoder)


def _by_role(summary):
    groups = defaultdict(list)
    for entry in summary:
        groups[(entry.stack, entry.role)].append(entry.name)
    return groups


def test_deepnorm_torchscale_decoder(torchscale):
    """Decoder-only, 4 layers: q/k U(+-1/sqrt(d)); v/out/fc1/fc2 divided by (8 M)^(1/4); alpha (2 M)^(1/4)."""
    cfg = torchscale.config.DecoderConfig(
        vocab_size=2048,
        deepnorm=True,
        decoder_embed_dim=512,
        decoder_ffn_embed_dim=2048,
        decoder_layers=4,
        decoder_attention_heads=8,
    )
    torch.manual_seed(0)
    reference = torchscale.decoder.Decoder(cfg)
    ours = copy.deepcopy(reference)
    summary = tinit.init_model_(ours, "deepnorm", variant="torchscale", seed=5)
    groups = _by_role(summary)
    weights = {k: v for k, v in groups.items() if k[1] not in ("bias", "head")}
    assert {role for _, role in weights} == {"attn_q", "attn_k", "attn_v", "attn_out", "mlp_in", "mlp_out", "norm"}
    _compare(reference, ours, {k: [n for n in v if n.endswith("weight")] for k, v in weights.items()}, uniform=True)
    _compare(reference, ours, {k: v for k, v in groups.items() if k[1] == "head"}, uniform=False)
    assert all(ours.get_parameter(n).count_nonzero() == 0 for n in groups[(None, "bias")])
    alpha = schemes.multipliers("deepnorm", n_layers=4, variant="torchscale")["residual_alpha"]
    assert [layer.alpha for layer in reference.layers] == pytest.approx([alpha] * 4, rel=1e-12)


def test_deepnorm_torchscale_encoder_decoder(torchscale):
    """Encoder-decoder 4 + 4: the decoder's beta (12 M)^(-1/4), the encoder's 1.15 (N^4 M)^(-1/16) (the
    paper's is 0.87 (N^4 M)^(-1/16)); alphas 0.81 (N^4 M)^(1/16) and (3 M)^(1/4) as in the paper."""
    n = m = 4
    cfg = torchscale.config.EncoderDecoderConfig(
        vocab_size=64,
        deepnorm=True,
        encoder_embed_dim=512,
        encoder_ffn_embed_dim=2048,
        encoder_layers=n,
        encoder_attention_heads=8,
        decoder_embed_dim=512,
        decoder_ffn_embed_dim=2048,
        decoder_layers=m,
        decoder_attention_heads=8,
    )
    torch.manual_seed(0)
    reference = torchscale.encoder_decoder.EncoderDecoder(cfg)
    ours = copy.deepcopy(reference)
    summary = tinit.init_model_(ours, "deepnorm", variant="torchscale", seed=6)
    groups = _by_role(summary)
    weights = {k: [n for n in v if n.endswith("weight")] for k, v in groups.items() if k[1] not in ("bias", "head")}
    assert ("encoder", "attn_v") in weights and ("decoder", "mlp_out") in weights
    _compare(reference, ours, weights, uniform=True)
    got = schemes.multipliers("deepnorm", encoder_layers=n, decoder_layers=m, variant="torchscale")
    assert got["encoder_beta"] == pytest.approx(1.15 * (n**4 * m) ** (-1 / 16), rel=1e-12)
    assert got["encoder_beta"] / schemes.multipliers("deepnorm", encoder_layers=n, decoder_layers=m)[
        "encoder_beta"
    ] == pytest.approx(1.15 / 0.87)
    assert [layer.alpha for layer in reference.encoder.layers] == pytest.approx(
        [got["encoder_residual_alpha"]] * n, rel=1e-12
    )
    assert [layer.alpha for layer in reference.decoder.layers] == pytest.approx(
        [got["decoder_residual_alpha"]] * m, rel=1e-12
    )


def test_deepnorm_variant_is_checked():
    with pytest.raises(ValueError, match="variant"):
        schemes.get("deepnorm").spec(role="attn_v", shape=(8, 8), n_layers=2, variant="fairseq")
    with pytest.raises(ValueError, match="variant"):
        schemes.multipliers("deepnorm", n_layers=2, variant="fairseq")
