"""The PTX backend's transcendental functions, as straight-line instruction sequences.

Each function is written once, as a list of `Op`s over named temporaries, and
that one list is both what the backend prints (`mimir.codegen.backends.ptx.emit`) and
what `mimir.codegen.backends.ptx.emulate` executes on the CPU. Two sets, chosen by
`mimir compile-gpu --math` (`sequences(mode)`):

- `precise` (`SEQUENCES`): every instruction is correctly rounded (`.rn`
  arithmetic, `fma`, `div.rn`, conversions, bit operations), so the emulation is
  bit-exact and the accuracy it measures is the accuracy the GPU delivers;
- `fast` (`FAST_SEQUENCES`, the default): exp, log, tanh, sigmoid and gelu use the
  hardware's `ex2.approx.ftz.f32` and `rcp.approx.ftz.f32` (one MUFU instruction
  each, 2 and 1 ulp by the PTX ISA), with Cody-Waite-style corrections that keep
  the whole within a few ulp; the emulators model those two as correctly
  rounded with the flush, and the stated bounds add the hardware's. sin, cos and
  pow are the precise sequences in both modes (`sin.approx` is an absolute-error
  approximation on [-pi, pi], not an ulp one).

Precise sequences:

- `exp(x)`: Cody-Waite reduction `x = j*ln2 + r`, `|r| <= ln2/2`, with `ln2`
  split in two (`ln2_hi` has 15 significant bits, so `j*ln2_hi` is exact),
  the degree-7 Taylor polynomial of `e^r` in Horner form, and the scaling by
  `2^j` as two exact powers of two (so the result overflows to inf and
  underflows gradually into subnormals exactly as `e^x` rounded would).
- `log(x)`: `x = 2^e * m` with `m` in [2/3, 4/3) taken from the bits
  (subnormals scaled by 2^23 first), `s = (m-1)/(m+1)`, `log m = 2 atanh s`
  as an odd series in `s` to `s^11` arranged around the exact `f = m - 1`
  (`f - (f^2/2 - s (f^2/2 + R))`, as fdlibm does), then `e*ln2_lo + log m +
  e*ln2_hi`.
- `tanh(x)`: below |x| = 0.55 an odd polynomial `x + x^3 P(x^2)` (degree 4 in
  x^2, fitted for relative error), above it `1 - 2/(exp(2|x|) + 1)` with the
  sign of x; both are computed and one is selected (no divergence).
- `sin(x)`, `cos(x)`: below |x| = 2^17 a three-part Cody-Waite reduction by pi/2
  (with fma the first step is exact), above it Payne-Hanek (the 96 bits of 2/pi
  that matter, picked from a table of seven words by the exponent, times the
  24-bit significand in 32-bit limbs), which the backend branches around when
  every |x| of the warp is below 2^17 (`Seq.skip`; the emulators run it and
  select, which computes the same); then the
  odd and even Taylor polynomials of the reduced argument, chosen and signed
  by the quadrant. inf and nan give nan.
- `pow(a, b)` for a > 0 (the IR's `mimir_pow_f32` helper handles signs, zero,
  one and nan): `exp(b * log(a))`; its error grows with |b ln a|, as every
  GPU's `pow` that is built on exp and log does.

`ACCURACY` states each bound in float32 ulp of the correctly rounded result;
`tests/test_ptx_math.py` measures the sequences against `math` and
`tests/test_ptx_gpu.py` holds the GPU comparison to the same bounds.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from fractions import Fraction

from mimir.codegen.mathlib import COS_TAYLOR, HALF_PI, PI, SIN_TAYLOR, f32, two_over_pi_words

__all__ = [
    "ACCURACY",
    "F32",
    "HALF_PI",
    "PI",
    "SEQUENCES",
    "Int",
    "Op",
    "Seq",
    "exp_f32",
    "f32",
    "log_f32",
    "pow_f32",
    "tanh_f32",
]


def _from_bits(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits))[0]


@dataclass(frozen=True)
class F32:
    """A float32 immediate (printed as `0fXXXXXXXX`, so inf and nan need no spelling)."""

    value: float

    def text(self) -> str:
        if math.isnan(self.value):
            return "0f7FC00000"
        return f"0f{struct.unpack('<I', struct.pack('<f', self.value))[0]:08X}"


@dataclass(frozen=True)
class Int:
    """A 32-bit integer immediate."""

    value: int

    def text(self) -> str:
        return str(self.value)


Operand = str | F32 | Int


@dataclass(frozen=True)
class Op:
    """`opcode dst, srcs...`; `kind` is the register class of `dst`: f32, b32 or pred."""

    opcode: str
    dst: str
    kind: str
    srcs: tuple[Operand, ...]


@dataclass(frozen=True)
class Skip:
    """`ops[start:end]` are only needed when `unless` is false: the backend branches
    around them (their `outputs`, the only registers used after them, start as 0), the
    emulators run them anyway (every use of an output is a `selp` on `unless`)."""

    start: int
    end: int
    unless: str
    outputs: tuple[str, ...]


class Seq:
    """Builds a list of `Op`s; each call appends one and returns its fresh temporary."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.skips: list[Skip] = []
        self._count = 0

    def skip(self, start: int, unless: str, *outputs: str) -> None:
        """Mark the ops appended since `start` as skipped when the predicate `unless` holds."""
        self.skips.append(Skip(start, len(self.ops), unless, outputs))

    def __call__(self, opcode: str, kind: str, *srcs: Operand) -> str:
        name = f"%t{self._count}"
        self._count += 1
        self.ops.append(Op(opcode, name, kind, tuple(srcs)))
        return name


