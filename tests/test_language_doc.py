"""Every complete example in `docs/language.md` checks clean and runs in the shim.

A ```python block is a whole file: it is written out, checked with `mimir check` (no
diagnostics) and executed as ordinary Python (its asserts are the expected results).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parent.parent / "docs" / "language.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


def test_the_page_has_examples() -> None:
    assert len(BLOCKS) >= 5


@pytest.mark.parametrize("source", BLOCKS, ids=[f"block{k}" for k in range(len(BLOCKS))])
def test_example_checks_clean_and_runs(source: str, tmp_path: Path) -> None:
    path = tmp_path / "example.py"
    path.write_text(source, encoding="utf-8")
    check = subprocess.run(
        [sys.executable, "-m", "mimir", "check", str(path)], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout + check.stderr
    run = subprocess.run([sys.executable, str(path)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
