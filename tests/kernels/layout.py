"""Transposes, slices, reshapes and new axes: index arithmetic, never copies."""

from mimir.array import Dim, Tensor, float32, gpu

N = Dim("N")
M = Dim("M")


@gpu
def transpose_add(x: Tensor[float32, N, M], y: Tensor[float32, M, N]) -> Tensor[float32, M, N]:
    return x.T + y


@gpu
def permute3(x: Tensor[float32, 2, N, 5]) -> Tensor[float32, 5, 2, N]:
    return x.transpose(2, 0, 1) * 2.0


@gpu
def slice_rows(x: Tensor[float32, N, 8]) -> Tensor[float32, N, 4]:
    return x[:, 2:6] - x[:, -4:]


@gpu
def slice_symbolic(x: Tensor[float32, N + 2, 3], y: Tensor[float32, N, 3]) -> Tensor[float32, N, 3]:
    return x[1 : N + 1] + x[2:, 0][:, None] * y


@gpu
def reshape_flat(x: Tensor[float32, N, 6]) -> Tensor[float32, N, 2, 3]:
    return x.reshape(N, 2, 3).exp()


@gpu
def reshape_then_transpose(x: Tensor[float32, 4, 6]) -> Tensor[float32, 3, 8]:
    return x.reshape(8, 3).T


@gpu
def outer(a: Tensor[float32, N], b: Tensor[float32, M]) -> Tensor[float32, N, M]:
    return a[:, None] * b[None, :]


@gpu
def row_of_matrix(x: Tensor[float32, N, M]) -> Tensor[float32, M]:
    return x[0] + x[N - 1]
