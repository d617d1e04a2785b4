"""Small IR functions the lowering table calls, defined once for every backend.

Each `Helper` spells one piece of Python semantics that no GPU instruction has
(floor division, Python's `%` and `**`, nan-propagating `maximum`, a stable
`sigmoid`, the tanh `gelu`, saturating float -> int casts). A kernel that calls
one carries its definition (`Kernel.helpers`), and each backend prints it as a
plain function of its language. Also here: the expression shorthands the
lowering is written with.
"""

from __future__ import annotations

import math

from mimir.codegen.ir import (
    COMPARISONS,
    Assign,
    Binary,
    Bitcast,
    Call,
    Cast,
    Const,
    Expr,
    For,
    Helper,
    If,
    Let,
    Return,
    Select,
    Unary,
    Var,
    VarDecl,
    all_expressions,
)
from mimir.codegen.mathlib import COS_TAYLOR, HALF_PI, SIN_TAYLOR, f32, two_over_pi_words

INF = float("inf")
NAN = float("nan")
INT_MIN, INT_MAX, UINT_MAX = -(2**31), 2**31 - 1, 2**32 - 1


# ---------------------------------------------------------------- expression shorthands


def const(value: object, t: str) -> Const:
    if t == "bool":
        return Const(bool(value), t)
    if t in ("i32", "u32"):
        return Const(int(value), t)
    return Const(float(value), t)


def bin_(op: str, a: Expr, b: Expr) -> Binary:
    t = "bool" if op in COMPARISONS or op in ("&&", "||") else a.type
    return Binary(op, a, b, t)


def not_(a: Expr) -> Expr:
    return Unary("!", a, "bool")


def select(cond: Expr, if_true: Expr, if_false: Expr) -> Expr:
    return Select(cond, if_true, if_false, if_true.type)


def call(fn: str, *args: Expr, t: str | None = None) -> Call:
    if fn in HELPERS:
        return Call(fn, tuple(args), HELPERS[fn].ret)
    return Call(fn, tuple(args), t or args[0].type)


def isnan(a: Expr) -> Expr:
    return Call("isnan", (a,), "bool")


def isinf(a: Expr) -> Expr:
    return Call("isinf", (a,), "bool")


def round_f16(a: Expr) -> Expr:
    """An f32 register value rounded to the nearest half."""
    return Cast(Cast(a, "f16"), "f32")


# ---------------------------------------------------------------- helper functions

HELPERS: dict[str, Helper] = {}


def _helper(name: str, params: list[tuple[str, str]], ret: str, body: list) -> None:
    calls = {
        e.fn
        for e in all_expressions(body)
        if isinstance(e, Call) and e.fn in HELPERS and e.fn != name
    }
    HELPERS[name] = Helper(
        name,
        tuple(Var("$" + n, t) for n, t in params),
        ret,
        tuple(body),
        tuple(sorted(calls)),
    )


def _p(name: str, t: str) -> Var:
    return Var("$" + name, t)


def _define_integer_helpers() -> None:
    a, b, q, r = _p("a", "i32"), _p("b", "i32"), _p("q", "i32"), _p("r", "i32")
    zero, one = const(0, "i32"), const(1, "i32")
    opposite_signs = bin_("!=", bin_("<", r, zero), bin_("<", b, zero))
    # Python floor division; x // 0 == 0 (NumPy); INT_MIN // -1 wraps to INT_MIN.
    _helper(
        "mimir_floordiv_i32",
        [("a", "i32"), ("b", "i32")],
        "i32",
        [
            If(bin_("==", b, zero), [Return(zero)]),
            If(bin_("==", b, const(-1, "i32")), [Return(bin_("-", zero, a))]),
            Let(q, bin_("/", a, b)),
            Let(r, bin_("-", a, bin_("*", q, b))),
            If(bin_("&&", bin_("!=", r, zero), opposite_signs), [Return(bin_("-", q, one))]),
            Return(q),
        ],
    )
    # Python modulo takes the divisor's sign; x % 0 == 0; x % -1 == 0 (no INT_MIN overflow).
    _helper(
        "mimir_mod_i32",
        [("a", "i32"), ("b", "i32")],
        "i32",
        [
            If(bin_("||", bin_("==", b, zero), bin_("==", b, const(-1, "i32"))), [Return(zero)]),
            Let(r, bin_("%", a, b)),
            If(bin_("&&", bin_("!=", r, zero), opposite_signs), [Return(bin_("+", r, b))]),
            Return(r),
        ],
    )
    ua, ub, uzero = _p("a", "u32"), _p("b", "u32"), const(0, "u32")
    for name, op in (("mimir_floordiv_u32", "/"), ("mimir_mod_u32", "%")):
        _helper(
            name,
            [("a", "u32"), ("b", "u32")],
            "u32",
            [If(bin_("==", ub, uzero), [Return(uzero)]), Return(bin_(op, ua, ub))],
        )
    for t, bits in (("i32", 31), ("u32", 32)):
        x, e, acc, base = _p("a", t), _p("b", t), _p("acc", t), _p("base", t)
        k = _p("k", "u32")
        body: list = []
        if t == "i32":
            # int ** negative: the integer part of the real result (numerics.power).
            body.append(
                If(
                    bin_("<", e, const(0, t)),
                    [
                        If(bin_("==", x, const(1, t)), [Return(const(1, t))]),
                        If(
                            bin_("==", x, const(-1, t)),
                            [
                                If(
                                    bin_("!=", bin_("&", e, const(1, t)), const(0, t)),
                                    [Return(const(-1, t))],
                                ),
                                Return(const(1, t)),
                            ],
                        ),
                        Return(const(0, t)),
                    ],
                )
            )
        ev = _p("e", t)
        body += [
            VarDecl(acc, const(1, t)),
            VarDecl(base, x),
            VarDecl(ev, e),
            For(
                k,
                const(0, "u32"),
                const(bits, "u32"),
                const(1, "u32"),
                [
                    If(
                        bin_("!=", bin_("&", ev, const(1, t)), const(0, t)),
                        [Assign(acc, bin_("*", acc, base))],
                    ),
                    Assign(base, bin_("*", base, base)),
                    Assign(ev, Binary(">>", ev, const(1, "u32"), t)),
                ],
            ),
            Return(acc),
        ]
        _helper(f"mimir_pow_{t}", [("a", t), ("b", t)], t, body)


