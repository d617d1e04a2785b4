"""Inclusive prefix sum along each row, `x.cumsum(axis=1)`: `out[r, i] = x[r, 0] + ... + x[r, i]`.

One workgroup per row walks it in chunks of the workgroup's size, each chunk
scanned in threadgroup memory (Brent-Kung: O(n) work) with the prefix carried
between chunks.
"""

from mimir.array import Dim, Tensor, float32, gpu

R = Dim("R")
N = Dim("N")


@gpu
def prefix_sum(x: Tensor[float32, R, N]) -> Tensor[float32, R, N]:
    return x.cumsum(axis=1)


if __name__ == "__main__":
    from mimir.array import ones

    print(prefix_sum(ones((1, 5)).to("gpu")))
