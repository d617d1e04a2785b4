"""The `mimir` command line, end to end in subprocesses (exit codes, output, start-up cost)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

README_OUTPUT = [
    "examples/bad_matmul.py:10:12: error[GPU011]: matmul shape mismatch: "
    "left has K=784, right has K=128",
    "  why: matrix multiplication requires inner dimensions to match (A[M,K] @ B[K,N])",
    "  fix: ensure the inner dimensions of both matrices are equal",
]

BAD = (
    "from mimir.array import Tensor, float32, gpu\n\n\n"
    "@gpu\n"
    "def f(a: Tensor[float32, 4, 3], b: Tensor[float32, 4]) -> Tensor[float32, 4, 3]:\n"
    "    return a + b\n"
)
GOOD = (
    "from mimir.array import Tensor, float32, gpu\n\n\n"
    "@gpu\n"
    "def f(a: Tensor[float32, 4, 3], b: Tensor[float32, 3]) -> Tensor[float32, 4, 3]:\n"
    "    return a + b\n"
)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "MIMIR_TRACEBACK")}
    env["NO_COLOR"] = "1"
    env["COLUMNS"] = "200"
    return env


def run(*args: str, cwd: Path = REPO, exe: tuple[str, ...] | None = None):
    cmd = [*(exe or (sys.executable, "-m", "mimir")), *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=_env(), timeout=120)


def _assert_no_traceback(result) -> None:
    assert "Traceback" not in result.stdout + result.stderr
    assert "internal error" not in result.stdout + result.stderr


# ---------------------------------------------------------------- the README promise


@pytest.mark.parametrize("entry", ["module", "script"])
def test_readme_bad_matmul_output(entry: str) -> None:
    exe = None
    if entry == "script":
        script = shutil.which("mimir") or str(Path(sys.executable).parent / "mimir")
        if not Path(script).exists():
            pytest.fail("the `mimir` console script is not installed (pip install -e .)")
        exe = (script,)
    result = run("check", "examples/bad_matmul.py", exe=exe)
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:3] == README_OUTPUT
    # After the three lines only secondary labels, then the one-line summary.
    rest = lines[3:]
    assert all(ln.startswith("  note: ") for ln in rest[:-1]), rest
    assert rest[-1] == "Found 1 error in 1 file (checked 1 source file)"
    # Nothing else is reported at line 10 (one diagnostic per root cause).
    at_line_10 = [ln for ln in lines if ln.startswith("examples/bad_matmul.py:10:")]
    assert at_line_10 == [README_OUTPUT[0]]
    assert result.stderr == ""


def test_linear_forward_checks_clean_and_runs() -> None:
    result = run("check", "examples/linear_forward.py")
    assert result.returncode == 0
    assert result.stdout == "Success: no issues found in 1 source file\n"
    ran = subprocess.run(
        [sys.executable, "examples/linear_forward.py"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "linear_forward -> [32, 128] float32"


# ---------------------------------------------------------------- exit codes and inputs


def test_exit_codes(tmp_path: Path) -> None:
    (tmp_path / "good.py").write_text(GOOD)
    (tmp_path / "bad.py").write_text(BAD)
    clean = run("check", "good.py", cwd=tmp_path)
    assert clean.returncode == 0 and clean.stdout == "Success: no issues found in 1 source file\n"
    errors = run("check", "bad.py", cwd=tmp_path)
    assert errors.returncode == 1
    assert errors.stdout.startswith("bad.py:6:12: error[GPU010]: ")
    both = run("check", "good.py", "bad.py", cwd=tmp_path)
    assert both.returncode == 1
    assert both.stdout.splitlines()[-1] == "Found 1 error in 1 file (checked 2 source files)"
    usage = run("check", "--format", "yaml", "good.py", cwd=tmp_path)
    assert usage.returncode == 2
    assert run("explain", "GPU999").returncode == 2
    _assert_no_traceback(usage)


def test_the_kernel_language_imported_from_mimir_is_no_silent_pass(tmp_path: Path) -> None:
    """`from mimir import gpu` fails when the file runs, and no `@gpu` under it is seen:
    `mimir check` used to report "no issues" for a kernel with a shape bug. Now one GPU082
    names every misplaced name and spells the import that works; exit 1."""
    wrong = BAD.replace("from mimir.array import", "from mimir import")
    assert wrong != BAD
    (tmp_path / "wrong.py").write_text(wrong)
    result = run("check", "wrong.py", cwd=tmp_path)
    assert result.returncode == 1
    (line,) = [x for x in result.stdout.splitlines() if "error[" in x]
    assert "error[GPU082]: `mimir` has no `" in line
    assert "write `from mimir.array import " in line
    _assert_no_traceback(result)


def test_no_arguments_prints_help_and_exits_2() -> None:
    result = run()
    assert result.returncode == 2
    assert "check" in result.stdout + result.stderr


def test_syntax_error_is_gpu001_exit_2(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("from mimir.array import gpu\n\ndef f(:\n    pass\n")
    result = run("check", "broken.py", cwd=tmp_path)
    assert result.returncode == 2
    first = result.stdout.splitlines()[0]
    assert first.startswith("broken.py:3:7: error[GPU001]: syntax error: ")
    _assert_no_traceback(result)


def test_syntax_error_in_one_file_still_checks_the_others(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("def f(:\n")
    (tmp_path / "bad.py").write_text(BAD)
    result = run("check", ".", cwd=tmp_path)
    assert result.returncode == 2  # unreadable input wins over found errors
    assert "error[GPU001]" in result.stdout and "error[GPU010]" in result.stdout


def test_null_byte_is_gpu001_not_a_crash(tmp_path: Path) -> None:
    (tmp_path / "nul.py").write_bytes(b"x = 1\x00\n")
    result = run("check", "nul.py", cwd=tmp_path)
    assert result.returncode == 2
    assert "error[GPU001]" in result.stdout
    _assert_no_traceback(result)


def test_missing_file_is_gpu002_exit_2(tmp_path: Path) -> None:
    result = run("check", "nowhere.py", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout.startswith("nowhere.py:1:1: error[GPU002]: cannot read file")
    _assert_no_traceback(result)


def test_non_utf8_file_is_gpu002_exit_2(tmp_path: Path) -> None:
    (tmp_path / "latin1.py").write_bytes("x = 'caf\xe9'\n".encode("latin-1"))
    result = run("check", "latin1.py", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout.startswith("latin1.py:1:1: error[GPU002]: cannot read file")
    _assert_no_traceback(result)


def test_utf8_bom_and_non_ascii_columns(tmp_path: Path) -> None:
    # Columns count characters, not UTF-8 bytes: `é` before the fault does not shift it.
    src = BAD.replace("    return a + b", "    é = a\n    return é + b")
    (tmp_path / "bom.py").write_bytes(b"\xef\xbb\xbf" + src.encode("utf-8"))
    result = run("check", "bom.py", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout.startswith("bom.py:7:12: error[GPU010]: ")


def test_non_ascii_before_the_fault_keeps_character_columns_in_every_format(
    tmp_path: Path,
) -> None:
    # `ŷ` is one character and two UTF-8 bytes. The fault `ŷ + b` starts at character 23 and
    # ends (exclusive) at 28; counted in bytes it would be 24 and 30.
    src = (
        "from mimir.array import Tensor, float32, gpu\n\n\n"
        "@gpu\n"
        "def f(x: Tensor[float32, 4, 8], w: Tensor[float32, 8, 3], b: Tensor[float32, 4])"
        " -> Tensor[float32, 4, 3]:\n"
        "    ŷ = x @ w; return ŷ + b\n"
    )
    (tmp_path / "hat.py").write_text(src, encoding="utf-8")
    text = run("check", "hat.py", cwd=tmp_path)
    assert text.returncode == 1
    assert text.stdout.startswith("hat.py:6:23: error[GPU010]: ")
    (d,) = json.loads(run("check", "--format", "json", "hat.py", cwd=tmp_path).stdout)[
        "diagnostics"
    ]
    assert (d["span"]["line"], d["span"]["column"]) == (6, 23)
    assert (d["span"]["end_line"], d["span"]["end_column"]) == (6, 28)
    doc = json.loads(run("check", "--format", "sarif", "hat.py", cwd=tmp_path).stdout)
    (result,) = doc["runs"][0]["results"]
    region = result["locations"][0]["physicalLocation"]["region"]
    assert doc["runs"][0]["columnKind"] == "unicodeCodePoints"
    assert (region["startLine"], region["startColumn"]) == (6, 23)
    assert (region["endLine"], region["endColumn"]) == (6, 28)


# ---------------------------------------------------------------- directories


def test_directories_are_walked_skipping_hidden_and_virtualenvs(tmp_path: Path) -> None:
    tree = {
        "top.py": BAD,
        "pkg/deep/er/nested.py": BAD,
        "pkg/fine.py": GOOD,
        "pkg/notes.txt": "not python",
        ".hidden/skipped.py": BAD,
        "pkg/.cache/skipped.py": BAD,
        "myenv/pyvenv.cfg": "home = /usr/bin\n",
        "myenv/lib/skipped.py": BAD,
        "pkg/inner_venv/pyvenv.cfg": "",
        "pkg/inner_venv/skipped.py": BAD,
    }
    for rel, text in tree.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    result = run("check", ".", "--format", "json", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    doc = json.loads(result.stdout)
    paths = sorted({Path(d["span"]["path"]).as_posix() for d in doc["diagnostics"]})
    assert [p.removeprefix("./") for p in paths] == ["pkg/deep/er/nested.py", "top.py"]
    assert doc["summary"]["files_checked"] == 3
    # A hidden file named explicitly is still checked.
    explicit = run("check", ".hidden/skipped.py", cwd=tmp_path)
    assert explicit.returncode == 1


def test_empty_directory_checks_nothing_and_succeeds(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = run("check", "empty", cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout.splitlines()[-1].startswith("Success: no issues found in 0 source files")


# ---------------------------------------------------------------- formats


def test_json_format(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text(BAD)
    (tmp_path / "good.py").write_text(GOOD)
    result = run("check", "--format", "json", "bad.py", "good.py", cwd=tmp_path)
    assert result.returncode == 1
    doc = json.loads(result.stdout)
    assert doc["version"] == 1
    assert doc["summary"]["errors"] == 1
    assert doc["summary"]["files_checked"] == 2
    assert doc["summary"]["files_with_errors"] == 1
    (d,) = doc["diagnostics"]
    assert d["code"] == "GPU010" and d["severity"] == "error"
    assert d["span"]["path"] == "bad.py"
    assert (d["span"]["line"], d["span"]["column"]) == (6, 12)
    assert (d["span"]["end_line"], d["span"]["end_column"]) == (6, 17)
    assert d["message"] == "shapes [4, 3] and [4] cannot broadcast: 3 vs 4"
    assert d["why"].startswith("element-wise ops broadcast as NumPy does")
    assert d["fix"] and d["function"] == "f" and d["counterexample"] == {}
    assert all(lab["span"]["line"] == 5 for lab in d["labels"])


def test_json_counterexample_is_an_object(tmp_path: Path) -> None:
    shutil.copy(REPO / "tests" / "fixtures" / "check" / "matmul.py", tmp_path / "m.py")
    doc = json.loads(run("check", "--format", "json", "m.py", cwd=tmp_path).stdout)
    (d,) = [d for d in doc["diagnostics"] if d["function"] == "symbolic_qk"]
    assert set(d["counterexample"]) == {"T", "D"}
    assert all(isinstance(v, int) and v >= 1 for v in d["counterexample"].values())


def test_text_mode_ends_with_a_one_line_summary(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(BAD)
    (tmp_path / "b.py").write_text(BAD.replace("def f", "def g"))
    result = run("check", "a.py", "b.py", cwd=tmp_path)
    lines = result.stdout.splitlines()
    assert lines[-1] == "Found 2 errors in 2 files (checked 2 source files)"
    assert sum(1 for ln in lines if "error[GPU010]" in ln) == 2
    assert not any(ln.startswith(("Found", "Success")) for ln in lines[:-1])


# ---------------------------------------------------------------- start-up cost


def test_help_does_not_import_the_solver() -> None:
    script = (
        "import json, sys\n"
        "from typer.testing import CliRunner\n"
        "import mimir.cli\n"
        "HEAVY = ('z3', 'networkx')\n"
        "loaded_by_import = sorted(m for m in sys.modules if m.split('.')[0] in HEAVY)\n"
        "runner = CliRunner()\n"
        "codes = [runner.invoke(mimir.cli.app, args).exit_code\n"
        "         for args in (['--help'], ['check', '--help'], ['explain', 'GPU011'])]\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in HEAVY)\n"
        "print(json.dumps({'import': loaded_by_import, 'help': heavy, 'codes': codes}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=_env()
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc == {"import": [], "help": [], "codes": [0, 0, 0]}


def test_help_in_a_fresh_interpreter_does_not_import_z3() -> None:
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "mimir", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(),
    )
    assert out.returncode == 0
    imported = {ln.split("|")[-1].strip() for ln in out.stderr.splitlines() if "|" in ln}
    assert "mimir.cli" in imported
    assert not {m for m in imported if m.split(".")[0] in ("z3", "networkx")}
