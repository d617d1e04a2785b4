"""Two tiled products of one left operand where the second's epilogue reads the first at
the positions it writes (SwiGLU's `silu(x @ w_gate) * (x @ w_up)`): one launch computing
both tiles (`schedule._paired_products`), the first never stored. The forms below it
(`gate_also_returned`, `gate_summed`, `other_left`, `gate_transposed`) must keep the first
product in its own launch. Every form runs on every backend against the shim."""

from mimir.array import Dim, Tensor, float32, gpu

N = Dim("N")
D = Dim("D")
H = Dim("H")
B = Dim("B")


@gpu
def gated_hidden(
    x: Tensor[float32, N, D], w_gate: Tensor[float32, D, H], w_up: Tensor[float32, D, H]
) -> Tensor[float32, N, H]:
    gate = x @ w_gate
    return gate * gate.sigmoid() * (x @ w_up)


@gpu
def geglu_with_bias(
    x: Tensor[float32, N, D],
    w_gate: Tensor[float32, D, H],
    w_up: Tensor[float32, D, H],
    bias: Tensor[float32, H],
) -> Tensor[float32, N, H]:
    # the second product first in the source; a bias broadcast over rows in the epilogue
    up = x @ w_up + bias
    return (x @ w_gate).gelu() * up


@gpu
def batched_gates(
    x: Tensor[float32, B, N, D], w_gate: Tensor[float32, D, H], w_up: Tensor[float32, D, H]
) -> Tensor[float32, B, N, H]:
    return (x @ w_gate).relu() * (x @ w_up)


@gpu
def gate_also_returned(
    x: Tensor[float32, N, D], w_gate: Tensor[float32, D, H], w_up: Tensor[float32, D, H]
):
    gate = x @ w_gate
    return gate, gate.tanh() * (x @ w_up)


@gpu
def gate_summed(
    x: Tensor[float32, N, D], w_gate: Tensor[float32, D, H], w_up: Tensor[float32, D, H]
) -> Tensor[float32, N, H]:
    gate = x @ w_gate
    return gate * (x @ w_up) + gate.sum(axis=1, keepdims=True)


@gpu
def other_left(
    x: Tensor[float32, N, D],
    y: Tensor[float32, N, D],
    w_gate: Tensor[float32, D, H],
    w_up: Tensor[float32, D, H],
) -> Tensor[float32, N, H]:
    return (x @ w_gate).sigmoid() * (y @ w_up)


@gpu
def gate_transposed(
    x: Tensor[float32, N, N], w_gate: Tensor[float32, N, N], w_up: Tensor[float32, N, N]
) -> Tensor[float32, N, N]:
    # the epilogue reads the first product at the mirrored position: not its own
    return (x @ w_gate).T * (x @ w_up)
