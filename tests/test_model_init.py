"""tinit.init_model_ on real architectures: roles and stds, ties, meta models, order independence, refusals."""

from __future__ import annotations

import math
import re
import warnings

import pytest
import torch
from torch import nn

import tinit
from tinit import _model_init, stream_for
from tinit.tools.toy_models import GPT, GPTConfig

transformers = pytest.importorskip("transformers", reason="transformers is not installed (pip install transformers)")

TINY = GPTConfig(n_layers=2, d_model=32, n_heads=2, vocab=97, n_ctx=16)
VOCAB = 512


def _hf_gpt2(n_layer=2, device="cpu"):
    config = transformers.GPT2Config(
        n_layer=n_layer, n_embd=64, n_head=2, vocab_size=VOCAB, n_positions=64, bos_token_id=0, eos_token_id=0
    )
    with torch.device(device):
        return transformers.GPT2LMHeadModel(config)


def _hf_llama(family="Llama", device="cpu"):
    config = getattr(transformers, f"{family}Config")(
        num_hidden_layers=2,
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
        vocab_size=VOCAB,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    )
    with torch.device(device):
        return getattr(transformers, f"{family}ForCausalLM")(config)


class _TitanAttention(nn.Module):
    def __init__(self, dim, kv_dim):
        super().__init__()
        self.wq, self.wk = nn.Linear(dim, dim, bias=False), nn.Linear(dim, kv_dim, bias=False)
        self.wv, self.wo = nn.Linear(dim, kv_dim, bias=False), nn.Linear(dim, dim, bias=False)


class _TitanFeedForward(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.w1, self.w2 = nn.Linear(dim, hidden, bias=False), nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)


class _TitanBlock(nn.Module):
    def __init__(self, dim, kv_dim, hidden, gates):
        super().__init__()
        self.attention = _TitanAttention(dim, kv_dim)
        self.feed_forward = _TitanFeedForward(dim, hidden)
        self.attention_norm, self.ffn_norm = nn.RMSNorm(dim), nn.RMSNorm(dim)
        if gates:
            self.resweight = nn.Parameter(torch.ones(1))


class TitanLlama(nn.Module):
    """torchtitan's Llama module tree (``tok_embeddings``, ``layers`` as a ModuleDict, ``output``)."""

    def __init__(self, n_layers=3, dim=64, kv_dim=32, hidden=160, vocab=VOCAB, order=None, gates=False):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleDict()
        for i in order if order is not None else range(n_layers):
            self.layers[str(i)] = _TitanBlock(dim, kv_dim, hidden, gates)
        self.norm = nn.RMSNorm(dim)
        self.output = nn.Linear(dim, vocab, bias=False)


def _check_written(model, summary, expected, seed):
    """Every parameter: role and std as expected, values identical to a direct fill from its stream
    (an embedding's padding row zero)."""
    params = dict(model.named_parameters())
    padding = {
        f"{name}.weight": module.padding_idx
        for name, module in model.named_modules()
        if isinstance(module, nn.Embedding) and module.padding_idx is not None
    }
    assert [e.name for e in summary] == list(params), "summary does not list every (untied) parameter once"
    for entry in summary:
        role, want = next(v for pattern, v in expected.items() if re.search(pattern, entry.name))
        assert entry.role == role, f"{entry.name}: role {entry.role}, expected {role}"
        param = params[entry.name]
        if isinstance(want, str):  # "=c": a constant
            assert entry.constant == float(want[1:]), entry.name
            torch.testing.assert_close(param.detach(), torch.full_like(param, float(want[1:])), rtol=0, atol=0)
            continue
        assert entry.std == pytest.approx(want, rel=1e-12), f"{entry.name}: std {entry.std}, expected {want}"
        lo, hi = entry.bounds
        assert (lo, hi) == pytest.approx((-entry.trunc * want, entry.trunc * want))
        direct = tinit.trunc_normal_at_(
            torch.empty_like(param), 0.0, want, lo, hi, seed=seed, stream=stream_for(entry.name)
        )
        if entry.name in padding:
            direct[padding[entry.name]] = 0.0
        torch.testing.assert_close(param.detach(), direct, rtol=0, atol=0, msg=entry.name)


def test_hf_gpt2_gpt2_scheme():
    model = _hf_gpt2()
    summary = tinit.init_model_(model, "gpt2", seed=3)
    out = 0.02 / math.sqrt(2 * 2)
    _check_written(
        model,
        summary,
        {
            r"\.w[tp]e\.": ("embedding", 0.02),
            r"ln_.*weight": ("norm", "=1"),
            r"bias$": ("bias", "=0"),
            r"c_attn\.weight": ("attn_qkv", 0.02),
            r"attn\.c_proj\.weight": ("attn_out", out),
            r"c_fc\.weight": ("mlp_in", 0.02),
            r"mlp\.c_proj\.weight": ("mlp_out", out),
        },
        seed=3,
    )
    wte = next(e for e in summary if e.name == "transformer.wte.weight")
    assert wte.tied == ("lm_head.weight",)
    assert {e.stream_version for e in summary} == {tinit.STREAM_VERSION}
    assert model.lm_head.weight is model.transformer.wte.weight


