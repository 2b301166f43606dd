"""``init_model_(model, "hf")``: a Hugging Face model's own init on tinit's stream, against HF's eager build.

The oracle is transformers' own code: the same config built eagerly by ``AutoModelForCausalLM.from_config``
under torch's RNG, twice (torch seeds 0 and 1). An element both eager builds agree on is the model's
deterministic value (``A_log = log(1..H)``, ``D = 1``, a norm, a zeroed padding row, a buffer) and must
come out exactly; the others are random and are compared per name template (the block index replaced by
``*``, pooled over blocks): std within max(1 %, 5/sqrt(2n)) of the eager build's and a two-sample KS test
(scipy). Then the layout: the same seed twice, another seed, a compiled wrapper, a model materialised
first, a partly loaded one; the scope rule for draws into temporaries; the ``_is_hf_initialized`` marks;
the refusals. Tiny configs (2 blocks, width 64-128).
"""

from __future__ import annotations

import math
import re
import warnings

import pytest
import torch

import tinit
from tinit.buffers import UninitialisedBufferError

transformers = pytest.importorskip("transformers")
stats = pytest.importorskip("scipy.stats")

_SMALL = {
    "vocab_size": 512,
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 128,
}
_MAMBA = {"mamba_n_heads": 8, "mamba_d_head": 16, "mamba_n_groups": 1, "mamba_d_state": 16, "mamba_chunk_size": 32}
_EXPERTS = {"num_local_experts": 4, "num_experts_per_tok": 2}


def _mamba2():
    return transformers.Mamba2Config(
        vocab_size=512,
        hidden_size=128,
        num_hidden_layers=2,
        num_heads=8,
        head_dim=32,
        state_size=16,
        n_groups=2,
        expand=2,
        conv_kernel=4,
        chunk_size=32,
    )


CONFIGS = {
    "llama": lambda: transformers.LlamaConfig(**_SMALL, pad_token_id=0),
    "llama_tied": lambda: transformers.LlamaConfig(**_SMALL, pad_token_id=3, tie_word_embeddings=True),
    "gpt2": lambda: transformers.GPT2Config(
        vocab_size=512, n_embd=64, n_layer=2, n_head=4, bos_token_id=0, eos_token_id=0
    ),
    "mamba2": _mamba2,
    "jamba": lambda: transformers.JambaConfig(
        **_SMALL,
        num_experts=4,
        num_experts_per_tok=2,
        attn_layer_period=2,
        attn_layer_offset=1,
        expert_layer_period=2,
        expert_layer_offset=1,
        mamba_d_state=8,
        mamba_dt_rank=8,
    ),
    "bamba": lambda: transformers.BambaConfig(**_SMALL, **_MAMBA, attn_layer_indices=[1]),
    "falcon_h1": lambda: transformers.FalconH1Config(**_SMALL, **_MAMBA, mamba_d_ssm=128),
    "qwen3_next": lambda: transformers.Qwen3NextConfig(
        **_SMALL,
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=64,
        shared_expert_intermediate_size=64,
        linear_num_value_heads=4,
        linear_num_key_heads=2,
        linear_key_head_dim=16,
        linear_value_head_dim=16,
        head_dim=16,
        layer_types=["linear_attention", "full_attention"],
    ),
    "nemotron_h": lambda: transformers.NemotronHConfig(
        vocab_size=512,
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
        mamba_num_heads=8,
        mamba_head_dim=16,
        n_groups=1,
        ssm_state_size=16,
        chunk_size=32,
        hybrid_override_pattern="M*",
        head_dim=16,
    ),
    "granitemoehybrid": lambda: transformers.GraniteMoeHybridConfig(
        **_SMALL, **_EXPERTS, **_MAMBA, layer_types=["mamba", "attention"]
    ),
    "mixtral": lambda: transformers.MixtralConfig(**_SMALL, **_EXPERTS),
    "qwen3_moe": lambda: transformers.Qwen3MoeConfig(
        **_SMALL, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64
    ),
    "minimax": lambda: transformers.MiniMaxConfig(**_SMALL, **_EXPERTS, head_dim=16),
    "gemma3n": lambda: transformers.Gemma3nTextConfig(
        **_SMALL,
        head_dim=16,
        hidden_size_per_layer_input=16,
        vocab_size_per_layer_input=512,
        num_kv_shared_layers=0,
        laurel_rank=8,
        altup_num_inputs=4,
        activation_sparsity_pattern=[0.0, 0.0],
        layer_types=["sliding_attention", "full_attention"],
    ),
}


