"""The sizes, declared once for the whole project."""

from mimir.array import Dim

N = Dim("N", min=2, max=4096)
D_IN = 784
D_OUT = 128
