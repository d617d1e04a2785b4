"""A linear layer, proven and runnable: `mimir check` it, or run it with `python`."""

from mimir.array import Tensor, float32, gpu, rand


@gpu
def linear_forward(
    x: Tensor[float32, 32, 784], w: Tensor[float32, 784, 128], b: Tensor[float32, 128]
) -> Tensor[float32, 32, 128]:
    h = x @ w
    return h + b


if __name__ == "__main__":
    x = rand((32, 784), seed=0).to("gpu")
    w = rand((784, 128), seed=1).to("gpu")
    b = rand((128,), seed=2).to("gpu")
    y = linear_forward(x, w, b)
    print("linear_forward ->", list(y.shape), y.dtype)
