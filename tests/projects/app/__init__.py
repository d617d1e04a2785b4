"""A package that re-exports a Dim and a kernel from its modules."""

from .dims import D_IN, N
from .layers import linear

__all__ = ["D_IN", "N", "linear"]
