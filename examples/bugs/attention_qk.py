"""Forgot to transpose the keys: `q @ k` needs k's rows to be D long, but they are T long."""

from mimir.array import Dim, Tensor, float32, gpu, rand

T = Dim("T")
D = Dim("D")


@gpu
def attention_scores(q: Tensor[float32, T, D], k: Tensor[float32, T, D]) -> Tensor[float32, T, T]:
    return (q @ k).softmax(axis=-1)


if __name__ == "__main__":
    # The sizes of the checker's counterexample: the shim raises the same GPU011.
    q, k = rand((1, 2), seed=0).to("gpu"), rand((1, 2), seed=1).to("gpu")
    attention_scores(q, k)
