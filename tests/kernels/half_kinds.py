"""bfloat16 results from every kind of launch: a whole sum (split, or one launch with a
handoff), a row max, a softmax, a scan, a row launch (layer norm), a mean beside a std,
a transpose, and a bfloat16 value a later matmul reads back from scratch (held as
float32). Each stored through float32 scratch and a packing launch."""

from mimir.array import Dim, InOut, Tensor, bfloat16, float32, gpu

N = Dim("N")
D = Dim("D")


@gpu
def bf16_total(x: Tensor[bfloat16, N, D]) -> Tensor[bfloat16]:
    return x.sum()


@gpu
def bf16_row_max(x: Tensor[bfloat16, N, D]) -> Tensor[bfloat16, N]:
    return x.max(axis=1)


@gpu
def bf16_softmax(x: Tensor[bfloat16, N, D]) -> Tensor[bfloat16, N, D]:
    return x.softmax(axis=1)


@gpu
def bf16_cumsum(x: Tensor[bfloat16, N, D]) -> Tensor[bfloat16, N, D]:
    return x.cumsum(axis=1)


@gpu
def bf16_layernorm(x: Tensor[bfloat16, N, D]) -> Tensor[bfloat16, N, D]:
    h = x.astype(float32)
    mu = h.mean(axis=1, keepdims=True)
    c = h - mu
    return (c * ((c * c).mean(axis=1, keepdims=True) + 1e-5).rsqrt()).astype(bfloat16)


@gpu
def bf16_mean_and_std(x: Tensor[bfloat16, N, D]) -> tuple[Tensor[bfloat16], Tensor[bfloat16, N]]:
    return x.mean(), x.astype(float32).std(axis=1).astype(bfloat16)


@gpu
def bf16_transposed(x: Tensor[bfloat16, N, D]) -> Tensor[bfloat16, D, N]:
    return x.T * 2.0


@gpu
def bf16_chain(x: Tensor[float32, N, D], w: Tensor[float32, D, D]) -> Tensor[float32, N, D]:
    h = (x @ w).astype(bfloat16)
    return h.astype(float32) @ w


@gpu
def bf16_rotate(p: InOut[Tensor[bfloat16, N, 4]], r: Tensor[float32, 4, 4]):
    """A thread per row reads the old row anywhere: stored through scratch, not packed
    in place."""
    p = (p.astype(float32) @ r).astype(bfloat16)


@gpu
def bf16_symmetrize(x: InOut[Tensor[bfloat16, D, D]]):
    """Each thread owns an element and its mirror image: stored through scratch."""
    x = x + x.T
