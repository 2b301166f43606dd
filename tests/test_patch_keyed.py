"""``tinit.patch_torch_init(seed, model=...)``: calls keyed by the parameter's canonical name and place.

The oracle: ``tinit.nn.init.KEYED[f]`` on a fresh tensor of the parameter's whole (global) shape with
key ``seed`` and stream ``tinit.stream_for(name)``, sliced as the call's view; for a fan-based fill on a
slice, the plain normal/uniform of the std torch's formula gives for the slice's own fans. The
call-number rule (``tests/test_patch.py``) stays for calls no known parameter takes.
"""

from __future__ import annotations

import copy
import math
import threading
import warnings

import numpy as np
import pytest
import torch
from helpers import INIT_ARGS
from torch import nn

import tinit
from tinit.nn import init as tinit_init

SEED = 11
NAMES = list(tinit_init.KEYED)
ARGS = INIT_ARGS


def keyed(name, shape, fqn, args=None, seed=SEED):
    """The oracle: the keyed fill of the whole tensor under its name's stream."""
    out = torch.empty(shape)
    tinit_init.KEYED[name](out, *(ARGS[name] if args is None else args), seed=seed, stream=tinit.stream_for(fqn))
    return out


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.wq = nn.Linear(dim, dim, bias=False)
        self.w1 = nn.Linear(dim, 2 * dim)
        self.norm = nn.LayerNorm(dim)

    def init_weights(self):
        nn.init.trunc_normal_(self.wq.weight, std=0.02)
        nn.init.xavier_uniform_(self.w1.weight)
        nn.init.normal_(self.w1.bias, std=0.01)
        nn.init.ones_(self.norm.weight)


class Toy(nn.Module):
    """torchtitan-shaped: embedding, a ModuleDict of blocks by global index, output head, a buffer."""

    def __init__(self, dim=8, layers=4, vocab=16):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleDict({str(i): Block(dim) for i in range(layers)})
        self.out = nn.Linear(dim, vocab, bias=False)
        self.register_buffer("scale", torch.zeros(dim))

    def init_weights(self):
        if self.tok is not None:
            nn.init.normal_(self.tok.weight)
        for layer in self.layers.values():
            layer.init_weights()
        if self.out is not None:
            nn.init.trunc_normal_(self.out.weight, std=8**-0.5, a=-0.5, b=0.5)
        nn.init.uniform_(self.scale, 0.5, 1.5)


# the oracle recipe of Toy.init_weights by the canonical name's last components
RECIPE = {
    "tok.weight": ("normal_", ()),
    "wq.weight": ("trunc_normal_", (0.0, 0.02)),
    "w1.weight": ("xavier_uniform_", ()),
    "w1.bias": ("normal_", (0.0, 0.01)),
    "out.weight": ("trunc_normal_", (0.0, 8**-0.5, -0.5, 0.5)),
    "scale": ("uniform_", (0.5, 1.5)),
}


def expected_state(model: nn.Module) -> dict:
    """Every tensor of a Toy (by canonical name) as the keyed init must leave it."""
    state = {}
    for raw, canonical in tinit.identity.canonical_names(model).items():
        tensor = model.get_parameter(raw) if raw in dict(model.named_parameters()) else model.get_buffer(raw)
        recipe = next((v for k, v in RECIPE.items() if canonical == k or canonical.endswith("." + k)), None)
        if recipe is None:  # norms: torch's constants
            state[canonical] = (
                torch.ones(tensor.shape) if canonical.endswith("norm.weight") else torch.zeros(tensor.shape)
            )
        else:
            state[canonical] = keyed(recipe[0], tuple(tensor.shape), canonical, recipe[1])
    return state


def canonical_state(model: nn.Module) -> dict:
    names = tinit.identity.canonical_names(model)
    tensors = dict(model.named_parameters(remove_duplicate=False)) | dict(model.named_buffers(remove_duplicate=False))
    return {names[raw]: tensor.detach().clone() for raw, tensor in tensors.items()}


def assert_states_equal(got: dict, want: dict):
    assert sorted(got) == sorted(want)
    for name, value in want.items():
        torch.testing.assert_close(got[name], value, rtol=0, atol=0, msg=lambda m, n=name: f"{n}: {m}")


def _codes():
    return {name: getattr(torch.nn.init, name).__code__ for name in NAMES}


