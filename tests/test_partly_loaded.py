"""init_model_ and materialise_ on a partly loaded model: what holds values is neither re-allocated
nor written unless selected (``only=`` or ``reinit_loaded=True``); what is on the meta device is
materialised and written with the bits an all-meta init gives it; ties are kept across both."""

from __future__ import annotations

import pytest
import torch
from helpers import assert_same_bits
from torch import nn

import tinit

LOADED = 0.5


class Net(nn.Module):
    """An embedding, a body (linear, norm, batch norm with its buffers) and an output head."""

    def __init__(self, tie: bool = False):
        super().__init__()
        self.embed = nn.Embedding(16, 8, padding_idx=1)
        self.body = nn.Linear(8, 8)
        self.norm = nn.LayerNorm(8)
        self.bn = nn.BatchNorm1d(8)
        self.head = nn.Linear(8, 16, bias=False)
        if tie:
            self.head.weight = self.embed.weight


def _meta(tie: bool = False) -> Net:
    with torch.device("meta"):
        return Net(tie)


def _partly_loaded(on_meta=("head.",), tie: bool = False) -> Net:
    """Every parameter and buffer loaded with 0.5 (a checkpoint), except those under ``on_meta``."""
    model = _meta(tie)
    loaded = {}
    for module_name, module in model.named_modules():
        for leaf, tensor in [*module._parameters.items(), *module._buffers.items()]:
            name = f"{module_name}.{leaf}" if module_name else leaf
            if tensor is None or name.startswith(on_meta):
                continue
            if id(tensor) not in loaded:
                value = torch.full(tensor.shape, LOADED, dtype=tensor.dtype)
                loaded[id(tensor)] = nn.Parameter(value, tensor.requires_grad) if leaf in module._parameters else value
            target = module._parameters if leaf in module._parameters else module._buffers
            target[leaf] = loaded[id(tensor)]
    return model


def _all_meta_init(**kwargs) -> Net:
    model = _meta(kwargs.pop("tie", False))
    tinit.init_model_(model, "normal", seed=0, device="cpu", **kwargs)
    return model


def _assert_loaded(model: Net, names) -> None:
    state = dict(model.named_parameters())
    for name in names:
        torch.testing.assert_close(
            state[name].detach(), torch.full_like(state[name], LOADED), rtol=0, atol=0, msg=f"{name} was written"
        )


BODY = ("embed.weight", "body.weight", "body.bias", "norm.weight", "norm.bias", "bn.weight", "bn.bias")


@pytest.mark.parametrize("only", [r"^head\.", None], ids=["only-head", "default"])
def test_loaded_body_is_kept_and_the_meta_head_written(only):
    """The reproducer: body loaded with 0.5, head on meta. The body keeps its tensors and values (the
    old to_empty of the whole model left [nan, 3.7e-38, ...] in them); the head gets the bits an
    all-meta init gives it."""
    model = _partly_loaded()
    body = {name: (p, p.data_ptr()) for name, p in model.named_parameters() if not name.startswith("head.")}
    summary = tinit.init_model_(model, "normal", seed=0, only=only, device="cpu")
    assert [e.name for e in summary] == ["head.weight"]
    _assert_loaded(model, BODY)
    for name, param in model.named_parameters():
        if name in body:
            assert param is body[name][0] and param.data_ptr() == body[name][1], f"{name} was re-allocated"
    assert_same_bits(model.head.weight, _all_meta_init().head.weight, "head.weight")
    for name in ("running_mean", "running_var"):  # loaded buffers keep their values too
        torch.testing.assert_close(getattr(model.bn, name), torch.full((8,), LOADED), rtol=0, atol=0)


def test_reinit_loaded_writes_everything_as_an_all_meta_init():
    model = _partly_loaded()
    summary = tinit.init_model_(model, "normal", seed=0, device="cpu", reinit_loaded=True)
    reference = _all_meta_init()
    assert len(summary) == len(list(model.parameters()))
    for (name, got), want in zip(model.named_parameters(), reference.parameters(), strict=True):
        assert_same_bits(got, want, name)


def test_only_selects_loaded_parameters_explicitly():
    """``only=`` matching a loaded parameter writes it (the caller asked); the other loaded ones stay."""
    model = _partly_loaded()
    summary = tinit.init_model_(model, "normal", seed=0, only=r"^(head|body)\.weight$", device="cpu")
    assert [e.name for e in summary] == ["body.weight", "head.weight"]
    reference = _all_meta_init()
    assert_same_bits(model.body.weight, reference.body.weight, "body.weight")
    assert_same_bits(model.head.weight, reference.head.weight, "head.weight")
    _assert_loaded(model, [n for n in BODY if n != "body.weight"])


def test_model_with_nothing_on_meta_is_written_as_asked():
    """No parameter on meta: every parameter is written, loaded or not (the caller asked)."""
    model = _partly_loaded(on_meta=())
    summary = tinit.init_model_(model, "normal", seed=0)
    assert len(summary) == len(list(model.parameters()))
    for (name, got), want in zip(model.named_parameters(), _all_meta_init().parameters(), strict=True):
        assert_same_bits(got, want, name)


def test_tie_of_loaded_tensors_is_kept_while_meta_parts_are_written():
    """Head tied to the loaded embedding, the body on meta: the tie holds, the shared tensor keeps its values."""
    model = _partly_loaded(on_meta=("body.", "norm."), tie=True)
    assert model.head.weight is model.embed.weight and not model.embed.weight.is_meta
    summary = tinit.init_model_(model, "normal", seed=0, device="cpu")
    assert sorted(e.name for e in summary) == ["body.bias", "body.weight", "norm.bias", "norm.weight"]
    assert model.head.weight is model.embed.weight, "tie lost"
    _assert_loaded(model, ["embed.weight", "bn.weight", "bn.bias"])
    reference = _all_meta_init(tie=True)
    assert_same_bits(model.body.weight, reference.body.weight, "body.weight")


