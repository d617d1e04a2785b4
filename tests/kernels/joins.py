"""`concatenate` and `stack` over lists of tensors (`concatenate([a, b])`), as NumPy takes
them: the same ops as over tuples, positional and by keyword."""

from mimir.array import Dim, Tensor, concatenate, float32, gpu, stack

N = Dim("N")
M = Dim("M")


@gpu
def concat_list(a: Tensor[float32, N, 4], b: Tensor[float32, M, 4]) -> Tensor[float32, N + M, 4]:
    return concatenate([a, b * 2.0], axis=0)


@gpu
def stack_list(a: Tensor[float32, N], b: Tensor[float32, N]) -> Tensor[float32, N, 3]:
    return stack(tensors=[a, b, a - b], axis=1)
