"""State-space and gated-delta-net hybrids of transformers under tinit's own recipes.

Mamba, Mamba-2, Jamba, Bamba, Falcon-H1, GraniteMoeHybrid, Nemotron-H and Qwen3-Next, each built on
the meta device from a tiny config and initialised by ``normal``, ``gpt2``, ``megatron`` and
``depth_init``. The oracle is the model's own code: the same config built eagerly by transformers
(``PreTrainedModel._init_weights``, ``Mamba2Mixer.init_mamba2_weights``, ...), ``torch.nn.init``'s
kaiming-uniform bound and scipy's distributions for the mapped draws (``InitSpec.map``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import warnings
from collections import defaultdict

import numpy as np
import pytest
import torch

import tinit
from tinit.schemes import InitSpec

transformers = pytest.importorskip("transformers", reason="transformers is not installed (pip install transformers)")
stats = pytest.importorskip("scipy.stats", reason="scipy is not installed")

VOCAB = 512
_SMALL = {"vocab_size": VOCAB, "num_hidden_layers": 2}
_HYBRID = {**_SMALL, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2}
_MAMBA2_MIXER = {"mamba_n_heads": 8, "mamba_d_head": 16, "mamba_n_groups": 1, "mamba_d_state": 16}
_MAMBA2_MIXER.update({"mamba_d_conv": 4, "mamba_expand": 2, "mamba_chunk_size": 32})
# (config class, fields): 2 blocks, width 64-128, a state-space block and (hybrids) an attention block.
CONFIGS = {
    "mamba": ("MambaConfig", {**_SMALL, "hidden_size": 64, "state_size": 16, "expand": 2, "conv_kernel": 4}),
    "mamba2": (  # the reproducer
        "Mamba2Config",
        {**_SMALL, "hidden_size": 128, "num_heads": 8, "head_dim": 32, "state_size": 16, "n_groups": 2}
        | {"expand": 2, "conv_kernel": 4, "chunk_size": 32},
    ),
    "jamba": (
        "JambaConfig",
        {**_HYBRID, "num_experts": 4, "num_experts_per_tok": 2, "expert_layer_period": 2, "expert_layer_offset": 1}
        | {"attn_layer_period": 2, "attn_layer_offset": 1, "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2},
    ),
    "bamba": ("BambaConfig", {**_HYBRID, **_MAMBA2_MIXER, "attn_layer_indices": [1]}),
    "falcon_h1": ("FalconH1Config", {**_HYBRID, **_MAMBA2_MIXER, "head_dim": 16, "mamba_d_ssm": 128}),
    "granitemoehybrid": (
        "GraniteMoeHybridConfig",
        {**_HYBRID, **_MAMBA2_MIXER, "num_local_experts": 4, "num_experts_per_tok": 2}
        | {"shared_intermediate_size": 128, "layer_types": ["mamba", "attention"]},
    ),
    "nemotron_h": (
        "NemotronHConfig",
        {**_HYBRID, "head_dim": 16, "mamba_num_heads": 8, "mamba_head_dim": 16, "n_groups": 1}
        | {"ssm_state_size": 16, "conv_kernel": 4, "chunk_size": 32, "hybrid_override_pattern": "M*"},
    ),
    "qwen3_next": (
        "Qwen3NextConfig",
        {**_HYBRID, "head_dim": 16, "moe_intermediate_size": 64, "shared_expert_intermediate_size": 64}
        | {"num_experts": 4, "num_experts_per_tok": 2, "linear_num_value_heads": 4, "linear_num_key_heads": 2}
        | {"linear_key_head_dim": 16, "linear_value_head_dim": 16, "linear_conv_kernel_dim": 4}
        | {"layer_types": ["linear_attention", "full_attention"]},
    ),
}
RECIPES = ("normal", "gpt2", "megatron", "depth_init")
STATE = {"ssm_a", "ssm_d", "ssm_dt"}
# The mixer's parameters and the role each leaf gets (tinit.roles: a mixer's in_proj is no fused q/k/v).
MIXER_ROLES = {
    "A_log": "ssm_a",
    "D": "ssm_d",
    "dt_bias": "ssm_dt",
    "dt_proj.bias": "ssm_dt",
    "dt_proj.weight": "ssm_in",
    "x_proj.weight": "ssm_in",
    "in_proj.weight": "ssm_in",
    "in_proj_qkvz.weight": "ssm_in",
    "in_proj_ba.weight": "ssm_in",
    "conv1d.weight": "ssm_conv",
    "conv1d.bias": "bias",
    "out_proj.weight": "attn_out",
}
_MIXER = re.compile(r"\.(mixer|mamba|linear_attn)\.(.+)$")
# Where HF draws dt_bias log-uniform (the others write a constant: 1, Jamba's nn.Linear bias 0).
RANDOM_DT = {"mamba": "dt_proj.bias", "mamba2": "dt_bias", "nemotron_h": "dt_bias"}
# The matrices HF draws kaiming-uniform (a = sqrt(5)), and their scale: 1 / sqrt(L) when rescaled.
KAIMING = {
    "mamba": ("conv1d.weight", "out_proj.weight"),
    "mamba2": ("conv1d.weight", "out_proj.weight"),
    "nemotron_h": ("out_proj.weight",),
}


def _config(family: str, **fields):
    name, given = CONFIGS[family]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return getattr(transformers, name)(**{**given, **fields})


def _build(config, device: str = "meta") -> torch.nn.Module:
    with warnings.catch_warnings(), torch.device(device):
        warnings.simplefilter("ignore")
        return transformers.AutoModelForCausalLM.from_config(config)


@functools.cache
def _eager(family: str, seed: int = 0) -> dict[str, torch.Tensor]:
    """The eager HF build's parameters and buffers: the model's own init under ``torch.manual_seed``."""
    torch.manual_seed(seed)
    model = _build(_config(family), "cpu")
    return {**dict(model.named_parameters()), **dict(model.named_buffers())}


@functools.cache
def _tinit(family: str, recipe: str) -> tuple[torch.nn.Module, dict]:
    """(the meta-built model initialised by ``recipe``, seed 0, on the CPU, {name: its ParamInit})."""
    model = _build(_config(family))
    summary = tinit.init_model_(model, recipe, seed=0, device="cpu")
    return model, {entry.name: entry for entry in summary}


def _pooled(values, wanted):
    """{name template (block numbers as N): the values of the parameters ``wanted(name)`` picks, flat, float64}."""
    found = defaultdict(list)
    for name, value in values.items():
        if wanted(name):
            found[re.sub(r"\.\d+\.", ".N.", name)].append(value.detach().double().flatten())
    return {template: torch.cat(parts) for template, parts in found.items()}


def _mixer_leaf(name: str) -> str | None:
    match = _MIXER.search(name)
    return match.group(2) if match else None


def _softplus_inverse(t: float) -> float:
    return t + math.log(-math.expm1(-t))


@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.parametrize("family", sorted(CONFIGS))
def test_every_recipe_initialises_the_meta_model_and_it_runs(family, recipe):
    """No refusal, nothing left on meta, the mixer's roles, the state as the model gives it (the same
    bits under every recipe: no recipe scales it), a finite forward pass."""
    model, summary = _tinit(family, recipe)
    assert not any(t.is_meta for t in (*model.parameters(), *model.buffers()))
    for name, entry in summary.items():
        leaf = _mixer_leaf(name)
        if leaf in MIXER_ROLES:
            assert entry.role == MIXER_ROLES[leaf], name
    states = [name for name, entry in summary.items() if entry.role in STATE]
    assert {_mixer_leaf(n) for n in states} >= {"A_log"}
    normal = dict(_tinit(family, "normal")[0].named_parameters())
    for name in states:
        assert torch.equal(model.get_parameter(name), normal[name]), name
    ids = (torch.arange(32).reshape(2, 16) * 37) % VOCAB
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    assert logits.shape == (2, 16, VOCAB) and torch.isfinite(logits).all()


@pytest.mark.parametrize("family", sorted(CONFIGS))
def test_the_state_is_the_eager_builds(family):
    """A_log and D bit for bit the eager build's (Qwen3-Next's A_log, log U(0.01, 16), within its
    bounds); a constant dt_bias exactly, a log-uniform one inside the inverse softplus of HF's
    [time_step_min, time_step_max] and distributed as the eager build's (KS)."""
    model, summary = _tinit(family, "normal")
    eager = _eager(family)
    config = _config(family)
    for name, entry in summary.items():
        if entry.role not in STATE:
            continue
        ours, theirs = model.get_parameter(name), eager[name]
        random = (family == "qwen3_next" and entry.role == "ssm_a") or (
            family in RANDOM_DT and _mixer_leaf(name) == RANDOM_DT[family]
        )
        if not random:
            assert torch.equal(ours, theirs), name
            continue
        assert ours.dtype == theirs.dtype and not torch.equal(ours, theirs)
        if entry.role == "ssm_a":
            low, high = math.log(0.01), math.log(16.0)
        else:
            floor = config.time_step_floor
            low = _softplus_inverse(max(config.time_step_min, floor))
            high = _softplus_inverse(config.time_step_max)
        assert low - 1e-6 <= ours.min() and ours.max() <= high + 1e-6, name
    for template, ours in _pooled(dict(model.named_parameters()), lambda n: summary[n].role in STATE).items():
        theirs = _pooled(eager, lambda n, t=template: re.sub(r"\.\d+\.", ".N.", n) == t)[template]
        assert stats.ks_2samp(ours.numpy(), theirs.numpy()).pvalue > 1e-3, template


