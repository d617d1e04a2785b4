"""Several launches in order, scratch buffers between them, tuple results."""

from mimir.array import Dim, Tensor, float32, gpu, zeros

N = Dim("N")


@gpu
def two_heads(x: Tensor[float32, N, 9], w: Tensor[float32, 9, 4]):
    h = x @ w
    p = h.softmax()
    return p, h.sum(axis=0), (p * h).mean(axis=1, keepdims=True) + zeros((N, 1))


@gpu
def normalize_rows(x: Tensor[float32, N, 9]) -> Tensor[float32, N, 9]:
    return x / x.sum(axis=1, keepdims=True) - x.max()