# ---------------------------------------------------------------- constants

LOG2E = F32(1 / math.log(2))
LN2_HI = F32(_from_bits(0x3F317200))  # 0.693145751953125: 15 significant bits
LN2_LO = F32(f32(math.log(2) - LN2_HI.value))
TWO_THIRDS_BITS = 0x3F2AAAAB  # bits of f32(2/3): the lower end of the mantissa range

# e^r = sum r^k / k!, k = 0..7: |r| <= 0.3466 leaves r^8/8! < 6e-9, about 0.1 ulp.
EXP_TAYLOR = tuple(F32(1 / math.factorial(k)) for k in range(8))
# 2 atanh(s) = 2 (s + s^3/3 + s^5/5 + ...): |s| <= 0.2 leaves 2 s^13/13 < 1e-10.
LOG_SERIES = tuple(F32(2 / k) for k in (3, 5, 7, 9, 11))
# tanh(x) = x + x^3 P(x^2) on |x| < 0.55: P fitted by weighted least squares
# (Lawson iterations) to minimise relative error; the fit's own error is below
# 0.02 ulp, the rest is float32 rounding.
TANH_SMALL = 0.55
TANH_POLY = tuple(
    F32(c)
    for c in (
        -0.33333316445350647,
        0.13332585990428925,
        -0.05385231226682663,
        0.02107168920338154,
        -0.006274253595620394,
    )
)

INF, NAN = math.inf, math.nan


# ---------------------------------------------------------------- sequences


def exp_f32(s: Seq, x: str) -> str:
    """e^x for every float32 x (nan -> nan, -inf -> 0, +inf -> inf)."""
    c = s("min.f32", "f32", x, F32(89.0))  # e^89 overflows; min/max send nan to a bound
    c = s("max.f32", "f32", c, F32(-104.0))  # e^-104 rounds to 0
    t = s("mul.rn.f32", "f32", c, LOG2E)
    j = s("cvt.rni.f32.f32", "f32", t)  # j in [-150, 128]
    r = s("fma.rn.f32", "f32", j, F32(-LN2_HI.value), c)  # exact
    r = s("fma.rn.f32", "f32", j, F32(-LN2_LO.value), r)
    p = s("fma.rn.f32", "f32", EXP_TAYLOR[7], r, EXP_TAYLOR[6])
    for k in range(5, -1, -1):
        p = s("fma.rn.f32", "f32", p, r, EXP_TAYLOR[k])
    # 2^j as two exact powers of two: each half of j lies in [-75, 64].
    ji = s("cvt.rzi.s32.f32", "b32", j)
    half = s("shr.s32", "b32", ji, Int(1))
    rest = s("sub.s32", "b32", ji, half)
    scaled = p
    for part in (half, rest):
        biased = s("add.s32", "b32", part, Int(127))
        bits = s("shl.b32", "b32", biased, Int(23))
        scale = s("mov.b32", "f32", bits)
        scaled = s("mul.rn.f32", "f32", scaled, scale)
    nan = s("testp.notanumber.f32", "pred", x)
    return s("selp.f32", "f32", x, scaled, nan)


