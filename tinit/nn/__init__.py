"""Drop-in replacements for ``torch.nn`` pieces on tinit's stream: ``tinit.nn.init``."""

from tinit.nn import init

__all__ = ["init"]
