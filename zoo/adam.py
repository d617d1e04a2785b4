"""One Adam optimizer step, in place: the parameters and both moment estimates are `InOut`.

`c1 = 1 - beta1**t` and `c2 = 1 - beta2**t` (the bias corrections) are passed
in, as `torch.optim.Adam` computes them from the step count. Each state tensor is
updated by assigning its name (`m = ...`, `p -= ...`) and written back to the
caller's buffer, as `torch.optim.Adam` updates its state in place.
"""

from mimir.array import Dim, InOut, Tensor, float32, gpu

N = Dim("N")


@gpu
def adam(
    p: InOut[Tensor[float32, N]],
    g: Tensor[float32, N],
    m: InOut[Tensor[float32, N]],
    v: InOut[Tensor[float32, N]],
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    c1: float,
    c2: float,
):
    m = beta1 * m + (1.0 - beta1) * g
    v = beta2 * v + (1.0 - beta2) * g * g
    p -= lr * (m / c1) / ((v / c2).sqrt() + eps)


if __name__ == "__main__":
    from mimir.array import rand, zeros

    p, g = rand((4,), seed=1).to("gpu"), rand((4,), seed=2).to("gpu")
    m, v = zeros((4,)).to("gpu"), zeros((4,)).to("gpu")
    adam(p, g, m, v, 1e-3, 0.9, 0.999, 1e-8, 0.1, 0.001)
    print(p, m, v)
