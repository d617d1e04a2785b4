"""Integer bit operations: `^`, `<<`, `>>` (and `&`, `|`) on int32 and uint32.

Every shift count is proven in 0..31 (GPU037): literals, a count tensor declared
`Range(0, 32)`, a clamp, and `% 32` of an index. `>>` of a negative int32 is arithmetic
(sign-filling) as Python's; `<<` wraps as the shim's int32 does (bits past 31 are
dropped, `1 << 31` is -2147483648). Integer inputs are random in {-1, 0, 1} (every bit
set, none, the low one); the kernels first spread them over all 32 bits with a wrapping
multiply, so the sign bit and the overflow of `<<` are exercised on every backend.
"""

from mimir.array import Dim, Range, Tensor, bool_, gpu, int32, maximum, minimum, program_id, uint32

N = Dim("N")


@gpu
def xor_shift(a: Tensor[int32, N], b: Tensor[int32, N]):
    h = a * 1640531527 + b * 40503 + 12345
    return h ^ b, h << 3, h >> 5, (h & 0xFF) | (b << 24), h >> 31


@gpu
def shift_by_tensor(a: Tensor[int32, N], k: Tensor[int32, N, Range(0, 32)], b: Tensor[int32, N]):
    h = a * 1640531527 + 12345
    return h << k, h >> k, h >> minimum(maximum(b * 40503, 0), 31)


@gpu
def uint_bits(a: Tensor[uint32, N], b: Tensor[uint32, N]):
    # uint32 `>>` is logical; `(a >> 16) ^ a` is the usual hash mix
    h = a * 2654435761 + b * 40503 + 12345
    return (h >> 16) ^ h, (h << 7) | (h >> 25), h ^ b ^ 0xDEADBEEF


@gpu
def bool_xor(p: Tensor[bool_, N], q: Tensor[bool_, N]) -> Tensor[bool_, N]:
    return p ^ q


@gpu(grid=(N,))
def index_bits(a: Tensor[int32, N], out: Tensor[int32, N]):
    i = program_id(0)
    h = a[i] * 1640531527 + i * 40503
    out[i] = (h << (i % 32)) ^ (h >> 31) ^ (h >> (i % 7)) ^ (i << 2)
