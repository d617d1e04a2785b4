"""Small IR functions the lowering table calls, defined once for every backend.

Each `Helper` spells one piece of Python semantics that no GPU instruction has
(floor division, Python's `%` and `**`, nan-propagating `maximum`, a stable
`sigmoid`, the tanh `gelu`, saturating float -> int casts). A kernel that calls
one carries its definition (`Kernel.helpers`), and each backend prints it as a
plain function of its language. Also here: the expression shorthands the
lowering is written with.
"""

from __future__ import annotations

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


_define_integer_helpers()
_define_float_helpers()
_define_bfloat_helpers()