def log_f32(s: Seq, x: str, divide=None) -> str:
    """ln x for every float32 x (x < 0 and nan -> nan, 0 -> -inf, inf -> inf)."""
    tiny = s("setp.lt.f32", "pred", x, F32(2.0**-126))  # subnormal (or <= 0)
    big = s("mul.rn.f32", "f32", x, F32(2.0**23))
    xx = s("selp.f32", "f32", big, x, tiny)
    adjust = s("selp.f32", "f32", F32(-23.0), F32(0.0), tiny)
    bits = s("mov.b32", "b32", xx)
    shifted = s("sub.s32", "b32", bits, Int(TWO_THIRDS_BITS))
    e_int = s("shr.s32", "b32", shifted, Int(23))
    e_bits = s("shl.b32", "b32", e_int, Int(23))
    m_bits = s("sub.s32", "b32", bits, e_bits)
    m = s("mov.b32", "f32", m_bits)  # in [2/3, 4/3)
    e = s("cvt.rn.f32.s32", "f32", e_int)
    e = s("add.rn.f32", "f32", e, adjust)
    f = s("sub.rn.f32", "f32", m, F32(1.0))  # exact (Sterbenz)
    den = s("add.rn.f32", "f32", f, F32(2.0))
    q = (divide or _div_rn)(s, f, den)  # s = (m-1)/(m+1), |s| <= 0.2
    z = s("mul.rn.f32", "f32", q, q)
    poly = s("fma.rn.f32", "f32", LOG_SERIES[4], z, LOG_SERIES[3])
    for c in (LOG_SERIES[2], LOG_SERIES[1], LOG_SERIES[0]):
        poly = s("fma.rn.f32", "f32", poly, z, c)
    r = s("mul.rn.f32", "f32", poly, z)  # log m = 2s + s*r
    # 2s = f - s*f, so log m = f - (f^2/2 - s*(f^2/2 + r)): f is exact and the
    # parenthesis is small beside it, which keeps the error near half an ulp.
    neg_half_f = s("mul.rn.f32", "f32", f, F32(-0.5))
    neg_hfsq = s("mul.rn.f32", "f32", neg_half_f, f)
    t = s("sub.rn.f32", "f32", r, neg_hfsq)
    t = s("fma.rn.f32", "f32", q, t, neg_hfsq)
    log_m = s("add.rn.f32", "f32", f, t)
    y = s("fma.rn.f32", "f32", e, LN2_LO, log_m)
    y = s("fma.rn.f32", "f32", e, LN2_HI, y)  # e*ln2_hi is exact
    # inf, nan and negatives: bits of x at or above those of +inf.
    xbits = s("mov.b32", "b32", x)
    special = s("setp.ge.u32", "pred", xbits, Int(0x7F800000))
    is_inf = s("setp.eq.f32", "pred", x, F32(INF))
    special_value = s("selp.f32", "f32", F32(INF), F32(NAN), is_inf)
    y = s("selp.f32", "f32", special_value, y, special)
    zero = s("setp.eq.f32", "pred", x, F32(0.0))
    return s("selp.f32", "f32", F32(-INF), y, zero)


