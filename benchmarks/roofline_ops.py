"""The memory-bound ops compared with Triton, as `@gpu` functions: what benchmarks/kernel_static.py
measures by default (the test zoo with `--zoo`)."""

from mimir.array import Dim, Tensor, bfloat16, float16, float32, gpu

N = Dim("N")
D = Dim("D")
R = Dim("R", max=4096)
M = Dim("M")
I = Dim("I")  # noqa: E741
J = Dim("J")
K = Dim("K")


@gpu
def vector_add(a: Tensor[float32, N], b: Tensor[float32, N]) -> Tensor[float32, N]:
    return a + b


@gpu
def sigmoid_chain(a: Tensor[float32, N], b: Tensor[float32, N]) -> Tensor[float32, N]:
    return (a * b + 1.0).sigmoid() * a


@gpu
def softmax_rows(x: Tensor[float32, M, D]) -> Tensor[float32, M, D]:
    return x.softmax()


@gpu
def softmax_1024(x: Tensor[float32, M, 1024]) -> Tensor[float32, M, 1024]:
    return x.softmax()


@gpu
def softmax_bounded(x: Tensor[float32, M, R]) -> Tensor[float32, M, R]:
    return x.softmax()


@gpu
def layer_norm(
    x: Tensor[float32, M, D], gamma: Tensor[float32, D], beta: Tensor[float32, D]
) -> Tensor[float32, M, D]:
    mean = x.mean(axis=-1, keepdims=True)
    centered = x - mean
    var = (centered * centered).mean(axis=-1, keepdims=True)
    return centered * (var + 1e-5).rsqrt() * gamma + beta


@gpu
def rms_norm(x: Tensor[float32, M, D], w: Tensor[float32, D]) -> Tensor[float32, M, D]:
    return x / ((x * x).mean(axis=-1, keepdims=True) + 1e-6).sqrt() * w


@gpu
def row_sum(x: Tensor[float32, M, D]) -> Tensor[float32, M]:
    return x.sum(axis=-1)


@gpu
def total(x: Tensor[float32, N]) -> Tensor[float32]:
    return x.sum()


@gpu
def matmul_bias_relu(
    a: Tensor[float32, I, K], w: Tensor[float32, K, J], b: Tensor[float32, J]
) -> Tensor[float32, I, J]:
    return (a @ w + b).relu()


@gpu(precision="tf32")
def matmul_bias_relu_tf32(
    a: Tensor[float32, I, K], w: Tensor[float32, K, J], b: Tensor[float32, J]
) -> Tensor[float32, I, J]:
    # the same op on TF32 tensor cores (PTX `mma.sync`), beside Triton's TF32 anchor
    return (a @ w + b).relu()


@gpu
def matmul_bias_relu_f16(
    a: Tensor[float16, I, K], w: Tensor[float16, K, J], b: Tensor[float32, J]
) -> Tensor[float32, I, J]:
    # float16 operands: on tensor cores on PTX (`mma.sync ... m16n8k16`), no `precision=`
    return (a @ w + b).relu()


@gpu
def matmul_bias_relu_bf16(
    a: Tensor[bfloat16, I, K], w: Tensor[bfloat16, K, J], b: Tensor[float32, J]
) -> Tensor[float32, I, J]:
    return (a @ w + b).relu()


@gpu
def layer_norm_1024(
    x: Tensor[float32, M, 1024], gamma: Tensor[float32, 1024], beta: Tensor[float32, 1024]
) -> Tensor[float32, M, 1024]:
    mean = x.mean(axis=-1, keepdims=True)
    centered = x - mean
    var = (centered * centered).mean(axis=-1, keepdims=True)
    return centered * (var + 1e-5).rsqrt() * gamma + beta
