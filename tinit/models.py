"""A GPT-2-small-shaped decoder defined in tinit, for ``tinit init`` (no download).

Module names follow Hugging Face's ``GPT2LMHeadModel`` (``transformer.wte``,
``transformer.h.<i>.attn.c_proj``, ``lm_head``, ...) so ``tinit.roles`` infers
every parameter's role from its name exactly as it does for the real model.
The one layout difference: projections are ``nn.Linear`` (weight shape
``(out, in)``) where Hugging Face uses its ``Conv1D`` (``(in, out)``); roles
and element counts are the same.

Architecture: Radford et al., "Language Models are Unsupervised Multitask
Learners" (2019): pre-LayerNorm blocks, learned positions, GELU (tanh) MLP
of width 4 * d_model, final LayerNorm, LM head tied to the token embedding.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass(frozen=True)
class GPTConfig:
    """Shape of a GPT-2-style decoder; the defaults are GPT-2 small (124 M).

    Attributes:
        n_layers: number of transformer blocks L.
        d_model: residual stream width.
        n_heads: attention heads; must divide ``d_model``.
        vocab: vocabulary size (rows of ``wte`` and of the tied ``lm_head``).
        n_ctx: maximum sequence length (rows of ``wpe``).
        layer_norm_eps: LayerNorm epsilon.
    """

    n_layers: int = 12
    d_model: int = 768
    n_heads: int = 12
    vocab: int = 50257
    n_ctx: int = 1024
    layer_norm_eps: float = 1e-5

    def __post_init__(self):
        for field in ("n_layers", "d_model", "n_heads", "vocab", "n_ctx"):
            value = getattr(self, field)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"GPTConfig.{field} must be an int >= 1, got {value!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"GPTConfig.n_heads ({self.n_heads}) must divide d_model ({self.d_model})")

    @property
    def d_ff(self) -> int:
        """MLP hidden width, 4 * d_model."""
        return 4 * self.d_model


class Attention(nn.Module):
    """Causal multi-head self-attention: fused ``c_attn`` (q, k, v) and the
    residual output projection ``c_proj``."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.n_heads = config.n_heads
        self.c_attn = nn.Linear(config.d_model, 3 * config.d_model)
        self.c_proj = nn.Linear(config.d_model, config.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Args: x: (batch, seq, d_model). Returns: (batch, seq, d_model)."""
        batch, seq, width = x.shape
        q, k, v = self.c_attn(x).split(width, dim=-1)
        q, k, v = (t.view(batch, seq, self.n_heads, -1).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(batch, seq, width))


class MLP(nn.Module):
    """``c_fc`` (d_model -> 4 d_model), GELU (tanh), ``c_proj`` back to d_model."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(config.d_model, config.d_ff)
        self.c_proj = nn.Linear(config.d_ff, config.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Args: x: (..., d_model). Returns: (..., d_model)."""
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    """Pre-LayerNorm transformer block: x + attn(ln_1(x)), then + mlp(ln_2(x))."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.attn = Attention(config)
        self.ln_2 = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Args: x: (batch, seq, d_model). Returns: (batch, seq, d_model)."""
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Transformer(nn.Module):
    """Embeddings (``wte``, ``wpe``), the blocks ``h`` and the final ``ln_f``."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.wte = nn.Embedding(config.vocab, config.d_model)
        self.wpe = nn.Embedding(config.n_ctx, config.d_model)
        self.h = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.ln_f = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Args: ids: int64 (batch, seq), seq <= n_ctx. Returns: (batch, seq, d_model)."""
        positions = torch.arange(ids.shape[-1], device=ids.device)
        x = self.wte(ids) + self.wpe(positions)
        for block in self.h:
            x = block(x)
        return self.ln_f(x)


class GPT(nn.Module):
    """GPT-2-style decoder with an LM head tied to the token embedding.

    Build it on the meta device and materialise it without touching memory
    twice::

        with torch.device("meta"):
            model = GPT(GPTConfig())
        model.to_empty(device="cpu")
        model.tie_weights()  # to_empty un-ties shared parameters

    Args:
        config: the model's shape; GPT-2 small by default.
    """

    def __init__(self, config: GPTConfig | None = None):
        super().__init__()
        self.config = config if config is not None else GPTConfig()
        self.transformer = Transformer(self.config)
        self.lm_head = nn.Linear(self.config.d_model, self.config.vocab, bias=False)
        self.tie_weights()

    def tie_weights(self) -> None:
        """Make ``lm_head.weight`` the same Parameter as ``transformer.wte.weight``.

        ``nn.Module.to_empty`` (and ``_apply`` in general) replaces each
        module's parameters separately, so a tie made at construction does not
        survive it; call this again afterwards.
        """
        self.lm_head.weight = self.transformer.wte.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Next-token logits.

        Args:
            ids: int64 token ids, shape (batch, seq) with seq <= n_ctx.

        Returns:
            Logits, shape (batch, seq, vocab), in the model's dtype.
        """
        return self.lm_head(self.transformer(ids))
