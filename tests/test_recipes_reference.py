"""Each named recipe against its reference implementation's own init code.

Every test builds the reference's model twice: one copy initialised by the
reference's own code (Hugging Face ``_init_weights`` on construction,
torchtitan's ``init_states``, OLMo-core's ``Transformer.init_weights``,
Megatron-Core's ``GPTModel`` (its layers' ``init_method``),
``torch.nn.init``) under ``torch.manual_seed``, the other by
``tinit.init_model_`` with the recipe's defaults. Compared, per role (tinit's
classification of the parameter):

- the realised std: the ratio of the two copies' pooled root mean squares over
  every tensor of the role (>= 10^6 elements per role, where the ratio's
  sampling error is about 0.1 %) within 1 %, and each tensor's ratio within 6
  of its standard errors (sqrt(1 / n) for two independent n-element samples),
  so a role that pools tensors of different stds is checked tensor by tensor;
- the truncation: the fraction of elements beyond 2.5 realised stds
  (untruncated: 1.24 %; +-3 std: 1.10 %; +-2 std: 0) within 6 binomial
  standard errors, and the largest |x| within 20 % (the maximum of 10^6
  normals varies by about 6 %);
- which tensors are constant, and their value (exactly zero, exactly one, ...).

Reference versions: transformers 5.24, torchtitan 0.3.0, ai2-olmo-core 3.0.0,
megatron-core 0.16.1, keras 3.15.1, torch 2.13 (``scripts/setup.sh`` installs them), and
GPT-NeoX's init functions vendored in ``tests/reference`` (not on the package index). A
reference that does not import is skipped with its reason.
"""

from __future__ import annotations

import math
import re
import sys
import types
from collections import defaultdict

import pytest
import torch

import tinit

SEED = 1234


class _Tensor:
    """What the comparison needs of one tensor (sums in fp64 over its fp32 values)."""

    def __init__(self, p: torch.Tensor):
        values = p.detach().flatten()
        self.n = values.numel()
        first = values[:1]
        self.constant = float(first) if self.n and bool((values == first).all()) else None
        self.square_sum = float(values.square().sum(dtype=torch.float64))
        rms = math.sqrt(self.square_sum / self.n) if self.n else 0.0
        magnitude = values.abs()
        # In units of the tensor's own realised std, so roles of depth-scaled tensors pool.
        self.tail = int((magnitude > 2.5 * rms).sum()) if rms else 0
        self.z_max = float(magnitude.max()) / rms if rms else 0.0


def compare(
    reference, ours, summary, *, min_pooled: int = 10**6, skip: str | None = None, check_max: bool = True
) -> dict:
    """Assert that ``ours`` (written by tinit, ``summary`` its ``init_model_`` result) draws as ``reference``.

    ``skip``: a regex of parameter names left out (ones tinit was told not to write).
    ``check_max``: compare the largest |x| (False where the reference's sampler leaks a few
    draws past its bounds; the tail fraction is still compared).

    Returns:
        {role: (pooled std ratio ours / reference, elements)}.
    """
    kept = (lambda name: re.search(skip, name) is None) if skip else (lambda name: True)
    ref = {name: _Tensor(p) for name, p in reference.named_parameters() if kept(name)}
    got = {name: _Tensor(p) for name, p in ours.named_parameters() if kept(name)}
    assert ref.keys() == got.keys()
    roles = {}
    for entry in summary:
        for name in (entry.name, *entry.tied):
            roles[name] = entry.role
    differ = {
        name: (ref[name].constant, got[name].constant) for name in ref if ref[name].constant != got[name].constant
    }
    assert not differ, f"constant tensors differ (reference, tinit): {differ}"
    pooled = defaultdict(list)
    for name, a in ref.items():
        if a.constant is not None:
            continue
        b = got[name]
        ratio = math.sqrt(b.square_sum / a.square_sum)
        assert abs(ratio - 1) < 6 * math.sqrt(1 / a.n), f"{name}: std ratio tinit / reference {ratio:.4f} (n {a.n})"
        pooled[roles[name]].append((a, b))
    ratios = {}
    for role, pairs in pooled.items():
        n = sum(a.n for a, _ in pairs)
        ratio = math.sqrt(sum(b.square_sum for _, b in pairs) / sum(a.square_sum for a, _ in pairs))
        ratios[role] = (ratio, n)
        if n < min_pooled:
            continue  # checked tensor by tensor above, at its own sampling error
        assert abs(ratio - 1) < 0.01, f"role {role}: pooled std ratio {ratio:.4f} over {n} elements"
        p_ref, p_got = (sum(t.tail for t in side) / n for side in zip(*pairs, strict=True))
        se = math.sqrt(2 * max(p_ref, 1e-6) * (1 - p_ref) / n)
        assert abs(p_got - p_ref) < 6 * se, f"role {role}: fraction beyond 2.5 std {p_got:.5f}, reference {p_ref:.5f}"
        max_ref, max_got = (max(t.z_max for t in side) for side in zip(*pairs, strict=True))
        assert not check_max or abs(max_got / max_ref - 1) < 0.2, (
            f"role {role}: max |x| / std {max_got:.3f}, reference {max_ref:.3f}"
        )
    return ratios