def _define_float_helpers() -> None:
    a, b, m, r, e = (_p(n, "f32") for n in ("a", "b", "m", "r", "e"))
    zero, one, half = const(0.0, "f32"), const(1.0, "f32"), const(0.5, "f32")
    nan, inf = const(NAN, "f32"), const(INF, "f32")
    floor_ab = call("floor", bin_("/", a, b))
    _helper(
        "mimir_mod_f32",
        [("a", "f32"), ("b", "f32")],
        "f32",
        [
            If(
                bin_(
                    "||",
                    bin_("||", isnan(a), isnan(b)),
                    bin_("||", isinf(a), bin_("==", b, zero)),
                ),
                [Return(nan)],
            ),
            If(
                isinf(b),
                [
                    If(
                        bin_(
                            "||",
                            bin_("==", bin_(">=", a, zero), bin_(">", b, zero)),
                            bin_("==", a, zero),
                        ),
                        [Return(a)],
                    ),
                    Return(b),
                ],
            ),
            VarDecl(r, bin_("-", a, bin_("*", b, floor_ab))),
            If(
                bin_("&&", bin_("!=", r, zero), bin_("!=", bin_("<", r, zero), bin_("<", b, zero))),
                [Assign(r, bin_("+", r, b))],
            ),
            Return(r),
        ],
    )
    half_b = bin_("*", b, half)
    _helper(
        "mimir_pow_f32",
        [("a", "f32"), ("b", "f32")],
        "f32",
        [
            If(bin_("||", bin_("==", b, zero), bin_("==", a, one)), [Return(one)]),
            If(bin_("||", isnan(a), isnan(b)), [Return(nan)]),
            If(bin_("==", a, zero), [If(bin_("<", b, zero), [Return(inf)]), Return(zero)]),
            Let(m, call("pow", call("abs", a), b)),
            If(
                bin_("<", a, zero),
                [
                    If(bin_("!=", call("floor", b), b), [Return(nan)]),
                    If(bin_("!=", call("floor", half_b), half_b), [Return(Unary("-", m, "f32"))]),
                ],
            ),
            Return(m),
        ],
    )
    # NumPy's maximum/minimum: a nan in either operand is the result.
    for name, op in (("mimir_maximum_f32", ">="), ("mimir_minimum_f32", "<=")):
        _helper(
            name,
            [("a", "f32"), ("b", "f32")],
            "f32",
            [
                If(isnan(a), [Return(a)]),
                If(isnan(b), [Return(b)]),
                If(bin_(op, a, b), [Return(a)]),
                Return(b),
            ],
        )
    _helper(
        "mimir_sigmoid",
        [("a", "f32")],
        "f32",
        [
            If(
                bin_(">=", a, zero),
                [Return(bin_("/", one, bin_("+", one, call("exp", Unary("-", a, "f32")))))],
            ),
            Let(e, call("exp", a)),
            Return(bin_("/", e, bin_("+", one, e))),
        ],
    )
    # tanh(+-20) is +-1 in f32; clamping keeps every backend's tanh away from overflow.
    clamped = call("max", call("min", a, const(20.0, "f32")), const(-20.0, "f32"))
    _helper(
        "mimir_tanh",
        [("a", "f32")],
        "f32",
        [If(isnan(a), [Return(a)]), Return(call("tanh", clamped))],
    )
    inner = bin_(
        "*",
        const(0.7978845608028654, "f32"),
        bin_("+", a, bin_("*", bin_("*", bin_("*", const(0.044715, "f32"), a), a), a)),
    )
    _helper(
        "mimir_gelu",
        [("a", "f32")],
        "f32",
        [
            If(isnan(a), [Return(a)]),
            If(isinf(a), [If(bin_(">", a, zero), [Return(a)]), Return(zero)]),
            Return(bin_("*", bin_("*", half, a), bin_("+", one, call("mimir_tanh", inner)))),
        ],
    )
    _helper(
        "mimir_log",
        [("a", "f32")],
        "f32",
        [
            If(bin_("<", a, zero), [Return(nan)]),
            If(bin_("==", a, zero), [Return(Unary("-", inf, "f32"))]),
            Return(call("log", a)),
        ],
    )
    _helper(
        "mimir_sqrt",
        [("a", "f32")],
        "f32",
        [If(bin_("<", a, zero), [Return(nan)]), Return(call("sqrt", a))],
    )
    # Saturating float -> int casts; nan -> 0 (numerics._to_int).
    _helper(
        "mimir_f32_to_i32",
        [("a", "f32")],
        "i32",
        [
            If(isnan(a), [Return(const(0, "i32"))]),
            If(bin_(">=", a, const(2147483648.0, "f32")), [Return(const(INT_MAX, "i32"))]),
            If(bin_("<=", a, const(-2147483648.0, "f32")), [Return(const(INT_MIN, "i32"))]),
            Return(Cast(a, "i32")),
        ],
    )
    _helper(
        "mimir_f32_to_u32",
        [("a", "f32")],
        "u32",
        [
            If(bin_("||", isnan(a), bin_("<=", a, zero)), [Return(const(0, "u32"))]),
            If(bin_(">=", a, const(4294967296.0, "f32")), [Return(const(UINT_MAX, "u32"))]),
            Return(Cast(a, "u32")),
        ],
    )


