"""A differential fuzzer for Mimir: generated kernels; the checker against the shim and backends.

- `fuzzing.kernels`: Hypothesis strategies for kernel files (every op of
  `mimir.ops.TABLE`, every dtype, index-level loops, conditions and gathers; half
  of them with a planted bug);
- `fuzzing.oracle`: `mimir check` against the shim at many admissible sizes, each
  disagreement classified (false proof, false alarm, ...);
- `fuzzing.backends`: clean kernels compiled for every backend, validated by
  external tools, executed against the shim;
- `fuzzing.campaign`: deterministic runs for a seed, the table, the dumps.

Used by `tests/test_fuzz.py` (a fixed-seed run in the suite) and
`benchmarks/fuzz.py` (a long run). Imports `harness` (tests/harness), so `tests/`
must be on `sys.path`.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> the submodule that defines it; imported on first use, so that `fuzzing.backends`
# (the validators and runners, which `python -m zoo.table` uses) needs no Hypothesis
_EXPORTS = {
    "CATEGORIES": "campaign", "Outcome": "campaign", "Stats": "campaign", "dump": "campaign",
    "run": "campaign", "table": "campaign",
    "INDEX_PATTERNS": "kernels", "TENSOR_OPS": "kernels", "Case": "kernels", "cases": "kernels",
    "index_cases": "kernels", "tensor_cases": "kernels",
    "CLASSES": "oracle", "Finding": "oracle", "Judgement": "oracle", "judge": "oracle",
}  # fmt: skip

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'fuzzing' has no attribute {name!r}")
    return getattr(importlib.import_module(f"fuzzing.{_EXPORTS[name]}"), name)