# ---- the name rule on a given model ------------------------------------------------------------------------------


def test_model_init_equals_the_keyed_fill_of_each_name():
    model = Toy()
    with tinit.patch_torch_init(seed=SEED, model=model):
        model.init_weights()
    assert_states_equal(canonical_state(model), expected_state(model))


def test_order_and_subset_of_calls_do_not_matter():
    full = Toy()
    with tinit.patch_torch_init(seed=SEED, model=full):
        full.init_weights()
    reordered = Toy()
    with tinit.patch_torch_init(seed=SEED, model=reordered):
        reordered.init_weights()  # then each layer again, in reverse order: the same values
        for key in reversed(list(reordered.layers)):
            reordered.layers[key].init_weights()
    assert_states_equal(canonical_state(reordered), canonical_state(full))
    subset = Toy()
    before = canonical_state(subset)
    with tinit.patch_torch_init(seed=SEED, model=subset):
        subset.layers["2"].init_weights()
    after, want = canonical_state(subset), canonical_state(full)
    for name, value in after.items():
        torch.testing.assert_close(value, want[name] if name.startswith("layers.2.") else before[name], rtol=0, atol=0)


@pytest.mark.parametrize("name", NAMES)
def test_every_fill_on_dot_data_is_the_keyed_fill(name):
    model = nn.Sequential(nn.Linear(12, 10), nn.Linear(10, 6))
    with tinit.patch_torch_init(seed=SEED, model=model):
        getattr(torch.nn.init, name)(model[1].weight.data, *ARGS[name])
    torch.testing.assert_close(model[1].weight.detach(), keyed(name, (6, 10), "1.weight"), rtol=0, atol=0)


VIEWS = {
    "data": lambda p: p.data,
    "detach": lambda p: p.detach(),
    "rows": lambda p: p.data[1:4],
    "columns": lambda p: p.data[:, 2:7],
    "narrow": lambda p: p.data.narrow(1, 3, 4),
    "chunk": lambda p: p.data.chunk(3, 0)[1],
    "split": lambda p: p.data.split(3, 1)[2],
    "row": lambda p: p.data[2],
    "element": lambda p: p.data[3, 4],
    "transposed": lambda p: p.data.t(),
    "transposed_slice": lambda p: p.data.t()[1:5],
    "flat_rows": lambda p: p.data.view(-1)[16:40],
    "unsqueezed": lambda p: p.data[1:3].unsqueeze(0),
}


@pytest.mark.parametrize("view", list(VIEWS))
def test_a_view_gets_its_slice_of_the_whole_fill(view):
    model = nn.Sequential(nn.Linear(8, 6))
    with torch.no_grad():
        model[0].weight.fill_(7.0)
    with tinit.patch_torch_init(seed=SEED, model=model):
        torch.nn.init.normal_(VIEWS[view](model[0].weight), 0.1, 0.02)
    want = torch.full((6, 8), 7.0)
    VIEWS[view](want).copy_(VIEWS[view](keyed("normal_", (6, 8), "0.weight")))
    torch.testing.assert_close(model[0].weight.detach(), want, rtol=0, atol=0)


@pytest.mark.parametrize("name", ["xavier_normal_", "kaiming_uniform_"])
def test_fans_are_those_of_the_tensor_given(name):
    model = nn.Sequential(nn.Linear(10, 6))
    with tinit.patch_torch_init(seed=SEED, model=model):
        getattr(torch.nn.init, name)(model[0].weight[:, :4], *ARGS[name])
    fan_in, fan_out = 4, 6  # the slice's, as torch computes them on the tensor it is given
    if name == "xavier_normal_":
        plain = keyed("normal_", (6, 10), "0.weight", (0.0, ARGS[name][0] * math.sqrt(2 / (fan_in + fan_out))))
    else:
        bound = math.sqrt(3) * nn.init.calculate_gain("leaky_relu", ARGS[name][0]) / math.sqrt(fan_in)
        plain = keyed("uniform_", (6, 10), "0.weight", (-bound, bound))
    torch.testing.assert_close(model[0].weight.detach()[:, :4], plain[:, :4], rtol=0, atol=0)


def test_buffers_are_keyed_by_name():
    model = Toy()
    with tinit.patch_torch_init(seed=SEED, model=model):
        torch.nn.init.normal_(model.scale[2:5])
    torch.testing.assert_close(model.scale[2:5], keyed("normal_", (8,), "scale", ())[2:5], rtol=0, atol=0)


