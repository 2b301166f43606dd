"""Fused q/k/v layouts (InitSpec segments, head counts from configs) and per-expert fans of expert stacks.

Oracles: each segment written alone by ``trunc_normal_at_`` / ``write_spec_`` at its stream offset
(bit-exact); the models' own forward splits (transformers 5.24: Falcon ``_split_heads``, the slicing
of Phi-3, GPT-BigCode and GPT-NeoX ``forward``; 5.25: Falcon's and Ergo's ``forward``) applied to row
labels; ``torch.nn.init``'s fan code (``_calculate_fan_in_and_fan_out``) on one expert's matrix or on
the separate q/k/v matrices.
"""

from __future__ import annotations

import itertools
import math
import re

import pytest
import torch

import tinit
from tinit import schemes, write_grouped_, write_spec_
from tinit.families import FusedQKV, expert_layout, fused_qkv_of_config

S = schemes.InitSpec
PARTS = (S(std=0.5), S(std=2.0, trunc=3.0), S(std=1.0, distribution="uniform"))
D = 16


def _alone(shape, spec, *, seed, stream, offset):
    """One segment written alone: a fresh tensor of its shape from its own stream offset."""
    return write_spec_(torch.empty(shape), spec, seed=seed, stream=stream, offset=offset)


def _oracle(shape, parts, segments, split_dim, *, seed=5, stream=7, offset=11):
    """The fused tensor assembled from its segments written alone, segment j at offset + the numel
    of segments 0..j-1 (the stream rule of docs/stream.md, written out here independently)."""
    pieces, position = [], offset
    for part, length in segments:
        sub = list(shape)
        sub[split_dim] = length
        pieces.append(_alone(tuple(sub), parts[part], seed=seed, stream=stream, offset=position))
        position += math.prod(sub)
    return torch.cat(pieces, dim=split_dim)


LAYOUTS = {
    "gqa_contiguous": FusedQKV.from_heads(8, 2, 4, "contiguous"),
    "gqa_grouped": FusedQKV.from_heads(8, 2, 4, "grouped"),
    "mqa": FusedQKV.from_heads(8, 1, 4, "contiguous"),
    "per_head": FusedQKV.from_heads(4, 4, 4, "per_head"),
    "codegen": FusedQKV(4, 4, 4, 4, order=(0, 2, 1)),
}


@pytest.mark.parametrize("split_dim", [0, 1], ids=["rows", "cols"])
def test_equal_slices_keep_their_values(split_dim):
    """A spec of equal slices (no segments) writes what it wrote before segments existed: slice i from
    offset + i * slice_numel, checked against trunc_normal_at_ of each slice alone; explicit equal
    segments write the same bits."""
    shape = (3 * D, D) if split_dim == 0 else (D, 3 * D)
    got = write_spec_(torch.empty(shape), S(parts=PARTS, split_dim=split_dim), seed=5, stream=7, offset=11)
    slice_shape = (D, D)
    pieces = []
    for i, part in enumerate(PARTS):
        view = torch.empty(slice_shape)
        if part.distribution == "uniform":
            write_spec_(view, part, seed=5, stream=7, offset=11 + i * D * D)
        else:
            lo, hi = part.bounds
            tinit.trunc_normal_at_(view, part.mean, part.std, lo, hi, seed=5, stream=7, offset=11 + i * D * D)
        pieces.append(view)
    torch.testing.assert_close(got, torch.cat(pieces, dim=split_dim), rtol=0, atol=0)
    explicit = S(parts=PARTS, split_dim=split_dim, segments=((0, D), (1, D), (2, D)))
    again = write_spec_(torch.empty(shape), explicit, seed=5, stream=7, offset=11)
    torch.testing.assert_close(again, got, rtol=0, atol=0)


@pytest.mark.parametrize("name", list(LAYOUTS))
@pytest.mark.parametrize("split_dim", [0, 1], ids=["rows", "cols"])
def test_segments_equal_each_segment_alone(name, split_dim):
    fused = LAYOUTS[name]
    shape = (fused.width, 8) if split_dim == 0 else (8, fused.width)
    spec = S(parts=PARTS, split_dim=split_dim, segments=fused.segments())
    got = write_spec_(torch.empty(shape), spec, seed=5, stream=7, offset=11)
    torch.testing.assert_close(got, _oracle(shape, PARTS, fused.segments(), split_dim), rtol=0, atol=0)


