"""Element-wise kernels that the schedule runs four elements per thread with 128-bit
accesses (`mimir.codegen.vectorize`), and the ones it must keep scalar.

- sizes: a symbolic count (a vector part and a scalar tail of `N % 4`; the `one` binding
  is the tail alone), a count proven a multiple of 4 (one guard per thread), a literal
  multiple of 1024 (no guard), a literal with a tail (6), a literal below 4 (scalar), a
  dim that may be 0 (scalar);
- types: f32, i32, a bool result (stored as u32), a float16 operand (read lane by lane)
  into an f32 result;
- layouts: a broadcast row and a transposed operand (read lane by lane, the other
  operand and the result 4-wide), an update in place.
"""

from mimir.array import Dim, InOut, Tensor, bool_, float16, float32, gpu, int32

N = Dim("N")
Q = Dim("Q", multiple_of=4)
E = Dim("E", min=0)
R = Dim("R")
C = Dim("C")


@gpu
def vec_add(a: Tensor[float32, N], b: Tensor[float32, N]) -> Tensor[float32, N]:
    return a + b


@gpu
def vec_add_quads(a: Tensor[float32, Q], b: Tensor[float32, Q]) -> Tensor[float32, Q]:
    return a + b


@gpu
def vec_add_2048(a: Tensor[float32, 2048], b: Tensor[float32, 2048]) -> Tensor[float32, 2048]:
    return a + b


@gpu
def vec_scale_6(a: Tensor[float32, 6]) -> Tensor[float32, 6]:
    return a * 3.0 - 1.0


@gpu
def vec_scale_3(a: Tensor[float32, 3]) -> Tensor[float32, 3]:
    return a * 3.0 - 1.0


@gpu
def vec_maybe_empty(a: Tensor[float32, E]) -> Tensor[float32, E]:
    return a * 2.0


@gpu
def vec_sigmoid_chain(x: Tensor[float32, N], y: Tensor[float32, N]) -> Tensor[float32, N]:
    return (x * 2.0 + y).sigmoid() * x


@gpu
def vec_int_affine(a: Tensor[int32, Q], b: Tensor[int32, Q]) -> Tensor[int32, Q]:
    return a * 3 + b


@gpu
def vec_positive(x: Tensor[float32, N]) -> Tensor[bool_, N]:
    return x > 0.0


@gpu
def vec_widen_half(h: Tensor[float16, N], x: Tensor[float32, N]) -> Tensor[float32, N]:
    return h.astype(float32) * x


@gpu
def vec_row_bias(x: Tensor[float32, R, C], b: Tensor[float32, C]) -> Tensor[float32, R, C]:
    return x + b


@gpu
def vec_add_transposed(x: Tensor[float32, R, C], y: Tensor[float32, C, R]) -> Tensor[float32, R, C]:
    return x + y.T


@gpu
def vec_axpy_in_place(y: InOut[Tensor[float32, N]], x: Tensor[float32, N]):
    y += 2.0 * x