def test_keyed_block_writes_an_offset_range_or_a_strided_layout():
    """``KEYED``'s ``block`` on its own: a row-major range by its offset, a strided block by a
    ``tinit.sharding.ShardLayout`` (the global index of each local position), fans from the tensor given."""
    from tinit.sharding import ShardLayout

    dense = keyed("normal_", (8, 4), "w")
    rows = torch.empty(2, 4)
    tinit_init.KEYED["normal_"](
        rows, *ARGS["normal_"], seed=SEED, stream=tinit.stream_for("w"), block=(rows, 12, None, None)
    )
    torch.testing.assert_close(rows, dense[3:5], rtol=0, atol=0)
    strided = torch.empty(4, 2)
    layout = ShardLayout((8, 4), (torch.tensor([0, 2, 4, 6]), torch.tensor([1, 2])))
    block = (strided, 0, (8, 4), layout)
    tinit_init.KEYED["normal_"](strided, *ARGS["normal_"], seed=SEED, stream=tinit.stream_for("w"), block=block)
    torch.testing.assert_close(strided, dense[0::2, 1:3], rtol=0, atol=0)
    with pytest.raises(ValueError, match="does not describe a tensor of shape"):
        tinit_init.KEYED["normal_"](rows, seed=SEED, stream=0, block=(rows, 0, (8, 4), layout))


# ---- layouts and wrappers ----------------------------------------------------------------------------------------


def _pipeline_parts(model: Toy, cut: int):
    """torchtitan's pipeline split: deep copies, the other stage's layers deleted, global names kept."""
    first, second = copy.deepcopy(model), copy.deepcopy(model)
    for key in list(first.layers):
        del (first.layers if int(key) >= cut else second.layers)[key]
    first.out = None
    second.tok = None
    return first, second


@pytest.mark.parametrize("cut", [1, 2, 3])
def test_pipeline_stage_parts_give_the_whole_models_values(cut):
    whole = Toy()
    with tinit.patch_torch_init(seed=SEED, model=whole):
        whole.init_weights()
    parts = _pipeline_parts(Toy(), cut)
    with tinit.patch_torch_init(seed=SEED, model=parts):
        for part in reversed(parts):  # the later stage first: order does not matter
            part.init_weights()
    want = canonical_state(whole)
    got = {}
    for part in parts:
        got.update(canonical_state(part))
    # the buffer is in both stages, the same values
    assert_states_equal(got, want)
    torch.testing.assert_close(parts[0].scale, parts[1].scale, rtol=0, atol=0)


class FusedQKV(nn.Module):
    """torchtitan's fused-qkv init: q, k, v drawn into ``new_empty`` temporaries, then copied in."""

    def __init__(self):
        super().__init__()
        self.wqkv = nn.Linear(4, 12, bias=False)

    def init_weights(self):
        weight = self.wqkv.weight
        parts = [weight.new_empty(4, 4) for _ in range(3)]
        for part in parts:
            nn.init.trunc_normal_(part, std=0.02)
        with torch.no_grad():
            weight.copy_(torch.cat(parts))


def test_temporaries_made_from_a_parameter_are_keyed_by_its_name():
    layers = nn.ModuleDict({str(i): FusedQKV() for i in range(3)})
    stage = copy.deepcopy(layers)
    del stage["0"], stage["1"]
    with tinit.patch_torch_init(seed=SEED, model=layers):
        for layer in layers.values():
            layer.init_weights()
    with tinit.patch_torch_init(seed=SEED, model=stage):  # the last stage alone: the same values
        stage["2"].init_weights()
    for key in ("0", "2"):
        name = f"{key}.wqkv.weight"
        want = torch.cat([keyed("trunc_normal_", (4, 4), f"{name}:new_empty[{k}]", (0.0, 0.02)) for k in range(3)])
        torch.testing.assert_close(layers[key].wqkv.weight.detach(), want, rtol=0, atol=0)
    torch.testing.assert_close(stage["2"].wqkv.weight, layers["2"].wqkv.weight, rtol=0, atol=0)


