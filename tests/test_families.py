"""tinit.families: the Family record, its registry, and what init_model_ reads from a registered family."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import tinit
from tinit import buffers, families
from tinit.families import Family, FusedQKV
from tinit.roles import infer_role


@pytest.fixture
def registry(monkeypatch):
    """A copy of the registries, so a test's family (and its buffer recipes) go with it."""
    monkeypatch.setattr(families, "FAMILIES", dict(families.FAMILIES))
    monkeypatch.setattr(buffers, "RECIPES", list(buffers.RECIPES))
    return families


def test_every_built_in_buffer_recipe_belongs_to_one_family():
    claimed = [id(recipe) for f in families.FAMILIES.values() for recipe in f.buffers]
    assert len(claimed) == len(set(claimed)), "a recipe listed by two families"
    assert sorted(claimed) == sorted(map(id, buffers.RECIPES))


def test_fused_layout_of_a_registered_model_type(registry):
    config = {"model_type": "toy_lm", "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 16}
    with pytest.raises(ValueError, match="register a tinit.families.Family"):
        families.fused_qkv_of_config(config)
    registry.register(Family("toy_lm", model_types=("toy_lm",), fused_qkv="grouped"))
    assert families.fused_qkv_of_config(config) == FusedQKV.from_heads(8, 2, 16, "grouped")
    assert families.family_of(config).name == "toy_lm"


def test_expert_layouts_of_a_registered_family(registry):
    class ToyExperts(nn.Module):
        num_experts = 4

    registry.register(
        Family(
            "toy_moe",
            model_types=("toy_moe",),
            expert_stack="expert_in_out",
            grouped_experts={("ToyExperts", "w_in"): ("grouped_in_out", "num_experts")},
        )
    )
    assert families.expert_layout(nn.Module(), "w", 3, "toy_moe") == ("expert_in_out", None)
    assert families.expert_layout(ToyExperts(), "w_in", 2) == ("grouped_in_out", 4)
    assert families.expert_layout(ToyExperts(), "w_out", 2) is None


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(4)
        self.ln.__class__ = type("ToyOffsetNorm", (nn.LayerNorm,), {})  # its forward is LayerNorm's
        self.res_gate = nn.Parameter(torch.ones(4))
        self.mlp = nn.Module()
        self.mlp.hinge = nn.Linear(4, 8)  # a name tinit.roles does not know
        self.mlp.lift = nn.Linear(4, 8)  # an up projection without its gate
        self.mlp.down_proj = nn.Linear(8, 4)


class _Toy(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([_Block() for _ in range(2)])


def test_a_registered_family_reaches_init_model(registry):
    """Gate values, offset-gain norms, leaf roles and gate/up pairs of a registered family, by their keys."""
    model = _Toy()
    before = {e.name: e for e in tinit.init_model_(_Toy(), "normal", seed=0)}
    assert infer_role("layers.0.mlp.hinge.weight") is None  # "linear" by its module type only
    assert before["layers.0.mlp.lift.weight"].role == "linear"
    assert (before["layers.0.res_gate"].constant, before["layers.0.ln.weight"].constant) == (1.0, 1.0)
    registry.register(
        Family(
            "toy",
            gates={("_Block", "res_gate"): lambda module, model: 0.25},
            offset_gain_norms={"ToyOffsetNorm"},
            leaf_roles={"hinge": "mlp_in", "lift": "mlp_up"},
            gate_of_up={"lift": "hinge"},
        )
    )
    assert infer_role("layers.0.mlp.hinge.weight") == "mlp_in"
    summary = {e.name: e for e in tinit.init_model_(model, "normal", seed=0)}
    assert summary["layers.0.mlp.lift.weight"].role == "mlp_up"  # its gate "hinge" is beside it
    assert summary["layers.0.res_gate"].constant == 0.25
    torch.testing.assert_close(model.layers[1].res_gate.detach(), torch.full((4,), 0.25), rtol=0, atol=0)
    assert summary["layers.0.ln.weight"].constant == 0.0  # 1 + weight: the gain 1 written as 0


def test_buffers_of_a_registered_family_are_recipes(registry):
    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("steps", torch.zeros(3))

    class Zeros(buffers.BufferRecipe):
        name = "counter"

        def claims(self, module):
            return ("steps",) if isinstance(module, Counter) else ()

        def values(self, module):
            return {"steps": torch.zeros(3)}

    with torch.device("meta"):
        model = Counter()
    with pytest.raises(buffers.UninitialisedBufferError):
        tinit.materialise_(model, "cpu")
    recipe = Zeros()
    registry.register(Family("counter", buffers=(recipe,)))
    assert buffers.RECIPES[0] is recipe
    tinit.materialise_(model, "cpu")
    torch.testing.assert_close(model.steps, torch.zeros(3), rtol=0, atol=0)


@pytest.mark.parametrize(
    ("family", "match"),
    [
        (Family("falcon"), "is registered"),
        (Family("other_falcon", model_types=("falcon",)), "model_type 'falcon'"),
        (Family("other_llama", gate_of_up={"up_proj": "w1"}), "gate_of_up 'up_proj'"),
        (Family("bad_role", leaf_roles={"q_proj": "attn_v"}), "gives 'q_proj' the role 'attn_q'"),
        (Family("no_role", leaf_roles={"hinge": "no_such_role"}), "no role"),
    ],
    ids=["name", "model-type", "gate-of-up", "contradicts-roles", "unknown-role"],
)
def test_register_refuses_clashes(registry, family, match):
    with pytest.raises(ValueError, match=match):
        registry.register(family)


def test_register_replaces_when_asked(registry):
    replaced = registry.register(Family("falcon", model_types=("falcon",), fused_qkv="contiguous"), replace=True)
    assert families.FAMILIES["falcon"] is replaced
    config = {"model_type": "falcon", "num_attention_heads": 8, "num_kv_heads": 2, "new_decoder_architecture": True}
    assert families.fused_qkv_of_config({**config, "hidden_size": 128}) == FusedQKV.from_heads(8, 2, 16)  # not grouped


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"name": ""}, TypeError),
        ({"model_types": "llama"}, TypeError),
        ({"fused_qkv": "diagonal"}, ValueError),
        ({"expert_stack": "out_in"}, ValueError),
        ({"gate_up": "thirds"}, ValueError),
        ({"grouped_experts": {("M", "w"): ("expert_out_in", "n")}}, ValueError),
        ({"gates": {("M", "g"): math.pi}}, TypeError),
        ({"buffers": (object(),)}, TypeError),
        ({"gate_of_up": [("up", "gate")]}, TypeError),
    ],
    ids=["name", "model-types", "fused", "expert-stack", "gate-up", "grouped", "gates", "buffers", "mapping"],
)
def test_bad_fields_are_refused(fields, error):
    with pytest.raises(error):
        Family(**{"name": "x", **fields})
    with pytest.raises(TypeError, match="Family"):
        families.register("x")


