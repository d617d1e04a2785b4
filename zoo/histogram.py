"""Histogram of integer values into `BINS` bins, as `torch.bincount(values, minlength=BINS)`.

Index-level: one program per value adds 1 to its bin with `atomic_add` (N
reads, not the N x BINS of a program per bin). The values declare their range,
`Range(0, BINS)`: each call checks it, and that proves the bin index in bounds.
"""

from mimir.array import Dim, Range, Tensor, atomic_add, gpu, int32, program_id

N = Dim("N")
BINS = Dim("BINS")


@gpu(grid=(N,))
def histogram(values: Tensor[int32, N, Range(0, BINS)], counts: Tensor[int32, BINS]):
    i = program_id(0)
    atomic_add(counts, values[i], 1)


if __name__ == "__main__":
    from mimir.array import rand, zeros

    counts = zeros((4,), dtype=int32).to("gpu")
    histogram(rand((10,), dtype=int32, seed=1, low=0, high=3).to("gpu"), counts)
    print(counts)
