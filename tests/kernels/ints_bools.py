"""Integer and bool element-wise ops with Python semantics (floor //, %, **, ~, &, |)."""

from mimir.array import Dim, Tensor, bool_, float32, gpu, int32, uint32

N = Dim("N")


@gpu
def int_arith(a: Tensor[int32, N], b: Tensor[int32, N]):
    return a // b, a % b, a * b - a, (a & b) | ~a, -a


@gpu
def int_pow(a: Tensor[int32, N], b: Tensor[int32, N]) -> Tensor[int32, N]:
    return a ** (b % 5)


@gpu
def uint_ops(a: Tensor[uint32, N], b: Tensor[uint32, N]) -> Tensor[uint32, N]:
    return (a // (b + 1)) + (a % 3) - 1


@gpu
def compare(a: Tensor[int32, N], x: Tensor[float32, N]) -> Tensor[bool_, N]:
    return (a > 0) & (x <= 0.5) | (a == -3)


@gpu
def bool_logic(p: Tensor[bool_, N], q: Tensor[bool_, N]) -> Tensor[bool_, N]:
    return (p & ~q) | (q != p)


@gpu
def mixed_int_float(a: Tensor[int32, N], x: Tensor[float32, N]) -> Tensor[float32, N]:
    return a * x + a / 4 + x // 0.25 + x % 0.3
