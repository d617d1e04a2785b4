"""Index-level kernels (`@gpu(grid=...)`): one program per grid point, element reads and writes.

A naive matmul with a loop-carried accumulator, a guarded neighbour read with an
else branch, loops with a start and a step and a data-dependent condition, and
integer floor division and modulo on negative values (Python's semantics).
"""

from mimir.array import Dim, Tensor, float32, gpu, int32, maximum, program_id

N = Dim("N")
M = Dim("M")
K = Dim("K")


@gpu(grid=(M, N))
def naive_matmul(a: Tensor[float32, M, K], b: Tensor[float32, K, N], out: Tensor[float32, M, N]):
    i = program_id(0)
    j = program_id(1)
    acc = 0.0
    for k in range(K):
        acc += a[i, k] * b[k, j]
    out[i, j] = acc


@gpu(grid=(N,))
def shift_guarded(x: Tensor[float32, N], out: Tensor[float32, N]):
    i = program_id(0)
    if i + 1 < N:
        out[i] = x[i + 1]
    else:
        out[i] = -1.5


@gpu(grid=(M,))
def row_stats(x: Tensor[float32, M, N], best: Tensor[float32, M], count: Tensor[int32, M]):
    i = program_id(0)
    m = x[i, 0]
    c = 0
    for j in range(1, N):
        m = maximum(m, x[i, j])
    for j in range(0, N, 2):
        if x[i, j] > 0.0:
            c += 1
    best[i] = m
    count[i] = c


@gpu(grid=(N,))
def floor_ops(x: Tensor[int32, N], out: Tensor[int32, N]):
    i = program_id(0)
    out[i] = (x[i] - 7) // 3 + (x[i] - 7) % 3 + (i - 2) // 2


@gpu(grid=(N,))
def scale(x: Tensor[float32, N], out: Tensor[float32, N], alpha: float):
    i = program_id(0)
    out[i] = x[i] * alpha + 1.0
