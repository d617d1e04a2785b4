"""Python names that are reserved words in MSL or WGSL are renamed in the kernels."""

from mimir.array import Dim, Tensor, float32, gpu

loop = Dim("loop")


@gpu
def kernel(
    device: Tensor[float32, loop],
    var: Tensor[float32, loop],
    fn: Tensor[float32, loop],
    half: Tensor[float32, loop],
    constant: float,
) -> Tensor[float32, loop]:
    return (device + var) * fn - half * constant
