"""Mimir installs by a name of its own: the package index's `mimir` is an unrelated project.

The distribution is `mimir-kernels`; the module (`import mimir`) and the command (`mimir`)
keep their names. Every command this repository prints or documents installs that name.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

from typer.testing import CliRunner

import mimir
import mimir.cli

ROOT = Path(__file__).resolve().parent.parent
NAME = "mimir-kernels"
# `pip install mimir`, `pip install 'mimir[gpu]'`, `pip install "mimir==0.1"`, `mimir>=0.1`
_WRONG = re.compile(r"""pip install\s+['"]?mimir(?![-\w])|['"`]mimir(\[|[=<>~!]=)""")


def _tracked_text_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    suffixes = {".md", ".py", ".ts", ".js", ".mjs", ".json", ".yml", ".yaml", ".toml", ".c", ""}
    out = []
    for name in listed:
        path = ROOT / name
        if path.suffix in suffixes and path.is_file() and "tests/kernels/out" not in name:
            out.append(path)
    return out


def test_the_distribution_is_named_mimir_kernels() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == NAME
    assert project["scripts"] == {"mimir": "mimir.cli:main"}


def test_no_file_tells_anyone_to_install_the_other_mimir() -> None:
    wrong = []
    for path in _tracked_text_files():
        if path == Path(__file__).resolve():
            continue  # the patterns above, spelled out
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if _WRONG.search(line):
                wrong.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert wrong == []


def test_the_missing_gpu_extra_is_named_by_the_distribution() -> None:
    from mimir.runtime import wgpu_runner

    source = Path(wgpu_runner.__file__).read_text()
    assert f"pip install '{NAME}[gpu]'" in source


def test_version_flag_prints_the_version() -> None:
    result = CliRunner().invoke(mimir.cli.app, ["--version"])
    assert result.exit_code == 0
    assert result.output == f"mimir {mimir.__version__}\n"
    run = subprocess.run(
        [sys.executable, "-m", "mimir", "--version"], capture_output=True, text=True, check=False
    )
    assert (run.returncode, run.stdout) == (0, f"mimir {mimir.__version__}\n")


def test_the_version_has_one_source() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" in pyproject["project"]["dynamic"]
    dynamic = pyproject["tool"]["setuptools"]["dynamic"]["version"]
    assert dynamic == {"attr": "mimir.__version__"}
