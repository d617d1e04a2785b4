"""Counter-based random numbers: `rand` and `randn` (Philox4x32-10, as Triton's `tl.rand`
and `tl.randn`), element-wise over `arange` offsets, over index arithmetic, over uint32
offsets, and on scalars in an index-level kernel.

`rand` is bit-identical in the shim and on every backend (integer rounds, one rounded
int-to-float conversion, one float32 product); `randn` goes through `log`, `sqrt` and `cos`,
so it agrees within the float32 tolerance (tests/test_random.py checks both).
"""

from mimir.array import (
    Dim,
    Tensor,
    arange,
    float32,
    gpu,
    int32,
    program_id,
    rand,
    randn,
    uint32,
    where,
)

N = Dim("N")
M = Dim("M")


@gpu
def dropout(x: Tensor[float32, N], seed: int) -> Tensor[float32, N]:
    keep = rand(seed, arange(N)) > 0.25
    return where(keep, x / 0.75, 0.0)


@gpu
def gaussian_noise(x: Tensor[float32, M, N], seed: int) -> Tensor[float32, M, N]:
    offsets = arange(M).reshape(M, 1) * N + arange(N)
    return x + randn(seed, offsets) * 0.1


@gpu
def uniform_of(offsets: Tensor[uint32, N]) -> Tensor[float32, N]:
    return rand(12345, offsets)


@gpu
def uniform_signed(offsets: Tensor[int32, N], seed: int) -> Tensor[float32, N]:
    return rand(seed, offsets)


@gpu
def uniform_and_normal(offsets: Tensor[int32, N], seed: int) -> Tensor[float32, N]:
    return rand(seed, offsets) + randn(-7, offsets)


@gpu(grid=(N,))
def scalar_rand(out: Tensor[float32, N], seed: int):
    i = program_id(0)
    out[i] = rand(seed, i * 3 + 1) + randn(seed, i)
