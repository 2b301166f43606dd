"""Inputs a hostile user tries: each refused with a TypeError/ValueError naming what is wrong (a
RuntimeError too where torch raises one), before anything is written or drawn, or done as torch does it.

Oracles: torch's own functions on the same inputs (its refusal, its values under FakeTensorMode, its
warning), the fp64 value of the same stream uniforms, and torch's RNG state and the tensor's bits,
which a refusal must leave as they were.
"""

from __future__ import annotations

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
