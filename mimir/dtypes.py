"""Element types of the kernel language and their promotion lattice.

Promotion follows NumPy's kinds with JAX's choices where NumPy would widen to a
64-bit type the kernel language does not have:

    bool_ < {int32, uint32} < {float16, bfloat16} < float32

- int32 with uint32 has no common type here (NumPy widens to int64): an error.
- float16 with bfloat16 gives float32 (JAX): neither holds the other's values.
- bfloat16 is a storage type: computed in float32 and rounded to bfloat16 (the upper
  16 bits of a float32, round to nearest even) where a value is stored.
- An integer with a float16 gives float16 (JAX), not float64.
- Python scalars are weak: `x * 2` keeps x's dtype; a float scalar with an
  integer or bool tensor gives float32.

Stdlib-only: the shim and the checker share these objects.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DType:
    name: str
    kind: str  # "b" bool, "i" signed int, "u" unsigned int, "f" float
    itemsize: int

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_integer(self) -> bool:
        return self.kind in "iu"

    @property
    def is_bool(self) -> bool:
        return self.kind == "b"

    def __repr__(self) -> str:
        return self.name

    def __str__(self) -> str:
        return self.name


bool_ = DType("bool_", "b", 1)
int32 = DType("int32", "i", 4)
uint32 = DType("uint32", "u", 4)
float16 = DType("float16", "f", 2)
bfloat16 = DType("bfloat16", "f", 2)
float32 = DType("float32", "f", 4)

ALL_DTYPES: tuple[DType, ...] = (bool_, int32, uint32, float16, bfloat16, float32)
BY_NAME: dict[str, DType] = {d.name: d for d in ALL_DTYPES}

_RANK = {bool_: 0, int32: 1, uint32: 1, float16: 2, bfloat16: 2, float32: 3}


class PromotionError(TypeError):
    """Two dtypes have no common type in the kernel language."""

    def __init__(self, left: DType, right: DType) -> None:
        super().__init__(f"{left} and {right} have no common dtype")
        self.left = left
        self.right = right


def promote(a: DType, b: DType) -> DType:
    """The common dtype of two tensor dtypes (see the module docstring)."""
    if a == b:
        return a
    if {a, b} == {int32, uint32}:
        raise PromotionError(a, b)
    if {a, b} == {float16, bfloat16}:
        return float32
    return a if _RANK[a] > _RANK[b] else b


# A Python scalar in an expression: "bool", "int" or "float".
ScalarKind = str


def scalar_kind(value: object) -> ScalarKind:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    raise TypeError(f"not a scalar: {value!r}")


def default_dtype(kind: ScalarKind) -> DType:
    """The dtype a lone Python scalar takes when no tensor fixes one."""
    return {"bool": bool_, "int": int32, "float": float32}[kind]


def promote_weak(tensor: DType, kind: ScalarKind) -> DType:
    """The dtype of `tensor_value op python_scalar` (weak scalar typing)."""
    if kind == "bool":
        return tensor
    if kind == "int":
        return int32 if tensor.is_bool else tensor
    return tensor if tensor.is_float else float32
