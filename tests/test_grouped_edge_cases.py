"""Edge cases of the grouped fill (tinit.grouped.write_grouped_) and of init_model_'s module walk.

Contract checked here: ``init_model_`` / ``write_grouped_`` give, bit for
bit, what writing each tensor alone with ``write_spec_`` gives; bad input
raises before any tensor is written; roles, layers and ties are those the
module tree implies (ParameterList/ParameterDict leaves, shared submodules,
None parameters, overridden ``named_modules``, ``prefix=``).
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import pytest
import torch
from torch import nn

import tinit
from tinit import grouped, schemes
from tinit.fill import write_spec_
from tinit.grouped import FillItem, write_grouped_
from tinit.model_init import stream_for

S = schemes.InitSpec
INT_VIEW = {
    torch.float32: torch.int32,
    torch.float64: torch.int64,
    torch.bfloat16: torch.int16,
    torch.float16: torch.int16,
}
SEED = 0xC0FFEE


def _bits(t: torch.Tensor) -> torch.Tensor:
    t = t.detach()
    return t.contiguous().view(INT_VIEW[t.dtype]) if t.dtype in INT_VIEW else t.clone()


def _assert_same_bits(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.shape, want.shape, got.dtype, want.dtype)
    bad = torch.nonzero((_bits(got) != _bits(want)).reshape(-1)).flatten()
    assert bad.numel() == 0, (
        f"{what}: {bad.numel()} of {got.numel()} values differ in bits; first at flat index {int(bad[0])}: "
        f"got {float(got.reshape(-1)[bad[0]])!r}, expected {float(want.reshape(-1)[bad[0]])!r}"
    )


def _snapshot(model: nn.Module) -> dict[str, torch.Tensor]:
    return {n: _bits(p).clone() for n, p in model.named_parameters(remove_duplicate=False)}


def _assert_unchanged(model: nn.Module, before: dict[str, torch.Tensor]) -> None:
    for name, param in model.named_parameters(remove_duplicate=False):
        assert torch.equal(_bits(param), before[name]), f"{name} was written by a call that raised"


def _assert_matches_write_spec(model: nn.Module, summary, seed: int) -> None:
    """Every summary entry holds exactly what write_spec_ writes into a fresh copy from its name's stream."""
    for entry in summary:
        param = model.get_parameter(entry.name)
        want = write_spec_(torch.full_like(param.detach(), 7.0), entry.spec, seed=seed, stream=stream_for(entry.name))
        _assert_same_bits(param, want, entry.name)


def _prefilled(model: nn.Module, value: float = 7.0) -> nn.Module:
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(value)
    return model


# --- models ------------------------------------------------------------------


class ParamContainers(nn.Module):
    """ParameterList / ParameterDict leaves (names ending in digits), at the top and inside blocks."""

    def __init__(self):
        super().__init__()
        self.h = nn.ParameterList([nn.Parameter(torch.empty(8, 8)) for _ in range(3)])
        self.blocks = nn.ModuleList([nn.Module() for _ in range(2)])
        for block in self.blocks:
            block.attn = nn.Module()
            block.attn.q = nn.ParameterList([nn.Parameter(torch.empty(4, 8)), nn.Parameter(torch.empty(4, 8))])
            block.attn.c_proj = nn.ParameterDict(
                {"weight": nn.Parameter(torch.empty(8, 8)), "12": nn.Parameter(torch.empty(8, 8))}
            )
        self.layers = nn.ParameterDict(
            {"0": nn.Parameter(torch.empty(8, 8)), "resweight": nn.Parameter(torch.empty(1))}
        )
        self.norm = nn.LayerNorm(8)


PARAM_CONTAINER_ENTRIES = [  # (name, role, layer), what aef9101 gave
    ("h.0", None, 0),
    ("h.1", None, 1),
    ("h.2", None, 2),
    ("blocks.0.attn.q.0", None, 0),
    ("blocks.0.attn.q.1", None, 0),
    ("blocks.0.attn.c_proj.weight", "attn_out", 0),
    ("blocks.0.attn.c_proj.12", None, 0),
    ("blocks.1.attn.q.0", None, 1),
    ("blocks.1.attn.q.1", None, 1),
    ("blocks.1.attn.c_proj.weight", "attn_out", 1),
    ("blocks.1.attn.c_proj.12", None, 1),
    ("layers.0", None, 0),
    ("layers.resweight", "residual_gate", None),
    ("norm.weight", "norm", None),
    ("norm.bias", "bias", None),
]


