"""Diagnostics: the code registry, the `Diagnostic` type and its renderers."""

from mimir.diagnostics.codes import REGISTRY, Code
from mimir.diagnostics.diagnostic import Diagnostic, Label, Span

__all__ = ["REGISTRY", "Code", "Diagnostic", "Label", "Span"]