def _dt_oracle(values: torch.Tensor, t_min: float, t_max: float) -> float:
    """The one-sample KS p-value of ``values`` against dt_bias = softplus^-1(exp(u)), u ~ U[log t_min,
    log t_max] (a floor below t_min): P(dt_bias <= y) = (log softplus(y) - log t_min) / (log t_max - log t_min)."""

    def cdf(y):
        return ((np.log(np.logaddexp(0.0, y)) - math.log(t_min)) / (math.log(t_max) - math.log(t_min))).clip(0, 1)

    return stats.kstest(values.double().numpy(), cdf).pvalue


def test_dt_bias_is_the_inverse_softplus_of_a_log_uniform_dt():
    """Mamba-2 with 512 heads: dt_bias follows the model's formula (scipy's KS against its CDF, the
    eager build's values by a two-sample KS, the mean within 5 standard errors of HF's) and spans
    its bounds; a Nemotron-H config's own time steps are read, its floor clamps dt."""
    wide = {"hidden_size": 256, "num_heads": 512, "head_dim": 1, "n_groups": 1}
    model = _build(_config("mamba2", **wide))
    tinit.init_model_(model, "normal", seed=0, device="cpu")
    ours = torch.cat([p.detach().flatten() for n, p in model.named_parameters() if n.endswith("dt_bias")])
    torch.manual_seed(0)
    eager = _build(_config("mamba2", **wide), "cpu")
    theirs = torch.cat([p.detach().flatten() for n, p in eager.named_parameters() if n.endswith("dt_bias")])
    assert ours.numel() == theirs.numel() == 1024
    assert _dt_oracle(ours, 0.001, 0.1) > 1e-3
    assert _dt_oracle(theirs, 0.001, 0.1) > 1e-3  # the oracle describes HF's own values
    assert stats.ks_2samp(ours.numpy(), theirs.numpy()).pvalue > 1e-3
    se = math.hypot(ours.std().item(), theirs.std().item()) / math.sqrt(ours.numel())
    assert abs(ours.mean().item() - theirs.mean().item()) < 5 * se
    low, high = _softplus_inverse(0.001), _softplus_inverse(0.1)
    assert low - 1e-6 <= ours.min() < low + 0.05 and high - 0.05 < ours.max() <= high + 1e-6

    steps = {"time_step_min": 0.01, "time_step_max": 0.2, "time_step_floor": 0.02, "mamba_num_heads": 256}
    model = _build(_config("nemotron_h", mamba_head_dim=1, **steps))
    tinit.init_model_(model, "gpt2", seed=1, device="cpu")
    ours = torch.cat([p.detach().flatten() for n, p in model.named_parameters() if n.endswith("dt_bias")])
    floored = (ours == ours.min()).double().mean().item()  # P(dt < floor) of the log-uniform
    share = (math.log(0.02) - math.log(0.01)) / (math.log(0.2) - math.log(0.01))
    assert abs(floored - share) < 5 * math.sqrt(share * (1 - share) / ours.numel())
    assert ours.min().item() == pytest.approx(_softplus_inverse(0.02), rel=1e-6)
    assert ours.max().item() <= _softplus_inverse(0.2) + 1e-6


