"""Maximal update parametrisation (muP): init, learning-rate multipliers, readout."""

from __future__ import annotations

import math

from tinit.schemes._core import (
    BASE_ROLE,
    HIDDEN_ROLES,
    OUTPUT_ROLES,
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

_READOUTS = ("zero", "scaled", "multiplier", "zero_multiplier")
_MULTIPLIER_READOUTS = ("multiplier", "zero_multiplier")  # logits times 1/m (mup's ``MuReadout``)
_OPTIMIZERS = ("adam", "sgd")
_REFERENCES = ("mup", "megatron")


class MuP(Scheme):
    """``mup``: maximal update parametrisation against a base width.

    Yang et al., "Tensor Programs V: Tuning Large Neural Networks via
    Zero-Shot Hyperparameter Transfer" (arXiv:2203.03466, 2022), Table 3 and
    its equivalent form with a 1/fan_in output multiplier (Table 8, the one
    the ``mup`` package implements), written relative to a base model of
    width ``base_width`` whose tuned std is ``std``; m = d_model / base_width
    is the width multiplier (every hidden width scales by m, so base_fan_in /
    fan_in = 1 / m):
        embedding (input weights):       std
        hidden matrices (attn, mlp):     std * sqrt(base_fan_in / fan_in) = std / sqrt(m)
        head (readout), readout="zero":  0 (the paper's recommended zero readout;
                                          a head tied to the embedding is
                                          written once, as the embedding)
                        readout="scaled": std / m (Table 3: Var ~ 1/fan_in^2)
                        readout="multiplier": std, and the model multiplies the
                                          logits by 1/m (``multipliers``); a
                                          non-zero ``MuReadout`` keeps
                                          nn.Linear's default times sqrt(m),
                                          std 1/sqrt(3 base_fan_in) (an override
                                          of the head with options={"std": ...})
                        readout="zero_multiplier": 0 and logits times 1/m: the
                                          mup package's
                                          ``MuReadout(readout_zero_init=True)``
        norms 1, biases 0 (``MuReadout``'s zero init zeroes its bias too),
        residual gates 1.
    These are what microsoft/mup 1.0.0 writes with ``mup.init.normal_(p,
    std=std)`` after ``mup.set_base_shapes``: matrix-like tensors (two
    width dims) get std * width_mult^(-1/2), vector-like ones (one width
    dim: embeddings, biases) std (``mup.init.constant_std_init_``). Both
    mup and Megatron-Core draw untruncated normals: so does tinit by
    default.

    ``depth=True``: Megatron-Core's muP (``megatron.core.utils.
    mup_scaled_init_method_normal``, used by ``TransformerConfig.
    __post_init__`` for ``output_layer_init_method`` when ``use_mup``;
    NVIDIA/Megatron-LM main at d98e8a6, not yet in the megatron-core 0.16.1
    wheel) also scales the output projections by depth:
        attn_out, mlp_out:               std / (sqrt(depth_multiplier * L) * sqrt(m))
    (``depth_multiplier`` 2, Megatron's 1 for hybrid models). Megatron-Core's
    untied output layer uses the embedding init (std) with logits times
    1/m: ``readout="multiplier"``.

    The attention logits must use 1/d_head instead of 1/sqrt(d_head) (muP's
    attention rule); tinit cannot do that for the model. Per-parameter
    learning rates, weight decay and Adam epsilon: ``tinit.mup_param_groups``.

    Options:
        std: the base model's std, default 0.02.
        base_width: the base model's d_model; None means m = 1.
        readout: "zero" (default), "scaled", "multiplier" or "zero_multiplier".
        zero_query: also start the query projection at 0 (the paper's
            appendix recommends zero-initialising the output and query
            layers; for a fused qkv, its q rows), default False.
        depth: Megatron-Core's depth scaling of attn_out and mlp_out, default False.
        depth_multiplier: the factor under the square root with L, default 2.
    """

    name = "mup"
    needs_role = True
    default_trunc = math.inf
    tied = "embedding"  # mup's MuSharedReadout takes the nn.Embedding's weight, drawn as an input weight

    def rule(
        self,
        ctx: Context,
        std: float = 0.02,
        base_width: int | None = None,
        readout: str = "zero",
        zero_query: bool = False,
        depth: bool = False,
        depth_multiplier: float = 2.0,
    ) -> InitSpec:
        std = positive(self.name, "std", std)
        _check_readout(readout)
        if not isinstance(depth, bool):
            raise TypeError(f"scheme 'mup': depth must be a bool, got {type(depth).__name__}")
        depth_multiplier = positive(self.name, "depth_multiplier", depth_multiplier)
        constant = role_constants(ctx.base)
        if constant is not None:
            return constant
        m = self.width_mult(ctx.d_model, base_width)
        if ctx.base == "embedding":
            return normal_spec(std)
        if ctx.base == "head":
            return {
                "zero": InitSpec(constant=0.0),
                "zero_multiplier": InitSpec(constant=0.0),
                "scaled": normal_spec(std / m),
                "multiplier": normal_spec(std),
            }[readout]
        hidden = normal_spec(std / math.sqrt(m))
        if depth and ctx.base in OUTPUT_ROLES:
            return normal_spec(std / (math.sqrt(depth_multiplier * ctx.need("n_layers")) * math.sqrt(m)))
        if zero_query and ctx.base == "attn_q":
            return InitSpec(constant=0.0)
        if zero_query and ctx.base == "attn_qkv":
            return ctx.qkv_parts(InitSpec(constant=0.0), hidden, hidden)
        return hidden

    @staticmethod
    def width_mult(d_model: int | None, base_width: int | None) -> float:
        """m = d_model / base_width (1 when base_width is None).

        Raises:
            ValueError: base_width given without d_model, or not positive.
        """
        if base_width is None:
            return 1.0
        positive("mup", "base_width", base_width)
        if not isinstance(d_model, int) or d_model < 1:
            raise ValueError(f"scheme 'mup' with base_width needs d_model (an int >= 1), got {d_model!r}")
        return d_model / base_width

    def lr_multiplier(
        self,
        role: str | None,
        *,
        d_model: int | None = None,
        base_width: int | None = None,
        optimizer: str = "adam",
        readout: str = "zero",
    ) -> float:
        """Learning-rate multiplier of one parameter relative to the base model's lr, by role.

        ``param_group``'s rule with every dim of a hidden matrix taken to scale with width and
        one dim of every other parameter (``tinit.mup_param_groups`` decides by the parameter's
        width dims, as the mup package does). TP5 Table 3 (readout "zero"/"scaled") and its
        output-multiplier form (readout "multiplier"/"zero_multiplier") at width multiplier m:
            Adam: embeddings, norms, biases, gates 1; hidden 1/m; head 1/m
                  (multiplier form: 1).
            SGD:  embeddings, norms, biases, gates m; hidden 1; head 1/m
                  (multiplier form: m).
        The multiplier form follows from Table 3: with logits W x / m, an
        Adam step on W moves W / m by lr / m, an SGD step by lr / m^2.

        Args:
            role: one of ``ROLES``.
            d_model, base_width: as for the init.
            optimizer: "adam" (also AdamW) or "sgd".
            readout: as for the init.

        Returns:
            The multiplier (> 0).

        Raises:
            UnknownNameError: unknown role. ValueError: unknown optimizer or readout,
            or a role of None.
        """
        settings = self.param_group(role, d_model=d_model, base_width=base_width, optimizer=optimizer, readout=readout)
        return settings["lr_multiplier"]

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
        lr: float = 1.0,
        weight_decay: float = 0.0,
        eps: float | None = None,
        optimizer: str = "adam",
        d_model: int | None = None,
        base_width: int | None = None,
        readout: str = "zero",
        reference: str = "mup",
    ) -> dict[str, float]:
        """muP's learning rate, weight decay and Adam eps of one parameter (``Scheme.param_group``).

        ``reference="mup"``: microsoft/mup 1.0.0's optimisers, from the parameter's width dims
        (``_package_multiplier``: ``MuAdam``/``MuAdamW`` give two width dims lr / m_in,
        ``MuSGD`` one width dim lr * m, two lr * m_out / m_in) with weight decay scaled so that
        lr * weight_decay is the base model's; eps unscaled. ``reference="megatron"``:
        Megatron-Core's ``get_mup_config_overrides`` (NVIDIA/Megatron-LM main at d98e8a6): a
        parameter is vector-like when it is an embedding, the output layer or a token (or has <=
        1 dim); Adam: hidden lr / m and eps / m; SGD: vector-like lr * m; weight decay unscaled.
        Either way, the head of readout "zero"/"scaled" (TP5 Table 3, no logit multiplier) gets
        lr / m (m its width dim's multiplier).

        Args:
            role: one of ``ROLES``.
            width_mults: per dim, size over the base size for a width dim, None for a fixed
                one; None: every dim of a hidden matrix, one dim of any other parameter, at
                m = d_model / base_width.
            ndim: the parameter's dims (Megatron's vector-like rule).
            shape, layout, experts, layer_idx, n_layers: the parameter's context, unused (muP's
                rules read the width dims only).
            lr, weight_decay, eps: the base model's (eps None: the optimiser's default).
            optimizer: "adam" (also AdamW) or "sgd".
            d_model, base_width, readout: as for the init.
            reference: "mup" or "megatron".

        Returns:
            As ``Scheme.param_group``.

        Raises:
            UnknownNameError: unknown role. ValueError: a role of None, an unknown optimizer,
            readout or reference, more than two width dims.
        """
        if role not in ROLES:
            raise (ValueError if role is None else UnknownNameError)(
                f"mup lr_multiplier needs a known role, got {role!r}"
            )
        if optimizer not in _OPTIMIZERS:
            raise ValueError(f"mup: optimizer must be one of {_OPTIMIZERS}, got {optimizer!r}")
        _check_readout(readout)
        if reference not in _REFERENCES:
            raise ValueError(f"mup: reference must be one of {_REFERENCES}, got {reference!r}")
        m = self.width_mult(d_model, base_width)
        base_role = BASE_ROLE.get(role, role)
        if width_mults is None:
            width_mults = (m, m) if base_role in HIDDEN_ROLES else (m,)
        if base_role == "head" and readout not in _MULTIPLIER_READOUTS:  # TP5 Table 3's readout: lr / m
            mult = 1.0 / (m if reference == "megatron" else next((w for w in width_mults if w is not None), 1.0))
            return group_settings(lr, mult, weight_decay / mult if reference == "mup" else weight_decay, eps)
        if reference == "mup":
            mult = _package_multiplier(width_mults, optimizer)
            return group_settings(lr, mult, weight_decay / mult, eps)
        vector_like = role in ("embedding", "head", "token") or ndim <= 1
        if optimizer == "sgd":
            return group_settings(lr, m if vector_like else 1.0, weight_decay, eps)
        mult = 1.0 if vector_like else 1.0 / m
        return group_settings(lr, mult, weight_decay, None if eps is None else eps * mult)

    def multipliers(self, *, d_model=None, base_width=None, readout="zero", **options) -> dict[str, float]:
        """{"width_mult": m, "output": logits multiplier} (1/m for readouts "multiplier" and
        "zero_multiplier", as ``MuReadout.forward`` divides by its width_mult; else 1)."""
        _check_readout(readout)
        m = self.width_mult(d_model, base_width)
        return {"width_mult": m, "output": 1.0 / m if readout in _MULTIPLIER_READOUTS else 1.0}


