"""Scalar semantics of every element-level operation, and dtype casts.

These functions are the reference semantics the shim executes and the backends
must match. They work on Python numbers; `cast` rounds or wraps a list of
results into a dtype (float32 through `array('f')`, float16 through struct's
IEEE half, int32/uint32 by two's-complement wrap-around).

Where Python and GPU semantics differ, the rule here is the kernel language's:
- integer `//` and `%` are floor division and floor modulo (Python, NumPy), not
  C's truncation; division by zero gives 0 (NumPy's result, without its warning);
- float division by zero gives +-inf or nan (IEEE), never an exception;
- float -> integer casts truncate toward zero and saturate, nan becomes 0
  (what WGSL, PTX `cvt.rzi.sat` and Metal's saturating convert do).
"""

from __future__ import annotations

import math
import struct
from array import array
from collections.abc import Iterable, Sequence

from mimir.dtypes import DType, bfloat16, bool_, float16, float32, int32, uint32

Number = float | int | bool

_INF = math.inf
_NAN = math.nan


def _fdiv(a: float, b: float) -> float:
    try:
        return a / b
    except ZeroDivisionError:
        if a != a or a == 0:
            return _NAN
        return math.copysign(_INF, a) * math.copysign(1.0, b)


def fsum(values: Iterable[float]) -> float:
    """The correctly rounded sum (`math.fsum`), with IEEE's answers where `math.fsum`
    raises: nan where +inf and -inf meet; and where a partial sum of finite values leaves
    the double range (float64 values near its max), the sum taken 2^-64 smaller and scaled
    back (inf, with its sign, when the total overflows; the scaling drops only what is
    below the total's last bit)."""
    items = list(values)
    try:
        return math.fsum(items)
    except ValueError:  # -inf + inf
        return math.nan
    except OverflowError:
        return math.fsum(v * 2.0**-64 for v in items) * 2.0**64


def add(a: Number, b: Number) -> Number:
    return a + b


def sub(a: Number, b: Number) -> Number:
    return a - b


def mul(a: Number, b: Number) -> Number:
    return a * b


def truediv(a: Number, b: Number) -> float:
    return _fdiv(float(a), float(b))


def floordiv(a: Number, b: Number) -> Number:
    if isinstance(a, float) or isinstance(b, float):
        q = _fdiv(float(a), float(b))
        return q if math.isinf(q) or q != q else float(math.floor(q))
    if b == 0:
        return 0
    return a // b


def mod(a: Number, b: Number) -> Number:
    if isinstance(a, float) or isinstance(b, float):
        a, b = float(a), float(b)
        if b == 0 or math.isinf(a) or a != a or b != b:
            return _NAN
        if math.isinf(b):
            return a if (a >= 0) == (b > 0) or a == 0 else b
        return a % b
    if b == 0:
        return 0
    return a % b


def power(a: Number, b: Number) -> Number:
    if isinstance(a, float) or isinstance(b, float):
        a, b = float(a), float(b)
        try:
            r = a**b
        except ZeroDivisionError:  # 0.0 ** negative
            return _INF
        except OverflowError:
            return _INF if a > 0 or float(b).is_integer() and int(b) % 2 == 0 else -_INF
        if isinstance(r, complex):
            return _NAN
        return r
    if b < 0:
        # Integer to a negative power: the integer part of the real result.
        if a == 0:
            return 0
        return int(1 / (a ** (-b)))
    return a**b


def neg(a: Number) -> Number:
    return -a


def absolute(a: Number) -> Number:
    return abs(a)


def relu(a: Number) -> Number:
    if a != a:
        return a
    return a if a > 0 else (0.0 if isinstance(a, float) else 0)


def exp(a: float) -> float:
    try:
        return math.exp(a)
    except OverflowError:
        return _INF


def log(a: float) -> float:
    if a != a or a < 0:
        return _NAN
    if a == 0:
        return -_INF
    return math.log(a)


def sqrt(a: float) -> float:
    if a != a or a < 0:
        return _NAN
    return math.sqrt(a)


def rsqrt(a: float) -> float:
    return _fdiv(1.0, sqrt(a))


def sigmoid(a: float) -> float:
    # Stable in both tails: never exponentiates a large positive number.
    if a != a:
        return a
    if a >= 0:
        return 1.0 / (1.0 + math.exp(-a))
    e = math.exp(a)
    return e / (1.0 + e)


def tanh(a: float) -> float:
    return math.tanh(a)


def sin(a: float) -> float:
    # Python raises on +-inf; IEEE (and every GPU) gives nan. The argument is reduced
    # exactly (math.sin of a double is correctly reduced for every finite value).
    if a != a or math.isinf(a):
        return _NAN
    return math.sin(a)


def cos(a: float) -> float:
    if a != a or math.isinf(a):
        return _NAN
    return math.cos(a)


_GELU_C = math.sqrt(2.0 / math.pi)


def gelu(a: float) -> float:
    """The tanh approximation (`jax.nn.gelu(approximate=True)`)."""
    if a != a or math.isinf(a):
        return a if a > 0 or a != a else 0.0
    return 0.5 * a * (1.0 + math.tanh(_GELU_C * (a + 0.044715 * a * a * a)))