@pytest.mark.parametrize("family", sorted(CONFIGS))
def test_normal_draws_the_matrices_from_the_configs_initializer_range(family):
    """Every matrix HF draws N(0, initializer_range) (Mamba-2's default 0.1, the others 0.02): pooled
    per name template, its std within max(1 %, 5 / sqrt(2n)) of it and a normal (KS against the
    eager build's); the matrices the model draws its own way are the next test's."""
    model, summary = _tinit(family, "normal")
    std = _config(family).initializer_range
    own = {name for leaf in KAIMING.get(family, ()) for name in summary if _mixer_leaf(name) == leaf}
    own |= {name for name in summary if family == "mamba" and _mixer_leaf(name) == "dt_proj.weight"}
    params = dict(model.named_parameters())
    drawn = {n for n, e in summary.items() if params[n].dim() >= 2 and e.role not in STATE and n not in own}
    assert drawn
    eager = _eager(family)
    for template, values in _pooled(params, drawn.__contains__).items():
        n = values.numel()
        assert abs(values.std().item() / std - 1) <= max(0.01, 5 / math.sqrt(2 * n)), template
        assert abs(values.mean().item()) < 5 * std / math.sqrt(n), template
    for template, values in _pooled(params, lambda n: n in drawn and "experts" not in n).items():
        theirs = _pooled(eager, lambda n, t=template: re.sub(r"\.\d+\.", ".N.", n) == t)[template]
        assert stats.ks_2samp(values.numpy(), theirs.numpy()).pvalue > 1e-4, template


