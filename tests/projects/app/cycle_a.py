"""One half of an import cycle."""

from .cycle_b import B  # E: GPU080

A = B + 1