def _meta(config):
    with torch.device("meta"):
        return transformers.AutoModelForCausalLM.from_config(config)


def _eager(config, torch_seed: int):
    torch.manual_seed(torch_seed)
    return transformers.AutoModelForCausalLM.from_config(config)


def _hf(config, seed: int = 0):
    model = _meta(config)
    assert tinit.init_model_(model, "hf", seed=seed, device="cpu") == []
    return model


def _state(model) -> dict[str, torch.Tensor]:
    """Every parameter and buffer (non-persistent ones too, which ``state_dict`` leaves out), by name."""
    tensors = [*model.named_parameters(), *model.named_buffers()]
    return {k: v.detach().clone() for k, v in tensors}


def _templates(names) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(re.sub(r"\.\d+\.", ".*.", name), []).append(name)
    return groups


def _pooled(state: dict, names: list[str]) -> torch.Tensor:
    return torch.cat([state[n].double().flatten() for n in names])


def _compare(ours: dict, eager0: dict, eager1: dict) -> list[str]:
    """Every name template of ``ours`` against the eager builds; returns the failures, one line each."""
    assert set(ours) == set(eager0)
    failures = []
    for template, names in _templates(eager0).items():
        got, want, other = (_pooled(s, names) for s in (ours, eager0, eager1))
        fixed = want == other
        if not torch.equal(got[fixed], want[fixed]):
            worst = float((got[fixed] - want[fixed]).abs().max())
            failures.append(f"{template}: {int(fixed.sum())} deterministic elements differ (max {worst:.3g})")
        drawn, reference = got[~fixed], want[~fixed]
        if drawn.numel() < 2:
            continue
        n = drawn.numel()
        ratio = float(drawn.std() / reference.std())
        if abs(ratio - 1) > max(0.01, 5 / math.sqrt(2 * n)):
            failures.append(f"{template}: pooled std ratio {ratio:.4f} over {n} elements")
        p = stats.ks_2samp(drawn.numpy(), reference.numpy()).pvalue
        if p < 1e-4:
            failures.append(f"{template}: KS p = {p:.2g} over {n} elements")
    return failures