def test_compiled_and_checkpoint_wrapped_models_get_the_unwrapped_values():
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

    plain = Toy()
    with tinit.patch_torch_init(seed=SEED, model=plain):
        plain.init_weights()
    wrapped = Toy()
    for key in list(wrapped.layers):
        wrapped.layers[key] = checkpoint_wrapper(wrapped.layers[key])
    compiled = torch.compile(wrapped, backend="eager")
    assert any("_orig_mod" in n for n, _ in compiled.named_parameters())
    with tinit.patch_torch_init(seed=SEED, model=compiled):
        for param in reversed(list(compiled.parameters())):  # raw names differ; a different order too
            param.data.fill_(0.0)
        compiled._orig_mod.init_weights()
    assert_states_equal(canonical_state(compiled), canonical_state(plain))


# ---- tensor methods ----------------------------------------------------------------------------------------------


def _hf_init_weights(module):
    """Hugging Face's classic ``_init_weights``: tensor methods on ``.data``."""
    if isinstance(module, nn.Linear):
        module.weight.data.normal_(mean=0.0, std=0.02)
        if module.bias is not None:
            module.bias.data.zero_()
    elif isinstance(module, nn.Embedding):
        module.weight.data.uniform_(-0.1, 0.1)


def test_hf_style_tensor_methods_on_parameters_are_keyed():
    model = Toy()
    state = torch.get_rng_state()
    with tinit.patch_torch_init(seed=SEED, model=model):
        model.apply(_hf_init_weights)
        with torch.no_grad():  # as torch, a leaf that requires grad is written under no_grad only
            model.layers["0"].w1.bias.normal_(0.0, 0.5)  # on the Parameter itself too
    torch.testing.assert_close(torch.get_rng_state(), state, rtol=0, atol=0)
    for name, param in model.named_parameters():
        if name.endswith(("wq.weight", "w1.weight", "out.weight")):
            torch.testing.assert_close(param.detach(), keyed("normal_", param.shape, name, (0.0, 0.02)), rtol=0, atol=0)
    torch.testing.assert_close(model.tok.weight.detach(), keyed("uniform_", (16, 8), "tok.weight", (-0.1, 0.1)))
    want = keyed("normal_", (16,), "layers.0.w1.bias", (0.0, 0.5))
    torch.testing.assert_close(model.layers["0"].w1.bias.detach(), want, rtol=0, atol=0)
    assert (model.layers["1"].w1.bias == 0).all()


def test_tensor_methods_on_other_tensors_are_torchs_own():
    model = Toy()
    torch.manual_seed(5)
    want = (torch.empty(50).normal_(0.0, 2.0), torch.empty(50).uniform_(-1.0, 1.0))
    torch.manual_seed(5)
    with tinit.patch_torch_init(seed=SEED, model=model):
        got = (torch.empty(50).normal_(0.0, 2.0), torch.empty(50).uniform_(-1.0, 1.0))
        linear = nn.Linear(4, 3)  # a module of no known model: its constructor's calls are numbered
        linear.weight.data.normal_()  # and its tensor methods are torch's
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    torch.manual_seed(5)
    torch.empty(50).normal_(0.0, 2.0)
    torch.empty(50).uniform_(-1.0, 1.0)
    torch.testing.assert_close(linear.weight.detach(), torch.empty(3, 4).normal_(), rtol=0, atol=0)


def test_methods_are_routed_in_every_thread_and_restored_on_exit():
    model = Toy()
    before = {name: torch.Tensor.__dict__.get(name) for name in ("normal_", "uniform_", "new_empty")}

    def other():
        torch.nn.init.normal_(model.out.weight, 0.0, 0.5)  # the functions: routed in every thread
        model.tok.weight.data.normal_(0.0, 0.25)  # the methods too: process-wide, as the functions

    with tinit.patch_torch_init(seed=SEED, model=model):
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    torch.testing.assert_close(model.out.weight.detach(), keyed("normal_", (16, 8), "out.weight", (0.0, 0.5)))
    torch.testing.assert_close(model.tok.weight.detach(), keyed("normal_", (16, 8), "tok.weight", (0.0, 0.25)))
    assert {name: torch.Tensor.__dict__.get(name) for name in before} == before, "the C methods show through again"
    torch.manual_seed(9)
    got = model.tok.weight.data.normal_().clone()  # after exit: torch's own method and RNG
    torch.manual_seed(9)
    torch.testing.assert_close(got, torch.empty(16, 8).normal_(), rtol=0, atol=0)


# ---- modules built inside the patch ------------------------------------------------------------------------------


