# fuzz finding (seed 35): tensor:argmax
# checker: clean
# crash: compile_source raised ValueError: zip() argument 2 is shorter than argument 1
from mimir.array import Dim, Tensor, bool_, gpu, int32

N = Dim("N", min=0)
M = Dim("M")
K = Dim("K")


@gpu
def kernel(x: Tensor[bool_, K, 1]) -> Tensor[int32, 1]:
    return x.argmax(axis=-2)
