"""The mean of int32 values is float32; the annotation promises int32."""

from mimir.array import Tensor, gpu, int32, rand


@gpu
def row_means(x: Tensor[int32, 4, 6]) -> Tensor[int32, 4]:
    return x.mean(axis=1)


if __name__ == "__main__":
    row_means(rand((4, 6), dtype=int32).to("gpu"))
