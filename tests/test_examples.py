"""CLI golden tests over `examples/` (CrossHair's examples test).

- `examples/ok/*.py` check clean (no diagnostics, exit 0), run under plain `python`, compile
  on every backend, and their MSL build (run as C++ on the CPU) computes what the shim does.
- `examples/bugs/*.py`: `mimir check examples/bugs/X.py`, run from the repo root, prints
  exactly `examples/bugs/X.expected` and exits 1; run under `python`, the same file raises
  `MimirError` with one of the codes the checker reported.

Regenerate the golden files after an intended change of output:

    MIMIR_UPDATE_GOLDEN=1 python -m pytest tests/test_examples.py

then review the diff of `examples/bugs/*.expected` before committing it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
OK = sorted((REPO / "examples" / "ok").glob("*.py"))
BUGS = sorted((REPO / "examples" / "bugs").glob("*.py"))
UPDATE = os.environ.get("MIMIR_UPDATE_GOLDEN") == "1"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "MIMIR_TRACEBACK")}
    env["NO_COLOR"] = "1"
    env["COLUMNS"] = "200"
    return env


def mimir(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mimir", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )


def python(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(path.relative_to(REPO))],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )


def _rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def test_there_are_examples() -> None:
    assert len(OK) >= 3 and len(BUGS) >= 5
    expected = sorted((REPO / "examples" / "bugs").glob("*.expected"))
    assert [p.stem for p in expected] == [p.stem for p in BUGS], "one .expected per bug file"


@pytest.mark.parametrize("path", OK, ids=[p.name for p in OK])
def test_ok_example_checks_clean(path: Path) -> None:
    result = mimir("check", "--format", "json", _rel(path))
    assert result.returncode == 0, result.stdout + result.stderr
    doc = json.loads(result.stdout)
    assert doc["diagnostics"] == []
    assert doc["summary"]["errors"] == 0 and doc["summary"]["files_checked"] == 1
    text = mimir("check", _rel(path))
    assert text.returncode == 0
    assert text.stdout == "Success: no issues found in 1 source file\n"


@pytest.mark.parametrize("path", OK, ids=[p.name for p in OK])
def test_ok_example_runs_under_python(path: Path) -> None:
    result = python(path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip(), "each example prints what it computed"


@pytest.mark.parametrize("path", OK, ids=[p.name for p in OK])
def test_ok_example_compiles_on_every_backend(path: Path) -> None:
    # An example in ok/ is a promise that the whole pipeline takes it: check and compile.
    from mimir.codegen import compile_file
    from mimir.codegen.backends import BACKENDS

    result = compile_file(path, list(BACKENDS))
    assert [f"{d.code} {d.message}" for d in result.diagnostics] == []
    kernels = [n for n in result.files if n.endswith(".manifest.json")]
    assert len(kernels) >= len(BACKENDS)


def _admissible(dim: dict, want: int) -> int:
    """The smallest size >= `want` (or below it, at `max`) that a manifest dim admits."""
    step = dim["multiple_of"] or 1
    value = -(-max(want, dim["min"]) // step) * step
    return value if dim["max"] is None or value <= dim["max"] else dim["max"] // step * step


@pytest.mark.parametrize("path", OK, ids=[p.name for p in OK])
def test_ok_example_compiled_matches_the_shim(path: Path, tmp_path: Path) -> None:
    # The MSL build runs as C++ on the CPU; what it computes must be what the shim computes.
    from harness import assert_close, random_inputs, require_tool, shim_reference
    from harness.msl_runner import run_msl_manifest

    from mimir.codegen import compile_file

    require_tool("clang++")
    result = compile_file(path, ["msl"])
    assert not result.diagnostics
    for relative, content in result.files.items():
        target = tmp_path / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")
    for file in sorted(tmp_path.glob("*.manifest.json")):
        manifest = json.loads(file.read_text())
        dims = {d["name"]: _admissible(d, 5) for d in manifest["dims"]}
        inputs = random_inputs(manifest, dims, seed=3)
        expected = shim_reference(path, manifest["function"], inputs, dims, {})
        actual = run_msl_manifest(manifest, tmp_path, inputs, dims, {})
        for name, values in expected.items():
            dtype = next(b["dtype"] for b in manifest["buffers"] if b["name"] == name)
            assert_close(actual[name], values, dtype, label=f"{file.name}: {name} with {dims}")


@pytest.mark.parametrize("path", BUGS, ids=[p.name for p in BUGS])
def test_bug_example_matches_golden_output(path: Path) -> None:
    result = mimir("check", _rel(path))
    golden = path.with_suffix(".expected")
    if UPDATE:
        golden.write_text(result.stdout)
    assert result.stderr == ""
    assert result.returncode == 1
    assert golden.exists(), f"run with MIMIR_UPDATE_GOLDEN=1 to create {golden.name}"
    assert result.stdout == golden.read_text()


@pytest.mark.parametrize("path", BUGS, ids=[p.name for p in BUGS])
def test_bug_example_fails_the_same_way_under_python(path: Path) -> None:
    codes = set(re.findall(r"error\[(GPU\d{3})\]", path.with_suffix(".expected").read_text()))
    assert codes
    result = python(path)
    assert result.returncode != 0
    raised = re.findall(r"^mimir\.array\.MimirError: \[(GPU\d{3})\]", result.stderr, re.M)
    assert raised and raised[0] in codes, result.stderr[-500:]