# --------------------------------------------------------------------------------------------
# Hugging Face transformers


def _hf(model_class, config, scheme, **options):
    torch.manual_seed(SEED)
    reference = model_class(config)  # transformers runs _init_weights on construction
    with torch.device("meta"):
        ours = model_class(config)
    summary = tinit.init_model_(ours, scheme, seed=SEED, device="cpu", **options)
    return reference, ours, summary


def test_gpt2_against_hf_gpt2():
    """``gpt2`` = transformers' ``GPT2PreTrainedModel._init_weights`` (normal_ 0.02, c_proj 0.02 / sqrt(2L))."""
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_embd=512, n_layer=4, n_head=8, vocab_size=2048, n_positions=1024)
    ratios = compare(*_hf(transformers.GPT2LMHeadModel, config, "gpt2"))
    assert {"attn_qkv", "attn_out", "mlp_in", "mlp_out", "embedding"} <= ratios.keys()


@pytest.mark.parametrize("feed_forward", ["relu", "gated-gelu"])
def test_t5_against_hf_t5(feed_forward):
    """``t5`` = transformers' ``T5PreTrainedModel._init_weights`` (per-matrix stds; transformers 5
    always ties lm_head), with T5's ReLU MLP (wi, wo) and T5 v1.1's gated one (wi_0, wi_1, wo). d_kv
    and initializer_factor (0.5 here, so a recipe ignoring it fails) come from the model's config."""
    transformers = pytest.importorskip("transformers")
    config = transformers.T5Config(
        d_model=512,
        d_kv=64,
        num_heads=8,
        d_ff=2048,
        num_layers=2,
        num_decoder_layers=2,
        vocab_size=2048,
        feed_forward_proj=feed_forward,
        initializer_factor=0.5,
    )
    ratios = compare(*_hf(transformers.T5ForConditionalGeneration, config, "t5"))
    assert {"attn_q", "attn_k", "attn_v", "attn_out", "mlp_in", "mlp_out", "embedding"} <= ratios.keys()


@pytest.mark.parametrize("family", ["Llama", "Bert"])
def test_normal_against_hf_default_init(family):
    """``normal`` = transformers' ``PreTrainedModel._init_weights`` (``normal_(std=initializer_range)``
    for every Linear and Embedding, norms 1, biases 0, the padding row 0) on Llama and BERT."""
    transformers = pytest.importorskip("transformers")
    if family == "Llama":
        config = transformers.LlamaConfig(
            hidden_size=512,
            intermediate_size=2048,
            num_hidden_layers=4,
            num_attention_heads=8,
            num_key_value_heads=8,
            vocab_size=2048,
        )
        model_class = transformers.LlamaForCausalLM
    else:
        config = transformers.BertConfig(
            hidden_size=512, intermediate_size=2048, num_hidden_layers=4, num_attention_heads=8, vocab_size=2048
        )
        model_class = transformers.BertForMaskedLM
    ratios = compare(*_hf(model_class, config, "normal"))
    assert {"embedding", "mlp_in", "mlp_out", "attn_out"} <= ratios.keys()


