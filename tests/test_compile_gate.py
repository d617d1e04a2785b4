"""`compile-gpu` as a CI gate: refusals in every format, configured backends, `--check`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from mimir.codegen import compile_source
from mimir.codegen.vendored import stale_files
from mimir.diagnostics.codes import REGISTRY
from mimir.diagnostics.render import json as json_render

REPO = Path(__file__).resolve().parent.parent
LINEAR = REPO / "tests" / "kernels" / "linear.py"
SARIF_SCHEMA = REPO / "tests" / "data" / "sarif-schema-2.1.0.json"


def _mimir(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MIMIR_CACHE_DIR": str(cwd / ".cache")}
    return subprocess.run(
        [sys.executable, "-m", "mimir", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


@pytest.fixture
def vendored(tmp_path: Path) -> Path:
    shutil.copy(LINEAR, tmp_path / "linear.py")
    run = _mimir("compile-gpu", "linear.py", "--backend", "wgsl", "-o", "out", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    return tmp_path


def test_check_passes_on_a_fresh_folder(vendored: Path) -> None:
    run = _mimir(
        "compile-gpu", "linear.py", "--backend", "wgsl", "-o", "out", "--check", cwd=vendored
    )
    assert run.returncode == 0
    assert run.stdout.strip() == "out is up to date (6 files)"


def test_check_fails_when_the_source_changed(vendored: Path) -> None:
    source = vendored / "linear.py"
    source.write_text(source.read_text().replace(".relu()", ".gelu()"))
    before = {p: p.read_bytes() for p in (vendored / "out").iterdir()}
    run = _mimir(
        "compile-gpu", "linear.py", "--backend", "wgsl", "-o", "out", "--check", cwd=vendored
    )
    assert run.returncode == 1
    assert "error[GPU072]: `out/linear_relu_0_matmul.wgsl` is stale: it differs" in run.stdout
    assert "regenerate it with `mimir compile-gpu linear.py --backend wgsl -o out`" in run.stdout
    assert {p: p.read_bytes() for p in (vendored / "out").iterdir()} == before  # wrote nothing


def test_check_reports_missing_and_leftover_files(vendored: Path) -> None:
    out = vendored / "out"
    (out / "matmul_square.manifest.json").unlink()
    (out / "linear_relu_9_old.wgsl").write_text("// an older launch\n")
    (out / "README.txt").write_text("not Mimir's\n")
    run = _mimir(
        "compile-gpu",
        "linear.py",
        "--backend",
        "wgsl",
        "-o",
        "out",
        "--check",
        "--format",
        "concise",
        cwd=vendored,
    )
    assert run.returncode == 1
    assert "matmul_square.manifest.json` is stale: it is missing" in run.stdout
    assert "linear_relu_9_old.wgsl` is stale: its source no longer produces it" in run.stdout
    assert "README.txt" not in run.stdout


def test_check_needs_an_output_folder(tmp_path: Path) -> None:
    shutil.copy(LINEAR, tmp_path / "linear.py")
    run = _mimir("compile-gpu", "linear.py", "--check", cwd=tmp_path)
    assert run.returncode == 2 and "-o DIR" in run.stderr


def test_refusals_in_sarif_validate_and_exit_1(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text(REGISTRY["GPU070"].bad_source())
    run = _mimir("compile-gpu", "bad.py", "--backend", "wgsl", "--format", "sarif", cwd=tmp_path)
    assert run.returncode == 1
    doc = json.loads(run.stdout)
    jsonschema.Draft4Validator(json.loads(SARIF_SCHEMA.read_text())).validate(doc)
    assert [r["ruleId"] for r in doc["runs"][0]["results"]] == ["GPU070"]


def test_refusals_in_json_and_github(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text(REGISTRY["GPU070"].bad_source())
    run = _mimir("compile-gpu", "bad.py", "--backend", "wgsl", "--format", "json", cwd=tmp_path)
    assert run.returncode == 1
    doc = json.loads(run.stdout)
    jsonschema.Draft202012Validator(json_render.schema()).validate(doc)
    assert [d["code"] for d in doc["diagnostics"]] == ["GPU070"]
    run = _mimir("compile-gpu", "bad.py", "--backend", "wgsl", "--format", "github", cwd=tmp_path)
    assert run.returncode == 1 and run.stdout.startswith("::error file=bad.py,line=")
    assert "title=GPU070::" in run.stdout


def test_default_backends_come_from_the_configuration(tmp_path: Path) -> None:
    shutil.copy(LINEAR, tmp_path / "linear.py")
    (tmp_path / "mimir.toml").write_text('backends = ["wgsl"]\n')
    run = _mimir("compile-gpu", "linear.py", "-o", "out", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert sorted(p.suffix for p in (tmp_path / "out").iterdir()) == [".json"] * 3 + [".wgsl"] * 3
    run = _mimir("compile-gpu", "linear.py", "--backend", "msl", "-o", "out2", cwd=tmp_path)
    assert {p.suffix for p in (tmp_path / "out2").iterdir()} == {".json", ".metal"}


def test_stale_files_library_function(tmp_path: Path) -> None:
    result = compile_source(str(LINEAR), LINEAR.read_text(), ["wgsl"], function="linear_relu")
    assert result.ok
    found = stale_files(result, tmp_path / "none", {"linear_relu": None}, "regen")  # type: ignore[dict-item]
    assert {d.code for d in found} == {"GPU072"} and len(found) == len(result.files)


_MIXED = """
from mimir.array import Dim, Tensor, float32, gpu

