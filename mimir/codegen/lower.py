"""The lowering table: every element-level op of `mimir.ops.TABLE`, in IR, once.

`LOWERING[name]` builds the IR for one application of the op named `name` on
operands already converted to the op's compute type, and every backend prints
the result; nothing here is target-specific. Where Python (the reference in
`mimir.ops.numerics`) and GPU semantics differ, the difference is spelled out
here in IR, mostly as small `Helper` functions (`mimir.codegen.helpers`):

- integer `//` and `%` floor (Python), and give 0 for a zero divisor (NumPy);
- float `//` is `floor(a / b)`, float `%` takes the sign of the divisor;
- `**` follows Python: negative bases with integer exponents, nan for a
  negative base with a fractional exponent, `0 ** -1` is inf, ints by squaring;
- `maximum`/`minimum`/`clip` propagate nan, `relu(nan)` is nan;
- `sigmoid` never exponentiates a large positive number, `gelu` is the tanh
  approximation, `log`/`sqrt` give nan below 0 and `log(0)` is -inf;
- float -> int casts truncate toward zero and saturate, nan becomes 0;
- float comparisons test for nan on the bits (only `!=` holds with a nan), since
  WGSL and Metal's fast math may assume there is none.

Register types: float16 values are carried in f32 registers and rounded to
half after every op (`round_f16`), which gives the correctly rounded half
result for `+ - * /` (f32 has more than 2 * 11 + 2 bits) and matches the
reference, which computes in double and rounds once. Bools live in `bool`
registers and are stored as u32 (see `STORAGE`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from mimir.codegen.helpers import (
    HELPERS,
    INF,
    INT_MAX,
    INT_MIN,
    NAN,
    UINT_MAX,
    bin_,
    call,
    const,
    isnan,
    not_,
    round_f16,
    select,
)
from mimir.codegen.ir import (
    Binary,
    Bitcast,
    Call,
    Cast,
    Const,
    Expr,
    Helper,
    Kernel,
    Load,
    Unary,
    all_expressions,
    fold_block,
    map_block,
    map_expr,
    walk_expr,
)
from mimir.dtypes import DType, bfloat16, bool_, float16, float32, int32, uint32

__all__ = [
    "HELPERS",
    "INF",
    "INT_MAX",
    "INT_MIN",
    "LOWERING",
    "NAN",
    "REG",
    "STORAGE",
    "UINT_MAX",
    "bin_",
    "call",
    "const",
    "convert",
    "from_storage",
    "functions_called",
    "helpers_needed",
    "intrinsics_needed",
    "load_bfloat16",
    "pack_bfloat16",
    "lower_element",
    "round_f16",
    "round_to",
    "select",
    "to_storage",
    "with_exact_half",
    "with_reduced_trig",
    "with_helpers_for",
]

REG: dict[DType, str] = {
    bool_: "bool",
    int32: "i32",
    uint32: "u32",
    float32: "f32",
    float16: "f32",
    bfloat16: "f32",
}
# bfloat16 travels two to a u32 word (element 2k in the low half of word k), read with
# `load_bfloat16` and written a whole word at a time by a packing launch
# (`mimir.codegen.schedule.packing`, `pack_bfloat16`): no two threads share a word.
STORAGE: dict[DType, str] = {
    bool_: "u32",
    int32: "i32",
    uint32: "u32",
    float32: "f32",
    float16: "f16",
    bfloat16: "u32",
}
# ---------------------------------------------------------------- the table

Lowering = Callable[[list[Expr], str], Expr]


def _arith(op: str) -> Lowering:
    return lambda xs, t: bin_(op, xs[0], xs[1])


def _floordiv(xs: list[Expr], t: str) -> Expr:
    if t == "f32":
        return call("floor", bin_("/", xs[0], xs[1]))
    return call(f"mimir_floordiv_{t}", *xs)


def _mod(xs: list[Expr], t: str) -> Expr:
    return call(f"mimir_mod_{t}", *xs)


def _pow(xs: list[Expr], t: str) -> Expr:
    return call(f"mimir_pow_{t}", *xs)


def _compare(op: str) -> Lowering:
    def lower(xs: list[Expr], t: str) -> Expr:
        a, b = xs
        if t == "bool" and op not in ("==", "!="):
            # False < True, as Python orders bools; WGSL has no ordering on bool.
            a, b = (select(x, const(1, "u32"), const(0, "u32")) for x in (a, b))
        if t == "f32":
            return float_compare(op, a, b)
        return bin_(op, a, b)

    return lower


def float_compare(op: str, a: Expr, b: Expr) -> Expr:
    """An IEEE comparison with nan spelled out: only `!=` holds when either side is nan.
    WGSL and Metal's fast math may assume there is no nan, so the test is on the bits."""
    checks = [isnan(x) for x in dict.fromkeys((a, b)) if not isinstance(x, Const)]
    if not checks:
        return bin_(op, a, b)
    either_nan = checks[0] if len(checks) == 1 else bin_("||", checks[0], checks[1])
    if op == "!=":
        return bin_("||", either_nan, bin_(op, a, b))
    return bin_("&&", not_(either_nan), bin_(op, a, b))


