"""init_model_'s module walk: roles, layers and ties as the module tree implies them
(ParameterList/ParameterDict leaves, shared submodules, None parameters, overridden
``named_modules``, ``prefix=``), grouped or one by one.
"""

from __future__ import annotations

import pytest
import torch
from helpers.grouped import (
    PARAM_CONTAINER_ENTRIES,
    SEED,
    ChildHides,
    MixedDtypes,
    ParamContainers,
    RootHides,
    SharedModules,
    assert_matches_write_spec,
    prefilled,
)
from torch import nn

import tinit
from tinit import schemes

# --- init_model_: module walk ------------------------------------------------


@pytest.mark.parametrize("grouped_fill", [True, False], ids=["grouped", "one-by-one"])
def test_parameter_list_and_dict_leaves(grouped_fill):
    """Digit leaves get their layer from the whole name; values are write_spec_'s."""
    model = prefilled(ParamContainers())
    with pytest.raises(ValueError, match=r"h\.0, h\.1, h\.2"):  # unclassified raw parameters: refused
        tinit.init_model_(model, "normal", seed=SEED, grouped=grouped_fill)
    summary = tinit.init_model_(model, "normal", seed=SEED, grouped=grouped_fill, unclassified="mlp_in")
    expected = [(name, role or "mlp_in", layer) for name, role, layer in PARAM_CONTAINER_ENTRIES]
    assert sorted((e.name, e.role, e.layer) for e in summary) == sorted(expected)
    assert [e.name for e in summary] == [n for n, _ in model.named_parameters()]
    assert_matches_write_spec(model, summary, SEED)


@pytest.mark.parametrize("grouped_fill", [True, False], ids=["grouped", "one-by-one"])
def test_shared_submodules_and_none_parameters(grouped_fill):
    """A module under several names: written once under the first name (its layer), the others
    listed as ties; a None parameter is skipped. The shared Linear's names have roles gpt2 draws
    differently (mlp_in and linear 0.02, attn_out 0.02 / sqrt(2 L)) and gpt2 has no rule for such a
    tensor: refused before anything is written, naming each name's role, until an override of any
    of its names says which rule it takes."""
    model = prefilled(SharedModules())
    before = {k: v.clone() for k, v in model.state_dict().items()}
    refused = r"h\.0\.mlp\.c_fc\.weight \(mlp_in\), h\.2\.attn\.c_proj\.weight \(attn_out\), extra\.weight \(linear\)"
    with pytest.raises(ValueError, match=refused):
        tinit.init_model_(model, "gpt2", seed=SEED, grouped=grouped_fill, d_model=8, n_layers=3)
    for key, value in model.state_dict().items():
        torch.testing.assert_close(value, before[key], rtol=0, atol=0)
    summary = tinit.init_model_(
        model, "gpt2", seed=SEED, grouped=grouped_fill, d_model=8, n_layers=3, overrides={r"^extra\.weight$": "mlp_in"}
    )
    got = [(e.name, e.role, e.layer, e.tied) for e in summary]
    assert got == [
        ("h.0.mlp.c_fc.weight", "mlp_in", 0, ("h.2.attn.c_proj.weight", "extra.weight")),
        ("h.0.mlp.c_fc.bias", "bias", 0, ("h.2.attn.c_proj.bias", "extra.bias")),
        ("h.1.ln_1.weight", "norm", 1, ("ln_f.weight",)),
        ("h.1.ln_1.bias", "bias", 1, ("ln_f.bias",)),
        ("h.1.mlp.c_proj.weight", "mlp_out", 1, ()),
    ]
    assert_matches_write_spec(model, summary, SEED)
    only_alias = tinit.init_model_(
        prefilled(SharedModules()), "normal", seed=SEED, d_model=8, n_layers=3, only=r"^extra\.weight$"
    )
    assert [e.name for e in only_alias] == ["h.0.mlp.c_fc.weight"], "only= matching a tied alias"