def tanh_f32(s: Seq, x: str, exp=None, divide=None) -> str:
    """tanh x for every float32 x (nan -> nan, +-inf -> +-1, -0 -> -0)."""
    a = s("abs.f32", "f32", x)
    small = s("setp.lt.f32", "pred", a, F32(TANH_SMALL))
    z = s("mul.rn.f32", "f32", x, x)
    poly = s("fma.rn.f32", "f32", TANH_POLY[4], z, TANH_POLY[3])
    for c in (TANH_POLY[2], TANH_POLY[1], TANH_POLY[0]):
        poly = s("fma.rn.f32", "f32", poly, z, c)
    poly = s("mul.rn.f32", "f32", poly, z)
    near = s("fma.rn.f32", "f32", poly, x, x)
    near = s("copysign.f32", "f32", x, near)  # tanh(-0) is -0
    two_a = s("add.rn.f32", "f32", a, a)
    e = (exp or exp_f32)(s, two_a)
    den = s("add.rn.f32", "f32", e, F32(1.0))
    frac = (divide or _div_rn)(s, F32(2.0), den)
    far = s("sub.rn.f32", "f32", F32(1.0), frac)
    far = s("copysign.f32", "f32", x, far)
    return s("selp.f32", "f32", near, far, small)


# ---------------------------------------------------------------- sin and cos


# pi, 2/pi's bits and the Taylor coefficients are every target's (`mimir.codegen.mathlib`)
def _f32_of(q: Fraction) -> float:
    return f32(float(q))  # float(q) is q correctly rounded to double; then to float32


# Cody-Waite: pi/2 = P1 + P2 + P3 (24 bits each, about 72 in all). With fma, x - j*P1
# is exact for every float32 x (a multiple of 2^-23 below 1 in magnitude), and the two
# further steps add an error of j * 2^-74 or less, far below an ulp of r while
# j < 2^17 and |r| > 2^-30 (the closest float32 below TRIG_HUGE to a multiple of pi/2
# is further than that; benchmarks/ptx_math_accuracy.py sweeps those inputs).
TRIG_P1 = F32(_f32_of(HALF_PI))
TRIG_P2 = F32(_f32_of(HALF_PI - Fraction(TRIG_P1.value)))
TRIG_P3 = F32(_f32_of(HALF_PI - Fraction(TRIG_P1.value) - Fraction(TRIG_P2.value)))
TWO_OVER_PI = F32(_f32_of(1 / HALF_PI))
HALF_PI_HI = TRIG_P1
HALF_PI_LO = TRIG_P2
# At and above this |x| the reduction is Payne-Hanek (exact integer arithmetic).
TRIG_HUGE = 2.0**17


# Payne-Hanek's table: 16 zero bits, then the bits of 2/pi, as seven 32-bit words; the
# window used starts at bit E + 14 for x = m 2^E, m < 2^24.
_PH_PAD = 16
TWO_OVER_PI_WORDS = two_over_pi_words(_PH_PAD, 7)
SIN_POLY = tuple(F32(c) for c in SIN_TAYLOR)
COS_POLY = tuple(F32(c) for c in COS_TAYLOR)


def _reduce_small(s: Seq, x: str) -> tuple[str, str]:
    """(j, r) with x = j pi/2 + r, |r| <= pi/4 (about): three-part Cody-Waite with fma."""
    t = s("mul.rn.f32", "f32", x, TWO_OVER_PI)
    j = s("cvt.rni.f32.f32", "f32", t)
    r = s("fma.rn.f32", "f32", j, F32(-TRIG_P1.value), x)  # exact
    r = s("fma.rn.f32", "f32", j, F32(-TRIG_P2.value), r)
    r = s("fma.rn.f32", "f32", j, F32(-TRIG_P3.value), r)
    return s("cvt.rzi.s32.f32", "b32", j), r