@pytest.mark.parametrize("scheme", ["small_init", "wang_init"])
def test_small_and_wang_init_against_gpt_neox(scheme):
    """``small_init`` / ``wang_init`` = GPT-NeoX's ``small_init_init_method`` (every matrix) and
    ``wang_init_method`` (as ``output_layer_init_method``: attention ``dense`` and MLP
    ``dense_4h_to_h``, per GPT-NeoX's ``ParallelSelfAttention`` / ``ParallelMLP``), vendored in
    ``tests/reference`` (GPT-NeoX is not on the package index), on HF's GPT-NeoX module tree."""
    transformers = pytest.importorskip("transformers")
    from reference.gpt_neox_init_functions import small_init_init_method, wang_init_method

    config = transformers.GPTNeoXConfig(
        hidden_size=512,
        num_hidden_layers=4,
        num_attention_heads=8,
        intermediate_size=2048,
        vocab_size=2048,
        tie_word_embeddings=False,
    )
    d, n_layers = config.hidden_size, config.num_hidden_layers
    init_method = small_init_init_method(d)
    output_layer_init_method = wang_init_method(n_layers, d) if scheme == "wang_init" else init_method
    torch.manual_seed(SEED)
    reference = transformers.GPTNeoXForCausalLM(config)
    with torch.no_grad():
        for name, p in reference.named_parameters():
            if name.endswith("bias"):
                p.zero_()
            elif "layernorm" in name or "layer_norm" in name:
                p.fill_(1.0)
            elif re.search(r"attention\.dense\.|dense_4h_to_h\.", name):
                output_layer_init_method(p)
            else:
                init_method(p)
    with torch.device("meta"):
        ours = transformers.GPTNeoXForCausalLM(config)
    summary = tinit.init_model_(ours, scheme, seed=SEED, device="cpu")
    ratios = compare(reference, ours, summary)
    assert {"attn_qkv", "attn_out", "mlp_in", "mlp_out", "embedding", "head"} <= ratios.keys()


# --------------------------------------------------------------------------------------------
# torch.nn.init


class _Stack(torch.nn.Module):
    """Linear weights of 10^6 elements each (no roles needed by fan-based recipes)."""

    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(512, 2048, bias=False)
        self.down = torch.nn.Linear(2048, 512, bias=False)
        self.square = torch.nn.Linear(1024, 1024, bias=False)


@pytest.mark.parametrize(
    "scheme,reference",
    [
        ("xavier_normal", torch.nn.init.xavier_normal_),
        ("kaiming_normal", lambda w: torch.nn.init.kaiming_normal_(w, nonlinearity="relu")),
        ("kaiming_normal_fan_out", lambda w: torch.nn.init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu")),
    ],
    ids=["xavier_normal", "kaiming_normal", "kaiming_normal-fan_out"],
)
def test_fan_schemes_against_torch_nn_init(scheme, reference):
    torch.manual_seed(SEED)
    ref = _Stack()
    for p in ref.parameters():
        reference(p.data)
    ours = _Stack()
    options = {"mode": "fan_out"} if scheme.endswith("fan_out") else {}
    summary = tinit.init_model_(ours, scheme.removesuffix("_fan_out"), seed=SEED, **options)
    compare(ref, ours, summary, min_pooled=10**6)


# --------------------------------------------------------------------------------------------
# modded-nanogpt (vendored init statements)


class _NanoGPT(torch.nn.Module):
    """The speedrun GPT's matrices as separate ``nn.Linear`` weights under names tinit classifies."""

    def __init__(self, d=512, n_layers=4, vocab=2048):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, d)
        self.blocks = torch.nn.ModuleList()
        for _ in range(n_layers):
            block = torch.nn.Module()
            block.attn = torch.nn.Module()
            for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
                setattr(block.attn, name, torch.nn.Linear(d, d, bias=False))
            block.mlp = torch.nn.Module()
            block.mlp.c_fc = torch.nn.Linear(d, 4 * d, bias=False)
            block.mlp.c_proj = torch.nn.Linear(4 * d, d, bias=False)
            self.blocks.append(block)
        self.lm_head = torch.nn.Linear(d, vocab, bias=False)


