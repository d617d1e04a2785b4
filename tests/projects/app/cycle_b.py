"""The other half of an import cycle."""

from .cycle_a import A  # E: GPU080

B = 2
