"""Embedding lookup: `out[i, :] = table[ids[i], :]`, zeros for an id outside the table.

Index-level: one program per (token, feature); the loaded id indexes the table
under a bounds test. Rewrite as a gather (`table[ids]`) when gathers land.
"""

from mimir.array import Dim, Tensor, float32, gpu, int32, program_id

N = Dim("N")
V = Dim("V")
D = Dim("D")

WAITING_FOR = "gather"


@gpu(grid=(N, D))
def embedding(ids: Tensor[int32, N], table: Tensor[float32, V, D], out: Tensor[float32, N, D]):
    i = program_id(0)
    j = program_id(1)
    t = ids[i]
    if 0 <= t < V:
        out[i, j] = table[t, j]
    else:
        out[i, j] = 0.0


if __name__ == "__main__":
    from mimir.array import rand, tensor, zeros

    ids = tensor([4, 0, 9], dtype=int32).to("gpu")  # 9 is past the table: a row of zeros
    out = zeros((3, 2)).to("gpu")
    embedding(ids, rand((5, 2), seed=2).to("gpu"), out)
    print(out)
