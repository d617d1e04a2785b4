"""Dtype rules: the result dtype of each op family, or a `RuleError`.

An operand's dtype is a `DType` for a tensor, or a scalar kind (`"bool"`,
`"int"`, `"float"`) for a Python scalar, which is weakly typed (see
`mimir.dtypes`). Dtypes are always concrete, so these rules are plain
functions; the checker records their results as Z3 facts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mimir.dtypes import (
    DType,
    PromotionError,
    bool_,
    default_dtype,
    float32,
    int32,
    promote,
    promote_weak,
)
from mimir.ops.shapes import RuleError

Operand = DType | str
DtypeRule = Callable[[str, Sequence[Operand]], DType]


def common(spelling: str, operands: Sequence[Operand]) -> DType:
    """The promoted dtype of tensor operands, then of weak Python scalars."""
    tensors = [d for d in operands if isinstance(d, DType)]
    scalars = [d for d in operands if isinstance(d, str)]
    if not tensors:
        kinds = set(scalars)
        kind = "float" if "float" in kinds else "int" if "int" in kinds else "bool"
        return default_dtype(kind)
    result = tensors[0]
    try:
        for d in tensors[1:]:
            result = promote(result, d)
    except PromotionError as err:
        raise RuleError(
            "GPU021",
            f"`{spelling}` mixes {err.left} and {err.right}, which have no common dtype",
        ) from None
    for kind in scalars:
        result = promote_weak(result, kind)
    return result


def _no_bool(spelling: str, dtype: DType, what: str = "arithmetic") -> None:
    if dtype.is_bool:
        raise RuleError(
            "GPU020",
            f"{what} `{spelling}` is not defined on bool tensors",
        )


def arithmetic(spelling: str, operands: Sequence[Operand]) -> DType:
    result = common(spelling, operands)
    _no_bool(spelling, result)
    return result


def true_divide(spelling: str, operands: Sequence[Operand]) -> DType:
    result = common(spelling, operands)
    _no_bool(spelling, result)
    return result if result.is_float else float32


def comparison(spelling: str, operands: Sequence[Operand]) -> DType:
    common(spelling, operands)
    return bool_


def bitwise(spelling: str, operands: Sequence[Operand]) -> DType:
    result = common(spelling, operands)
    if result.is_float:
        raise RuleError(
            "GPU020",
            f"bitwise `{spelling}` needs bool or integer tensors, got {result}",
        )
    return result


def shift(spelling: str, operands: Sequence[Operand]) -> DType:
    """`<<` and `>>`: integers only (NumPy refuses bool and float shifts too)."""
    result = common(spelling, operands)
    if not result.is_integer:
        raise RuleError(
            "GPU020",
            f"shift `{spelling}` needs integer tensors, got {result}",
        )
    return result


def same(spelling: str, operands: Sequence[Operand]) -> DType:
    return common(spelling, operands)


def signed(spelling: str, operands: Sequence[Operand]) -> DType:
    result = common(spelling, operands)
    _no_bool(spelling, result, "operation")
    return result


def floating(spelling: str, operands: Sequence[Operand]) -> DType:
    result = common(spelling, operands)
    return result if result.is_float else float32


def select(spelling: str, operands: Sequence[Operand]) -> DType:
    cond, *values = operands
    cond_dtype = cond if isinstance(cond, DType) else default_dtype(cond)
    if cond_dtype != bool_:
        raise RuleError(
            "GPU020",
            f"the condition of `{spelling}` must be a bool tensor, got {cond_dtype}",
        )
    return common(spelling, values)


def summation(spelling: str, operands: Sequence[Operand]) -> DType:
    result = common(spelling, operands)
    return int32 if result.is_bool else result


ATOMIC_DTYPES = ("int32", "uint32", "float32")


def atomic(spelling: str, operands: Sequence[Operand]) -> DType:
    """`atomic_add(out, index, value)`: operands are `out`'s dtype and the value's.

    The target must be int32, uint32 or float32 (the 32-bit atomics every backend has; f16
    and bool have none); the value converts to it as an element store does (no implicit
    conversion of a tensor dtype, weak Python scalars as NumPy).
    """
    target, value = operands
    assert isinstance(target, DType)
    if target.name not in ATOMIC_DTYPES:
        raise RuleError(
            "GPU020",
            f"`{spelling}` is defined on int32, uint32 and float32 tensors, not {target}; "
            "accumulate into a float32 or int32 output",
        )
    got = value if isinstance(value, DType) else promote_weak(target, value)
    if got != target:
        shown = value if isinstance(value, DType) else f"a Python {value}"
        raise RuleError(
            "GPU027",
            f"`{spelling}` adds {shown} into a {target} tensor; convert with `.astype({target})`",
        )
    return target


def ordered(spelling: str, operands: Sequence[Operand]) -> DType:
    """`argmax` / `argmin`: any dtype is ordered (False < True); the result is an index."""
    common(spelling, operands)
    return int32


SORTABLE = ("float32", "int32", "uint32")


def sortable(spelling: str, operands: Sequence[Operand]) -> DType:
    """`sort`: float32, int32 or uint32 keys (what every backend compares in a register
    and keeps in workgroup memory); the result has the input's dtype."""
    result = common(spelling, operands)
    if result.name not in SORTABLE:
        raise RuleError(
            "GPU020",
            f"`{spelling}` sorts float32, int32 or uint32, not {result.name}; convert with "
            "`.astype(float32)` first",
        )
    return result


def sort_indices(spelling: str, operands: Sequence[Operand]) -> DType:
    """`argsort`: the keys as `sort` takes them; the result is an int32 index."""
    sortable(spelling, operands)
    return int32


def random(spelling: str, operands: Sequence[Operand]) -> DType:
    """`rand(seed, offsets)` / `randn(seed, offsets)`: an integer seed and integer offsets
    (int32 or uint32, one common dtype, the Philox counter), a float32 result."""
    seed, offsets = operands
    for what, d in (("seed", seed), ("offsets", offsets)):
        kind = (
            d
            if isinstance(d, str)
            else ("int" if d.is_integer else "float" if d.is_float else "bool")
        )
        if kind != "int":
            shown = d if isinstance(d, DType) else f"a Python {d}"
            raise RuleError(
                "GPU020",
                f"the {what} of `{spelling}` must be an int32 or uint32 value, not {shown}",
            )
    common(spelling, operands)
    return float32


def iota(spelling: str, dtype: DType) -> DType:
    """`arange(n, dtype)`: numbers, not bools."""
    if dtype.is_bool:
        raise RuleError("GPU020", f"`{spelling}` makes numbers; a bool range has no meaning")
    return dtype
