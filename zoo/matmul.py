"""Matrix multiplication, `a @ b`: 64x64 tiles through workgroup memory, 4x4 outputs per thread."""

from mimir.array import Dim, Tensor, float32, gpu

M = Dim("M")
K = Dim("K")
N = Dim("N")


@gpu
def matmul(a: Tensor[float32, M, K], b: Tensor[float32, K, N]) -> Tensor[float32, M, N]:
    return a @ b


if __name__ == "__main__":
    from mimir.array import rand

    print(matmul(rand((2, 3), seed=1).to("gpu"), rand((3, 2), seed=2).to("gpu")))
