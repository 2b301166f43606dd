"""Inputs a hostile user tries: each refused with a TypeError/ValueError naming what is wrong (a
RuntimeError too where torch raises one), before anything is written or drawn, or done as torch does it.

Oracles: torch's own functions on the same inputs (its refusal, its values under FakeTensorMode, its
warning), the fp64 value of the same stream uniforms, and torch's RNG state and the tensor's bits,
which a refusal must leave as they were.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from helpers import DTYPE_PARAMS, assert_within_ulp, uniforms_of

import tinit
from tinit.nn import init as tnn
from tinit.ops import philox_words
from tinit.schemes import InitSpec


def _refused(call, tensor, error, match):
    """``call()`` raises ``error`` matching ``match`` and leaves ``tensor`` and torch's RNG untouched."""
    torch.manual_seed(0)
    state, bits = torch.random.get_rng_state(), tensor.clone()
    with pytest.raises(error, match=match) as caught:
        call()
    assert torch.equal(torch.random.get_rng_state(), state), "torch's RNG moved"
    torch.testing.assert_close(tensor, bits, rtol=0, atol=0, equal_nan=True, msg="the tensor was written")
    return caught.value


# ---- uniform bounds whose width overflows ----------------------------------------------------------------------


def _wide(dtype: torch.dtype) -> float:
    """A bound b with b - (-b) above the dtype's largest value but b itself a finite value of it."""
    return 0.75 * torch.finfo(dtype).max


@pytest.mark.parametrize("dtype", DTYPE_PARAMS)
def test_a_uniform_wider_than_the_dtype_is_refused_as_torch_refuses_it(dtype):
    """torch's ``uniform_`` refuses b - a > the dtype's largest value (RuntimeError "expects to-from <=");
    the drop-in raises an error that is both a RuntimeError and a ValueError, naming a and b."""
    b = _wide(dtype)
    with pytest.raises(RuntimeError, match="to-from"):
        torch.nn.init.uniform_(torch.zeros(8, dtype=dtype), -b, b)
    tensor = torch.zeros(8, dtype=dtype)
    error = _refused(lambda: tnn.uniform_(tensor, -b, b), tensor, ValueError, r"b - a <= .*got a=")
    assert isinstance(error, RuntimeError)
    tnn.uniform_(tensor, -b / 2, b / 2)  # half as wide: accepted, as by torch
    assert float(tensor.abs().max()) <= b / 2


@pytest.mark.parametrize("seed", [None, 3], ids=["unseeded", "seeded"])
def test_a_too_wide_uniform_is_refused_through_the_patch(seed):
    tensor = torch.zeros(8, dtype=torch.float64)
    with tinit.patch_torch_init(seed=seed):
        _refused(lambda: torch.nn.init.uniform_(tensor, -1e308, 1e308), tensor, RuntimeError, "b - a <=")


def test_tinit_api_samples_the_whole_fp64_line():
    """tinit's own API keeps its full-range uniform (the fp32 one is carried halved, scale 2): for fp64
    it used to write the upper bound everywhere (b - a = inf). Value of word w: 2 (a/2 + (b/2 - a/2) u)."""
    a, b, numel = -1e308, 1e308, 4096
    tensor = torch.empty(numel, dtype=torch.float64)
    tinit.write_spec_(tensor, InitSpec(std=1e308, distribution="uniform", trunc=1.0), seed=5, stream=2)
    u = uniforms_of(philox_words(numel, 5, 2).numpy())
    expected = 2.0 * (a / 2 + (b / 2 - a / 2) * u)
    assert_within_ulp(tensor, expected, scale=b, dtype=torch.float64, max_ulp=1.0, what="U(-1e308, 1e308)")
    assert float(tensor.min()) < -0.99e308 and float(tensor.max()) > 0.99e308
    assert abs(float(np.mean(tensor.numpy() / 1e308))) < 0.05


# ---- FakeTensorMode (tracing a model for a memory estimate) ---------------------------------------------------


