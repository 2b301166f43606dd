"""tinit.tools.toy_models.GPT: GPT-2 small's shape, meta construction, weight tying, a forward pass."""

from __future__ import annotations

import pytest
import torch

from tinit.tools.toy_models import GPT, GPTConfig

GPT2_SMALL_PARAMS = 124_439_808  # Hugging Face GPT2LMHeadModel(GPT2Config()), tied head counted once


def test_default_is_gpt2_small_on_meta():
    with torch.device("meta"):
        model = GPT()
    assert sum(p.numel() for p in model.parameters()) == GPT2_SMALL_PARAMS
    assert all(p.device.type == "meta" for p in model.parameters())
    assert model.lm_head.weight is model.transformer.wte.weight


def test_to_empty_unties_and_tie_weights_reties():
    with torch.device("meta"):
        model = GPT(GPTConfig(n_layers=1, d_model=32, n_heads=2, vocab=97, n_ctx=16))
    model.to_empty(device="cpu")
    assert model.lm_head.weight is not model.transformer.wte.weight
    model.tie_weights()
    assert model.lm_head.weight is model.transformer.wte.weight


def test_forward():
    torch.manual_seed(0)
    config = GPTConfig(n_layers=2, d_model=32, n_heads=4, vocab=97, n_ctx=16)
    model = GPT(config)
    ids = torch.randint(0, config.vocab, (3, 11))
    logits = model(ids)
    assert logits.shape == (3, 11, config.vocab)
    assert torch.isfinite(logits).all()
    # Causal: the logits at position t do not depend on tokens after t.
    changed = ids.clone()
    changed[:, 6:] = (changed[:, 6:] + 1) % config.vocab
    torch.testing.assert_close(model(changed)[:, :6], logits[:, :6])


@pytest.mark.parametrize(
    "kwargs",
    [{"n_layers": 0}, {"d_model": 64, "n_heads": 5}, {"vocab": 1.5}],
    ids=["no-layers", "heads-not-dividing", "float-vocab"],
)
def test_bad_config(kwargs):
    with pytest.raises(ValueError):
        GPTConfig(**kwargs)
