"""`.tan()` is not a kernel op: an earlier compiler silently dropped unknown methods."""

from mimir.array import Tensor, float32, gpu, rand


@gpu
def smooth(x: Tensor[float32, 16]) -> Tensor[float32, 16]:
    y = x.tan()
    return y * 0.5


if __name__ == "__main__":
    smooth(rand((16,)).to("gpu"))
