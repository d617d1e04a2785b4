"""SwiGLU feed-forward block (as in LLaMA): `(silu(x @ w_gate) * (x @ w_up)) @ w_down`."""

from mimir.array import Dim, Tensor, float32, gpu

N = Dim("N")
D = Dim("D")
HIDDEN = Dim("HIDDEN")


@gpu
def swiglu(
    x: Tensor[float32, N, D],
    w_gate: Tensor[float32, D, HIDDEN],
    w_up: Tensor[float32, D, HIDDEN],
    w_down: Tensor[float32, HIDDEN, D],
) -> Tensor[float32, N, D]:
    gate = x @ w_gate
    return (gate * gate.sigmoid() * (x @ w_up)) @ w_down


if __name__ == "__main__":
    from mimir.array import rand

    x, wg, wu, wd = (
        rand((2, 3), seed=1),
        rand((3, 4), seed=2),
        rand((3, 4), seed=3),
        rand((4, 3), seed=4),
    )
    print(swiglu(*(t.to("gpu") for t in (x, wg, wu, wd))))
