"""Linear layer: `x @ w + b`, one tiled matmul launch with the bias fused into its epilogue."""

from mimir.array import Dim, Tensor, float32, gpu

N = Dim("N")
K = Dim("K")
M = Dim("M")


@gpu
def linear(
    x: Tensor[float32, N, K], w: Tensor[float32, K, M], b: Tensor[float32, M]
) -> Tensor[float32, N, M]:
    return x @ w + b


if __name__ == "__main__":
    from mimir.array import rand

    x, w, b = rand((4, 3), seed=1), rand((3, 2), seed=2), rand((2,), seed=3)
    print(linear(x.to("gpu"), w.to("gpu"), b.to("gpu")))
