"""`mimir verify FILE`: compile for every backend here, run, compare with the shim, one table."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from harness import require_tool
from typer.testing import CliRunner

import mimir.cli
from mimir.runtime import wgpu_runner

KERNEL = (
    "from mimir.array import Dim, Tensor, float32, gpu\n\n"
    'N = Dim("N")\n\n\n'
    "@gpu\n"
    "def scaled_sum(a: Tensor[float32, N, 3], b: Tensor[float32, 3]) -> Tensor[float32, N]:\n"
    "    return (a * b).sum(axis=1) * 2.0\n"
)


@pytest.fixture
def kernel_file(tmp_path: Path) -> Path:
    path = tmp_path / "k.py"
    path.write_text(KERNEL)
    return path


def test_verify_passes_and_prints_errors_per_output(kernel_file: Path) -> None:
    require_tool("wgpu")
    proc = subprocess.run(
        [sys.executable, "-m", "mimir", "verify", str(kernel_file)],
        capture_output=True,
        text=True,
        env={**os.environ, "XDG_RUNTIME_DIR": os.environ.get("XDG_RUNTIME_DIR", "/tmp")},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("adapter: ")
    header = next(i for i, line in enumerate(lines) if line.startswith("function "))
    assert lines[header].split() == [
        "function", "backend", "dims", "output", "values", "max", "abs", "max", "rel", "result"
    ]  # fmt: skip
    rows = [line.split() for line in lines[header + 1 : -1]]
    assert [(r[1], r[2]) for r in rows] == [
        ("wgsl", "[N=1]"), ("wgsl", "[N=7]"), ("wgsl", "[N=131]"),
        ("spirv", "[N=1]"), ("spirv", "[N=7]"), ("spirv", "[N=131]"),
    ]  # fmt: skip
    assert all(r[0] == "scaled_sum" and r[-1] == "ok" for r in rows)
    # ptx runs where a CUDA device is present, and says why not elsewhere
    assert any(line.startswith("ptx: not run (") for line in lines) or "ptx" in proc.stdout
    assert lines[-1] == "verified 1 function: all outputs match"


def test_verify_runs_only_the_backends_asked_for_and_shows_progress(
    kernel_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_tool("wgpu")
    clock = itertools.count(0, 5)  # each reading is five seconds on
    monkeypatch.setattr("time.monotonic", lambda: next(clock))
    result = CliRunner().invoke(
        mimir.cli.app, ["verify", str(kernel_file), "--backend", "spirv", "--dim", "N=9"]
    )
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.stdout.splitlines() if line.startswith("scaled_sum")]
    assert [r[1] for r in rows] == ["spirv"]  # N fixed: one binding
    # one line per function on stderr as it finishes, with its time (not a terminal: no bar)
    assert result.stderr == f"{kernel_file}: scaled_sum: ok (5.0 s)\n"
    bad = CliRunner().invoke(mimir.cli.app, ["verify", str(kernel_file), "--backend", "metal"])
    assert bad.exit_code == 2


def test_verify_reads_a_coding_declaration(tmp_path: Path) -> None:
    # Latin-1 with a PEP 263 line is valid Python: verify reads it as Python does.
    require_tool("wgpu")
    path = tmp_path / "latin1.py"
    path.write_bytes(("# -*- coding: latin-1 -*-\n# café\n" + KERNEL).encode("latin-1"))
    result = CliRunner().invoke(mimir.cli.app, ["verify", str(path), "--dim", "N=5"])
    assert result.exit_code == 0, result.output
    assert "verified 1 function: all outputs match" in result.output


def test_verify_fixed_dim(kernel_file: Path) -> None:
    require_tool("wgpu")
    result = CliRunner().invoke(mimir.cli.app, ["verify", str(kernel_file), "--dim", "N=1000"])
    assert result.exit_code == 0, result.output
    assert "[N=1000]" in result.output and "[N=1]" not in result.output


def test_verify_exits_1_on_a_mismatch(kernel_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_tool("wgpu")
    real = wgpu_runner.run_manifest

    def off_by_one(*args: Any, **kwargs: Any) -> dict[str, list]:
        out = real(*args, **kwargs)
        return {name: [v + 1.0 for v in values] for name, values in out.items()}

    monkeypatch.setattr(wgpu_runner, "run_manifest", off_by_one)
    result = CliRunner().invoke(mimir.cli.app, ["verify", str(kernel_file)])
    assert result.exit_code == 1, result.output
    assert "MISMATCH in 7 of 7" in result.output  # on wgsl and on spirv
    assert "1 function failed verification" in result.output


def test_verify_reports_a_compile_refusal(tmp_path: Path) -> None:
    require_tool("wgpu")
    path = tmp_path / "bad.py"
    path.write_text(
        "from mimir.array import Tensor, float32, gpu\n\n\n"
        "@gpu\n"
        "def f(a: Tensor[float32, 4, 3], b: Tensor[float32, 4]) -> Tensor[float32, 4, 3]:\n"
        "    return a + b\n"
    )
    result = CliRunner().invoke(mimir.cli.app, ["verify", str(path)])
    assert result.exit_code == 1, result.output
    assert "error[" in result.output


def test_verify_usage_errors(kernel_file: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    bad_dim = runner.invoke(mimir.cli.app, ["verify", str(kernel_file), "--dim", "N"])
    assert bad_dim.exit_code == 2
    missing = runner.invoke(mimir.cli.app, ["verify", str(tmp_path / "nope.py")])
    assert missing.exit_code == 2


def test_verify_without_wgpu_says_how_to_install(
    kernel_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wgpu_runner, "_STATE", {})
    monkeypatch.setitem(sys.modules, "wgpu", None)
    result = CliRunner().invoke(mimir.cli.app, ["verify", str(kernel_file)])
    assert result.exit_code == 2
    assert "pip install 'mimir-kernels[gpu]'" in result.output


BROKEN = KERNEL + (
    "\n\n@gpu\n"
    "def bad_matmul(a: Tensor[float32, N, 3], b: Tensor[float32, 4, 2]) -> Tensor[float32, N, 2]:\n"
    "    return a @ b\n"
)


def test_verify_takes_several_files_and_reports_check_failures_apart(tmp_path: Path) -> None:
    """Two files, one with a function that fails the check: that function is reported with
    its diagnostic and not run; the others run; the summary tells the two kinds apart."""
    require_tool("wgpu")
    good = tmp_path / "good.py"
    good.write_text(KERNEL)
    broken = tmp_path / "broken.py"
    broken.write_text(BROKEN)
    result = CliRunner().invoke(
        mimir.cli.app, ["verify", str(good), str(broken), "--backend", "wgsl", "--dim", "N=5"]
    )
    assert result.exit_code == 1, result.output
    out = result.stdout
    assert f"\n{good}:\n" in out and f"\n{broken}:\n" in out
    assert "error[GPU011]" in out
    rows = [line.split() for line in out.splitlines() if line.startswith(("scaled_sum", "bad_"))]
    assert [r[0] for r in rows] == ["scaled_sum", "scaled_sum"]  # bad_matmul never ran
    assert out.splitlines()[-1] == (
        "2 functions matched; 1 function failed `mimir check` and did not run "
        f"(`{broken}:bad_matmul`)"
    )
    assert "failed verification" not in out
    assert f"{broken}: bad_matmul: failed the check" in result.stderr


def test_verify_can_use_the_shim_itself(kernel_file: Path) -> None:
    require_tool("wgpu")
    args = ["verify", str(kernel_file), "--dim", "N=5", "--reference"]
    result = CliRunner().invoke(mimir.cli.app, [*args, "shim"])
    assert result.exit_code == 0, result.output
    assert CliRunner().invoke(mimir.cli.app, [*args, "torch"]).exit_code == 2
