"""A bias laid out per row instead of per column: shapes [N, 8] and [N] cannot broadcast."""

from mimir.array import Dim, Tensor, float32, gpu, rand

N = Dim("N", min=2)


@gpu
def add_bias(x: Tensor[float32, N, 8], b: Tensor[float32, N]) -> Tensor[float32, N, 8]:
    y = x + b
    return y.relu()


if __name__ == "__main__":
    add_bias(rand((2, 8)).to("gpu"), rand((2,)).to("gpu"))