def _bitwise(op: str, logical: str) -> Lowering:
    return lambda xs, t: bin_(logical if t == "bool" else op, xs[0], xs[1])


def _xor(xs: list[Expr], t: str) -> Expr:
    a, b = xs
    if t == "bool":  # (a or b) and not (a and b): bools have no `^` on every target
        return bin_("&&", bin_("||", a, b), not_(bin_("&&", a, b)))
    return bin_("^", a, b)


def _shift(op: str) -> Lowering:
    """`a << b`, `a >> b` for a count the checker proved in 0..31. The count is a u32 (WGSL
    shifts by u32 only); an i32 `<<` shifts its bits as a u32 (wrapping, as the shim's
    int32); `>>` of an i32 is arithmetic on every target, as Python's. Two literals fold
    here (WGSL refuses a constant i32 shift that overflows)."""

    def lower(xs: list[Expr], t: str) -> Expr:
        a, b = xs
        if isinstance(a, Const) and isinstance(b, Const) and 0 <= int(b.value) < 32:
            v = int(a.value) << int(b.value) if op == "<<" else int(a.value) >> int(b.value)
            v &= 0xFFFFFFFF
            return const(v - (1 << 32) if t == "i32" and v >= 2**31 else v, t)
        count = b if b.type == "u32" else Cast(b, "u32")
        if op == "<<" and t == "i32":
            # on the bits: C++ (Metal) leaves a left shift of a negative int undefined
            return Cast(Binary("<<", Cast(a, "u32"), count, "u32"), "i32")
        return Binary(op, a, count, t)

    return lower


def _neg(xs: list[Expr], t: str) -> Expr:
    if t == "f32":
        return Unary("-", xs[0], t)
    return bin_("-", const(0, t), xs[0])  # wraps: -INT_MIN == INT_MIN, as int32 casts do


def _invert(xs: list[Expr], t: str) -> Expr:
    return not_(xs[0]) if t == "bool" else Unary("~", xs[0], t)


def _relu(xs: list[Expr], t: str) -> Expr:
    (a,) = xs
    if t == "f32":
        return select(bin_("||", bin_(">", a, const(0, t)), isnan(a)), a, const(0, t))
    if t == "u32":
        return a
    return select(bin_(">", a, const(0, t)), a, const(0, t))


def _abs(xs: list[Expr], t: str) -> Expr:
    (a,) = xs
    if t == "f32":
        return call("abs", a)
    if t == "u32":
        return a
    return select(bin_("<", a, const(0, t)), bin_("-", const(0, t), a), a)


def _float_fn(helper: str) -> Lowering:
    return lambda xs, t: call(helper, xs[0])


def _rsqrt(xs: list[Expr], t: str) -> Expr:
    return bin_("/", const(1.0, t), call("mimir_sqrt", xs[0]))


def _extremum(name: str, op: str, logical: str) -> Lowering:
    def lower(xs: list[Expr], t: str) -> Expr:
        a, b = xs
        if t == "bool":
            return bin_(logical, a, b)
        if t == "f32":
            return call(f"mimir_{name}_f32", a, b)
        return select(bin_(op, a, b), a, b)

    return lower


_maximum = _extremum("maximum", ">=", "||")
_minimum = _extremum("minimum", "<=", "&&")


def _clip(xs: list[Expr], t: str) -> Expr:
    a, lo, hi = xs
    return _minimum([_maximum([a, lo], t), hi], t)


def _where(xs: list[Expr], t: str) -> Expr:
    return select(xs[0], xs[1], xs[2])


def _random(helper: str) -> Lowering:
    """`rand` / `randn` of an int32 or uint32 seed and offset: the key is the seed
    sign-extended to 64 bits (Triton's `seed.to(uint64)`), the counter the offset's bits."""

    def lower(xs: list[Expr], t: str) -> Expr:
        seed, offset = xs
        hi = const(0, "u32")
        if t == "i32":
            hi = select(bin_("<", seed, const(0, "i32")), const(UINT_MAX, "u32"), hi)
        key = seed if t == "u32" else Bitcast(seed, "u32")
        counter = offset if t == "u32" else Bitcast(offset, "u32")
        return call(helper, key, hi, counter)

    return lower


