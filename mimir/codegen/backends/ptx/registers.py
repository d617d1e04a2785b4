"""Typed virtual registers and labels for one PTX function body.

PTX registers are virtual and unlimited (ptxas allocates the hardware ones),
so every value gets a fresh register of its class and nothing is ever freed:
`%p` predicates, `%h` 16-bit (float16 bits), `%r` 32-bit integers (i32, u32,
bool stored as u32), `%f` float32 and `%rd` 64-bit addresses. `declarations`
gives the `.reg` lines a body needs, in a fixed order.
"""

from __future__ import annotations

__all__ = ["CLASS_OF", "Registers"]

# IR scalar type -> register class.
CLASS_OF = {"bool": "pred", "i32": "b32", "u32": "b32", "f32": "f32", "f16": "b16"}

_CLASSES = {
    "pred": ("%p", ".pred"),
    "b16": ("%h", ".b16"),
    "b32": ("%r", ".b32"),
    "f32": ("%f", ".f32"),
    "b64": ("%rd", ".b64"),
}


class Registers:
    """Fresh registers per class, and fresh labels, for one function."""

    def __init__(self, label_prefix: str = "$L") -> None:
        self._counts = dict.fromkeys(_CLASSES, 0)
        self._labels = 0
        self._label_prefix = label_prefix

    def new(self, cls: str) -> str:
        prefix, _ = _CLASSES[cls]
        n = self._counts[cls]
        self._counts[cls] = n + 1
        return f"{prefix}{n}"

    def of_type(self, ir_type: str) -> str:
        """A fresh register for a value of IR scalar type `ir_type`."""
        return self.new(CLASS_OF[ir_type])

    def label(self, hint: str) -> str:
        self._labels += 1
        return f"{self._label_prefix}_{hint}_{self._labels}"

    def declarations(self) -> list[str]:
        out = []
        for cls, (prefix, ptx_type) in _CLASSES.items():
            n = self._counts[cls]
            if n:
                out.append(f"    .reg {ptx_type} {prefix}<{n}>;")
        return out
