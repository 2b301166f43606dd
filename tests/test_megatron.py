"""``tinit.megatron``: Megatron-Core shards equal the single-process build's slices, bit for bit.

Distributed (marker ``dist``): megatron-core 0.16.1 GPTModels (local layer spec, no Transformer Engine),
dense and MoE (``SequentialMLP``, ``allgather`` dispatcher), on gloo across spawned CPU processes
(tests/megatron_workers.py): TP 2, PP 2, EP 2 on 2 ranks; TP 2 x PP 2, TP 2 x EP 2, PP 2 x EP 2 on 4.
Each rank's tensors must equal the TP = PP = EP = 1 build's, cut by Megatron's own
``_initialize_affine_weight_cpu``; Megatron's own init (``perform_initialization=True``) must match the
constants and stds ``init_model_`` reports.

In process, on hand-built modules named as Megatron's (what needs CUDA there: Transformer Engine's
grouped experts ``weight0..N``, the legacy ``GroupedMLP``): the canonical names, the strided
``linear_fc1`` and the expert stacks against the TP = EP = 1 build sliced by hand, and the refusals.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import socket
import subprocess
import sys
import warnings
from types import SimpleNamespace

import pytest
import torch
from torch import nn

import tinit
import tinit.megatron
from tinit import identity, schemes

HAVE_MEGATRON = importlib.util.find_spec("megatron") is not None and importlib.util.find_spec("megatron.core")
LAYOUTS = {
    2: [
        ("dense", (2, 1, 1), None),
        ("dense", (1, 2, 1), None),
        ("moe", (2, 1, 1), None),
        ("moe", (1, 2, 1), None),
        ("moe", (1, 1, 2), None),
        ("dense", (2, 1, 1), "depth_init"),  # gate and up differ: the strided fc1's parts
        ("dense", (1, 2, 1), "depth_init"),  # depth by the global layer index
        ("dense", (2, 1, 1), "xavier_normal"),  # q, k, v differ: linear_qkv's per-group segments
    ],
    4: [("dense", (2, 2, 1), None), ("moe", (2, 1, 2), None), ("moe", (1, 2, 2), "depth_init")],
}
F, D = 6, 8  # an expert's ffn width and the hidden size of the hand-built modules


# --- hand-built modules named as Megatron-Core's ----------------------------------------------------------------


class Group:
    """A process group as the layers see it: ``rank()`` and ``size()``."""

    def __init__(self, rank: int, size: int):
        self._rank, self._size = rank, size

    def rank(self) -> int:
        return self._rank

    def size(self) -> int:
        return self._size


def _kind(name: str, module: str) -> type:
    kind = type(name, (nn.Module,), {})
    kind.__module__, kind.__qualname__ = module, name
    return kind


LAYERS, EXPERTS = "megatron.core.tensor_parallel.layers", "megatron.core.transformer.moe.experts"
TE = "megatron.core.extensions.transformer_engine"
Column, Row = _kind("ColumnParallelLinear", LAYERS), _kind("RowParallelLinear", LAYERS)
Block = _kind("TransformerBlock", "megatron.core.transformer.transformer_block")
Layer = _kind("TransformerLayer", "megatron.core.transformer.transformer_layer")
Sequential, TEGrouped, Grouped = (_kind(n, EXPERTS) for n in ("SequentialMLP", "TEGroupedMLP", "GroupedMLP"))
GroupedColumn, GroupedRow = _kind("TEColumnParallelGroupedLinear", TE), _kind("TERowParallelGroupedLinear", TE)
Language = _kind("LanguageModule", "megatron.core.models.common.language_module.language_module")
Mamba = _kind("MambaMixer", "megatron.core.ssm.mamba_mixer")


def _nan(*shape) -> nn.Parameter:
    return nn.Parameter(torch.full(shape, math.nan))


def _linear(kind: type, out: int, inp: int, tp: Group, leaves: tuple[str, ...] = ("weight",)) -> nn.Module:
    module = kind()
    module.tp_group = tp
    for leaf in leaves:
        module.register_parameter(leaf, _nan(out, inp))
    return module


def _config(**fields) -> SimpleNamespace:
    """A TransformerConfig's fields as ``TransformerConfig.__post_init__`` sets them (megatron.core.utils'
    ``init_method_normal`` / ``scaled_init_method_normal`` are these partials)."""
    normal = functools.partial(functools.partial, torch.nn.init.normal_, mean=0.0)
    std, layers = 0.02, 2
    base = {
        "num_layers": layers,
        "hidden_size": D,
        "gated_linear_unit": True,
        "num_attention_heads": 2,
        "num_query_groups": 1,
        "kv_channels": 4,
        "layernorm_zero_centered_gamma": False,
        "init_method": normal(std=std),
        "output_layer_init_method": normal(std=std / math.sqrt(2.0 * layers)),
        "embedding_init_method": normal(std=std),
    }
    return SimpleNamespace(**{**base, **fields})


def _in_layer(experts: nn.Module, number: int = 1) -> nn.Module:
    """``decoder.layers.0.mlp.experts`` holding ``experts``, the layer's ``layer_number`` ``number``."""
    root, layer = nn.Module(), Layer()
    layer.layer_number, layer.mlp = number, nn.Module()
    layer.mlp.experts = experts
    root.decoder = Block()
    root.decoder.layers = nn.ModuleList([layer])
    return root


