"""Compile time: `compile_source(..., ["all"])` over the kernel snapshots' sources.

    python benchmarks/compile_time.py [--repeat 5] [--cold 3] [FILES or DIRS...]

Defaults to tests/kernels/*.py (the files whose kernels tests/kernels/out/ holds). The
first table times each file compiled for every backend inside one warm process, the
fastest of `--repeat` runs: wall time, and the process's CPU time, which other load on a
shared machine changes far less; the totals are the sums of those minima. The second
line times `mimir compile-gpu --backend all` over every file, one cold process per file,
as a user runs it (median of `--cold` sweeps).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _files(args: list[str]) -> list[Path]:
    roots = [Path(a) for a in args] or [ROOT / "tests" / "kernels"]
    out: list[Path] = []
    for r in roots:
        out.extend(sorted(r.glob("*.py")) if r.is_dir() else [r])
    return out


def _warm(files: list[Path], repeat: int) -> list[tuple[str, float, float]]:
    from mimir.codegen import compile_source

    rows = []
    for path in files:
        text = path.read_text()
        wall, cpu = [], []
        for _ in range(repeat):
            start, start_cpu = time.perf_counter(), time.process_time()
            compile_source(str(path), text, ["all"])
            wall.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
        rows.append((path.name, min(wall), min(cpu)))
    return rows


def _cold(files: list[Path], sweeps: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    totals = []
    with tempfile.TemporaryDirectory() as out:
        for _ in range(sweeps):
            start = time.perf_counter()
            for path in files:
                subprocess.run(
                    [sys.executable, "-m", "mimir", "compile-gpu", str(path), "--backend",
                     "all", "-o", out],
                    cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                )  # fmt: skip
            totals.append(time.perf_counter() - start)
    return statistics.median(totals)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cold", type=int, default=3)
    args = parser.parse_args()
    files = _files(args.paths)
    rows = _warm(files, args.repeat)
    print(f"{len(files)} files, every backend, fastest of {args.repeat} warm runs each\n")
    print(f"{'file':32} {'wall ms':>9} {'cpu ms':>9}")
    for name, wall, cpu in rows:
        print(f"{name:32} {wall * 1000:9.1f} {cpu * 1000:9.1f}")
    total_wall, total_cpu = sum(r[1] for r in rows), sum(r[2] for r in rows)
    print(f"{'total':32} {total_wall * 1000:9.1f} {total_cpu * 1000:9.1f}")
    if args.cold:
        cold = _cold(files, args.cold)
        print(f"\ncold `mimir compile-gpu --backend all`, one process per file: {cold:.2f} s")


if __name__ == "__main__":
    main()
