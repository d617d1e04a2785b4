"""Mean squared error between predictions and targets, reduced to one value."""

from mimir.array import Dim, Tensor, float32, gpu

N = Dim("N", min=1)
D = Dim("D", min=1)


@gpu
def mse_loss(pred: Tensor[float32, N, D], target: Tensor[float32, N, D]) -> Tensor[float32]:
    diff = pred - target
    return (diff * diff).mean()


if __name__ == "__main__":
    from mimir.array import rand

    print(mse_loss(rand((2, 3), seed=1).to("gpu"), rand((2, 3), seed=2).to("gpu")))
