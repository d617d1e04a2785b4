"""Matrix transpose: `x.T`, one launch whose reads are index arithmetic (no copy kernel)."""

from mimir.array import Dim, Tensor, float32, gpu

N = Dim("N")
M = Dim("M")


@gpu
def transpose(x: Tensor[float32, N, M]) -> Tensor[float32, M, N]:
    return x.T


if __name__ == "__main__":
    from mimir.array import rand

    print(transpose(rand((2, 3), seed=1).to("gpu")))