def test_segments_of_one_spec_along_rows_are_the_whole_fill():
    """Along dim 0 a segment's stream offset is its first element's row-major index: the same spec
    in every segment writes the tensor's one-pass fill."""
    whole = S(std=0.02)
    segments = LAYOUTS["gqa_grouped"].segments()
    shape = (LAYOUTS["gqa_grouped"].width, 24)
    a = write_spec_(torch.empty(shape), whole, seed=3, stream=4, offset=5)
    b = write_spec_(torch.empty(shape), S(parts=(whole, whole, whole), segments=segments), seed=3, stream=4, offset=5)
    torch.testing.assert_close(b, a, rtol=0, atol=0)


@pytest.mark.parametrize("split_dim", [0, 1], ids=["rows", "cols"])
@pytest.mark.parametrize("shard_dim", [0, 1], ids=["shard0", "shard1"])
def test_sharded_segments_are_blocks_of_the_whole(split_dim, shard_dim):
    """Hand-made shards (global_shape, shard_offsets) of a segmented spec hold exactly their block of
    the unsharded fill, across segment boundaries."""
    fused = LAYOUTS["gqa_grouped"]
    shape = (fused.width, 12) if split_dim == 0 else (12, fused.width)
    spec = S(parts=PARTS, split_dim=split_dim, segments=fused.segments())
    whole = write_spec_(torch.empty(shape), spec, seed=9, stream=2)
    size = shape[shard_dim]
    bounds = [0, size // 3 + 1, 2 * size // 3 + 3, size]
    for start, end in itertools.pairwise(bounds):
        block = list(shape)
        block[shard_dim] = end - start
        origin = [0, 0]
        origin[shard_dim] = start
        shard = write_spec_(torch.empty(block), spec, seed=9, stream=2, global_shape=shape, shard_offsets=tuple(origin))
        torch.testing.assert_close(shard, whole.narrow(shard_dim, start, end - start), rtol=0, atol=0)


@pytest.mark.parametrize("shard_dim", [0, 1], ids=["Shard0", "Shard1"])
def test_dtensor_shards_of_segments(shard_dim):
    """Real DTensors (torch's fake process group: one process plays each rank in turn): every rank's
    local shard of a segmented spec, by write_spec_ and write_grouped_, is its chunk of the unsharded fill."""
    import torch.distributed as dist

    fake_pg = pytest.importorskip("torch.testing._internal.distributed.fake_pg")
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import DTensor, Shard

    if dist.is_initialized():
        pytest.skip("a process group is already initialised in this process")
    fused = LAYOUTS["gqa_grouped"]
    spec = S(parts=PARTS, segments=fused.segments())
    shape = (fused.width, 6)
    full = write_spec_(torch.empty(shape), spec, seed=3, stream=1)
    world = 3
    for rank in range(world):
        dist.init_process_group("fake", rank=rank, world_size=world, store=fake_pg.FakeStore())
        try:
            mesh = DeviceMesh("cpu", list(range(world)))
            chunk = full.chunk(world, shard_dim)[rank]
            tensors = [
                DTensor.from_local(
                    torch.empty(chunk.shape), mesh, [Shard(shard_dim)], run_check=False, shape=full.shape, stride=(6, 1)
                )
                for _ in range(2)
            ]
            write_spec_(tensors[0], spec, seed=3, stream=1)
            write_grouped_([(tensors[1], spec, 1)], seed=3)
            for tensor in tensors:
                torch.testing.assert_close(tensor.to_local(), chunk, rtol=0, atol=0)
        finally:
            dist.destroy_process_group()


def test_grouped_writes_segments_as_sequential():
    fused = LAYOUTS["gqa_grouped"]
    specs = [
        S(parts=PARTS, split_dim=0, segments=fused.segments()),
        S(parts=PARTS, split_dim=1, segments=LAYOUTS["codegen"].segments()),
        S(parts=(S(std=0.1), S(constant=0.0), S(std=0.3)), segments=LAYOUTS["per_head"].segments()),
    ]
    shapes = [(fused.width, 8), (8, LAYOUTS["codegen"].width), (LAYOUTS["per_head"].width, 8)]
    expected = [
        write_spec_(torch.empty(s), p, seed=1, stream=10 + i)
        for i, (s, p) in enumerate(zip(shapes, specs, strict=True))
    ]
    for sequential in (False, True):
        tensors = [torch.full(s, float("nan")) for s in shapes]
        write_grouped_(
            [(t, p, 10 + i) for i, (t, p) in enumerate(zip(tensors, specs, strict=True))], seed=1, sequential=sequential
        )
        for got, want in zip(tensors, expected, strict=True):
            torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.parametrize(
    "segments, match",
    [
        (((0, 4), (1, 4), (2, 4)), "cover 12"),
        (((0, 8), (1, 4), (3, 4)), "part index"),
        (((0, 8), (1, 8)), "never place"),
        (((0, 8), (1, 0), (2, 8)), "length >= 1"),
        (((0, 8), (1, True), (2, 7)), "part index"),
        ([(0, 8), (1, 4), (2, 4)], "tuple of"),
    ],
    ids=["short", "bad_index", "unused_part", "zero_length", "bool_length", "list"],
)
def test_bad_segments_are_refused_before_writing(segments, match):
    tensor = torch.full((16, 4), 7.0)
    with pytest.raises(ValueError, match=match):
        write_spec_(tensor, S(parts=PARTS, segments=segments), seed=1)
    with pytest.raises(ValueError, match=match):
        write_grouped_([(tensor, S(parts=PARTS, segments=segments), 0)], seed=1)
    torch.testing.assert_close(tensor, torch.full((16, 4), 7.0), rtol=0, atol=0)


def test_segments_without_parts_are_refused():
    with pytest.raises(ValueError, match="needs parts"):
        write_spec_(torch.empty(4, 4), S(std=1.0, segments=((0, 4),)), seed=1)


def test_realised_std_weights_segments_by_length():
    spec = S(
        parts=(S(std=1.0, trunc=math.inf), S(constant=0.0), S(std=3.0, trunc=math.inf)),
        segments=((0, 6), (1, 1), (2, 1)),
    )
    assert spec.realised_std == pytest.approx(math.sqrt((6 * 1.0 + 9.0) / 8))


# --- schemes: one part, one matrix --------------------------------------------------------------


def _torch_xavier_std(shape, gain=1.0):
    fan_in, fan_out = torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(shape, device="meta"))
    return gain * math.sqrt(2.0 / float(fan_in + fan_out))


