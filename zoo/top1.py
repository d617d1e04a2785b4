"""Top-1 per row: the largest value and its index (the first one on ties), as `torch.max(x, 1)`.

`x.max(axis=1)` and `x.argmax(axis=1)`, returned as a named tuple like
torch's `(values, indices)`: each a reduction with one workgroup per row.
"""

from typing import NamedTuple

from mimir.array import Dim, Tensor, float32, gpu, int32

N = Dim("N")
C = Dim("C", min=1)


class Top1(NamedTuple):
    values: Tensor[float32, N]
    indices: Tensor[int32, N]


@gpu
def top1(x: Tensor[float32, N, C]) -> Top1:
    return Top1(x.max(axis=1), x.argmax(axis=1))


if __name__ == "__main__":
    from mimir.array import rand

    best = top1(rand((2, 5), seed=1).to("gpu"))
    print(best.values, best.indices)
