"""What state-space mixers' own code gives their parameters, as ``InitSpec``\\ s.

The state parameters of a Mamba-style mixer (roles ``STATE_ROLES``: ``A_log``, ``D``, ``dt_bias``)
set the recurrence's time constants; every recipe writes the model's values for them
(``Scheme.spec``'s ``model_spec``), these functions' by default. HF's Mamba code also draws some
matrices its own way (``kaiming_uniform_spec``); ``tinit.families`` says where. Sources:
transformers 5.24 ``MambaMixer.init_mamba_weights``, ``Mamba2Mixer.init_mamba2_weights`` and the
``_init_weights`` of Mamba, Mamba-2, Jamba, Bamba, Falcon-H1, GraniteMoeHybrid, Nemotron-H and
Qwen3-Next (mamba_ssm, the reference implementation, is a CUDA build: HF's code is the oracle).
"""

from __future__ import annotations

import math

import torch

from tinit.schemes._core import InitSpec, fans

# (time_step_min, time_step_max, time_step_floor): mamba_ssm's dt_min, dt_max and dt_init_floor
# (``Mamba2.__init__``), the defaults of HF's MambaConfig, Mamba2Config and NemotronHConfig.
TIME_STEP = (0.001, 0.1, 1e-4)
_SQRT3 = math.sqrt(3.0)


def log_arange_spec(shape: tuple[int, ...]) -> InitSpec:
    """``A_log`` = log(1, 2, ..., n) along the last dim of ``shape`` (n = ``shape[-1]``), repeated
    over the other dims: the S4D-real initialisation A = -(1..n) (Gu, Goel, Gupta and Ré, "On the
    Parameterization and Initialization of Diagonal State Space Models", 2022), as HF writes it for
    Mamba's (d_inner, N) ``A_log`` (``MambaMixer.init_mamba_weights``, Jamba) and Mamba-2's (H,)
    one (``Mamba2Mixer.init_mamba2_weights``, Bamba, Falcon-H1, GraniteMoeHybrid, Nemotron-H).

    The values are ``torch.log`` of the float32 ``arange(1, n + 1)`` the model's code computes, so
    a float32 parameter holds its eager build's bits; one constant per position of the last dim.

    Args:
        shape: the parameter's shape, at least 1 dim, every size >= 1.

    Returns:
        An ``InitSpec`` of n constant parts along the last dim (one constant when n == 1).

    Raises:
        ValueError: a shape of no dims or with a zero size.
    """
    if not shape or min(shape) < 1:
        raise ValueError(f"A_log = log(1..n) needs a shape of >= 1 dims of sizes >= 1, got {tuple(shape)}")
    values = torch.log(torch.arange(1, shape[-1] + 1, dtype=torch.float32)).tolist()
    if len(values) == 1:
        return InitSpec(constant=values[0])
    return InitSpec(parts=tuple(InitSpec(constant=v) for v in values), split_dim=len(shape) - 1)


def uniform_spec(low: float, high: float, map: tuple | None = None) -> InitSpec:
    """U(low, high), then the per-element ``map`` (``InitSpec.map``) when given.

    Raises:
        ValueError: bounds that are not finite with low < high.
    """
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ValueError(f"a uniform needs finite bounds low < high, got ({low!r}, {high!r})")
    return InitSpec(
        std=(high - low) / (2.0 * _SQRT3), mean=(low + high) / 2.0, trunc=_SQRT3, distribution="uniform", map=map
    )


def dt_bias_spec(
    time_step_min: float = TIME_STEP[0], time_step_max: float = TIME_STEP[1], time_step_floor: float = TIME_STEP[2]
) -> InitSpec:
    """``dt_bias`` = softplus^-1(dt) with dt = max(exp(u), floor), u ~ U[log min, log max]: dt
    log-uniform in [min, max], so that softplus(dt_bias) starts at dt.

    HF ``Mamba2Mixer.init_mamba2_weights`` (``torch.rand`` into a temporary, then ``exp``,
    ``clamp(min=time_step_floor)`` and ``dt + log(-expm1(-dt))``), ``NemotronHPreTrainedModel._init_weights``
    and ``MambaMixer.init_mamba_weights`` (Mamba's ``dt_proj.bias``); mamba_ssm ``Mamba2.__init__``.
    A uniform draw of the parameter's stream mapped per element (``InitSpec.map``
    ``("softplus_inverse_exp", floor)``); min == max gives the constant.

    Args:
        time_step_min, time_step_max: 0 < min <= max, finite (the config's ``time_step_min`` /
            ``time_step_max``; mamba_ssm's 0.001 and 0.1 by default).
        time_step_floor: >= 0, finite (``time_step_floor``, 1e-4).

    Raises:
        ValueError: bounds outside those ranges.
    """
    low, high, floor = (float(v) for v in (time_step_min, time_step_max, time_step_floor))
    if not (0 < low <= high < math.inf and 0 <= floor < math.inf):
        raise ValueError(
            "dt_bias needs 0 < time_step_min <= time_step_max and time_step_floor >= 0, all finite, got "
            f"{time_step_min!r}, {time_step_max!r}, {time_step_floor!r}"
        )
    if low == high:
        dt = max(low, floor)
        return InitSpec(constant=dt + math.log(-math.expm1(-dt)))
    return uniform_spec(math.log(low), math.log(high), map=("softplus_inverse_exp", floor))


def kaiming_uniform_spec(shape: tuple[int, ...], a: float = math.sqrt(5.0), scale: float = 1.0) -> InitSpec:
    """``torch.nn.init.kaiming_uniform_(w, a)`` (leaky-ReLU gain sqrt(2 / (1 + a^2)), bound
    gain * sqrt(3 / fan_in)), times ``scale``: with a = sqrt(5) the bound is 1 / sqrt(fan_in), as
    HF's Mamba and Mamba-2 draw ``conv1d`` and ``out_proj`` (``MambaPreTrainedModel._init_weights``,
    ``Mamba2PreTrainedModel._init_weights``; Nemotron-H's ``out_proj`` with scale 1 / sqrt(L)).

    Args:
        shape: the weight's shape (>= 2 dims; fan_in as ``fans``: dim 1 times the receptive field).
        a: the negative slope, default sqrt(5).
        scale: > 0, multiplies the values.

    Raises:
        ValueError: a shape of < 2 dims, a zero fan.
    """
    fan_in, _ = fans(tuple(shape))
    std = scale * math.sqrt(2.0 / (1.0 + a * a)) / math.sqrt(fan_in)
    return InitSpec(std=std, trunc=_SQRT3, distribution="uniform")


def state_spec(role: str, shape: tuple[int, ...]) -> InitSpec:
    """The default of a state role (``STATE_ROLES``) with mamba_ssm's time steps: ssm_a
    ``log_arange_spec``, ssm_d 1 (HF ``init.ones_(D)``), ssm_dt ``dt_bias_spec()``."""
    if role == "ssm_a":
        return log_arange_spec(shape)
    if role == "ssm_d":
        return InitSpec(constant=1.0)
    return dt_bias_spec()