def _torch_kaiming_std(shape):
    fan_in, _ = torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(shape, device="meta"))
    return torch.nn.init.calculate_gain("relu") / math.sqrt(fan_in)


@pytest.mark.parametrize("name", ["gqa_contiguous", "gqa_grouped", "mqa"])
def test_xavier_gives_each_part_its_own_std(name):
    """Xavier on a GQA fused qkv: each part's std is torch.nn.init.xavier_normal_'s on the separate
    q (h*hd, d), k and v (kv*hd, d) matrices, laid out by the heads."""
    fused, d = LAYOUTS[name], 64
    spec = schemes.get("xavier_normal").spec(role="attn_qkv", shape=(fused.width, d), qkv=fused, trunc=math.inf)
    q, k, v = fused.widths
    assert [p.std for p in spec.parts] == pytest.approx([_torch_xavier_std((w, d)) for w in (q, k, v)], rel=1e-12)
    assert spec.segments == fused.segments() and spec.split_dim == 0
    conv = schemes.get("xavier_normal").spec(role="attn_qkv", shape=(d, fused.width), layout="in_out", qkv=fused)
    assert conv.split_dim == 1 and [p.std for p in conv.parts] == [p.std for p in spec.parts]


def test_equal_parts_are_one_spec():
    """kaiming fan_in depends on d only, and MHA's parts are equal: one spec, no parts."""
    fused = LAYOUTS["gqa_grouped"]
    kaiming = schemes.get("kaiming_normal").spec(role="attn_qkv", shape=(fused.width, 64), qkv=fused)
    assert kaiming.parts is None and kaiming.std == pytest.approx(_torch_kaiming_std((64, 64)))
    mha = schemes.get("xavier_normal").spec(role="attn_qkv", shape=(3 * 64, 64))
    assert mha.parts is None and mha.std == pytest.approx(_torch_xavier_std((64, 64)))


def test_qkv_width_must_match_the_tensor():
    with pytest.raises(ValueError, match="spans 48"):
        schemes.get("xavier_normal").spec(role="attn_qkv", shape=(96, 64), qkv=LAYOUTS["gqa_contiguous"])
    with pytest.raises(TypeError, match="FusedQKV"):
        schemes.get("xavier_normal").spec(role="attn_qkv", shape=(96, 64), qkv=(8, 2, 4))
    with pytest.raises(ValueError, match="do not divide"):
        FusedQKV.from_heads(8, 3, 4)


