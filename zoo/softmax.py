"""Row softmax, numerically stable (max subtracted): one workgroup per row."""

from mimir.array import Dim, Tensor, float32, gpu

N = Dim("N")
C = Dim("C", min=1)


@gpu
def softmax(x: Tensor[float32, N, C]) -> Tensor[float32, N, C]:
    return x.softmax(axis=-1)


if __name__ == "__main__":
    from mimir.array import rand

    print(softmax(rand((2, 4), seed=1).to("gpu")))
