"""SiLU (swish), `x * sigmoid(x)`: one element-wise launch."""

from mimir.array import Dim, Tensor, float32, gpu

N = Dim("N")


@gpu
def silu(x: Tensor[float32, N]) -> Tensor[float32, N]:
    return x * x.sigmoid()


if __name__ == "__main__":
    from mimir.array import rand

    print(silu(rand((5,), seed=1, low=-3.0, high=3.0).to("gpu")))
