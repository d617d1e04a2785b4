"""Row-wise L2 normalisation, `x / max(||x||, eps)`, as `F.normalize(x, dim=-1)`."""

from mimir.array import Dim, Tensor, float32, gpu, maximum

N = Dim("N")
D = Dim("D")


@gpu
def l2_normalize(x: Tensor[float32, N, D], eps: float) -> Tensor[float32, N, D]:
    norm = (x * x).sum(axis=-1, keepdims=True).sqrt()
    return x / maximum(norm, eps)


if __name__ == "__main__":
    from mimir.array import rand

    print(l2_normalize(rand((2, 3), seed=1).to("gpu"), 1e-12))