def _fake_mode():
    from torch._subclasses.fake_tensor import FakeTensorMode

    return FakeTensorMode()


def _assert_fake(tensor, shape, dtype=torch.float32):
    from torch._subclasses.fake_tensor import is_fake

    assert is_fake(tensor) and tuple(tensor.shape) == tuple(shape) and tensor.dtype == dtype
    assert tensor.device.type == "cpu"


@pytest.mark.parametrize("name", list(tnn.KEYED))
def test_drop_ins_under_fake_tensor_mode_return_the_fake_tensor_without_a_draw(name):
    """torch's fills on a fake tensor draw nothing and return it; so do tinit's (torch's own trunc_normal_
    raises DataDependentOutputException there: its rejection loop reads values, tinit's pass does not)."""
    from helpers import INIT_ARGS

    generator = torch.Generator().manual_seed(4)
    torch.manual_seed(0)
    state, gen_state = torch.random.get_rng_state(), generator.get_state()
    with _fake_mode():
        tensor = torch.empty(6, 5, dtype=torch.bfloat16)
        assert getattr(tnn, name)(tensor, *INIT_ARGS[name]) is tensor
        getattr(tnn, name)(tensor, *INIT_ARGS[name], generator=generator)
        if name != "trunc_normal_":
            getattr(torch.nn.init, name)(tensor, *INIT_ARGS[name])  # torch runs here too
    _assert_fake(tensor, (6, 5), torch.bfloat16)
    assert torch.equal(torch.random.get_rng_state(), state) and torch.equal(generator.get_state(), gen_state)


@pytest.mark.parametrize("seed", [None, 0], ids=["unseeded", "seeded"])
def test_torch_modules_build_under_fake_tensor_mode_inside_the_patch(seed, recwarn):
    torch.manual_seed(0)
    state = torch.random.get_rng_state()
    with _fake_mode(), tinit.patch_torch_init(seed=seed):
        linear, embedding = torch.nn.Linear(7, 3), torch.nn.Embedding(11, 4, padding_idx=0)
        conv = torch.nn.Conv2d(2, 3, 3)
    _assert_fake(linear.weight, (3, 7))
    _assert_fake(linear.bias, (3,))
    _assert_fake(embedding.weight, (11, 4))
    _assert_fake(conv.weight, (3, 2, 3, 3))
    assert torch.equal(torch.random.get_rng_state(), state)
    assert not [w for w in recwarn if "data pointer" in str(w.message)], "a fake tensor's data_ptr was read"


def _tiny_llama():
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2
    )
    return transformers.LlamaForCausalLM(config)


@pytest.mark.parametrize("route", ["torch", "unseeded", "seeded", "drop-ins"])
def test_a_transformers_model_builds_under_fake_tensor_mode(route):
    """A tiny Llama built under FakeTensorMode as torch builds it: by torch alone, inside the patch
    (with and without a seed), and re-initialised by every drop-in: fake parameters, shapes as torch's,
    torch's RNG untouched."""
    want = {name: tuple(p.shape) for name, p in _tiny_llama().named_parameters()}
    torch.manual_seed(0)
    state = torch.random.get_rng_state()
    with _fake_mode():
        if route in ("unseeded", "seeded"):
            with tinit.patch_torch_init(seed=0 if route == "seeded" else None):
                model = _tiny_llama()
        else:
            model = _tiny_llama()
        if route == "drop-ins":
            for param in model.parameters():
                for name in ("normal_", "uniform_", "trunc_normal_"):
                    getattr(tnn, name)(param.data)
                if param.dim() >= 2:
                    for name in ("xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_"):
                        getattr(tnn, name)(param.data)
    got = {name: p for name, p in model.named_parameters()}
    assert {name: tuple(p.shape) for name, p in got.items()} == want
    for name, param in got.items():
        _assert_fake(param, want[name])
    assert torch.equal(torch.random.get_rng_state(), state)


