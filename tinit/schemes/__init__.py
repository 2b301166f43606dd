"""The scheme registry: per-parameter std, bounds and architectural multipliers.

A scheme maps what is known about one parameter (its role, its block index,
the depth L of its stack, d_model, its logical shape and layout) to an
``InitSpec``: a truncated normal (mean, std, bounds ``trunc`` in units of
std), a uniform, a constant, or, for a fused projection whose slices follow
different rules, one spec per slice. Where a recipe also changes the forward
pass (DeepNorm's alpha on the residual branch, muP's readout multiplier,
u-μP's residual taus, CompleteP's branch multiplier) the scheme's
``multipliers`` returns the numbers the model must apply; a recipe with
learning-rate rules answers ``Scheme.param_group`` (``tinit.mup_param_groups``).

Conventions shared by every scheme:
    std      standard deviation in tensor units. For a truncated normal it is
             the std of the parent normal unless ``variance_preserving=True``.
    trunc    bounds in units of std around the mean (JAX/TensorFlow
             convention), not absolute bounds (``torch.nn.init.trunc_normal_``).
             Default: the truncation of the recipe's reference implementation
             (``Scheme.reference_trunc``): untruncated for ``normal``, ``gpt2``,
             ``megatron``, ``xavier_normal``, ``kaiming_normal``, ``small_init``,
             ``wang_init``, ``t5``, ``modded_nanogpt``, ``mup``, ``u_mup``,
             ``depth_mup``, ``completep``; +-3 for ``mitchell``,
             ``modern`` and the ``olmo_*`` linears; +-2 rescaled for
             ``lecun_normal`` (JAX); torchtitan's absolute +-2 for ``depth_init``.
    variance_preserving
             divide std by the truncated normal's std factor
             (``truncation_factor``), so the realised std equals the target,
             as JAX/Keras ``variance_scaling`` does (0.87962566 at +-2).
             Default None: as the reference (True for ``lecun_normal``), and
             True when ``trunc=`` truncates a recipe whose reference is
             untruncated (the realised std stays the reference's).
    fans     fan_in / fan_out come from the parameter's LOGICAL (unsharded)
             shape and its layout (``LAYOUTS``, ``fans``): ``"out_in"`` for
             ``nn.Linear`` and ``nn.Embedding`` weights (out_features,
             in_features), ``"in_out"`` for Hugging Face's ``Conv1D``
             (GPT-2). Tensors with more than two dims follow
             ``torch.nn.init`` (dims 0 and 1 times the receptive field),
             except expert stacks, whose fans are ONE expert's:
             ``"expert_out_in"`` (E, out, in: transformers 5's ``*Experts``
             ``gate_up_proj``/``down_proj``, torchtitan's ``GroupedExperts``),
             ``"expert_in_out"`` (E, in, out: GPT-OSS), and the 2-D stacks of
             ``experts=E`` matrices ``"grouped_in_out"`` (in, E*out:
             Megatron-Core ``GroupedMLP.weight1``), ``"stacked_in_out"``
             (E*in, out: its ``weight2``, DBRX ``w2``) and
             ``"stacked_out_in"`` (E*out, in: DBRX ``w1``/``v1``).
             ``tinit.init_model_`` picks these from the model
             (``tinit.families.expert_layout``).
    fused    a fused q/k/v projection (role attn_qkv) is specified as its
             three parts, each a matrix of its own (``Context.part``,
             ``Context.fans``: fan_out of q = h * head_dim, of k and v =
             kv * head_dim), laid out along the output dim by ``qkv``
             (``tinit.families.FusedQKV``, read from the model's config
             by ``init_model_``; equal thirds when None) as
             ``InitSpec.segments``; three equal parts are one spec.
    L        ``n_layers``, the number of blocks of the parameter's stack; a
             block holds two residual branches (attention, MLP).
    d        ``d_model``, the residual stream width.

Roles (``tinit.roles.ROLES``): embedding, attn_q, attn_k, attn_v, attn_qkv
(fused), attn_out, mlp_in (gate/up/fc1), mlp_out (down/fc2), norm (norm
weight), bias, head (output/LM head), residual_gate (a learnable scalar or
vector multiplying a residual branch). Unless a scheme says otherwise, norm
weights are 1, biases 0 and residual gates 1. A state-space mixer's input
projections and convolution (ssm_in, ssm_conv) are matrices of their base role
mlp_in; its state parameters (``STATE_ROLES``: A_log, D, dt_bias) take the
model's own values under every recipe (``Scheme.spec``'s ``model_spec``).
"""

