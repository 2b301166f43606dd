"""What a model's own code says about its parameters that their names do not: expert stacks laid out
as their forward multiplies them, MoE routers nested in a gate module, tensors tied between roles a
recipe initialises differently, and repeated blocks whose residual projections tinit cannot name.

Oracles: torchtitan's own init functions (``depth_scaled_std``, ``_output_linear_init``), torch's
``_calculate_fan_in_and_fan_out`` on one expert's matrix as ``F.linear`` sees it, mup's
``MuSharedReadout`` and GPT-2's 1 / sqrt(2 L) as ``GPT2PreTrainedModel._init_weights`` writes it.
The tied models of torchtitan and OLMo-core themselves are compared in tests/test_recipes_reference.py
(``test_depth_init_against_torchtitan_tied_llama3``, ``test_tied_olmo_against_olmo_core``).
"""

from __future__ import annotations

import json
import math
import re
import warnings

import pytest
import torch
from torch import nn

import tinit
from tinit.tools import hf_families
from tinit.tools.cli import main

transformers = pytest.importorskip("transformers")
param_init = pytest.importorskip("torchtitan.models.common.param_init")

STD = 0.02


def _tolerance(n: int) -> float:
    """Relative tolerance of a pooled std of n normal samples: max(1 %, 5 / sqrt(2 n))."""
    return max(0.01, 5.0 / math.sqrt(2.0 * n))


def _assert_std(values: torch.Tensor, expected: float, what: str) -> None:
    got = values.detach().double().std().item()
    assert got == pytest.approx(expected, rel=_tolerance(values.numel())), f"{what}: std {got} vs {expected}"


def _no_tinit_warnings(record) -> list[str]:
    return [str(w.message) for w in record if "tinit" in str(w.filename) or "init_model_" in str(w.message)]


# --- expert stacks: the layout their forward multiplies --------------------------------------


def _llama4(d=128, f=96, experts=4, layers=2):
    config = transformers.Llama4TextConfig(
        vocab_size=512,
        hidden_size=d,
        intermediate_size=f,
        intermediate_size_mlp=2 * d,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        num_local_experts=experts,
        interleave_moe_layer_step=1,
    )
    with torch.device("meta"):
        return transformers.Llama4ForCausalLM(config)


def test_llama4_experts_under_depth_init_split_gate_and_up_along_the_last_dim():
    """``Llama4TextExperts.forward``: ``gate, up = torch.bmm(x, gate_up_proj).chunk(2, dim=-1)`` with
    gate_up_proj (E, d, 2F); torchtitan's rule: the gate (w1) ``trunc_normal_(std=0.02)``, the up
    projection (w3) and the down projection (w2) ``depth_scaled_std(0.02, layer_id)``."""
    d, f = 128, 96
    model = _llama4(d, f)
    summary = tinit.init_model_(model, "depth_init", seed=0, device="cpu")
    for layer, block in enumerate(model.model.layers):
        experts = block.feed_forward.experts
        gate, up = experts.gate_up_proj.detach().chunk(2, dim=-1)
        _assert_std(gate, STD, f"layer {layer} gate")
        _assert_std(up, param_init.depth_scaled_std(STD, layer), f"layer {layer} up")
        _assert_std(experts.down_proj, param_init.depth_scaled_std(STD, layer), f"layer {layer} down_proj")
    spec = next(e.spec for e in summary if e.name.endswith("layers.1.feed_forward.experts.gate_up_proj"))
    assert spec.split_dim == 2 and spec.segments is None  # halves of the last dim
    assert [p.std for p in spec.parts] == pytest.approx([STD, param_init.depth_scaled_std(STD, 1)], rel=1e-12)


def test_llama4_experts_under_normal_match_hfs_own_init():
    """``Llama4PreTrainedModel._init_weights``: ``init.normal_(gate_up_proj / down_proj,
    std=initializer_range)``, run eagerly; tinit's ``normal`` on the meta-built model, half by half."""
    torch.manual_seed(0)
    eager = _llama4().to_empty(device="cpu")
    eager.init_weights()
    _assert_std(eager.model.layers[0].feed_forward.experts.down_proj, eager.config.initializer_range, "HF's own")
    ours = _llama4()
    tinit.init_model_(ours, "normal", seed=0, device="cpu")
    for block, ref in zip(ours.model.layers, eager.model.layers, strict=True):
        mine, theirs = block.feed_forward.experts, ref.feed_forward.experts
        for a, b in (
            *zip(mine.gate_up_proj.chunk(2, -1), theirs.gate_up_proj.chunk(2, -1), strict=True),
            (mine.down_proj, theirs.down_proj),
        ):
            _assert_std(a, b.detach().double().std().item(), "tinit normal vs HF _init_weights")


