"""The toy transformers of tinit's tools, defined here so neither needs a download.

``GPT`` (with ``GPTConfig``): a GPT-2-small-shaped decoder for ``tinit init``. Module names follow
Hugging Face's ``GPT2LMHeadModel`` (``transformer.wte``, ``transformer.h.<i>.attn.c_proj``,
``lm_head``, ...) so ``tinit.roles`` infers every parameter's role from its name exactly as it does
for the real model. The one layout difference: projections are ``nn.Linear`` (weight shape
``(out, in)``) where Hugging Face uses its ``Conv1D`` (``(in, out)``); roles and element counts are
the same. Architecture: Radford et al., "Language Models are Unsupervised Multitask Learners" (2019):
pre-LayerNorm blocks, learned positions, GELU (tanh) MLP of width 4 * d_model, final LayerNorm, LM
head tied to the token embedding.

``Stack`` (with ``StackConfig``): the configurable stack of ``tinit report`` (``tinit.report``):
pre-LN, post-LN or DeepNorm. Parameter names follow the Hugging Face Llama / Megatron conventions
that ``tinit.roles`` reads, so ``tinit.init_model_`` classifies every parameter::

    embed_tokens.weight                       embedding
    layers.<i>.attn_norm.weight / .bias       norm / bias
    layers.<i>.attn.{q,k,v}_proj.weight       weight
    layers.<i>.attn.o_proj.weight             residual (attention output)
    layers.<i>.mlp_norm.weight / .bias        norm / bias
    layers.<i>.mlp.up_proj.weight             weight
    layers.<i>.mlp.down_proj.weight           residual (MLP output)
    layers.<i>.attn_gate / .mlp_gate          residual gate, shape (1,)
    norm.weight / .bias                       norm / bias (pre-LN only)
    lm_head.weight                            head (not tied)

Its blocks (two sublayers each, attention then MLP; F is the sublayer times its gate g, LN a
LayerNorm):
    pre       x + g F(LN(x))                  Xiong et al. 2020, GPT-2
    post      LN(x + g F(x))                  Vaswani et al. 2017
    deepnorm  LN(alpha * x + g F(x))          Wang et al. 2022, arXiv:2203.00555

The gates are ReZero's (Bachlechner et al. 2020, arXiv:2003.04887): ``rezero`` sets them to 0, every
other scheme to 1, which leaves the block as written without gates.

The gated branch, the residual sum (before the norm of a post-LN or DeepNorm block) and the stream
after every sublayer pass through ``nn.Identity`` hook points (``layers.<i>.attn_branch``,
``.attn_sum``, ``.attn_resid``, the same for ``mlp``; ``embed_resid`` for x_0) so forward hooks can
read them; they hold no parameters.

Each sublayer's output is linear in its output projection (``o_proj``, ``down_proj``, no bias), so at
initialisation Var(F_l) is proportional to that matrix's variance: the property the 1/sqrt(2L) rule of
GPT-2 relies on.

Both share the causal attention core (``_causal_attention``) and the config checks (``_check_ints``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

__all__ = [
    "GPT",
    "GPTMLP",
    "NORMS",
    "GPTAttention",
    "GPTBlock",
    "GPTConfig",
    "GPTTransformer",
    "Stack",
    "StackAttention",
    "StackBlock",
    "StackConfig",
    "StackMLP",
    "deepnorm_alpha",
]

NORMS = ("pre", "post", "deepnorm")


def _check_ints(config: object, fields: tuple[str, ...], *, optional: bool = False) -> None:
    """Raise ValueError naming ``<Config>.<field>`` unless each field is an int >= 1 (or None if optional)."""
    owner = type(config).__name__
    for field in fields:
        value = getattr(config, field)
        if optional and value is None:
            continue
        if not isinstance(value, int) or value < 1:
            kind = "None or an int >= 1" if optional else "an int >= 1"
            raise ValueError(f"{owner}.{field} must be {kind}, got {value!r}")


def _causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Causal scaled dot-product attention over ``n_heads`` heads.

    Args:
        q, k, v: (batch, seq, width) projections; ``n_heads`` divides width.
        n_heads: number of heads.

    Returns:
        (batch, seq, width), the heads merged back in order, before the output projection.
    """
    batch, seq, width = q.shape
    q, k, v = (t.view(batch, seq, n_heads, -1).transpose(1, 2) for t in (q, k, v))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return y.transpose(1, 2).reshape(batch, seq, width)


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
        _check_ints(self, ("n_layers", "d_model", "n_heads", "vocab", "n_ctx"))
        if self.d_model % self.n_heads:
            raise ValueError(f"GPTConfig.n_heads ({self.n_heads}) must divide d_model ({self.d_model})")

    @property
    def d_ff(self) -> int:
        """MLP hidden width, 4 * d_model."""
        return 4 * self.d_model

    @property
    def head_dim(self) -> int:
        """Head width, d_model // n_heads (Hugging Face's name: recipes that need it, T5's, read it)."""
        return self.d_model // self.n_heads