# --- models: the rows each part writes are the rows the model's forward reads ---------------------


def _falcon_split(attn, labels):
    if hasattr(attn, "_split_heads"):  # transformers 5.24
        q, k, v = attn._split_heads(labels[None, None, :])
        return q, k, v
    fused = labels.view(-1, attn.head_dim)  # 5.25 splits inline, in FalconAttention.forward:
    if attn.new_decoder_architecture:  # per key/value group: its queries, then its key and value
        grouped = fused.view(attn.num_kv_heads, -1, attn.head_dim)
        return grouped[:, :-2], grouped[:, -2], grouped[:, -1]
    if attn.multi_query:
        return fused.split([attn.num_heads, 1, 1], dim=-2)
    return fused.unflatten(-2, (attn.num_heads, 3)).unbind(-2)


def _phi3_split(attn, labels):
    cfg = attn.config
    query_pos = cfg.num_attention_heads * attn.head_dim
    kv = cfg.num_key_value_heads * attn.head_dim
    return labels[:query_pos], labels[query_pos : query_pos + kv], labels[query_pos + kv :]


def _bigcode_split(attn, labels):
    fused = labels[None, None, :]
    if attn.multi_query:
        return fused.unsqueeze(1).split((attn.embed_dim, attn.kv_dim, attn.kv_dim), dim=3)
    return fused.view(1, 1, attn.num_heads, 3 * attn.head_dim).transpose(1, 2).split(3 * [attn.head_dim], dim=3)


def _codegen_split(attn, labels):
    local_dim = attn.embed_dim // attn.mp_num
    query, value, key = labels[None, None, :].view(1, 1, -1, 3 * local_dim).split(local_dim, dim=-1)
    return query, key, value


def _ergo_split(attn, labels):  # ErgoAttention.forward: view(..., -1, head_dim).split((h, kv, kv), dim=-2)
    kv = attn.config.num_key_value_heads
    return labels.view(-1, attn.head_dim).split((attn.config.num_attention_heads, kv, kv), dim=-2)


def _neox_split(attn, labels):
    return labels[None, :].view(1, -1, 3 * attn.head_size).transpose(0, 1).chunk(3, dim=-1)


MODELS = [
    (
        "falcon_new",
        "falcon",
        {"new_decoder_architecture": True, "num_attention_heads": 8, "num_kv_heads": 2},
        "self_attention",
        _falcon_split,
    ),
    (
        "falcon_mqa",
        "falcon",
        {"new_decoder_architecture": False, "multi_query": True, "num_attention_heads": 8},
        "self_attention",
        _falcon_split,
    ),
    (
        "falcon_mha",
        "falcon",
        {"new_decoder_architecture": False, "multi_query": False, "num_attention_heads": 8},
        "self_attention",
        _falcon_split,
    ),
    ("phi3", "phi3", {"num_attention_heads": 8, "num_key_value_heads": 2}, "self_attn", _phi3_split),
    ("bigcode_mqa", "gpt_bigcode", {"multi_query": True, "num_attention_heads": 8}, "attn", _bigcode_split),
    ("bigcode_mha", "gpt_bigcode", {"multi_query": False, "num_attention_heads": 8}, "attn", _bigcode_split),
    ("gpt_neox", "gpt_neox", {"num_attention_heads": 8}, "attention", _neox_split),
    (
        "ergo",
        "ergo",
        {
            "num_attention_heads": 8,
            "num_key_value_heads": 2,
            "num_hidden_layers": 2,
            "layer_types": ["sliding_attention", "full_attention"],
            "mlp_layer_types": ["dense", "sparse"],
        },
        "self_attn",
        _ergo_split,
    ),
    ("codegen", "codegen", {"n_head": 8, "n_embd": 256, "rotary_dim": 16, "vocab_size": 128}, "attn", _codegen_split),
]


def _model(family, fields):
    import transformers

    from tinit.tools import hf_families

    if family == "codegen":  # not among tinit.tools.hf_families: its own config, built on the CPU
        return hf_families.build(transformers.CodeGenConfig(n_layer=2, **fields), device="cpu")
    if family == "ergo":  # not among tinit.tools.hf_families: its tiny class config, built on meta
        from tinit.tools import hf_classes

        name = "ErgoForCausalLM"
        return hf_classes.build(name, hf_classes.config_of(name, {**hf_classes.tiny_fields(name), **fields}))
    device = "cpu" if family == "gpt_bigcode" else "meta"  # its causal-mask buffer has no recipe on meta
    return hf_families.build(family, device=device, num_hidden_layers=2, **fields)