class SharedModules(nn.Module):
    """One Linear under three names (two roles, two blocks), a LayerNorm under two, a None bias."""

    def __init__(self):
        super().__init__()
        linear = nn.Linear(8, 8)
        self.h = nn.ModuleList([nn.Module() for _ in range(3)])
        self.h[0].mlp = nn.Module()
        self.h[0].mlp.c_fc = linear
        self.h[1].ln_1 = nn.LayerNorm(8)
        self.h[1].mlp = nn.Module()
        self.h[1].mlp.c_proj = nn.Linear(8, 8)
        self.h[1].mlp.c_proj.bias = None
        self.h[2].attn = nn.Module()
        self.h[2].attn.c_proj = linear
        self.extra = linear
        self.ln_f = self.h[1].ln_1


class MixedDtypes(nn.Module):
    """fp32/fp64/bf16/fp16 weights, dim-0 fused qkv Linears, constants, one model."""

    def __init__(self, n_layers=2):
        super().__init__()
        dtypes = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
        self.wte = nn.Embedding(16, 12)
        self.h = nn.ModuleList([nn.Module() for _ in range(n_layers)])
        for i, block in enumerate(self.h):
            block.ln_1 = nn.LayerNorm(12).to(dtypes[(i + 2) % 4])
            block.attn = nn.Module()
            block.attn.qkv = nn.Linear(12, 36).to(dtypes[i % 4])
            block.attn.c_proj = nn.Linear(12, 12).to(dtypes[(i + 1) % 4])
            block.mlp = nn.Module()
            block.mlp.c_fc = nn.Linear(12, 24).to(dtypes[(i + 3) % 4])
            block.mlp.c_proj = nn.Linear(24, 12)
        self.ln_f = nn.LayerNorm(12).double()
        self.lm_head = nn.Linear(12, 16, bias=False).half()