class GPTAttention(nn.Module):
    """Causal multi-head self-attention: fused ``c_attn`` (q, k, v) and the
    residual output projection ``c_proj``."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.n_heads = config.n_heads
        self.c_attn = nn.Linear(config.d_model, 3 * config.d_model)
        self.c_proj = nn.Linear(config.d_model, config.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Args: x: (batch, seq, d_model). Returns: (batch, seq, d_model)."""
        q, k, v = self.c_attn(x).split(x.shape[-1], dim=-1)
        return self.c_proj(_causal_attention(q, k, v, self.n_heads))


class GPTMLP(nn.Module):
    """``c_fc`` (d_model -> 4 d_model), GELU (tanh), ``c_proj`` back to d_model."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(config.d_model, config.d_ff)
        self.c_proj = nn.Linear(config.d_ff, config.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Args: x: (..., d_model). Returns: (..., d_model)."""
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class GPTBlock(nn.Module):
    """Pre-LayerNorm transformer block: x + attn(ln_1(x)), then + mlp(ln_2(x))."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.attn = GPTAttention(config)
        self.ln_2 = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.mlp = GPTMLP(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Args: x: (batch, seq, d_model). Returns: (batch, seq, d_model)."""
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPTTransformer(nn.Module):
    """Embeddings (``wte``, ``wpe``), the blocks ``h`` and the final ``ln_f``."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.wte = nn.Embedding(config.vocab, config.d_model)
        self.wpe = nn.Embedding(config.n_ctx, config.d_model)
        self.h = nn.ModuleList(GPTBlock(config) for _ in range(config.n_layers))
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
        self.transformer = GPTTransformer(self.config)
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


def deepnorm_alpha(n_layers: int) -> float:
    """DeepNorm's residual multiplier for a decoder-only (or encoder-only) stack.

    Args:
        n_layers: number of blocks N, >= 1.

    Returns:
        alpha = (2N)^(1/4) (Wang et al. 2022, arXiv:2203.00555, table 1).

    Raises:
        ValueError: n_layers < 1.
    """
    if not isinstance(n_layers, int) or n_layers < 1:
        raise ValueError(f"deepnorm_alpha: n_layers must be an int >= 1, got {n_layers!r}")
    return (2.0 * n_layers) ** 0.25


@dataclass(frozen=True)
class StackConfig:
    """Shape of the report's stack.

    Attributes:
        n_layers: number of blocks L (2L sublayers).
        d_model: residual stream width d.
        norm: "pre", "post" or "deepnorm" (see the module docstring, ``Stack``).
        n_heads: attention heads, must divide d_model; None: max(1, d_model // 64).
        d_ff: MLP hidden width; None: 4 * d_model.
        vocab: rows of ``embed_tokens`` and of ``lm_head``.
        alpha: residual multiplier of ``deepnorm`` blocks; None: (2L)^(1/4).
            Ignored (1) for "pre" and "post".
        layer_norm_eps: LayerNorm epsilon.
    """

    n_layers: int = 80
    d_model: int = 128
    norm: str = "pre"
    n_heads: int | None = None
    d_ff: int | None = None
    vocab: int = 512
    alpha: float | None = None
    layer_norm_eps: float = 1e-5

    def __post_init__(self):
        _check_ints(self, ("n_layers", "d_model", "vocab"))
        _check_ints(self, ("n_heads", "d_ff"), optional=True)
        if self.norm not in NORMS:
            raise ValueError(f"StackConfig.norm must be one of {NORMS}, got {self.norm!r}")
        if self.d_model % self.heads:
            raise ValueError(f"StackConfig: n_heads ({self.heads}) must divide d_model ({self.d_model})")
        if self.alpha is not None and not (math.isfinite(self.alpha) and self.alpha > 0):
            raise ValueError(f"StackConfig.alpha must be finite and > 0, got {self.alpha!r}")

    @property
    def heads(self) -> int:
        """Attention heads actually used."""
        return self.n_heads if self.n_heads is not None else max(1, self.d_model // 64)

    @property
    def head_dim(self) -> int:
        """Head width, d_model // heads (Hugging Face's name: recipes that need it, T5's, read it)."""
        return self.d_model // self.heads

    @property
    def ff(self) -> int:
        """MLP hidden width actually used."""
        return self.d_ff if self.d_ff is not None else 4 * self.d_model

    @property
    def residual_scale(self) -> float:
        """The multiplier of x in the residual sum: alpha for deepnorm, else 1."""
        if self.norm != "deepnorm":
            return 1.0
        return self.alpha if self.alpha is not None else deepnorm_alpha(self.n_layers)


class StackAttention(nn.Module):
    """Causal multi-head self-attention with separate q/k/v/o projections, no biases."""

    def __init__(self, config: StackConfig):
        super().__init__()
        d = config.d_model
        self.n_heads = config.heads
        self.q_proj = nn.Linear(d, d, bias=False)
        self.k_proj = nn.Linear(d, d, bias=False)
        self.v_proj = nn.Linear(d, d, bias=False)
        self.o_proj = nn.Linear(d, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Args: x: (batch, seq, d_model). Returns: (batch, seq, d_model)."""
        return self.o_proj(_causal_attention(self.q_proj(x), self.k_proj(x), self.v_proj(x), self.n_heads))


class StackMLP(nn.Module):
    """``up_proj`` (d -> d_ff), exact GELU, ``down_proj`` (d_ff -> d), no biases."""

    def __init__(self, config: StackConfig):
        super().__init__()
        self.up_proj = nn.Linear(config.d_model, config.ff, bias=False)
        self.down_proj = nn.Linear(config.ff, config.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Args: x: (..., d_model). Returns: (..., d_model)."""
        return self.down_proj(F.gelu(self.up_proj(x)))


class StackBlock(nn.Module):
    """One block: the attention sublayer, then the MLP sublayer, wired by ``config.norm``."""

    def __init__(self, config: StackConfig):
        super().__init__()
        self.norm_kind = config.norm
        self.scale = config.residual_scale
        for kind, branch in (("attn", StackAttention(config)), ("mlp", StackMLP(config))):
            setattr(self, f"{kind}_norm", nn.LayerNorm(config.d_model, eps=config.layer_norm_eps))
            setattr(self, kind, branch)
            setattr(self, f"{kind}_gate", nn.Parameter(torch.ones(1)))
            setattr(self, f"{kind}_branch", nn.Identity())
            setattr(self, f"{kind}_sum", nn.Identity())
            setattr(self, f"{kind}_resid", nn.Identity())

    def _sublayer(self, x: torch.Tensor, kind: str) -> torch.Tensor:
        norm, branch, gate = getattr(self, f"{kind}_norm"), getattr(self, kind), getattr(self, f"{kind}_gate")
        out, total, resid = (getattr(self, f"{kind}_{point}") for point in ("branch", "sum", "resid"))
        if self.norm_kind == "pre":
            return resid(total(x + out(gate * branch(norm(x)))))
        return resid(norm(total(self.scale * x + out(gate * branch(x)))))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Args: x: (batch, seq, d_model). Returns: (batch, seq, d_model)."""
        return self._sublayer(self._sublayer(x, "attn"), "mlp")


class Stack(nn.Module):
    """Token embedding, ``n_layers`` blocks, (pre-LN) final norm, untied LM head.

    Build on the meta device and let ``tinit.init_model_`` write every
    parameter::

        with torch.device("meta"):
            model = Stack(StackConfig(n_layers=80, d_model=256))
        model.to_empty(device="cpu")
        tinit.init_model_(model, "gpt2", seed=0)

    Args:
        config: the stack's shape; ``StackConfig()`` when None.
    """

    def __init__(self, config: StackConfig | None = None):
        super().__init__()
        self.config = config if config is not None else StackConfig()
        self.embed_tokens = nn.Embedding(self.config.vocab, self.config.d_model)
        self.embed_resid = nn.Identity()
        self.layers = nn.ModuleList(StackBlock(self.config) for _ in range(self.config.n_layers))
        self.norm = (
            nn.LayerNorm(self.config.d_model, eps=self.config.layer_norm_eps)
            if self.config.norm == "pre"
            else nn.Identity()
        )
        self.lm_head = nn.Linear(self.config.d_model, self.config.vocab, bias=False)

    def set_residual_scale(self, alpha: float) -> None:
        """Set the multiplier of x in every block's residual sum (deepnorm stacks).

        Args:
            alpha: finite, > 0; a scheme's DeepNorm ``residual_alpha``.

        Raises:
            ValueError: alpha not finite and > 0, or the stack is not "deepnorm".
        """
        if self.config.norm != "deepnorm":
            raise ValueError(f"set_residual_scale: a {self.config.norm!r} stack has no residual multiplier")
        if not (math.isfinite(alpha) and alpha > 0):
            raise ValueError(f"set_residual_scale: alpha must be finite and > 0, got {alpha!r}")
        for block in self.layers:
            block.scale = float(alpha)

    def forward(self, ids: torch.Tensor | None = None, *, inputs_embeds: torch.Tensor | None = None) -> torch.Tensor:
        """Next-token logits from token ids or from input embeddings (exactly one).

        Args:
            ids: int64 token ids in [0, vocab), shape (batch, seq).
            inputs_embeds: x_0 itself, shape (batch, seq, d_model), the model's dtype
                (Hugging Face's ``inputs_embeds``); bypasses ``embed_tokens``.

        Returns:
            Logits, shape (batch, seq, vocab).

        Raises:
            ValueError: both or neither of ``ids`` and ``inputs_embeds`` given.
        """
        if (ids is None) == (inputs_embeds is None):
            raise ValueError("Stack.forward takes exactly one of ids and inputs_embeds")
        x = self.embed_resid(self.embed_tokens(ids) if inputs_embeds is None else inputs_embeds)
        for block in self.layers:
            x = block(x)
        return self.lm_head(self.norm(x))