def test_built_inside_construction_calls_are_numbered_later_calls_named():
    with tinit.patch_torch_init(seed=SEED, warn_unkeyed=True):
        with pytest.warns(UserWarning) as record:
            seq = nn.Sequential(nn.Linear(8, 6), nn.Linear(6, 4))
        messages = [str(w.message) for w in record]
        assert len(messages) == 4, messages  # each constructor's two calls
        assert "torch.nn.init.kaiming_uniform_ on a tensor of shape (6, 8)" in messages[0]
        assert messages[0].endswith("call-number rule, stream 0") and messages[3].endswith("stream 3")
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # keyed: no warning
            nn.init.normal_(seq[1].weight, 0.1, 0.02)
            seq[1].bias.data.uniform_(-0.3, 0.7)
        with pytest.warns(UserWarning, match="stream [45]") as record:
            lone = nn.Linear(3, 2)
        assert record[0].filename.endswith("linear.py")  # the warning names torch's calling line
        with pytest.warns(UserWarning, match=r"normal_ .*call-number rule, stream 6"):
            nn.init.normal_(lone.weight, 0.1, 0.02)  # not attached to anything: the next number
    torch.testing.assert_close(seq[0].weight.detach(), _numbered("kaiming_uniform_", (6, 8), 0, (math.sqrt(5),)))
    torch.testing.assert_close(seq[1].weight.detach(), keyed("normal_", (4, 6), "1.weight"), rtol=0, atol=0)
    torch.testing.assert_close(seq[1].bias.detach(), keyed("uniform_", (4,), "1.bias"), rtol=0, atol=0)
    torch.testing.assert_close(lone.weight.detach(), _numbered("normal_", (2, 3), 6), rtol=0, atol=0)


def _numbered(name, shape, stream, args=None):
    out = torch.empty(shape)
    tinit_init.KEYED[name](out, *(ARGS[name] if args is None else args), seed=SEED, stream=stream)
    return out


def test_a_name_another_live_model_took_falls_back_to_its_number():
    with tinit.patch_torch_init(seed=SEED):
        first = nn.Sequential(nn.Linear(5, 4))  # calls 0, 1
        second = nn.Sequential(nn.Linear(5, 4))  # calls 2, 3
        nn.init.normal_(first[0].weight, 0.1, 0.02)
        nn.init.normal_(second[0].weight, 0.1, 0.02)  # "0.weight" is first's: call number 4
    torch.testing.assert_close(first[0].weight.detach(), keyed("normal_", (4, 5), "0.weight"), rtol=0, atol=0)
    torch.testing.assert_close(second[0].weight.detach(), _numbered("normal_", (4, 5), 4), rtol=0, atol=0)


def test_modules_attached_to_a_given_part_inside_the_patch_are_named():
    model = Toy(layers=2)
    with tinit.patch_torch_init(seed=SEED, model=model):
        model.layers["2"] = Block(8)
        nn.init.normal_(model.layers["2"].wq.weight, 0.1, 0.02)
    want = keyed("normal_", (8, 8), "layers.2.wq.weight")
    torch.testing.assert_close(model.layers["2"].wq.weight.detach(), want, rtol=0, atol=0)


def test_built_before_the_patch_without_model_keeps_the_call_number_rule():
    model = nn.Sequential(nn.Linear(5, 4), nn.Linear(4, 3))
    with tinit.patch_torch_init(seed=SEED):
        nn.init.normal_(model[1].weight, 0.1, 0.02)
        nn.init.normal_(model[0].weight, 0.1, 0.02)
    torch.testing.assert_close(model[1].weight.detach(), _numbered("normal_", (3, 4), 0), rtol=0, atol=0)
    torch.testing.assert_close(model[0].weight.detach(), _numbered("normal_", (4, 5), 1), rtol=0, atol=0)


# ---- refusals ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "match"),
    [
        ("model", r"model must be a torch.nn.Module.*got str"),
        (torch.empty(3), r"model must be .*got Tensor"),
        (7, r"model must be .*got int"),
        ({"a": nn.Linear(2, 2)}, r"model must be .*got dict"),
        ([nn.Linear(2, 2), nn.Linear], r"model\[1\] must be a torch.nn.Module .*got type"),
    ],
    ids=["str", "tensor", "int", "dict", "class"],
)
def test_an_unknown_model_part_is_refused_before_anything_is_installed(model, match):
    before = _codes()
    with pytest.raises(TypeError, match=match) as info:
        tinit.patch_torch_init(seed=SEED, model=model)
    assert isinstance(info.value, ValueError)
    assert _codes() == before


