# fuzz finding (seed 35): tensor:argmax
# checker: clean
# crash: compile_source raised ValueError: zip() argument 2 is shorter than argument 1
from mimir.array import Dim, Tensor, gpu, int32, uint32

N = Dim("N", min=2)
M = Dim("M", multiple_of=8)
K = Dim("K")


@gpu
def kernel(x: Tensor[uint32, M, 1]) -> Tensor[int32, 1]:
    return (x.argmax(axis=-2)).relu()
