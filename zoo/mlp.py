"""Two-layer perceptron with GELU: two tiled matmul launches and a scratch buffer between them."""

from mimir.array import Dim, Tensor, float32, gpu

N = Dim("N")
D_IN = Dim("D_IN")
HIDDEN = Dim("HIDDEN")
D_OUT = Dim("D_OUT")


@gpu
def mlp(
    x: Tensor[float32, N, D_IN],
    w1: Tensor[float32, D_IN, HIDDEN],
    b1: Tensor[float32, HIDDEN],
    w2: Tensor[float32, HIDDEN, D_OUT],
    b2: Tensor[float32, D_OUT],
) -> Tensor[float32, N, D_OUT]:
    return (x @ w1 + b1).gelu() @ w2 + b2


if __name__ == "__main__":
    from mimir.array import rand

    x, w1, b1 = rand((2, 3), seed=1), rand((3, 8), seed=2), rand((8,), seed=3)
    w2, b2 = rand((8, 2), seed=4), rand((2,), seed=5)
    print(mlp(*(t.to("gpu") for t in (x, w1, b1, w2, b2))))