class _HidesSecond(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """Only ``a`` is part of this module as far as named_modules/named_parameters go."""
        yield prefix, self
        yield (f"{prefix}." if prefix else "") + "a", self.a


class RootHides(_HidesSecond):
    pass


class ChildHides(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = _HidesSecond()
        self.h = nn.ModuleList([nn.Linear(4, 4)])


# --- init_model_: module walk ------------------------------------------------


@pytest.mark.parametrize("grouped_fill", [True, False], ids=["grouped", "one-by-one"])
def test_parameter_list_and_dict_leaves(grouped_fill):
    """Digit leaves get their layer from the whole name; values are write_spec_'s."""
    model = _prefilled(ParamContainers())
    with pytest.raises(ValueError, match=r"h\.0, h\.1, h\.2"):  # unclassified raw parameters: refused
        tinit.init_model_(model, "normal", seed=SEED, grouped=grouped_fill)
    summary = tinit.init_model_(model, "normal", seed=SEED, grouped=grouped_fill, unclassified="mlp_in")
    expected = [(name, role or "mlp_in", layer) for name, role, layer in PARAM_CONTAINER_ENTRIES]
    assert sorted((e.name, e.role, e.layer) for e in summary) == sorted(expected)
    assert [e.name for e in summary] == [n for n, _ in model.named_parameters()]
    _assert_matches_write_spec(model, summary, SEED)


@pytest.mark.parametrize("grouped_fill", [True, False], ids=["grouped", "one-by-one"])
def test_shared_submodules_and_none_parameters(grouped_fill):
    """A module under several names: written once under the first name (its role and layer), the
    others listed as ties; a None parameter is skipped."""
    model = _prefilled(SharedModules())
    summary = tinit.init_model_(model, "gpt2", seed=SEED, grouped=grouped_fill, d_model=8, n_layers=3)
    got = [(e.name, e.role, e.layer, e.tied) for e in summary]
    assert got == [
        ("h.0.mlp.c_fc.weight", "mlp_in", 0, ("h.2.attn.c_proj.weight", "extra.weight")),
        ("h.0.mlp.c_fc.bias", "bias", 0, ("h.2.attn.c_proj.bias", "extra.bias")),
        ("h.1.ln_1.weight", "norm", 1, ("ln_f.weight",)),
        ("h.1.ln_1.bias", "bias", 1, ("ln_f.bias",)),
        ("h.1.mlp.c_proj.weight", "mlp_out", 1, ()),
    ]
    _assert_matches_write_spec(model, summary, SEED)
    only_alias = tinit.init_model_(
        _prefilled(SharedModules()), "gpt2", seed=SEED, d_model=8, n_layers=3, only=r"^extra\.weight$"
    )
    assert [e.name for e in only_alias] == ["h.0.mlp.c_fc.weight"], "only= matching a tied alias"


def test_root_module_overriding_named_modules_is_respected():
    model = _prefilled(RootHides())
    with torch.no_grad():
        model.b.weight.fill_(7.0)  # not reached by model.parameters()
    summary = tinit.init_model_(model, "normal", seed=SEED)
    assert [e.name for e in summary] == ["a.weight", "a.bias"] == [n for n, _ in model.named_parameters()]
    torch.testing.assert_close(
        model.b.weight.detach(),
        torch.full((4, 4), 7.0),
        rtol=0,
        atol=0,
        msg="a parameter named_modules hides was written",
    )


def test_child_module_overriding_named_modules_is_respected():
    model = _prefilled(ChildHides())
    with torch.no_grad():
        model.inner.b.weight.fill_(7.0)  # not reached by model.parameters()
    summary = tinit.init_model_(model, "normal", seed=SEED)
    listed = [n for n, _ in model.named_parameters()]
    assert listed == ["inner.a.weight", "inner.a.bias", "h.0.weight", "h.0.bias"]
    assert [e.name for e in summary] == listed, "summary differs from named_parameters"
    torch.testing.assert_close(
        model.inner.b.weight.detach(),
        torch.full((4, 4), 7.0),
        rtol=0,
        atol=0,
        msg="inner.b.weight (hidden by inner's named_modules) was written",
    )


@pytest.mark.parametrize(
    ("prefix", "layer"),
    [
        pytest.param("model.layers.3.", 3, id="dotted"),
        pytest.param("blocks.12.", 12, id="dotted-two-digits"),
        pytest.param("h.3", None, id="undotted-one-digit"),
        pytest.param("model.layers.33", None, id="undotted-two-digits"),
    ],
)
def test_prefix_layer_of_root_parameters(prefix, layer):
    """The layer of a root-level parameter is infer_layer(prefix + leaf), as in aef9101."""
    summary = tinit.init_model_(nn.Linear(4, 4), "normal", seed=SEED, prefix=prefix, n_layers=50)
    assert [(e.name, e.layer) for e in summary] == [(prefix + "weight", layer), (prefix + "bias", layer)]


def test_overrides_layer_role_and_options_reach_the_values():
    model = _prefilled(MixedDtypes(n_layers=3))
    overrides = {
        r"h\.2\.mlp\.c_proj": {"role": "attn_out", "layer": 0, "options": {"std": 0.5}},
        r"^wte": {"role": "head", "options": {"trunc": 3.0}},
    }
    # d_model for the head's d^-1/2 (the overridden wte leaves no embedding to read it from)
    summary = tinit.init_model_(model, "depth_init", seed=SEED, overrides=overrides, d_model=12)
    by_name = {e.name: e for e in summary}
    entry = by_name["h.2.mlp.c_proj.weight"]
    assert (entry.role, entry.layer) == ("attn_out", 0)
    plain = by_name["h.0.attn.c_proj.weight"]  # depth_init, layer 0: std / sqrt(2 (0 + 1))
    assert entry.std == pytest.approx(plain.std / 0.02 * 0.5)
    assert (by_name["wte.weight"].role, by_name["wte.weight"].trunc) == ("head", 3.0)
    _assert_matches_write_spec(model, summary, SEED)


@pytest.mark.parametrize("base", ["depth_init", "mitchell"])
def test_rezero_with_a_depth_dependent_base(base):
    model = MixedDtypes(n_layers=3)
    for block in model.h:
        block.resweight = nn.Parameter(torch.ones(1))
    summary = tinit.init_model_(model, "rezero", seed=SEED, base=base)
    rezero = schemes.get("rezero")
    for entry in summary:
        if entry.name.endswith("attn.c_proj.weight"):
            want = rezero.spec(
                role=entry.role,
                layer_idx=entry.layer,
                n_layers=3,
                d_model=12,
                base=base,
                shape=tuple(model.get_parameter(entry.name).shape),
            )
            assert entry.std == pytest.approx(want.std), f"{entry.name} (layer {entry.layer})"


# --- init_model_: values -----------------------------------------------------


@pytest.mark.parametrize(
    "scheme", ["normal", "gpt2", "mitchell", "depth_init", "deepnorm", "xavier_uniform", "fixup", "rezero"]
)
def test_mixed_dtype_model_grouped_equals_one_by_one_and_write_spec(scheme):
    """Every dtype in one model, dim-0 fused parts (deepnorm qkv), uniforms, zero constants (fixup):
    grouped, grouped=False and write_spec_ per parameter agree bit for bit."""
    a, b = _prefilled(MixedDtypes(n_layers=3)), _prefilled(MixedDtypes(n_layers=3))
    if scheme == "rezero":
        for model in (a, b):
            for block in model.h:
                block.resweight = nn.Parameter(torch.full((1,), 7.0))
    summary = tinit.init_model_(a, scheme, seed=SEED)
    tinit.init_model_(b, scheme, seed=SEED, grouped=False)
    for (name, p), q in zip(a.named_parameters(), b.parameters(), strict=True):
        _assert_same_bits(p, q, f"{scheme}: grouped vs grouped=False at {name}")
    _assert_matches_write_spec(a, summary, SEED)
    assert {p.dtype for p in a.parameters()} == set(INT_VIEW)


def test_hf_gpt2_conv1d_dim1_parts_tie_and_bf16():
    """HF GPT-2 (Conv1D c_attn: deepnorm parts along dim 1, lm_head tied to wte) in bf16."""
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(
        n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=16, bos_token_id=0, eos_token_id=0
    )
    model = _prefilled(transformers.GPT2LMHeadModel(config).to(torch.bfloat16))
    summary = tinit.init_model_(model, "deepnorm", seed=SEED)
    qkv = next(e for e in summary if e.name == "transformer.h.1.attn.c_attn.weight")
    assert qkv.spec.parts is not None and qkv.spec.split_dim == 1
    assert model.lm_head.weight is model.transformer.wte.weight
    assert "lm_head.weight" in next(e for e in summary if e.name == "transformer.wte.weight").tied
    _assert_matches_write_spec(model, summary, SEED)


@pytest.mark.filterwarnings("ignore:Initializing zero-element tensors:UserWarning")
def test_non_contiguous_shared_storage_and_empty_parameters():
    """A Parameter from a transposed tensor, two Parameters on one storage (later overwrites earlier, with a
    warning), and 0-element parameters, in one model."""
    model = nn.Module()
    model.h = nn.ModuleList([nn.Module() for _ in range(2)])
    storage = torch.full((6, 6), 7.0)
    model.h[0].mlp = nn.Module()
    model.h[0].mlp.c_fc = nn.Linear(6, 10)
    model.h[0].mlp.c_fc.weight = nn.Parameter(torch.full((6, 10), 7.0).t())
    model.h[0].mlp.c_proj = nn.Linear(6, 6)
    model.h[0].mlp.c_proj.weight = nn.Parameter(storage)
    model.h[1].mlp = nn.Module()
    model.h[1].mlp.c_proj = nn.Linear(6, 6)
    model.h[1].mlp.c_proj.weight = nn.Parameter(storage)  # same memory, another Parameter
    model.h[1].mlp.c_fc = nn.Linear(6, 0)
    assert not model.h[0].mlp.c_fc.weight.is_contiguous()
    with pytest.warns(RuntimeWarning, match="share memory"):
        summary = tinit.init_model_(model, "gpt2", seed=SEED, d_model=6)
    assert [e.numel for e in summary if e.name.startswith("h.1.mlp.c_fc")] == [0, 0]
    for entry in summary:
        if entry.name != "h.0.mlp.c_proj.weight":  # overwritten by h.1's, as written one by one
            param = model.get_parameter(entry.name)
            want = write_spec_(torch.empty_like(param.detach()), entry.spec, seed=SEED, stream=stream_for(entry.name))
            _assert_same_bits(param, want, entry.name)
    last = next(e for e in summary if e.name == "h.1.mlp.c_proj.weight")
    _assert_same_bits(
        storage,
        write_spec_(torch.empty(6, 6), last.spec, seed=SEED, stream=stream_for(last.name)),
        "shared storage holds the later parameter's values",
    )


def test_meta_model_with_device_equals_materialised_model():
    model = MixedDtypes(n_layers=2)
    with torch.device("meta"):
        meta = MixedDtypes(n_layers=2)
    meta.lm_head.weight = meta.wte.weight = nn.Parameter(torch.empty(16, 12, device="meta"))
    model.lm_head.weight = model.wte.weight = nn.Parameter(torch.empty(16, 12))
    want = tinit.init_model_(model, "modern", seed=SEED)
    got = tinit.init_model_(meta, "modern", seed=SEED, device="cpu")
    assert meta.lm_head.weight is meta.wte.weight
    assert [(e.name, e.role, e.layer, e.tied) for e in got] == [(e.name, e.role, e.layer, e.tied) for e in want]
    for (name, p), q in zip(meta.named_parameters(), model.parameters(), strict=True):
        _assert_same_bits(p, q, name)


# --- init_model_: refusals before writing ------------------------------------


@pytest.mark.parametrize("dtype", [torch.int32, torch.complex64, torch.uint8], ids=["int32", "complex64", "uint8"])
@pytest.mark.parametrize("grouped_fill", [True, False], ids=["grouped", "one-by-one"])
def test_unsupported_dtype_last_writes_nothing(dtype, grouped_fill):
    model = _prefilled(MixedDtypes(n_layers=2))
    model.register_parameter("zz_last", nn.Parameter(torch.zeros(3, 3, dtype=dtype), requires_grad=False))
    before = _snapshot(model)
    with pytest.raises(TypeError, match="dtype"):
        tinit.init_model_(model, "normal", seed=SEED, grouped=grouped_fill, overrides={"^zz_": "mlp_in"})
    _assert_unchanged(model, before)


@pytest.mark.parametrize(
    ("seed", "error"),
    [(True, TypeError), (-1, ValueError), (2**64, ValueError), (1.0, TypeError), (None, TypeError)],
    ids=["bool", "negative", "2**64", "float", "none"],
)
def test_bad_seed_writes_nothing(seed, error):
    model = _prefilled(MixedDtypes(n_layers=2))
    before = _snapshot(model)
    with pytest.raises(error, match="seed"):
        tinit.init_model_(model, "normal", seed=seed)
    _assert_unchanged(model, before)


def test_bad_spec_for_the_last_parameter_writes_nothing():
    """A scheme error at the last parameter (kaiming_normal on a 1-D weight) writes nothing."""
    model = _prefilled(MixedDtypes(n_layers=2))
    model.register_parameter("zz_proj_weight", nn.Parameter(torch.full((4,), 7.0)))
    before = _snapshot(model)
    with pytest.raises(ValueError, match="2 dims"):
        tinit.init_model_(model, "kaiming_normal", seed=SEED, overrides={"^zz_": "mlp_in"})
    _assert_unchanged(model, before)


def test_refused_meta_model_stays_on_meta():
    with torch.device("meta"):
        model = MixedDtypes(n_layers=2)
    with pytest.raises(ValueError, match="residual_gate"):
        tinit.init_model_(model, "rezero", seed=SEED, device="cpu")
    assert all(p.is_meta for p in model.parameters()), "a refused call materialised the model"


# --- write_grouped_ directly -------------------------------------------------


def _on_one_storage(views) -> list[FillItem]:
    """Two items on views of one (10, 10) tensor: a normal, then a uniform."""
    first, second = views(torch.full((10, 10), 7.0))
    return [
        FillItem(first, S(std=1.0), 1),
        FillItem(second, S(std=0.5, trunc=math.sqrt(3.0), distribution="uniform"), 2),
    ]


QKV = S(parts=(S(std=0.5), S(constant=0.0), S(std=2.0, trunc=3.0)))
UNIFORM = S(std=0.1, trunc=math.sqrt(3.0), distribution="uniform")
CASES = {
    "constant-0.5-bf16": lambda: [FillItem(torch.full((5, 3), 7.0, dtype=torch.bfloat16), S(constant=0.5), 1)],
    "constant-third-mixed": lambda: [
        FillItem(torch.full((4,), 7.0, dtype=d), S(constant=1 / 3), i) for i, d in enumerate(INT_VIEW)
    ],
    "zeros-non-contiguous-mixed": lambda: [
        FillItem(torch.full((4, 6), 7.0, dtype=d)[:, ::2], S(constant=0.0), i) for i, d in enumerate(INT_VIEW)
    ],
    "transposed-normal": lambda: [FillItem(nn.Parameter(torch.full((6, 5), 7.0).t()), S(std=0.1), 3, 7)],
    "transposed-uniform": lambda: [FillItem(nn.Parameter(torch.full((6, 5), 7.0).t()), UNIFORM, 3, 7)],
    "parts-dim0-strided": lambda: [FillItem(torch.full((9, 30), 7.0).t(), QKV, 3, 5)],
    "parts-dim1": lambda: [
        FillItem(torch.full((5, 9), 7.0, dtype=torch.float16), dataclasses.replace(QKV, split_dim=1), 3, 7)
    ],
    "parts-dim1-strided": lambda: [FillItem(torch.full((9, 5), 7.0).t(), dataclasses.replace(QKV, split_dim=1), 3)],
    "empty-and-meta": lambda: [
        FillItem(torch.empty(0, 6), QKV, 3),
        FillItem(torch.empty(0), S(std=1.0), 1),
        FillItem(torch.empty(6, 4, device="meta"), QKV, 2),
        FillItem(torch.full((3,), 7.0), S(std=1.0), 4),
    ],
    "overlapping-slices": lambda: _on_one_storage(lambda base: (nn.Parameter(base[:5]), nn.Parameter(base[3:]))),
    "interleaved-views": lambda: _on_one_storage(lambda base: (base[:, ::2], base[:, 1::2])),
    "extreme-ids": lambda: [
        FillItem(torch.full((9,), 7.0), S(std=1.0), 2**64 - 1, 2**63 - 9),
        FillItem(torch.full((9,), 7.0, dtype=torch.bfloat16), S(std=1.0), 2**63, 0),
    ],
    "neg-zero-constant": lambda: [FillItem(torch.full((4,), 7.0), S(constant=-0.0), 0)],
}


def _run_both(make, seed=SEED, **kwargs):
    """(grouped items, the same items written one by one with write_spec_)."""
    items = make()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # shared memory: written in order
        write_grouped_(items, seed=seed, **kwargs)
    alone = make()
    for item in alone:
        write_spec_(item.tensor, item.spec, seed=seed, stream=item.stream, offset=item.offset, **kwargs)
    return items, alone


def _params(cases: dict) -> list:
    """pytest.param per case, id = its key; a case given as pytest.param(...) keeps its marks."""
    return [
        pytest.param(*case.values, marks=case.marks, id=key)
        if hasattr(case, "marks")
        else pytest.param(*(case if isinstance(case, tuple) else (case,)), id=key)
        for key, case in cases.items()
    ]


@pytest.mark.parametrize("make", _params(CASES))
def test_write_grouped_equals_write_spec(make):
    items, alone = _run_both(make)
    for i, (got, want) in enumerate(zip(items, alone)):
        if not got.tensor.is_meta:
            _assert_same_bits(got.tensor, want.tensor, f"item {i} {tuple(got.tensor.shape)} {got.tensor.dtype}")


def test_zero_element_parts_with_a_non_dividing_dim_are_checked():
    """aef9101 and write_spec_ check the split of an empty fused tensor too."""
    tensor = torch.full((3,), 7.0)
    with pytest.raises(ValueError, match="does not split"):
        write_grouped_(
            [FillItem(tensor, S(std=1.0), 1), FillItem(torch.empty(0, 4), dataclasses.replace(QKV, split_dim=1), 2)],
            seed=SEED,
        )
    assert torch.equal(tensor, torch.full((3,), 7.0))


def _bad_last(last):
    return lambda: [
        FillItem(torch.full((4,), 7.0), S(std=1.0), 1),
        FillItem(torch.full((4,), 7.0), S(constant=0.0), 2),
        FillItem(torch.full((2, 4), 7.0, dtype=torch.bfloat16), S(constant=2.0), 3),
        FillItem(torch.full((6, 4), 7.0), QKV, 4),
        FillItem(torch.full((5,), 7.0), UNIFORM, 5),
        last(),
    ]


BAD_LAST = {
    "int32": (lambda: FillItem(torch.zeros(3, dtype=torch.int32), S(constant=0.0), 6), TypeError, "int32"),
    "complex64": (lambda: FillItem(torch.zeros(3, dtype=torch.complex64), S(std=1.0), 6), TypeError, "complex64"),
    "stream-2**64": (lambda: FillItem(torch.zeros(3), S(std=1.0), 2**64), ValueError, "stream"),
    "stream-bool": (lambda: FillItem(torch.zeros(3), S(std=1.0), True), TypeError, "stream"),
    "offset-past-2**63": (lambda: FillItem(torch.zeros(3), S(std=1.0), 6, 2**63 - 2), ValueError, "offset"),
    "bad-split": (lambda: FillItem(torch.zeros(4, 5), dataclasses.replace(QKV, split_dim=1), 6), ValueError, "split"),
    "uniform-bad-std": (lambda: FillItem(torch.zeros(3), dataclasses.replace(UNIFORM, std=-1.0), 6), ValueError, "std"),
    "inf-std": (lambda: FillItem(torch.zeros(3), S(std=math.inf), 6), ValueError, "std"),
    "fp16-unrepresentable-constant": (
        lambda: FillItem(torch.zeros(3, dtype=torch.float16), S(constant=1e10), 6),
        ValueError,
        "float16",
    ),
    "nan-constant": (lambda: FillItem(torch.zeros(3), S(constant=math.nan), 6), ValueError, "finite"),
    "short-tuple": (lambda: (torch.zeros(3),), TypeError, "spec"),
}


@pytest.mark.parametrize("sequential", [False, True], ids=["grouped", "sequential"])
@pytest.mark.parametrize(("make_last", "error", "match"), _params(BAD_LAST))
def test_bad_last_item_writes_nothing(make_last, error, match, sequential):
    items = _bad_last(make_last)()
    before = [_bits(i[0]).clone() for i in items]
    with pytest.raises(error, match=match):
        write_grouped_(items, seed=SEED, sequential=sequential)
    for i, (item, old) in enumerate(zip(items, before)):
        assert torch.equal(_bits(item[0]), old), f"item {i} ({item[0].dtype}) was written by a call that raised"


def test_plain_tuples_are_taken_as_fill_items():
    """(tensor, spec, stream[, offset]) tuples give what FillItems give."""
    tuples = [t for t in (_bad_last(lambda: (torch.full((7,), 7.0), UNIFORM, 6, 3))())]
    tuples = [tuple(t) for t in tuples]
    items = [FillItem(torch.full_like(t[0], 7.0), *t[1:]) for t in tuples]
    write_grouped_(tuples, seed=SEED)
    write_grouped_(items, seed=SEED)
    for i, (got, want) in enumerate(zip(tuples, items)):
        _assert_same_bits(got[0], want.tensor, f"item {i}")


# --- uniforms in low precision ----------------------------------------------


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "f16"])
def test_xavier_uniform_stays_inside_its_bounds(dtype):
    model = nn.Linear(768, 768, bias=False).to(dtype)
    (entry,) = tinit.init_model_(model, "xavier_uniform", seed=1)
    low, high = entry.bounds
    values = model.weight.detach().double()
    outside = int(((values < low) | (values > high)).sum())
    assert outside == 0, f"{outside} values outside [{low!r}, {high!r}]; max {values.max().item()!r}"