from __future__ import annotations

from tinit.schemes._completep import CompleteP, DepthMuP

# EXPERT_LAYOUTS, GROUPED_LAYOUTS, HIDDEN_ROLES, OUTPUT_ROLES and STATE_ROLES are public names but not
# API (not in __all__): the model walk and the tests read them.
from tinit.schemes._core import (
    BASE_ROLE,
    EXPERT_LAYOUTS as EXPERT_LAYOUTS,
    GROUPED_LAYOUTS as GROUPED_LAYOUTS,
    HIDDEN_ROLES as HIDDEN_ROLES,
    LAYOUTS,
    OUTPUT_ROLES as OUTPUT_ROLES,
    ROLES,
    STATE_ROLES as STATE_ROLES,
    Context,
    InitSpec,
    Scheme,
    UnknownNameError,
    fans,
    truncation_factor,
)
from tinit.schemes._deepnorm import DeepNorm, deepnorm_constants
from tinit.schemes._fan import KaimingNormal, KaimingUniform, LecunNormal, XavierNormal, XavierUniform
from tinit.schemes._mup import MuP
from tinit.schemes._nanogpt import ModdedNanoGPT
from tinit.schemes._normal import GPT2, DepthInit, Megatron, Normal
from tinit.schemes._olmo import OlmoFanIn, OlmoFullMegatron, OlmoLlama, OlmoLlamaDepth, OlmoNormalized
from tinit.schemes._residual import Fixup, ReZero
from tinit.schemes._small import Mitchell, Modern, SmallInit, WangInit

# The state-space mixers' own values (STATE_ROLES' defaults, HF Mamba's kaiming-uniform matrices), which
# tinit.families' records and the model walk build on: public names, not API.
from tinit.schemes._ssm import (
    TIME_STEP as TIME_STEP,
    dt_bias_spec as dt_bias_spec,
    kaiming_uniform_spec as kaiming_uniform_spec,
    log_arange_spec as log_arange_spec,
    uniform_spec as uniform_spec,
)
from tinit.schemes._t5 import T5
from tinit.schemes._umup import UnitMuP

SCHEMES = {
    s.name: s
    for s in (
        Normal(),
        GPT2(),
        Megatron(),
        DepthInit(),
        XavierUniform(),
        XavierNormal(),
        KaimingNormal(),
        KaimingUniform(),
        LecunNormal(),
        SmallInit(),
        WangInit(),
        Mitchell(),
        Modern(),
        DeepNorm(),
        ReZero(),
        Fixup(),
        MuP(),
        UnitMuP(),
        DepthMuP(),
        CompleteP(),
        OlmoLlama(),
        OlmoLlamaDepth(),
        OlmoFanIn(),
        OlmoNormalized(),
        OlmoFullMegatron(),
        T5(),
        ModdedNanoGPT(),
    )
}


def get(name: str) -> Scheme:
    """The scheme called ``name``.

    Raises:
        UnknownNameError: unknown name (the message lists the known ones); a KeyError
            and a ValueError.
    """
    try:
        return SCHEMES[name]
    except KeyError:
        # init_model_'s "hf" (the model's own init code) is no per-parameter scheme: say so where one is asked for
        hint = " ('hf' is init_model_'s: a Hugging Face model's own init, not a per-parameter scheme)"
        hint = hint if name == "hf" else ""
        raise UnknownNameError.of("tinit scheme", name, sorted(SCHEMES), note=hint) from None


def multipliers(name: str, **context) -> dict[str, float]:
    """``get(name).multipliers(**context)``: forward-pass multipliers of a recipe.

    Example: ``multipliers("deepnorm", n_layers=80)["residual_alpha"]`` is
    (2 * 80) ** 0.25 = 3.557.
    """
    return get(name).multipliers(**context)


__all__ = [
    "BASE_ROLE",
    "LAYOUTS",
    "ROLES",
    "SCHEMES",
    "Context",
    "InitSpec",
    "Scheme",
    "UnknownNameError",
    "deepnorm_constants",
    "fans",
    "get",
    "multipliers",
    "truncation_factor",
]
