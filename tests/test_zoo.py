"""The kernel zoo (`zoo/*.py`): every kernel on every backend against the shim, and a current table.

Each zoo kernel is checked and compiled for WGSL, SPIR-V, MSL and PTX, every file is
validated (naga, spirv-val, clang++, ptxas), and the kernel runs on wgpu (lavapipe), as
C++ on the CPU and in the PTX interpreter at its least sizes and at small ones, compared
with the shim: `zoo.table.evaluate`, the same code that writes `zoo/README.md`. The
README must then be what `python -m zoo.table` would write, except for the measured
WGSL times and the adapter they were measured on (`zoo.table.mask_measured`), which
depend on the machine. Each file's `if __name__ == "__main__":` example runs too.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import io
import runpy
import sys
import tempfile
from pathlib import Path

import pytest
from harness import require, require_tool

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from zoo import table  # noqa: E402 - the repository root is not always on sys.path

ENTRIES = table.entries()
_WORK = Path(tempfile.mkdtemp(prefix="mimir-zoo-test-"))


def _require_tools() -> None:
    from fuzzing.backends import Tools

    require_tool("wgpu")
    require_tool("spirv-val")
    require_tool("clang++")
    require(Tools.ptxas() is not None, "ptxas (CUDA 13.0) is neither on PATH nor pip-installed")


@functools.cache
def _row(entry: table.Entry) -> table.Row:
    return table.evaluate(entry, _WORK, table.missing_tools())


def test_the_zoo_has_the_kernels_people_know() -> None:
    names = {e.function for e in ENTRIES}
    assert len(names) >= 24
    assert {"linear", "attention", "causal_attention", "conv2d", "histogram"} <= names
    assert len({e.path for e in ENTRIES}) == len(ENTRIES), "one kernel per zoo file"


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.function for e in ENTRIES])
def test_kernel_matches_the_shim_on_every_backend(entry: table.Entry) -> None:
    _require_tools()
    row = _row(entry)
    assert set(row.status) == set(table.BACKENDS)
    assert row.ok, "\n".join(row.details)


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.function for e in ENTRIES])
def test_example_runs_under_the_shim(entry: table.Entry) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        runpy.run_path(str(entry.path), run_name="__main__")
    assert "Tensor(" in out.getvalue()


def test_readme_table_is_current() -> None:
    """zoo/README.md is what `python -m zoo.table` writes now, measured times aside."""
    _require_tools()
    rows = [_row(e) for e in ENTRIES]
    fresh = table.mask_measured(table.render(rows, adapter=None))
    written = table.mask_measured(table.README.read_text())
    diff = difflib.unified_diff(
        written.splitlines(), fresh.splitlines(), "zoo/README.md", "fresh", lineterm="", n=0
    )
    assert fresh == written, "zoo/README.md is stale: run `python -m zoo.table` and commit it\n" + (
        "\n".join(list(diff)[:40])
    )


def test_masking_keeps_everything_but_the_measured_column() -> None:
    entry = ENTRIES[0]
    ones = dict.fromkeys(table.BACKENDS, 1)
    row = table.Row(entry, launches=ones, status=dict.fromkeys(table.BACKENDS, "ok"))
    timed = table.Row(entry, ones, dict(row.status), milliseconds=1.5, timed_at={"N": 9})
    assert table.mask_measured(table.render([row], None)) == table.mask_measured(
        table.render([timed], "some adapter")
    )
    failed = table.Row(entry, ones, {**row.status, "ptx": "FAIL"})
    assert table.mask_measured(table.render([failed], None)) != table.mask_measured(
        table.render([row], None)
    )
    more = table.Row(entry, {**ones, "wgsl": 2}, dict(row.status))
    assert table.mask_measured(table.render([more], None)) != table.mask_measured(
        table.render([row], None)
    )


def test_the_launches_cell_names_each_backend_that_differs() -> None:
    assert table._launches(dict.fromkeys(table.BACKENDS, 1)) == "1"
    assert table._launches({"wgsl": 2, "spirv": 1, "msl": 1, "ptx": 1}) == "1 (WGSL 2)"
    assert table._launches({"wgsl": 2, "spirv": 2, "msl": 1, "ptx": 1}) == "2 (MSL 1, PTX 1)"
    assert table._launches({}) == "–"


def test_an_awaited_op_that_landed_marks_its_kernel_for_a_rewrite() -> None:
    assert table._waiting("where, no_such_op") == "where (landed: rewrite), no_such_op"
    assert table._waiting("") == "–"
    waiting = {op.strip() for e in ENTRIES for op in e.waiting_for.split(",") if op.strip()}
    assert not {op for op in waiting if table.landed(op)}, "rewrite the kernels that wait for these"


def test_the_table_runs_without_the_test_extra_and_reuses_its_rows(tmp_path: Path) -> None:
    """`python -m zoo.table` needs only the base install and the `gpu` extra (no Hypothesis,
    no NumPy), says how far it is, and a second run takes each unchanged row from its cache;
    a kernel whose source changed is evaluated again."""
    import os
    import subprocess

    _require_tools()
    script = (
        "import sys\n"
        "sys.modules['hypothesis'] = None\n"  # an import of it fails, as where it is absent
        "sys.modules['numpy'] = None\n"
        "from zoo import table\n"
        "raise SystemExit(table.main(sys.argv[1:]))\n"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}

    def run() -> str:
        done = subprocess.run(
            [sys.executable, "-c", script, "saxpy", "silu"],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stderr

    first = run()
    assert "[1/2] saxpy: WGSL ok" in first and "[2/2] silu: WGSL ok" in first
    second = run()
    assert "[1/2] saxpy (cached): WGSL ok" in second and "[2/2] silu (cached)" in second
    saxpy = next(e for e in ENTRIES if e.function == "saxpy")
    missing = table.missing_tools()
    key = table.row_key(saxpy, missing, True)
    assert (tmp_path / "cache" / "mimir" / "zoo" / f"{key}.json").exists()
    (tmp_path / "saxpy.py").write_text(saxpy.path.read_text() + "\n# edited\n")

    class Edited(table.Entry):
        relative = saxpy.relative  # the same file, edited

    changed = Edited(tmp_path / "saxpy.py", "saxpy", saxpy.summary, "")
    assert table.row_key(changed, missing, True) != key