def _define_bfloat_helpers() -> None:
    # bfloat16 is the upper half of a float32: round to nearest even on the lower 16 bits
    # (a carry into the exponent rounds to inf correctly); nan stays a quiet nan.
    a, bits = _p("a", "f32"), _p("bits", "u32")
    lsb = Binary("&", Binary(">>", bits, const(16, "u32"), "u32"), const(1, "u32"), "u32")
    rounded = Binary(
        "&",
        bin_("+", bin_("+", bits, const(0x7FFF, "u32")), lsb),
        const(0xFFFF0000, "u32"),
        "u32",
    )
    _helper(
        "mimir_round_bf16",
        [("a", "f32")],
        "f32",
        [
            If(isnan(a), [Return(a)]),
            Let(bits, Bitcast(a, "u32")),
            Return(Bitcast(rounded, "f32")),
        ],
    )
    # the 16 bits a packed bfloat16 buffer holds for an f32 value, in the low half of a
    # u32: rounded to nearest even as `mimir_round_bf16`; any nan as the quiet 0x7FC0
    # (the shim's nan), never truncated to inf by dropping a payload in the low bits
    _helper(
        "mimir_bf16_bits",
        [("a", "f32")],
        "u32",
        [
            If(isnan(a), [Return(const(0x7FC0, "u32"))]),
            Let(bits, Bitcast(a, "u32")),
            Return(Binary(">>", rounded, const(16, "u32"), "u32")),
        ],
    )


def _define_half_helpers() -> None:
    # float16 rounding in integer arithmetic, for targets whose f32 -> f16 conversion may
    # round either way (WGSL, Vulkan SPIR-V: `with_exact_half`): the f32 whose value is
    # the float16 nearest `a`, ties to even, so the conversion that follows is exact.
    # Normal results drop 13 bits of the significand (a carry into the exponent is
    # right); from 65520 (the tie above 65504, whose last bit is odd) up is inf; below
    # 2**-14 the significand is shifted to a multiple of 2**-24, rounded, and scaled back
    # as float32 (q <= 1024 and a power-of-two scale: exact in any rounding mode).
    a, bits, mag, sign = _p("a", "f32"), _p("bits", "u32"), _p("mag", "u32"), _p("sign", "u32")
    e, mant, shift = _p("e", "u32"), _p("mant", "u32"), _p("shift", "u32")
    q, rem, halfway = _p("q", "u32"), _p("rem", "u32"), _p("halfway", "u32")

    def u(v: int) -> Const:
        return const(v, "u32")

    def ub(op: str, x: Expr, y: Expr) -> Binary:
        return Binary(op, x, y, "u32")

    lsb = ub("&", ub(">>", mag, u(13)), u(1))
    normal = ub("&", ub("+", ub("+", mag, u(0xFFF)), lsb), u(0xFFFFE000))
    # up: past half a quantum, or at exactly half with q odd (ties to even)
    odd = bin_("!=", ub("&", q, u(1)), u(0))
    up = bin_("||", bin_(">", rem, halfway), bin_("&&", bin_("==", rem, halfway), odd))
    rounded = _p("rounded", "u32")
    scaled = bin_("*", Cast(rounded, "f32"), const(2.0**-24, "f32"))
    inf_bits = Bitcast(ub("|", sign, u(0x7F800000)), "f32")
    _helper(
        "mimir_round_f16",
        [("a", "f32")],
        "f32",
        [
            Let(bits, Bitcast(a, "u32")),
            Let(sign, ub("&", bits, u(0x80000000))),
            Let(mag, ub("&", bits, u(0x7FFFFFFF))),
            If(bin_(">=", mag, u(0x7F800000)), [Return(a)]),  # inf, nan
            If(bin_(">=", mag, u(0x477FF000)), [Return(inf_bits)]),  # from 65520: inf
            If(bin_(">=", mag, u(0x38800000)), [Return(Bitcast(ub("|", sign, normal), "f32"))]),
            If(bin_("<=", mag, u(0x33000000)), [Return(Bitcast(sign, "f32"))]),  # <= 2**-25
            Let(e, ub(">>", mag, u(23))),  # 102..112 here
            Let(mant, ub("|", ub("&", mag, u(0x7FFFFF)), u(0x800000))),
            Let(shift, ub("-", u(126), e)),  # 14..24: to a multiple of 2**-24
            Let(q, ub(">>", mant, shift)),
            Let(rem, ub("&", mant, ub("-", ub("<<", u(1), shift), u(1)))),
            Let(halfway, ub("<<", u(1), ub("-", shift, u(1)))),
            Let(rounded, ub("+", q, select(up, u(1), u(0)))),
            Return(Bitcast(ub("|", sign, Bitcast(scaled, "u32")), "f32")),
        ],
    )


_define_integer_helpers()
_define_float_helpers()
_define_bfloat_helpers()
_define_half_helpers()


# ---------------------------------------------------------------- sin and cos
#
# WGSL's `sin`/`cos` and GLSL.std.450 `Sin`/`Cos` are specified to 2^-11 absolute error
# on [-pi, pi] only; past it a driver reduces as it likes (lavapipe is off by 0.4 at
# 3e5). `mimir_trig` is sin and cos for every float32, built from IR arithmetic, which
# the WGSL and SPIR-V backends call instead of the builtins (`with_reduced_trig`).
#
# For |x| >= pi/4 the reduction x = j pi/2 + r is done in integers (Payne-Hanek): x =
# m 2^E with m < 2^24, and only 96 bits of 2/pi matter, starting at the one that weighs
# 2 once scaled by 2^E (the bits before it make whole turns, those after it add less than
# 2^-71 of a quadrant). m times that window is 32x32 -> 64-bit products built from
# 16-bit halves (WGSL has no multiply-high); it gives the quadrant j and 94 bits of the
# fraction of a quadrant, rounded to the nearest quadrant. The fraction's magnitude is
# normalised (its top bit found from the exponent of its conversion to float) and
# multiplied by pi/2 as a 64-bit fixed-point number, still in integers; the top 48
# bits of that become r through two exact 24-bit conversions and one rounded addition.
# So r is within about half an ulp whatever a compiler does to float arithmetic: no
# step relies on an fma being fused or not, nor on an identity such as Fast2Sum's
# `a - ((a + b) - a)`, which Mesa's NIR simplifies away (measured on lavapipe).
# r in [-pi/4, pi/4] goes through the Taylor polynomials of sin and cos (as
# `mimir.codegen.backends.ptx.mathlib`), written with `fma`; benchmarks/trig_accuracy.py
# measures the helper with fma fused and unfused, and the compiled WGSL and SPIR-V.

