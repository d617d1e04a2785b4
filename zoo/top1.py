"""Top-1 per row: the largest value and its index (the first one on ties), as `torch.max(x, 1)`.

Index-level: one program per row scans the row. Rewrite with `argmax` when it lands.
"""

from mimir.array import Dim, Tensor, float32, gpu, int32, program_id

N = Dim("N")
C = Dim("C", min=1)

WAITING_FOR = "argmax"


@gpu(grid=(N,))
def top1(x: Tensor[float32, N, C], value: Tensor[float32, N], index: Tensor[int32, N]):
    i = program_id(0)
    best = x[i, 0]
    at = 0
    for j in range(1, C):
        if x[i, j] > best:
            best = x[i, j]
            at = j
    value[i] = best
    index[i] = at


if __name__ == "__main__":
    from mimir.array import rand, zeros

    value, index = zeros((2,)).to("gpu"), zeros((2,), dtype=int32).to("gpu")
    top1(rand((2, 5), seed=1).to("gpu"), value, index)
    print(value, index)
