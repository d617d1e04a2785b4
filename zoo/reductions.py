"""Row reductions in one kernel: sum, mean, max and min of each row, four outputs."""

from mimir.array import Dim, Tensor, float32, gpu

N = Dim("N")
C = Dim("C", min=1)


@gpu
def reductions(x: Tensor[float32, N, C]):
    return x.sum(axis=1), x.mean(axis=1), x.max(axis=1), x.min(axis=1)


if __name__ == "__main__":
    from mimir.array import rand

    for row in reductions(rand((2, 5), seed=1).to("gpu")):
        print(row)
