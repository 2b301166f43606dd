"""argparse value types shared by ``tinit init`` and ``tinit report``.

A bad number is refused by argparse itself, naming the flag (``argument --layers: ...``, exit 2),
not later by a config class under its field's name (``GPTConfig.n_layers``), which the user never
typed.
"""

from __future__ import annotations

import argparse

__all__ = ["positive_int", "seed_int"]

SEED_LIMIT = 2**64  # tinit's seeds are Philox keys: two 32-bit words (tinit._plan's check_seed)


def positive_int(text: str) -> int:
    """An int >= 1 (a count or a size: ``--layers``, ``--d-model``, ``--heads``, ``--batch``, ...).

    Args:
        text: the argument as typed.

    Returns:
        The int.

    Raises:
        argparse.ArgumentTypeError: not an int, or below 1 (argparse prefixes the flag).
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an int >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an int >= 1, got {value}")
    return value


def seed_int(text: str) -> int:
    """A seed: an int in [0, 2**64) (``--seed``).

    Args:
        text: the argument as typed.

    Returns:
        The int.

    Raises:
        argparse.ArgumentTypeError: not an int, or outside [0, 2**64).
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an int in [0, 2**64), got {text!r}") from None
    if not 0 <= value < SEED_LIMIT:
        raise argparse.ArgumentTypeError(f"expected an int in [0, 2**64), got {value}")
    return value
