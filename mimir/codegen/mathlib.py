"""The numbers every target's `sin` and `cos` share: pi to 320 bits, the bits of 2/pi that
Payne-Hanek's reduction reads, and the Taylor coefficients of sin and cos on |r| <= pi/4.

`helpers.py` writes `mimir_trig` in the IR with them (MSL, WGSL, SPIR-V), and the PTX
backend's instruction sequences (`backends/ptx/mathlib.py`) use the same ones, so every
target reduces and evaluates the same way. Stdlib only; nothing here names a target.
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction


def f32(x: float) -> float:
    """`x` rounded to the nearest float32 (as a Python float)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def _atan_inverse(n: int, one: int) -> int:
    """atan(1/n) * one, by its Taylor series in fixed point (one = 2**bits)."""
    total, power, k = 0, one // n, 0
    while power:
        term = power // (2 * k + 1)
        total += -term if k % 2 else term
        power //= n * n
        k += 1
    return total


def _pi_fixed(bits: int) -> Fraction:
    """pi to about `bits` bits (Machin's formula, 16 guard bits), as an exact rational."""
    one = 1 << (bits + 16)
    pi = 16 * _atan_inverse(5, one) - 4 * _atan_inverse(239, one)
    return Fraction(pi >> 16, 1 << bits)


PI = _pi_fixed(320)
HALF_PI = PI / 2


# Payne-Hanek's table: zero bits, then the bits of 2/pi (bit i weighs 2^-i, i >= 1).
def two_over_pi_words(pad: int, count: int) -> tuple[int, ...]:
    """floor(2/pi 2^(32 count - pad)) as `count` 32-bit words, most significant first:
    `pad` zero bits, then the bits of 2/pi (PI has 320 bits, far past these)."""
    bits = 32 * count - pad
    table = (1 << (bits + 1)) * PI.denominator // PI.numerator
    return tuple((table >> (32 * (count - 1 - k))) & 0xFFFFFFFF for k in range(count))


# sin r = r + r^3 S(r^2), cos r = 1 - r^2/2 + r^4 C(r^2) on |r| <= pi/4 (a little more
# when rint(x 2/pi) rounds the other way): Taylor coefficients; the first term left
# out is below 2^-28 relative (r^10/11! and r^12/12!).
SIN_TAYLOR = tuple((-1) ** k / math.factorial(2 * k + 1) for k in range(1, 5))
COS_TAYLOR = tuple((-1) ** k / math.factorial(2 * k) for k in range(2, 6))
