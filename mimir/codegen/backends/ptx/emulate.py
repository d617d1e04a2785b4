"""Exact CPU execution of the PTX instruction sequences in `mimir.codegen.backends.ptx.mathlib`.

Each opcode those sequences use is modelled as the PTX ISA defines it, with
IEEE 754 binary32 round-to-nearest-even done exactly (a double operation
rounded once for + - * /, which is exact for them; for fma a double sum
rounded to odd, then to float32; gradual underflow and overflow to inf included), so `run`
returns bit for bit what a GPU computes for the same sequence. Registers hold
Python floats (f32 values, exactly representable), ints in [0, 2**32) (b32)
or bools (pred). Float sources that are nan or inf are computed with Python's
own float arithmetic, which has the IEEE special-value rules.

Stdlib-only; slow (pure Python), which is fine for the test sweeps it serves.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from mimir.codegen.backends.ptx.mathlib import F32, Int, Op, Seq, sequences

__all__ = ["evaluate", "round_f32", "run", "ulp", "ulp_error"]

_MAX_EXP = 128  # values at or above 2**128 after rounding are inf
_MIN_EXP = -126  # the smallest normal exponent; subnormal quantum 2**-149


def round_f32(q: Fraction | int, negative_zero: bool = False) -> float:
    """The rational `q` rounded to the nearest float32 (ties to even)."""
    if q == 0:
        return -0.0 if negative_zero else 0.0
    q = Fraction(q)
    sign = -1.0 if q < 0 else 1.0
    a = abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    e = max(e, _MIN_EXP)
    quantum = Fraction(2) ** (e - 23)
    n = round(a / quantum)  # Fraction.__round__ rounds half to even
    value = n * quantum
    if value >= Fraction(2) ** _MAX_EXP:
        return sign * math.inf
    return sign * float(value)  # exact: n has at most 24 bits


_DOUBLE, _INT64, _FLOAT = struct.Struct("<d"), struct.Struct("<q"), struct.Struct("<f")


def _signed(v: int) -> int:
    return v - (1 << 32) if v & 0x80000000 else v


def _u32(v: int) -> int:
    return v & 0xFFFFFFFF


def _bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def _float(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def _finite(*xs: float) -> bool:
    return all(math.isfinite(x) for x in xs)


def _neg_zero(x: float) -> bool:
    return x == 0 and math.copysign(1.0, x) < 0


def _to_f32(x: float) -> float:
    """A double rounded to float32 (ties to even; past the range, inf)."""
    try:
        return _FLOAT.unpack(_FLOAT.pack(x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


# + - * / of two float32 values: computing in double and rounding once to float32
# gives the correctly rounded float32 result (53 >= 2 * 24 + 2: double rounding is
# innocuous for these operations), with IEEE signs of zero and special values.
def _add(a: float, b: float) -> float:
    return _to_f32(a + b)


def _mul(a: float, b: float) -> float:
    return _to_f32(a * b)


def _div(a: float, b: float) -> float:
    if b == 0:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    if math.isinf(a) and math.isinf(b):
        return math.nan
    return _to_f32(a / b)


def _fma(a: float, b: float, c: float) -> float:
    """a * b + c with one rounding. The product of two float32 values is exact in double;
    the sum is rounded to double *to odd* (nearest, then one ulp toward the exact sum
    where it was inexact and landed on an even significand), which makes the final
    rounding to float32 correct (53 >= 24 + 2; Boldo and Melquiond, "Emulation of FMA
    and correctly rounded sums: proved algorithms using rounding to odd"). Zero signs
    follow from double arithmetic, which has IEEE's."""
    product = a * b  # at most 48 significant bits, within double's exponents
    total = product + c
    if not math.isfinite(total):  # an infinite or nan operand (finite ones cannot overflow)
        return total
    # TwoSum: the exact error of the double sum
    c_part = total - product
    error = (product - (total - c_part)) + (c - c_part)
    if error != 0 and not _INT64.unpack(_DOUBLE.pack(total))[0] & 1:
        total = math.nextafter(total, math.inf if error > 0 else -math.inf)
    return _to_f32(total)


def _fma_exact(a: float, b: float, c: float) -> float:
    """`_fma` in rational arithmetic: the reference its tests compare with."""
    if not _finite(a, b, c):
        return a * b + c
    product_negative = (a < 0 or _neg_zero(a)) != (b < 0 or _neg_zero(b))
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    both_neg_zero = exact == 0 and product_negative and _neg_zero(c) and (a == 0 or b == 0)
    return round_f32(exact, both_neg_zero)


def _min(a: float, b: float) -> float:
    # PTX min/max: a nan operand yields the other operand.
    if math.isnan(a):
        return b
    if math.isnan(b):
        return a
    return min(a, b)


def _max(a: float, b: float) -> float:
    if math.isnan(a):
        return b
    if math.isnan(b):
        return a
    return max(a, b)


def _rni(x: float) -> float:
    return x if not math.isfinite(x) else math.copysign(float(round(x)), x)


def _rzi_s32(x: float) -> int:
    if math.isnan(x):
        return 0
    if x >= 2**31:
        return 0x7FFFFFFF
    if x <= -(2**31):
        return 0x80000000
    return _u32(int(x))


def _mov_b32(kind: str, v: Any) -> Any:
    if kind == "f32":
        return _float(v)
    return _bits(v) if isinstance(v, float) else v


def _flush(x: float) -> float:
    """`.ftz`: a subnormal becomes a zero of the same sign."""
    return math.copysign(0.0, x) if x != 0 and abs(x) < 2.0**-126 else x


def _ex2_approx_ftz(t: float) -> float:
    """ex2.approx.ftz.f32, modelled as 2^t correctly rounded (the GPU: within 2 ulp)."""
    t = _flush(t)
    if not math.isfinite(t):
        return t if not t < 0 else 0.0
    if t >= 128:
        return math.inf
    if t < -152:
        return 0.0
    # 2^t = 2^n 2^f: the double 2^f is within 1 ulp of double, far inside float32's half ulp
    # except in exact ties, which 2^f for a float32 f that is not an integer never is.
    return _flush(round_f32(Fraction(2.0**t)))


def _rcp_approx_ftz(a: float) -> float:
    """rcp.approx.ftz.f32, modelled as 1/a correctly rounded (the GPU: within 1 ulp)."""
    a = _flush(a)
    if a == 0:
        return math.copysign(math.inf, a)
    return _flush(_div(1.0, a))


def _rsqrt_approx(a: float) -> float:
    """rsqrt.approx.f32 (subnormals kept), modelled as 1/sqrt(a) correctly rounded (the
    GPU: relative error within 2^-22.9, about 2 ulp): nan below 0, -inf at -0, +inf at
    +0, 0 at +inf."""
    if math.isnan(a) or a < 0:
        return math.nan
    if a == 0:
        return math.copysign(math.inf, a)
    if math.isinf(a):
        return 0.0
    return round_f32(Fraction(1.0 / math.sqrt(a)))


_F32_OPS: dict[str, Callable[..., Any]] = {
    "add.rn.f32": _add,
    "sub.rn.f32": lambda a, b: _add(a, -b),
    "mul.rn.f32": _mul,
    "fma.rn.f32": _fma,
    "div.rn.f32": _div,
    # fast math's division, modelled correctly rounded (the GPU: within 2 ulp, full range)
    "div.full.f32": _div,
    "min.f32": _min,
    "max.f32": _max,
    "abs.f32": abs,
    "copysign.f32": lambda a, b: math.copysign(b, a),
    "cvt.rni.f32.f32": _rni,
    "cvt.rzi.s32.f32": _rzi_s32,
    "cvt.rn.f32.s32": lambda v: round_f32(_signed(v)),
    "testp.notanumber.f32": math.isnan,
    "setp.lt.f32": lambda a, b: a < b,
    "setp.eq.f32": lambda a, b: a == b,
    "selp.f32": lambda a, b, p: a if p else b,
    "add.s32": lambda a, b: _u32(a + b),
    "sub.s32": lambda a, b: _u32(a - b),
    "shl.b32": lambda a, n: _u32(a << n),
    "shr.s32": lambda a, n: _u32(_signed(a) >> n),
    "setp.ge.u32": lambda a, b: a >= b,
    "setp.lt.u32": lambda a, b: a < b,
    "setp.eq.u32": lambda a, b: a == b,
    "selp.b32": lambda a, b, p: a if p else b,
    "and.b32": lambda a, b: a & b,
    "or.b32": lambda a, b: a | b,
    "shr.u32": lambda a, n: a >> n if n < 32 else 0,  # PTX clamps the amount to 32
    "mul.lo.u32": lambda a, b: _u32(a * b),
    "mul.hi.u32": lambda a, b: (a * b) >> 32,
    "cvt.rn.f32.u32": lambda v: round_f32(v),
    "neg.f32": lambda a: -a,
    "ex2.approx.ftz.f32": _ex2_approx_ftz,
    "rcp.approx.ftz.f32": _rcp_approx_ftz,
    "rsqrt.approx.f32": _rsqrt_approx,
}


def _value(operand: Any, env: Mapping[str, Any]) -> Any:
    if isinstance(operand, F32):
        return operand.value if math.isnan(operand.value) else _float(_bits(operand.value))
    if isinstance(operand, Int):
        return _u32(operand.value)
    return env[operand]


def run(ops: Sequence[Op], env: Mapping[str, Any]) -> dict[str, Any]:
    """Execute `ops` from the register values in `env`; every register afterwards."""
    regs = dict(env)
    for op in ops:
        args = [_value(s, regs) for s in op.srcs]
        if op.opcode == "mov.b32":
            regs[op.dst] = _mov_b32(op.kind, args[0])
            continue
        fn = _F32_OPS.get(op.opcode)
        if fn is None:
            raise ValueError(f"the emulator does not model `{op.opcode}`")
        regs[op.dst] = fn(*args)
    return regs


def evaluate(name: str, *args: float, math_mode: str = "precise") -> float:
    """`name` (exp, log, tanh, pow, sin, cos; fast: also sigmoid, gelu) of float32 `args`,
    as the PTX sequence of `math_mode` computes it."""
    seq = Seq()
    inputs = [f"%in{k}" for k in range(len(args))]
    result = sequences(math_mode)[name](seq, *inputs)
    env = {reg: _float(_bits(a)) for reg, a in zip(inputs, args, strict=True)}
    return run(seq.ops, env)[result]


def ulp(x: float) -> float:
    """The float32 ulp at the correctly rounded value `x` (the gap above |x|)."""
    a = abs(x)
    if a < 2.0**-126:
        return 2.0**-149
    e = math.frexp(a)[1] - 1  # 2**e <= a < 2**(e+1)
    return 2.0 ** (min(e, 127) - 23)


def ulp_error(got: float, exact: float) -> float:
    """|got - exact| in ulp of float32 at `exact` (the real value, not rounded)."""
    if math.isnan(got) or math.isnan(exact):
        return 0.0 if math.isnan(got) and math.isnan(exact) else math.inf
    if math.isinf(exact) or math.isinf(got):
        # An exact value past the float32 range rounds to inf: that is no error.
        return 0.0 if got == round_f32(Fraction(exact)) or got == exact else math.inf
    return abs(got - exact) / ulp(exact)
