"""init_model_ refuses bad input before writing anything: unsupported dtypes, bad seeds and specs,
inference tensors, unknown backends; constants need no backend.
"""

from __future__ import annotations

import pytest
import torch
from helpers.grouped import (
    SEED,
    MixedDtypes,
    S,
    assert_unchanged,
    bits,
    prefilled,
    snapshot,
)
from torch import nn

import tinit
from tinit import FillItem, write_grouped_

# --- init_model_: refusals before writing ------------------------------------


@pytest.mark.parametrize("dtype", [torch.int32, torch.complex64, torch.uint8], ids=["int32", "complex64", "uint8"])
@pytest.mark.parametrize("grouped_fill", [True, False], ids=["grouped", "one-by-one"])
def test_unsupported_dtype_last_writes_nothing(dtype, grouped_fill):
    model = prefilled(MixedDtypes(n_layers=2))
    model.register_parameter("zz_last", nn.Parameter(torch.zeros(3, 3, dtype=dtype), requires_grad=False))
    before = snapshot(model)
    with pytest.raises(TypeError, match="dtype"):
        tinit.init_model_(model, "normal", seed=SEED, grouped=grouped_fill, overrides={"^zz_": "mlp_in"})
    assert_unchanged(model, before)


@pytest.mark.parametrize(
    ("seed", "error"),
    [(True, TypeError), (-1, ValueError), (2**64, ValueError), (1.0, TypeError), (None, TypeError)],
    ids=["bool", "negative", "2**64", "float", "none"],
)
def test_bad_seed_writes_nothing(seed, error):
    model = prefilled(MixedDtypes(n_layers=2))
    before = snapshot(model)
    with pytest.raises(error, match="seed"):
        tinit.init_model_(model, "normal", seed=seed)
    assert_unchanged(model, before)


def test_bad_spec_for_the_last_parameter_writes_nothing():
    """A scheme error at the last parameter (kaiming_normal on a 1-D weight) writes nothing."""
    model = prefilled(MixedDtypes(n_layers=2))
    model.register_parameter("zz_proj_weight", nn.Parameter(torch.full((4,), 7.0)))
    before = snapshot(model)
    with pytest.raises(ValueError, match="2 dims"):
        tinit.init_model_(model, "kaiming_normal", seed=SEED, overrides={"^zz_": "mlp_in"})
    assert_unchanged(model, before)


def test_refused_meta_model_stays_on_meta():
    with torch.device("meta"):
        model = MixedDtypes(n_layers=2)
    with pytest.raises(ValueError, match="residual_gate"):
        tinit.init_model_(model, "rezero", seed=SEED, device="cpu")
    assert all(p.is_meta for p in model.parameters()), "a refused call materialised the model"


# --- refusals found by review ----------------------------------------------


def test_inference_tensors_are_refused_before_anything_is_written():
    """Parameters made under torch.inference_mode cannot be written outside it: refused up front,
    not after the zeros were written."""
    with torch.inference_mode():
        model = MixedDtypes(n_layers=2)
    before = [p.clone() for p in model.parameters()]
    with pytest.raises(RuntimeError, match="inference"):
        tinit.init_model_(model, "gpt2", seed=SEED)
    for p, old in zip(model.parameters(), before, strict=True):
        assert torch.equal(bits(p), bits(old))


def test_constants_need_no_backend():
    """A zero or a constant is written by torch itself, as write_spec_ writes it: a backend that
    cannot fill the tensor (triton: no float64) does not stop it."""
    gain, bias = torch.full((5,), 7.0, dtype=torch.float64), torch.full((5,), 7.0, dtype=torch.float64)
    write_grouped_(
        [FillItem(gain, S(constant=1.0), 0), FillItem(bias, S(constant=0.0), 0)], seed=SEED, backend="triton"
    )
    assert torch.equal(gain, torch.ones(5, dtype=torch.float64)) and torch.equal(
        bias, torch.zeros(5, dtype=torch.float64)
    )


def test_unknown_backend_is_refused_before_materialising():
    with torch.device("meta"):
        model = MixedDtypes(n_layers=2)
    with pytest.raises(ValueError, match="unknown tinit backend"):
        tinit.init_model_(model, "gpt2", seed=SEED, device="cpu", backend="bogus")
    assert all(p.is_meta for p in model.parameters())