def test_a_view_of_two_parameters_is_refused_before_writing():
    flat = torch.zeros(20)
    module = nn.Module()
    module.a = nn.Parameter(flat[:10].view(2, 5))
    module.b = nn.Parameter(flat[10:].view(2, 5))
    with tinit.patch_torch_init(seed=SEED, model=module):
        with pytest.raises(ValueError, match=r"views parameters 'a', 'b' at once"):
            nn.init.normal_(flat)
        with pytest.raises(ValueError, match=r"views parameters 'a', 'b' at once"):
            flat[8:12].normal_()
        nn.init.normal_(flat[10:15], 0.1, 0.02)  # one row of b: a box of b alone
    assert (flat[:10] == 0).all() and (flat[15:] == 0).all()
    torch.testing.assert_close(flat[10:15], keyed("normal_", (2, 5), "b")[0], rtol=0, atol=0)


@pytest.mark.parametrize(
    "view",
    [lambda p: p.data.diagonal(), lambda p: p.data[:, ::2], lambda p: p.data.view(torch.int32)],
    ids=["diagonal", "every_other_column", "other_dtype"],
)
def test_a_view_that_is_not_a_box_is_refused_before_writing(view):
    model = nn.Sequential(nn.Linear(6, 4))
    with torch.no_grad():
        model[0].weight.zero_()
    with tinit.patch_torch_init(seed=SEED, model=model), pytest.raises(ValueError, match="not a box of it"):
        nn.init.normal_(view(model[0].weight))
    assert (model[0].weight == 0).all()


def test_a_flat_range_across_rows_gets_the_elements_at_its_positions():
    model = nn.Sequential(nn.Linear(6, 4))
    with torch.no_grad():
        model[0].weight.zero_()
    with tinit.patch_torch_init(seed=SEED, model=model):
        nn.init.normal_(model[0].weight.data.view(-1)[3:9], 0.1, 0.02)  # not a box: a row-major range
    flat = model[0].weight.detach().view(-1)
    want = keyed("normal_", (4, 6), "0.weight", (0.1, 0.02)).view(-1)
    torch.testing.assert_close(flat[3:9], want[3:9], rtol=0, atol=0)
    assert (flat[:3] == 0).all() and (flat[9:] == 0).all()


def test_a_view_reaching_past_the_parameter_is_refused():
    storage = torch.zeros(30)
    module = nn.Module()
    module.w = nn.Parameter(storage[:24].view(4, 6))  # FSDP2-like padding after the local tensor
    with tinit.patch_torch_init(seed=SEED, model=module):
        with pytest.raises(ValueError, match="memory outside it"):
            nn.init.normal_(storage)
        nn.init.normal_(storage[6:18], 0.1, 0.02)  # rows 1 and 2, by the padded storage
    torch.testing.assert_close(storage[6:18].view(2, 6), keyed("normal_", (4, 6), "w")[1:3], rtol=0, atol=0)
    assert (storage[:6] == 0).all() and (storage[18:] == 0).all()


def test_nested_entries_add_their_parts():
    a, b = nn.Sequential(nn.Linear(3, 2)), nn.Sequential(nn.Linear(3, 2))
    with tinit.patch_torch_init(seed=SEED, model=a):
        with tinit.patch_torch_init(seed=SEED, model=b):
            nn.init.normal_(b[0].weight, 0.1, 0.02)
        nn.init.normal_(a[0].weight, 0.1, 0.02)
    for model in (a, b):
        torch.testing.assert_close(model[0].weight.detach(), keyed("normal_", (2, 3), "0.weight"), rtol=0, atol=0)


# ---- DTensor parameters ------------------------------------------------------------------------------------------


def _dtensor_cases():
    from torch.distributed.tensor import Replicate, Shard

    return [(Shard(0), 0), (Shard(1), 1), (Replicate(), None)]


