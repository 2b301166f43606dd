"""Depth-scaled muP: CompleteP (alpha = 1) and depth-muP (alpha = 1/2), residual branches times L^-alpha."""

from __future__ import annotations

import math

from tinit.schemes._core import (
    BASE_ROLE,
    HIDDEN_ROLES,
    ROLES,
    Context,
    InitSpec,
    Scheme,
    UnknownNameError,
    group_settings,
    normal_spec,
    positive,
    role_constants,
)

_EPS_SCOPES = ("blocks", "all")


class CompleteP(Scheme):
    """``completep``: CompleteP, muP with residual branches times m_L^-1 and its AdamW rules.

    Dey et al., "Don't be lazy: CompleteP enables compute-efficient deep
    transformers" (arXiv:2505.01618, 2025), Table 1, column alpha = 1, and
    its reference implementation (EleutherAI/nanoGPT-mup, branch
    ``completep``, ``model.py``: ``GPT.__init__``, ``Block``,
    ``GPT.configure_optimizers``). With m_N = d_model / base_width, m_L =
    L / base_depth (L the blocks of the stack) and sigma = ``std``:
        embedding:                    N(0, sigma^2)
        hidden matrices (attn, mlp):  N(0, sigma^2 / m_N), no depth factor
        head (unembedding):           N(0, sigma^2), logits times 1/m_N
        norms 1, biases 0, residual gates 1 (the reference's LayerNorm).
    Untruncated, as the reference's ``torch.nn.init.normal_``. The init is
    tinit's ``mup`` with ``readout="multiplier"``; CompleteP adds, in the
    forward pass, x + m_L^-alpha * branch(LN(x)) for the attention and MLP
    branches (``Block.forward``'s ``residual_scaling``), which tinit cannot
    do for the model: ``multipliers`` returns it ("branch"), with the logit
    multiplier 1/m_N ("output"). muP's attention logits use 1/d_head.

    AdamW rules (``param_group``; Table 1 and ``configure_optimizers``),
    relative to the base model's lr eta, weight decay lambda and eps:
        embeddings:                         eta, lambda
        hidden matrices in the blocks:      eta m_N^-1 m_L^(alpha-1), lambda m_N
        norms, biases, gates in the blocks: eta m_L^(alpha-1), weight decay 0
        final norm (outside the blocks):    eta, weight decay 0
        head (untied; not in the reference): eta, lambda
        Adam eps of the blocks' parameters: eps m_N^-1 m_L^-alpha
    A hidden matrix outside the blocks gets the width factor only.
    ``eps_scope="all"`` scales every group's eps, as the reference code
    does (it scales the optimiser's eps); Table 1 scales the residual
    blocks'. Table 1 and the reference give AdamW only: SGD is refused.

    Options:
        std: the base model's std sigma, default 0.02.
        base_width: the base model's d_model; None means m_N = 1.
        base_depth: the base model's blocks; m_L = L / base_depth, default 1
            (m_L = L: branches times L^-alpha).
        eps_scope: "blocks" (default, Table 1) or "all" (the reference code).
    """

    name = "completep"
    needs_role = True
    default_trunc = math.inf
    alpha = 1.0

    def rule(
        self,
        ctx: Context,
        std: float = 0.02,
        base_width: int | None = None,
        base_depth: float = 1,
        eps_scope: str = "blocks",
    ) -> InitSpec:
        std = positive(self.name, "std", std)
        self._check(base_depth, eps_scope)
        constant = role_constants(ctx.base)
        if constant is not None:
            return constant
        m = self.width_mult(ctx.d_model, base_width)
        if ctx.base in ("embedding", "head"):
            return normal_spec(std)
        return normal_spec(std / math.sqrt(m))

    def width_mult(self, d_model: int | None, base_width: int | None) -> float:
        """m_N = d_model / base_width (1 when base_width is None).

        Raises:
            ValueError: base_width not positive, or given without d_model.
        """
        if base_width is None:
            return 1.0
        positive(self.name, "base_width", base_width)
        if isinstance(d_model, bool) or not isinstance(d_model, int) or d_model < 1:
            raise ValueError(f"scheme {self.name!r} with base_width needs d_model (an int >= 1), got {d_model!r}")
        return d_model / base_width

    def depth_mult(self, n_layers: int | None, base_depth: float = 1) -> float:
        """m_L = n_layers / base_depth.

        Raises:
            ValueError: n_layers missing or < 1, base_depth not positive.
        """
        positive(self.name, "base_depth", base_depth)
        if isinstance(n_layers, bool) or not isinstance(n_layers, int) or n_layers < 1:
            raise ValueError(f"scheme {self.name!r} needs n_layers (an int >= 1), got {n_layers!r}")
        return n_layers / base_depth

    def param_group(
        self,
        role: str | None,
        *,
        width_mults: tuple[float | None, ...] | None = None,
        ndim: int = 2,
        shape: tuple[int, ...] = (),
        layout: str = "out_in",
        experts: int | None = None,
        layer_idx: int | None = None,
        n_layers: int | None = None,
        d_model: int | None = None,
        lr: float = 1.0,
        weight_decay: float = 0.0,
        eps: float | None = None,
        optimizer: str = "adam",
        std: float = 0.02,
        base_width: int | None = None,
        base_depth: float = 1,
        eps_scope: str = "blocks",
    ) -> dict[str, float]:
        """The AdamW learning rate, weight decay and eps of one parameter (``Scheme.param_group``).

        The table of the class docstring, with a parameter in the blocks when ``layer_idx`` is not
        None (m_L from ``n_layers``, the blocks of its stack) and a hidden matrix any parameter of
        >= 2 dims whose base role is a hidden one (``HIDDEN_ROLES``: attention, MLP, routers, fused
        projections).

        Args:
            role: one of ``ROLES``.
            width_mults, shape, layout, experts: unused (the rules are by role).
            ndim: the parameter's dims (a 1-D parameter of a matrix role is a bias).
            layer_idx, n_layers: the block index (None outside the blocks), the blocks L of its stack.
            d_model: the model's width (m_N with ``base_width``).
            lr, weight_decay, eps: the base model's; eps is required (it is scaled).
            optimizer: "adam" (Adam, AdamW); "sgd" is refused.
            std, base_width, base_depth, eps_scope: as for the init.

        Returns:
            As ``Scheme.param_group``.

        Raises:
            UnknownNameError: unknown role. ValueError: a role of None, an optimizer other than
            "adam", eps None, a block parameter without n_layers, an option out of range.
        """
        if role not in ROLES:
            raise (ValueError if role is None else UnknownNameError)(
                f"{self.name} param_group needs a known role, got {role!r}"
            )
        if optimizer != "adam":
            raise ValueError(
                f"{self.name}: optimizer must be 'adam' (Adam, AdamW), got {optimizer!r}: "
                "CompleteP's Table 1 and its reference give AdamW rules only"
            )
        if eps is None:
            raise ValueError(
                f"{self.name} scales Adam's eps: pass eps= (the base model's; torch's AdamW default is 1e-8)"
            )
        positive(self.name, "std", std)
        self._check(base_depth, eps_scope)
        m_n = self.width_mult(d_model, base_width)
        in_block = layer_idx is not None
        m_l = self.depth_mult(n_layers, base_depth) if in_block or eps_scope == "all" else 1.0
        base = BASE_ROLE.get(role, role)
        depth_lr = m_l ** (self.alpha - 1.0) if in_block else 1.0
        scaled_eps = eps / m_n * m_l**-self.alpha if in_block or eps_scope == "all" else eps
        if base in ("embedding", "head"):
            return group_settings(lr, 1.0, weight_decay, scaled_eps)
        if base in HIDDEN_ROLES and ndim >= 2:
            return group_settings(lr, depth_lr / m_n, weight_decay * m_n, scaled_eps)
        return group_settings(lr, depth_lr, 0.0, scaled_eps)

    def multipliers(
        self,
        *,
        n_layers: int | None = None,
        d_model: int | None = None,
        std: float = 0.02,
        base_width: int | None = None,
        base_depth: float = 1,
        eps_scope: str = "blocks",
        **context,
    ) -> dict[str, float]:
        """{"width_mult": m_N, "depth_mult": m_L, "branch": m_L^-alpha, "output": 1/m_N}.

        "branch" multiplies each attention and MLP branch before it joins the residual stream
        (``Block.forward``'s ``residual_scaling``); "output" the logits (the reference scales the
        final hidden state by ``mup_output_alpha / mup_width_multiplier`` before the head).

        Raises:
            ValueError: n_layers missing, an option out of range.
        """
        positive(self.name, "std", std)
        self._check(base_depth, eps_scope)
        m_n = self.width_mult(d_model, base_width)
        m_l = self.depth_mult(n_layers, base_depth)
        return {"width_mult": m_n, "depth_mult": m_l, "branch": m_l**-self.alpha, "output": 1.0 / m_n}

    def _check(self, base_depth, eps_scope) -> None:
        positive(self.name, "base_depth", base_depth)
        if eps_scope not in _EPS_SCOPES:
            raise ValueError(f"scheme {self.name!r}: eps_scope must be one of {_EPS_SCOPES}, got {eps_scope!r}")