# The table: floor(2/pi 2^224) as eight 32-bit words, so that bit p from the top
# weighs 2^(31 - p): the first word is zero (2/pi < 1), which lets the window start at
# bit 0 or later for every |x| >= pi/4.
_TRIG_PAD = 32
_TRIG_WORDS = 8


def _define_trig_helpers() -> None:
    x, q = _p("x", "f32"), _p("q", "u32")
    u = lambda v: const(v, "u32")  # noqa: E731
    f = lambda v: const(v, "f32")  # noqa: E731

    def ub(op: str, a: Expr, b: Expr) -> Expr:
        return Binary(op, a, b, a.type)

    def let(name: str, value: Expr) -> tuple[Var, Let]:
        var = _p(name, value.type)
        return var, Let(var, value)

    def bind(name: str, value: Expr) -> Var:
        var, stmt = let(name, value)
        reduction.append(stmt)
        return var

    bits, s1 = let("bits", Bitcast(x, "u32"))
    abits, s2 = let("abits", ub("&", bits, u(0x7FFFFFFF)))
    body: list = [s1, s2, If(bin_(">=", abits, u(0x7F800000)), [Return(f(NAN))])]
    j, r = _p("j", "u32"), _p("r", "f32")
    body += [VarDecl(j, u(0)), VarDecl(r, Bitcast(abits, "f32"))]

    # Payne-Hanek, for |x| >= pi/4 (bits of pi/4 rounded up: 0x3F490FDB)
    reduction: list = []
    e = bind("e", ub(">>", abits, u(23)))  # biased exponent, 126 .. 254
    m = bind("m", ub("|", ub("&", abits, u(0x7FFFFF)), u(0x800000)))
    # x = m 2^(e - 150): the window starts at table bit (e - 150) + PAD - 2 (6 .. 134)
    start = bind("p0", ub("-", e, u(150 + 2 - _TRIG_PAD)))
    word = bind("word", ub(">>", start, u(5)))
    shift = bind("sh", ub("&", start, u(31)))
    table = two_over_pi_words(_TRIG_PAD, _TRIG_WORDS)
    is_word = [bind(f"is{k}", bin_("==", word, u(k))) for k in range(1, 5)]
    words: list[Expr] = []
    for k in range(4):
        w: Expr = u(table[k])
        for n in range(1, 5):
            w = select(is_word[n - 1], u(table[k + n]), w)
        words.append(bind(f"w{k}", w))
    window = []
    for k in range(3):
        # (w >> 1) >> (31 - sh): a shift by 32 is undefined in SPIR-V
        low = ub(">>", ub(">>", words[k + 1], u(1)), ub("-", u(31), shift))
        window.append(bind(f"win{k}", ub("|", ub("<<", words[k], shift), low)))

    def mul_hi(a: Expr, b: Expr, name: str) -> Var:
        """The high word of the 64-bit product a * b, from 16-bit halves."""
        a_hi = bind(f"{name}ah", ub(">>", a, u(16)))
        a_lo = bind(f"{name}al", ub("&", a, u(0xFFFF)))
        if isinstance(b, Const):
            b_hi, b_lo = u(b.value >> 16), u(b.value & 0xFFFF)
        else:
            b_hi = bind(f"{name}bh", ub(">>", b, u(16)))
            b_lo = bind(f"{name}bl", ub("&", b, u(0xFFFF)))
        lh = bind(f"{name}lh", ub("*", a_lo, b_hi))
        hl = bind(f"{name}hl", ub("*", a_hi, b_lo))
        mid = ub(
            "+",
            ub("+", ub(">>", ub("*", a_lo, b_lo), u(16)), ub("&", lh, u(0xFFFF))),
            ub("&", hl, u(0xFFFF)),
        )
        hi = ub("+", ub("*", a_hi, b_hi), ub("+", ub(">>", lh, u(16)), ub(">>", hl, u(16))))
        return bind(f"{name}hi", ub("+", hi, ub(">>", mid, u(16))))

    def carry(total: Expr, part: Expr) -> Expr:
        return select(bin_("<", total, part), u(1), u(0))

    # m * window, limbs from the top: p1 (quadrant and 30 fraction bits), p2, p3
    p3 = bind("p3", ub("*", window[2], m))
    lo1 = bind("lo1", ub("*", window[1], m))
    p2 = bind("p2", ub("+", mul_hi(window[2], m, "q2"), lo1))
    p1 = ub("+", ub("+", mul_hi(window[1], m, "q1"), carry(p2, lo1)), ub("*", window[0], m))
    p1 = bind("p1", ub("+", p1, u(1 << 29)))  # rounded to the nearest quadrant
    reduction.append(Assign(j, ub(">>", p1, u(30))))
    # The fraction of a quadrant, (f, p2, p3) in units of 2^-30, 2^-62, 2^-94, with f
    # signed in [-2^29, 2^29): its magnitude (a1, a2, a3), negated across the limbs.
    f1 = bind("f1", ub("-", ub("&", p1, u((1 << 30) - 1)), u(1 << 29)))
    neg = bind("neg", bin_(">=", f1, u(0x80000000)))
    c3 = bind("c3", bin_("==", p3, u(0)))
    c2 = bin_("&&", c3, bin_("==", p2, u(0)))
    a3 = select(neg, ub("-", u(0), p3), p3)
    a2 = select(neg, ub("+", Unary("~", p2, "u32"), select(c3, u(1), u(0))), p2)
    a1 = select(neg, ub("+", Unary("~", f1, "u32"), select(c2, u(1), u(0))), f1)
    a1, a2, a3 = bind("a1", a1), bind("a2", a2), bind("a3", a3)
    # normalised: whole words first (a fraction below 2^-94 of a quadrant is zero) ...
    for k in (1, 2):
        empty = bind(f"z{k}", bin_("==", a1, u(0)))
        a1, a2, a3 = (
            bind(f"a1s{k}", select(empty, a2, a1)),
            bind(f"a2s{k}", select(empty, a3, a2)),
            bind(f"a3s{k}", select(empty, u(0), a3)),
        )
        if k == 1:
            skipped = select(empty, u(32), u(0))
        else:
            skipped = bind("skipped", ub("+", skipped, select(empty, u(32), u(0))))
    # ... then bits: the top bit of a1 from the exponent of float(a1), which may round up
    msb = ub("-", ub(">>", Bitcast(Cast(a1, "f32"), "u32"), u(23)), u(127))
    msb = bind("msb0", select(bin_(">", msb, u(31)), u(31), msb))
    msb = bind("msb", select(bin_(">", ub("<<", u(1), msb), a1), ub("-", msb, u(1)), msb))
    lz = bind("lz", ub("-", u(31), msb))
    t1 = ub("|", ub("<<", a1, lz), ub(">>", ub(">>", a2, u(1)), msb))
    t2 = ub("|", ub("<<", a2, lz), ub(">>", ub(">>", a3, u(1)), msb))
    t1, t2 = bind("t1", t1), bind("t2", t2)
    # (t1, t2) times pi/2 as the 64-bit fixed-point P = pi/2 2^63 (the top 64 bits of
    # the 128-bit product; the limbs left out weigh less than 2^-60 of it)
    big = int(HALF_PI * 2**63)
    pa, pb = u(big >> 32), u(big & 0xFFFFFFFF)
    l11 = bind("l11", ub("*", t1, pa))
    mid = bind("mid", ub("+", l11, mul_hi(t1, pb, "q3")))
    mid2 = bind("mid2", ub("+", mid, mul_hi(t2, pa, "q4")))
    r1 = ub("+", mul_hi(t1, pa, "q5"), ub("+", carry(mid, l11), carry(mid2, mid)))
    r1 = bind("r1", r1)  # in [2^30, 2^32)
    # r = (r1 2^32 + mid2) 2^(-61 - normalised_by): two exact 24-bit floats, one rounding
    hi24 = Cast(ub(">>", r1, u(8)), "f32")
    lo24 = Cast(ub("|", ub("<<", ub("&", r1, u(0xFF)), u(16)), ub(">>", mid2, u(16))), "f32")
    normalised_by = ub("+", skipped, lz)  # bits; at most 95, so the scale is a normal float
    scale = Bitcast(ub("<<", ub("-", u(127 - 21), normalised_by), u(23)), "f32")
    rr = bind("rr", bin_("*", bin_("+", hi24, bin_("*", lo24, f(2.0**-24))), scale))
    rr = bind("rs", select(neg, Unary("-", rr, "f32"), rr))
    reduction.append(Assign(r, select(bin_("==", a1, u(0)), f(0.0), rr)))
    body.append(If(bin_(">=", abits, u(0x3F490FDB)), reduction))

    k, s5 = let("k", ub("+", j, q))  # cos x = sin(x + pi/2): one quadrant further
    polynomials, v = _sine_of_quadrant(k, r)
    # sin(-x) = -sin x (and sin(-0) = -0); cos(-x) = cos x
    sign = select(bin_("==", q, u(0)), ub("&", bits, u(0x80000000)), u(0))
    body += [s5, *polynomials, Return(Bitcast(ub("^", Bitcast(v, "u32"), sign), "f32"))]
    _helper("mimir_trig", [("x", "f32"), ("q", "u32")], "f32", body)