def _nanogpt_reference(variant: str) -> _NanoGPT:
    """A ``_NanoGPT`` whose weights are slices of the tensors modded-nanogpt's own statements fill."""
    from reference import modded_nanogpt_init as ref

    model = _NanoGPT()
    d, n_layers, blocks = 512, len(model.blocks), model.blocks
    with torch.no_grad():
        if variant == "2026-08":
            qk, vo = torch.empty(2 * n_layers, d, d), torch.empty(2 * n_layers, d, d)
            mlp = torch.empty(n_layers, 2, 4 * d, d)
            head = torch.empty(d, model.lm_head.out_features)  # CastedLinearT: (in, out)
            ref.gpt_2026_08(d, qk, vo, mlp, head, model.embed.weight, 2 * n_layers, 2 * n_layers)
            model.lm_head.weight.copy_(head.T)
            for i, block in enumerate(blocks):
                block.attn.q_proj.weight.copy_(qk[2 * i])
                block.attn.k_proj.weight.copy_(qk[2 * i + 1])
                block.attn.v_proj.weight.copy_(vo[2 * i])
                block.attn.o_proj.weight.copy_(vo[2 * i + 1])
                block.mlp.c_fc.weight.copy_(mlp[i, 0])
                block.mlp.c_proj.weight.copy_(mlp[i, 1].T)
        else:
            ref.gpt_2025_08(model.embed, model.lm_head)
            for block in blocks:
                qkvo, c_fc, c_proj = torch.empty(4, d, d), torch.empty(d, 4 * d), torch.empty(d, 4 * d)
                ref.attention_2025_08(d, qkvo)
                ref.mlp_2025_08(d, c_fc, c_proj)
                for j, name in enumerate(("q_proj", "k_proj", "v_proj", "o_proj")):
                    getattr(block.attn, name).weight.copy_(qkvo[j])
                block.mlp.c_fc.weight.copy_(c_fc.T)
                block.mlp.c_proj.weight.copy_(c_proj)
    return model


@pytest.mark.parametrize("variant", ["2026-08", "2025-08"])
def test_modded_nanogpt_against_its_init_statements(variant):
    """``modded_nanogpt`` = the init statements of modded-nanogpt's ``train_gpt.py`` (vendored in
    ``tests/reference``): uniform q/k/v (and o in 2026-08), zero MLP output (and attention output
    and head in 2025-08), the head N(0, 0.005^2) with the embedding its copy (2026-08)."""
    torch.manual_seed(SEED)
    reference = _nanogpt_reference(variant)
    ours = _NanoGPT()
    summary = tinit.init_model_(ours, "modded_nanogpt", seed=SEED, variant=variant)
    ratios = compare(reference, ours, summary)
    assert {"attn_q", "mlp_in", "embedding"} <= ratios.keys()


# --------------------------------------------------------------------------------------------
# Megatron-Core


