"""An unbounded loop cannot run on a GPU; a reshape that cannot hold the elements, too."""

from mimir.array import Tensor, float32, gpu, rand


@gpu
def normalise(x: Tensor[float32, 6, 4]) -> Tensor[float32, 6, 4]:
    while True:
        x = x / 2.0
    return x


@gpu
def regroup(x: Tensor[float32, 6, 4]) -> Tensor[float32, 5, 5]:
    return x.reshape(5, -1)


if __name__ == "__main__":
    regroup(rand((6, 4)).to("gpu"))
