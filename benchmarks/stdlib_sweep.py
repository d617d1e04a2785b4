"""Robustness sweep: `mimir check` over this machine's CPython standard library.

    python benchmarks/stdlib_sweep.py [--root DIR] [--timeout 120] [--workers 2] [--limit N]

Two runs, each `mimir check --no-cache --format json` in fresh processes:

- file by file: one process per `.py` file (site-packages and __pycache__ left out),
  `--workers` at a time, each with a `--timeout` in seconds;
- as one tree: a single process over the whole folder.

It prints the number of files, the histogram of exit codes, the files refused as
unreadable (GPU001/GPU002) and whether Python compiles any of them (must be 0),
internal errors (a line
`internal error`, a traceback, an exit code other than 0, 1 and 2, or stdout that is not
the JSON report; must be 0), hangs (runs killed at the timeout; must be 0), the peak
resident memory of the largest process and the wall time, as a Markdown table; then
the files behind any internal error or hang. The exit status is 1 when either is not 0.
The standard library holds Latin-1 files with coding declarations, syntax-error test
data, deep expressions and huge tables: each must be one file's diagnostic, never a
crash of the run.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP = {"site-packages", "__pycache__"}


@dataclass
class Run:
    target: str
    code: int | None  # None: killed at the timeout
    wall: float
    peak_mb: float
    internal: str | None  # why the run counts as an internal error, or None
    files: int | None = None  # files the JSON report says were checked
    unreadable: list[str] | None = None  # "path:line: CODE message" of GPU001/GPU002


def stdlib_files(root: Path) -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP)
        out.extend(Path(dirpath) / f for f in sorted(filenames) if f.endswith(".py"))
    return out


def run_mimir(target: Path, timeout: float, cwd: Path) -> Run:
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1")
    env.pop("MIMIR_TRACEBACK", None)
    cmd = [sys.executable, "-m", "mimir", "check", "--no-cache", "--format", "json", str(target)]
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            cmd, cwd=cwd, env=env, stdout=out, stderr=err, start_new_session=True
        )
        deadline = start + timeout
        status = usage = None
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                _, status, usage = os.wait4(proc.pid, 0)
                status = None
                break
            time.sleep(0.02)
        proc.returncode = -1  # reaped above; keep Popen from waiting again
        wall = time.perf_counter() - start
        peak = usage.ru_maxrss / 1024 if usage else 0.0
        if status is None:
            return Run(str(target), None, wall, peak, None)
        code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        stderr = err.read().decode("utf-8", "replace")
    internal = None
    files = None
    if "internal error" in stdout + stderr or "Traceback" in stdout + stderr:
        internal = (stderr.strip() or stdout.strip()).splitlines()[-1][:300]
    elif code not in (0, 1, 2):
        internal = f"exit code {code}: {stderr.strip()[-300:]}"
    else:
        try:
            doc = json.loads(stdout)
            files = doc["summary"]["files_checked"]
            unreadable = [
                f"{d['span']['path']}:{d['span']['line']}: {d['code']} {d['message']}"
                for d in doc["diagnostics"]
                if d["code"] in ("GPU001", "GPU002")
            ]
        except (ValueError, KeyError, TypeError):
            internal = f"no JSON report (exit {code}): {stderr.strip()[-300:]}"
        else:
            return Run(str(target), code, wall, peak, None, files, unreadable)
    return Run(str(target), code, wall, peak, internal, files)


def _python_compiles(path: Path) -> bool:
    """Whether this Python compiles the file's bytes (PEP 263 and all)."""
    try:
        compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


def _row(label: str, runs: list[Run], wall: float) -> str:
    codes = Counter("hang" if r.code is None else str(r.code) for r in runs)
    histogram = ", ".join(f"{k}: {v}" for k, v in sorted(codes.items()))
    internal = sum(r.internal is not None for r in runs)
    hangs = sum(r.code is None for r in runs)
    files = sum(r.files or 0 for r in runs) if label == "one tree" else len(runs)
    peak = max((r.peak_mb for r in runs), default=0.0)
    return f"{label} | {files} | {histogram} | {internal} | {hangs} | {peak:.0f} | {wall:.0f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--root", type=Path, default=Path(sysconfig.get_paths()["stdlib"]))
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per file")
    ap.add_argument("--tree-timeout", type=float, default=3600.0, help="seconds for the tree")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--limit", type=int, default=None, help="only the first N files")
    ap.add_argument("--no-tree", action="store_true", help="skip the whole-tree run")
    args = ap.parse_args()

    files = stdlib_files(args.root)[: args.limit]
    print(f"Python {sys.version.split()[0]}, standard library at {args.root}", flush=True)
    with tempfile.TemporaryDirectory(prefix="mimir-sweep-") as tmp:
        cwd = Path(tmp)  # no mimir.toml, no cache folder in the way
        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=args.workers) as pool:
            per_file = list(pool.map(lambda p: run_mimir(p, args.timeout, cwd), files))
        file_wall = time.perf_counter() - start
        tree: list[Run] = []
        tree_wall = 0.0
        if not args.no_tree:
            start = time.perf_counter()
            tree = [run_mimir(args.root, args.tree_timeout, cwd)]
            tree_wall = time.perf_counter() - start

    print()
    print("run | files | exit codes | internal errors | hangs | peak MB | wall s")
    print("---|---:|---|---:|---:|---:|---:")
    print(_row("file by file", per_file, file_wall))
    if tree:
        print(_row("one tree", tree, tree_wall))
    slow = sorted(per_file, key=lambda r: r.wall, reverse=True)[:5]
    print()
    print("slowest files: " + ", ".join(f"{Path(r.target).name} {r.wall:.1f} s" for r in slow))
    unreadable = sorted({u for r in per_file for u in r.unreadable or []})
    wrongly = [u for u in unreadable if _python_compiles(Path(u.split(":")[0]))]
    print()
    print(f"files refused as unreadable (exit 2, GPU001/GPU002): {len(unreadable)}, of which")
    print(f"Python itself compiles {len(wrongly)} (must be 0)")
    for u in unreadable:
        print(f"  {'WRONG ' if u in wrongly else ''}{u}")
    bad = [r for r in per_file + tree if r.internal is not None or r.code is None]
    bad += [Run(u, 2, 0.0, 0.0, "refused, but Python compiles it") for u in wrongly]
    for r in bad:
        print(f"{'HANG' if r.code is None else 'INTERNAL'} {r.target}: {r.internal or ''}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
