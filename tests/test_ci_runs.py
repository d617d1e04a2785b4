"""Suppressions, baselines, the result cache, parallel workers and the progress bar."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from ci_tree import CLEAN, MATMUL, SLICES, TREE, make_tree, mimir

from mimir.check import check_source
from mimir.diagnostics.codes import REGISTRY
from mimir.diagnostics.diagnostic import Diagnostic, Span
from mimir.gate import runner
from mimir.gate.cache import Cache, cache_dir
from mimir.gate.config import Config, load_config
from mimir.gate.suppressions import find_suppressions


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("MIMIR_CACHE_DIR", raising=False)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.chdir(make_tree(tmp_path))
    return tmp_path


def codes(text: str) -> list[tuple[int, str, str]]:
    return [(d.span.line, d.code, d.severity) for d in check_source("k.py", text).diagnostics]


# ------------------------------------------------------------------ suppressions

BUG = MATMUL.rstrip("\n")  # line 6 is `return x @ w`


def test_suppression_drops_the_named_code() -> None:
    assert codes(MATMUL) == [(6, "GPU011", "error")]
    assert codes(BUG + "  # mimir: ignore[GPU011]\n") == []
    assert codes(BUG + "  # mimir: ignore[gpu011]\n") == []
    assert codes(BUG + "  # noqa: E501  # mimir: ignore[GPU011]\n") == []


def test_bare_suppression_drops_everything_on_the_line() -> None:
    assert codes(BUG + "  # mimir: ignore\n") == []


def test_wrong_code_does_not_suppress_and_is_reported_unused() -> None:
    assert codes(BUG + "  # mimir: ignore[GPU010]\n") == [
        (6, "GPU011", "error"),
        (6, "GPU090", "warning"),
    ]


def test_unused_suppression_is_a_warning_at_the_comment() -> None:
    text = CLEAN.replace("return x * 2.0", "return x * 2.0  # mimir: ignore[GPU011, GPU999]")
    found = check_source("k.py", text).diagnostics
    assert [(d.code, d.severity) for d in found] == [("GPU090", "warning")] * 2
    first = found[0]
    assert first.span.line == 6
    line = text.splitlines()[5]
    assert line[first.span.column - 1 : first.span.end_column - 1] == (
        "# mimir: ignore[GPU011, GPU999]"
    )
    assert "`GPU011`" in found[0].message
    assert "`GPU999` is not a Mimir code" in found[1].message


def test_partly_used_suppression_reports_only_the_unused_code() -> None:
    assert codes(BUG + "  # mimir: ignore[GPU011, GPU018]\n") == [(6, "GPU090", "warning")]


def test_gpu090_in_the_comment_silences_the_unused_report() -> None:
    text = CLEAN.replace("return x * 2.0", "return x * 2.0  # mimir: ignore[GPU011, GPU090]")
    assert codes(text) == []


def test_suppression_applies_to_the_start_line_only() -> None:
    text = BUG.replace("return x @ w", "return (\n        x @ w  # mimir: ignore[GPU011]\n    )")
    assert codes(text) == []
    text = BUG.replace("return x @ w", "return (  # mimir: ignore[GPU011]\n        x @ w\n    )")
    assert [(line, c) for line, c, _ in codes(text)] == [(6, "GPU090"), (7, "GPU011")]


def test_text_in_a_string_is_not_a_suppression() -> None:
    assert find_suppressions('s = "# mimir: ignore[GPU011]"\n') == []
    assert len(find_suppressions("x = 1  # mimir: ignore[GPU011]\n")) == 1


def test_registry_entry_for_unused_suppression() -> None:
    entry = REGISTRY["GPU090"]
    assert entry.severity == "warning"
    bad = check_source("bad.py", entry.bad_source()).diagnostics
    assert [d.code for d in bad] == ["GPU090"]
    assert check_source("good.py", entry.good_source()).diagnostics == []


def test_suppressions_in_the_cli(tree: Path) -> None:
    result = mimir("check", "--format", "concise", "kernels/suppressed.py")
    assert result.exit_code == 0
    assert result.stdout.splitlines()[0].startswith(
        "kernels/suppressed.py:11:21: warning[GPU090]: unused suppression for `GPU011`"
    )
    assert mimir("check", "--ignore", "GPU090", "kernels/suppressed.py").stdout == (
        "Success: no issues found in 1 source file\n"
    )


# ------------------------------------------------------------------ baselines


def test_baseline_hides_old_findings_and_reports_new_ones(tree: Path) -> None:
    result = mimir("check", "--write-baseline", "baseline.json", "kernels")
    assert result.exit_code == 0
    assert result.stdout == ""
    assert "wrote 3 findings to baseline.json" in result.stderr
    doc = json.loads((tree / "baseline.json").read_text())
    assert doc["version"] == 1
    assert {(f["path"], f["code"], f["source"]) for f in doc["findings"]} == {
        ("kernels/matmul.py", "GPU011", "return x @ w"),
        ("kernels/slices.py", "GPU018", "return x[0:8]"),
        ("kernels/suppressed.py", "GPU090", "return x + 1.0  # mimir: ignore[GPU011]"),
    }

    result = mimir("check", "--baseline", "baseline.json", "kernels")
    assert result.exit_code == 0
    assert result.stdout == "Success: no issues found in 4 source files\n"

    # Lines moving does not make an old finding new.
    matmul = tree / "kernels" / "matmul.py"
    matmul.write_text('"""A docstring."""\n\n' + matmul.read_text())
    assert mimir("check", "--baseline", "baseline.json", "kernels").exit_code == 0

    # A new bug (and a second copy of an old one) is reported.
    matmul.write_text(matmul.read_text() + "\n\n" + MATMUL.split("\n\n\n", 1)[1])
    (tree / "kernels" / "new.py").write_text(SLICES.replace("0:8", "1:9"))
    result = mimir("check", "--format", "concise", "--baseline", "baseline.json", "kernels")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert [line.split(": ", 1)[0] for line in lines[:-1]] == [
        "kernels/matmul.py:13:12",
        "kernels/new.py:8:12",
    ]


def test_editing_the_offending_line_makes_a_finding_new(tree: Path) -> None:
    mimir("check", "--write-baseline", "b.json", "kernels/matmul.py")
    path = tree / "kernels" / "matmul.py"
    path.write_text(path.read_text().replace("return x @ w", "return (x @ w)"))
    assert mimir("check", "--baseline", "b.json", "kernels/matmul.py").exit_code == 1


def test_baseline_works_from_a_subdirectory(tree: Path, monkeypatch) -> None:
    (tree / "mimir.toml").write_text("")
    mimir("check", "--write-baseline", "b.json", "kernels")
    monkeypatch.chdir(tree / "kernels")
    assert mimir("check", "--baseline", "../b.json", ".").exit_code == 0


@pytest.mark.parametrize("content", [None, "not json", '{"version": 9}', '{"version": 1}'])
def test_bad_baseline_is_a_usage_error(tree: Path, content: str | None) -> None:
    if content is not None:
        (tree / "b.json").write_text(content)
    result = mimir("check", "--baseline", "b.json", "kernels")
    assert result.exit_code == 2
    assert "b.json" in result.stderr


# ------------------------------------------------------------------ cache


def _run(config: Config | None = None, **kwargs) -> list[runner.Checked]:
    config = config or load_config()
    files = runner.select_files([Path("kernels")], config)
    return runner.run_check(files, config, progress=False, **kwargs)


def test_cache_hit_gives_identical_output(tree: Path, monkeypatch) -> None:
    first = mimir("check", "--format", "json", "kernels")
    assert (tree / ".mimir_cache" / "CACHEDIR.TAG").exists()
    assert (tree / ".mimir_cache" / ".gitignore").read_text().endswith("*\n")

    def fail(*args):
        raise AssertionError("a cached file was checked again")

    monkeypatch.setattr(runner, "check_text", fail)
    second = mimir("check", "--format", "json", "kernels")
    assert second.stdout == first.stdout
    assert second.exit_code == first.exit_code == 1
    assert all(c.cached for c in _run())
    for fmt in ("text", "sarif", "github"):
        assert mimir("check", "--format", fmt, "kernels").exit_code == 1


def test_content_change_invalidates_only_that_file(tree: Path) -> None:
    _run()
    (tree / "kernels" / "clean.py").write_text(MATMUL)
    checked = {c.path: c for c in _run()}
    assert not checked["kernels/clean.py"].cached
    assert [d.code for d in checked["kernels/clean.py"].diagnostics] == ["GPU011"]
    assert all(c.cached for p, c in checked.items() if p != "kernels/clean.py")


def test_settings_and_tool_are_part_of_the_key(tree: Path) -> None:
    _run()
    assert not any(c.cached for c in _run(load_config().override(z3_timeout=1234)))
    # Filters run after the cache: changing them reuses every entry.
    assert all(c.cached for c in _run(load_config().override(ignore=("GPU011",))))
    store = Cache(tree / "c", {"z3_timeout": 1})
    assert store.key("a.py", b"x") != store.key("b.py", b"x")
    assert store.key("a.py", b"x") != store.key("a.py", b"y")
    assert store.key("a.py", b"x") != Cache(tree / "c", {"z3_timeout": 2}).key("a.py", b"x")


def test_no_cache_and_cache_dir_override(tree: Path, monkeypatch) -> None:
    assert mimir("check", "--no-cache", "kernels").exit_code == 1
    assert not (tree / ".mimir_cache").exists()
    monkeypatch.setenv("MIMIR_CACHE_DIR", str(tree / "elsewhere"))
    assert cache_dir(tree) == tree / "elsewhere"
    mimir("check", "kernels")
    assert (tree / "elsewhere" / "CACHEDIR.TAG").exists()
    assert not (tree / ".mimir_cache").exists()


def test_timeouts_are_not_cached_and_bad_entries_are_misses(tmp_path: Path) -> None:
    store = Cache(tmp_path, {})
    span = Span("k.py", 1, 1, 1, 2)
    store.put("a" * 64, [Diagnostic("GPU050", "could not decide", span)], False)
    assert store.get("a" * 64) is None
    store.put("b" * 64, [Diagnostic("GPU011", "m", span)], False)
    assert store.get("b" * 64).diagnostics == [Diagnostic("GPU011", "m", span)]
    entry = store._file("b" * 64)
    entry.write_text("{truncated")
    assert store.get("b" * 64) is None


def test_cache_lives_in_the_config_root(tree: Path, monkeypatch) -> None:
    (tree / "mimir.toml").write_text("")
    monkeypatch.chdir(tree / "kernels")
    mimir("check", ".")
    assert (tree / ".mimir_cache").is_dir()
    assert not (tree / "kernels" / ".mimir_cache").exists()


# ------------------------------------------------------------------ parallel


def test_parallel_output_equals_serial(tree: Path) -> None:
    for i in range(6):
        make_tree(tree, {f"more/k{i}.py": (MATMUL, SLICES, CLEAN)[i % 3]})
    for fmt in ("text", "json", "sarif", "github"):
        serial = mimir("check", "--no-cache", "--jobs", "1", "--format", fmt, ".")
        parallel = mimir("check", "--no-cache", "--jobs", "4", "--format", fmt, ".")
        assert parallel.stdout == serial.stdout
        assert parallel.exit_code == serial.exit_code == 1


SYMBOLIC = """\
from mimir.array import Dim, Tensor, float32, gpu