def _reduce_huge(s: Seq, a: str) -> tuple[str, str]:
    """(j mod 4, r) with a = j pi/2 + r, |r| <= pi/4, for a = |x| >= 2^9 (Payne-Hanek).

    a = m 2^E with m < 2^24 an integer. Only the 96 bits of 2/pi from the one that
    weighs 2 after scaling by 2^E matter: the ones before make multiples of 4 (whole
    turns), the ones after add less than 2^-70. m times that window, in 32-bit limbs,
    gives the quadrant (2 bits) and 62 bits of the fraction, rounded to the nearest
    quadrant and turned into r by a two-float product with pi/2.
    """
    bits = s("mov.b32", "b32", a)
    n0 = s("shr.u32", "b32", bits, Int(23))
    n0 = s("add.s32", "b32", n0, Int(_PH_PAD - 2 - 150))  # E + 14
    word = s("shr.u32", "b32", n0, Int(5))
    shift = s("and.b32", "b32", n0, Int(31))
    back = s("sub.s32", "b32", Int(32), shift)  # 32 shifts to 0 (PTX clamps the amount)
    m = s("and.b32", "b32", bits, Int(0x7FFFFF))
    m = s("or.b32", "b32", m, Int(0x800000))
    which = [s("setp.eq.u32", "pred", word, Int(k)) for k in (1, 2, 3)]
    table = [Int(w) for w in TWO_OVER_PI_WORDS]
    words = []
    for k in range(4):
        w = s("selp.b32", "b32", table[k + 1], table[k], which[0])
        w = s("selp.b32", "b32", table[k + 2], w, which[1])
        words.append(s("selp.b32", "b32", table[k + 3], w, which[2]))
    window = []
    for k in range(3):
        hi = s("shl.b32", "b32", words[k], shift)
        lo = s("shr.u32", "b32", words[k + 1], back)
        window.append(s("or.b32", "b32", hi, lo))
    # m * window: limbs p1 (quadrant and 30 fraction bits), p2, p3 (the top of p3 only).
    p3 = s("mul.lo.u32", "b32", window[2], m)
    hi2 = s("mul.hi.u32", "b32", window[2], m)
    lo1 = s("mul.lo.u32", "b32", window[1], m)
    p2 = s("add.s32", "b32", hi2, lo1)
    carry = s("setp.lt.u32", "pred", p2, lo1)
    carry = s("selp.b32", "b32", Int(1), Int(0), carry)
    p1 = s("mul.hi.u32", "b32", window[1], m)
    p1 = s("add.s32", "b32", p1, carry)
    lo0 = s("mul.lo.u32", "b32", window[0], m)
    p1 = s("add.s32", "b32", p1, lo0)
    p1 = s("add.s32", "b32", p1, Int(1 << 29))  # round to the nearest quadrant
    j = s("shr.u32", "b32", p1, Int(30))
    f = s("and.b32", "b32", p1, Int((1 << 30) - 1))
    f = s("sub.s32", "b32", f, Int(1 << 29))  # signed, in [-2^29, 2^29)
    # the fraction in 2^-30 units as three exact floats of 24 bits or fewer
    top = s("shr.s32", "b32", f, Int(6))
    mid = s("and.b32", "b32", f, Int(63))
    mid = s("shl.b32", "b32", mid, Int(18))
    mid_lo = s("shr.u32", "b32", p2, Int(14))
    mid = s("or.b32", "b32", mid, mid_lo)
    low = s("and.b32", "b32", p2, Int(0x3FFF))
    low = s("shl.b32", "b32", low, Int(10))
    low_lo = s("shr.u32", "b32", p3, Int(22))
    low = s("or.b32", "b32", low, low_lo)
    h = s("cvt.rn.f32.s32", "f32", top)
    h = s("mul.rn.f32", "f32", h, F32(2.0**-24))
    md = s("cvt.rn.f32.u32", "f32", mid)
    md = s("mul.rn.f32", "f32", md, F32(2.0**-48))
    lw = s("cvt.rn.f32.u32", "f32", low)
    lw = s("mul.rn.f32", "f32", lw, F32(2.0**-72))
    hm = s("add.rn.f32", "f32", h, md)  # Fast2Sum: |h| >= |md| unless h = 0
    err = s("sub.rn.f32", "f32", hm, h)
    err = s("sub.rn.f32", "f32", md, err)
    err = s("add.rn.f32", "f32", err, lw)
    # r = (hm + err) pi/2, pi/2 as two floats
    r = s("mul.rn.f32", "f32", err, HALF_PI_HI)
    r = s("fma.rn.f32", "f32", hm, HALF_PI_LO, r)
    r = s("fma.rn.f32", "f32", hm, HALF_PI_HI, r)
    return j, r