LOWERING: dict[str, Lowering] = {
    "add": _arith("+"),
    "sub": _arith("-"),
    "mul": _arith("*"),
    "truediv": _arith("/"),
    "floordiv": _floordiv,
    "mod": _mod,
    "pow": _pow,
    "bitand": _bitwise("&", "&&"),
    "bitor": _bitwise("|", "||"),
    "bitxor": _xor,
    "lshift": _shift("<<"),
    "rshift": _shift(">>"),
    "lt": _compare("<"),
    "le": _compare("<="),
    "gt": _compare(">"),
    "ge": _compare(">="),
    "eq": _compare("=="),
    "ne": _compare("!="),
    "neg": _neg,
    "invert": _invert,
    "relu": _relu,
    "abs": _abs,
    "sigmoid": _float_fn("mimir_sigmoid"),
    "tanh": _float_fn("mimir_tanh"),
    "gelu": _float_fn("mimir_gelu"),
    "exp": lambda xs, t: call("exp", xs[0]),
    "log": _float_fn("mimir_log"),
    "sqrt": _float_fn("mimir_sqrt"),
    "rsqrt": _rsqrt,
    "math_sqrt": _float_fn("mimir_sqrt"),
    "math_exp": lambda xs, t: call("exp", xs[0]),
    "math_log": _float_fn("mimir_log"),
    "sin": lambda xs, t: call("sin", xs[0]),
    "cos": lambda xs, t: call("cos", xs[0]),
    "math_sin": lambda xs, t: call("sin", xs[0]),
    "math_cos": lambda xs, t: call("cos", xs[0]),
    "gelu_erf": _float_fn("mimir_gelu_erf"),
    "cosh": _float_fn("mimir_cosh"),
    "sinh": _float_fn("mimir_sinh"),
    "expm1": _float_fn("mimir_expm1"),
    "log1p": _float_fn("mimir_log1p"),
    "erf": _float_fn("mimir_erf"),
    "erfc": _float_fn("mimir_erfc"),
    "atan": _float_fn("mimir_atan"),
    "atan2": lambda xs, t: call("mimir_atan2", xs[0], xs[1]),
    "clip": _clip,
    "where": _where,
    "maximum": _maximum,
    "minimum": _minimum,
    "rand": _random("mimir_rand"),
    "randn": _random("mimir_randn"),
}


def lower_element(name: str, args: list[Expr], compute: DType, out: DType) -> Expr:
    """One op applied to operands already in `compute`'s register type."""
    result = LOWERING[name](args, REG[compute])
    return round_to(result, out)


def round_to(e: Expr, dtype: DType) -> Expr:
    """An f32 register value rounded to `dtype`'s precision (float16, bfloat16)."""
    if dtype == float16:
        return round_f16(e)
    if dtype == bfloat16:
        return call("mimir_round_bf16", e)
    return e


def load_bfloat16(array: str, flat: Expr) -> Expr:
    """Element `flat` of a packed bfloat16 buffer, as f32: its 16 bits moved to the top."""
    word = Load(array, bin_("/", flat, const(2, "u32")), "u32")
    odd = bin_("!=", bin_("&", flat, const(1, "u32")), const(0, "u32"))
    bits = select(
        odd,
        bin_("&", word, const(0xFFFF0000, "u32")),
        Binary("<<", word, const(16, "u32"), "u32"),
    )
    return Bitcast(bits, "f32")


def pack_bfloat16(low: Expr, high: Expr) -> Expr:
    """One u32 word of a packed bfloat16 buffer from two f32 values: `low` (element 2k)
    in bits 0-15, `high` (element 2k + 1) in bits 16-31, each rounded to nearest even."""
    return Binary(
        "|",
        call("mimir_bf16_bits", low),
        Binary("<<", call("mimir_bf16_bits", high), const(16, "u32"), "u32"),
        "u32",
    )


# ---------------------------------------------------------------- conversions


def convert(e: Expr, src: DType, dst: DType) -> Expr:
    """A register value of dtype `src` as dtype `dst` (`astype` semantics)."""
    if src == dst:
        return e
    s, d = REG[src], REG[dst]
    if dst == bool_:
        return float_compare("!=", e, const(0, s)) if s == "f32" else bin_("!=", e, const(0, s))
    if src == bool_:
        return select(e, const(1, d), const(0, d))
    if s == "f32" and d == "f32":
        return round_to(e, dst)
    if s == "f32":
        return call(f"mimir_f32_to_{d}", e)
    if d == "f32":
        return round_to(Cast(e, "f32"), dst)
    return Cast(e, d)  # i32 <-> u32: two's complement reinterpretation