def _sequential(experts: int, ep: Group, tp: Group) -> nn.Module:
    module = Sequential()
    module.num_local_experts, module.ep_group, module.local_experts = experts, ep, nn.ModuleList()
    for _ in range(experts):
        mlp = nn.Module()
        mlp.linear_fc1, mlp.linear_fc2 = _linear(Column, 2 * F // tp.size(), D, tp), _linear(Row, D, F // tp.size(), tp)
        module.local_experts.append(mlp)
    return module


def _te_grouped(experts: int, ep: Group, tp: Group) -> nn.Module:
    module = TEGrouped()
    module.num_local_experts, module.ep_group = experts, ep
    numbered = tuple(f"weight{i}" for i in range(experts))
    module.linear_fc1 = _linear(GroupedColumn, 2 * F // tp.size(), D, tp, numbered)
    module.linear_fc2 = _linear(GroupedRow, D, F // tp.size(), tp, numbered)
    return module


def _strided(full: torch.Tensor, rank: int, size: int) -> torch.Tensor:
    """Megatron's stride-2 block of a gated fc1 [gate; up]: rank r holds [gate chunk r; up chunk r]."""
    gate, up = full.chunk(2)
    return torch.cat([gate.chunk(size)[rank], up.chunk(size)[rank]])


@pytest.mark.parametrize("scheme", [None, "depth_init"], ids=["megatron-config", "depth_init"])
@pytest.mark.parametrize("tp_rank", [0, 1])
def test_te_grouped_experts_equal_sequential_experts_sliced(scheme, tp_rank):
    whole = _in_layer(_sequential(4, Group(0, 1), Group(0, 1)), number=2)
    tinit.megatron.init_model_(whole, _config(), seed=5, scheme=scheme)
    names = identity.canonical_names(whole)
    reference = {names[raw]: param for raw, param in whole.named_parameters()}
    sharded = _in_layer(_te_grouped(2, Group(1, 2), Group(tp_rank, 2)), number=2)
    names = identity.canonical_names(sharded)
    assert names["decoder.layers.0.mlp.experts.linear_fc1.weight1"] == (
        "decoder.layers.1.mlp.experts.local_experts.3.linear_fc1.weight"
    )
    tinit.megatron.init_model_(sharded, _config(), seed=5, scheme=scheme)
    for i in range(2):
        expert = f"decoder.layers.1.mlp.experts.local_experts.{2 + i}"
        fc1, fc2 = reference[f"{expert}.linear_fc1.weight"], reference[f"{expert}.linear_fc2.weight"]
        got = sharded.decoder.layers[0].mlp.experts
        torch.testing.assert_close(getattr(got.linear_fc1, f"weight{i}"), _strided(fc1, tp_rank, 2), rtol=0, atol=0)
        torch.testing.assert_close(getattr(got.linear_fc2, f"weight{i}"), fc2.chunk(2, 1)[tp_rank], rtol=0, atol=0)


def test_strided_fc1_takes_the_gate_and_up_parts_of_the_global_weight():
    """depth_init gives the up projection its depth scaling, not the gate: each half keeps its own std."""
    summary = tinit.megatron.init_model_(
        _in_layer(_sequential(1, Group(0, 1), Group(1, 2))), _config(), scheme="depth_init"
    )
    fc1 = next(entry for entry in summary if entry.name.endswith("linear_fc1.weight"))
    expected = schemes.get("depth_init").spec(role="mlp_gate_up", layer_idx=0, n_layers=2, shape=(2 * F, D), d_model=D)
    assert fc1.spec == expected and expected.parts is not None and expected.parts[0] != expected.parts[1]


@pytest.mark.parametrize("tp_rank", [0, 1])
def test_grouped_mlp_stacks_are_the_ep_block_then_the_tp_block(tp_rank):
    def grouped(experts: int, ep: Group, tp: Group) -> nn.Module:
        module = Grouped()
        module.num_local_experts, module.ep_group, module.tp_group = experts, ep, tp
        module.weight1 = _nan(D, experts * 2 * F // tp.size())  # (in, E * out)
        module.weight2 = _nan(experts * F // tp.size(), D)  # (E * in, out)
        return module

    config = _config()
    whole = _in_layer(grouped(4, Group(0, 1), Group(0, 1)))
    summary = tinit.megatron.init_model_(whole, config, seed=3)
    sharded = _in_layer(grouped(2, Group(1, 2), Group(tp_rank, 2)))
    tinit.megatron.init_model_(sharded, config, seed=3)
    full, got = whole.decoder.layers[0].mlp.experts, sharded.decoder.layers[0].mlp.experts
    # GroupedMLP.__init__ splits the ep rank's stack of experts 2, 3 by _initialize_affine_weight_cpu
    torch.testing.assert_close(got.weight1, full.weight1[:, 24:].chunk(2, 1)[tp_rank], rtol=0, atol=0)
    torch.testing.assert_close(got.weight2, full.weight2[12:].chunk(2, 0)[tp_rank], rtol=0, atol=0)
    assert [entry.spec.std for entry in summary] == [config.init_method.keywords["std"], 0.02 / 2]


def test_layer_numbers_and_a_tied_output_layer_get_the_single_stage_names():
    model = Language()
    model.share_embeddings_and_output_weights, model.pre_process, model.post_process = True, False, True
    model.decoder = Block()
    model.decoder.layers = nn.ModuleList([Layer(), Layer()])
    for index, layer in enumerate(model.decoder.layers):
        layer.layer_number = 3 + index  # the second of two stages of 2 layers
        layer.norm = nn.LayerNorm(D)
    model.output_layer = _linear(Column, 16, D, Group(0, 1))
    assert identity.canonical_names(model) == {
        "decoder.layers.0.norm.weight": "decoder.layers.2.norm.weight",
        "decoder.layers.0.norm.bias": "decoder.layers.2.norm.bias",
        "decoder.layers.1.norm.weight": "decoder.layers.3.norm.weight",
        "decoder.layers.1.norm.bias": "decoder.layers.3.norm.bias",
        "output_layer.weight": "embedding.word_embeddings.weight",
    }
    summary = tinit.megatron.init_model_(model, _config(embedding_init_method=_config().init_method))
    assert (summary[-1].name, summary[-1].role) == ("embedding.word_embeddings.weight", "embedding")


@pytest.mark.parametrize("scheme", [None, "gpt2"], ids=["megatron-config", "gpt2"])
def test_te_fused_norm_linear_and_zero_centered_gammas(scheme):
    """TELayerNormColumnParallelLinear: its norm whole, its weight split on dim 0; a zero-centred gain
    (1 + weight) is written 0 under Megatron's init and under a recipe's gain of 1."""
    fused = _kind("TELayerNormColumnParallelLinear", TE)
    whole, half = (_linear(fused, 12 // tp, D, Group(tp - 1, tp), ("weight", "layer_norm_weight")) for tp in (1, 2))
    for module in (whole, half):
        module.layer_norm_weight = _nan(D)
    roots = []
    for module in (whole, half):
        root = _in_layer(nn.Module())
        root.decoder.layers[0].self_attention = nn.Module()
        root.decoder.layers[0].self_attention.linear_qkv = module
        roots.append(root)
    config = _config(layernorm_zero_centered_gamma=True, num_attention_heads=1, kv_channels=4)
    summary = tinit.megatron.init_model_(roots[0], config, seed=1, scheme=scheme)
    tinit.megatron.init_model_(roots[1], config, seed=1, scheme=scheme)
    assert [entry.role for entry in summary] == ["attn_qkv", "norm"]
    torch.testing.assert_close(half.weight, whole.weight.chunk(2)[1], rtol=0, atol=0)
    assert torch.equal(half.layer_norm_weight, torch.zeros(D)) and torch.equal(whole.layer_norm_weight, torch.zeros(D))


def _two_params(extra: nn.Module) -> tuple[nn.Module, nn.Parameter]:
    root = nn.Module()
    root.linear = _linear(Column, 4, D, Group(0, 1))
    root.extra = extra
    return root, root.linear.weight


def test_a_parameter_without_a_partition_is_refused_before_anything_is_written():
    mixer = Mamba()
    mixer.A_log = _nan(4)
    root, written = _two_params(mixer)
    with pytest.raises(ValueError, match=r"parameter extra\.A_log: no partition .* MambaMixer"):
        tinit.megatron.init_model_(root, _config())
    odd = _linear(Row, 4, D, Group(0, 1), ("weight", "scale"))
    with pytest.raises(ValueError, match=r"parameter extra\.scale"):
        tinit.megatron.init_model_(_two_params(odd)[0], _config())
    assert written.isnan().all()


def test_bad_arguments_are_refused():
    root, written = _two_params(nn.LayerNorm(D))
    custom = _config(init_method=lambda tensor: torch.nn.init.uniform_(tensor))
    with pytest.raises(ValueError, match=r"config\.init_method .* pass scheme="):
        tinit.megatron.init_model_(root, custom)
    with pytest.raises(TypeError, match="need scheme="):
        tinit.megatron.init_model_(root, _config(), std=0.1)
    with pytest.raises(TypeError, match="TransformerConfig"):
        tinit.megatron.init_model_(root, SimpleNamespace(num_layers=2))
    with pytest.raises(TypeError, match="model must be"):
        tinit.megatron.init_model_("model", _config())
    with pytest.raises(schemes.UnknownNameError):
        tinit.megatron.init_model_(root, _config(), scheme="no-such-scheme")
    with pytest.raises(ValueError, match="seed"):
        tinit.megatron.init_model_(root, _config(), seed=-1)
    assert written.isnan().all()
    root.linear.weight = nn.Parameter(torch.empty(4, D, device="meta"))
    with pytest.raises(ValueError, match=r"linear\.weight is on the meta device"):
        tinit.megatron.init_model_(root, _config())
    summary = tinit.megatron.init_model_(_two_params(nn.LayerNorm(D))[0], custom, scheme="megatron")
    assert [entry.spec.constant for entry in summary] == [None, 1.0, 0.0]


def test_import_tinit_imports_no_megatron():
    code = "import sys, tinit, tinit.megatron, tinit.identity; print(sorted(m for m in sys.modules if 'megatron' in m))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['tinit.megatron']"


# --- distributed: megatron-core's own GPTModel on gloo ------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def world_results(tmp_path_factory):
    """world -> {check id: [failure messages]}: one ``megatron_workers.run_world`` spawn per world size."""
    if not HAVE_MEGATRON:
        pytest.skip("megatron-core is not installed (scripts/setup.sh installs 0.16.1)")
    import megatron_workers
    import torch.multiprocessing as mp

    cache = {}

    def results(world: int) -> dict:
        for attempt in (1, 2) if world not in cache else ():  # a second spawn when a port is taken first
            out = tmp_path_factory.mktemp(f"megatron{world}")
            try:
                mp.spawn(
                    megatron_workers.run_world,
                    args=(world, _free_port(), str(out), LAYOUTS[world]),
                    nprocs=world,
                    join=True,
                )
                cache[world] = json.loads((out / "results.json").read_text())
                break
            except Exception as exc:  # noqa: BLE001  every test of this world reports it
                cache[world] = f"the world-{world} workers failed (attempt {attempt}): {type(exc).__name__}: {exc}"
                if attempt == 1:
                    warnings.warn(cache[world], RuntimeWarning, stacklevel=1)
        if isinstance(cache[world], str):
            pytest.fail(cache[world])
        return cache[world]

    return results


def _layout_id(kind, sizes, scheme) -> str:
    tp, pp, ep = sizes
    return f"{kind}-tp{tp}-pp{pp}-ep{ep}-{scheme or 'megatron-config'}"


@pytest.mark.dist
@pytest.mark.parametrize(
    "world, layout",
    [pytest.param(w, layout, id=f"w{w}-{_layout_id(*layout)}") for w in LAYOUTS for layout in LAYOUTS[w]],
)
def test_every_rank_holds_the_single_process_slices(world_results, world, layout):
    results = world_results(world)
    check = _layout_id(*layout)
    assert check in results, f"the workers reported no result for {check!r}"
    if results[check]:
        pytest.fail(f"{check}:\n" + "\n".join(results[check]), pytrace=False)


@pytest.mark.dist
@pytest.mark.parametrize("kind", ["dense", "moe"])
def test_default_stds_are_megatrons_own(world_results, kind):
    results = world_results(2)
    if results[f"stds-{kind}"]:
        pytest.fail("\n".join(results[f"stds-{kind}"]), pytrace=False)


@pytest.mark.parametrize(
    ("model", "named"),
    [
        ([torch.nn.Linear(2, 2), 3], r"model\[1\] must be a torch.nn.Module \(a model chunk\), got int"),
        ({"a": torch.nn.Linear(2, 2)}, "got dict"),
        ([], r"got list \(empty\)"),
    ],
)
def test_a_bad_model_is_named_without_its_repr(model, named):
    with pytest.raises(TypeError, match=named):
        tinit.megatron.init_model_(model)
