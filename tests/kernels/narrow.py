"""`@` by a matrix parameter at most 16 columns wide (`schedule.narrow_matmul`): a `narrow`
launch, 8 threads folding each row of the left operand into the row's few dot products,
instead of a 128 x 128 tile that wastes all but those few columns. A product by a matrix
of at most 16 rows whose only reader is such a launch is computed inside it
(`schedule.inline_product`). Every form runs on every backend against the shim."""

from mimir.array import Dim, InOut, Tensor, float16, float32, gpu, int32

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


@gpu
def row_stats_beside_a_head(
    h: Tensor[float32, B, N, H], w: Tensor[float32, H, 4]
) -> tuple[Tensor[float32, B, N, 4], Tensor[float32, B, N, 1], Tensor[float32, B, N]]:
    """A mean (dims kept, through an epilogue) and a min of each row of h, folded by the
    `narrow` launch in its pass over h (`schedule._narrow_row_reductions`)."""
    return h @ w, h.mean(axis=2, keepdims=True) * 2.0, (h * h).min(axis=-1)


@gpu
def int_head_and_row_max(
    h: Tensor[int32, N, H], w: Tensor[int32, H, 5]
) -> tuple[Tensor[int32, N, 5], Tensor[int32, N]]:
    return h @ w, h.max(axis=1)


@gpu
def head_plus_row_sum(h: Tensor[float32, N, H], w: Tensor[float32, H, 3]) -> Tensor[float32, N, 3]:
    """The head's epilogue reads the row sum at its own row: the `narrow` launch folds the
    sum, and lane 0 adds it to the row's products (no scratch for it)."""
    return h @ w + h.sum(axis=1, keepdims=True)


@gpu
def hidden_column_max(
    x: Tensor[float32, N, 6], w1: Tensor[float32, 6, H], w2: Tensor[float32, H, 2]
) -> tuple[Tensor[float32, N, 2], Tensor[float32, H]]:
    """A max over the columns of an inline hidden layer: no fold; the reduction's own
    launch computes each element of z as a dot product too."""
    z = x @ w1
    return z.relu() @ w2, z.max(axis=0)


@gpu
def half_head_and_positives(
    h: Tensor[float16, N, H], w: Tensor[float16, H, 2]
) -> tuple[Tensor[float16, N, 2], Tensor[int32, N], Tensor[float16, N]]:
    """A count of bools and a float16 max, folded beside a float16 head."""
    return h @ w, (h > 0.0).sum(axis=1), h.max(axis=1)


@gpu
def many_row_stats(
    h: Tensor[float32, N, H], w: Tensor[float32, H, 2]
) -> tuple[
    Tensor[float32, N, 2],
    Tensor[float32, N],
    Tensor[float32, N],
    Tensor[float32, N],
    Tensor[float32, N],
    Tensor[float32, N],
    Tensor[float32, N],
    Tensor[float32, N],
]:
    """Seven row reductions beside a head: the `narrow` launch folds what keeps it within
    8 bound buffers (WebGPU's guaranteed storage buffers per stage); the rest get a launch."""
    a = h.sum(axis=1)
    b = h.max(axis=1)
    c = h.min(axis=1)
    d = h.mean(axis=1)
    e = (h * h).sum(axis=1)
    f = h.abs().max(axis=1)
    g = (h + 1.0).min(axis=1)
    return h @ w, a, b, c, d, e, f, g


@gpu
def digits(
    h: Tensor[float32, N, H], w: Tensor[float32, H, 10], b: Tensor[float32, 10]
) -> tuple[Tensor[float32, N, 10], Tensor[float32, N]]:
    """A 10-class head (MNIST's) and its log-probabilities, with each row's largest
    activation: 10 column sums and a max over the lanes, in one launch."""
    return (h @ w + b).log_softmax(), h.max(axis=1)


@gpu
def sixteen_wide(h: Tensor[int32, B, N, H], w: Tensor[int32, H, 16]) -> Tensor[int32, B, N, 16]:
    return h @ w


@gpu
def head_over_row_sums(
    h: Tensor[float32, B, N, H], w: Tensor[float32, H, 5]
) -> tuple[Tensor[float32, B, N, 5], Tensor[float32, B, N, 1]]:
    """The head's epilogue divides each row by its sum of squares (at least 1: a sum of
    signed values may cancel to nearly 0, and the quotient amplify rounding), which is
    returned too: the `narrow` launch folds the sum and lane 0 reads it where it writes
    the row."""
    s = (h * h).sum(axis=2, keepdims=True) + 1.0
    return (h @ w) / s, s


@gpu
def centred_square_head(
    h: Tensor[float32, N, 10], w: Tensor[float32, 10, 10]
) -> Tensor[float32, N, 10]:
    """The product's left operand reads the row mean (K = J = 10: the shapes alone would
    let it through): the mean is a launch before the `narrow` one."""
    return (h - h.mean(axis=1, keepdims=True)) @ w


@gpu
def hidden_total(
    x: Tensor[float32, N, 6], w1: Tensor[float32, 6, H], w2: Tensor[float32, H, 2]
) -> tuple[Tensor[float32, N, 2], Tensor[float32]]:
    """A whole sum of an inline hidden layer: its own (split) reduction computes z."""
    z = x @ w1
    return z.relu() @ w2, z.sum()


@gpu
def maybe_empty_with_sums(
    h: Tensor[float32, N, K], w: Tensor[float32, K, 3]
) -> tuple[Tensor[float32, N, 3], Tensor[float32, N], Tensor[int32, N]]:
    """Rows that may be empty (K = 0; a mean or max of them is refused, GPU024): the
    folded sums are 0, as the shim's."""
    return h @ w, h.sum(axis=1), (h > 0.0).sum(axis=1)


@gpu
def head_and_sums_in_place(
    h: Tensor[float32, N, H], w: Tensor[float32, H, 3], s: InOut[Tensor[float32, N]]
) -> Tensor[float32, N, 3]:
    """An `InOut` row sum beside a head: not folded, its own launch updates s."""
    s = s + h.sum(axis=1)
    return h @ w


@gpu
def sums_over_a_head_in_place(
    h: InOut[Tensor[float32, N, H]], w: Tensor[float32, H, 3]
) -> Tensor[float32, N, 3]:
    """h doubled in place, and the head's epilogue reads the doubled rows' sums."""
    out = h @ w
    h = h * 2.0
    return out + h.sum(axis=1, keepdims=True)
