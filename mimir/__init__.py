"""Mimir: typed-Python GPU kernels, proven before they run."""

__version__ = "0.1.0"
