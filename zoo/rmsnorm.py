"""RMS norm (as in LLaMA): `x / sqrt(mean(x^2) + eps) * weight` over the last axis."""

from mimir.array import Dim, Tensor, float32, gpu

N = Dim("N")
D = Dim("D", min=1)


@gpu
def rmsnorm(
    x: Tensor[float32, N, D], weight: Tensor[float32, D], eps: float
) -> Tensor[float32, N, D]:
    return x * ((x * x).mean(axis=-1, keepdims=True) + eps).rsqrt() * weight


if __name__ == "__main__":
    from mimir.array import ones, rand

    print(rmsnorm(rand((2, 4), seed=1).to("gpu"), ones((4,)).to("gpu"), 1e-6))
