"""The result cache: `mimir check` over a tree, cold and then warm.

    python benchmarks/cache_speedup.py [--files N] [--tree DIR] [--jobs J] [--repeat R]

Without `--tree`, writes N generated kernel files (a few kernels each, every
tenth file with a bug) into a temporary directory. Each repeat runs
`mimir check` in a fresh process twice against an empty cache directory: the
first run checks every file and fills the cache, the second finds the tree
unchanged. The table shows the median wall time of each and their ratio, and
the worker count. Both runs must print the same report; the script exits 1 if
they do not.
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

KERNELS = '''\
"""Generated benchmark file {i}."""

from mimir.array import Dim, Tensor, float32, gpu

N = Dim("N", min=1)
T = Dim("T", min=1, max=4096, multiple_of=4)


@gpu
def dense_{i}(x: Tensor[float32, N, {a}], w: Tensor[float32, {a}, {b}],
              bias: Tensor[float32, {b}]) -> Tensor[float32, N, {b}]:
    return (x @ w + bias).relu()


@gpu
def attention_{i}(q: Tensor[float32, T, {b}], k: Tensor[float32, T, {b}],
                  v: Tensor[float32, T, {b}]) -> Tensor[float32, T, {b}]:
    scores = (q @ k.T) * {scale}
    return scores.softmax(axis=-1) @ v


@gpu
def norm_{i}(x: Tensor[float32, N, {b}]) -> Tensor[float32, N, {b}]:
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) * (x - mean)).mean(axis=1, keepdims=True)
    return (x - mean) * (var + 1e-5).rsqrt()


@gpu
def window_{i}(x: Tensor[float32, T]) -> Tensor[float32, T // 4]:
    return x.reshape(T // 4, 4).sum(axis=1)
'''

BUG = """

@gpu
def broken_{i}(x: Tensor[float32, N, {a}], w: Tensor[float32, {b}, {a}]) -> Tensor[float32, N, {a}]:
    return x @ w
"""


def generate(root: Path, files: int) -> None:
    for i in range(files):
        a, b = 16 * (1 + i % 7), 8 * (1 + i % 5)
        text = KERNELS.format(i=i, a=a, b=b, scale=round(1 / (b**0.5), 4))
        if i % 10 == 9:
            text += BUG.format(i=i, a=a, b=b + 1)
        sub = root / f"pkg{i // 50}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"kernels_{i}.py").write_text(text)


def run(tree: Path, cache: Path, jobs: int | None) -> tuple[float, str, int]:
    cmd = [sys.executable, "-m", "mimir", "check", "--format", "concise", str(tree)]
    if jobs:
        cmd += ["--jobs", str(jobs)]
    env = dict(os.environ, MIMIR_CACHE_DIR=str(cache))
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tree)
    elapsed = time.perf_counter() - start
    if out.returncode == 2:
        sys.exit(f"mimir check failed:\n{out.stderr}")
    return elapsed, out.stdout, out.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=200, help="files to generate")
    parser.add_argument("--tree", type=Path, help="check this tree instead of generating one")
    parser.add_argument("--jobs", type=int, default=None, help="worker processes")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="mimir-cache-bench-") as tmp:
        tmpdir = Path(tmp)
        tree = args.tree.resolve() if args.tree else tmpdir / "tree"
        if not args.tree:
            generate(tree, args.files)
        count = sum(1 for _ in tree.rglob("*.py"))
        cold, warm = [], []
        for r in range(args.repeat):
            cache = tmpdir / f"cache{r}"
            t1, out1, rc1 = run(tree, cache, args.jobs)
            t2, out2, rc2 = run(tree, cache, args.jobs)
            if (out1, rc1) != (out2, rc2):
                print("the warm run's report differs from the cold run's", file=sys.stderr)
                return 1
            cold.append(t1)
            warm.append(t2)

    first, second = statistics.median(cold), statistics.median(warm)
    jobs = args.jobs or os.cpu_count()
    summary = out1.strip().splitlines()[-1] if out1.strip() else ""
    print(f"mimir check over {count} files, {jobs} workers, median of {args.repeat}")
    print(f"report: {summary}")
    print()
    print(f"| {'files':>5} | {'first run s':>11} | {'second run s':>12} | {'ratio':>6} |")
    print(f"|{'-' * 7}|{'-' * 13}|{'-' * 14}|{'-' * 8}|")
    print(f"| {count:>5} | {first:>11.2f} | {second:>12.2f} | {first / second:>5.1f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
