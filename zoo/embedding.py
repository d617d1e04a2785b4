"""Embedding lookup, `table[ids]` as `F.embedding(ids, table)`: row `ids[i]` for each token.

The ids declare their values, `Range(0, V)`: each call checks them, and that
proves the gather in bounds. On the GPU the gather is read inside the one
element-wise launch that writes the result (no copy of the table).
"""

from mimir.array import Dim, Range, Tensor, float32, gpu, int32

N = Dim("N")
V = Dim("V")
D = Dim("D")


@gpu
def embedding(
    ids: Tensor[int32, N, Range(0, V)], table: Tensor[float32, V, D]
) -> Tensor[float32, N, D]:
    return table[ids]


if __name__ == "__main__":
    from mimir.array import rand, tensor

    ids = tensor([4, 0, 4], dtype=int32).to("gpu")
    print(embedding(ids, rand((5, 2), seed=2).to("gpu")))