def test_root_module_overriding_named_modules_is_respected():
    model = prefilled(RootHides())
    with torch.no_grad():
        model.b.weight.fill_(7.0)  # not reached by model.parameters()
    summary = tinit.init_model_(model, "normal", seed=SEED)
    assert [e.name for e in summary] == ["a.weight", "a.bias"] == [n for n, _ in model.named_parameters()]
    torch.testing.assert_close(
        model.b.weight.detach(),
        torch.full((4, 4), 7.0),
        rtol=0,
        atol=0,
        msg="a parameter named_modules hides was written",
    )


def test_child_module_overriding_named_modules_is_respected():
    model = prefilled(ChildHides())
    with torch.no_grad():
        model.inner.b.weight.fill_(7.0)  # not reached by model.parameters()
    summary = tinit.init_model_(model, "normal", seed=SEED)
    listed = [n for n, _ in model.named_parameters()]
    assert listed == ["inner.a.weight", "inner.a.bias", "h.0.weight", "h.0.bias"]
    assert [e.name for e in summary] == listed, "summary differs from named_parameters"
    torch.testing.assert_close(
        model.inner.b.weight.detach(),
        torch.full((4, 4), 7.0),
        rtol=0,
        atol=0,
        msg="inner.b.weight (hidden by inner's named_modules) was written",
    )


@pytest.mark.parametrize(
    ("prefix", "layer"),
    [
        pytest.param("model.layers.3.", 3, id="dotted"),
        pytest.param("blocks.12.", 12, id="dotted-two-digits"),
        pytest.param("h.3", None, id="undotted-one-digit"),
        pytest.param("model.layers.33", None, id="undotted-two-digits"),
    ],
)
def test_prefix_layer_of_root_parameters(prefix, layer):
    """The layer of a root-level parameter is infer_layer(prefix + leaf), as in aef9101."""
    summary = tinit.init_model_(nn.Linear(4, 4), "normal", seed=SEED, prefix=prefix, n_layers=50)
    assert [(e.name, e.layer) for e in summary] == [(prefix + "weight", layer), (prefix + "bias", layer)]


def test_overrides_layer_role_and_options_reach_the_values():
    model = prefilled(MixedDtypes(n_layers=3))
    overrides = {
        r"h\.2\.mlp\.c_proj": {"role": "attn_out", "layer": 0, "options": {"std": 0.5}},
        r"^wte": {"role": "head", "options": {"trunc": 3.0}},
    }
    # d_model for the head's d^-1/2 (the overridden wte leaves no embedding to read it from)
    summary = tinit.init_model_(model, "depth_init", seed=SEED, overrides=overrides, d_model=12)
    by_name = {e.name: e for e in summary}
    entry = by_name["h.2.mlp.c_proj.weight"]
    assert (entry.role, entry.layer) == ("attn_out", 0)
    plain = by_name["h.0.attn.c_proj.weight"]  # depth_init, layer 0: std / sqrt(2 (0 + 1))
    assert entry.std == pytest.approx(plain.std / 0.02 * 0.5)
    assert (by_name["wte.weight"].role, by_name["wte.weight"].trunc) == ("head", 3.0)
    assert_matches_write_spec(model, summary, SEED)


@pytest.mark.parametrize("base", ["depth_init", "mitchell"])
def test_rezero_with_a_depth_dependent_base(base):
    model = MixedDtypes(n_layers=3)
    for block in model.h:
        block.resweight = nn.Parameter(torch.ones(1))
    summary = tinit.init_model_(model, "rezero", seed=SEED, base=base)
    rezero = schemes.get("rezero")
    for entry in summary:
        if entry.name.endswith("attn.c_proj.weight"):
            want = rezero.spec(
                role=entry.role,
                layer_idx=entry.layer,
                n_layers=3,
                d_model=12,
                base=base,
                shape=tuple(model.get_parameter(entry.name).shape),
            )
            assert entry.std == pytest.approx(want.std), f"{entry.name} (layer {entry.layer})"