def _package_multiplier(width_mults: tuple[float | None, ...], optimizer: str) -> float:
    """The lr multiplier the mup package gives a tensor from its dims' width multipliers.

    ``width_mults``: per dim, dim / base_dim for a dim that scales with width,
    None for a fixed one (mup's ``InfDim``). microsoft/mup 1.0.0,
    ``mup.optim.MuAdam``: a tensor with two width dims gets 1 / (the last
    one's multiplier: its fan_in, ``InfShape.width_mult``), every other 1.
    ``mup.optim.MuSGD``: one width dim: its multiplier; two: fan_in's over
    fan_out's (dims 1 and 0, ``InfShape.fanin_fanout_mult_ratio``); none: 1.
    Both refuse more than two width dims.

    Raises:
        ValueError: more than two width dims.
    """
    wide = [w for w in width_mults if w is not None]
    if len(wide) > 2:
        raise ValueError(f"mup: a tensor with {len(wide)} width dims (the mup package handles at most 2)")
    if optimizer == "adam":
        return 1.0 / wide[-1] if len(wide) == 2 else 1.0
    if len(wide) == 1:
        return wide[0]
    if len(wide) == 2:
        fan_in, fan_out = (w if w is not None else 1.0 for w in width_mults[1::-1])
        return fan_out / fan_in
    return 1.0


def _check_readout(readout: str) -> None:
    if readout not in _READOUTS:
        raise ValueError(f"scheme 'mup': readout must be one of {_READOUTS}, got {readout!r}")