# --- Triton backend in the interpreter ----------------------------------------


@pytest.fixture
def triton_interpreter(triton_interpreter, monkeypatch):
    """The session's Triton interpreter (skips without it), with tables limited to 40 elements."""
    monkeypatch.setattr(grouped, "GPU_TABLE_MAX_NUMEL", 40)


class _SmallMixed(nn.Module):
    """bf16/fp16/fp32 only (Triton has no fp64): fused dim-0 parts, tensors on both sides of the table limit."""

    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(10, 6).to(torch.bfloat16)
        self.h = nn.ModuleList([nn.Module() for _ in range(2)])
        for i, block in enumerate(self.h):
            block.ln_1 = nn.LayerNorm(6).half()
            block.attn = nn.Module()
            block.attn.qkv = nn.Linear(6, 18).to([torch.float32, torch.float16][i])
            block.attn.c_proj = nn.Linear(6, 6).to([torch.bfloat16, torch.float32][i])
        self.lm_head = nn.Linear(6, 10, bias=False)


@pytest.mark.parametrize("scheme", ["deepnorm", "xavier_uniform", "mitchell"])
def test_triton_backend_equals_cpu_backend(triton_interpreter, scheme):
    a, b = _prefilled(_SmallMixed()), _prefilled(_SmallMixed())
    want = tinit.init_model_(a, scheme, seed=SEED, backend="cpu")
    got = tinit.init_model_(b, scheme, seed=SEED, backend="triton")
    assert [(e.name, e.spec) for e in got] == [(e.name, e.spec) for e in want]
    for (name, p), q in zip(b.named_parameters(), a.parameters(), strict=True):
        _assert_same_bits(p, q, f"triton vs cpu at {name}")