T = Dim("T")
D = Dim("D", max=64)


@gpu
def attn(q: Tensor[float32, T, D], k: Tensor[float32, T, D]) -> Tensor[float32, T, T]:
    return q @ k
"""


def test_counterexamples_do_not_depend_on_earlier_files() -> None:
    # Parallel output equals serial output only if each file's result depends on that
    # file alone. A fresh interpreter gives both orders the same starting state.
    code = (
        "import sys\n"
        "from mimir.check import check_source\n"
        "symbolic, other = sys.argv[1], sys.argv[2]\n"
        "first = check_source('z.py', symbolic).diagnostics[0].counterexample\n"
        "for _ in range(4):\n"
        "    check_source('a.py', other)\n"
        "again = check_source('z.py', symbolic).diagnostics[0].counterexample\n"
        "print(first == again, first, again)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, SYMBOLIC, MATMUL], capture_output=True, text=True, check=True
    )
    assert out.stdout.startswith("True"), out.stdout


def test_results_are_sorted_by_path(tree: Path) -> None:
    make_tree(tree, {"a/z.py": MATMUL, "a/b/c.py": MATMUL})
    files = runner.select_files([Path("kernels"), Path("a")], load_config())
    assert [str(p) for p in files] == sorted(str(p) for p in files)
    assert len(files) == len(TREE) + 2


def test_a_file_named_twice_is_checked_once(tree: Path) -> None:
    out = mimir("check", "kernels/matmul.py", "kernels/matmul.py", "kernels").stdout
    assert out.count("error[GPU011]") == 1


# ------------------------------------------------------------------ progress


class _Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


def test_progress_only_on_a_terminal_for_long_runs(monkeypatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    many = runner.PROGRESS_MIN_FILES + 1
    assert runner._want_progress(_Stream(tty=True), many)
    assert not runner._want_progress(_Stream(tty=False), many)
    assert not runner._want_progress(_Stream(tty=True), runner.PROGRESS_MIN_FILES)
    monkeypatch.setenv("CI", "true")
    assert not runner._want_progress(_Stream(tty=True), many)


def test_no_progress_bar_when_not_a_tty(tree: Path) -> None:
    for i in range(runner.PROGRESS_MIN_FILES + 2):
        make_tree(tree, {f"more/k{i}.py": CLEAN})
    result = mimir("check", "--no-cache", "--format", "json", ".")
    assert result.exit_code == 1
    assert result.stderr == ""
    json.loads(result.stdout)


def test_progress_bar_draws_and_clears(tree: Path, monkeypatch) -> None:
    # Forced on, the bar goes to stderr only and leaves the report untouched.
    config = load_config()
    files = runner.select_files([Path("kernels")], config)
    plain = runner.run_check(files, config, use_cache=False, progress=False)
    shown = runner.run_check(files, config, use_cache=False, progress=True, jobs=1)
    assert [c.diagnostics for c in shown] == [c.diagnostics for c in plain]