@pytest.mark.parametrize("scheme", ["kaiming_normal", "kaiming_uniform"])
def test_llama4_experts_get_one_experts_fans(scheme):
    """std = gain / sqrt(fan_in), fan_in as torch computes it for one expert's matrix as ``F.linear``
    would take it (``W[e].T``): d for gate_up_proj, F for down_proj."""
    d, f = 128, 96
    model = _llama4(d, f)
    tinit.init_model_(model, scheme, seed=0, device="cpu")
    gain = torch.nn.init.calculate_gain("relu")
    experts = model.model.layers[0].feed_forward.experts
    for weight, expected_fan in ((experts.gate_up_proj, d), (experts.down_proj, f)):
        fan_in, _ = torch.nn.init._calculate_fan_in_and_fan_out(weight[0].detach().T)
        assert fan_in == expected_fan
        _assert_std(weight, gain / math.sqrt(fan_in), f"{scheme} {tuple(weight.shape)}")


class _Block(nn.Module):
    def __init__(self, experts: nn.Module):
        super().__init__()
        self.mlp = nn.Module()
        self.mlp.experts = experts


class _Layers(nn.Module):
    def __init__(self, make, n=2):
        super().__init__()
        self.layers = nn.ModuleList(_Block(make()) for _ in range(n))


class _BmmExperts(nn.Module):
    """No flag, no family: the forward multiplies x @ W (Llama-4's way)."""

    def __init__(self, e=4, d=64, f=48):
        super().__init__()
        self.gate_up_proj = nn.Parameter(torch.empty(e, d, 2 * f))
        self.down_proj = nn.Parameter(torch.empty(e, f, d))

    def forward(self, x):
        gate, up = torch.bmm(x, self.gate_up_proj).chunk(2, dim=-1)
        return torch.bmm(up * torch.relu(gate), self.down_proj)


class _LinearExperts(nn.Module):
    """No flag, no family: ``F.linear`` per expert (transformers' usual (E, out, in))."""

    def __init__(self, e=4, d=64, f=48):
        super().__init__()
        self.gate_up_proj = nn.Parameter(torch.empty(e, 2 * f, d))
        self.down_proj = nn.Parameter(torch.empty(e, d, f))

    def forward(self, x, e=0):
        gate, up = nn.functional.linear(x, self.gate_up_proj[e]).chunk(2, dim=-1)
        return nn.functional.linear(up * gate, self.down_proj[e])


def _apply(w1, w2, x):
    return (x @ w1) @ w2


class _HelperExperts(_BmmExperts):
    """The forward hands the stacks to a helper: nothing in it says the layout."""

    def forward(self, x):
        return _apply(self.gate_up_proj, self.down_proj, x)


@pytest.mark.parametrize(
    ("kind", "fans"),
    [(_BmmExperts, (64, 48)), (_LinearExperts, (64, 48))],
    ids=["bmm-in-out", "linear-out-in"],
)
def test_an_undeclared_stack_is_read_from_its_forward(kind, fans):
    model = _Layers(kind)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        tinit.init_model_(model, "kaiming_normal", seed=0)
    assert not _no_tinit_warnings(record)
    gain = torch.nn.init.calculate_gain("relu")
    experts = model.layers[0].mlp.experts
    for weight, fan_in in zip((experts.gate_up_proj, experts.down_proj), fans, strict=True):
        as_linear = weight[0].detach() if kind is _LinearExperts else weight[0].detach().T
        assert torch.nn.init._calculate_fan_in_and_fan_out(as_linear)[0] == fan_in
        _assert_std(weight, gain / math.sqrt(fan_in), f"{kind.__name__} {tuple(weight.shape)}")


def test_a_stack_nothing_decides_warns_and_its_override_fixes_it():
    model = _Layers(_HelperExperts)
    undecided = r"expert stack _HelperExperts\.(gate_up|down)_proj.*'layout': 'expert_in_out'"
    with pytest.warns(UserWarning, match=undecided):
        tinit.init_model_(model, "kaiming_normal", seed=0)
    experts = model.layers[0].mlp.experts
    _assert_std(experts.gate_up_proj, math.sqrt(2.0 / (2 * 48)), "read as (E, out, in): fan_in 2F")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        tinit.init_model_(model, "kaiming_normal", seed=0, overrides={r"experts\.": {"layout": "expert_in_out"}})
    assert not _no_tinit_warnings(record)
    _assert_std(experts.gate_up_proj, math.sqrt(2.0 / 64), "overridden: fan_in d")


