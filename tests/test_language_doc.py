"""Every example in `docs/language.md` checks clean and runs under the shim.

Each ```python block is a whole file: `check_source` must report nothing, and importing it
(which calls its kernels) must not raise.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support import import_file

from mimir.check import check_source

DOC = Path(__file__).resolve().parents[1] / "docs" / "language.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def test_the_page_has_examples() -> None:
    assert len(BLOCKS) >= 5


@pytest.mark.parametrize("k", range(len(BLOCKS)))
def test_example_checks_clean_and_runs(k: int, tmp_path: Path) -> None:
    source = BLOCKS[k]
    result = check_source(f"language_{k}.py", source)
    assert [(d.code, d.message) for d in result.diagnostics] == []
    path = tmp_path / f"language_doc_{k}.py"
    path.write_text(source)
    import_file(path)
