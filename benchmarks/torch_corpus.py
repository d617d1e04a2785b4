"""The PyTorch corpus report: bugs found, false alarms, unknowns, time per file, and what
mypy and pyright report on the same programs.

    python benchmarks/torch_corpus.py [--tools]
    python benchmarks/torch_corpus.py --real SOURCES [--run] [--tools] [--pytea PYTEA]
    python benchmarks/torch_corpus.py --real SOURCES --sweep

For every `tests/torch_programs/NAME_bug.py` a bug counts as found when `mimir check`
reports the marked code at the marked line (the line where running it with PyTorch
crashes, which tests/test_torch_programs.py verifies). A false alarm is any other
diagnostic, on a buggy or a correct (`NAME_ok.py`) program. Unknowns are calls that were
given a tensor of known shape but whose result the shape table does not know (shapes the
checker gave up on). With `--tools`, mypy and pyright run on the same files (pyright from
PATH or `npm install --prefix benchmarks pyright`): a bug counts as seen by a tool when it
reports anything on the marked line, and every diagnostic on a correct program is counted.

With `--real SOURCES`, the corpus is files of public projects with planted bugs, read
from checkouts at pinned commits (`benchmarks/torch_corpus_real.py`).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "torch_programs"
_MARKER = re.compile(r"#\s*E:\s*(GPU\d{3})")


def _marker(path: Path) -> tuple[int, str] | None:
    for n, line in enumerate(path.read_text().splitlines(), 1):
        m = _MARKER.search(line)
        if m:
            return n, m.group(1)
    return None


def _mimir(path: Path) -> tuple[set[tuple[int, str]], int, float]:
    from mimir.check import check_source
    from mimir.host import check_host
    from mimir.parse.module import read_module
    from mimir.parse.spans import SourceFile

    text = path.read_text()
    start = time.perf_counter()
    found = {(d.span.line, d.code) for d in check_source(str(path), text).diagnostics}
    seconds = time.perf_counter() - start
    unknowns = check_host(read_module(SourceFile(str(path), text), ast.parse(text))).unknown_calls
    return found, unknowns, seconds


def _mypy(files: list[Path]) -> dict[str, set[int]] | None:
    if subprocess.run([sys.executable, "-m", "mypy", "--version"], capture_output=True).returncode:
        return None
    with tempfile.TemporaryDirectory() as cache:
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "mypy",
                "--cache-dir",
                cache,
                "--ignore-missing-imports",
                "--no-error-summary",
                *map(str, files),
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
        ).stdout
    lines: dict[str, set[int]] = {}
    for row in out.splitlines():
        m = re.match(r"(.+?\.py):(\d+): error", row)
        if m:
            lines.setdefault(Path(m.group(1)).name, set()).add(int(m.group(2)))
    return lines


def _pyright(files: list[Path]) -> dict[str, set[int]] | None:
    local = ROOT / "benchmarks" / "node_modules" / ".bin" / "pyright"
    exe = str(local) if local.exists() else shutil.which("pyright")
    if exe is None:
        return None
    out = subprocess.run(
        [exe, "--outputjson", "--pythonpath", sys.executable, *map(str, files)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    ).stdout
    lines: dict[str, set[int]] = {}
    for diag in json.loads(out or "{}").get("generalDiagnostics", []):
        if diag.get("severity") == "error":
            line = diag["range"]["start"]["line"] + 1
            lines.setdefault(Path(diag["file"]).name, set()).add(line)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", action="store_true", help="also run mypy and pyright")
    parser.add_argument(
        "--real",
        type=Path,
        metavar="SOURCES",
        help="the corpus of public projects instead (see benchmarks/torch_corpus_real.py)",
    )
    parser.add_argument("--run", action="store_true", help="with --real: run every copy")
    parser.add_argument(
        "--sweep", action="store_true", help="with --real: check every file of the projects"
    )
    parser.add_argument("--pytea", type=Path, help="with --real: a built ropas/pytea folder")
    parser.add_argument(
        "--deps", action="append", default=[], help="with --run: a folder for the runner's path"
    )
    args = parser.parse_args()
    if args.real is not None:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from torch_corpus_real import main as real
        from torch_corpus_real import sweep

        if args.sweep:
            raise SystemExit(sweep(args.real))
        raise SystemExit(real(args.real, args.run, args.tools, args.pytea, args.deps))
    files = sorted(CORPUS.glob("*.py"))
    bugs = [f for f in files if f.name.endswith("_bug.py")]
    found = false_alarms = unknowns = 0
    times: list[float] = []
    print(f"{'program':<34}{'marker':>14}{'mimir':>16}{'unknown':>9}{'ms':>8}")
    for f in files:
        want = _marker(f)
        got, unknown, seconds = _mimir(f)
        times.append(seconds)
        unknowns += unknown
        hit = want is not None and want in got
        found += hit
        extra = got - ({want} if want else set())
        false_alarms += len(extra)
        shown = "found" if hit else ("MISSED" if want else ("clean" if not got else "ALARM"))
        if extra and want:
            shown += f" +{len(extra)} alarm"
        mark = f"{want[1]}@{want[0]}" if want else "-"
        print(f"{f.name:<34}{mark:>14}{shown:>16}{unknown:>9}{seconds * 1000:>8.0f}")
    print(
        f"\nmimir: {found}/{len(bugs)} bugs found, {false_alarms} false alarms, "
        f"{unknowns} unknown calls, {len(files)} files, "
        f"{sum(times) / len(times) * 1000:.0f} ms per file (mean), "
        f"{max(times) * 1000:.0f} ms max"
    )
    if not args.tools:
        return
    for name, run in (("mypy", _mypy), ("pyright", _pyright)):
        start = time.perf_counter()
        lines = run(files)
        seconds = time.perf_counter() - start
        if lines is None:
            print(f"{name}: not installed")
            continue
        seen = sum(1 for f in bugs if (m := _marker(f)) and m[0] in lines.get(f.name, set()))
        on_ok = sum(len(lines.get(f.name, set())) for f in files if f.name.endswith("_ok.py"))
        total = sum(len(v) for v in lines.values())
        print(
            f"{name}: {seen}/{len(bugs)} bugs seen at their line, {total} error lines in all, "
            f"{on_ok} on correct programs, {seconds:.1f} s for the corpus"
        )


if __name__ == "__main__":
    main()