def _qkv(model, scope):
    for name, module in model.named_modules():
        if name.endswith(scope) and ".0." in f".{name}.":
            leaf = next(n for n in ("query_key_value", "qkv_proj", "c_attn") if hasattr(module, n))
            return f"{name}.{leaf}.weight", module
    raise AssertionError(scope)


@pytest.mark.parametrize("case", MODELS, ids=[c[0] for c in MODELS])
def test_parts_are_the_rows_the_model_reads(case):
    """mup(zero_query) zeroes exactly the rows the model's forward reads as q; deepnorm's beta
    lands exactly on the v rows (per-row std), for layouts read from each family's config."""
    _, family, fields, scope, split = case
    model = _model(family, fields)
    name, attn = _qkv(model, scope)
    out = model.get_parameter(name).shape[0]
    q_rows, k_rows, v_rows = (sorted({int(i) for i in t.flatten()}) for t in split(attn, torch.arange(out)))
    assert len(q_rows) + len(k_rows) + len(v_rows) == out
    device = None if family in ("gpt_bigcode", "codegen") else "cpu"
    tinit.init_model_(model, "mup", device=device, zero_query=True, only=r"\.0\..*(query_key_value|qkv_proj|c_attn)")
    weight = model.get_parameter(name).detach()
    assert weight[q_rows].abs().max() == 0
    assert (weight[k_rows] != 0).all() and (weight[v_rows] != 0).all()

    model = _model(family, fields)
    summary = tinit.init_model_(
        model, "deepnorm", device=device, trunc=math.inf, only=r"\.0\..*(query_key_value|qkv_proj|c_attn)"
    )
    weight = model.get_parameter(name).detach()
    d = weight.shape[1]
    _, beta = schemes.deepnorm_constants(2)
    expected = {
        "q": _torch_xavier_std((len(q_rows), d)),
        "k": _torch_xavier_std((len(k_rows), d)),
        "v": beta * _torch_xavier_std((len(v_rows), d)),
    }
    spec = next(e.spec for e in summary if e.name == name)
    assert [p.std for p in spec.parts] == pytest.approx([expected["q"], expected["k"], expected["v"]], rel=1e-12)
    for part, rows in (("q", q_rows), ("k", k_rows), ("v", v_rows)):
        realised = float(weight[rows].double().std())
        # >= 8192 samples a part: the sample std is within 4.5 % at 3 sigma; beta is 0.5
        assert realised == pytest.approx(expected[part], rel=0.045), part


