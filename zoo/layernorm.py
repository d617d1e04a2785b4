"""Layer norm over the last axis, with a learned scale and shift and `eps` as a parameter."""

from mimir.array import Dim, Tensor, float32, gpu

N = Dim("N")
D = Dim("D", min=1)


@gpu
def layernorm(
    x: Tensor[float32, N, D], gamma: Tensor[float32, D], beta: Tensor[float32, D], eps: float
) -> Tensor[float32, N, D]:
    centered = x - x.mean(axis=-1, keepdims=True)
    variance = (centered * centered).mean(axis=-1, keepdims=True)
    return centered * (variance + eps).rsqrt() * gamma + beta


if __name__ == "__main__":
    from mimir.array import ones, rand, zeros

    x = rand((2, 4), seed=1).to("gpu")
    print(layernorm(x, ones((4,)).to("gpu"), zeros((4,)).to("gpu"), 1e-5))
