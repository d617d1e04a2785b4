"""Inclusive prefix sum (scan) along each row: `out[r, i] = x[r, 0] + ... + x[r, i]`.

Index-level: one program per element sums its prefix (quadratic work, fine for
short rows). Rewrite with `cumsum` when it lands.
"""

from mimir.array import Dim, Tensor, float32, gpu, program_id

R = Dim("R")
N = Dim("N")

WAITING_FOR = "cumsum"


@gpu(grid=(R, N))
def prefix_sum(x: Tensor[float32, R, N], out: Tensor[float32, R, N]):
    r = program_id(0)
    i = program_id(1)
    acc = 0.0
    for j in range(i + 1):
        acc += x[r, j]
    out[r, i] = acc


if __name__ == "__main__":
    from mimir.array import ones, zeros

    out = zeros((1, 5)).to("gpu")
    prefix_sum(ones((1, 5)).to("gpu"), out)
    print(out)
