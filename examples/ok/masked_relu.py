"""Slicing with dims, where, clip and casts."""

from mimir.array import Dim, Tensor, bool_, float32, gpu, int32, rand, where

N = Dim("N")


@gpu
def masked_relu(
    x: Tensor[float32, N + 2], mask: Tensor[bool_, N]
) -> Tensor[int32, N]:
    inner = x[1 : N + 1]
    kept = where(mask, inner.relu(), 0.0)
    return (kept * 10.0).clip(-100.0, 100.0).astype(int32)


if __name__ == "__main__":
    x = rand((9,), seed=0).to("gpu")
    mask = rand((7,), dtype=bool_, seed=1).to("gpu")
    print("masked_relu ->", masked_relu(x, mask).tolist())
