"""Several results and in-place updates: `-> tuple[...]` and `InOut[Tensor[...]]`.

A layer norm's statistics (mean and reciprocal standard deviation) returned as a
tuple, row statistics as a `NamedTuple` (its fields name the outputs), softmax with
its log-sum-exp, an Adam step that updates the parameters and both moments in place
(tensor level), one that needs its old value after the update (so it is written back
by a copy launch), a swap of two `InOut` tensors, a parameter overwritten by another,
`x + x.T` in place (threads would race: copied back), and a KV-cache append at index
level: each program writes one element of the new rows into the cache at `pos`.
"""

from typing import NamedTuple

from mimir.array import Dim, InOut, Tensor, float32, gpu, program_id

N = Dim("N")
D = Dim("D")
T = Dim("T")
S = Dim("S")
H = Dim("H")


@gpu
def layer_norm_stats(x: Tensor[float32, N, D]) -> tuple[Tensor[float32, N], Tensor[float32, N]]:
    mean = x.mean(axis=1)
    centered = x - mean[:, None]
    var = (centered * centered).mean(axis=1)
    return mean, (var + 1e-5).rsqrt()


@gpu
def with_input(x: Tensor[float32, N]) -> tuple[Tensor[float32, N], Tensor[float32, N]]:
    return x, x * 2.0  # a parameter returned as it is: a copy into `out0`


class RowStats(NamedTuple):
    mean: Tensor[float32, N]
    spread: Tensor[float32, N]
    top: Tensor[float32, N]


@gpu
def row_stats_named(x: Tensor[float32, N, D]) -> RowStats:
    top = x.max(axis=1)
    return RowStats(x.mean(axis=1), spread=top - x.min(axis=1), top=top)


@gpu
def softmax_lse(x: Tensor[float32, N, D]) -> tuple[Tensor[float32, N, D], Tensor[float32, N]]:
    m = x.max(axis=1)
    lse = m + (x - m[:, None]).exp().sum(axis=1).log()
    return x.softmax(axis=1), lse


@gpu
def adam_step(
    p: InOut[Tensor[float32, N]],
    grad: Tensor[float32, N],
    m: InOut[Tensor[float32, N]],
    v: InOut[Tensor[float32, N]],
    lr: float,
    step: int,
):
    b1 = 0.9
    b2 = 0.999
    m = b1 * m + (1.0 - b1) * grad
    v = b2 * v + (1.0 - b2) * grad * grad
    m_hat = m / (1.0 - b1**step)
    v_hat = v / (1.0 - b2**step)
    p -= lr * m_hat / (v_hat.sqrt() + 1e-8)


@gpu
def scale_and_norm(x: InOut[Tensor[float32, N, D]], s: Tensor[float32, D]) -> Tensor[float32, N]:
    old = x
    x = x * s
    return (x * old.T.T).sum(axis=1) + old.sum(axis=1)


@gpu
def swap(p: InOut[Tensor[float32, N]], q: InOut[Tensor[float32, N]]):
    p, q = q, p


@gpu
def overwrite_from(p: InOut[Tensor[float32, N, D]], g: Tensor[float32, N, D]):
    p = g  # noqa: F841 - the value `p` holds at the return is written back


@gpu
def transpose_add_inplace(x: InOut[Tensor[float32, D, D]]):
    x = x + x.T


@gpu(grid=(S, H))
def kv_append(
    k_cache: InOut[Tensor[float32, T, S, H]],
    v_cache: InOut[Tensor[float32, T, S, H]],
    k_new: Tensor[float32, S, H],
    v_new: Tensor[float32, S, H],
    pos: int,
):
    i = program_id(0)
    j = program_id(1)
    if 0 <= pos < T:
        k_cache[pos, i, j] = k_new[i, j]
        v_cache[pos, i, j] = v_new[i, j]
