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

from fuzzing.campaign import CATEGORIES, Outcome, Stats, dump, run, table
from fuzzing.kernels import INDEX_PATTERNS, TENSOR_OPS, Case, cases, index_cases, tensor_cases
from fuzzing.oracle import CLASSES, Finding, Judgement, judge

__all__ = [
    "CATEGORIES",
    "CLASSES",
    "Case",
    "Finding",
    "INDEX_PATTERNS",
    "Judgement",
    "Outcome",
    "Stats",
    "TENSOR_OPS",
    "cases",
    "dump",
    "index_cases",
    "judge",
    "run",
    "table",
    "tensor_cases",
]