class _FlaggedExperts(_BmmExperts):
    """transformers' ``use_experts_implementation(is_transposed=True, is_concatenated=...)`` flags."""

    def __init__(self, concatenated: bool):
        super().__init__()
        self.is_transposed, self.is_concatenated = True, concatenated


@pytest.mark.parametrize("concatenated", [True, False], ids=["halves", "interleaved"])
def test_the_modules_is_concatenated_flag_orders_gate_and_up(concatenated):
    """GptOssExperts (``is_concatenated=False``): gate = x[..., ::2], up = x[..., 1::2]; the others
    ``chunk(2, dim=-1)``. depth_init at block 1: gate 0.02, up ``depth_scaled_std(0.02, 1)``."""
    model = _Layers(lambda: _FlaggedExperts(concatenated))
    tinit.init_model_(model, "depth_init", seed=0, d_model=64)
    gate_up = model.layers[1].mlp.experts.gate_up_proj.detach()
    gate, up = gate_up.chunk(2, dim=-1) if concatenated else (gate_up[..., ::2], gate_up[..., 1::2])
    _assert_std(gate, STD, "gate")
    _assert_std(up, param_init.depth_scaled_std(STD, 1), "up")


# --- routers nested in a gate module ---------------------------------------------------------


def test_hunyuan_moe_router_is_depth_scaled():
    """``HunYuanMoEV1Gate``: ``router_logits = self.wg(x)``, the router of ``mlp.gate``; torchtitan's
    MoE router: ``gate_param_init=depth_init(layer_id)``."""
    config = transformers.HunYuanMoEV1Config(
        vocab_size=512,
        hidden_size=128,
        intermediate_size=256,
        moe_intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        num_experts=16,
        moe_topk=2,
        num_shared_expert=1,
    )
    with torch.device("meta"):
        model = transformers.HunYuanMoEV1ForCausalLM(config)
    summary = {e.name: e for e in tinit.init_model_(model, "depth_init", seed=0, device="cpu")}
    for layer, block in enumerate(model.model.layers):
        entry = summary[f"model.layers.{layer}.mlp.gate.wg.weight"]
        expected = param_init.depth_scaled_std(STD, layer)
        assert (entry.role, entry.layer) == ("router", layer)
        assert entry.std == pytest.approx(expected, rel=1e-12)
        _assert_std(block.mlp.gate.wg.weight, expected, f"layer {layer} wg")


@pytest.mark.parametrize(
    "name",
    [
        "model.layers.3.mlp.gate.wg.weight",  # HunYuan-MoE
        "model.layers.3.mlp.router.layer.weight",  # JetMoE
        "model.layers.3.mlp.router.classifier.weight",  # LongCat-Flash
        "model.layers.3.mlp.router.classifier.bias",
    ],
)
def test_a_linear_inside_a_router_is_the_router(name):
    assert tinit.roles.infer_role(name) == "router"


def test_a_dense_mlps_gate_projection_stays_an_input_projection():
    assert tinit.roles.infer_role("model.layers.3.mlp.gate_proj.weight") == "mlp_in"
    assert tinit.roles.infer_role("roberta.lm_head.decoder.weight") == "head"


# --- tied embeddings and head ----------------------------------------------------------------


def _tied_llama(d=128, vocab=512):
    config = transformers.LlamaConfig(
        vocab_size=vocab,
        hidden_size=d,
        intermediate_size=2 * d,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=True,
    )
    with torch.device("meta"):
        return transformers.LlamaForCausalLM(config)


def test_tied_llama_under_depth_init_gets_torchtitans_head_init():
    """torchtitan's tied Llama 3.2 flavours: ``tok_embeddings`` ``skip_param_init``, the shared
    tensor drawn by ``_output_linear_init(dim)``: trunc_normal_(std=s, a=-3 s, b=3 s), s = dim^-1/2."""
    llama3 = pytest.importorskip("torchtitan.models.llama3")
    d, vocab = 128, 512
    model = _tied_llama(d, vocab)
    summary = tinit.init_model_(model, "depth_init", seed=0, device="cpu")
    entry = summary[0]
    assert (entry.name, entry.role, entry.tied) == ("model.embed_tokens.weight", "head", ("lm_head.weight",))
    weight = model.lm_head.weight
    assert weight is model.model.embed_tokens.weight
    reference = torch.empty(vocab, d)
    torch.manual_seed(0)
    llama3._output_linear_init(d)["weight"](reference)
    _assert_std(weight, reference.std().item(), "tied tensor vs torchtitan's draw")
    s = d**-0.5
    assert weight.abs().max().item() <= 3 * s
    assert entry.std == pytest.approx(s, rel=1e-12) and entry.trunc == 3.0


