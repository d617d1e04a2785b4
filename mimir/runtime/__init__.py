"""Host-side runtime for Mimir's compiled kernels: reading manifests and running them.

- `mimir.runtime.contract`: the manifest contract every host checks (docs/hosts.md): a
  manifest read as untrusted input, refused with a MAN code naming the field (stdlib-only).
- `mimir.runtime.dimexpr`: evaluate a manifest's dim expressions (stdlib-only).
- `mimir.runtime.manifest`: buffer sizes, element encoding, the uniform block and
  workgroup counts a manifest implies (stdlib-only).
- `mimir.runtime.load` (`mimir.runtime.host`): call compiled kernels on NumPy arrays
  and torch tensors, through wgpu or CUDA, with device state kept between calls.
- `mimir.runtime.wgpu_runner`: validate WGSL with naga and run a WGSL manifest on
  whatever adapter wgpu finds (needs the `gpu` extra; imported on first use).
"""

from __future__ import annotations

from typing import Any

from mimir.runtime.dimexpr import DimExprError, cdiv, evaluate
from mimir.runtime.manifest import ManifestError

__all__ = [
    "DimExprError",
    "ManifestError",
    "cdiv",
    "evaluate",
    "load",
    "run_manifest",
    "validate_wgsl",
]


def load(*args: Any, **kwargs: Any) -> Any:
    """`mimir.runtime.host.load`: the compiled kernels of a folder, callable on arrays."""
    from mimir.runtime.host import load as load_kernels

    return load_kernels(*args, **kwargs)


def run_manifest(*args: Any, **kwargs: Any) -> dict[str, list]:
    """`mimir.runtime.wgpu_runner.run_manifest`, imported on first use."""
    from mimir.runtime.wgpu_runner import run_manifest as run

    return run(*args, **kwargs)


def validate_wgsl(code: str) -> None:
    """`mimir.runtime.wgpu_runner.validate_wgsl`, imported on first use."""
    from mimir.runtime.wgpu_runner import validate_wgsl as validate

    validate(code)
