"""How `mimir check` scales with the size of one file.

    python benchmarks/scale.py [--kernels 250 500 1000 2000] [--megabytes 1 5]

Two tables. The first checks one file holding N copies of a layer-norm kernel
(N = 250, 500, 1,000, 2,000) and prints the wall time, the time per kernel and
the peak memory: time per kernel stays flat when checking is linear in the
file. The second checks a large file of plain Python with no kernel (what a
generated module or a vendored table looks like) and prints time and peak
memory per MB of source; most of it is `ast.parse`. Each run is a fresh
`mimir check --no-cache` process; peak memory is its maximum resident set.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

HEADER = 'from mimir.array import Dim, Tensor, float32, gpu\n\nN = Dim("N")\nC = Dim("C", min=2)\n'
KERNEL = """

@gpu
def layernorm_{i}(
    x: Tensor[float32, N, C], gamma: Tensor[float32, C], beta: Tensor[float32, C]
) -> Tensor[float32, N, C]:
    mu = x.mean(axis=-1, keepdims=True)
    centered = x - mu
    var = (centered * centered).mean(axis=-1, keepdims=True)
    return centered * (var + 1e-5).rsqrt() * gamma + beta
"""
PLAIN = '''

def helper_{i}(values, scale=2.0):
    """A host-side function with no kernel in it."""
    total = 0.0
    for k, v in enumerate(values):
        total += (v * scale + k) / (1 + abs(v))
    return {{"index": {i}, "total": total, "name": "helper_{i}"}}
'''


def kernels_file(count: int) -> str:
    return HEADER + "".join(KERNEL.format(i=i) for i in range(count))


def plain_file(megabytes: float) -> str:
    parts = ["import math\n"]
    size = len(parts[0])
    i = 0
    while size < megabytes * 1_000_000:
        block = PLAIN.format(i=i)
        parts.append(block)
        size += len(block)
        i += 1
    return "".join(parts)


def run_check(path: Path) -> tuple[int, float, float]:
    """(exit code, wall seconds, peak resident MB) of one `mimir check --no-cache`."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1")
    cmd = [sys.executable, "-m", "mimir", "check", "--no-cache", "--format", "concise", str(path)]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, wall, usage.ru_maxrss / 1024  # ru_maxrss is in KiB on Linux


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--kernels", type=int, nargs="*", default=[250, 500, 1000, 2000])
    ap.add_argument("--megabytes", type=float, nargs="*", default=[1, 5])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="mimir-scale-") as tmp:
        print("kernels per file | file KB | exit | wall s | ms per kernel | peak MB")
        print("---:|---:|---:|---:|---:|---:")
        for count in args.kernels:
            path = Path(tmp) / f"k{count}.py"
            path.write_text(kernels_file(count), encoding="utf-8")
            code, wall, peak = run_check(path)
            kb = path.stat().st_size / 1000
            per = 1000 * wall / count
            print(f"{count} | {kb:.0f} | {code} | {wall:.2f} | {per:.2f} | {peak:.0f}")
        print()
        print("plain file MB | exit | wall s | s per MB | peak MB | MB memory per MB source")
        print("---:|---:|---:|---:|---:|---:")
        for mb in args.megabytes:
            path = Path(tmp) / f"plain{mb}.py"
            path.write_text(plain_file(mb), encoding="utf-8")
            size = path.stat().st_size / 1e6
            code, wall, peak = run_check(path)
            print(
                f"{size:.1f} | {code} | {wall:.2f} | {wall / size:.2f} | {peak:.0f} "
                f"| {peak / size:.0f}"
            )


if __name__ == "__main__":
    main()