def gelu_erf(a: float) -> float:
    """The exact GELU, `x Phi(x)` (`torch.nn.functional.gelu(approximate="none")`), as
    `0.5 x erfc(-x / sqrt 2)`: no cancellation in `1 + erf` for negative x."""
    if a != a or math.isinf(a):
        return a if a > 0 or a != a else 0.0
    return 0.5 * a * math.erfc(-a / math.sqrt(2.0))


def _overflowing(fn, a: float, sign_of_inf: float = 1.0) -> float:
    try:
        return fn(a)
    except OverflowError:
        return math.copysign(_INF, a) if sign_of_inf < 0 else _INF


def cosh(a: float) -> float:
    return _overflowing(math.cosh, a)


def sinh(a: float) -> float:
    return _overflowing(math.sinh, a, -1.0)  # sinh(-1000) is -inf


def expm1(a: float) -> float:
    return _overflowing(math.expm1, a)


def log1p(a: float) -> float:
    # Python raises at -1 and below; IEEE (and every GPU) gives -inf and nan.
    if a != a or a < -1:
        return _NAN
    if a == -1:
        return -_INF
    return math.log1p(a)


def erf(a: float) -> float:
    return math.erf(a)


def erfc(a: float) -> float:
    return math.erfc(a)


def atan(a: float) -> float:
    return math.atan(a)


def atan2(a: float, b: float) -> float:
    """`atan2(y, x)`: the angle of the point (x, y), IEEE's answers at zeros and infinities
    (Python's `math.atan2` already gives them)."""
    return math.atan2(a, b)


def maximum(a: Number, b: Number) -> Number:
    if a != a:
        return a
    if b != b:
        return b
    return a if a >= b else b


def minimum(a: Number, b: Number) -> Number:
    if a != a:
        return a
    if b != b:
        return b
    return a if a <= b else b


def clip(a: Number, lo: Number, hi: Number) -> Number:
    return minimum(maximum(a, lo), hi)


def bitand(a: Number, b: Number) -> Number:
    return a & b  # type: ignore[operator]


def bitor(a: Number, b: Number) -> Number:
    return a | b  # type: ignore[operator]


def bitxor(a: Number, b: Number) -> Number:
    return a ^ b  # type: ignore[operator]


def lshift(a: Number, b: Number) -> Number:
    """`a << b` for a count the checker proved in 0..31: Python's exact product, which
    `cast` wraps to int32/uint32 as the GPU's shift drops the bits shifted out."""
    return a << b  # type: ignore[operator]


def rshift(a: Number, b: Number) -> Number:
    """`a >> b`: arithmetic (sign-filling) on int32, logical on uint32, as Python's `>>`
    on the value (a uint32 is never negative)."""
    return a >> b  # type: ignore[operator]


def invert(a: Number) -> Number:
    if isinstance(a, bool):
        return not a
    return ~a


def lt(a: Number, b: Number) -> bool:
    return a < b


def le(a: Number, b: Number) -> bool:
    return a <= b


def gt(a: Number, b: Number) -> bool:
    return a > b


def ge(a: Number, b: Number) -> bool:
    return a >= b


def eq(a: Number, b: Number) -> bool:
    return a == b


def ne(a: Number, b: Number) -> bool:
    return a != b


def where(c: Number, a: Number, b: Number) -> Number:
    return a if c else b


# ---------------------------------------------------------------- casts

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_UINT32_MAX = 2**32 - 1


def _to_int(v: Number, lo: int, hi: int) -> int:
    if isinstance(v, float):
        if v != v:
            return 0
        if v >= hi:
            return hi
        if v <= lo:
            return lo
        return int(v)  # truncates toward zero
    return int(v)


def _half(values: Sequence[float]) -> list[float]:
    out = []
    for v in values:
        try:
            out.append(struct.unpack("<e", struct.pack("<e", v))[0])
        except OverflowError:
            out.append(math.copysign(_INF, v))
    return out


def _bfloat(values: Sequence[float]) -> list[float]:
    """float32 first (a bfloat16 value is computed in float32), then the upper 16 bits
    rounded to nearest even, as a GPU without native bfloat16 stores it."""
    out = []
    for v in values:
        try:
            bits = struct.unpack("<I", struct.pack("<f", v))[0]
        except OverflowError:
            out.append(math.copysign(_INF, v))
            continue
        if v != v:
            out.append(_NAN)
            continue
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000  # finite: no carry out
        out.append(struct.unpack("<f", struct.pack("<I", bits))[0])
    return out