@pytest.fixture
def megatron_parallel_state(tmp_path):
    """Megatron-Core's model-parallel state on one CPU process (gloo, world size 1), torn down after."""
    pytest.importorskip("megatron.core", reason="megatron-core (scripts/setup.sh installs it)")
    import torch.distributed as dist

    parallel_state = pytest.importorskip("megatron.core.parallel_state", exc_type=ImportError)
    if dist.is_initialized():
        pytest.skip("a torch.distributed process group is already initialised in this process")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        parallel_state.initialize_model_parallel(1, 1)
        yield
    finally:
        parallel_state.destroy_model_parallel()
        dist.destroy_process_group()


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")  # Megatron's own, at build
@pytest.mark.parametrize("experts", [0, 4], ids=["dense", "moe"])
def test_megatron_against_megatron_core(megatron_parallel_state, experts):
    """``megatron`` = Megatron-Core 0.16.1 ``GPTModel`` (local layer spec, CPU initialisation):
    ``init_method_normal(0.02)`` and ``scaled_init_method_normal(0.02, L)`` for the output projections;
    with ``experts``, its MoE layer too (``mlp.router``, ``mlp.experts.local_experts.<e>``,
    ``mlp.shared_experts``), classified by tinit's own name rules."""
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.transformer.transformer_config import TransformerConfig

    moe = (
        {"num_moe_experts": experts, "moe_router_topk": 2, "moe_ffn_hidden_size": 512}
        | {"moe_shared_expert_intermediate_size": 512, "add_bias_linear": False}  # shared experts take no bias
        if experts
        else {}
    )
    config = TransformerConfig(
        num_layers=4, hidden_size=512, num_attention_heads=8, use_cpu_initialization=True, init_method_std=0.02, **moe
    )
    spec = get_gpt_layer_local_spec(num_experts=experts or None, moe_grouped_gemm=False)

    def build():
        return GPTModel(config=config, transformer_layer_spec=spec, vocab_size=4096, max_sequence_length=1024)

    torch.manual_seed(SEED)
    reference = build()
    ours = build()
    summary = tinit.init_model_(ours, "megatron", seed=SEED)
    ratios = compare(reference, ours, summary)
    assert {"attn_qkv", "attn_out", "mlp_in", "mlp_out", "embedding", "head"} <= ratios.keys()
    assert ("router" in ratios) == bool(experts)


def test_lecun_normal_against_keras(monkeypatch):
    """``lecun_normal`` = Keras 3.15 ``LecunNormal`` (``VarianceScaling(1.0, "fan_in",
    "truncated_normal")``: std sqrt(1 / fan_in) / .87962566103423978 truncated at +-2 std, the
    same code and constant as ``jax.nn.initializers.lecun_normal``), on Keras' torch backend.

    Keras kernels are (in, out): each is drawn at the transposed shape and copied into the
    ``nn.Linear`` (out, in) weight. The torch backend's ``truncated_normal`` keeps the first of
    four candidates inside +-2 std and an untruncated one when none is (a (1 - 0.9545)^4 = 4e-6
    fraction), so its largest |x| is not compared; its realised std and tail are."""
    monkeypatch.setenv("KERAS_BACKEND", "torch")  # read once, when keras is first imported
    keras = pytest.importorskip("keras", reason="keras (scripts/setup.sh installs it)", exc_type=ImportError)
    if keras.backend.backend() != "torch":
        pytest.skip(f"keras runs on the {keras.backend.backend()} backend here, not torch")
    ref = _Stack()
    with torch.no_grad():
        for index, p in enumerate(ref.parameters()):
            kernel = keras.initializers.LecunNormal(seed=SEED + index)(tuple(p.shape[::-1]))
            p.copy_(torch.as_tensor(kernel).T)
    ours = _Stack()
    summary = tinit.init_model_(ours, "lecun_normal", seed=SEED)
    compare(ref, ours, summary, check_max=False)


# --------------------------------------------------------------------------------------------
# torchtitan