def to_storage(e: Expr, dtype: DType) -> Expr:
    if dtype == bool_:
        return select(e, const(1, "u32"), const(0, "u32"))
    if dtype == float16:
        return Cast(e, "f16")
    return e


def from_storage(e: Expr, dtype: DType) -> Expr:
    if dtype == bool_:
        return bin_("!=", e, const(0, "u32"))
    if dtype == float16:
        return Cast(e, "f32")
    return e


# ---------------------------------------------------------------- what an expression needs


def helpers_needed(exprs: Iterable[Expr]) -> list[Helper]:
    """Helpers called (directly or through other helpers), callees first."""
    found: list[str] = []

    def visit(name: str) -> None:
        if name in found:
            return
        for dep in HELPERS[name].uses:
            visit(dep)
        found.append(name)

    for e in exprs:
        for sub in walk_expr(e):
            if isinstance(sub, Call) and sub.fn in HELPERS:
                visit(sub.fn)
    return [HELPERS[n] for n in found]


def functions_called(e: Expr) -> list[str]:
    """Intrinsics and helpers `e` calls, through helpers too."""
    found = [h.name for h in helpers_needed([e])]
    found += sorted({fn for fn, _ in intrinsics_needed([e])})
    return found


def intrinsics_needed(exprs: Iterable[Expr]) -> set[tuple[str, str]]:
    """(intrinsic, type) pairs used, through helpers too."""
    out: set[tuple[str, str]] = set()
    exprs = list(exprs)
    for e in exprs:
        for sub in walk_expr(e):
            if isinstance(sub, Call) and sub.fn not in HELPERS:
                out.add((sub.fn, sub.args[0].type))
    for h in helpers_needed(exprs):
        for sub in all_expressions(h.body):
            if isinstance(sub, Call) and sub.fn not in HELPERS:
                out.add((sub.fn, sub.args[0].type))
    return out


# ---------------------------------------------------------------- sin and cos by reduction

_TRIG_QUADRANT = {"sin": 0, "cos": 1}


def _trig_call(e: Expr) -> Expr | None:
    if isinstance(e, Call) and e.fn in _TRIG_QUADRANT and e.type == "f32":
        arg = map_expr(e.args[0], _trig_call)
        return call("mimir_trig", arg, const(_TRIG_QUADRANT[e.fn], "u32"))
    return None


def _half_cast(e: Expr) -> Expr | None:
    if isinstance(e, Cast) and e.type == "f16" and e.a.type == "f32":
        return Cast(call("mimir_round_f16", map_expr(e.a, _half_cast)), "f16")
    return None


def with_exact_half(kernel: Kernel) -> Kernel:
    """`kernel` with every f32 -> f16 conversion rounded first by the `mimir_round_f16`
    helper (integer arithmetic, to nearest even), so the conversion itself is exact.

    For backends whose specification leaves that rounding to the implementation (WGSL:
    either neighbour, and near 65504 the largest finite value or inf; Vulkan SPIR-V's
    `OpFConvert` without a rounding-mode decoration): every target then stores the
    float16 the shim does (`tests/test_half_rounding.py`)."""
    return _with_rewrite(kernel, _half_cast)


def with_reduced_trig(kernel: Kernel) -> Kernel:
    """`kernel` with every f32 `sin`/`cos` as a call of the `mimir_trig` helper.

    For backends whose builtin sin and cos hold on [-pi, pi] only (WGSL, SPIR-V):
    `mimir_trig` reduces every float32 argument exactly (`mimir.codegen.helpers`).
    """
    return _with_rewrite(kernel, _trig_call)


def with_helpers_for(kernel: Kernel, emulated: dict[str, str]) -> Kernel:
    """`kernel` with each call of an intrinsic in `emulated` a call of its IR helper."""

    def swap(e: Expr) -> Expr | None:
        if isinstance(e, Call) and e.fn in emulated:
            return Call(emulated[e.fn], e.args, e.type)
        return None

    return _with_rewrite(kernel, swap)


def _with_rewrite(kernel: Kernel, rule: Callable[[Expr], Expr | None]) -> Kernel:
    """`kernel` with `rule` applied to every expression of its body and helpers, and the
    helpers the rewritten expressions call added."""

    def rewrite(body):
        return fold_block(map_block(body, lambda e: map_expr(e, rule)))

    body = rewrite(kernel.body)
    helpers = [replace(h, body=tuple(rewrite(h.body))) for h in kernel.helpers]
    known = {h.name for h in helpers}
    exprs = list(all_expressions(body)) + [e for h in helpers for e in all_expressions(h.body)]
    added = [h for h in helpers_needed(exprs) if h.name not in known]
    if not added:
        return replace(kernel, body=body, helpers=helpers)
    return replace(kernel, body=body, helpers=[*added, *helpers])
