"""Row-wise kernels: softmax with the row in registers when its length is proven small,
norms whose row reductions and output are one launch (the row unrolled when it divides)."""

from mimir.array import Dim, Tensor, float16, float32, gpu

N = Dim("N")
D = Dim("D", max=2048)
W = Dim("W", max=4096)


@gpu
def softmax_row_1000(x: Tensor[float32, N, 1000]) -> Tensor[float32, N, 1000]:
    return x.softmax()


@gpu
def log_softmax_row_512(x: Tensor[float32, N, 512]) -> Tensor[float32, N, 512]:
    return x.log_softmax()


@gpu
def softmax_bounded_row(x: Tensor[float32, N, D]) -> Tensor[float32, N, D]:
    return (x * 0.5).softmax() * 2.0


@gpu
def log_softmax_wide_bounded(x: Tensor[float32, N, W]) -> Tensor[float32, N, W]:
    # up to 4 vectors a thread, most past a short row: each skipped under one guard
    return x.log_softmax()


@gpu
def softmax_short_half(x: Tensor[float16, N, 40]) -> Tensor[float16, N, 40]:
    return x.softmax()


@gpu
def layer_norm_512(
    x: Tensor[float32, N, 512], gamma: Tensor[float32, 512], beta: Tensor[float32, 512]
) -> Tensor[float32, N, 512]:
    mean = x.mean(axis=-1, keepdims=True)
    centered = x - mean
    var = (centered * centered).mean(axis=-1, keepdims=True)
    return centered * (var + 1e-5).rsqrt() * gamma + beta


@gpu
def rms_norm_bounded(x: Tensor[float32, N, D], w: Tensor[float32, D]) -> Tensor[float32, N, D]:
    return x / ((x * x).mean(axis=-1, keepdims=True) + 1e-6).sqrt() * w


@gpu
def max_shifted_half(x: Tensor[float16, N, 40]) -> Tensor[float16, N, 40]:
    return x - x.max(axis=-1, keepdims=True)


@gpu
def layer_norm_1000(
    x: Tensor[float32, N, 1000], gamma: Tensor[float32, 1000], beta: Tensor[float32, 1000]
) -> Tensor[float32, N, 1000]:
    """A literal row that 128 threads do not divide: held in registers 4 wide all the same
    (threads past the row's 250 vectors hold none), so x is read once."""
    mean = x.mean(axis=-1, keepdims=True)
    centered = x - mean
    var = (centered * centered).mean(axis=-1, keepdims=True)
    return centered * (var + 1e-5).rsqrt() * gamma + beta


@gpu
def centred_then_transposed(x: Tensor[float32, 4, 4]) -> Tensor[float32, 4, 4]:
    """Element (i, j) reads row j's mean, through the transpose: a `row` launch holds only
    its own row's mean, so the means go through a buffer (it was once one row launch, and
    wrong: `schedule._row_groups`, `own_row`)."""
    return (x - x.mean(axis=1, keepdims=True)).T + 1.0


@gpu
def minus_maxima_along_rows(x: Tensor[float32, N, N]) -> Tensor[float32, N, N]:
    """NumPy broadcasting lines the (N,) maxima up with the last axis: element (i, j) reads
    row j's max, not row i's, so this is no row launch either."""
    return x - x.max(axis=1)
