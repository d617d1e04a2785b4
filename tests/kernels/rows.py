"""Row-wise kernels whose row length is proven small: softmax keeps the row in registers."""

from mimir.array import Dim, Tensor, float16, float32, gpu

N = Dim("N")
D = Dim("D", max=2048)


@gpu
def softmax_row_1000(x: Tensor[float32, N, 1000]) -> Tensor[float32, N, 1000]:
    return x.softmax()


@gpu
def log_softmax_row_512(x: Tensor[float32, N, 512]) -> Tensor[float32, N, 512]:
    return x.log_softmax()


@gpu
def softmax_bounded_row(x: Tensor[float32, N, D]) -> Tensor[float32, N, D]:
    return (x * 0.5).softmax() * 2.0


@gpu
def softmax_short_half(x: Tensor[float16, N, 40]) -> Tensor[float16, N, 40]:
    return x.softmax()
