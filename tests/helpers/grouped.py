"""Models and bit-level helpers shared by the grouped-fill tests (test_grouped_*.py, test_write_grouped.py).

The contract those tests check: ``init_model_`` / ``write_grouped_`` give, bit
for bit, what writing each tensor alone with ``write_spec_`` gives; bad input
raises before any tensor is written.
"""

from __future__ import annotations

import torch
from torch import nn

from helpers import BITS, assert_same_bits
from tinit import schemes, stream_for, write_spec_

S = schemes.InitSpec
SEED = 0xC0FFEE


def bits(t: torch.Tensor) -> torch.Tensor:
    t = t.detach()
    return t.contiguous().view(BITS[t.dtype]) if t.dtype in BITS else t.clone()


def snapshot(model: nn.Module) -> dict[str, torch.Tensor]:
    return {n: bits(p).clone() for n, p in model.named_parameters(remove_duplicate=False)}


def assert_unchanged(model: nn.Module, before: dict[str, torch.Tensor]) -> None:
    for name, param in model.named_parameters(remove_duplicate=False):
        assert torch.equal(bits(param), before[name]), f"{name} was written by a call that raised"


def assert_matches_write_spec(model: nn.Module, summary, seed: int) -> None:
    """Every summary entry holds exactly what write_spec_ writes into a fresh copy from its name's stream."""
    for entry in summary:
        param = model.get_parameter(entry.name)
        want = write_spec_(torch.full_like(param.detach(), 7.0), entry.spec, seed=seed, stream=stream_for(entry.name))
        assert_same_bits(param, want, entry.name)


def prefilled(model: nn.Module, value: float = 7.0) -> nn.Module:
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(value)
    return model


# --- models -----------------------------------------------------------------


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
