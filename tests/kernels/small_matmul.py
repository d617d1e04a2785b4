"""`@` by a small matrix parameter (`schedule.small_matmul`: literal sizes of at most 16,
64 elements): computed where it is read, a thread per output row, with no tiled launch.
Every form runs on every backend against the shim (tests/test_backends_exec.py,
tests/test_ptx_exec.py, tests/test_spirv.py)."""

from mimir.array import Dim, InOut, Tensor, float16, float32, gpu, int32

N = Dim("N")
B = Dim("B")


@gpu
def rotate_points(p: Tensor[float32, N, 3], r: Tensor[float32, 3, 3]) -> Tensor[float32, N, 3]:
    return p @ r


@gpu
def two_small_layers(
    x: Tensor[float32, N, 6], w1: Tensor[float32, 6, 8], w2: Tensor[float32, 8, 2]
) -> Tensor[float32, N, 2]:
    return (x @ w1).relu() @ w2


@gpu
def batched_rows(x: Tensor[float32, B, N, 4], w: Tensor[float32, 4, 5]) -> Tensor[float32, B, N, 5]:
    return x @ w + 1.0


@gpu
def half_rows(x: Tensor[float16, N, 12], w: Tensor[float16, 12, 4]) -> Tensor[float16, N, 4]:
    return x @ w


@gpu
def int_rows(x: Tensor[int32, N, 5], w: Tensor[int32, 5, 3]) -> Tensor[int32, N, 3]:
    return x @ w


@gpu
def column_sums_of_a_product(
    x: Tensor[float32, N, 4], w: Tensor[float32, 4, 4]
) -> Tensor[float32, 4]:
    return (x @ w).sum(axis=0)


@gpu
def whole_sum_of_a_product(x: Tensor[float32, N, 3], w: Tensor[float32, 3, 2]) -> Tensor[float32]:
    return (x @ w).sum()


@gpu
def softmax_then_mix(x: Tensor[float32, N, 4], w: Tensor[float32, 4, 4]) -> Tensor[float32, N, 4]:
    return x.softmax() @ w + x.max(axis=1, keepdims=True)


@gpu
def softmax_then_project(
    x: Tensor[float32, N, 4], w: Tensor[float32, 4, 3]
) -> Tensor[float32, N, 3]:
    return x.softmax() @ w


@gpu
def transposed_product(x: Tensor[float32, N, 3], w: Tensor[float32, 3, 3]) -> Tensor[float32, 3, N]:
    return (x @ w).T


@gpu
def rotate_in_place(p: InOut[Tensor[float32, N, 3]], r: Tensor[float32, 3, 3]) -> None:
    p = p @ r  # noqa: F841 (written back: `InOut`)