def _sincos_f32(s: Seq, x: str, cosine: bool) -> str:
    a = s("abs.f32", "f32", x)
    small = s("setp.lt.f32", "pred", a, F32(TRIG_HUGE))
    j_small, r_small = _reduce_small(s, x)
    start = len(s.ops)  # Payne-Hanek: branched around when every |x| of a warp is small
    j_huge, r_huge = _reduce_huge(s, a)
    # sin(-a) = -sin a: the huge path reduced |x|, so negate r and the quadrant
    negative = s("setp.lt.f32", "pred", x, F32(0.0))
    r_neg = s("neg.f32", "f32", r_huge)
    r_huge = s("selp.f32", "f32", r_neg, r_huge, negative)
    j_neg = s("sub.s32", "b32", Int(0), j_huge)
    j_huge = s("selp.b32", "b32", j_neg, j_huge, negative)
    s.skip(start, small, j_huge, r_huge)
    r = s("selp.f32", "f32", r_small, r_huge, small)
    j = s("selp.b32", "b32", j_small, j_huge, small)
    return _quadrant(s, x, a, j, r, cosine)


def _quadrant(s: Seq, x: str, a: str, j: str, r: str, cosine: bool) -> str:
    """sin or cos of x = j pi/2 + r from the polynomials of r; nan for inf and nan."""
    z = s("mul.rn.f32", "f32", r, r)
    ps = s("fma.rn.f32", "f32", SIN_POLY[3], z, SIN_POLY[2])
    for c in (SIN_POLY[1], SIN_POLY[0]):
        ps = s("fma.rn.f32", "f32", ps, z, c)
    ps = s("mul.rn.f32", "f32", ps, z)
    sin_r = s("fma.rn.f32", "f32", ps, r, r)
    pc = s("fma.rn.f32", "f32", COS_POLY[3], z, COS_POLY[2])
    for c in (COS_POLY[1], COS_POLY[0], F32(-0.5)):
        pc = s("fma.rn.f32", "f32", pc, z, c)
    cos_r = s("fma.rn.f32", "f32", pc, z, F32(1.0))
    if cosine:  # cos x = sin(x + pi/2): one quadrant further
        j = s("add.s32", "b32", j, Int(1))
    odd = s("and.b32", "b32", j, Int(1))
    odd = s("setp.eq.u32", "pred", odd, Int(1))
    v = s("selp.f32", "f32", cos_r, sin_r, odd)
    flip = s("and.b32", "b32", j, Int(2))
    flip = s("setp.eq.u32", "pred", flip, Int(2))
    nv = s("neg.f32", "f32", v)
    v = s("selp.f32", "f32", nv, v, flip)
    if not cosine:  # sin(+-0) is +-0
        zero = s("setp.eq.f32", "pred", x, F32(0.0))
        v = s("selp.f32", "f32", x, v, zero)
    abits = s("mov.b32", "b32", a)
    special = s("setp.ge.u32", "pred", abits, Int(0x7F800000))
    return s("selp.f32", "f32", F32(NAN), v, special)


def sin_f32(s: Seq, x: str) -> str:
    """sin x for every float32 x (+-inf and nan -> nan, -0 -> -0)."""
    return _sincos_f32(s, x, cosine=False)


def cos_f32(s: Seq, x: str) -> str:
    """cos x for every float32 x (+-inf and nan -> nan)."""
    return _sincos_f32(s, x, cosine=True)


