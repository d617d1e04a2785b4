"""Cross-entropy loss per row, from logits and integer class labels.

Index-level: one program per row computes a stable log-sum-exp and reads the
logit of its label under a bounds test (a label outside `0..C-1` gives loss 0).
Rewrite with a gather (`logits[i, labels]`) when gathers land.
"""

from mimir.array import Dim, Tensor, float32, gpu, int32, maximum, program_id

N = Dim("N")
C = Dim("C", min=1)

WAITING_FOR = "gather"


@gpu(grid=(N,))
def cross_entropy(
    logits: Tensor[float32, N, C], labels: Tensor[int32, N], loss: Tensor[float32, N]
):
    i = program_id(0)
    m = logits[i, 0]
    for j in range(1, C):
        m = maximum(m, logits[i, j])
    total = 0.0
    for j in range(C):
        total += (logits[i, j] - m).exp()
    y = labels[i]
    if 0 <= y < C:
        loss[i] = total.log() + m - logits[i, y]
    else:
        loss[i] = 0.0


if __name__ == "__main__":
    from mimir.array import rand, tensor, zeros

    logits = rand((2, 3), seed=1).to("gpu")
    labels = tensor([0, 2], dtype=int32).to("gpu")
    loss = zeros((2,)).to("gpu")
    cross_entropy(logits, labels, loss)
    print(loss)
