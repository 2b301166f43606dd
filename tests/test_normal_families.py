"""``normal`` on causal-LM families whose own ``_init_weights`` writes values tinit's role rules do not.

Each class is built from its tiny config (``tinit.tools.hf_classes``) on the meta device and initialised
by ``init_model_(model, "normal", seed=0, device="cpu")``; the oracle is the same config built eagerly by
transformers 5.24 (its ``PreTrainedModel._init_weights``: Qwen3.5's gated-delta-net ``dt_bias``,
GraniteSWA's zero ``sinks``, Afmoe's zero router, NemotronLayerNorm1P's ones, Git's LayerNorm inside an
``nn.Sequential``, xLSTM's gate pre-activations). Deterministic values are compared exactly; the
log-uniform ``A_log`` draws against their support and scipy's KS test of U(low, 16).
"""

from __future__ import annotations

import functools
import re
import warnings

import pytest
import torch

import tinit

transformers = pytest.importorskip("transformers", reason="transformers is not installed (pip install transformers)")
stats = pytest.importorskip("scipy.stats", reason="scipy is not installed")
hf_classes = pytest.importorskip("tinit.tools.hf_classes")


@functools.cache
def _config(name: str):
    return hf_classes.config_of(name)


def _meta(name: str, recipe: str = "normal", seed: int = 0):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = hf_classes.build(name, _config(name))
        tinit.init_model_(model, recipe, seed=seed, device="cpu")
    return model


@functools.cache
def _eager_model(name: str):
    torch.manual_seed(1)
    with warnings.catch_warnings(), torch.device("cpu"):
        warnings.simplefilter("ignore")
        return hf_classes.build(name, _config(name), device="cpu")


@functools.cache
def _eager(name: str) -> dict[str, torch.Tensor]:
    return {k: p.detach().clone() for k, p in _eager_model(name).named_parameters()}


# (class, regex of the parameter names HF writes deterministically and tinit used to get wrong)
EXACT = [
    ("Qwen3_5ForCausalLM", r"linear_attn\.dt_bias$"),
    ("Qwen3_5MoeForCausalLM", r"linear_attn\.dt_bias$"),
    ("Qwen4ExpForCausalLM", r"linear_attn\.dt_bias$"),
    ("LaraMiniForCausalLM", r"linear_attn\.dt_bias$"),
    ("GraniteSWAForCausalLM", r"self_attn\.sinks$"),
    ("GraniteMoeSWAForCausalLM", r"self_attn\.sinks$"),
    ("AfmoeForCausalLM", r"mlp\.router\.gate\.weight$"),
    ("NemotronForCausalLM", r"layernorm\.(weight|bias)$|^model\.norm\.(weight|bias)$"),
    ("GitForCausalLM", r"visual_projection\.visual_projection\.1\.(weight|bias)$"),
    ("xLSTMForCausalLM", r"[iof]gate_preact\.(weight|bias)$|proj_up_gate\.weight$"),
    ("Gemma3nForCausalLM", r"altup\.correct_output_scale$"),
    ("ErgoForCausalLM", r"residual_gate\.weight$"),
]


@pytest.mark.parametrize(("name", "pattern"), EXACT, ids=[name for name, _ in EXACT])
def test_deterministic_values_are_hf_s(name, pattern):
    reference = _eager(name)
    chosen = [k for k in reference if re.search(pattern, k)]
    assert chosen, f"no parameter of {name} matches {pattern}"
    mine = dict(_meta(name).named_parameters())
    for key in chosen:
        # HF's values are deterministic: the second eager build's draws do not change them
        assert torch.equal(mine[key].detach(), reference[key]), key


def test_xlstm_gate_biases_are_hf_s_constants():
    """The values themselves (besides equality with HF): -10 and torch.linspace(3, 6, heads)."""
    reference = _eager("xLSTMForCausalLM")
    heads = _config("xLSTMForCausalLM").num_heads
    mine = dict(_meta("xLSTMForCausalLM").named_parameters())
    for key, value in mine.items():
        if key.endswith("igate_preact.bias"):
            assert torch.equal(value.detach(), torch.full((heads,), -10.0)), key
        if key.endswith("fgate_preact.bias"):
            assert torch.equal(value.detach(), torch.linspace(3.0, 6.0, heads)), key
            assert torch.equal(value.detach(), reference[key]), key


@pytest.mark.parametrize(("name", "low"), [("Qwen3_5ForCausalLM", 0.01), ("LaraMiniForCausalLM", 1.0)])
def test_a_log_is_log_uniform_as_hf_draws_it(name, low):
    """HF: ``torch.empty(num_v_heads).uniform_(low, 16).log_()`` (Qwen3.5: low 0.01, Lara-Mini: 1)."""
    drawn = []
    for seed in range(12):
        params = dict(_meta(name, seed=seed).named_parameters())
        drawn += [p.detach().double().exp().reshape(-1) for k, p in params.items() if k.endswith("linear_attn.A_log")]
    values = torch.cat(drawn)
    assert values.numel() >= 48
    hf = torch.cat([p.double().exp().reshape(-1) for k, p in _eager(name).items() if k.endswith("linear_attn.A_log")])
    for x in (values, hf):
        assert x.min() >= low * (1 - 1e-6) and x.max() <= 16 * (1 + 1e-6)
    assert stats.kstest(values.numpy(), stats.uniform(low, 16 - low).cdf).pvalue > 1e-4