def test_triton_backend_refuses_fp64_last_before_writing(triton_interpreter):
    model = _prefilled(_SmallMixed())
    model.register_parameter("zz_gate", nn.Parameter(torch.full((3, 3), 7.0, dtype=torch.float64)))
    before = _snapshot(model)
    with pytest.raises(RuntimeError, match="triton"):
        tinit.init_model_(model, "normal", seed=SEED, backend="triton", overrides={"^zz_": "mlp_in"})
    _assert_unchanged(model, before)


# --- refusals found by review ----------------------------------------------


def test_inference_tensors_are_refused_before_anything_is_written():
    """Parameters made under torch.inference_mode cannot be written outside it: refused up front,
    not after the zeros were written."""
    with torch.inference_mode():
        model = MixedDtypes(n_layers=2)
    before = [p.clone() for p in model.parameters()]
    with pytest.raises(RuntimeError, match="inference"):
        tinit.init_model_(model, "gpt2", seed=SEED)
    for p, old in zip(model.parameters(), before):
        assert torch.equal(_bits(p), _bits(old))


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


@pytest.mark.filterwarnings("ignore:Initializing zero-element tensors is a no-op")
@pytest.mark.parametrize("scheme", ["kaiming_normal", "xavier_uniform", "kaiming_uniform"])
def test_zero_fan_is_a_no_op(scheme):
    """A weight with no elements has no fan-based std and needs none: it is left as it is (as
    torch.nn.init does), the rest of the model is written, not a ZeroDivisionError."""
    model = nn.Linear(0, 4)
    nn.init.constant_(model.bias, 7.0)
    summary = tinit.init_model_(model, scheme, seed=SEED, d_model=4, overrides={"weight": "mlp_in", "bias": "bias"})
    assert [entry.numel for entry in summary] == [0, 4]
    assert torch.equal(model.bias, torch.zeros(4))
