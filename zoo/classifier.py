"""Classifier head, `softmax(relu(x @ w1 + b1) @ w2 + b2)`: one launch, no stored hidden layer."""

from mimir.array import Dim, Tensor, float32, gpu

N = Dim("N")
HIDDEN = Dim("HIDDEN")


@gpu
def classifier(
    x: Tensor[float32, N, 4],
    w1: Tensor[float32, 4, HIDDEN],
    b1: Tensor[float32, HIDDEN],
    w2: Tensor[float32, HIDDEN, 3],
    b2: Tensor[float32, 3],
) -> Tensor[float32, N, 3]:
    return ((x @ w1 + b1).relu() @ w2 + b2).softmax()


if __name__ == "__main__":
    from mimir.array import rand

    x, w1, b1 = rand((2, 4), seed=1), rand((4, 16), seed=2), rand((16,), seed=3)
    w2, b2 = rand((16, 3), seed=4), rand((3,), seed=5)
    print(classifier(*(t.to("gpu") for t in (x, w1, b1, w2, b2))))
