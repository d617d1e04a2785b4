"""Long fuzzing runs of the hosts' manifest readers: `python benchmarks/fuzz_manifests.py
--reader c --minutes 30 --seed 1` (or `python`, `js`, `all`).

The same properties as tests/test_manifest_fuzz.py runs for a fixed number of inputs, run here
until the time is up:

- `python`: Hypothesis over tests/manifest_fuzzing.py (the reader on edited, mutated and random
  manifests; dim expressions against an exact evaluation), batch after batch from `--seed`;
- `js`: fast-check over js/test/fuzz.mjs (the same three properties for js/src);
- `c`: libFuzzer with AddressSanitizer and UBSan over tests/harness/c/manifest_fuzz.c, from the
  committed manifests, with the manifest dictionary; its corpus is kept in `--corpus` when given.

Prints one table row per reader (minutes, executions, findings) and exits 1 when there is a
finding; findings are written under `--findings` (the C reader's crashing inputs, the others'
counterexamples), ready to become fixtures in tests/data/hostile/.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))


def fuzz_python(seconds: float, seed: int, findings: Path) -> tuple[int, int]:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as with_seed
    from manifest_fuzzing import check_expression, check_reader, expressions, manifest_inputs

    count = [0]
    found = 0

    def counted(check):
        def run(value):
            count[0] += 1
            check(value)

        return run

    batch = settings(
        max_examples=200,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    start = time.monotonic()
    round_ = 0
    while time.monotonic() - start < seconds:
        for name, strategy, check in (
            ("reader", manifest_inputs, check_reader),
            ("expressions", expressions, check_expression),
        ):
            test = with_seed(seed * 100_003 + round_)(batch(given(strategy)(counted(check))))
            try:
                test()
            except Exception as err:  # noqa: BLE001 - a finding: keep its report
                found += 1
                findings.mkdir(parents=True, exist_ok=True)
                (findings / f"python-{name}-{seed}-{round_}.txt").write_text(repr(err))
                print(f"finding in {name}: {err!r}"[:2000], flush=True)
        round_ += 1
    return count[0], found


def fuzz_js(seconds: float, seed: int, findings: Path) -> tuple[int, int]:
    run = subprocess.run(
        ["node", "test/fuzz.mjs", "--seed", str(seed), "--seconds", str(seconds), "--runs", "2000"],
        cwd=REPO / "js",
        capture_output=True,
        text=True,
    )
    runs = re.search(r"^runs (\d+)", run.stdout, re.M)
    if run.returncode != 0:
        findings.mkdir(parents=True, exist_ok=True)
        (findings / f"js-{seed}.txt").write_text(run.stdout + run.stderr)
        print(run.stdout[-3000:] + run.stderr[-3000:], flush=True)
    return (int(runs.group(1)) if runs else 0), int(run.returncode != 0)


def fuzz_c(seconds: float, seed: int, findings: Path, corpus: Path | None) -> tuple[int, int]:
    from test_manifest_fuzz import build_fuzzer, seed_corpus

    with tempfile.TemporaryDirectory(prefix="mimir-manifest-fuzz-") as tmp:
        work = Path(tmp)
        exe = build_fuzzer(work)
        seeds = seed_corpus(work)
        live = corpus or work / "corpus"
        live.mkdir(parents=True, exist_ok=True)
        findings.mkdir(parents=True, exist_ok=True)
        run = subprocess.run(
            [str(exe), f"-seed={seed}", f"-max_total_time={int(seconds)}", "-max_len=65536",
             "-print_final_stats=1", f"-dict={REPO / 'tests' / 'harness' / 'c' / 'manifest.dict'}",
             f"-artifact_prefix={findings}/c-", str(live), str(seeds)],
            capture_output=True, text=True, env={**os.environ, "ASAN_OPTIONS": "detect_leaks=1"},
        )  # fmt: skip
    executed = re.search(r"stat::number_of_executed_units: (\d+)", run.stderr)
    crashes = list(findings.glob("c-*"))
    if run.returncode != 0:
        print(run.stderr[-4000:], flush=True)
    return (int(executed.group(1)) if executed else 0), len(crashes) + int(
        run.returncode != 0 and not crashes
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reader", choices=["python", "js", "c", "all"], default="all")
    parser.add_argument("--minutes", type=float, default=30.0, help="time budget per reader")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--findings", type=Path, default=Path("manifest-fuzz-findings"))
    parser.add_argument("--corpus", type=Path, default=None, help="keep libFuzzer's corpus here")
    args = parser.parse_args(argv)
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    readers = ["python", "js", "c"] if args.reader == "all" else [args.reader]
    rows = []
    for reader in readers:
        start = time.monotonic()
        seconds = args.minutes * 60
        if reader == "python":
            executions, found = fuzz_python(seconds, args.seed, args.findings)
        elif reader == "js":
            executions, found = fuzz_js(seconds, args.seed, args.findings)
        else:
            executions, found = fuzz_c(seconds, args.seed, args.findings, args.corpus)
        rows.append((reader, (time.monotonic() - start) / 60, executions, found))
    print(f"{'reader':<8} {'minutes':>8} {'executions':>12} {'findings':>9}")
    for reader, minutes, executions, found in rows:
        print(f"{reader:<8} {minutes:>8.1f} {executions:>12} {found:>9}")
    return 1 if any(row[3] for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