def _llama4_text(d=128, f=96):
    transformers = pytest.importorskip("transformers")
    config = transformers.Llama4TextConfig(
        vocab_size=512,
        hidden_size=d,
        intermediate_size=f,
        intermediate_size_mlp=2 * d,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        num_local_experts=4,
        interleave_moe_layer_step=1,
    )
    with torch.device("meta"):
        return transformers.Llama4ForCausalLM(config)


def test_llama4_experts_are_read_as_their_forward_multiplies_them():
    """transformers' ``Llama4TextExperts.forward`` computes ``torch.bmm(x, gate_up_proj)`` with
    ``gate_up_proj`` (E, d, 2F), then ``gate, up = chunk(2, dim=-1)``, and ``torch.bmm(h, down_proj)``
    with ``down_proj`` (E, F, d): one expert's fan_in is d for gate_up_proj and F for down_proj
    (kaiming: std sqrt(2 / fan_in)), and the gate is the first half of the LAST dim (torchtitan's
    depth_init: gate std 0.02, up 0.02 / sqrt(2 (layer + 1)))."""
    d, f = 128, 96
    model = _llama4_text(d, f)
    tinit.init_model_(model, "kaiming_normal", seed=0, device="cpu")
    experts = model.model.layers[0].feed_forward.experts
    for weight, fan_in in ((experts.gate_up_proj, d), (experts.down_proj, f)):
        assert weight.std().item() == pytest.approx(math.sqrt(2.0 / fan_in), rel=0.02)
    model = _llama4_text(d, f)
    tinit.init_model_(model, "depth_init", seed=0, device="cpu")
    gate_up = model.model.layers[1].feed_forward.experts.gate_up_proj.detach()
    assert gate_up[..., :f].std().item() == pytest.approx(0.02, rel=0.02)
    assert gate_up[..., f:].std().item() == pytest.approx(0.02 / math.sqrt(2 * (1 + 1)), rel=0.02)
