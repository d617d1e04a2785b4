"""`@` by a matrix parameter at most 8 columns wide (`schedule.narrow_matmul`): a `narrow`
launch, 8 threads folding each row of the left operand into the row's few dot products,
instead of a 128 x 128 tile that wastes all but those few columns. A product by a matrix
of at most 16 rows whose only reader is such a launch is computed inside it
(`schedule.inline_product`). Every form runs on every backend against the shim."""

from mimir.array import Dim, Tensor, float16, float32, gpu, int32

N = Dim("N")
H = Dim("H")
B = Dim("B")
K = Dim("K", min=0)


@gpu
def head(h: Tensor[float32, N, H], w: Tensor[float32, H, 3]) -> Tensor[float32, N, 3]:
    return h @ w


@gpu
def gelu_mlp(
    x: Tensor[float32, N, 13],
    w1: Tensor[float32, 13, H],
    b1: Tensor[float32, H],
    w2: Tensor[float32, H, 4],
    b2: Tensor[float32, 4],
) -> Tensor[float32, N, 4]:
    return ((x @ w1 + b1).gelu() @ w2 + b2).sigmoid()


@gpu
def classifier(
    h: Tensor[float32, N, H], w: Tensor[float32, H, 7], b: Tensor[float32, 7]
) -> Tensor[float32, N, 7]:
    return (h @ w + b).softmax() * 2.0


@gpu
def log_classifier(
    x: Tensor[float32, N, 5], w1: Tensor[float32, 5, H], w2: Tensor[float32, H, 3]
) -> Tensor[float32, N, 3]:
    return ((x @ w1).tanh() @ w2).log_softmax()


@gpu
def logits_and_probabilities(
    h: Tensor[float32, N, H], w: Tensor[float32, H, 4]
) -> tuple[Tensor[float32, N, 4], Tensor[float32, N, 4]]:
    logits = h @ w
    return logits, logits.softmax()


@gpu
def batched_head(h: Tensor[float32, B, N, H], w: Tensor[float32, H, 8]) -> Tensor[float32, B, N, 8]:
    return (h * 2.0) @ w


@gpu
def int_head(h: Tensor[int32, N, H], w: Tensor[int32, H, 5]) -> Tensor[int32, N, 5]:
    return h @ w - 1


@gpu
def half_head(h: Tensor[float16, N, H], w: Tensor[float16, H, 2]) -> Tensor[float16, N, 2]:
    return h @ w


@gpu
def head_and_row_sums(
    h: Tensor[float32, N, H], w: Tensor[float32, H, 3]
) -> tuple[Tensor[float32, N, 3], Tensor[float32, N]]:
    return h @ w, h.sum(axis=1)


@gpu
def hidden_read_twice(
    x: Tensor[float32, N, 6], w1: Tensor[float32, 6, H], w2: Tensor[float32, H, 2]
) -> tuple[Tensor[float32, N, 2], Tensor[float32, N]]:
    z = x @ w1
    return z.relu() @ w2, z.max(axis=1)


@gpu
def transposed_head(h: Tensor[float32, H, N], w: Tensor[float32, H, 4]) -> Tensor[float32, N, 4]:
    return h.T @ w


@gpu
def maybe_empty(h: Tensor[float32, N, K], w: Tensor[float32, K, 3]) -> Tensor[float32, N, 3]:
    return h @ w + 0.5


@gpu
def torch_layout_head(h: Tensor[float32, N, H], w: Tensor[float32, 3, H]) -> Tensor[float32, N, 3]:
    """PyTorch's `nn.Linear` keeps its weight out x in and computes `h @ w.T`."""
    return h @ w.T
