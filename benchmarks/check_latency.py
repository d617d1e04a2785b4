"""Cold check latency: `mimir check` next to mypy and pyright on the same files.

    python benchmarks/check_latency.py [FILES or DIRS...]

Defaults to the bundled examples. Each tool runs in a fresh process (cold: no
daemon, mypy without its incremental cache) `--repeat` times; the table shows the
median wall time and the ratio to mimir. A second table shows the time spent
inside Z3 for each kernel. pyright is used when `pyright` is on PATH or
installed under benchmarks/node_modules (`npm install --prefix benchmarks pyright`).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _files(args: list[str]) -> list[Path]:
    roots = [Path(a) for a in args] or [ROOT / "examples"]
    out: list[Path] = []
    for r in roots:
        out.extend(sorted(r.rglob("*.py")) if r.is_dir() else [r])
    return out


def _time(cmd: list[str], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _pyright() -> list[str] | None:
    local = ROOT / "benchmarks" / "node_modules" / ".bin" / "pyright"
    if local.exists():
        return [str(local)]
    found = shutil.which("pyright")
    return [found] if found else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    files = [str(f) for f in _files(args.paths)]
    print(f"{len(files)} files, median of {args.repeat} cold runs each\n")

    rows: list[tuple[str, float | None]] = []
    rows.append(
        (
            "mimir check",
            _time([sys.executable, "-m", "mimir", "check", "--no-cache", *files], args.repeat),
        )
    )
    with tempfile.TemporaryDirectory() as cache:
        mypy = [
            sys.executable,
            "-m",
            "mypy",
            "--no-incremental",
            "--cache-dir",
            cache,
            "--ignore-missing-imports",
            *files,
        ]
        has_mypy = (
            subprocess.run(
                [sys.executable, "-m", "mypy", "--version"], capture_output=True
            ).returncode
            == 0
        )
        rows.append(("mypy", _time(mypy, args.repeat) if has_mypy else None))
    pyright = _pyright()
    rows.append(("pyright", _time([*pyright, *files], args.repeat) if pyright else None))

    base = rows[0][1] or 1.0
    print(f"{'tool':<14}{'wall s':>10}{'vs mimir':>10}")
    for name, seconds in rows:
        if seconds is None:
            print(f"{name:<14}{'n/a':>10}{'(not installed)':>18}")
        else:
            print(f"{name:<14}{seconds:>10.3f}{seconds / base:>9.2f}x")

    from mimir.check import check_source

    print(f"\n{'kernel':<40}{'Z3 queries':>12}{'Z3 ms':>10}")
    total = 0.0
    for f in files:
        result = check_source(f, Path(f).read_text(encoding="utf-8"))
        for k in result.kernels:
            total += k.solve_seconds
            label = f"{Path(f).name}:{k.graph.name}"
            print(f"{label:<40}{k.queries:>12}{k.solve_seconds * 1000:>10.1f}")
    print(f"{'total':<40}{'':>12}{total * 1000:>10.1f}")


if __name__ == "__main__":
    main()
