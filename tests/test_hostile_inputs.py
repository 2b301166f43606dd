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