@pytest.fixture(scope="module", autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        transformers.logging.set_verbosity_error()
        yield


@pytest.mark.parametrize("family", sorted(CONFIGS))
def test_hf_matches_the_models_own_eager_init(family):
    """Deterministic values and buffers exactly HF's, random ones HF's distribution, ties kept, a finite
    forward pass."""
    config = CONFIGS[family]()
    model = _meta(config)
    rng = torch.get_rng_state()
    assert tinit.init_model_(model, "hf", seed=0, device="cpu") == []
    assert torch.equal(torch.get_rng_state(), rng), "a draw went to torch's RNG"
    eager0, eager1 = _eager(config, 0), _eager(config, 1)
    assert _compare(_state(model), _state(eager0), _state(eager1)) == []
    assert not any(t.is_meta for t in model.state_dict().values())
    out, eager_in, eager_out = (
        model.get_output_embeddings(),
        eager0.get_input_embeddings(),
        eager0.get_output_embeddings(),
    )
    assert (out.weight is model.get_input_embeddings().weight) == (eager_out.weight is eager_in.weight)
    with torch.no_grad():
        logits = model(torch.arange(1, 9).unsqueeze(0)).logits
    assert logits.shape == (1, 8, config.vocab_size) and bool(torch.isfinite(logits).all())


def test_a_tied_head_takes_its_embeddings_init_padding_row_included():
    """HF's eager build draws the head, then ``tie_weights`` keeps the embedding's values (its padding row
    zero): the tied head is not written again."""
    config = CONFIGS["llama_tied"]()
    model = _hf(config)
    weight = model.model.embed_tokens.weight
    assert model.lm_head.weight is weight
    torch.testing.assert_close(weight[3], torch.zeros(64), rtol=0, atol=0)
    assert float(weight[4].detach().abs().min()) > 0


@pytest.mark.parametrize("family", ["mamba2", "qwen3_next", "llama"])
def test_hf_values_depend_on_the_seed_and_names_only(family):
    """Same seed twice: the same tensors; another seed: every random tensor differs; a compiled wrapper
    and a model materialised before the call: the same values."""
    config = CONFIGS[family]()
    first, again, other = _state(_hf(config)), _state(_hf(config)), _state(_hf(config, seed=1))
    eager0, eager1 = _state(_eager(config, 0)), _state(_eager(config, 1))
    for name, value in first.items():
        torch.testing.assert_close(again[name], value, rtol=0, atol=0, msg=name)
        if not torch.equal(eager0[name], eager1[name]):
            assert not torch.equal(other[name], value), name
    compiled = torch.compile(_meta(config))
    tinit.init_model_(compiled, "hf", seed=0, device="cpu")
    materialised = tinit.materialise_(_meta(config), "cpu")
    tinit.init_model_(materialised, "hf", seed=0)
    for state in (_state(compiled._orig_mod), _state(materialised)):
        for name, value in first.items():
            torch.testing.assert_close(state[name], value, rtol=0, atol=0, msg=name)


def test_a_draw_into_a_temporary_is_keyed_by_its_module_and_index():
    """Mamba-2's ``dt_bias`` is the inverse softplus of dt = exp(u (log max - log min) + log min) clamped,
    u ``torch.rand(H)`` drawn inside ``_init_weights(mixer)``: u is the scope rule's stream
    ``stream_for("<mixer>:_init_weights[0]")`` (HF's formula from ``Mamba2Mixer.init_mamba2_weights``)."""
    config = CONFIGS["mamba2"]()
    model = _hf(config)
    for layer in range(2):
        u = torch.empty(config.num_heads)
        name = f"backbone.layers.{layer}.mixer:_init_weights[0]"
        tinit.nn.init.KEYED["uniform_"](u, 0.0, 1.0, seed=0, stream=tinit.stream_for(name))
        low, high = math.log(config.time_step_min), math.log(config.time_step_max)
        dt = torch.exp(u * (high - low) + low).clamp(min=config.time_step_floor)
        want = dt + torch.log(-torch.expm1(-dt))
        torch.testing.assert_close(model.backbone.layers[layer].mixer.dt_bias.detach(), want, rtol=0, atol=0)


def test_a_partly_loaded_model_keeps_its_values_and_gets_the_rest_by_name():
    """Tensors that hold values are marked as transformers' loader marks them and left alone; the meta ones
    get exactly the values of a full ``hf`` init; the marks tinit set are taken off again."""
    config = CONFIGS["mamba2"]()
    full = _state(_hf(config))
    model = _meta(config)
    loaded = {k: v + 1 for k, v in full.items() if k.startswith("backbone.layers.0.")}
    model.load_state_dict(loaded, strict=False, assign=True)
    tinit.init_model_(model, "hf", seed=0, device="cpu")
    state = _state(model)
    for name, value in full.items():
        torch.testing.assert_close(state[name], loaded.get(name, value), rtol=0, atol=0, msg=name)
    assert not any(hasattr(t, "_is_hf_initialized") for t in model.state_dict(keep_vars=True).values())


def test_an_initialised_model_is_left_alone_unless_reinit_loaded():
    """HF's eager build marks every module initialised: ``hf`` writes nothing and says so;
    ``reinit_loaded=True`` clears the marks and gives the meta path's values."""
    config = CONFIGS["mamba2"]()
    eager = _eager(config, 0)
    before = _state(eager)
    with pytest.warns(UserWarning, match="reinit_loaded=True"):
        tinit.init_model_(eager, "hf", seed=0)
    for name, value in _state(eager).items():
        torch.testing.assert_close(value, before[name], rtol=0, atol=0)
    tinit.init_model_(eager, "hf", seed=0, reinit_loaded=True)
    for name, value in _state(_hf(config)).items():
        torch.testing.assert_close(_state(eager)[name], value, rtol=0, atol=0, msg=name)


class _TinyConfig(transformers.PretrainedConfig):
    model_type = "tinit_tiny_hf_recipe"


class _Tiny(transformers.PreTrainedModel):
    """A model whose ``_init_weights`` (PreTrainedModel's) never writes its buffer ``scale``."""

    config_class = _TinyConfig

    def __init__(self, config):
        super().__init__(config)
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer("scale", torch.full((4,), 2.0), persistent=False)
        self.post_init()


def test_a_buffer_neither_tinit_nor_the_model_computes_is_refused():
    with torch.device("meta"):
        model = _Tiny(_TinyConfig())
    with pytest.raises(UninitialisedBufferError, match="scale") as info:
        tinit.init_model_(model, "hf", seed=0, device="cpu")
    assert info.value.names == ["scale"]
    with torch.device("meta"):
        again = _Tiny(_TinyConfig())
    with pytest.raises(UninitialisedBufferError, match="scale"):  # the default policy refuses before allocating
        tinit.buffers.plan(again)
    assert tinit.buffers.plan(again, unclaimed="nan").unclaimed[0][0] == "scale"
    with pytest.raises(ValueError, match="unclaimed"):
        tinit.buffers.plan(again, unclaimed="zeros")


def test_hf_refusals_come_before_anything_is_written():
    config = CONFIGS["llama"]()
    model = _meta(config)
    with pytest.raises(ValueError, match="n_layers=2"):
        tinit.init_model_(model, "hf", seed=0, device="cpu", n_layers=2)
    with pytest.raises(ValueError, match="std=0.1"):
        tinit.init_model_(model, "hf", seed=0, device="cpu", std=0.1)
    with pytest.raises(ValueError, match="device="):
        tinit.init_model_(model, "hf", seed=0)
    with pytest.raises(ValueError, match="meta"):
        tinit.init_model_(model, "hf", seed=0, device="meta")
    with pytest.raises(TypeError, match="seed"):
        tinit.init_model_(model, "hf", seed=1.5, device="cpu")
    with pytest.raises(TypeError, match="holds no PreTrainedModel"):
        tinit.init_model_(torch.nn.Linear(2, 2), "hf", seed=0)
    with torch.device("meta"):
        container = torch.nn.ModuleDict({"lm": transformers.AutoModelForCausalLM.from_config(config)})
        container["extra"] = torch.nn.Linear(2, 2)
    with pytest.raises(ValueError, match="extra.weight"):
        tinit.init_model_(container, "hf", seed=0, device="cpu")
    assert all(p.is_meta for p in model.parameters()) and all(p.is_meta for p in container.parameters())


def test_the_scope_rule_under_the_patch_alone():
    """``from_config`` inside ``patch_torch_init(seed=0)``: the mixer's ``torch.rand`` is keyed by the
    mixer's name under the topmost module at the time (the base model: ``layers.0.mixer``), the same
    in every run; outside an ``_init_weights`` call ``torch.rand`` is torch's own."""
    config = CONFIGS["mamba2"]()
    built = []
    for torch_seed in (0, 1):
        torch.manual_seed(torch_seed)
        with tinit.patch_torch_init(seed=0):
            built.append(transformers.AutoModelForCausalLM.from_config(config))
            torch.manual_seed(5)
            drawn = torch.rand(3)
        torch.manual_seed(5)
        torch.testing.assert_close(drawn, torch.rand(3), rtol=0, atol=0)
    u = torch.empty(config.num_heads)
    tinit.nn.init.KEYED["uniform_"](u, 0.0, 1.0, seed=0, stream=tinit.stream_for("layers.0.mixer:_init_weights[0]"))
    low, high = math.log(config.time_step_min), math.log(config.time_step_max)
    dt = torch.exp(u * (high - low) + low).clamp(min=config.time_step_floor)
    for model in built:
        torch.testing.assert_close(
            model.backbone.layers[0].mixer.dt_bias.detach(), dt + torch.log(-torch.expm1(-dt)), rtol=0, atol=0
        )
    assert torch.rand is not None and type(torch.rand).__name__ == "builtin_function_or_method"


def test_hf_is_no_per_parameter_scheme():
    """``tinit.schemes`` lists the per-parameter recipes; asking it (or ``fill_``) for "hf" says what hf is."""
    assert "hf" not in tinit.schemes.SCHEMES
    with pytest.raises(tinit.schemes.UnknownNameError, match="model's own init"):
        tinit.fill_(torch.nn.Parameter(torch.empty(4, 4)), "hf", name="w", seed=0)


def test_a_meta_tensor_under_a_marked_module_is_initialised():
    """HF's eager build marks every module; a head put back on the meta device (no values) has its
    module unmarked, so it is written, with the full ``hf`` init's values; the rest keeps HF's."""
    config = CONFIGS["llama"]()
    full = _state(_hf(config))
    model = _eager(config, 0)
    before = _state(model)
    model.lm_head.weight = torch.nn.Parameter(torch.empty_like(model.lm_head.weight, device="meta"))
    tinit.init_model_(model, "hf", seed=0, device="cpu")
    for name, value in _state(model).items():
        want = full[name] if name == "lm_head.weight" else before[name]
        torch.testing.assert_close(value, want, rtol=0, atol=0, msg=name)


# Classes whose tensors the model's _init_weights never writes: their eager values come from a constructor
# (Data2Vec's and Reformer's ``lm_head.bias = nn.Parameter(torch.zeros(n))``, OpenAI GPT's ``Conv1D``
# drawing ``normal_(std=0.02)``, Apertus' XIELU ``alpha_p``/``alpha_n``/``beta``/``eps``, DeepseekV4's
# integral ``tid2eid``), or buffers the ``hf_rotary`` recipe cannot compute (Gemma-4's and Dots3's
# per-layer-type rotary embeddings, built by their own class).
_FROM_CONSTRUCTORS = (
    "Data2VecTextForCausalLM",
    "ReformerModelWithLMHead",
    "OpenAIGPTLMHeadModel",
    "ApertusForCausalLM",
    "DeepseekV4ForCausalLM",
    "Gemma4ForCausalLM",
    "Dots3NoteForCausalLM",
)


@pytest.mark.parametrize("name", _FROM_CONSTRUCTORS)
def test_tensors_the_models_init_never_writes_take_the_constructors_value(name):
    """Oracle: the class built eagerly by transformers on the CPU (torch seeds 0 and 1): deterministic
    values and every buffer exact, random ones HF's distribution; nothing left NaN or as memory."""
    from tinit.tools import hf_classes

    config = hf_classes.config_of(name)
    model = hf_classes.build(name, config)
    rng = torch.get_rng_state()
    assert tinit.init_model_(model, "hf", seed=0, device="cpu") == []
    assert torch.equal(torch.get_rng_state(), rng), "a draw went to torch's RNG"
    eager = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        eager.append(_state(hf_classes.build(name, config, device="cpu")))
    ours = _state(model)
    assert all(bool(torch.isfinite(v).all()) for v in ours.values() if v.is_floating_point())
    assert _compare(ours, *eager) == []


def test_a_random_constructor_value_the_models_init_never_writes_is_refused():
    """A parameter drawn in its module's constructor (not a known one) and left by ``_init_weights``: no
    deterministic value to rebuild, so a ValueError names it instead of returning memory."""

    class Scaled(torch.nn.Module):
        def __init__(self, n=4):
            super().__init__()
            self.n = n
            self.gain = torch.nn.Parameter(torch.randn(n))

    class Model(transformers.PreTrainedModel):
        config_class = transformers.PretrainedConfig

        def __init__(self, config):
            super().__init__(config)
            self.scaled = Scaled()
            self.post_init()

        def _init_weights(self, module):
            pass

    with torch.device("meta"):
        model = Model(transformers.PretrainedConfig())
    with pytest.raises(ValueError, match=r"scaled\.gain"):
        tinit.init_model_(model, "hf", seed=0, device="cpu")


@pytest.mark.parametrize("name", ["DiffLlamaForCausalLM", "XLNetLMHeadModel"])
def test_parameters_a_meta_build_makes_off_meta_get_the_models_init(name):
    """DiffLlama's ``torch.normal`` lambdas and XLNet's ``torch.FloatTensor`` weights are made on the CPU
    even under ``torch.device("meta")``; on an otherwise meta model they are the constructor's, not loaded
    values, and take the model's own ``_init_weights`` (oracle: the eager HF build, seeds 0 and 1)."""
    from tinit.tools import hf_classes

    config = hf_classes.config_of(name)
    model = hf_classes.build(name, config)
    off = [n for n, p in model.named_parameters() if not p.is_meta]
    assert off, "the constructor no longer makes any parameter off meta"
    assert tinit.init_model_(model, "hf", seed=0, device="cpu") == []
    eager = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        eager.append(_state(hf_classes.build(name, config, device="cpu")))
    assert _compare(_state(model), *eager) == []
    again = hf_classes.build(name, config)
    tinit.init_model_(again, "hf", seed=0, device="cpu")
    assert all(torch.equal(model.get_parameter(n), again.get_parameter(n)) for n in off), "not on tinit's stream"


def test_off_meta_parameters_beside_a_loaded_one_are_left_as_loaded():
    """The rule's other side: a meta XLNet with one more tensor off meta (a partly loaded checkpoint)
    keeps every off-meta tensor as it is, the constructor's ones included (they may be loaded too)."""
    from tinit.tools import hf_classes

    config = hf_classes.config_of("XLNetLMHeadModel")
    model = hf_classes.build("XLNetLMHeadModel", config)
    loaded = model.transformer.layer[0].ff.layer_1
    loaded.weight = torch.nn.Parameter(torch.full(loaded.weight.shape, 0.5))
    before = {n: p.detach().clone() for n, p in model.named_parameters() if not p.is_meta}
    tinit.init_model_(model, "hf", seed=0, device="cpu")
    after = dict(model.named_parameters())
    assert all(torch.equal(v.nan_to_num(), after[n].detach().nan_to_num()) for n, v in before.items())


def _writer_model(write):
    """A meta-built PreTrainedModel with one Linear(8, 6, bias=False) whose ``_init_weights`` is ``write``."""

    class Model(transformers.PreTrainedModel):
        config_class = transformers.PretrainedConfig

        def __init__(self, config):
            super().__init__(config)
            self.proj = torch.nn.Linear(8, 6, bias=False)
            self.post_init()

        def _init_weights(self, module):
            if isinstance(module, torch.nn.Linear):
                write(module.weight)

    with torch.device("meta"):
        return Model(transformers.PretrainedConfig())


def _fill_numpy(weight):
    weight.detach().numpy()[...] = 0.25


def _fill_data_swap(weight):
    weight.data = torch.full((6, 8), 0.25)


def _fill_transposed(weight):
    weight.data.t().fill_(0.25)


def _fill_in_two_halves(weight):
    weight.data[:3].fill_(0.25)
    weight.data[3:].fill_(0.25)


@pytest.mark.parametrize("write", [_fill_numpy, _fill_data_swap, _fill_transposed, _fill_in_two_halves])
def test_a_write_by_any_path_counts_as_written(write):
    """The dispatcher-level write tracking (no NaN pre-fill of every parameter) sees a whole write by a
    transposed ``.data`` view and by two partial writes; a write it cannot see (through ``.numpy()``, a
    ``.data`` swap) by the parameter's sentinels or storage. Oracle: the value the model's code wrote."""
    model = _writer_model(write)
    tinit.init_model_(model, "hf", seed=0, device="cpu")
    assert torch.equal(model.proj.weight.detach(), torch.full((6, 8), 0.25))


def test_a_partial_write_is_refused_where_it_leaves_elements_unwritten():
    """``_init_weights`` writing one row only: the other rows would be uninitialised memory, so the
    parameter is refused by name (its constructor's value is random: no deterministic fallback)."""
    model = _writer_model(lambda w: w.data[2].zero_())
    with pytest.raises(ValueError, match=r"proj\.weight"):
        tinit.init_model_(model, "hf", seed=0, device="cpu")


def test_a_partial_write_after_a_whole_one_is_kept():
    """The padding-row pattern: a whole draw then one row zeroed. Oracle: the same model whose init makes
    only the draw (the values are a function of the seed and the name): equal outside the zeroed row."""

    def draw(w):
        torch.nn.init.normal_(w, std=0.5)

    def draw_then_zero(w):
        draw(w)
        w.data[2].zero_()

    model, plain = _writer_model(draw_then_zero), _writer_model(draw)
    tinit.init_model_(model, "hf", seed=3, device="cpu")
    tinit.init_model_(plain, "hf", seed=3, device="cpu")
    weight, expected = model.proj.weight.detach(), plain.proj.weight.detach().clone()
    expected[2] = 0
    assert torch.equal(weight, expected)
    assert 0.3 < float(torch.cat([weight[:2], weight[3:]]).std()) < 0.7
