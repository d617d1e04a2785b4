"""A package that re-exports its model, as published packages do."""

from .model import Tower

__all__ = ["Tower"]