def test_megatron_linear_qkv_groups():
    """Megatron-Core SelfAttention.get_query_key_value_tensors: mixed_qkv viewed as (ng, (np/ng + 2) * hn),
    split [np/ng * hn, hn, hn]; read from a TransformerConfig's num_query_groups and kv_channels."""
    config = type("TransformerConfig", (), {"num_attention_heads": 8, "num_query_groups": 2, "kv_channels": 16})()

    class SelfAttention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.config = config
            self.linear_qkv = torch.nn.Linear(128, (8 + 2 * 2) * 16)

    attn = SelfAttention()
    labels = torch.arange(attn.linear_qkv.weight.shape[0]).view(2, (8 // 2 + 2) * 16)
    q_rows, k_rows, v_rows = (t.flatten().tolist() for t in torch.split(labels, [8 // 2 * 16, 16, 16], dim=-1))
    tinit.init_model_(attn, "mup", zero_query=True)
    weight = attn.linear_qkv.weight.detach()
    assert weight[q_rows].abs().max() == 0
    assert (weight[k_rows] != 0).all() and (weight[v_rows] != 0).all()


def test_unknown_family_with_gqa_is_refused_by_name():
    config = {"model_type": "mystery", "num_attention_heads": 8, "num_key_value_heads": 2, "hidden_size": 64}
    with pytest.raises(ValueError, match="does not know how this family lays out"):
        fused_qkv_of_config(config)
    assert fused_qkv_of_config({**config, "num_key_value_heads": 8}) is None  # equal thirds
    # a tensor of 3 * h * head_dim (a vision tower's qkv under a GQA text config) has equal parts
    assert fused_qkv_of_config(config, width=3 * 64) is None
    with pytest.raises(ValueError, match="does not know"):
        fused_qkv_of_config(config, width=(8 + 2 * 2) * 8)

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.config = type("Config", (), config)()
            self.qkv = torch.nn.Linear(64, 96)

    with pytest.raises(ValueError, match=r"parameter qkv.weight.*overrides"):
        tinit.init_model_(Block(), "xavier_normal")
    block = Block()
    summary = tinit.init_model_(block, "xavier_normal", overrides={r"qkv\.weight": {"qkv": (8, 2, 8, "grouped")}})
    spec = next(e.spec for e in summary if e.name == "qkv.weight")
    assert spec.segments == FusedQKV.from_heads(8, 2, 8, "grouped").segments()


# --- experts: the fans of one expert --------------------------------------------------------------


@pytest.mark.parametrize(
    "layout, shape, one",
    [
        ("expert_out_in", (4, 64, 256), (64, 256)),
        ("expert_in_out", (4, 256, 64), (64, 256)),
        ("grouped_in_out", (256, 4 * 64), (64, 256)),
        ("stacked_in_out", (4 * 256, 64), (64, 256)),
        ("stacked_out_in", (4 * 64, 256), (64, 256)),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_expert_fans_are_one_experts(layout, shape, one):
    """Xavier and kaiming(fan_in) on an expert stack equal torch.nn.init's formula on one expert's
    (out, in) matrix (the issue's case: 0.011 with the receptive-field rule, 0.079 per expert)."""
    experts = 4 if layout in schemes.GROUPED_LAYOUTS else None
    xavier = schemes.get("xavier_normal").spec(shape=shape, layout=layout, experts=experts, trunc=math.inf)
    assert xavier.std == pytest.approx(_torch_xavier_std(one), rel=1e-12)
    assert xavier.std == pytest.approx(0.0790569, rel=1e-6)
    kaiming = schemes.get("kaiming_normal").spec(shape=shape, layout=layout, experts=experts)
    assert kaiming.std == pytest.approx(_torch_kaiming_std(one), rel=1e-12)
    if layout == "expert_out_in":
        assert _torch_xavier_std(shape) == pytest.approx(0.0107, abs=1e-4)  # the receptive-field rule


@pytest.mark.parametrize("layout", ["expert_out_in", "expert_in_out"])
def test_role_schemes_read_one_experts_fan_in(layout):
    """mitchell's down projection 1 / sqrt(d_ff * 2 (l + 1)) and fixup's He std (form="paper") use the fan_in of one
    expert (d_ff = F), not the receptive-field rule's F * d (the issue's 0.0055 vs 0.044 at l = 0)."""
    e, f, d = 8, 256, 1024
    shape = (e, d, f) if layout == "expert_out_in" else (e, f, d)
    one_fan_in, _ = torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(d, f, device="meta"))
    down = schemes.get("mitchell").spec(role="mlp_out", shape=shape, layout=layout, layer_idx=0, d_model=d)
    assert down.std == pytest.approx(1 / math.sqrt(2 * one_fan_in), rel=1e-12)
    assert down.std == pytest.approx(0.0442, abs=1e-4)
    up = (e, 2 * f, d) if layout == "expert_out_in" else (e, d, 2 * f)
    fixup = schemes.get("fixup").spec(role="mlp_in", shape=up, layout=layout, n_layers=4, form="paper")
    assert fixup.std == pytest.approx(math.sqrt(2) / math.sqrt(d) * 8**-0.5, rel=1e-12)


def test_grouped_layouts_need_the_expert_count():
    with pytest.raises(ValueError, match="needs experts="):
        schemes.get("xavier_normal").spec(shape=(256, 256), layout="grouped_in_out")
    with pytest.raises(ValueError, match="does not hold 3 experts"):
        schemes.get("xavier_normal").spec(shape=(256, 256), layout="grouped_in_out", experts=3)
    with pytest.raises(ValueError, match="stack"):
        schemes.get("xavier_normal").spec(shape=(256, 256), layout="expert_out_in")


def test_expert_realised_std_on_a_million_samples():
    weight = torch.empty(16, 256, 256)
    spec = schemes.get("xavier_normal").spec(shape=tuple(weight.shape), layout="expert_out_in", trunc=math.inf)
    write_spec_(weight, spec, seed=4, stream=1)
    assert float(weight.double().std()) == pytest.approx(_torch_xavier_std((256, 256)), rel=0.02)


MOE = [
    ("mixtral", "mixtral", "out_in"),
    ("qwen3_moe", "qwen3_moe", "out_in"),
    ("olmoe", "olmoe", "out_in"),
    ("deepseek_v3", "deepseek_v3", "out_in"),
    ("gpt_oss", "gpt_oss", "in_out"),
]


@pytest.mark.parametrize("case", MOE, ids=[c[0] for c in MOE])
def test_hf_experts_get_one_experts_fans(case):
    """kaiming(fan_in) on transformers 5's 3-D experts: the fan_in of one expert as the forward applies
    it (F.linear(x, W[e]): W[e] is (out, in); GPT-OSS x @ W[e]: W[e].T is), and mitchell's d_in."""
    from tinit.tools import hf_families

    _, family, orientation = case
    fields = {"first_k_dense_replace": 0} if family == "deepseek_v3" else {}
    model = hf_families.build(family, device="cpu", num_hidden_layers=2, **fields)  # DeepSeek's router buffer
    summary = tinit.init_model_(model, "kaiming_normal", only=r"experts\.(gate_up|down)_proj$")
    checked = 0
    for entry in summary:
        param = model.get_parameter(entry.name)
        if param.dim() != 3:
            continue
        one = param[0] if orientation == "out_in" else param[0].T
        assert entry.spec.std == pytest.approx(_torch_kaiming_std(tuple(one.shape)), rel=1e-12), entry.name
        checked += 1
    assert checked >= 2


def _dbrx():
    import transformers

    from tinit.tools import hf_families

    config = transformers.DbrxConfig(
        n_layers=2,
        d_model=128,
        n_heads=8,
        vocab_size=128,
        max_seq_len=64,
        attn_config={"kv_n_heads": 2, "rope_theta": 10000.0},
        ffn_config={"ffn_hidden_size": 96, "moe_num_experts": 4, "moe_top_k": 1},
    )
    return hf_families.build(config, device="cpu")


def test_dbrx_fused_qkv_and_stacked_experts():
    """DBRX: Wqkv split [d, kv*hd, kv*hd] (DbrxAttention.forward); experts w1/v1 (E*F, d) applied as
    x @ w1[e].T and w2 (E*F, d) as x @ w2[e] (DbrxExpertGLU.forward, each viewed as (E, F, d))."""
    model = _dbrx()
    attn = getattr(model, "transformer", model).blocks[0].norm_attn_norm.attn  # DbrxForCausalLM or DbrxModel
    kv = attn.num_key_value_heads * attn.head_dim
    labels = torch.arange(attn.Wqkv.weight.shape[0])
    q_rows, k_rows, v_rows = (t.tolist() for t in labels.split([attn.hidden_size, kv, kv]))
    tinit.init_model_(model, "mup", zero_query=True, only=r"blocks\.0\..*Wqkv")
    weight = attn.Wqkv.weight.detach()
    assert weight[q_rows].abs().max() == 0
    assert (weight[k_rows] != 0).all() and (weight[v_rows] != 0).all()
    summary = tinit.init_model_(_dbrx(), "kaiming_normal", only=r"experts")
    stds = {e.name.rpartition(".")[2]: e.spec.std for e in summary if ".0." in e.name}
    experts, ffn, d = 4, 96, 128
    one = torch.empty(experts * ffn, d).view(experts, ffn, d)[0]
    assert stds["w1"] == pytest.approx(_torch_kaiming_std(tuple(one.shape)), rel=1e-12)
    assert stds["v1"] == pytest.approx(_torch_kaiming_std(tuple(one.shape)), rel=1e-12)
    assert stds["w2"] == pytest.approx(_torch_kaiming_std(tuple(one.T.shape)), rel=1e-12)


def test_torchtitan_grouped_experts():
    """torchtitan 0.3 GroupedExperts w1_EFD (E, F, D) etc., applied as x @ w.transpose(-2, -1)."""
    moe = pytest.importorskip("torchtitan.models.common.moe")

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.experts = moe.GroupedExperts(moe.GroupedExperts.Config(dim=64, hidden_dim=96, num_experts=4))

    with torch.device("meta"):
        layer = Layer()
    summary = tinit.init_model_(layer, "kaiming_normal", device="cpu")
    stds = {e.name: e.spec.std for e in summary}
    assert stds["experts.w1_EFD"] == pytest.approx(_torch_kaiming_std((96, 64)))
    assert stds["experts.w2_EDF"] == pytest.approx(_torch_kaiming_std((64, 96)))


def test_expert_layout_of_grouped_2d_modules():
    """Megatron-Core GroupedMLP (weight1 (d, E*F) viewed as (E, d, F), weight2 (E*F, d) as (E, F, d), both
    multiplied untransposed) and DBRX's experts (w1 (E*F, d) as x @ w1[e].T, w2 as x @ w2[e])."""
    GroupedMLP = type("GroupedMLP", (torch.nn.Module,), {})
    module = GroupedMLP()
    module.num_local_experts = 4
    assert expert_layout(module, "weight1", 2) == ("grouped_in_out", 4)
    assert expert_layout(module, "weight2", 2) == ("stacked_in_out", 4)
    DbrxExpertGLU = type("DbrxExpertGLU", (torch.nn.Module,), {})
    dbrx = DbrxExpertGLU()
    dbrx.moe_num_experts = 4
    assert expert_layout(dbrx, "w1", 2) == ("stacked_out_in", 4)
    assert expert_layout(dbrx, "w2", 2) == ("stacked_in_out", 4)
    assert expert_layout(torch.nn.Linear(2, 2), "weight", 2) is None


# Fused gate+up projections: which rows are the gate's, by each model's own forward.
def _mixtral_split(weight):  # MixtralExperts.forward: F.linear(x, gate_up_proj[e]).chunk(2, dim=-1)
    return weight.chunk(2, dim=1)


def _phi3_split(weight):  # Phi3MLP.forward: self.gate_up_proj(x).chunk(2, dim=-1)
    return weight.chunk(2, dim=0)


def _gpt_oss_split(weight):  # GptOssExperts._apply_gate: gate_up[..., ::2], gate_up[..., 1::2]
    return weight[..., ::2], weight[..., 1::2]


@pytest.mark.parametrize(
    ("family", "pattern", "split"),
    [
        ("mixtral", r"layers\.3\.mlp\.experts\.gate_up_proj$", _mixtral_split),
        ("phi3", r"layers\.3\.mlp\.gate_up_proj\.weight$", _phi3_split),
        ("gpt_oss", r"layers\.3\.mlp\.experts\.gate_up_proj$", _gpt_oss_split),
    ],
)
def test_fused_gate_up_parts_follow_the_models_split(family, pattern, split):
    """depth_init scales the up projection (torchtitan's w3) and not the gate: on a fused gate_up
    the rows the model's forward reads as up get 0.02 / sqrt(2 (l + 1)), the gate's 0.02, as a
    Llama with separate gate_proj / up_proj gets them."""
    pytest.importorskip("transformers")
    from tinit.tools import hf_families

    model = hf_families.build(family)
    summary = tinit.init_model_(model, "depth_init", device="cpu")
    (name,) = [e.name for e in summary if re.search(pattern, e.name)]
    gate, up = split(model.get_parameter(name).detach())
    assert gate.shape == up.shape
    for part, std in ((gate, 0.02), (up, 0.02 / math.sqrt(2 * 4))):
        n = part.numel()
        assert part.double().std().item() == pytest.approx(std, rel=6 / math.sqrt(n)), (name, std)


def test_fused_gate_up_fans_are_one_part_s():
    """Xavier on Phi-3's fused gate_up (2F, d) gives each half the std of a separate (F, d) matrix
    (torch.nn.init's formula on one half), as Llama's gate_proj and up_proj get."""
    for role, shape in (("mlp_gate_up", (1024, 256)), ("mlp_in", (512, 256))):
        spec = schemes.get("xavier_normal").spec(role=role, shape=shape)
        assert spec.parts is None
        fan_in, fan_out = torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(512, 256))
        assert spec.std == pytest.approx(math.sqrt(2.0 / (fan_in + fan_out)), rel=1e-12)


def test_fused_gate_up_segments_interleave():
    """gate_up="interleaved": alternating one-row segments along the output dim, gate first."""
    spec = schemes.get("depth_init").spec(
        role="mlp_gate_up", shape=(2, 8, 6), layout="expert_in_out", layer_idx=1, n_layers=2, gate_up="interleaved"
    )
    assert spec.split_dim == 2 and spec.segments == tuple((i % 2, 1) for i in range(6))
    assert [p.std for p in spec.parts] == [0.02, pytest.approx(0.02 / 2)]
    with pytest.raises(ValueError, match="gate_up must be one of"):
        schemes.get("normal").spec(role="mlp_gate_up", shape=(4, 2), gate_up="alternate")
