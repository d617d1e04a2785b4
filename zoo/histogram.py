"""Histogram of integer values into `BINS` bins; values outside `0..BINS-1` are not counted.

Index-level: one program per bin counts its value over the whole input (no
atomics needed, `BINS` times the reads). Rewrite with `atomic_add` when it lands.
"""

from mimir.array import Dim, Tensor, gpu, int32, program_id

N = Dim("N")
BINS = Dim("BINS")

WAITING_FOR = "atomic_add"


@gpu(grid=(BINS,))
def histogram(values: Tensor[int32, N], counts: Tensor[int32, BINS]):
    b = program_id(0)
    c = 0
    for i in range(N):
        if values[i] == b:
            c += 1
    counts[b] = c


if __name__ == "__main__":
    from mimir.array import rand, zeros

    counts = zeros((4,), dtype=int32).to("gpu")
    histogram(rand((10,), dtype=int32, seed=1, low=0, high=3).to("gpu"), counts)
    print(counts)
