"""Layer normalisation: mean, subtract, rsqrt, with keepdims broadcasting."""

from mimir.array import Dim, Tensor, float32, gpu, rand

N = Dim("N")
C = Dim("C", min=2)


@gpu
def layernorm(
    x: Tensor[float32, N, C], gamma: Tensor[float32, C], beta: Tensor[float32, C]
) -> Tensor[float32, N, C]:
    mu = x.mean(axis=-1, keepdims=True)
    centered = x - mu
    var = (centered * centered).mean(axis=-1, keepdims=True)
    return centered * (var + 1e-5).rsqrt() * gamma + beta


if __name__ == "__main__":
    x = rand((3, 6), seed=0).to("gpu")
    gamma = rand((6,), seed=1, low=0.5, high=1.5).to("gpu")
    beta = rand((6,), seed=2).to("gpu")
    y = layernorm(x, gamma, beta)
    print("layernorm ->", list(y.shape))