# ---- error-contract gaps ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["xavier_uniform", "xavier_normal", "lecun_normal", "kaiming_uniform"])
@pytest.mark.parametrize("seed", [None, 0], ids=["drawn", "seeded"])
def test_fill_of_an_empty_vector_writes_and_draws_nothing(scheme, seed):
    """A learned vector's fans are those of an (n, n) weight; n = 0 has no elements, so, as torch's fills
    for a tensor of no elements (``xavier_uniform_`` of (0, 3)), nothing is written or drawn (was a
    ZeroDivisionError)."""
    torch.nn.init.xavier_uniform_(torch.empty(0, 3))  # torch: a no-op
    tensor = torch.empty(0)
    torch.manual_seed(0)
    state = torch.random.get_rng_state()
    assert tinit.fill_(tensor, scheme, role="embedding", seed=seed) is tensor
    assert torch.equal(torch.random.get_rng_state(), state)
    with pytest.raises(ValueError, match="fewer than 2 dimensions") as torch_error:
        torch.nn.init.xavier_uniform_(torch.empty(0))
    _refused(lambda: tnn.xavier_uniform_(tensor), tensor, ValueError, str(torch_error.value))  # the drop-in: torch's


def _lazy():
    return torch.nn.Sequential(torch.nn.Linear(5, 5), torch.nn.LazyLinear(4))


def test_an_uninitialized_parameter_is_refused_naming_it():
    """torch's RuntimeError ("Can't access the shape of an uninitialized parameter") names no parameter:
    tinit's error (a ValueError and a RuntimeError) does, with torch's advice (run forward first)."""
    model = _lazy()
    weight = model[0].weight
    error = _refused(
        lambda: tinit.init_model_(model, "normal"), weight, ValueError, r"parameter 1\.weight is an uninit"
    )
    assert isinstance(error, RuntimeError) and "call `forward` with a dummy batch" in str(error)
    lazy = model[1].weight
    with pytest.raises(RuntimeError, match="uninitialized parameter"):
        tinit.fill_(lazy, "normal", role="linear", seed=0)
    with pytest.raises(RuntimeError, match="uninitialized parameter"):
        tinit.trunc_normal_at_(lazy, 0.0, 1.0, -2.0, 2.0, seed=0)


def test_a_lazy_module_in_the_patch_is_keyed_once_it_runs():
    """Inside the patch a lazy parameter has no memory yet: found by identity, its init in the first
    forward (torch's reset_parameters) takes its name's stream."""
    model = _lazy()
    with tinit.patch_torch_init(seed=3, model=model):
        model(torch.ones(2, 5))
    expected = torch.empty(4, 5)
    tnn.KEYED["kaiming_uniform_"](expected, math.sqrt(5), seed=3, stream=tinit.stream_for("1.weight"))
    torch.testing.assert_close(model[1].weight.detach(), expected, rtol=0, atol=0)


