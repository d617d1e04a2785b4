"""Property-based fuzzing of every host's manifest reader, a fixed-seed run of each.

- Python (`mimir.runtime.contract`): Hypothesis, derandomized (tests/manifest_fuzzing.py);
- JavaScript (js/src/contract.js): fast-check from a fixed seed (js/test/fuzz.mjs);
- C (examples/hosts/common/manifest.c, with cJSON): libFuzzer with AddressSanitizer and UBSan
  from a fixed seed over the committed manifests (tests/harness/c/manifest_fuzz.c).

Each property: any input is accepted or refused with a contract code, never anything else,
and what is accepted stays within the contract's bounds. `benchmarks/fuzz_manifests.py`
runs the same fuzzers for as long as it is told; a finding becomes a fixture in
tests/data/hostile/, which tests/test_hostile_manifests.py runs through every host.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from harness import require
from hypothesis import HealthCheck, given, settings
from jshost import require_node_package
from manifest_fuzzing import check_expression, check_reader, expressions, manifest_inputs

ROOT = Path(__file__).resolve().parent
REPO = ROOT.parent
FIXED = settings(
    derandomize=True,
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)


@FIXED
@given(manifest_inputs)
def test_python_reader_accepts_or_refuses_with_a_code(data: bytes) -> None:
    check_reader(data)


@FIXED
@given(expressions)
def test_python_dim_expressions_are_exact_or_refused(tree) -> None:
    check_expression(tree)


def test_js_reader_under_fast_check() -> None:
    node = require_node_package("fast-check")
    run = subprocess.run(
        [node, "test/fuzz.mjs", "--seed", "1", "--runs", "400"],
        cwd=REPO / "js", capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert "runs 1200" in run.stdout, run.stdout  # three properties, 400 runs each


def libfuzzer_clang() -> str:
    """A clang with libFuzzer's runtime (Debian: clang-16 and libclang-rt-16-dev)."""
    for name in ("clang-19", "clang-18", "clang-17", "clang-16", "clang"):
        path = shutil.which(name)
        if not path:
            continue
        probe = subprocess.run(
            [path, "-print-file-name=libclang_rt.fuzzer-x86_64.a"], capture_output=True, text=True
        )
        if Path(probe.stdout.strip()).is_file():
            return path
    require(False, "no clang with libFuzzer (apt-get install clang-16 libclang-rt-16-dev)")
    raise AssertionError("unreachable")


def build_fuzzer(out: Path) -> Path:
    common = REPO / "examples" / "hosts" / "common"
    exe = out / "manifest_fuzz"
    subprocess.run(
        [libfuzzer_clang(), "-g", "-O1", "-std=c11", "-Wall", "-Wextra", "-Werror",
         "-D_POSIX_C_SOURCE=200809L", "-fsanitize=fuzzer,address,undefined",
         "-fno-sanitize-recover=all", f"-I{common}", "-o", str(exe),
         str(ROOT / "harness" / "c" / "manifest_fuzz.c"), str(common / "manifest.c"),
         str(common / "json_check.c"), str(common / "cjson" / "cJSON.c"), "-lm"],
        check=True, timeout=300,
    )  # fmt: skip
    return exe


def seed_corpus(out: Path) -> Path:
    """The committed manifests (every backend) and the found fixtures, as libFuzzer's corpus."""
    seeds = out / "seeds"
    seeds.mkdir(parents=True, exist_ok=True)
    paths = sorted((ROOT / "kernels" / "out").glob("*/*/*.manifest.json"))
    paths += sorted((ROOT / "data" / "hostile").glob("*.json"))
    for i, path in enumerate(paths):
        (seeds / f"{i:04d}-{path.name}").write_bytes(path.read_bytes())
    return seeds


def test_c_reader_under_libfuzzer(tmp_path: Path) -> None:
    exe = build_fuzzer(tmp_path)
    seeds = seed_corpus(tmp_path)
    run = subprocess.run(
        [str(exe), "-seed=1", "-runs=30000", "-max_len=65536",
         f"-dict={ROOT / 'harness' / 'c' / 'manifest.dict'}", f"-artifact_prefix={tmp_path}/",
         str(seeds)],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "ASAN_OPTIONS": "detect_leaks=1"},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-6000:]
    assert "Done 30000 runs" in run.stderr, run.stderr[-2000:]
    assert not list(tmp_path.glob("crash-*")) and not list(tmp_path.glob("leak-*"))
