"""Whole reductions of per-row values beside whole reductions of another input (a weighted
mean of per-row losses), and sizes spelled as sums and halves of dims.

Each launch that reads another's result runs after it: `w.sum()` is reduced before the row
launch whose last workgroup divides by it (`mimir.codegen.launch_order`).
"""

from mimir.array import Dim, Range, Tensor, concatenate, float32, gpu, int32, take_along_axis

N = Dim("N", min=1)
C = Dim("C", min=1)
D = Dim("D", multiple_of=2)
HALF = Dim("HALF")


@gpu
def row_max_over_total(x: Tensor[float32, N, C], w: Tensor[float32, N]) -> Tensor[float32]:
    return (x.max(axis=1) * w).sum() / w.sum()


@gpu
def row_max_sum_over_total(x: Tensor[float32, N, C], w: Tensor[float32, N]) -> Tensor[float32]:
    return x.max(axis=1).sum() / w.sum()


@gpu
def weighted_plus_total(x: Tensor[float32, N, C], w: Tensor[float32, N]) -> Tensor[float32]:
    return (x.max(axis=1) * w).sum() + w.sum()


@gpu
def row_sum_mean_over_max(x: Tensor[float32, N, C], w: Tensor[float32, N]) -> Tensor[float32]:
    return (x.sum(axis=1) * w).mean() / w.max()


@gpu
def row_max_sum_plus_mean(x: Tensor[float32, N, C], w: Tensor[float32, N]) -> Tensor[float32]:
    return x.max(axis=1).sum() + w.mean()


@gpu
def weighted_cross_entropy(
    logits: Tensor[float32, N, C], target: Tensor[int32, N, Range(0, C)], w: Tensor[float32, N]
) -> Tensor[float32]:
    """attorch's weighted cross-entropy: per-row losses times their weights, summed, over
    the sum of the weights."""
    top = logits.max(axis=1, keepdims=True)
    lse = (logits - top).exp().sum(axis=1).log() + top[:, 0]
    picked = take_along_axis(logits, target[:, None], 1)[:, 0]
    return ((lse - picked) * w).sum() / w.sum()


@gpu
def glu_halves(x: Tensor[float32, N, D]) -> Tensor[float32, N, D // 2]:
    return x[:, : D // 2] * x[:, D // 2 :]


@gpu
def rotate_half(q: Tensor[float32, 2 * HALF], c: Tensor[float32, HALF]) -> Tensor[float32, 2 * HALF]:
    return concatenate((q[HALF:] * c, q[:HALF] * c))


@gpu
def softmax_whole_max(x: Tensor[float32, N, C]) -> Tensor[float32]:
    """A whole reduction of a row launch's value at every element (not one per row): through
    scratch and a reduce launch, never the row's first element handed on as its value."""
    return x.softmax(axis=-1).softmax(axis=-1).max()


@gpu
def row_moments_of_each_other(x: Tensor[float32, N, C]) -> Tensor[float32]:
    """The mean of per-row values times a max of other per-row values of the same rows: the
    mean's epilogue reads a launch that reads the row launch, so it is not folded into it."""
    s = x.softmax(axis=-1) * x
    return s.std(axis=1).mean() * s.var(axis=1).max()


@gpu
def weighted_over_row_max(x: Tensor[float32, N, C], w: Tensor[float32, N]) -> Tensor[float32]:
    m = x.max(axis=1)
    return (x.sum(axis=1) * w).sum() / (m.max() + 1.0)


@gpu
def weighted_minus_row_min(x: Tensor[float32, N, C], w: Tensor[float32, N]) -> Tensor[float32]:
    s = x.softmax(axis=-1) * x
    return (s.sum(axis=1) * w).mean() - s.max(axis=1).min()
