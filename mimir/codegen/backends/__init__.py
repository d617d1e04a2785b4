"""The backends, by the name `--backend` takes. `all` means every one of them.

Each target is one module or one folder: `msl`, `wgsl`, `ptx/`, `spirv/`. `base` holds
what they share: `Backend` (capabilities as class attributes, the type and operator
tables a target overrides, `check` for what it cannot emit), the `Namer` that keeps
Python names off each target's reserved words, and `Printed`. A backend prints the
legalised IR it is given (`ir.legalise`); it imports `ir`, `lower` and `base`, never a
scheduler or builder module, nor another backend.
"""

from __future__ import annotations

from mimir.codegen.backends.base import Backend, Capabilities, Namer, Printed
from mimir.codegen.backends.msl import MSL
from mimir.codegen.backends.ptx import PTX
from mimir.codegen.backends.spirv import SPIRV
from mimir.codegen.backends.wgsl import WGSL

BACKENDS: dict[str, type[Backend]] = {"msl": MSL, "wgsl": WGSL, "ptx": PTX, "spirv": SPIRV}

__all__ = ["BACKENDS", "Backend", "Capabilities", "MSL", "Namer", "PTX", "Printed", "SPIRV", "WGSL"]