def test_tied_readout_under_mup_is_the_embedding():
    """mup's ``MuSharedReadout(weight)`` reuses the ``nn.Embedding``'s weight: no zero readout."""
    pytest.importorskip("mup")
    model = _tied_llama()
    entry = tinit.init_model_(model, "mup", seed=0, device="cpu")[0]
    assert entry.role == "embedding"
    _assert_std(model.lm_head.weight, STD, "mup tied readout")


def test_a_tie_without_a_reference_rule_is_refused_naming_both_roles():
    """OLMo-core refuses ``tie_word_embeddings`` for the normalized transformer; tinit refuses the
    tensor before materialising anything, and an override of either name decides."""
    model = _tied_llama()
    with pytest.raises(
        ValueError, match=r"model\.embed_tokens\.weight \(embedding\), lm_head\.weight \(head\) are one tensor"
    ) as refused:
        tinit.init_model_(model, "olmo_normalized", seed=0, device="cpu")
    assert "overrides=" in str(refused.value)
    assert all(p.is_meta for p in model.parameters())
    for pattern, role, std in (("lm_head", "head", 128**-0.5), (r"embed_tokens", "embedding", 128**-0.5)):
        model = _tied_llama()
        entry = tinit.init_model_(model, "olmo_normalized", seed=0, device="cpu", overrides={pattern: role})[0]
        assert entry.role == role
        trunc = 3.0 if role == "head" else math.inf
        assert (entry.std, entry.trunc) == (pytest.approx(std), trunc)


def test_a_tie_whose_rules_agree_needs_no_rule():
    model = _tied_llama()
    entry = tinit.init_model_(model, "olmo_normalized", seed=0, device="cpu", trunc=math.inf)[0]
    assert entry.role == "embedding"  # untruncated, the head's rule is the embedding's


TIED_LLAMA = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "num_hidden_layers": 2,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 256,
    "bos_token_id": 0,
    "eos_token_id": 0,
    "tie_word_embeddings": True,
}


def test_cli_tied_config_under_depth_init_saves_the_heads_init(tmp_path, capsys):
    """``tinit init --config <tied Llama config.json> --scheme depth_init --save``: the saved tensor
    is drawn by torchtitan's head rule, bit for bit what ``init_model_`` writes."""
    pytest.importorskip("safetensors")
    from safetensors.torch import load_file

    path = tmp_path / "config.json"
    path.write_text(json.dumps(TIED_LLAMA))
    argv = ["init", "--config", str(path), "--scheme", "depth_init", "--no-progress", "--save", str(tmp_path / "out")]
    assert main(argv) == 0, capsys.readouterr()
    saved = load_file(str(tmp_path / "out" / "model.safetensors"))
    record = json.loads((tmp_path / "out" / "tinit_init.json").read_text())
    assert any(row["role"].startswith("head") for row in record["roles"])
    fields = {k: v for k, v in TIED_LLAMA.items() if k not in ("model_type", "architectures")}
    model = hf_families.build(hf_families.from_fields("llama", fields))
    tinit.init_model_(model, "depth_init", seed=0, device="cpu")
    torch.testing.assert_close(saved["model.embed_tokens.weight"], model.model.embed_tokens.weight, rtol=0, atol=0)
    assert saved["model.embed_tokens.weight"].abs().max().item() <= 3 * 64**-0.5