def _sine_of_quadrant(k: Expr, r: Expr) -> tuple[list, Expr]:
    """sin(k pi/2 + r) for r in [-pi/4, pi/4] (a little past is fine) and a u32 quadrant
    count `k`: the statements and the value. sin r = r + r^3 S(r^2) and cos r = 1 - r^2/2 +
    r^4 C(r^2) are Taylor polynomials to r^9 and r^10, written with `fma`."""
    f = lambda v: const(v, "f32")  # noqa: E731
    sin_c = [f(f32(c)) for c in SIN_TAYLOR]
    cos_c = [f(f32(c)) for c in COS_TAYLOR]
    z = _p("z", "f32")
    ps: Expr = call("fma", sin_c[3], z, sin_c[2])
    for c in (sin_c[1], sin_c[0]):
        ps = call("fma", ps, z, c)
    pc: Expr = call("fma", cos_c[3], z, cos_c[2])
    for c in (cos_c[1], cos_c[0], f(-0.5)):
        pc = call("fma", pc, z, c)
    sin_r, cos_r, v = _p("sin_r", "f32"), _p("cos_r", "f32"), _p("v", "f32")
    odd = bin_("!=", Binary("&", k, const(1, "u32"), "u32"), const(0, "u32"))
    half_turn = bin_("!=", Binary("&", k, const(2, "u32"), "u32"), const(0, "u32"))
    value = select(odd, cos_r, sin_r)
    statements = [
        Let(z, bin_("*", r, r)),
        Let(sin_r, call("fma", bin_("*", ps, z), r, r)),
        Let(cos_r, call("fma", pc, z, f(1.0))),
        Let(v, select(half_turn, Unary("-", value, "f32"), value)),
    ]
    return statements, v


_define_trig_helpers()


# ---------------------------------------------------------------- special functions
#
# cosh, sinh, expm1, log1p, atan, atan2, erf, erfc and the exact GELU, written once over
# `exp`, `log`, `abs` and arithmetic, so every target computes them the same way and
# none leans on a builtin with a loose contract (WGSL's atan and atan2 may be 4096 ulp
# off, its sinh is `(exp(x) - exp(-x)) / 2`, which cancels near 0). Each stays away from
# cancellation: a Taylor polynomial near 0 where `exp(x) - 1`, `log(1 + x)` or `1 - erfc`
# would lose the leading bits, and `exp(x / 2)^2` where `exp(x)` alone would overflow
# before the result does. `benchmarks/special_accuracy.py` measures them (RECEIPTS.md).

