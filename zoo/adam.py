"""One Adam optimizer step: new parameters and moment estimates, three outputs.

`c1 = 1 - beta1**t` and `c2 = 1 - beta2**t` (the bias corrections) are passed
in. The state is written to new buffers; rewrite with in-place `InOut`
parameters when they land.
"""

from mimir.array import Dim, Tensor, float32, gpu

N = Dim("N")

WAITING_FOR = "InOut"


@gpu
def adam(
    p: Tensor[float32, N],
    g: Tensor[float32, N],
    m: Tensor[float32, N],
    v: Tensor[float32, N],
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    c1: float,
    c2: float,
):
    m_new = beta1 * m + (1.0 - beta1) * g
    v_new = beta2 * v + (1.0 - beta2) * g * g
    p_new = p - lr * (m_new / c1) / ((v_new / c2).sqrt() + eps)
    return p_new, m_new, v_new


if __name__ == "__main__":
    from mimir.array import rand, zeros

    p, g = rand((4,), seed=1).to("gpu"), rand((4,), seed=2).to("gpu")
    m, v = zeros((4,)).to("gpu"), zeros((4,)).to("gpu")
    print(adam(p, g, m, v, 1e-3, 0.9, 0.999, 1e-8, 0.1, 0.001))
