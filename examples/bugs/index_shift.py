"""An index-level kernel that reads one element past the end for the last program id."""

from mimir.array import Dim, Tensor, float32, gpu, program_id, rand, zeros

N = Dim("N")


@gpu(grid=(N,))
def shift(x: Tensor[float32, N], out: Tensor[float32, N]):
    i = program_id(0)
    out[i] = x[i + 1]


if __name__ == "__main__":
    shift(rand((1,)).to("gpu"), zeros((1,)).to("gpu"))