# expm1 x = x + x^2 (1/2! + x/3! + ... + x^7/9!) on |x| < 0.5: the first term left out,
# x^10/10!, is below 3e-10 relative there.
EXPM1_TAYLOR = tuple(1.0 / math.factorial(k) for k in range(2, 10))
# log1p x = 2 atanh s, s = x / (2 + x): 2s + 2s z (1/3 + z/5 + ... + z^6/15), z = s^2
# <= 1/9 on |x| < 0.5 (the next term, z^7/17, below 3e-9 relative).
LOG1P_ATANH = tuple(1.0 / (2 * k + 1) for k in range(1, 8))
# sinh x = x + x z (1/3! + z/5! + ... + z^6/15!) on |x| < 1, z = x^2 (next: 1/17!).
SINH_TAYLOR = tuple(1.0 / math.factorial(2 * k + 1) for k in range(1, 8))
# erf x = 2/sqrt(pi) x sum (-1)^n z^n / (n! (2n + 1)), n = 0..8, on |x| < 0.5, z = x^2
# (the next term below 1e-10 relative).
ERF_TAYLOR = tuple(
    2.0 / math.sqrt(math.pi) * (-1) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(9)
)
# erfc x = t exp(-x^2 - 1.26551223 + t P(t)), t = 1 / (1 + x/2), x >= 0: the Chebyshev fit
# of Numerical Recipes (2nd ed., 6.2, `erfcc`), fractional error below 1.2e-7 for every
# x >= 0. P's coefficients, lowest first.
ERFC_NR = (
    1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
    -1.13520398, 1.48851587, -0.82215223, 0.17087277,
)  # fmt: skip
ERFC_NR_C0 = -1.26551223
# atan t = t + t z (c1 + z (c2 + z (c3 + z c4))), z = t^2, on |t| <= tan(pi/8) after
# Cephes' reduction (atanf.c): relative error below 1.9e-7 (Cephes' peak over [-10, 10]).
ATAN_CEPHES = (-3.33329491539e-1, 1.99777106478e-1, -1.38776856032e-1, 8.05374449538e-2)
TAN_3PI_8 = 2.414213562373095
TAN_PI_8 = 0.4142135623730950


def _poly(x: Expr, coeffs: tuple[float, ...]) -> Expr:
    """c0 + x (c1 + x (c2 + ...)) by Horner, in f32."""
    acc: Expr = const(coeffs[-1], "f32")
    for c in reversed(coeffs[:-1]):
        acc = bin_("+", const(c, "f32"), bin_("*", x, acc))
    return acc


def _signed(negative: Expr, r: Expr) -> Expr:
    return select(negative, Unary("-", r, "f32"), r)


def _sign_bit(a: Expr) -> Expr:
    """The sign bit of an f32, as a bool (true for -0 too)."""
    return bin_(">=", Bitcast(a, "u32"), const(0x80000000, "u32"))