class DepthMuP(CompleteP):
    """``depth_mup``: depth-muP, muP with residual branches times m_L^-1/2 and its AdamW rules.

    Yang et al., "Tensor Programs VI: Feature Learning in Infinite-Depth
    Neural Networks" (arXiv:2310.02244, 2023): each residual branch times
    L^-1/2 (its block multiplier a / sqrt(L)), the init of muP unchanged
    in depth. The transformer form, AdamW rules included, is Table 1's
    column alpha = 1/2 of Dey et al., "Don't be lazy: CompleteP enables
    compute-efficient deep transformers" (arXiv:2505.01618, 2025), with
    its reference (EleutherAI/nanoGPT-mup, branch ``completep``, run with
    ``depth_alpha_exp=0.5``): as ``completep`` with alpha = 1/2, i.e.
        hidden matrices in the blocks:      lr eta m_N^-1 m_L^-1/2, weight decay lambda m_N
        norms, biases, gates in the blocks: lr eta m_L^-1/2, weight decay 0
        Adam eps of the blocks' parameters: eps m_N^-1 m_L^-1/2
        residual branches:                  times m_L^-1/2 (``multipliers``' "branch").
    Embeddings, the final norm and the head as in muP (lr eta).

    Options:
        std: the base model's std sigma, default 0.02.
        base_width: the base model's d_model; None means m_N = 1.
        base_depth: the base model's blocks; m_L = L / base_depth, default 1
            (m_L = L: branches times L^-1/2).
        eps_scope: "blocks" (default, Table 1) or "all" (the reference code).
    """

    name = "depth_mup"
    alpha = 0.5