@pytest.mark.dist
@pytest.mark.parametrize("world", [1, 3])
def test_dtensor_parameters_get_the_dense_slices(world):
    """torch's fake process group (one process plays each rank): the DTensor parameter, its local
    tensor, a slice of it, a view of padded local storage and a tensor method all give the dense slice."""
    import torch.distributed as dist

    fake_pg = pytest.importorskip("torch.testing._internal.distributed.fake_pg")
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import DTensor

    if dist.is_initialized():
        pytest.skip("a process group is already initialised in this process")
    shape = (9, 6)
    dense = {n: keyed(n, shape, "0.weight", ARGS[n]) for n in ("normal_", "xavier_uniform_")}
    dense["uniform_"] = keyed("uniform_", shape, "0.weight", (-0.5, 0.5))
    for placement, dim in _dtensor_cases():
        for rank in range(world):
            dist.init_process_group("fake", rank=rank, world_size=world, store=fake_pg.FakeStore())
            try:
                mesh = DeviceMesh("cpu", list(range(world)))

                def chunk(full, d=dim, r=rank):
                    return full if d is None else full.chunk(world, d)[r]

                local_shape = chunk(dense["normal_"]).shape
                padded = torch.zeros(local_shape.numel() + 5)
                local = padded[: local_shape.numel()].view(local_shape)
                param = DTensor.from_local(local, mesh, [placement], run_check=False, shape=shape, stride=(6, 1))
                model = nn.Sequential(nn.Linear(6, 9, bias=False))
                # into the parameter slot as it is: nn.Parameter(param) would run DTensor's detach, whose
                # cached output spec holds the first rank's mesh when one process plays every rank
                model[0]._parameters["weight"] = param
                with tinit.patch_torch_init(seed=SEED, model=model):
                    nn.init.xavier_uniform_(model[0].weight, *ARGS["xavier_uniform_"])  # fans: the logical shape
                    got_x = model[0].weight.to_local().clone()
                    nn.init.normal_(model[0].weight.to_local(), *ARGS["normal_"])
                    got_n = model[0].weight.to_local().clone()
                    if local_shape[0] > 1:
                        nn.init.uniform_(model[0].weight._local_tensor[1:], -0.5, 0.5)
                        nn.init.uniform_(padded[: local_shape[1]], -0.5, 0.5)  # row 0, by the padded storage
                    got_u = model[0].weight.to_local().clone()
                    model[0].weight.normal_(*ARGS["normal_"])  # a tensor method on the DTensor
                torch.testing.assert_close(got_x, chunk(dense["xavier_uniform_"]), rtol=0, atol=0)
                torch.testing.assert_close(got_n, chunk(dense["normal_"]), rtol=0, atol=0)
                want_u = chunk(dense["uniform_"]) if local_shape[0] > 1 else got_n
                torch.testing.assert_close(got_u, want_u, rtol=0, atol=0)
                torch.testing.assert_close(model[0].weight.to_local(), chunk(dense["normal_"]), rtol=0, atol=0)
                assert (padded[local_shape.numel() :] == 0).all()
            finally:
                dist.destroy_process_group()


# ---- Hugging Face ------------------------------------------------------------------------------------------------


def test_hf_from_config_inside_is_keyed_by_name_and_a_given_model_by_its_own_names():
    """Hugging Face's own ``_init_weights`` (transformers' guarded ``init.normal_``): built inside the
    patch, a base-model parameter is keyed by its base model's name (HF initialises the base model in
    its own constructor, before the head holds it) and the head's by the full name; given as
    ``model=``, ``initialize_weights`` keys every parameter by the full name."""
    transformers = pytest.importorskip("transformers")
    from tinit.tools import hf_families

    config = hf_families.config("llama")
    cls = getattr(transformers, hf_families.model_class(config))
    std = config.initializer_range
    with tinit.patch_torch_init(seed=SEED):
        model = cls.from_config(config)
    query, head = model.get_parameter("model.layers.1.self_attn.q_proj.weight"), model.lm_head.weight
    want = keyed("normal_", query.shape, "layers.1.self_attn.q_proj.weight", (0.0, std))
    torch.testing.assert_close(query.detach(), want, rtol=0, atol=0)
    torch.testing.assert_close(
        head.detach(), keyed("normal_", head.shape, "lm_head.weight", (0.0, std)), rtol=0, atol=0
    )
    for module in model.modules():
        module.__dict__.pop("_is_hf_initialized", None)
    with tinit.patch_torch_init(seed=SEED, model=model):
        model.initialize_weights()
    want = keyed("normal_", query.shape, "model.layers.1.self_attn.q_proj.weight", (0.0, std))
    torch.testing.assert_close(query.detach(), want, rtol=0, atol=0)