def test_nemotron_norms_keep_unit_gain_under_other_recipes():
    """NemotronLayerNorm1P scales by 1 + weight: ``normal`` writes HF's weight 1, a recipe's own norm
    rule (gain 1) still writes weight 0."""
    params = dict(_meta("NemotronForCausalLM", recipe="depth_init").named_parameters())
    norms = [k for k in params if k.endswith("layernorm.weight")]
    assert norms
    assert all(torch.equal(params[k].detach(), torch.zeros_like(params[k])) for k in norms)


def test_gpt_oss_sinks_are_still_drawn():
    """HF GptOssPreTrainedModel._init_weights draws its sinks N(0, initializer_range): not zero."""
    params = dict(_meta("GptOssForCausalLM").named_parameters())
    sinks = torch.cat([p.detach().reshape(-1) for k, p in params.items() if k.endswith("self_attn.sinks")])
    assert sinks.numel() > 0 and sinks.abs().max() > 0
    std = _config("GptOssForCausalLM").initializer_range
    assert sinks.abs().max() < 10 * std


@pytest.mark.parametrize(
    ("name", "module"),
    [
        ("MarianForCausalLM", "MarianSinusoidalPositionalEmbedding"),
        ("PegasusForCausalLM", "PegasusSinusoidalPositionalEmbedding"),
        ("RoFormerForCausalLM", "RoFormerSinusoidalPositionalEmbedding"),
    ],
)
def test_sinusoidal_positions_are_refused_naming_them(name, module):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = hf_classes.build(name, _config(name))
        with pytest.raises(ValueError, match=rf"embed_positions\.weight.*{module}\.create_weight"):
            tinit.init_model_(model, "normal", seed=0, device="cpu")
    assert all(p.is_meta for p in model.parameters())  # refused before anything was written


# (class, regex of buffer names tinit could not recompute on meta before): HF's own values, bit for bit
BUFFERS = [
    ("Gemma4ForCausalLM", r"layer_scalar$|rotary_emb\..*inv_freq$"),
    ("Gemma4UnifiedForCausalLM", r"layer_scalar$|rotary_emb\..*inv_freq$"),
    ("Gemma3nForCausalLM", r"per_layer_projection_scale$|per_layer_input_scale$|router_input_scale$"),
]


@pytest.mark.parametrize(("name", "pattern"), BUFFERS, ids=[name for name, _ in BUFFERS])
def test_buffers_are_hf_s(name, pattern):
    reference = dict(_eager_model(name).named_buffers())
    chosen = [k for k in reference if re.search(pattern, k)]
    assert chosen, f"no buffer of {name} matches {pattern}"
    mine = dict(_meta(name).named_buffers())
    for key in chosen:
        assert mine[key].dtype == reference[key].dtype, key
        assert torch.equal(mine[key], reference[key]), key


class _XieluBuffers(tinit.buffers.BufferRecipe):
    """A user's recipe for XIELU's ``beta``/``eps``, registered first: it wins over ``hf_constructor``."""

    name = "test_xielu"

    def __init__(self):
        self.claimed = []

    def claims(self, module):
        return ("beta", "eps") if type(module).__name__ == "XIELUActivation" else ()

    def values(self, module):
        self.claimed.append(module)
        return {
            "beta": torch.tensor(module._beta_scalar, dtype=module.beta.dtype),
            "eps": torch.tensor(module._eps_scalar, dtype=module.eps.dtype),
        }


@pytest.mark.parametrize("name", ["ApertusForCausalLM", "Apertus1p5TextForCausalLM"])
def test_xielu_alphas_are_hf_s(name):
    """XIELUActivation.__init__'s log(expm1(0.8)) and log(expm1(0.8 - beta)), bit for bit, with its
    ``beta``/``eps`` buffers recomputed by its constructor (``hf_constructor``) or by a user's recipe."""
    reference = _eager(name)
    buffers = dict(_eager_model(name).named_buffers())
    chosen = [k for k in reference if re.search(r"act_fn\.alpha_[pn]$", k)]
    scalars = [k for k in buffers if re.search(r"act_fn\.(beta|eps)$", k)]
    assert chosen and scalars
    by_constructor = _meta(name)
    recipe = tinit.buffers.register(_XieluBuffers())
    try:
        by_user = _meta(name)
    finally:
        tinit.buffers.RECIPES.remove(recipe)
    assert recipe.claimed  # the user's recipe, first in RECIPES, took them
    for model in (by_constructor, by_user):
        mine, own = dict(model.named_parameters()), dict(model.named_buffers())
        for key in chosen:
            assert torch.equal(mine[key].detach(), reference[key]), key
        for key in scalars:
            assert own[key].dtype == buffers[key].dtype and torch.equal(own[key], buffers[key]), key


@pytest.mark.parametrize(
    ("name", "first"),
    [("DiffLlamaForCausalLM", r"self_attn\.lambda_q1"), ("XLNetLMHeadModel", r"transformer\.mask_emb")],
)
def test_parameters_a_meta_build_makes_off_meta_are_not_taken_as_loaded(name, first):
    """DiffLlama's ``torch.normal`` lambdas and XLNet's ``torch.FloatTensor`` weights are made off the meta
    device by the constructor of a meta build: ``normal`` selects them like the meta ones (it has no
    rule for them, so it refuses them by name, before writing), instead of leaving them as loaded."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = hf_classes.build(name, _config(name))
        off = {n: p.detach().clone() for n, p in model.named_parameters() if not p.is_meta}
        assert off  # the constructor made them off meta
        with pytest.raises(ValueError, match=rf"match no role rule.*{first}"):
            tinit.init_model_(model, "normal", seed=0, device="cpu")
    params = dict(model.named_parameters())
    for n, before in off.items():
        # bit patterns: XLNet's torch.FloatTensor memory may hold NaNs
        assert torch.equal(params[n].detach().view(torch.int32), before.view(torch.int32)), n
