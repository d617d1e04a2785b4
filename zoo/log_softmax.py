"""Row log-softmax, `x - max - log(sum(exp(x - max)))`: one workgroup per row."""

from mimir.array import Dim, Tensor, float32, gpu

N = Dim("N")
C = Dim("C", min=1)


@gpu
def log_softmax(x: Tensor[float32, N, C]) -> Tensor[float32, N, C]:
    return x.log_softmax(axis=-1)


if __name__ == "__main__":
    from mimir.array import rand

    print(log_softmax(rand((2, 4), seed=1).to("gpu")))