def test_hf_gpt2_conv1d_fans():
    """GPT-2's Conv1D weights are (in, out): fan_in is dim 0 (lecun_normal: 1/sqrt(fan_in))."""
    model = _hf_gpt2()
    summary = tinit.init_model_(
        model, "lecun_normal", seed=4, variance_preserving=False
    )  # the parent std: 1/sqrt(fan_in)
    _check_written(
        model,
        summary,
        {
            r"\.w[tp]e\.": ("embedding", 1 / 8),
            r"ln_.*weight": ("norm", "=1"),
            r"bias$": ("bias", "=0"),
            r"c_attn\.weight": ("attn_qkv", 1 / 8),
            r"attn\.c_proj\.weight": ("attn_out", 1 / 8),
            r"c_fc\.weight": ("mlp_in", 1 / 8),
            r"mlp\.c_proj\.weight": ("mlp_out", 1 / 16),
        },
        seed=4,
    )


@pytest.mark.parametrize("family", ["Llama", "Mistral"])
def test_hf_llama_deepnorm(family):
    model = _hf_llama(family)
    summary = tinit.init_model_(model, "deepnorm", seed=5)
    beta = (8 * 2) ** -0.25
    _check_written(
        model,
        summary,
        {
            r"embed_tokens": ("embedding", 1 / 8),
            r"lm_head": ("head", 1 / 8),
            r"norm": ("norm", "=1"),
            r"q_proj": ("attn_q", math.sqrt(2 / 128)),
            r"k_proj": ("attn_k", math.sqrt(2 / 96)),
            r"v_proj": ("attn_v", beta * math.sqrt(2 / 96)),
            r"o_proj": ("attn_out", beta * math.sqrt(2 / 128)),
            r"gate_proj": ("mlp_in", beta * math.sqrt(2 / 192)),
            r"up_proj": ("mlp_up", beta * math.sqrt(2 / 192)),
            r"down_proj": ("mlp_out", beta * math.sqrt(2 / 192)),
        },
        seed=5,
    )


def test_torchtitan_llama_depth_init():
    model = TitanLlama()
    summary = tinit.init_model_(model, "depth_init", seed=6, overrides={r"feed_forward\.w3\.": "mlp_up"})
    expected = {}
    for layer in range(3):
        std = 0.02 / math.sqrt(2 * (layer + 1))
        expected[rf"layers\.{layer}\.attention\.wo"] = ("attn_out", std)
        expected[rf"layers\.{layer}\.feed_forward\.w2"] = ("mlp_out", std)
        expected[rf"layers\.{layer}\.feed_forward\.w3"] = ("mlp_up", std)  # torchtitan scales w3 too
    expected.update(
        {
            r"tok_embeddings": ("embedding", 1.0),  # torchtitan: nn.init.normal_(std=1.0)
            r"^output": ("head", 64**-0.5),  # dim ** -0.5
            r"norm": ("norm", "=1"),
            r"wq": ("attn_q", 0.02),
            r"wk": ("attn_k", 0.02),
            r"wv": ("attn_v", 0.02),
            r"w1": ("mlp_in", 0.02),
        }
    )
    _check_written(model, summary, expected, seed=6)
    assert {e.layer for e in summary if e.role == "attn_out"} == {0, 1, 2}