def cast(values: Sequence[Number], dtype: DType) -> list[Number]:
    """Round, wrap or convert a list of Python numbers into `dtype`'s values."""
    if dtype == float32:
        return array("f", [float(v) for v in values]).tolist()
    if dtype == float16:
        return _half([float(v) for v in values])
    if dtype == bfloat16:
        return _bfloat([float(v) for v in values])
    if dtype == int32:
        out = []
        for v in values:
            i = _to_int(v, _INT32_MIN, _INT32_MAX) if isinstance(v, float) else int(v)
            i &= 0xFFFFFFFF
            out.append(i - (1 << 32) if i > _INT32_MAX else i)
        return out
    if dtype == uint32:
        return [
            _to_int(v, 0, _UINT32_MAX) if isinstance(v, float) else int(v) & 0xFFFFFFFF
            for v in values
        ]
    if dtype == bool_:
        return [bool(v) for v in values]
    raise TypeError(f"unknown dtype {dtype}")


def python_value(value: Number, dtype: DType) -> Number:
    """One scalar in `dtype`'s Python representation (for scalars mixed with tensors)."""
    return cast([value], dtype)[0]


def tf32(value: float) -> float:
    """A float32 value rounded to TF32 (8-bit exponent, 10 explicit mantissa bits), as PTX
    `cvt.rna.tf32.f32` does: to nearest, ties away from zero, on the 13 dropped bits (a
    carry into the exponent rounds up to the next binade or to infinity); nan and
    infinities stay as they are. The operand rounding of `@gpu(precision="tf32")`."""
    if not math.isfinite(value):
        return value
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    sign, magnitude = bits & 0x80000000, bits & 0x7FFFFFFF
    magnitude = (magnitude + 0x1000) & 0x7FFFE000
    return struct.unpack("<f", struct.pack("<I", sign | magnitude))[0]


def as_operand(value: Number, dtype: DType) -> Number:
    """A value of `dtype` as the Python type an op computes in."""
    if dtype.is_float:
        return float(value)
    if dtype.is_integer:
        return int(value)
    return bool(value)


# ---------------------------------------------------------------- counter-based random numbers
# Philox4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as easy as 1, 2, 3",
# SC 2011), with the constants of Random123 and cuRAND, used as Triton's `tl.rand`/`tl.randn`
# use it: the counter is (offset, 0, 0, 0) and the key (seed's low word, seed's high word),
# the seed sign-extended to 64 bits.
PHILOX_ROUND_A = 0xD2511F53  # multiplier of counter word 0
PHILOX_ROUND_B = 0xCD9E8D57  # multiplier of counter word 2
PHILOX_KEY_A = 0x9E3779B9  # golden ratio, added to key word 0 after each round
PHILOX_KEY_B = 0xBB67AE85  # sqrt(3) - 1, added to key word 1
PHILOX_ROUNDS = 10
# Triton's `uint_to_uniform_float` scale: the largest float32 whose product with the
# largest 31-bit value rounds below 1.0.
UNIFORM_SCALE = 4.6566127342e-10
_M32 = 0xFFFFFFFF


def philox4x32(
    counter: Sequence[int], key: Sequence[int], rounds: int = PHILOX_ROUNDS
) -> tuple[int, int, int, int]:
    """Philox4x32 of a 4-word counter under a 2-word key (Random123's `philox4x32_R`)."""
    c0, c1, c2, c3 = (c & _M32 for c in counter)
    k0, k1 = (k & _M32 for k in key)
    for _ in range(rounds):
        p0, p2 = PHILOX_ROUND_A * c0, PHILOX_ROUND_B * c2
        c0, c1, c2, c3 = (p2 >> 32) ^ c1 ^ k0, p2 & _M32, (p0 >> 32) ^ c3 ^ k1, p0 & _M32
        k0, k1 = (k0 + PHILOX_KEY_A) & _M32, (k1 + PHILOX_KEY_B) & _M32
    return c0, c1, c2, c3


def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def _philox_words(seed: Number, offset: Number) -> tuple[int, int, int, int]:
    seed = int(seed)
    return philox4x32((int(offset), 0, 0, 0), (seed, _M32 if seed < 0 else 0))


def uniform_float(bits: int) -> float:
    """Triton's `uint_to_uniform_float` for 32 bits: the word read as int32, `-x - 1` where it
    is negative (its bitwise not), converted to float32 (round to nearest even) and times
    `UNIFORM_SCALE` in float32: a value in [0, 1)."""
    x = bits & _M32
    if x >= 0x80000000:
        x ^= _M32
    return _f32(_f32(float(x)) * _f32(UNIFORM_SCALE))


def rand(seed: Number, offset: Number) -> float:
    """Triton's `tl.rand(seed, offset)`: word 0 of Philox4x32-10 as a float32 in [0, 1)."""
    return uniform_float(_philox_words(seed, offset)[0])


def randn(seed: Number, offset: Number) -> float:
    """Triton's `tl.randn(seed, offset)`: Box-Muller of words 0 and 1, each float32 op rounded
    (`u1 = max(1e-7, u1)`, `r = sqrt(-2 log u1)`, `r * cos(2 pi u2)`)."""
    w = _philox_words(seed, offset)
    u1 = max(_f32(1.0e-7), uniform_float(w[0]))
    u2 = uniform_float(w[1])
    theta = _f32(_f32(6.283185307179586) * u2)
    r = _f32(math.sqrt(_f32(-2.0 * _f32(math.log(u1)))))
    return _f32(r * _f32(math.cos(theta)))