@pytest.mark.parametrize("family", sorted(KAIMING))
def test_normal_draws_the_kaiming_uniform_matrices_as_hf_does(family):
    """Mamba's and Mamba-2's conv1d and out_proj, Nemotron-H's out_proj (rescaled by 1 / sqrt(L)):
    uniform within torch.nn.init.kaiming_uniform_'s bound (a = sqrt(5)), its std, as the eager build."""
    model, summary = _tinit(family, "normal")
    config = _config(family)
    eager = _eager(family)
    for leaf in KAIMING[family]:
        names = [name for name in summary if _mixer_leaf(name) == leaf]
        weight = model.get_parameter(names[0])
        fan_in, _ = torch.nn.init._calculate_fan_in_and_fan_out(weight)
        bound = torch.nn.init.calculate_gain("leaky_relu", math.sqrt(5)) * math.sqrt(3.0 / fan_in)
        if leaf == "out_proj.weight" and config.rescale_prenorm_residual:
            bound /= math.sqrt(config.num_hidden_layers)
        ours = torch.cat([model.get_parameter(n).detach().double().flatten() for n in names])
        theirs = torch.cat([eager[n].detach().double().flatten() for n in names])
        for values in (ours, theirs):  # the oracle's bound holds for HF's own values too
            assert values.abs().max() <= bound * (1 + 1e-6), leaf
            assert values.abs().max() > 0.95 * bound, leaf
        n = ours.numel()
        assert abs(ours.std().item() / (bound / math.sqrt(3)) - 1) <= max(0.01, 5 / math.sqrt(2 * n)), leaf
        assert stats.ks_2samp(ours.numpy(), theirs.numpy()).pvalue > 1e-3, leaf
    if family == "mamba":  # dt_proj.weight: U(+-time_step_rank^-1/2 * time_step_scale), "random"
        names = [name for name in summary if _mixer_leaf(name) == "dt_proj.weight"]
        ours = torch.cat([model.get_parameter(n).detach().flatten() for n in names])
        bound = config.time_step_rank**-0.5 * config.time_step_scale
        assert ours.abs().max() <= bound and ours.abs().max() > 0.95 * bound


