"""Every example in `docs/language.md` that starts with `# example: NAME` is a complete file:
it checks clean, runs under plain `python` (its `assert`s hold), and compiles for every
backend. A page that documents the language with code that does not run would teach
what Mimir does not do."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "language.md"
_BLOCK = re.compile(r"```python\n(# example: (\w+)\n.*?)```", re.DOTALL)


def _examples() -> list[tuple[str, str]]:
    return [(m.group(2), m.group(1)) for m in _BLOCK.finditer(PAGE.read_text())]


EXAMPLES = _examples()


def test_the_page_has_examples() -> None:
    names = [n for n, _ in EXAMPLES]
    assert len(names) >= 6 and len(set(names)) == len(names)


@pytest.mark.parametrize(("name", "source"), EXAMPLES, ids=[n for n, _ in EXAMPLES])
def test_example_checks_runs_and_compiles(name: str, source: str, tmp_path: Path) -> None:
    from mimir.check import check_source
    from mimir.codegen import compile_source

    path = tmp_path / f"{name}.py"
    path.write_text(source)
    result = check_source(str(path), source)
    assert [(d.code, d.message) for d in result.diagnostics] == []
    run = subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert run.returncode == 0, run.stderr
    compiled = compile_source(str(path), source, ["msl", "wgsl", "spirv", "ptx"])
    assert compiled.ok, [(d.code, d.message) for d in compiled.diagnostics]
    assert any(name.endswith(".manifest.json") for name in compiled.files)