def test_meta_flow_and_ties():
    reference = _hf_gpt2()
    tinit.init_model_(reference, "modern", seed=7)
    meta = _hf_gpt2(device="meta")
    with pytest.raises(ValueError, match="meta device"):
        tinit.init_model_(meta, "modern", seed=7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # to_empty's note about buffers, if any
        summary = tinit.init_model_(meta, "modern", seed=7, device="cpu")
    assert meta.lm_head.weight is meta.transformer.wte.weight, "tie lost by the meta flow"
    assert all(p.device.type == "cpu" for p in meta.parameters())
    assert len(summary) == len(list(meta.parameters()))
    for (name, a), b in zip(meta.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)


def test_lost_hf_tie_is_refused():
    model = _hf_gpt2(device="meta")
    model.to_empty(device="cpu")
    assert model.lm_head.weight is not model.transformer.wte.weight
    with pytest.raises(ValueError, match="tie_weights"):
        tinit.init_model_(model, "gpt2")


@pytest.mark.parametrize("grouped", [False, True])
def test_tied_weight_written_once(monkeypatch, grouped):
    model = GPT(TINY)
    writes = []
    real = _model_init.Plan.build
    monkeypatch.setattr(
        _model_init.Plan,
        "build",
        lambda items, **k: (writes.extend(i.tensor.data_ptr() for i in items), real(items, **k))[1],
    )
    summary = tinit.init_model_(model, "gpt2", seed=3, grouped=grouped)
    names = [e.name for e in summary]
    assert "transformer.wte.weight" in names and "lm_head.weight" not in names
    assert writes.count(model.lm_head.weight.data_ptr()) == 1
    assert len(writes) == len(set(writes)) == len(list(model.parameters()))
    assert sum(e.numel for e in summary) == sum(p.numel() for p in model.parameters())


def test_order_independence():
    """Different registration orders, writing one parameter at a time in reverse, or one block alone: same values."""
    first = TitanLlama(order=[0, 1, 2])
    second = TitanLlama(order=[2, 0, 1])
    assert [n for n, _ in first.named_parameters()] != [n for n, _ in second.named_parameters()]
    tinit.init_model_(first, "depth_init", seed=9)
    tinit.init_model_(second, "depth_init", seed=9)
    expected = first.state_dict()
    assert second.state_dict().keys() == expected.keys()
    for name, value in second.state_dict().items():
        torch.testing.assert_close(value, expected[name], rtol=0, atol=0, msg=name)

    third = TitanLlama(order=[1, 2, 0])
    for name, _ in reversed(list(third.named_parameters())):
        tinit.init_model_(third, "depth_init", seed=9, only=re.escape(name) + "$")
    for name, value in third.state_dict().items():
        torch.testing.assert_close(value, expected[name], rtol=0, atol=0, msg=name)

    with torch.no_grad():
        for p in third.layers["1"].parameters():
            p.fill_(7.0)
    tinit.init_model_(third.layers["1"], "depth_init", seed=9, prefix="layers.1.", n_layers=3)
    with torch.no_grad():
        for p in third.layers["2"].parameters():
            p.fill_(7.0)
    summary = tinit.init_model_(third, "depth_init", seed=9, only=r"^layers\.2\.")
    assert {e.layer for e in summary} == {2}
    for name, value in third.state_dict().items():
        torch.testing.assert_close(value, expected[name], rtol=0, atol=0, msg=name)


def test_unclassifiable_parameter():
    model = _hf_llama()
    model.model.layers[0].self_attn.register_parameter("mystery", nn.Parameter(torch.full((64, 64), 5.0)))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    with pytest.raises(ValueError, match=r"model\.layers\.0\.self_attn\.mystery"):
        tinit.init_model_(model, "gpt2")
    for name, param in model.named_parameters():
        torch.testing.assert_close(param, before[name], rtol=0, atol=0, msg=f"{name} was written")
    summary = tinit.init_model_(model, "gpt2", overrides={r"\.mystery$": "attn_q"})
    assert next(e for e in summary if e.name.endswith("mystery")).role == "attn_q"
    with pytest.raises(ValueError, match=r"model\.layers\.0\.self_attn\.mystery"):
        tinit.init_model_(model, "normal")  # a scheme that needs no role refuses it all the same
    override = {
        r"\.mystery$": "attn_q",
        r"layers\.1\.mlp\.down_proj": {"role": "mlp_out", "layer": 0, "options": {"std": 0.5}},
    }
    entry = next(e for e in tinit.init_model_(model, "gpt2", overrides=override) if "1.mlp.down_proj" in e.name)
    assert (entry.layer, entry.std) == (0, pytest.approx(0.5 / 2))


def test_rezero_needs_gates():
    model = TitanLlama(gates=True)
    summary = tinit.init_model_(model, "rezero", seed=1)
    gates = [e for e in summary if e.role == "residual_gate"]
    assert len(gates) == 3 and all(float(model.get_parameter(e.name).detach()) == 0.0 for e in gates)
    assert next(e for e in summary if e.name == "layers.0.attention.wq.weight").std == 0.02
    with pytest.raises(ValueError, match="residual_gate"):
        tinit.init_model_(TitanLlama(), "rezero")


def test_t5_encoder_decoder_deepnorm():
    config = transformers.T5Config(
        num_layers=2, num_decoder_layers=3, d_model=64, d_ff=128, num_heads=2, d_kv=32, vocab_size=VOCAB
    )
    model = transformers.T5ForConditionalGeneration(config)
    summary = tinit.init_model_(model, "deepnorm", seed=2)
    n, m = 2, 3
    beta = {"encoder": 0.87 * (n**4 * m) ** (-1 / 16), "decoder": (12 * m) ** -0.25}
    for entry in summary:
        if entry.role == "attn_v":
            assert entry.std == pytest.approx(beta[entry.stack] * math.sqrt(2 / 128)), entry.name
        if entry.role == "mlp_in":
            assert entry.std == pytest.approx(beta[entry.stack] * math.sqrt(2 / 192)), entry.name
    assert {e.stack for e in summary if e.layer is not None} == {"encoder", "decoder"}
    assert max(e.layer for e in summary if e.stack == "decoder" and e.layer is not None) == 2
    shared = next(e for e in summary if e.name == "shared.weight")
    assert set(shared.tied) >= {"encoder.embed_tokens.weight", "decoder.embed_tokens.weight"}


@pytest.mark.parametrize(
    "build",
    [
        lambda: _hf_llama("Qwen2"),
        lambda: transformers.BertForMaskedLM(
            transformers.BertConfig(
                num_hidden_layers=2, hidden_size=64, num_attention_heads=2, intermediate_size=128, vocab_size=VOCAB
            )
        ),
    ],
    ids=["qwen2", "bert"],
)
def test_every_parameter_classified(build):
    model = build()
    summary = tinit.init_model_(model, "modern", seed=1)
    assert all(e.role is not None for e in summary)
    assert {e.role for e in summary} >= {
        "embedding",
        "attn_q",
        "attn_k",
        "attn_v",
        "attn_out",
        "mlp_in",
        "mlp_out",
        "norm",
        "bias",
    }


def test_mup_param_groups():
    model = _hf_llama()
    groups = tinit.mup_param_groups(model, lr=1e-2, base_width=16, weight_decay=0.1)
    by_name = {name: g for g in groups for name in g["names"]}
    assert by_name["model.layers.0.self_attn.q_proj.weight"]["lr"] == pytest.approx(1e-2 / 4)
    assert by_name["lm_head.weight"]["lr"] == pytest.approx(1e-2 / 4)
    assert by_name["model.embed_tokens.weight"]["lr"] == pytest.approx(1e-2)
    assert by_name["model.norm.weight"]["lr"] == pytest.approx(1e-2)
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))
    optimizer = torch.optim.AdamW(groups)
    # mup's MuAdam scales weight decay inversely to lr: lr * weight_decay is the base model's.
    assert [g["lr"] * g["weight_decay"] for g in optimizer.param_groups] == pytest.approx([1e-3] * len(groups))
    summary = tinit.init_model_(model, "mup", base_width=16, seed=1)
    head = next(e for e in summary if e.name == "lm_head.weight")
    assert head.constant == 0.0
    q = next(e for e in summary if e.name.endswith("0.self_attn.q_proj.weight"))
    assert q.std == pytest.approx(0.02 / 2)


