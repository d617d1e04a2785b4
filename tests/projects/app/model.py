"""Host code: a kernel imported through the package's re-export still gets the device check."""

from mimir.array import zeros

from app import linear
from app.dims import D_IN


def run():
    x = zeros((8, D_IN))
    w = zeros((D_IN, 128)).to("gpu")
    return linear(x, w)  # E: GPU060


def run_on_gpu():
    x = zeros((8, D_IN)).to("gpu")
    w = zeros((D_IN, 128)).to("gpu")
    return linear(x, w)