# ---- found by trying it as a user ---------------------------------------------------------------------------------


class _Two(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)


def test_a_part_materialised_module_by_module_inside_the_patch_stays_keyed():
    with torch.device("meta"):
        model = _Two()
    with tinit.patch_torch_init(seed=SEED, model=model, warn_unkeyed=True), warnings.catch_warnings():
        warnings.simplefilter("error")  # no call may fall back to the call-number rule
        model.b.to_empty(device="cpu")  # a later module first: the table's first tensor is still on meta
        torch.nn.init.normal_(model.b.weight)
        model.b.weight.data = torch.empty(4, 4)  # new storage under the same Parameter
        model.b.weight.data.normal_()
    torch.testing.assert_close(model.b.weight.detach(), keyed("normal_", (4, 4), "b.weight", (0.0, 1.0)))


@pytest.mark.parametrize(("backend", "method_keyed"), [("eager", True), ("aot_eager", False)])
def test_tensor_methods_inside_torch_compile_are_warned(backend, method_keyed):
    model = _Two()

    def init(mod):
        torch.nn.init.normal_(mod.a.weight)  # a function: a graph break, keyed under every backend
        mod.b.weight.data.normal_()  # a method: a graph node, keyed only where the graph calls it
        return mod.a.weight.sum()

    with tinit.patch_torch_init(seed=SEED, model=model), pytest.warns(UserWarning, match="traced by torch.compile"):
        torch.compile(init, backend=backend)(model)
    torch.testing.assert_close(model.a.weight.detach(), keyed("normal_", (4, 4), "a.weight", (0.0, 1.0)))
    assert torch.equal(model.b.weight.detach(), keyed("normal_", (4, 4), "b.weight", (0.0, 1.0))) == method_keyed


def test_two_tensors_with_one_canonical_name_are_refused():
    class Wrap(nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner, self.weight = inner, nn.Parameter(torch.zeros(4, 4))

    saved = list(tinit.identity.RENAMES)
    try:
        tinit.identity.register_wrapper(Wrap, "inner")
        model = nn.Sequential(Wrap(nn.Linear(4, 4, bias=False)))
        refused = pytest.raises(ValueError, match="two different tensors have the canonical name '0.weight'")
        with refused, tinit.patch_torch_init(seed=SEED, model=model):
            pass
        assert "normal_" not in torch.Tensor.__dict__
    finally:
        tinit.identity.RENAMES[:] = saved


def test_a_model_built_inside_does_not_take_a_parts_names():
    part = _Two()
    with tinit.patch_torch_init(seed=SEED, model=part):
        inside = nn.Sequential()
        inside.add_module("a", nn.Linear(4, 4))
        torch.nn.init.normal_(part.a.weight)
        torch.nn.init.normal_(inside.a.weight)
    assert not torch.equal(part.a.weight, inside.a.weight)


def test_a_method_torch_refuses_is_refused_and_numpy_seeds_are_ints():
    model = _Two()
    with tinit.patch_torch_init(seed=np.int64(SEED), model=model):
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            model.a.weight.normal_()
        with torch.no_grad():
            model.a.weight.normal_()
    torch.testing.assert_close(model.a.weight.detach(), keyed("normal_", (4, 4), "a.weight", (0.0, 1.0)))


def test_a_function_mode_handing_the_call_back_keys_it_once():
    """``with torch.device(...)`` pushes a TorchFunctionMode that calls ``Tensor.new_empty`` /
    ``normal_`` again from inside torch's method: still one temporary, one keyed fill."""
    layers = nn.ModuleDict({"0": FusedQKV()})
    with torch.device("cpu"), tinit.patch_torch_init(seed=SEED, model=layers):
        layers["0"].init_weights()
        with torch.no_grad():
            layers["0"].wqkv.weight[:4].normal_(0.0, 0.5)
    name = "0.wqkv.weight"
    want = torch.cat([keyed("trunc_normal_", (4, 4), f"{name}:new_empty[{k}]", (0.0, 0.02)) for k in range(3)])
    want[:4] = keyed("normal_", (12, 4), name, (0.0, 0.5))[:4]
    torch.testing.assert_close(layers["0"].wqkv.weight.detach(), want, rtol=0, atol=0)
