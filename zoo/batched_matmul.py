"""Batched matrix multiplication, `a @ b` over a leading batch axis: one tiled launch."""

from mimir.array import Dim, Tensor, float32, gpu

B = Dim("B")
M = Dim("M")
K = Dim("K")
N = Dim("N")


@gpu
def batched_matmul(
    a: Tensor[float32, B, M, K], b: Tensor[float32, B, K, N]
) -> Tensor[float32, B, M, N]:
    return a @ b


if __name__ == "__main__":
    from mimir.array import rand

    print(batched_matmul(rand((2, 2, 3), seed=1).to("gpu"), rand((2, 3, 2), seed=2).to("gpu")))