def _define_special_helpers() -> None:
    f = "f32"
    a, x, r, e, h, s, z, t = (_p(n, f) for n in ("a", "x", "r", "e", "h", "s", "z", "t"))
    zero, one, half, two = (const(v, f) for v in (0.0, 1.0, 0.5, 2.0))
    nan_guard = If(isnan(a), [Return(a)])
    neg = bin_("<", a, zero)
    mul, add, sub, div = (lambda p, q, o=o: bin_(o, p, q) for o in "*+-/")
    pi = const(math.pi, f)
    half_pi = const(math.pi / 2, f)
    _helper(
        "mimir_expm1",
        [("a", f)],
        f,
        [
            nan_guard,
            If(
                bin_("<", call("abs", a), half),
                [Return(add(a, mul(mul(a, a), _poly(a, EXPM1_TAYLOR))))],
            ),
            Return(sub(call("exp", a), one)),
        ],
    )
    _helper(
        "mimir_log1p",
        [("a", f)],
        f,
        [
            nan_guard,
            If(bin_("<", a, const(-1.0, f)), [Return(const(NAN, f))]),
            If(bin_("==", a, const(-1.0, f)), [Return(Unary("-", const(INF, f), f))]),
            If(
                bin_("<", call("abs", a), half),
                [
                    Let(s, div(a, add(two, a))),
                    Let(z, mul(s, s)),
                    Let(t, add(s, s)),
                    Return(add(t, mul(mul(t, z), _poly(z, LOG1P_ATANH)))),
                ],
            ),
            Return(call("log", add(one, a))),
        ],
    )
    big = const(9.0, f)  # past 9, e^-x is below 2^-25 of e^x
    _helper(
        "mimir_sinh",
        [("a", f)],
        f,
        [
            nan_guard,
            Let(x, call("abs", a)),
            If(
                bin_("<", x, one),
                [Let(z, mul(a, a)), Return(add(a, mul(mul(a, z), _poly(z, SINH_TAYLOR))))],
            ),
            If(
                bin_("<", x, big),
                [Let(e, call("exp", x)), Return(_signed(neg, mul(half, sub(e, div(one, e)))))],
            ),
            # e^x / 2 as (e^(x/2) / 2) e^(x/2): finite wherever the result is
            Let(h, call("exp", mul(half, x))),
            Return(_signed(neg, mul(mul(half, h), h))),
        ],
    )
    _helper(
        "mimir_cosh",
        [("a", f)],
        f,
        [
            nan_guard,
            Let(x, call("abs", a)),
            If(
                bin_("<", x, big),
                [Let(e, call("exp", x)), Return(add(mul(half, e), div(half, e)))],
            ),
            Let(h, call("exp", mul(half, x))),
            Return(mul(mul(half, h), h)),
        ],
    )
    # atan of x >= 0 (inf included): Cephes' reduction to |t| <= tan(pi/8), its polynomial
    atan_poly = lambda u, base: add(  # noqa: E731
        base, add(u, mul(mul(u, mul(u, u)), _poly(mul(u, u), ATAN_CEPHES)))
    )
    _helper(
        "mimir_atan_nonneg",
        [("x", f)],
        f,
        [
            If(
                bin_(">", x, const(TAN_3PI_8, f)),
                [Let(t, Unary("-", div(one, x), f)), Return(atan_poly(t, half_pi))],
            ),
            If(
                bin_(">", x, const(TAN_PI_8, f)),
                [
                    Let(t, div(sub(x, one), add(x, one))),
                    Return(atan_poly(t, const(math.pi / 4, f))),
                ],
            ),
            Return(atan_poly(x, zero)),
        ],
    )
    _helper(
        "mimir_atan",
        [("a", f)],
        f,
        [
            nan_guard,
            If(bin_("==", a, zero), [Return(a)]),  # atan(-0) is -0
            Let(r, call("mimir_atan_nonneg", call("abs", a))),
            Return(_signed(neg, r)),
        ],
    )
    # atan2(y, x): IEEE's (and `math.atan2`'s) answers at zeros and infinities, by the sign
    # bits; otherwise atan of the smaller magnitude over the larger, then the quadrant.
    y, ax, ay = _p("y", f), _p("ax", f), _p("ay", f)
    ys, xs = _p("ys", "bool"), _p("xs", "bool")
    _helper(
        "mimir_atan2",
        [("y", f), ("x", f)],
        f,
        [
            If(bin_("||", isnan(x), isnan(y)), [Return(add(x, y))]),
            Let(ys, _sign_bit(y)),
            Let(xs, _sign_bit(x)),
            Let(ax, call("abs", x)),
            Let(ay, call("abs", y)),
            If(bin_("==", ay, zero), [Return(_signed(ys, select(xs, pi, zero)))]),
            If(bin_("==", ax, zero), [Return(_signed(ys, half_pi))]),
            If(
                bin_("&&", isinf(ax), isinf(ay)),
                [Return(_signed(ys, select(xs, const(3 * math.pi / 4, f), const(math.pi / 4, f))))],
            ),
            If(isinf(ax), [Return(_signed(ys, select(xs, pi, zero)))]),
            If(isinf(ay), [Return(_signed(ys, half_pi))]),
            VarDecl(r, zero),
            If(
                bin_("<=", ay, ax),
                [Assign(r, call("mimir_atan_nonneg", div(ay, ax)))],
                [Assign(r, sub(half_pi, call("mimir_atan_nonneg", div(ax, ay))))],
            ),
            Return(_signed(ys, select(xs, sub(pi, r), r))),
        ],
    )
    # erfc of finite x >= 0: Numerical Recipes' fit, with x^2 split as hi^2 + lo (x + hi)
    # (hi: x's top 12 significand bits, so hi^2 is exact) and exp taken of each part: the
    # rounding of x^2 near 100 would otherwise cost 2^-24 x^2 relative.
    hi, lo, p = _p("hi", f), _p("lo", f), _p("p", f)
    _helper(
        "mimir_erfc_nonneg",
        [("x", f)],
        f,
        [
            Let(t, div(one, add(one, mul(half, x)))),
            Let(hi, Bitcast(bin_("&", Bitcast(x, "u32"), const(0xFFFFF000, "u32")), f)),
            Let(lo, sub(x, hi)),
            Let(p, add(const(ERFC_NR_C0, f), mul(t, _poly(t, ERFC_NR)))),
            Return(
                mul(
                    mul(t, call("exp", sub(p, mul(lo, add(x, hi))))),
                    call("exp", Unary("-", mul(hi, hi), f)),
                )
            ),
        ],
    )
    cutoff = const(10.5, f)  # erfc(10.5) is below float32's least subnormal
    _helper(
        "mimir_erfc",
        [("a", f)],
        f,
        [
            nan_guard,
            Let(x, call("abs", a)),
            If(bin_(">=", x, cutoff), [Return(select(neg, two, zero))]),
            Let(r, call("mimir_erfc_nonneg", x)),
            Return(select(neg, sub(two, r), r)),
        ],
    )
    _helper(
        "mimir_erf",
        [("a", f)],
        f,
        [
            nan_guard,
            Let(x, call("abs", a)),
            If(bin_("<", x, half), [Return(mul(a, _poly(mul(a, a), ERF_TAYLOR)))]),
            # erfc(4) < 2^-25: 1 - erfc rounds to 1 (and inf needs no erfc)
            If(bin_(">=", x, const(4.0, f)), [Return(select(neg, const(-1.0, f), one))]),
            Return(_signed(neg, sub(one, call("mimir_erfc_nonneg", x)))),
        ],
    )
    # x Phi(x) = x erfc(-x / sqrt 2) / 2: no cancellation in 1 + erf(x / sqrt 2) for x < 0
    _helper(
        "mimir_gelu_erf",
        [("a", f)],
        f,
        [
            nan_guard,
            If(isinf(a), [Return(select(bin_(">", a, zero), a, zero))]),
            Return(
                mul(
                    mul(half, a),
                    call("mimir_erfc", mul(Unary("-", a, f), const(math.sqrt(0.5), f))),
                )
            ),
        ],
    )


_define_special_helpers()


# ---------------------------------------------------------------- Philox random numbers
# The constants of `mimir.ops.numerics` (Random123's, cuRAND's and Triton's); the words are
# 32-bit products: `mulhi` is the high half of the 64-bit product (an intrinsic: PTX
# `mul.hi.u32`, MSL `mulhi`; `mimir_mulhi_u32` below, from 16-bit halves, on WGSL and SPIR-V).
PHILOX_ROUND_A, PHILOX_ROUND_B = 0xD2511F53, 0xCD9E8D57
PHILOX_KEY_A, PHILOX_KEY_B = 0x9E3779B9, 0xBB67AE85
PHILOX_ROUNDS = 10
UNIFORM_SCALE = f32(4.6566127342e-10)  # Triton's `uint_to_uniform_float` scale


