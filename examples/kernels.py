"""The kernels of the quick starts in docs/hosts.md and docs/hosts-js.md.

    mimir compile-gpu examples/kernels.py --backend all -o out/

then run them from NumPy (`mimir.runtime.load("out/")`), Node or a browser (js/), or C
(examples/hosts/).
"""

from mimir.array import Dim, Tensor, float32, gpu

N = Dim("N")
H = Dim("H")


@gpu
def linear_relu(
    x: Tensor[float32, N, 20], w: Tensor[float32, 20, 33], b: Tensor[float32, 33]
) -> Tensor[float32, N, 33]:
    return (x @ w + b).relu()


@gpu
def linear_gelu_scaled(
    x: Tensor[float32, N, 20], w: Tensor[float32, 20, 33], b: Tensor[float32, 33], scale: float
) -> Tensor[float32, N, 33]:
    return ((x @ w) * scale + b).gelu()


@gpu
def mlp(
    x: Tensor[float32, N, 13],
    w1: Tensor[float32, 13, H],
    b1: Tensor[float32, H],
    w2: Tensor[float32, H, 3],
    b2: Tensor[float32, 3],
) -> Tensor[float32, N, 3]:
    h = (x @ w1 + b1).relu()
    return (h @ w2 + b2).sigmoid()
