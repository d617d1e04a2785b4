"""The backends, by the name `--backend` takes. `all` means every one of them."""

from __future__ import annotations

from mimir.codegen.backends.base import Backend, Capabilities, Namer, Printed
from mimir.codegen.backends.msl import MSL
from mimir.codegen.backends.ptx import PTX
from mimir.codegen.backends.spirv import SPIRV
from mimir.codegen.backends.wgsl import WGSL

BACKENDS: dict[str, type[Backend]] = {"msl": MSL, "wgsl": WGSL, "ptx": PTX, "spirv": SPIRV}

__all__ = ["BACKENDS", "Backend", "Capabilities", "MSL", "Namer", "PTX", "Printed", "SPIRV", "WGSL"]
