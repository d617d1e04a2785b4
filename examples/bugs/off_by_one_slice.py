"""A slice one past the end: x[1:N + 1] reads past a tensor of N elements."""

from mimir.array import Dim, Tensor, float32, gpu, rand

N = Dim("N")


@gpu
def shift_left(x: Tensor[float32, N]) -> Tensor[float32, N]:
    return x[1 : N + 1]


if __name__ == "__main__":
    shift_left(rand((1,)).to("gpu"))
