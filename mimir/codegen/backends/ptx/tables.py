"""The PTX backend's tables: IR operators, types and builtins to PTX instruction names.

Legalisation lives in `mimir.codegen.backends.ptx.emit`; these are plain lookups. Float
arithmetic always names its rounding (`.rn`) so ptxas cannot contract a
multiply and an add into an `fma`; integer `div`/`rem` truncate, as the IR says.
"""

from __future__ import annotations

__all__ = [
    "ARITH",
    "BUILTINS",
    "COMPARE",
    "ELEMENT_BYTES",
    "MEMORY_TYPE",
    "MOV",
    "PTX_INTRINSICS",
    "SHIFTS",
    "SIMPLE_INTRINSICS",
    "TYPE",
]

ELEMENT_BYTES = {"i32": 4, "u32": 4, "f32": 4, "f16": 2, "bool": 4}
MEMORY_TYPE = {"i32": "s32", "u32": "u32", "f32": "f32", "f16": "b16", "bool": "u32"}
TYPE = {"i32": "s32", "u32": "u32", "f32": "f32"}
MOV = {"pred": "mov.pred", "b16": "mov.b16", "b32": "mov.b32", "f32": "mov.f32", "b64": "mov.b64"}

_INT_OPS = (("+", "add"), ("-", "sub"), ("*", "mul.lo"), ("/", "div"), ("%", "rem"))
_BIT_OPS = (("&", "and"), ("|", "or"), ("^", "xor"))
_BOOL_OPS = (("&&", "and"), ("||", "or"), ("&", "and"), ("|", "or"), ("^", "xor"))
ARITH = {
    **{(op, "f32"): f"{name}.rn.f32" for op, name in (("+", "add"), ("-", "sub"), ("*", "mul"))},
    ("/", "f32"): "div.rn.f32",
    **{(op, t): f"{name}.{TYPE[t]}" for t in ("i32", "u32") for op, name in _INT_OPS},
    **{(op, t): f"{name}.b32" for t in ("i32", "u32") for op, name in _BIT_OPS},
    **{(op, "bool"): f"{name}.pred" for op, name in _BOOL_OPS},
}
SHIFTS = {
    ("<<", "i32"): "shl.b32",
    ("<<", "u32"): "shl.b32",
    (">>", "i32"): "shr.s32",
    (">>", "u32"): "shr.u32",
}
COMPARE = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne"}

# IR builtin -> PTX special register.
BUILTINS = {
    f"{ir}_{axis}": f"%{ptx}.{axis}"
    for ir, ptx in (("local", "tid"), ("group", "ctaid"), ("groups", "nctaid"))
    for axis in "xyz"
}

# Intrinsics only PTX kernels call (no array op lowers to them), for the tensor-core
# attention (`kernels.attention_mma`): `exp2`, 2^x (`Emitter.call` prints it), and
# `mul_f16x2` and `max_f16x2`, two packed float16 pairs multiplied (each product rounded
# once) or their larger halves taken.
PTX_INTRINSICS = ("exp2", "mul_f16x2", "max_f16x2")

SIMPLE_INTRINSICS = {
    ("sqrt", "f32"): "sqrt.rn.f32",
    ("fma", "f32"): "fma.rn.f32",
    ("floor", "f32"): "cvt.rmi.f32.f32",
    ("abs", "f32"): "abs.f32",
    ("abs", "i32"): "abs.s32",
    ("min", "f32"): "min.f32",
    ("max", "f32"): "max.f32",
    ("min", "i32"): "min.s32",
    ("max", "i32"): "max.s32",
    ("min", "u32"): "min.u32",
    ("max", "u32"): "max.u32",
    ("isnan", "f32"): "testp.notanumber.f32",
    ("isinf", "f32"): "testp.infinite.f32",
    ("mulhi", "u32"): "mul.hi.u32",
    ("mul_f16x2", "u32"): "mul.rn.f16x2",
    ("max_f16x2", "u32"): "max.f16x2",
}