def test_meta_parameters_are_refused():
    with torch.device("meta"):
        model = GPT(TINY)
    with pytest.raises(ValueError, match="meta device"):
        tinit.init_model_(model)


def test_bad_dtype_is_refused_before_writing():
    model = GPT(TINY)
    model.transformer.ln_f.register_parameter(
        "count", torch.nn.Parameter(torch.zeros(3, dtype=torch.int32), requires_grad=False)
    )
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    with pytest.raises(TypeError, match="dtype"):
        tinit.init_model_(model, overrides={r"ln_f\.count": "norm"})
    for name, param in model.named_parameters():
        torch.testing.assert_close(param, before[name], rtol=0, atol=0, msg=f"{name} was written")


def test_norm_gains_are_found_by_module_type_when_names_say_nothing():
    """nn.Sequential names ("1.weight") carry no role; the module type does."""
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4), torch.nn.BatchNorm1d(4))
    with torch.no_grad():
        model[1].weight.fill_(7.0)
        model[2].weight.fill_(7.0)
    summary = {p.name: p.role for p in tinit.init_model_(model, "normal", seed=0)}
    assert summary["1.weight"] == "norm" and summary["2.weight"] == "norm", summary
    torch.testing.assert_close(model[1].weight.detach(), torch.ones(4))
    torch.testing.assert_close(model[2].weight.detach(), torch.ones(4))


class _OffsetRMSNorm(nn.Module):
    """A norm written as Gemma's: the effective gain is 1 + weight."""

    def __init__(self, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.full((dim,), 5.0))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * (1.0 + self.weight)


@pytest.mark.parametrize("scheme", ["modern", "gpt2", "normal"])
def test_offset_gain_norms_get_weight_zero(scheme):
    """A norm whose forward scales by (1 + weight) gets weight = gain - 1 = 0, the identity, as
    Gemma's own init does; a plain LayerNorm keeps 1."""
    model = nn.Sequential(nn.Linear(8, 8), _OffsetRMSNorm(8), nn.LayerNorm(8))
    summary = tinit.init_model_(model, scheme, seed=0, d_model=8, n_layers=1, overrides={r"^0\.": "mlp_in"})
    assert torch.equal(model[1].weight, torch.zeros(8)), model[1].weight
    assert torch.equal(model[2].weight, torch.ones(8))
    spec = {p.name: p.spec for p in summary}["1.weight"]
    assert spec.constant == 0.0, spec


@pytest.mark.parametrize("family", ["gemma", "gemma2", "gemma3_text"])
def test_gemma_norms_match_the_models_own_init(family):
    """HF Gemma RMSNorm computes x (1 + w) and its _init_weights zeroes w: tinit writes the same
    norm weights (an effective gain of 1, not 2); Llama's x w norms keep 1."""
    transformers = pytest.importorskip("transformers")
    config = transformers.AutoConfig.for_model(
        family,
        num_hidden_layers=2,
        hidden_size=64,
        intermediate_size=128,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=16,
        vocab_size=128,
    )
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config)
    own = {n: p.detach().clone() for n, p in model.named_parameters() if "norm" in n}
    assert own and all(bool((v == 0).all()) for v in own.values()), "the model's own init no longer zeroes its norms"
    tinit.init_model_(model, "modern", seed=0)
    for name, value in own.items():
        torch.testing.assert_close(model.get_parameter(name).detach(), value, rtol=0, atol=0, msg=name)


