"""A long differential fuzzing run: `python benchmarks/fuzz.py --minutes 30 --seed 1`.

`--only reduction_graph --execute-every 1` runs only graphs of reductions feeding each
other (rows, columns, whole tensors), each executed against the shim.

Generates kernels (every op of `mimir.ops.TABLE`, every dtype, index-level
patterns; half with a planted bug), checks each with `mimir check`, runs it under
the shim at many admissible sizes, compiles the clean ones for every backend,
validates every file and executes a sample against the shim (`tests/fuzzing`).
Prints a table of kernels per category and findings per class, and writes each
finding's kernel source (with the finding as a header comment) under `--dump`.
Exit status 1 when there is any finding, 0 otherwise. Deterministic for a seed,
up to where the time limit stops it.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))
os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")

from fuzzing.campaign import dump, run, table  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="time budget")
    parser.add_argument("--kernels", type=int, default=None, help="stop after this many kernels")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--examples", type=int, default=3, help="kernels per Hypothesis batch")
    parser.add_argument(
        "--execute-every", type=int, default=8, help="execute every k-th clean kernel (0: never)"
    )
    parser.add_argument("--no-backends", action="store_true", help="checker and shim only")
    parser.add_argument(
        "--only",
        default=None,
        help="one category of the rotation, e.g. `reduction_graph` (several reductions "
        "feeding each other) or an op name",
    )
    parser.add_argument(
        "--dump", type=Path, default=Path("fuzz-findings"), help="where findings go"
    )
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)

    def progress(outcome) -> None:
        if args.quiet:
            return
        for f in outcome.findings:
            print(
                f"  {outcome.case.label}: {f.klass}: {' '.join(f.detail.split())[:160]}", flush=True
            )

    with tempfile.TemporaryDirectory(prefix="mimir-fuzz-") as tmp:
        stats = run(
            args.seed,
            Path(tmp),
            kernels=args.kernels,
            seconds=args.minutes * 60,
            examples=args.examples,
            backends=not args.no_backends,
            execute_every=args.execute_every,
            progress=progress,
            only=args.only,
        )
    print(table(stats))
    written = dump(stats, args.dump)
    if written:
        print(f"\n{len(written)} kernels with findings written to {args.dump}/")
    return 1 if written else 0


if __name__ == "__main__":
    sys.exit(main())
