"""Layer normalisation: keepdims reductions, broadcasts, rsqrt; statistics as outputs."""

from mimir.array import Dim, Tensor, float32, gpu, int32

N = Dim("N")
D = Dim("D")


@gpu
def layernorm(
    x: Tensor[float32, N, D], gamma: Tensor[float32, D], beta: Tensor[float32, D]
) -> Tensor[float32, N, D]:
    mean = x.mean(axis=-1, keepdims=True)
    centered = x - mean
    var = (centered * centered).mean(axis=-1, keepdims=True)
    return centered * (var + 1e-5).rsqrt() * gamma + beta


@gpu
def rmsnorm(x: Tensor[float32, N, 48], weight: Tensor[float32, 48]) -> Tensor[float32, N, 48]:
    return x / (x * x).mean(axis=1, keepdims=True).sqrt() * weight


@gpu
def layer_norm_with_stats(
    x: Tensor[float32, N, D], gamma: Tensor[float32, D], beta: Tensor[float32, D]
) -> tuple[Tensor[float32, N, D], Tensor[float32, N], Tensor[float32, N]]:
    """PyTorch's `native_layer_norm`: the normalised rows, and the mean and 1/std the
    backward pass keeps. One launch: a workgroup per row writes all three."""
    mean = x.mean(axis=-1)
    centered = x - mean[:, None]
    rstd = ((centered * centered).mean(axis=-1) + 1e-5).rsqrt()
    return centered * rstd[:, None] * gamma + beta, mean, rstd


@gpu
def shares_and_total(x: Tensor[float32, N, D]) -> tuple[Tensor[float32, N, D], Tensor[float32]]:
    """Row sums that the shares and a whole sum read: one row launch, whose last
    workgroup sums them (a fence hands them off, or on WGSL tagged atomic words); with
    no handoff the row launch stores them and the sum reads that buffer."""
    s = x.sum(axis=-1)
    return x / s[:, None], s.sum()


@gpu
def short_row_stats(
    x: Tensor[float32, N, 6],
) -> tuple[Tensor[float32, N, 6], Tensor[float32, N], Tensor[int32, N]]:
    """Rows of 6: one launch, a thread per row holding it in registers, writes the
    centred rows, each row's std and where its max is."""
    return x - x.mean(axis=1, keepdims=True), x.std(axis=1), x.argmax(axis=1)