@pytest.mark.parametrize("grouped", [True, False])
def test_embedding_padding_row_is_zeroed(grouped):
    """nn.Embedding(padding_idx=p): row p is zeroed after the write, as nn.Embedding.reset_parameters
    and HF's _init_weights do; the other rows are the stream's values (equal to the same
    embedding without a padding index)."""
    padded = nn.Sequential(nn.Embedding(10, 4, padding_idx=3))
    plain = nn.Sequential(nn.Embedding(10, 4))
    for model in (padded, plain):
        tinit.init_model_(model, "normal", seed=5, grouped=grouped)
    weight, reference = padded[0].weight.detach(), plain[0].weight.detach()
    assert torch.equal(weight[3], torch.zeros(4))
    keep = [i for i in range(10) if i != 3]
    assert torch.equal(weight[keep], reference[keep])
    assert bool((reference[3] != 0).any())


def test_hf_bert_padding_row_matches_its_own_init():
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(
        num_hidden_layers=1, hidden_size=32, intermediate_size=64, num_attention_heads=2, vocab_size=50, pad_token_id=1
    )
    with torch.device("meta"):
        model = transformers.BertModel(config)
    tinit.init_model_(model, "normal", seed=0, device="cpu")
    word = model.embeddings.word_embeddings.weight.detach()
    assert torch.equal(word[1], torch.zeros(32)) and bool((word[0] != 0).any())


# --- unclassified parameters -------------------------------------------------


class _Mystery(nn.Module):
    """Blocks with a named Linear, an unnamed Linear (module type: linear) and a raw parameter no
    rule classifies."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Module() for _ in range(2)])
        for block in self.layers:
            block.mlp = nn.Module()
            block.mlp.fc1 = nn.Linear(8, 16)
            block.adapter = nn.Linear(8, 8, bias=False)
            block.mystery = nn.Parameter(torch.full((8,), 5.0))


UNCLASSIFIED_SCHEMES = ["normal", "gpt2", "xavier_normal", "xavier_uniform", "kaiming_normal", "lecun_normal"]


@pytest.mark.parametrize("scheme", UNCLASSIFIED_SCHEMES)
def test_unclassified_is_refused_under_every_scheme(scheme):
    model = _Mystery()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    with pytest.raises(ValueError, match=r"2 parameter\(s\).*layers\.0\.mystery, layers\.1\.mystery"):
        tinit.init_model_(model, scheme, d_model=8)
    for name, param in model.named_parameters():
        torch.testing.assert_close(param, before[name], rtol=0, atol=0, msg=f"{name} was written")


@pytest.mark.parametrize("scheme", UNCLASSIFIED_SCHEMES)
def test_unclassified_skip_leaves_them_and_lists_the_rest(scheme):
    model = _Mystery()
    summary = tinit.init_model_(model, scheme, seed=1, d_model=8, unclassified="skip")
    assert [e.name for e in summary] == [n for n, _ in model.named_parameters() if not n.endswith("mystery")]
    assert {e.name: e.role for e in summary}["layers.0.adapter.weight"] == "linear"  # by module type
    for block in model.layers:
        assert torch.equal(block.mystery, torch.full((8,), 5.0))


def test_unclassified_skip_is_refused_on_the_meta_device():
    with torch.device("meta"):
        model = _Mystery()
    with pytest.raises(ValueError, match=r"unclassified='skip'.*layers\.0\.mystery"):
        tinit.init_model_(model, "normal", device="cpu", unclassified="skip")
    assert all(p.is_meta for p in model.parameters())


def test_unclassified_as_a_role():
    model = _Mystery()
    summary = {e.name: e for e in tinit.init_model_(model, "normal", seed=2, unclassified="bias")}
    assert (summary["layers.1.mystery"].role, summary["layers.1.mystery"].constant) == ("bias", 0.0)
    assert torch.equal(model.layers[1].mystery, torch.zeros(8))


@pytest.mark.parametrize(
    ("value", "error"), [(None, TypeError), (3, TypeError), ("noise", ValueError), ("Linear", ValueError)]
)
def test_unclassified_argument_is_checked(value, error):
    model = _Mystery()
    with pytest.raises(error, match="unclassified"):
        tinit.init_model_(model, "normal", unclassified=value)
    with pytest.raises(error, match="unclassified"):
        tinit.mup_param_groups(model, lr=1e-3, unclassified=value)


def test_mup_param_groups_unclassified_policy():
    model = _Mystery()
    with pytest.raises(ValueError, match=r"layers\.0\.mystery"):
        tinit.mup_param_groups(model, lr=1e-3, base_width=8, d_model=16)
    names = [
        n
        for g in tinit.mup_param_groups(model, lr=1e-3, base_width=8, d_model=16, unclassified="skip")
        for n in g["names"]
    ]
    assert sorted(names) == sorted(n for n, _ in model.named_parameters() if not n.endswith("mystery"))
    groups = tinit.mup_param_groups(model, lr=1e-3, base_width=8, d_model=16, unclassified="norm")
    norm = tinit.schemes.get("mup").lr_multiplier("norm", d_model=16, base_width=8, optimizer="adam", readout="zero")
    assert next(g for g in groups if "layers.0.mystery" in g["names"])["lr_multiplier"] == norm


def test_module_types_classify_unnamed_weights():
    """nn.Linear / nn.Conv* weights "linear", their biases "bias", nn.Embedding "embedding"; a raw
    parameter of a custom module stays unclassified."""
    model = nn.Sequential(
        nn.Linear(4, 4), nn.Conv1d(4, 4, 3), nn.Conv2d(4, 4, 3), nn.Conv3d(4, 4, 1), nn.Embedding(9, 4)
    )
    summary = tinit.init_model_(model, "xavier_normal", seed=0)
    assert [(e.name, e.role) for e in summary] == [
        ("0.weight", "linear"),
        ("0.bias", "bias"),
        ("1.weight", "linear"),
        ("1.bias", "bias"),
        ("2.weight", "linear"),
        ("2.bias", "bias"),
        ("3.weight", "linear"),
        ("3.bias", "bias"),
        ("4.weight", "embedding"),
    ]
    # xavier_normal as torch.nn.init.xavier_normal_ computes the fans (receptive field included)
    for entry in summary:
        param = model.get_parameter(entry.name)
        if entry.role != "bias":
            fan_in, fan_out = torch.nn.init._calculate_fan_in_and_fan_out(param)
            assert entry.std == pytest.approx(math.sqrt(2.0 / (fan_in + fan_out)), rel=1e-12), entry.name


# --- residual gates -----------------------------------------------------------


class _GatedBlock(nn.Module):
    """A block with ReZero-style scalar gates and, as esmfold's, a d x d Linear called attn_gate."""

    def __init__(self, matrix_gate: bool):
        super().__init__()
        self.mlp_gate = nn.Parameter(torch.zeros(1))
        self.attn_gate = nn.Linear(8, 8) if matrix_gate else nn.Parameter(torch.zeros(1))