def test_depth_scaled_recipes_scale_the_mixer_output_and_nothing_of_the_state():
    """The mixer's out_proj writes to the residual stream: gpt2 (initializer_range / sqrt(2L)),
    megatron (0.02 / sqrt(2L)) and depth_init (0.02 / sqrt(2 (l + 1))) scale it; the input
    projections and the convolution get the recipe's std; the state is the model's."""
    layers, base = 2, _config("mamba2").initializer_range
    want = {
        "gpt2": (base / math.sqrt(2 * layers), base),
        "megatron": (0.02 / math.sqrt(2 * layers), 0.02),
        "depth_init": (None, 0.02),
    }
    for recipe, (out_std, in_std) in want.items():
        _, summary = _tinit("mamba2", recipe)
        for name, entry in summary.items():
            leaf = _mixer_leaf(name)
            if leaf == "out_proj.weight":
                expected = out_std if out_std is not None else 0.02 / math.sqrt(2 * (entry.layer + 1))
                assert entry.std == pytest.approx(expected), (recipe, name)
            elif leaf in ("in_proj.weight", "conv1d.weight"):
                assert entry.std == pytest.approx(in_std) and entry.spec.parts is None, (recipe, name)


def test_normal_reads_initializer_range_and_an_explicit_std_wins():
    """``normal`` follows the config (Mamba-2's 0.1) unless ``std=`` is given; megatron and
    depth_init keep their own 0.02."""
    _, summary = _tinit("mamba2", "normal")
    assert summary["backbone.embeddings.weight"].std == 0.1
    model = _build(_config("mamba2"))
    given = {e.name: e for e in tinit.init_model_(model, "normal", seed=0, device="cpu", std=0.05)}
    assert given["backbone.embeddings.weight"].std == given["lm_head.weight"].std == 0.05
    assert given["backbone.layers.0.mixer.conv1d.weight"].spec.distribution == "uniform"  # the model's own
    for recipe in ("megatron", "depth_init"):
        assert _tinit("mamba2", recipe)[1]["backbone.layers.0.mixer.in_proj.weight"].std == 0.02


def test_in_proj_is_read_by_its_module():
    """nn.MultiheadAttention's in_proj_weight is a fused q/k/v; a module holding A_log is a mixer
    whatever its name, its in_proj an input projection, its conv1d the convolution, D the skip."""

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = torch.nn.MultiheadAttention(16, 2)
            self.scan = torch.nn.Module()
            self.scan.A_log = torch.nn.Parameter(torch.zeros(4, 3))
            self.scan.D = torch.nn.Parameter(torch.zeros(4))
            self.scan.in_proj = torch.nn.Linear(16, 8, bias=False)
            self.scan.conv1d = torch.nn.Conv1d(4, 4, 3, groups=4)

    block = Block()
    roles = {e.name: e for e in tinit.init_model_(block, "normal", seed=0)}
    assert roles["attention.in_proj_weight"].role == "attn_qkv"
    assert {n: roles[f"scan.{n}"].role for n in ("A_log", "D", "in_proj.weight", "conv1d.weight", "conv1d.bias")} == {
        "A_log": "ssm_a",
        "D": "ssm_d",
        "in_proj.weight": "ssm_in",
        "conv1d.weight": "ssm_conv",
        "conv1d.bias": "bias",
    }
    assert torch.equal(block.scan.A_log, torch.log(torch.arange(1, 4, dtype=torch.float32)).expand(4, 3))
    assert torch.equal(block.scan.D, torch.ones(4))


def test_falcon_h1_mup_vector_is_its_models():
    """The buffer Falcon-H1's model registers on every mixer (compute_mup_vector of its config) is
    recomputed on materialising, bit for bit the eager build's, with non-default multipliers."""
    multipliers = {"ssm_multipliers": [0.5, 2.0, 0.25, 4.0, 3.0]}
    model = _build(_config("falcon_h1", **multipliers))
    tinit.init_model_(model, "depth_init", seed=0, device="cpu")
    eager = _build(_config("falcon_h1", **multipliers), "cpu")
    buffers = [(n, b) for n, b in eager.named_buffers() if n.endswith("mup_vector")]
    assert len(buffers) == 2 and len(torch.unique(buffers[0][1])) == 5
    for name, buffer in buffers:
        assert torch.equal(model.get_buffer(name), buffer), name


# ------------------------------------------------------------------ the engine's mapped draws


def _draw(spec: InitSpec, shape=(6, 50), dtype=torch.float64, **where) -> torch.Tensor:
    return tinit.write_spec_(torch.empty(shape, dtype=dtype), spec, seed=5, stream=3, **where)


