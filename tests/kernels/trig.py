"""sin and cos, element-wise and on scalars, at small and large arguments.

Inputs are random in [-1, 1); the kernels scale them so that the arguments reach
past the reduction's easy range: `x * 4000` (rotary angles of long contexts),
`x * 3e5` (past 2^17, where the PTX sequence switches to Payne-Hanek reduction)
and `x * 1e30`. The shim reduces exactly (Python's `math.sin` of the float32
argument), so the comparison shows each backend's reduction (PTX's `mathlib`,
MSL's `precise::`, the `mimir_trig` helper on WGSL and SPIR-V), within the float32
tolerance (1e-4 relative, 1e-5 absolute; docs/language.md and docs/ptx.md have
the ulp figures).
"""

import math

from mimir.array import Dim, Tensor, float32, gpu

N = Dim("N")


@gpu
def sin_cos_small(x: Tensor[float32, N]) -> Tensor[float32, N]:
    return (x * 3.0).sin() * 0.5 + (x * 3.0).cos() * 0.25 + math.sin(0.5) - math.cos(N)


@gpu
def sin_cos_rotary(x: Tensor[float32, N]) -> Tensor[float32, N]:
    a = x * 4000.0
    return a.sin() + 2.0 * a.cos()


@gpu
def sin_cos_huge(x: Tensor[float32, N]) -> Tensor[float32, N]:
    return (x * 3e5).sin() + (x * 1e30).cos()
