"""Proven gathers and scatters: a label's logit, embedding rows, histograms, scatter-add.

Tensor-level gathers: `table[ids]` (rows, NumPy's integer-array index) and
`take_along_axis`; index-level ones: `x[i, labels[i]]`. Each gather's index comes from an
integer input whose values are declared with `Range(lo, hi)` (checked at every call, assumed
by the checker), so every read is proven in bounds with no guard in the kernel. Scatters go
through `atomic_add`, which several program ids may apply to one element.
"""

from mimir.array import (
    Dim,
    Range,
    Tensor,
    atomic_add,
    float32,
    gpu,
    int32,
    maximum,
    program_id,
    take_along_axis,
    uint32,
)

N = Dim("N")
C = Dim("C")
V = Dim("V")
D = Dim("D")
B = Dim("B")


@gpu(grid=(N,))
def cross_entropy(
    logits: Tensor[float32, N, C], labels: Tensor[int32, N, Range(0, C)], loss: Tensor[float32, N]
):
    """`-log_softmax(logits)[i, labels[i]]`, one row per program id (max-shifted)."""
    i = program_id(0)
    m = logits[i, 0]
    for j in range(1, C):
        m = maximum(m, logits[i, j])
    total = 0.0
    for j in range(C):
        total += (logits[i, j] - m).exp()
    loss[i] = total.log() + m - logits[i, labels[i]]


@gpu(grid=(N, D))
def embedding(
    table: Tensor[float32, V, D], ids: Tensor[int32, N, Range(0, V)], out: Tensor[float32, N, D]
):
    i = program_id(0)
    j = program_id(1)
    out[i, j] = table[ids[i], j]


@gpu(grid=(N,))
def histogram(x: Tensor[int32, N, Range(0, B)], counts: Tensor[int32, B]):
    i = program_id(0)
    atomic_add(counts, x[i], 1)


@gpu(grid=(N,))
def histogram_guarded(x: Tensor[int32, N], counts: Tensor[uint32, B]):
    """No range on `x`: the guard proves the index, values outside 0..B-1 are dropped."""
    i = program_id(0)
    y = x[i]
    if 0 <= y < B:
        atomic_add(counts, y, 1)


@gpu(grid=(N, D))
def scatter_add_rows(
    ids: Tensor[int32, N, Range(0, V)], rows: Tensor[float32, N, D], grad: Tensor[float32, V, D]
):
    """The backward of `embedding`: row i of `rows` added into row ids[i] of `grad`."""
    i = program_id(0)
    j = program_id(1)
    atomic_add(grad, (ids[i], j), rows[i, j])


@gpu
def embedding_rows(
    table: Tensor[float32, V, D], ids: Tensor[int32, N, Range(0, V)]
) -> Tensor[float32, N, D]:
    return table[ids]


@gpu
def cross_entropy_mean(
    logits: Tensor[float32, N, C], labels: Tensor[int32, N, 1, Range(0, C)]
) -> Tensor[float32]:
    """The mean loss, as `F.cross_entropy`: the label's log-probability, gathered."""
    return -take_along_axis(logits.log_softmax(axis=-1), labels, axis=1).mean()


@gpu
def label_nll_from_a_vector(
    logits: Tensor[float32, N, C], labels: Tensor[int32, N, Range(0, C)]
) -> Tensor[float32, N, 1]:
    """Per-row loss with labels as a plain vector: the view `labels[:, None]` keeps their
    `Range`, so the gather is proven without a column-shaped parameter."""
    return -take_along_axis(logits.log_softmax(axis=-1), labels[:, None], axis=1)


@gpu
def gather_from_one_column(
    x: Tensor[float32, N, 1], idx: Tensor[int32, N, 1, Range(0, 1)]
) -> Tensor[float32, N, 1]:
    """`take_along_axis` over an axis of one element: every index is proven 0, so idx is
    never loaded. The element-wise launch read it 4 wide anyway, as its only view, an
    array of vectors that a WebGPU binding of fewer than 4 values cannot hold (N = 1: a
    validation error on WGSL and SPIR-V). Found by `benchmarks/fuzz.py --seed 61`."""
    return maximum(take_along_axis(x.exp(), idx, axis=1) + 2.0, x)