def pow_f32(s: Seq, a: str, b: str) -> str:
    """a^b for a > 0 (and a = +inf), any b: exp(b * log a)."""
    la = log_f32(s, a)
    t = s("mul.rn.f32", "f32", b, la)
    return exp_f32(s, t)


# ---------------------------------------------------------------- fast math (the default)
#
# `ex2.approx.ftz.f32` and `rcp.approx.ftz.f32` are one MUFU instruction each. The PTX
# ISA bounds them at 2 ulp (ex2, full range) and 1 ulp (rcp); `.ftz` flushes subnormal
# inputs and results to zero. The emulators model both as correctly rounded with the
# flush, so a measured error plus the hardware's bound is the stated one (`FAST_ACCURACY`).
# The emitter also prints `rsqrt` as `rsqrt.approx.f32` (no `.ftz`; 2^-22.9 relative by
# the ISA, modelled correctly rounded): `Emitter.binary`.

APPROX = ("ex2.approx.ftz.f32", "rcp.approx.ftz.f32", "rsqrt.approx.f32")
GELU_K = F32(0.7978845608028654)  # sqrt(2/pi), as `mimir_gelu` writes it
GELU_C = F32(0.044715)


def exp_fast(s: Seq, x: str) -> str:
    """e^x = 2^t e^d, t = x log2 e rounded, d = x - t ln 2 (two fma, |d| < 2^-17): the
    hardware's 2^t times 1 + d. Results below 2^-126 flush to 0 (x < -87.34)."""
    t = s("mul.rn.f32", "f32", x, LOG2E)
    d = s("fma.rn.f32", "f32", t, F32(-LN2_HI.value), x)
    d = s("fma.rn.f32", "f32", t, F32(-LN2_LO.value), d)
    one_d = s("add.rn.f32", "f32", d, F32(1.0))
    # x = +-inf or |x log2 e| past the float range make 1 + d nan or +-inf, where 2^t is
    # already inf or 0: any factor in [0.5, 2] keeps that (PTX max/min drop a nan).
    one_d = s("max.f32", "f32", one_d, F32(0.5))
    one_d = s("min.f32", "f32", one_d, F32(2.0))
    e = s("ex2.approx.ftz.f32", "f32", t)
    return s("mul.rn.f32", "f32", e, one_d)


def log_fast(s: Seq, x: str) -> str:
    """The precise sequence with `s = f / (2 + f)` as `f * rcp(2 + f)`: s only feeds the
    small correction terms, so its extra ulp moves the result by far less than one."""
    return log_f32(s, x, divide=_rcp_divide)


def _rcp_divide(s: Seq, a: str | F32, b: str) -> str:
    r = s("rcp.approx.ftz.f32", "f32", b)
    return s("mul.rn.f32", "f32", a, r)


def _div_rn(s: Seq, a: str | F32, b: str) -> str:
    return s("div.rn.f32", "f32", a, b)


def tanh_fast(s: Seq, x: str) -> str:
    """The precise sequence with exp_fast and `2 / (e + 1)` as `2 rcp(e + 1)`."""
    return tanh_f32(s, x, exp=exp_fast, divide=_rcp_divide)


def sigmoid_fast(s: Seq, x: str) -> str:
    """1 / (1 + e^-x) as rcp; e^-x = inf (x < -88.7) gives 0, nan stays nan."""
    n = s("neg.f32", "f32", x)
    e = exp_fast(s, n)
    den = s("add.rn.f32", "f32", e, F32(1.0))
    return s("rcp.approx.ftz.f32", "f32", den)


