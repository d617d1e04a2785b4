"""Index-level guards with `and`, `or`, `not` and chained comparisons (Python's short-circuit).

Labels are random in -8..8 and C is small, so every guard both holds and fails; a right
operand that reads (`x[i + 1]`, `logits[i, y]`) must run only where the left one lets it,
which the backends do with branches.
"""

from mimir.array import Dim, Tensor, bool_, float32, gpu, int32, program_id

N = Dim("N")
C = Dim("C")


@gpu(grid=(N,))
def gather_and(logits: Tensor[float32, N, C], labels: Tensor[int32, N], out: Tensor[float32, N]):
    i = program_id(0)
    y = labels[i]
    if 0 <= y and y < C:
        out[i] = logits[i, y]
    else:
        out[i] = 0.0


@gpu(grid=(N,))
def gather_chain(logits: Tensor[float32, N, C], labels: Tensor[int32, N], out: Tensor[float32, N]):
    i = program_id(0)
    y = labels[i]
    if 0 <= y < C:
        out[i] = logits[i, y]
    else:
        out[i] = 0.0


@gpu(grid=(N,))
def gather_or_not(logits: Tensor[float32, N, C], labels: Tensor[int32, N], out: Tensor[float32, N]):
    i = program_id(0)
    y = labels[i]
    if y < 0 or not y < C:
        out[i] = -1.0
    else:
        out[i] = logits[i, y]


@gpu(grid=(N,))
def rising(x: Tensor[float32, N], out: Tensor[float32, N]):
    i = program_id(0)
    if i + 1 < N and x[i + 1] > x[i]:
        out[i] = x[i + 1] - x[i]
    else:
        out[i] = 0.0


@gpu(grid=(N,))
def positive_hit(logits: Tensor[float32, N, C], labels: Tensor[int32, N], hit: Tensor[bool_, N]):
    i = program_id(0)
    y = labels[i]
    hit[i] = 0 <= y < C and logits[i, y] > 0.0


@gpu(grid=(N,))
def count_near(logits: Tensor[float32, N, C], labels: Tensor[int32, N], count: Tensor[int32, N]):
    i = program_id(0)
    y = labels[i]
    c = 0
    for j in range(C):
        if j == y or j + 1 < C and logits[i, j + 1] > 0.5 or not -0.5 < logits[i, j] <= 0.5:
            c += 1
    count[i] = c
