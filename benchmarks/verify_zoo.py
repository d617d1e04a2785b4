"""`mimir verify` on every zoo kernel at its default sizes: wall time per kernel.

    python benchmarks/verify_zoo.py [--reference numpy|shim|both] [--timeout S] [WORD ...]

Runs `mimir verify zoo/K.py` in a fresh process per kernel (every backend the machine
runs, the three default bindings, the largest up to 131 per dim) and prints its wall
time and exit status. `--reference shim` times the shim's own element-by-element loops
instead of the NumPy reference (`both`: the two side by side); a run past `--timeout`
seconds is stopped and shown as `>S`. WORDs choose kernels by name. Nothing here is
asserted: the figures go to RECEIPTS.md.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _time(path: Path, reference: str, timeout: float) -> str:
    env = {**os.environ, "XDG_RUNTIME_DIR": os.environ.get("XDG_RUNTIME_DIR", "/tmp")}
    start = time.perf_counter()
    try:
        run = subprocess.run(
            [sys.executable, "-m", "mimir", "verify", str(path), "--reference", reference],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return f">{timeout:.0f}"
    seconds = time.perf_counter() - start
    return f"{seconds:.1f}" + ("" if run.returncode == 0 else f" (exit {run.returncode})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("words", nargs="*")
    parser.add_argument("--reference", choices=("numpy", "shim", "both"), default="numpy")
    parser.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args()
    kernels = [
        p
        for p in sorted((REPO / "zoo").glob("*.py"))
        if p.stem not in ("table", "__init__")
        and (not args.words or any(w in p.stem for w in args.words))
    ]
    references = ["numpy", "shim"] if args.reference == "both" else [args.reference]
    print(f"{'kernel':<22}" + "".join(f"{r + ' (s)':>16}" for r in references))
    for path in kernels:
        cells = [_time(path, r, args.timeout) for r in references]
        print(f"{path.stem:<22}" + "".join(f"{c:>16}" for c in cells), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
