"""The PyTorch corpus (`tests/torch_programs/`): real programs, each correct and buggy.

`NAME_ok.py` and `NAME_bug.py` differ in one bug, marked `# E: CODE` on the line where it
crashes. Ground truth is not assumed: every program is run for real with CPU PyTorch, and
a buggy variant must raise at its marked line (the innermost frame in the file), a correct
one must run clean. The checker must then report exactly the markers: every bug found at
the line the run crashes, no diagnostic on a correct program.
"""

from __future__ import annotations

import contextlib
import functools
import io
import runpy
import traceback
import warnings
from pathlib import Path

import pytest
from support import REPO, markers

from mimir.check import check_source

CORPUS = REPO / "tests" / "torch_programs"
PROGRAMS = sorted(CORPUS.glob("*.py"))
PAIRS = sorted({p.name.rsplit("_", 1)[0] for p in PROGRAMS})


def _ids(paths: list[Path]) -> list[str]:
    return [p.name for p in paths]


def test_corpus_is_pairs() -> None:
    assert len(PAIRS) >= 40
    for name in PAIRS:
        ok, bug = CORPUS / f"{name}_ok.py", CORPUS / f"{name}_bug.py"
        assert ok.exists() and bug.exists(), name
        assert markers(ok.read_text()) == set()
        assert len(markers(bug.read_text())) == 1, bug.name


@functools.cache
def _run(path: Path) -> int | None:
    """The line of `path` where running it raised (innermost frame in the file), or None."""
    import torch

    torch.manual_seed(0)
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            runpy.run_path(str(path), run_name="__main__")
    except Exception as err:  # noqa: BLE001 - every crash is what is measured
        frames = [f for f in traceback.extract_tb(err.__traceback__) if f.filename == str(path)]
        return frames[-1].lineno if frames else -1
    return None


@pytest.mark.parametrize("path", PROGRAMS, ids=_ids(PROGRAMS))
def test_program_crashes_exactly_at_its_marker(path: Path) -> None:
    want = sorted(line for line, _ in markers(path.read_text()))
    assert _run(path) == (want[0] if want else None)


@pytest.mark.parametrize("path", PROGRAMS, ids=_ids(PROGRAMS))
def test_checker_reports_exactly_the_markers(path: Path) -> None:
    text = path.read_text()
    found = check_source(str(path), text).diagnostics
    got = {(d.span.line, d.code) for d in found}
    assert got == markers(text), [f"{d.span.line}: {d.code} {d.message}" for d in found]