def _torchtitan_llama3(dim: int, n_layers: int, vocab: int, tied: bool = False):
    """A Llama 3 model built by torchtitan's own config functions (its ``_debugmodel``, resized;
    ``tied``: as its ``_1b`` / ``_3b`` flavours, ``enable_weight_tying`` and the embedding's init skipped)."""
    pytest.importorskip("torchtitan", reason="torchtitan (scripts/setup.sh installs it)")
    llama3 = pytest.importorskip("torchtitan.models.llama3", exc_type=ImportError)
    common = pytest.importorskip("torchtitan.models.common", exc_type=ImportError)
    n_heads = 8
    return llama3.Llama3Model.Config(
        dim=dim,
        vocab_size=vocab,
        enable_weight_tying=tied,
        tok_embeddings=common.Embedding.Config(
            num_embeddings=vocab,
            embedding_dim=dim,
            param_init=llama3._EMBEDDING_SKIP_INIT if tied else llama3._EMBEDDING_INIT,
        ),
        norm=common.RMSNorm.Config(normalized_shape=dim, param_init=llama3._NORM_INIT),
        lm_head=common.Linear.Config(in_features=dim, out_features=vocab, param_init=llama3._output_linear_init(dim)),
        layers=llama3._build_llama3_layers(
            fuse_qkv=True,
            n_layers=n_layers,
            dim=dim,
            n_heads=n_heads,
            hidden_dim=common.compute_ffn_hidden_dim(dim, multiple_of=256),
            rope=common.ComplexRoPE.Config(dim=dim // n_heads, max_seq_len=4096, theta=500000, scaling="llama"),
            attn_backend="flex",
        ),
    )


def test_depth_init_against_torchtitan_llama3():
    """``depth_init`` = torchtitan 0.3.0 Llama 3 ``init_states`` (w3 depth-scaled, embeddings N(0, 1), head +-3 std)."""
    config = _torchtitan_llama3(dim=512, n_layers=4, vocab=4096)
    torch.manual_seed(SEED)
    reference = config.build()
    reference.init_states()
    ours = config.build()
    summary = tinit.init_model_(ours, "depth_init", seed=SEED)
    ratios = compare(reference, ours, summary)
    assert {"attn_qkv", "attn_out", "mlp_in", "mlp_up", "mlp_out", "embedding", "head"} <= ratios.keys()


def test_depth_init_against_torchtitan_tied_llama3():
    """A tied flavour (Llama 3.2 1B/3B): torchtitan's ``init_states`` re-ties ``tok_embeddings`` to
    the ``lm_head`` it drew by ``_output_linear_init``; tinit gives the tensor the head's rule."""
    config = _torchtitan_llama3(dim=512, n_layers=4, vocab=4096, tied=True)
    torch.manual_seed(SEED)
    reference = config.build()
    reference.init_states()
    assert reference.tok_embeddings.weight is reference.lm_head.weight
    ours = config.build()
    summary = tinit.init_model_(ours, "depth_init", seed=SEED)
    assert ours.tok_embeddings.weight is ours.lm_head.weight
    tied = next(e for e in summary if e.tied)
    assert (tied.name, tied.role, tied.tied) == ("tok_embeddings.weight", "head", ("lm_head.weight",))
    ratios = compare(reference, ours, summary)
    assert "head" in ratios and "embedding" not in ratios


def test_depth_init_against_torchtitan_deepseek_v3_moe():
    """``depth_init`` on torchtitan 0.3.0's DeepSeek-V3 debug model (MLA, routed experts as 3-D
    tensors, shared experts, routers): ``_depth_init`` / ``_depth_experts_init`` per layer.

    The routers (8 x 256 per layer) are compared tensor by tensor: at 2,048 elements the
    tolerance is 6 standard errors (13 %), against the factor of 2 or more by which an
    unscaled router would differ from layer 1 on."""
    pytest.importorskip("torchtitan", reason="torchtitan (scripts/setup.sh installs it)")
    deepseek = pytest.importorskip("torchtitan.models.deepseek_v3", exc_type=ImportError)
    config = deepseek.model_registry("debugmodel").model
    torch.manual_seed(SEED)
    reference = config.build()
    reference.init_states()
    ours = config.build()
    summary = tinit.init_model_(ours, "depth_init", seed=SEED)
    ratios = compare(reference, ours, summary)
    assert {"attn_kv_down", "attn_kv", "mlp_in", "mlp_up", "mlp_out", "router", "head"} <= ratios.keys()


# --------------------------------------------------------------------------------------------
# OLMo-core


class _Meta(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return ()


class _Absent(types.ModuleType):
    """A stand-in for a module OLMo-core imports only for remote I/O (any attribute is another
    stand-in, or an exception class), so that its model code imports without it."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = _Absent(f"{self.__name__}.{name}") if name[:1].islower() else _Meta(name, (Exception,), {})
        setattr(self, name, value)
        return value


# OLMo-core's io module imports these at the top (cached_path and requests for remote files,
# dill through bettermap for multiprocessing); its model and init code never calls them.
_OLMO_IO_ONLY = ("cached_path", "cached_path.schemes", "requests", "requests.adapters", "requests.exceptions", "dill")


@pytest.fixture(scope="module")
def olmo_core():
    pytest.importorskip("olmo_core", reason="ai2-olmo-core (scripts/setup.sh installs it)")
    added = []
    for name in _OLMO_IO_ONLY:
        try:
            __import__(name)
        except ImportError:
            module = _Absent(name)
            module.__path__ = []
            sys.modules[name] = module
            added.append(name)
    try:
        transformer = pytest.importorskip("olmo_core.nn.transformer", exc_type=ImportError)
        yield transformer
    finally:
        for name in added:
            sys.modules.pop(name, None)


@pytest.mark.parametrize("method", ["llama", "llama_depth", "fan_in"])
def test_olmo_against_olmo_core(olmo_core, method):
    """``olmo_<method>`` = OLMo-core 3.0.0 ``Transformer.init_weights`` with ``InitMethod.<method>``."""
    config = olmo_core.TransformerConfig.llama_like(
        d_model=512, vocab_size=4096, n_layers=4, n_heads=8, init_method=olmo_core.InitMethod(method)
    )
    reference = config.build(init_device="cpu")
    torch.manual_seed(SEED)
    reference.init_weights(device=torch.device("cpu"))
    ours = config.build(init_device="cpu")
    summary = tinit.init_model_(ours, f"olmo_{method}", seed=SEED)
    ratios = compare(reference, ours, summary)
    assert {"attn_q", "attn_out", "mlp_in", "mlp_up", "mlp_out", "embedding", "head"} <= ratios.keys()


@pytest.mark.parametrize("method", ["llama", "fan_in"])
def test_tied_olmo_against_olmo_core(olmo_core, method):
    """OLMo-core with ``tie_word_embeddings``: ``init_embeddings`` draws the shared tensor,
    ``init_final_w_out`` is skipped; tinit gives it the embedding's rule."""
    config = olmo_core.TransformerConfig.llama_like(
        d_model=512,
        vocab_size=4096,
        n_layers=4,
        n_heads=8,
        init_method=olmo_core.InitMethod(method),
        tie_word_embeddings=True,
    )
    reference = config.build(init_device="cpu")
    torch.manual_seed(SEED)
    reference.init_weights(device=torch.device("cpu"))
    ours = config.build(init_device="cpu")
    summary = tinit.init_model_(ours, f"olmo_{method}", seed=SEED)
    assert ours.lm_head.w_out.weight is ours.embeddings.weight
    tied = next(e for e in summary if e.tied)
    assert tied.role == "embedding" and tied.tied == ("lm_head.w_out.weight",)
    ratios = compare(reference, ours, summary)
    assert "embedding" in ratios and "head" not in ratios


def test_olmo_normalized_against_olmo_core(olmo_core):
    """``olmo_normalized`` = OLMo-core 3.0.0 ``InitMethod.normalized``: the draws of
    ``Transformer.init_weights`` before ``NormalizedTransformer.normalize_matrices`` (the model's
    own step after either init); nGPT's scaling vectors are the model's (not written by tinit)."""
    config = olmo_core.TransformerConfig.ngpt_like(d_model=512, vocab_size=4096, n_layers=4, n_heads=8)
    assert config.init_method == olmo_core.InitMethod.normalized
    scales = r"alpha$|\.s[qk]$|\.sw[13]$|\.sz$"
    reference = config.build(init_device="cpu")
    torch.manual_seed(SEED)
    olmo_core.Transformer.init_weights(reference, device=torch.device("cpu"))
    ours = config.build(init_device="cpu")
    summary = tinit.init_model_(ours, "olmo_normalized", seed=SEED, only=lambda name: re.search(scales, name) is None)
    ratios = compare(reference, ours, summary, skip=scales)
    assert {"attn_q", "attn_out", "mlp_in", "mlp_up", "mlp_out", "embedding", "head"} <= ratios.keys()
    for model in (reference, ours):
        model.normalize_matrices()
    compare(reference, ours, summary, skip=scales)