def test_tie_of_meta_tensors_is_kept():
    """Head tied to the embedding, both on meta, the body loaded: the shared tensor is allocated once."""
    model = _partly_loaded(on_meta=("embed.", "head."), tie=True)
    summary = tinit.init_model_(model, "normal", seed=0, device="cpu")
    assert [(e.name, e.tied) for e in summary] == [("embed.weight", ("head.weight",))]
    assert model.head.weight is model.embed.weight and not model.head.weight.is_meta
    reference = _all_meta_init(tie=True)
    assert_same_bits(model.embed.weight, reference.embed.weight, "embed.weight")
    assert float(model.embed.weight.detach()[1].abs().sum()) == 0.0, "padding row not zeroed"
    _assert_loaded(model, BODY[1:])


def test_materialise_allocates_only_what_is_on_meta():
    model = _partly_loaded(on_meta=("head.", "bn."))
    kept = {name: p for name, p in model.named_parameters() if not name.startswith(("head.", "bn."))}
    tinit.materialise_(model, "cpu")
    assert not any(t.is_meta for t in (*model.parameters(), *model.buffers()))
    for name, param in kept.items():
        assert model.get_parameter(name) is param, f"{name} was re-allocated"
    _assert_loaded(model, kept)
    eager = nn.BatchNorm1d(8)  # the meta buffers are recomputed as an eager build has them
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        torch.testing.assert_close(getattr(model.bn, name), getattr(eager, name), rtol=0, atol=0)


@pytest.mark.parametrize("value", [1, None, "yes"], ids=["int", "none", "str"])
def test_reinit_loaded_must_be_a_bool(value):
    model = _partly_loaded()
    with pytest.raises(TypeError, match="reinit_loaded"):
        tinit.init_model_(model, "normal", seed=0, device="cpu", reinit_loaded=value)
    assert model.head.weight.is_meta, "materialised before refusing"


def test_unclassified_loaded_parameter_is_not_refused_when_not_written():
    """A loaded parameter nothing classifies is left as it is: only the meta ones are written."""
    model = _partly_loaded()
    model.mystery = nn.Parameter(torch.full((3,), LOADED))
    summary = tinit.init_model_(model, "normal", seed=0, device="cpu")
    assert [e.name for e in summary] == ["head.weight"]
    _assert_loaded(model, [*BODY, "mystery"])
    again = _partly_loaded()
    again.mystery = nn.Parameter(torch.full((3,), LOADED))
    with pytest.raises(ValueError, match="mystery"):  # asked to write it: refused, named
        tinit.init_model_(again, "normal", seed=0, device="cpu", reinit_loaded=True)
    assert again.head.weight.is_meta, "materialised before refusing"


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(lambda: torch.zeros(8, 8, dtype=torch.int64), id="int64"),
        pytest.param(lambda: torch.zeros(1, 8).expand(8, 8), id="expanded"),
    ],
)
def test_a_refused_loaded_parameter_leaves_the_meta_ones_on_meta(bad):
    """Every parameter to be written, loaded ones included, is checked before anything is allocated."""
    model = _meta()
    model.body.weight = nn.Parameter(bad(), requires_grad=False)
    with pytest.raises((TypeError, ValueError), match="body.weight"):
        tinit.init_model_(model, "normal", seed=0, device="cpu", reinit_loaded=True)
    assert model.head.weight.is_meta and model.embed.weight.is_meta


def test_only_leaves_the_unselected_meta_parameters_on_meta():
    """``only=`` allocates only what it writes: the rest stays on meta (never uninitialised memory),
    and a second call for the rest gives the model one call over everything gives."""
    model = _meta()
    tinit.init_model_(model, "normal", seed=0, device="cpu", only=r"^head\.")
    assert not model.head.weight.is_meta
    assert model.body.weight.is_meta and model.embed.weight.is_meta
    tinit.init_model_(model, "normal", seed=0, device="cpu")
    whole = _meta()
    tinit.init_model_(whole, "normal", seed=0, device="cpu")
    for (name, got), (_, want) in zip(model.state_dict().items(), whole.state_dict().items(), strict=True):
        if got.is_floating_point():
            assert_same_bits(got, want, name)
        else:  # BatchNorm's num_batches_tracked
            assert torch.equal(got, want), name


@pytest.mark.parametrize("loaded", ["lm_head.weight", "model.embed_tokens.weight"])
def test_a_hugging_face_tie_keeps_the_loaded_side(loaded):
    """``load_state_dict(assign=True)`` of one side of a tied head unties it; the meta side is tied
    back to the loaded Parameter, which keeps its values and is not written."""
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=True,
    )
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(config)
    values = torch.full((64, 32), LOADED)
    model.load_state_dict({loaded: values}, strict=False, assign=True)
    summary = tinit.init_model_(model, "normal", seed=0, device="cpu")
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert_same_bits(model.lm_head.weight.detach(), values, loaded)
    assert not any(p.name in ("lm_head.weight", "model.embed_tokens.weight") for p in summary)


def test_materialise_checks_its_arguments_before_allocating():
    model = _meta()
    for args, kwargs, error in [
        ((5,), {}, TypeError),
        ((model, 5), {}, TypeError),
        ((model, "bogus"), {}, ValueError),
        ((model, "meta"), {}, ValueError),
        ((model, "cpu"), {"recompute_buffers": "no"}, TypeError),
    ]:
        with pytest.raises(error, match="materialise_"):
            tinit.materialise_(*args, **kwargs)
    assert all(p.is_meta for p in model.parameters())
