"""How far an output may be from the shim's and still match: (rtol, atol) per dtype,
the rule `verify` and its NumPy reference (`fast_reference`) both compare with."""

from __future__ import annotations

# (rtol, atol) per dtype. float32: the shim rounds every op to float32, but a
# GPU may reorder a reduction's sums, use fma, and approximate exp/tanh/rsqrt
# within a few ulp (Metal's precise math: <= 4 ulp; WGSL allows exp within
# 3 + 2|x| ulp, and rsqrt/inverse within 2 ulp); 1e-4 relative covers reordered
# sums of thousands of terms in [-1, 1), and 1e-5 absolute covers cancellation
# near zero. float16 has an 11-bit significand (eps 2^-10 ~ 1e-3), and an
# implementation may keep intermediates in f32 or in f16: allow a few half ulp.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float32": (1e-4, 1e-5),
    "float16": (1e-2, 1e-3),
    "bfloat16": (1e-2, 1e-2),  # an 8-bit significand: eps 2^-7 ~ 8e-3
    "int32": (0.0, 0.0),
    "uint32": (0.0, 0.0),
    "bool_": (0.0, 0.0),
}
