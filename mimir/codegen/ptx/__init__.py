"""The PTX backend's machinery; the backend itself is `mimir.codegen.backends.ptx`.

- `registers`: typed virtual registers and labels for one function body;
- `tables`: IR operators, types and builtins to PTX instruction names;
- `emit`: kernel-IR expressions and statements to PTX instructions;
- `mathlib`: exp, log, tanh and pow as instruction sequences, with their accuracy;
- `emulate`: exact CPU execution of those sequences (float32, round to nearest even).
"""

from __future__ import annotations

from mimir.codegen.ptx.mathlib import ACCURACY

__all__ = ["ACCURACY"]
