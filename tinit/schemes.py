"""The scheme registry: per-parameter std and truncation from the literature.

A scheme maps (role, layer_idx, n_layers, shape, options) to an ``InitSpec``:
a truncated normal (mean, std, bounds ``trunc`` in units of std) or a constant.
Bounds here are in units of std (JAX/TensorFlow convention); ``fill_`` turns
them into the absolute bounds that the kernels take.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class InitSpec:
    """What to write into one parameter.

    Attributes:
        std: standard deviation of the parent normal, tensor units.
        trunc: truncation half-width in units of std (bounds mean -/+ trunc*std).
        mean: mean of the parent normal.
        constant: when not None, the parameter is filled with this value instead.
    """

    std: float = 0.0
    trunc: float = 2.0
    mean: float = 0.0
    constant: float | None = None


def _check_options(name: str, std: float, trunc: float) -> None:
    if not (math.isfinite(std) and std > 0):
        raise ValueError(f"scheme {name!r}: std must be finite and > 0, got {std}")
    if not trunc > 0:
        raise ValueError(f"scheme {name!r}: trunc (bounds in units of std) must be > 0, got {trunc}")


class Normal:
    """``normal``: every matrix and embedding from N(0, std^2) truncated at
    +-trunc std (default std 0.02, trunc 2); norm weights 1, biases 0.

    The 0.02 default is GPT-2's (Radford et al., 2019, released code) and
    BERT's (Devlin et al., 2019) initializer_range.
    """

    name = "normal"

    def spec(self, *, role: str, layer_idx=None, n_layers=None, shape=(),
             std: float = 0.02, trunc: float = 2.0) -> InitSpec:
        _check_options(self.name, std, trunc)
        if role == "norm":
            return InitSpec(constant=1.0)
        if role == "bias":
            return InitSpec(constant=0.0)
        return InitSpec(std=std, trunc=trunc)


class GPT2(Normal):
    """``gpt2``: ``normal`` plus residual output projections scaled by 1/sqrt(2L).

    std_residual = std / sqrt(2 * n_layers), applied to the matrices whose
    output is added to the residual stream (attention output, MLP down/c_proj),
    because each of the L blocks adds two such branches. Radford et al.,
    "Language Models are Unsupervised Multitask Learners" (2019), section 2.3;
    the same rule is Megatron-LM's ``scaled_init_method_normal`` (Shoeybi et
    al., 2019). The paper writes 1/sqrt(N) with N "the number of residual
    layers"; the released code and Megatron use N = 2L, as here.
    """

    name = "gpt2"

    def spec(self, *, role: str, layer_idx=None, n_layers=None, shape=(),
             std: float = 0.02, trunc: float = 2.0) -> InitSpec:
        base = super().spec(role=role, std=std, trunc=trunc)
        if role != "residual":
            return base
        if not isinstance(n_layers, int) or n_layers < 1:
            raise ValueError(f"scheme 'gpt2' needs n_layers >= 1 for residual projections, got {n_layers!r}")
        return InitSpec(std=std / math.sqrt(2.0 * n_layers), trunc=trunc)


SCHEMES = {s.name: s for s in (Normal(), GPT2())}


def get(name: str):
    """The scheme called ``name``.

    Raises:
        KeyError: unknown name (the message lists the known ones).
    """
    try:
        return SCHEMES[name]
    except KeyError:
        raise KeyError(f"unknown tinit scheme {name!r}; known: {sorted(SCHEMES)}") from None
