"""Cross-entropy loss per row from logits and class labels, as `F.cross_entropy(reduction="none")`.

Index-level, as a Triton kernel would: one program per row computes a stable
log-sum-exp and subtracts the logit of its label, `logits[i, labels[i]]`. The
labels declare their values, `Range(0, C)`: each call checks them, and that
proves the gather in bounds with no test in the kernel.
"""

from mimir.array import Dim, Range, Tensor, float32, gpu, int32, maximum, program_id

N = Dim("N")
C = Dim("C", min=1)


@gpu(grid=(N,))
def cross_entropy(
    logits: Tensor[float32, N, C],
    labels: Tensor[int32, N, Range(0, C)],
    loss: Tensor[float32, N],
):
    i = program_id(0)
    m = logits[i, 0]
    for j in range(1, C):
        m = maximum(m, logits[i, j])
    total = 0.0
    for j in range(C):
        total += (logits[i, j] - m).exp()
    loss[i] = total.log() + m - logits[i, labels[i]]


if __name__ == "__main__":
    from mimir.array import rand, tensor, zeros

    logits = rand((2, 3), seed=1).to("gpu")
    labels = tensor([0, 2], dtype=int32).to("gpu")
    loss = zeros((2,)).to("gpu")
    cross_entropy(logits, labels, loss)
    print(loss)
