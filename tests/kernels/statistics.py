"""Arg-reductions and moments: `argmax`/`argmin` (first index wins) and `var`/`std`."""

from mimir.array import Dim, Tensor, float16, float32, gpu, int32

N = Dim("N")
C = Dim("C")
S = Dim("S", min=2)


@gpu
def top1_accuracy(logits: Tensor[float32, N, C], labels: Tensor[int32, N]) -> Tensor[float32]:
    hit = logits.argmax(axis=1) == labels
    return hit.astype(float32).mean()


@gpu
def argmax_rows(x: Tensor[float32, N, C]) -> Tensor[int32, N]:
    return x.argmax(axis=-1)


@gpu
def argmin_columns(x: Tensor[int32, N, C]) -> Tensor[int32, 1, C]:
    return (x % 5).argmin(axis=0, keepdims=True)


@gpu
def argmax_flat(x: Tensor[float16, N, 7]) -> Tensor[int32]:
    return x.argmax()


@gpu
def argmax_bools(x: Tensor[int32, N, C]) -> Tensor[int32, N]:
    return (x > 0).argmax(axis=1) + (x < 0).argmin(axis=1)


@gpu
def variance_rows(x: Tensor[float32, N, C]) -> Tensor[float32, N]:
    return x.var(axis=1)


@gpu
def sample_std(x: Tensor[float32, S, C]) -> Tensor[float32, C]:
    return x.std(axis=0, ddof=1)


@gpu
def standardise(x: Tensor[float32, N, C]) -> Tensor[float32, N, C]:
    return (x - x.mean(axis=-1, keepdims=True)) / (x.std(axis=-1, keepdims=True) + 1e-3)


@gpu
def var_all(x: Tensor[int32, N, 5]) -> Tensor[float32]:
    return x.var()


@gpu
def std_half(x: Tensor[float16, N, C]) -> Tensor[float16, N]:
    return (x + 100.0).std(axis=1)


@gpu
def arg_with_nans(x: Tensor[float32, N, C]) -> Tensor[int32, N]:
    # log and sqrt of the negative inputs are nan: the first nan wins, as in NumPy
    return x.log().argmax(axis=1) * 100 + x.sqrt().argmin(axis=1)


@gpu
def var_far_from_zero(x: Tensor[float32, N, C]) -> Tensor[float32, N]:
    # two passes: the mean is subtracted first, so an offset of 1000 costs no digits
    return (x + 1000.0).var(axis=1) * 1000.0


@gpu
def top1_of_ten(logits: Tensor[float32, N, 10], labels: Tensor[int32, N]) -> Tensor[int32]:
    # 10 classes: one thread per row makes both passes alone (no threadgroup tree)
    return (logits.argmax(axis=1) == labels).astype(int32).sum()


@gpu
def small_rows(x: Tensor[int32, N, 5], y: Tensor[float32, N, 3]) -> Tensor[float32, N]:
    return (x % 3).argmin(axis=1).astype(float32) + y.std(axis=1, ddof=1) + x.var(axis=1)


@gpu
def batch_norm(x: Tensor[float32, S, C]):
    mean = x.mean(axis=0)
    var = x.var(axis=0)
    return (x - mean) / (var + 1e-5).sqrt(), mean, var


@gpu
def whole_statistics(x: Tensor[float32, N, C]):
    return x.mean(), x.std(), x.max()


@gpu
def scaled_with_spread(x: Tensor[float32, N, C]):
    return x * 0.5 + 1.0, x.std(), x.argmin()
