"""2x2 average pooling with stride 2, written as a reshape and a mean over two axes."""

from mimir.array import Dim, Tensor, float32, gpu

B = Dim("B")
C = Dim("C")
H = Dim("H", multiple_of=2)
W = Dim("W", multiple_of=2)


@gpu
def avg_pool(x: Tensor[float32, B, C, H, W]) -> Tensor[float32, B, C, H // 2, W // 2]:
    return x.reshape(B, C, H // 2, 2, W // 2, 2).mean(axis=(3, 5))


if __name__ == "__main__":
    from mimir.array import rand

    print(avg_pool(rand((1, 1, 4, 4), seed=1).to("gpu")))
