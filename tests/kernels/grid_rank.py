"""Index-level kernels on grids of rank 4 and 5: the grid is flattened onto one dispatch
axis and every `program_id(k)` recovered by division and modulo, row-major as the shim's
loop (`mimir.codegen.kernels.index_level`)."""

from mimir.array import Dim, Tensor, float32, gpu, int32, program_id

B = Dim("B")
H = Dim("H")
T = Dim("T")
D = Dim("D")


@gpu(grid=(B, H, T, D))
def ids_4d(x: Tensor[float32, B, H, T, D], out: Tensor[float32, B, H, T, D]):
    b = program_id(0)
    h = program_id(1)
    t = program_id(2)
    d = program_id(3)
    out[b, h, t, d] = x[b, h, t, d] + b * 1000 + h * 100 + t * 10 + d


@gpu(grid=(2, B, 3, H, T))
def ids_5d(x: Tensor[float32, B, H, T], out: Tensor[int32, 2, B, 3, H, T]):
    p = program_id(0)
    b = program_id(1)
    q = program_id(2)
    h = program_id(3)
    t = program_id(4)
    out[p, b, q, h, t] = (((p * B + b) * 3 + q) * H + h) * T + t + (x[b, h, t] > 0.0)