def gelu_fast(s: Seq, x: str) -> str:
    """0.5 x (1 + tanh u) = x sigmoid(2u), u = k (x + c x^3): no cancellation in 1 + tanh u
    for negative u, one exp and one rcp. gelu(-inf) = 0 (x times 0 would be nan)."""
    x2 = s("mul.rn.f32", "f32", x, x)
    inner = s("mul.rn.f32", "f32", x2, GELU_C)
    inner = s("fma.rn.f32", "f32", inner, x, x)  # x + c x^3
    minus_2u = s("mul.rn.f32", "f32", inner, F32(-2.0 * GELU_K.value))
    e = exp_fast(s, minus_2u)
    den = s("add.rn.f32", "f32", e, F32(1.0))
    sig = s("rcp.approx.ftz.f32", "f32", den)
    y = s("mul.rn.f32", "f32", x, sig)
    minus_inf = s("setp.eq.f32", "pred", x, F32(-INF))
    return s("selp.f32", "f32", F32(0.0), y, minus_inf)


FAST_SEQUENCES = {
    "exp": exp_fast,
    "log": log_fast,
    "tanh": tanh_fast,
    "sigmoid": sigmoid_fast,
    "gelu": gelu_fast,
    "sin": sin_f32,  # the polynomial is cheap; sin.approx is 2^-20.9 absolute, not ulp
    "cos": cos_f32,
    "pow": pow_f32,  # exp(b log a) amplifies an ulp of log by |b ln a|: kept precise
}
MATH_MODES = ("fast", "precise")


def sequences(math_mode: str) -> dict:
    """The sequences a kernel compiled with `--math MODE` inlines, by IR function name."""
    return FAST_SEQUENCES if math_mode == "fast" else SEQUENCES


SEQUENCES = {
    "exp": exp_f32,
    "log": log_f32,
    "tanh": tanh_f32,
    "pow": pow_f32,
    "sin": sin_f32,
    "cos": cos_f32,
}

# Bounds in float32 ulp of the correctly rounded result, over every float32
# input (pow: over a in (0, inf), b with |b ln a| <= 88, the whole finite range).
# The measured maxima are in docs/ptx.md; tests/test_ptx_math.py checks them.
ACCURACY: dict[str, str] = {
    "exp": "2 ulp",
    "log": "2 ulp",
    "tanh": "3 ulp",
    "pow": "2 + 2 * |b ln a| ulp",
    "sin": "2 ulp",
    "cos": "2 ulp",
    "sqrt": "0 ulp (sqrt.rn.f32, correctly rounded)",
    "floor": "exact (cvt.rmi.f32.f32)",
    "abs": "exact (abs.f32)",
    "divide": "0 ulp (div.rn.f32, correctly rounded)",
}


# Fast mode, measured in the emulator (ex2/rcp correctly rounded) plus the hardware's
# bound for each approximate instruction on the path (docs/ptx.md has the figures).
FAST_ACCURACY: dict[str, str] = {
    "exp": "2 ulp + ex2.approx's 2 ulp; 0 below 2^-126",
    "log": "2 ulp (rcp.approx only touches the correction terms)",
    "tanh": "3 ulp + ex2.approx's 2 ulp",
    "sigmoid": "4 ulp + ex2.approx's 2 ulp + rcp.approx's 1 ulp; 0 below 2^-126",
    "gelu": "3 ulp (x >= 0), 6 + 2.5|2u| ulp (x < 0: e^-2u magnifies the rounding of u), "
    "+ ex2.approx's 2 ulp + rcp.approx's 1 ulp; 0 once sigmoid(2u) is below 2^-126 (x < -9.9)",
    "sin": ACCURACY["sin"],
    "cos": ACCURACY["cos"],
    "pow": ACCURACY["pow"],
}


def accuracy(name: str, math_mode: str) -> str:
    return (FAST_ACCURACY if math_mode == "fast" else ACCURACY)[name]


def ulp_bound(name: str, args: tuple[float, ...] = ()) -> float:
    """The `ACCURACY` bound of `name` at `args`, in ulp."""
    if name == "pow":
        a, b = args
        return 2.0 + 2.0 * abs(b * math.log(a))
    return {"exp": 2.0, "log": 2.0, "tanh": 3.0, "sqrt": 0.0, "sin": 2.0, "cos": 2.0}[name]