def test_a_gate_name_on_a_matrix_is_not_a_gate():
    model = nn.Module()
    model.layers = nn.ModuleList([_GatedBlock(matrix_gate=True)])
    summary = {e.name: e for e in tinit.init_model_(model, "normal", seed=0)}
    assert summary["layers.0.attn_gate.weight"].role == "linear"
    assert summary["layers.0.attn_gate.weight"].std == 0.02
    assert model.layers[0].attn_gate.weight.detach().std() > 0.01  # drawn, not the gate's 1.0
    assert (summary["layers.0.mlp_gate"].role, summary["layers.0.mlp_gate"].constant) == ("residual_gate", 1.0)


class _TanhGated(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.attn_gate = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        return x + self.attn_gate.tanh() * self.proj(x)


def test_a_tanh_gate_of_unknown_value_is_refused():
    """tanh(1) is no identity: a tanh gate's value is the model's, refused when tinit does not
    know it; an override value, or rezero (which sets gates itself), decides it."""
    model = nn.Module()
    model.layers = nn.ModuleList([_TanhGated()])
    with pytest.raises(ValueError, match=r"layers\.0\.attn_gate \(tanh gate\)"):
        tinit.init_model_(model, "gpt2")
    summary = tinit.init_model_(model, "gpt2", overrides={r"attn_gate$": {"value": 0.5}})
    assert next(e for e in summary if e.name.endswith("attn_gate")).constant == 0.5
    assert torch.equal(model.layers[0].attn_gate, torch.full((1,), 0.5))
    tinit.init_model_(model, "rezero")
    assert torch.equal(model.layers[0].attn_gate, torch.zeros(1))


def _hf_gated_layers():
    """Layers of HF mllama and Evolla, built eagerly (their own __init__ writes the gates) and on meta."""
    from transformers.models.evolla import modeling_evolla
    from transformers.models.mllama import modeling_mllama

    vision = transformers.MllamaVisionConfig(
        hidden_size=32, attention_heads=2, intermediate_size=64, num_hidden_layers=1, num_global_layers=1
    )
    text = transformers.MllamaTextConfig(
        hidden_size=32, num_attention_heads=2, num_key_value_heads=1, intermediate_size=64, vocab_size=64
    )
    evolla = transformers.EvollaConfig(hidden_size=32, num_attention_heads=2, intermediate_size=64, vocab_size=64)
    return {
        "mllama-vision": lambda: modeling_mllama.MllamaVisionEncoderLayer(vision, is_gated=True),
        "mllama-cross-attention": lambda: modeling_mllama.MllamaCrossAttentionDecoderLayer(text, layer_idx=0),
        "evolla": lambda: modeling_evolla.EvollaSequenceAlignerCrossAttention(evolla, protein_encoder_dim=32),
    }


@pytest.mark.parametrize("kind", ["mllama-vision", "mllama-cross-attention", "evolla"])
@pytest.mark.parametrize("scheme", ["normal", "gpt2", "xavier_uniform", "rezero"])
def test_hf_gates_get_the_values_their_models_use(kind, scheme):
    """mllama's vision gates pi/4 and cross-attention gates 0, Evolla's 0: the values the layers'
    own __init__ writes (the oracle), under every scheme but rezero (which writes 0)."""
    make = _hf_gated_layers()[kind]

    def wrapped():
        root = nn.Module()
        root.layers = nn.ModuleList([make()])
        return root

    eager = wrapped()
    with torch.device("meta"):
        meta = wrapped()
    summary = tinit.init_model_(meta, scheme, device="cpu", d_model=32)
    gates = [e for e in summary if e.role == "residual_gate"]
    assert len(gates) == 2
    for entry in gates:
        want = eager.get_parameter(entry.name) if scheme != "rezero" else torch.zeros(1)
        torch.testing.assert_close(meta.get_parameter(entry.name).detach(), want.detach(), msg=entry.name)


def test_hf_dinov2_layer_scale_is_its_config_value():
    """HF Dinov2's ``_init_weights`` sets LayerScale's lambda1 to ``config.layerscale_value``; a
    model built eagerly is the oracle."""
    config = transformers.Dinov2Config(
        hidden_size=32, num_attention_heads=2, intermediate_size=64, num_hidden_layers=2, layerscale_value=0.25
    )
    torch.manual_seed(0)
    eager = transformers.Dinov2Model(config)
    with torch.device("meta"):
        meta = transformers.Dinov2Model(config)
    summary = tinit.init_model_(meta, "xavier_normal", device="cpu")
    scales = [e for e in summary if "layer_scale" in e.name]
    assert len(scales) == 4 and {e.role for e in summary if "layer_scale" in e.name} == {"residual_gate"}
    for entry in scales:
        torch.testing.assert_close(meta.get_parameter(entry.name), eager.get_parameter(entry.name), msg=entry.name)
    assert [e.name for e in summary if e.role is None] == []
    layer = nn.Module()  # the same layers outside their model: no config, so no known value
    with torch.device("meta"):
        layer.layers = nn.ModuleList([transformers.models.dinov2.modeling_dinov2.Dinov2Layer(config)])
    with pytest.raises(ValueError, match=r"layers\.0\.layer_scale1\.lambda1 \(layer scale\)"):
        tinit.init_model_(layer, "normal", device="cpu")


def _timm_layer_scale():
    """timm's ``LayerScale`` (timm.layers.layer_scale), loaded alone: importing timm itself needs
    torchvision, which this environment does not install."""
    import importlib.util
    import pathlib

    spec = importlib.util.find_spec("timm")
    if spec is None or spec.origin is None:
        pytest.skip("timm is not installed (pip install --no-deps timm)")
    path = pathlib.Path(spec.origin).parent / "layers" / "layer_scale.py"
    module_spec = importlib.util.spec_from_file_location("_timm_layer_scale", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.LayerScale


def test_timm_layer_scale_keeps_its_init_values():
    """timm's VisionTransformer blocks hold ``ls1``/``ls2`` LayerScales whose ``reset_parameters``
    fills gamma with ``init_values``: the eagerly built module is the oracle."""
    layer_scale = _timm_layer_scale()

    def blocks():
        root = nn.Module()
        root.blocks = nn.ModuleList([nn.Module() for _ in range(2)])
        for block in root.blocks:
            block.attn = nn.Module()
            block.attn.qkv, block.attn.proj = nn.Linear(8, 24), nn.Linear(8, 8)
            block.ls1, block.ls2 = layer_scale(8, init_values=1e-5), layer_scale(8, init_values=0.1)
        return root

    eager = blocks()
    with torch.device("meta"):
        meta = blocks()
    summary = {e.name: e for e in tinit.init_model_(meta, "gpt2", device="cpu")}
    for name in ("blocks.0.ls1.gamma", "blocks.1.ls2.gamma"):
        assert summary[name].role == "residual_gate"
        torch.testing.assert_close(meta.get_parameter(name), eager.get_parameter(name), rtol=0, atol=0)
    assert summary["blocks.1.attn.proj.weight"].std == pytest.approx(0.02 / math.sqrt(2 * 2))


@pytest.mark.parametrize("value", [float("nan"), float("inf"), True, "1.0", None])
def test_override_value_must_be_a_finite_number(value):
    with pytest.raises(ValueError, match="value must be a finite number"):
        tinit.init_model_(_Mystery(), "normal", overrides={"mystery": {"value": value}})


def test_override_value_classifies_and_writes_a_constant_under_every_scheme():
    model = _Mystery()
    for scheme in ("normal", "fixup", "xavier_uniform"):
        summary = tinit.init_model_(model, scheme, n_layers=2, d_model=8, overrides={"mystery$": {"value": -2}})
        assert {e.constant for e in summary if e.name.endswith("mystery")} == {-2.0}
        assert torch.equal(model.layers[0].mystery, torch.full((8,), -2.0))


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"d_model": 0}, ValueError, "d_model"),
        ({"d_model": "256"}, TypeError, "d_model"),
        ({"prefix": 3}, TypeError, "prefix"),
        ({"grouped": "no"}, TypeError, "grouped"),
        ({"n_layers": "x"}, TypeError, "n_layers"),
        ({"n_layers": -3}, ValueError, "n_layers"),
        ({"n_layers": {"transformer.h": 0}}, ValueError, "n_layers"),
        ({"only": "("}, ValueError, "only"),
        ({"only": 3}, TypeError, "only"),
        ({"overrides": {"(": "attn_q"}}, ValueError, "override pattern"),
        ({"overrides": ["c_proj"]}, TypeError, "overrides"),
        ({"overrides": {"c_proj": {"layer": "x"}}}, TypeError, "layer"),
        ({"overrides": {"c_proj": {"layout": "x"}}}, ValueError, "layout"),
        ({"backend": "cuda"}, ValueError, "backend 'cuda' cannot fill"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_bad_arguments_leave_a_meta_model_on_meta(kwargs, error, match):
    """Each bad argument is refused, naming it, before the meta model is allocated or anything drawn."""
    model = _hf_gpt2(device="meta")
    state = torch.get_rng_state()
    with pytest.raises(error, match=match):
        tinit.init_model_(model, "gpt2", device="cpu", **kwargs)
    assert all(p.is_meta for p in model.parameters())
    assert torch.equal(torch.get_rng_state(), state)


@pytest.mark.parametrize("model", [torch.zeros(3), None, "gpt2"], ids=["tensor", "none", "str"])
def test_a_model_that_is_not_a_module_is_refused(model):
    state = torch.get_rng_state()
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        tinit.init_model_(model, "gpt2", seed=0)
    assert torch.equal(torch.get_rng_state(), state)


# Typos in the API: refused before anything is written or drawn, with the name that was meant.
def _untouched(call):
    """Run ``call`` on a toy GPT; return the error, after checking that no weight changed and torch's
    RNG was not drawn from."""
    model = GPT(TINY)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    rng = torch.get_rng_state()
    with pytest.raises((TypeError, ValueError)) as error:
        call(model)
    assert torch.equal(torch.get_rng_state(), rng)
    for name, param in model.named_parameters():
        assert torch.equal(param.detach(), before[name]), name
    return error.value


def test_an_override_pattern_that_matches_nothing_is_refused():
    error = _untouched(lambda m: tinit.init_model_(m, "gpt2", seed=0, overrides={r"lm_haed": "head"}))
    assert isinstance(error, ValueError)
    assert "override 'lm_haed' matches no parameter name" in str(error) and "lm_head.weight" in str(error)
    # a pattern that matches a tied name only still counts
    tinit.init_model_(GPT(TINY), "gpt2", seed=0, overrides={r"^lm_head\.weight$": "embedding"})


@pytest.mark.parametrize(
    ("scheme", "option", "meant"),
    [("gpt2", "multiplyer", "multiplier"), ("gpt2", "trunk", "trunc"), ("t5", "dkv", "d_kv")],
)
def test_an_unknown_option_is_a_type_error_listing_the_options(scheme, option, meant):
    error = _untouched(lambda m: tinit.init_model_(m, scheme, seed=0, **{option: 1.0}))
    assert type(error) is TypeError
    options = tinit.schemes.get(scheme).option_names()
    assert f"scheme {scheme!r} has no option {option!r} (did you mean {meant!r}?)" in str(error)
    assert f"its options: {list(options)}" in str(error)


def test_option_names_are_what_each_scheme_accepts():
    """Every scheme takes each of its option_names at its default and refuses any other name."""
    import inspect

    checked = 0
    for name, scheme in tinit.schemes.SCHEMES.items():
        names = scheme.option_names()
        if names is None:  # forwards its options (rezero): its base checks them
            continue
        defaults = {}
        for method in ("rule", "weight", "_std"):
            function = getattr(type(scheme), method, None)
            if function is not None:
                for key, p in inspect.signature(function).parameters.items():
                    if key in names and p.default is not inspect.Parameter.empty:
                        defaults.setdefault(key, p.default)
        kwargs = {"role": "attn_out", "layer_idx": 0, "n_layers": 2, "shape": (8, 8), "d_model": 8}
        if defaults:
            scheme.spec(**kwargs, **defaults)  # no TypeError
            checked += 1
        with pytest.raises(TypeError, match=f"scheme {name!r} has no option 'not_an_option'"):
            scheme.spec(**kwargs, not_an_option=1)
    assert checked >= 15
    assert tinit.schemes.get("gpt2").option_names() == ("std", "multiplier")
    assert tinit.schemes.get("xavier_uniform").option_names() == ("gain",)


@pytest.mark.parametrize(
    ("call", "needle"),
    [
        (lambda m: tinit.init_model_(m, "gtp2", seed=0), "unknown tinit scheme 'gtp2' (did you mean 'gpt2'?)"),
        (lambda m: tinit.fill_(m.lm_head.weight, "olmo_lama", role="head"), "(did you mean 'olmo_llama'?)"),
        (
            lambda m: tinit.init_model_(m, "gpt2", seed=0, overrides={"lm_head": "haed"}),
            "override 'lm_head': unknown role 'haed' (did you mean 'head'?)",
        ),
        (lambda m: tinit.fill_(m.lm_head.weight, "gpt2", role="embeding"), "unknown role 'embeding' (did you mean"),
    ],
    ids=["scheme", "fill-scheme", "override-role", "fill-role"],
)
def test_did_you_mean_for_recipe_and_role_names(call, needle):
    error = _untouched(call)
    assert isinstance(error, tinit.schemes.UnknownNameError) and needle in str(error)