@pytest.mark.parametrize(
    "spec,function",
    [
        (InitSpec(mean=8.005, std=15.99 / math.sqrt(12), trunc=math.sqrt(3), distribution="uniform"), torch.log),
        (InitSpec(mean=-4.0, std=1.0, trunc=math.sqrt(3), distribution="uniform"), None),
        (InitSpec(mean=1.0, std=0.1, trunc=3.0), torch.log),  # a truncated normal, mapped
    ],
)
def test_a_mapped_draw_is_its_function_of_the_float64_draw(spec, function):
    """The map applies per element to the float64 values the same stream position gives without it,
    the result rounded to the tensor's dtype; a shard holds the slice of the whole."""
    mapped = dataclasses.replace(spec, map=("log",) if function is not None else ("softplus_inverse_exp", 0.01))
    plain = _draw(spec)
    if function is None:
        dt = plain.exp().clamp(min=0.01)
        want = dt + torch.log(-torch.expm1(-dt))
    else:
        want = function(plain)
    assert torch.equal(_draw(mapped), want)
    for dtype in (torch.float32, torch.bfloat16):
        assert torch.equal(_draw(mapped, dtype=dtype), want.to(dtype))
    shard = _draw(mapped, shape=(3, 20), global_shape=(6, 50), shard_offsets=(2, 10))
    assert torch.equal(shard, want[2:5, 10:30])


@pytest.mark.parametrize(
    "spec,message",
    [
        (
            InitSpec(mean=0.5, std=0.5 / math.sqrt(3), trunc=math.sqrt(3), distribution="uniform", map=("log",)),
            "not finite",
        ),
        (InitSpec(std=1.0, trunc=math.inf, map=("log",)), "not finite"),
        (InitSpec(constant=2.0, map=("log",)), "not to a constant"),
        (InitSpec(std=1.0, map=("sqrt",)), "name in"),
        (InitSpec(std=1.0, map=("softplus_inverse_exp",)), "takes 1"),
        (InitSpec(std=1.0, map=("softplus_inverse_exp", -1.0)), "floor >= 0"),
        (InitSpec(mean=800.0, std=1.0, map=("softplus_inverse_exp", 0.0)), "not finite"),
        (InitSpec(parts=(InitSpec(std=1.0, map=("log",)), InitSpec(constant=0.0))), "part of a fused"),
    ],
)
def test_a_bad_map_is_refused_before_anything_is_written(spec, message):
    tensor = torch.full((4, 6), 7.0)
    with pytest.raises(ValueError, match=message):
        tinit.write_spec_(tensor, spec, seed=0)
    assert torch.equal(tensor, torch.full((4, 6), 7.0))


def test_a_registered_family_gives_its_models_own_inits(monkeypatch):
    """``Family.inits`` of a registered family apply to the models of its model type only: a value,
    a spec, or None (the role's default); the state roles take them under every recipe."""
    from tinit import families

    monkeypatch.setattr(families, "FAMILIES", dict(families.FAMILIES))

    class Scan(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.A_log = torch.nn.Parameter(torch.zeros(6))
            self.dt_bias = torch.nn.Parameter(torch.zeros(6))
            self.conv1d = torch.nn.Conv1d(6, 6, 4, groups=6)

    class Toy(torch.nn.Module):
        def __init__(self, model_type):
            super().__init__()
            self.config = transformers.PretrainedConfig()
            self.config.model_type = model_type
            self.mixer = Scan()

    inits = {
        ("Scan", "dt_bias"): lambda module, model, param: 0.5,
        ("Scan", "conv1d.weight"): lambda module, model, param: InitSpec(constant=0.25),
        ("Scan", "A_log"): lambda module, model, param: None,
    }
    families.register(families.Family("toy_scan", model_types=("toy_scan",), inits=inits))
    for recipe in ("normal", "depth_init"):
        model = Toy("toy_scan")
        summary = {e.name: e for e in tinit.init_model_(model, recipe, seed=0)}
        assert torch.equal(model.mixer.dt_bias, torch.full((6,), 0.5))
        assert torch.equal(model.mixer.A_log, torch.log(torch.arange(1, 7, dtype=torch.float32)))
        assert (summary["mixer.conv1d.weight"].constant == 0.25) == (recipe == "normal")  # normal follows it
    other = Toy("another")
    tinit.init_model_(other, "normal", seed=0)
    assert other.mixer.dt_bias.min() < 0 < other.mixer.conv1d.weight.abs().max()  # the defaults
