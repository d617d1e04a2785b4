"""A naive matmul as an index-level kernel: one program per output, a loop over K."""

from mimir.array import Dim, Tensor, float32, gpu, program_id, rand, zeros

M = Dim("M")
N = Dim("N")
K = Dim("K")


@gpu(grid=(M, N))
def matmul(a: Tensor[float32, M, K], b: Tensor[float32, K, N], out: Tensor[float32, M, N]):
    i = program_id(0)
    j = program_id(1)
    acc = 0.0
    for k in range(K):
        acc += a[i, k] * b[k, j]
    out[i, j] = acc


if __name__ == "__main__":
    a, b = rand((3, 5), seed=1).to("gpu"), rand((5, 4), seed=2).to("gpu")
    out = zeros((3, 4)).to("gpu")
    matmul(a, b, out)
    print("matmul ->", list(out.shape))