class _Surrogate(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.add_module("l\ud800x", torch.nn.Linear(3, 3))  # Python accepts the name; UTF-8 has no form for it


def test_a_name_without_utf8_form_is_refused_naming_it():
    model = _Surrogate()
    weight = model.get_submodule("l\ud800x").weight
    for call in (lambda: tinit.init_model_(model, "normal"), lambda: tinit.stream_for("l\ud800x.weight")):
        error = _refused(call, weight, ValueError, r"parameter name 'l\\ud800x\.weight' has no UTF-8 form")
        assert not isinstance(error, UnicodeError)
    codes = torch.nn.init.normal_.__code__
    patch = tinit.patch_torch_init(seed=0, model=model)
    with pytest.raises(ValueError, match=r"patch_torch_init: parameter name 'l\\ud800x\.weight'"), patch:
        pass
    assert torch.nn.init.normal_.__code__ is codes, "the patch stayed installed"


@pytest.mark.parametrize("seed", [np.int64(5), np.uint64(2**63 + 5), np.int32(5)], ids=["i64", "u64", "i32"])
def test_numpy_integer_seeds_are_ints_everywhere(seed):
    """Every entry point that takes a seed takes a numpy integer as ``operator.index`` gives it."""
    key = int(seed)
    shape = (6, 4)

    def every(s):
        out = [torch.empty(shape) for _ in range(4)]
        tinit.trunc_normal_at_(out[0], 0.0, 1.0, -2.0, 2.0, seed=s)
        tinit.fill_(out[1], "normal", role="linear", seed=s)
        tnn.KEYED["normal_"](out[2], seed=s)
        with tinit.patch_torch_init(seed=s), tinit.patch_torch_init(seed=key):  # the same seed: nests
            torch.nn.init.normal_(out[3])
        model = torch.nn.Linear(4, 6)
        tinit.init_model_(model, "normal", seed=s)
        return [*out, model.weight.detach()]

    for got, want in zip(every(seed), every(key), strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


class _Holder(torch.nn.Module):
    def __init__(self, weight):
        super().__init__()
        self.w = weight  # a raw Parameter under a name no rule classifies


class _Tied(torch.nn.Module):
    def __init__(self, alias_first: bool):
        super().__init__()
        linear = torch.nn.Linear(4, 6, bias=False)
        if alias_first:
            self.alias = _Holder(linear.weight)
        self.proj = linear
        if not alias_first:
            self.alias = _Holder(linear.weight)


@pytest.mark.parametrize("alias_first", [True, False], ids=["alias-first", "linear-first"])
def test_a_tied_tensor_takes_the_role_of_any_of_its_names(alias_first):
    """The tensor is an ``nn.Linear`` weight whatever name was registered first: classified "linear",
    written under unclassified="skip" and "error" alike (was skipped, or refused, alias first)."""
    for policy in ("skip", "error"):
        model = _Tied(alias_first)
        before = model.proj.weight.detach().clone()
        summary = tinit.init_model_(model, "normal", seed=1, unclassified=policy)
        assert [(entry.role, entry.numel) for entry in summary] == [("linear", 24)]
        assert not torch.equal(model.proj.weight.detach(), before), "the weight was not written"


def test_negative_std_warns_in_the_drop_in_and_the_patch_and_is_refused_by_tinit():
    """torch's trunc_normal_ takes std=-1 as |std| (its rejection branch; torch's normal_ refuses it): the
    drop-in and the patch keep that, with a UserWarning, and write the std=+1 values; tinit's own API
    refuses it naming std, before anything is drawn or written."""
    import scipy.stats

    sample = torch.empty(20000)
    torch.nn.init.trunc_normal_(sample, std=-1.0, generator=torch.Generator().manual_seed(0))
    assert scipy.stats.kstest(sample.numpy(), scipy.stats.truncnorm(-2, 2).cdf).pvalue > 1e-3  # torch: |std|
    torch.manual_seed(4)
    with pytest.warns(UserWarning, match=r"std=-1\.0 is negative; sampling with \|std\| = 1\.0"):
        got = tnn.trunc_normal_(torch.empty(20000), std=-1.0)
    torch.manual_seed(4)
    torch.testing.assert_close(got, tnn.trunc_normal_(torch.empty(20000), std=1.0), rtol=0, atol=0)
    with tinit.patch_torch_init(seed=2), pytest.warns(UserWarning, match="is negative"):
        routed = torch.nn.init.trunc_normal_(torch.empty(64), std=-0.5)
    expected = torch.empty(64)
    tnn.KEYED["trunc_normal_"](expected, 0.0, 0.5, seed=2, stream=0)
    torch.testing.assert_close(routed, expected, rtol=0, atol=0)
    tensor = torch.zeros(4, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _refused(lambda: tinit.trunc_normal_at_(tensor, 0.0, -1.0, -2.0, 2.0, seed=0), tensor, ValueError, "std")
        _refused(lambda: tinit.fill_(tensor, "normal", role="linear", std=-1.0), tensor, ValueError, "std")
        model = torch.nn.Linear(3, 4)
        _refused(lambda: tinit.init_model_(model, "gpt2", std=-0.02), model.weight, ValueError, "std")