def test_cli_refusal_names_both_roles_and_override_decides(tmp_path, capsys):
    config = json.dumps(TIED_LLAMA)
    assert main(["init", "--config", config, "--scheme", "olmo_normalized", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "(embedding), lm_head.weight (head) are one tensor" in err and "--override REGEX=ROLE" in err
    out = tmp_path / "out"
    argv = ["init", "--config", config, "--scheme", "olmo_normalized", "--no-progress", "--override", "lm_head=head"]
    assert main([*argv, "--save", str(out)]) == 0, capsys.readouterr()
    record = json.loads((out / "tinit_init.json").read_text())
    assert record["options"]["overrides"] == {"lm_head": "head"}


@pytest.mark.parametrize(
    ("value", "needle"),
    [("lm_head", "expected REGEX=ROLE"), ("lm_head=hed", "unknown role 'hed'"), ("(=head", "not a valid regex")],
)
def test_cli_bad_override_exits_2_before_allocating(capsys, value, needle):
    with pytest.raises(SystemExit) as exited:
        main(["init", "--config", json.dumps(TIED_LLAMA), "--override", value, "--no-progress"])
    assert exited.value.code == 2
    assert needle in capsys.readouterr().err


# --- repeated blocks tinit cannot place ------------------------------------------------------


class _StackBlock(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.w_in, self.w_out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)


class _StackNet(nn.Module):
    """Blocks in ``self.stack``, projections ``proj`` / ``w_out``: no name tinit reads as a block
    index or a residual projection."""

    def __init__(self, d=64, n_layers=4, vocab=100):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.stack = nn.ModuleList(_StackBlock(d) for _ in range(n_layers))
        self.lm_head = nn.Linear(d, vocab, bias=False)


STACK_OVERRIDES = {
    r"stack\.(?P<layer>\d+)\.proj\.weight": "attn_out",
    r"stack\.(?P<layer>\d+)\.w_out\.weight": "mlp_out",
}


def test_unplaced_blocks_warn_under_gpt2_naming_the_container_and_the_override():
    model = _StackNet()
    with pytest.warns(UserWarning, match=r"no parameter of 'stack' \(4 blocks of _StackBlock\)") as record:
        tinit.init_model_(model, "gpt2", seed=0)
    message = str(record[0].message)
    assert "stack.0.proj.weight (linear)" in message and "overrides=" in message and "(?P<layer>" in message
    _assert_std(model.stack[3].proj.weight, STD, "without the override: the plain rule")


def test_the_named_override_gives_gpt2s_depth_scaling():
    """GPT-2 (``GPT2PreTrainedModel._init_weights``): residual projections
    N(0, (initializer_range / sqrt(2 n_layer))^2), L counted from the layer groups."""
    n_layers = 4
    model = _StackNet(n_layers=n_layers)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        summary = {e.name: e for e in tinit.init_model_(model, "gpt2", seed=0, overrides=STACK_OVERRIDES)}
    assert not _no_tinit_warnings(record)
    expected = STD / math.sqrt(2 * n_layers)
    for layer, block in enumerate(model.stack):
        for leaf, role in (("proj", "attn_out"), ("w_out", "mlp_out")):
            entry = summary[f"stack.{layer}.{leaf}.weight"]
            assert (entry.role, entry.layer, entry.tower) == (role, layer, "stack")
            assert entry.std == pytest.approx(expected, rel=1e-12)
        _assert_std(torch.cat([block.proj.weight.flatten(), block.w_out.weight.flatten()]), expected, "depth-scaled")
    _assert_std(model.stack[0].w_in.weight, STD, "w_in")


def test_the_layer_group_gives_each_block_its_own_depth_under_depth_init():
    model = _StackNet()
    summary = {e.name: e for e in tinit.init_model_(model, "depth_init", seed=0, overrides=STACK_OVERRIDES)}
    for layer in range(4):
        expected = param_init.depth_scaled_std(STD, layer)
        assert summary[f"stack.{layer}.proj.weight"].std == pytest.approx(expected, rel=1e-12)
        assert summary[f"stack.{layer}.w_out.weight"].std == pytest.approx(expected, rel=1e-12)


def test_recognised_blocks_without_residual_projections_warn_too():
    class Mixer(nn.Module):
        def __init__(self):
            super().__init__()
            self.mix = nn.Module()
            self.mix.fuse = nn.Linear(16, 16)

    model = nn.Module()
    model.layers = nn.ModuleList(Mixer() for _ in range(3))
    with pytest.warns(UserWarning, match=re.escape("no parameter of 'layers' (3 blocks of Mixer)")) as record:
        tinit.init_model_(model, "megatron", seed=0)
    assert "carry no block index" not in str(record[0].message)


@pytest.mark.parametrize("scheme", ["normal", "xavier_uniform", "kaiming_normal"])
def test_recipes_that_treat_every_matrix_alike_do_not_warn(scheme):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        tinit.init_model_(_StackNet(), scheme, seed=0)
    assert not _no_tinit_warnings(record)