def _philox_words(k0: Expr, k1: Expr, c0: Expr) -> tuple[list, Expr, Expr]:
    """Statements computing words 0 and 1 of Philox4x32-10 of counter (c0, 0, 0, 0) under
    key (k0, k1), unrolled, and those two words."""
    body: list = []
    n = [0]

    def let(e: Expr) -> Var:
        n[0] += 1
        v = Var(f"$w{n[0]}", "u32")
        body.append(Let(v, e))
        return v

    def u(v: int) -> Const:
        return const(v, "u32")

    def zero(e: Expr) -> bool:  # the counter's words 1 to 3 start at 0: fold them out
        return isinstance(e, Const) and e.value == 0

    def xor(x: Expr, y: Expr) -> Expr:
        return y if zero(x) else x if zero(y) else bin_("^", x, y)

    def mul(m: Const, x: Expr) -> Expr:
        return u(0) if zero(x) else bin_("*", m, x)

    def mulhi(m: Const, x: Expr) -> Expr:
        return u(0) if zero(x) else call("mulhi", m, x, t="u32")

    words: list[Expr] = [c0, u(0), u(0), u(0)]
    a, b = u(PHILOX_ROUND_A), u(PHILOX_ROUND_B)
    for r in range(PHILOX_ROUNDS):
        c0_, c1_, c2_, c3_ = words
        x0 = xor(xor(mulhi(b, c2_), c1_), k0)
        x2 = xor(xor(mulhi(a, c0_), c3_), k1)
        words = [w if isinstance(w, (Var, Const)) else let(w) for w in (x0, mul(b, c2_), x2)]
        words.append(let(mul(a, c0_)))
        if r + 1 < PHILOX_ROUNDS:
            k0 = let(bin_("+", k0, u(PHILOX_KEY_A)))
            k1 = let(bin_("+", k1, u(PHILOX_KEY_B)))
    return body, words[0], words[1]


def uniform_float(word: Expr) -> Expr:
    """Triton's `uint_to_uniform_float`: the word as int32, its bitwise not where negative
    (`-x - 1`), converted to float32 and times `UNIFORM_SCALE`: in [0, 1)."""
    x = Bitcast(word, "i32")
    flipped = select(bin_("<", x, const(0, "i32")), Unary("~", x, "i32"), x)
    return bin_("*", Cast(flipped, "f32"), const(UNIFORM_SCALE, "f32"))


def _split_half_pi(bits: int) -> tuple[float, float, float]:
    """pi/2 as c1 + c2 + c3: c1 and c2 with `bits` significant bits each (so that a
    multiple by a small integer is exact), c3 the rest rounded to float32."""

    def leading(v: float) -> float:
        exponent = math.frexp(v)[1]
        return math.ldexp(round(math.ldexp(v, bits - exponent)), exponent - bits)

    c1 = leading(HALF_PI)
    c2 = leading(HALF_PI - c1)
    return c1, c2, f32(HALF_PI - c1 - c2)


def _cosine_of_a_turn(theta: Var) -> tuple[list, Expr]:
    """cos(theta) for theta in [0, 2 pi] (Box-Muller's angle): the statements and the value.
    The quadrant j <= 4 is theta 2/pi rounded; theta - j c1 and - j c2 are exact (j c1 and
    j c2 have at most 24 bits, and theta is within a factor of two of j c1), so the reduced
    r is within an ulp whatever a compiler fuses, with no Payne-Hanek reduction (which
    `mimir_trig` needs for any float32, and which a driver compiles slowly)."""
    c1, c2, c3 = (const(c, "f32") for c in _split_half_pi(21))
    j, jf, r = _p("j", "u32"), _p("jf", "f32"), _p("r", "f32")
    nearest = bin_("+", bin_("*", theta, const(f32(2 / math.pi), "f32")), const(0.5, "f32"))
    reduced = bin_("-", bin_("-", theta, bin_("*", jf, c1)), bin_("*", jf, c2))
    statements = [
        Let(j, Cast(nearest, "u32")),
        Let(jf, Cast(j, "f32")),
        Let(r, bin_("-", reduced, bin_("*", jf, c3))),
    ]
    # cos x = sin(x + pi/2): one quadrant further
    polynomials, value = _sine_of_quadrant(Binary("+", j, const(1, "u32"), "u32"), r)
    return statements + polynomials, value


def _define_random_helpers() -> None:
    k0, k1, c0 = _p("k0", "u32"), _p("k1", "u32"), _p("c0", "u32")
    params = [("k0", "u32"), ("k1", "u32"), ("c0", "u32")]
    body, w0, w1 = _philox_words(k0, k1, c0)
    _helper("mimir_rand", params, "f32", [*body, Return(uniform_float(w0))])
    u1, u2, th = _p("u1", "f32"), _p("u2", "f32"), _p("theta", "f32")
    tiny = const(f32(1.0e-7), "f32")
    cosine, cos_theta = _cosine_of_a_turn(th)
    normal = [  # Box-Muller as Triton's `pair_uniform_to_normal`, its first value
        Let(u1, uniform_float(w0)),
        Let(u2, select(bin_("<", u1, tiny), tiny, u1)),
        Let(th, bin_("*", const(f32(6.283185307179586), "f32"), uniform_float(w1))),
        *cosine,
        Return(
            bin_(
                "*",
                call("mimir_sqrt", bin_("*", const(-2.0, "f32"), call("mimir_log", u2))),
                cos_theta,
            )
        ),
    ]
    _helper("mimir_randn", params, "f32", [*body, *normal])
    # the high word of a u32 product, from 16-bit halves (for targets without `mulhi`)
    a, b = _p("a", "u32"), _p("b", "u32")
    ah, al, bh, bl = (_p(n, "u32") for n in ("ah", "al", "bh", "bl"))
    lo, mid1, mid2 = _p("lo", "u32"), _p("mid1", "u32"), _p("mid2", "u32")
    m16 = const(0xFFFF, "u32")
    s16 = const(16, "u32")
    carry = bin_(
        ">>",
        bin_("+", bin_("+", bin_(">>", lo, s16), bin_("&", mid1, m16)), bin_("&", mid2, m16)),
        s16,
    )
    _helper(
        "mimir_mulhi_u32",
        [("a", "u32"), ("b", "u32")],
        "u32",
        [
            Let(ah, bin_(">>", a, s16)),
            Let(al, bin_("&", a, m16)),
            Let(bh, bin_(">>", b, s16)),
            Let(bl, bin_("&", b, m16)),
            Let(lo, bin_("*", al, bl)),
            Let(mid1, bin_("*", ah, bl)),
            Let(mid2, bin_("*", al, bh)),
            Return(
                bin_(
                    "+",
                    bin_(
                        "+",
                        bin_("*", ah, bh),
                        bin_("+", bin_(">>", mid1, s16), bin_(">>", mid2, s16)),
                    ),
                    carry,
                )
            ),
        ],
    )


_define_random_helpers()
