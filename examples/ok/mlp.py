"""A two-layer MLP over a symbolic batch: proven for every batch size, runnable with `python`."""

from mimir.array import Dim, Tensor, float32, gpu, rand

B = Dim("B", min=1, max=4096)


@gpu
def mlp(
    x: Tensor[float32, B, 16],
    w1: Tensor[float32, 16, 32],
    b1: Tensor[float32, 32],
    w2: Tensor[float32, 32, 10],
) -> Tensor[float32, B, 10]:
    h = (x @ w1 + b1).relu()
    return (h @ w2).softmax(axis=-1)


if __name__ == "__main__":
    x = rand((5, 16), seed=0).to("gpu")
    w1 = rand((16, 32), seed=1).to("gpu")
    b1 = rand((32,), seed=2).to("gpu")
    w2 = rand((32, 10), seed=3).to("gpu")
    probs = mlp(x, w1, b1, w2)
    print("mlp ->", list(probs.shape), [round(sum(row), 6) for row in probs.tolist()])
