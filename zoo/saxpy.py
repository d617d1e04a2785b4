"""SAXPY, `a * x + y` with a scalar `a`: the BLAS level-1 classic, one element-wise launch."""

from mimir.array import Dim, Tensor, float32, gpu

N = Dim("N")


@gpu
def saxpy(a: float, x: Tensor[float32, N], y: Tensor[float32, N]) -> Tensor[float32, N]:
    return a * x + y


if __name__ == "__main__":
    from mimir.array import ones, rand

    print(saxpy(2.0, rand((4,), seed=1).to("gpu"), ones((4,)).to("gpu")))