N = Dim("N")


@gpu
def scale(x: Tensor[float32, N]) -> Tensor[float32, N]:
    return x * 2.0


@gpu
def bad_matmul(x: Tensor[float32, N, 784], w: Tensor[float32, 128, 10]) -> Tensor[float32, N, 10]:
    return x @ w


@gpu
def nine_inputs(
    a: Tensor[float32, 4], b: Tensor[float32, 4], c: Tensor[float32, 4],
    d: Tensor[float32, 4], e: Tensor[float32, 4], g: Tensor[float32, 4],
    h: Tensor[float32, 4], i: Tensor[float32, 4], j: Tensor[float32, 4],
) -> Tensor[float32, 4]:
    return a + b + c + d + e + g + h + i + j


@gpu
def shift(x: Tensor[float32, N]) -> Tensor[float32, N]:
    return x + 1.0
"""


def test_the_functions_that_compile_are_written_and_the_others_refused(tmp_path: Path) -> None:
    """One function with a check error and one a backend refuses (WGSL binds at most 8
    storage buffers) beside two good ones: the good ones' files for every backend, none of
    the refused ones' (not even for the backends that could emit them), exit 1."""
    (tmp_path / "mixed.py").write_text(_MIXED)
    run = _mimir("compile-gpu", "mixed.py", "--backend", "all", "-o", "out", cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    assert "error[GPU011]" in run.stdout and "error[GPU070]" in run.stdout
    written = sorted(
        p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*.*")
    )
    for backend in ("msl", "wgsl", "spirv", "ptx"):
        for name in ("scale", "shift"):
            assert f"{backend}/{name}.manifest.json" in written
    assert not [w for w in written if "bad_matmul" in w or "nine_inputs" in w]
    assert "refused `bad_matmul`, `nine_inputs`" in run.stdout

    # stdout: the clean functions' text, then the diagnostics; exit 1
    run = _mimir("compile-gpu", "mixed.py", "--backend", "wgsl", cwd=tmp_path)
    assert run.returncode == 1
    assert "// file: scale_0_" in run.stdout and "// file: nine_inputs" not in run.stdout
    # a machine format keeps stdout for the report alone
    run = _mimir(
        "compile-gpu", "mixed.py", "--backend", "wgsl", "--format", "json", "-o", "o2",
        cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 1
    assert {d["code"] for d in json.loads(run.stdout)["diagnostics"]} == {"GPU011", "GPU070"}
    assert "wrote 4 files to o2" in run.stderr


def test_compile_source_keeps_the_files_of_the_functions_it_did_not_refuse() -> None:
    result = compile_source("mixed.py", _MIXED, ["wgsl"])
    assert result.refused == ["bad_matmul", "nine_inputs"]
    assert {f.split(".")[0].split("_0_")[0] for f in result.files} == {"scale", "shift"}
    assert not result.ok
