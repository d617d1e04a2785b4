"""The CI gate: every output format on one tree, their schemas, exit codes, hook files.

Snapshots live in tests/data/ci_gate/; regenerate them with
`MIMIR_UPDATE_SNAPSHOTS=1 pytest tests/test_ci_gate.py`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml
from ci_tree import CLEAN, DATA, make_tree, mimir

import mimir as mimir_package
from mimir.diagnostics.codes import REGISTRY
from mimir.diagnostics.diagnostic import Diagnostic, Label, Span
from mimir.diagnostics.render import github
from mimir.diagnostics.render import json as json_render
from mimir.diagnostics.render import sarif as sarif_render

REPO = Path(__file__).resolve().parent.parent
SNAPSHOTS = DATA / "ci_gate"
FORMATS = ["text", "concise", "json", "sarif", "github"]


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("MIMIR_CACHE_DIR", raising=False)
    monkeypatch.chdir(make_tree(tmp_path))
    return tmp_path


def _normalize(fmt: str, out: str, root: Path) -> str:
    if fmt == "sarif":
        out = out.replace(root.resolve().as_uri(), "file:///ROOT")
        out = out.replace(f'"{mimir_package.__version__}"', '"VERSION"')
    return out


def _snapshot(name: str, actual: str) -> None:
    path = SNAPSHOTS / name
    if os.environ.get("MIMIR_UPDATE_SNAPSHOTS"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual)
    assert path.exists(), f"{name} is missing; MIMIR_UPDATE_SNAPSHOTS=1 writes it"
    assert actual == path.read_text(), f"{name} differs; MIMIR_UPDATE_SNAPSHOTS=1 rewrites it"


# ------------------------------------------------------------------ formats


@pytest.mark.parametrize("fmt", FORMATS)
def test_format_snapshot(tree: Path, fmt: str) -> None:
    result = mimir("check", "--no-cache", "--format", fmt, "kernels")
    assert result.exit_code == 1, result.output
    assert result.stderr == ""
    _snapshot(f"expected.{fmt}", _normalize(fmt, result.stdout, tree))


def test_text_format_keeps_the_design_layout(tree: Path) -> None:
    lines = mimir("check", "kernels/matmul.py").stdout.splitlines()
    assert lines[0] == (
        "kernels/matmul.py:6:12: error[GPU011]: matmul shape mismatch: left has K=784, "
        "right has K=128"
    )
    assert lines[1] == f"  why: {REGISTRY['GPU011'].why}"
    assert lines[2] == f"  fix: {REGISTRY['GPU011'].fix}"


def test_concise_is_one_line_per_diagnostic_plus_summary(tree: Path) -> None:
    out = mimir("check", "--format", "concise", "kernels").stdout.splitlines()
    assert len(out) == 4
    assert out[-1] == "Found 2 errors and 1 warning in 3 files (checked 4 source files)"


def test_json_validates_against_the_shipped_schema(tree: Path) -> None:
    doc = json.loads(mimir("check", "--format", "json", "kernels").stdout)
    jsonschema.Draft202012Validator.check_schema(json_render.schema())
    jsonschema.Draft202012Validator(json_render.schema()).validate(doc)
    assert doc["version"] == json_render.VERSION == 1
    assert doc["summary"] == {
        "errors": 2,
        "warnings": 1,
        "files_checked": 4,
        "files_with_errors": 2,
    }
    slices = next(d for d in doc["diagnostics"] if d["code"] == "GPU018")
    assert slices["counterexample"] == {"N": 7}


def test_json_schema_is_package_data() -> None:
    path = REPO / "mimir" / "diagnostics" / "schemas" / json_render.SCHEMA_FILE
    assert json.loads(path.read_text()) == json_render.schema()
    pyproject = (REPO / "pyproject.toml").read_text()
    assert '"mimir.diagnostics" = ["schemas/*.json", "codes.md"]' in pyproject


def test_json_round_trips_every_diagnostic_field() -> None:
    span = Span("k.py", 3, 5, 4, 9)
    d = Diagnostic(
        "GPU018",
        "slice stop 8 is out of bounds",
        span,
        severity="error",
        labels=(Label(Span("k.py", 1, 2, 1, 3), "`x` axis 0 is N here"),),
        counterexample=(("N", 7), ("M", 1)),
        function="shift",
        extra_why="the loop runs one past the end",
        counterexample_note="(x has 7 elements)",
        notes=("a note",),
        extra_fix="declare `Range(0, N)` on the index",
    )
    known = {
        "code",
        "message",
        "span",
        "severity",
        "labels",
        "counterexample",
        "function",
        "extra_why",
        "counterexample_note",
        "notes",
        "extra_fix",  # rendered into `fix`, recovered by removing the registry's text
    }
    # A new Diagnostic field must be taught to to_dict/from_dict (and the schema).
    assert set(Diagnostic.__dataclass_fields__) == known
    assert json_render.from_dict(json.loads(json.dumps(json_render.to_dict(d)))) == d
    plain = Diagnostic("GPU011", "m", span)
    assert json_render.from_dict(json_render.to_dict(plain)) == plain


# ------------------------------------------------------------------ SARIF


@pytest.fixture(scope="module")
def sarif_schema() -> dict:
    return json.loads((DATA / "sarif-schema-2.1.0.json").read_text())


def test_sarif_validates_against_the_official_schema(tree: Path, sarif_schema: dict) -> None:
    result = mimir("check", "--format", "sarif", "kernels")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    jsonschema.Draft4Validator.check_schema(sarif_schema)
    jsonschema.Draft4Validator(
        sarif_schema, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER
    ).validate(doc)
    assert doc["version"] == "2.1.0"


def test_sarif_rules_and_results_carry_registry_data(tree: Path) -> None:
    run = json.loads(mimir("check", "--format", "sarif", "kernels").stdout)["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == ["GPU011", "GPU018", "GPU090"]
    for r in rules:
        entry = REGISTRY[r["id"]]
        assert r["name"] == entry.name
        assert r["shortDescription"]["text"] == entry.summary
        assert r["fullDescription"]["text"] == entry.why
        assert entry.fix in r["help"]["text"]
        assert entry.why in r["help"]["text"]
    assert rules[2]["defaultConfiguration"]["level"] == "warning"
    matmul = next(r for r in run["results"] if r["ruleId"] == "GPU011")
    assert rules[matmul["ruleIndex"]]["id"] == "GPU011"
    assert matmul["level"] == "error"
    loc = matmul["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"] == {"uri": "kernels/matmul.py", "uriBaseId": "%SRCROOT%"}
    assert loc["region"] == {"startLine": 6, "startColumn": 12, "endLine": 6, "endColumn": 17}
    related = [r["message"]["text"] for r in matmul["relatedLocations"]]
    assert related == ["`x` axis 1 is 784 here", "`w` axis 0 is 128 here"]
    stale = next(r for r in run["results"] if r["ruleId"] == "GPU090")
    assert stale["level"] == "warning"
    assert run["columnKind"] == "unicodeCodePoints"


def test_sarif_fingerprint_survives_a_line_shift(tree: Path) -> None:
    def fingerprint() -> str:
        run = json.loads(mimir("check", "--format", "sarif", "kernels/matmul.py").stdout)
        return run["runs"][0]["results"][0]["partialFingerprints"]["mimir/v1"]

    before = fingerprint()
    path = tree / "kernels" / "matmul.py"
    path.write_text("# a comment\n\n" + path.read_text())
    assert fingerprint() == before


def test_sarif_absolute_paths_become_file_uris(sarif_schema: dict) -> None:
    d = Diagnostic("GPU011", "m", Span("/abs/k.py", 1, 1, 1, 2))
    doc = sarif_render.document([d], version="0")
    uri = doc["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert uri == {"uri": "file:///abs/k.py"}
    jsonschema.Draft4Validator(sarif_schema).validate(doc)


# ------------------------------------------------------------------ github


def test_github_escapes_data_and_properties() -> None:
    assert github.escape_data("50% done\r\nnext") == "50%25 done%0D%0Anext"
    assert github.escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    # `:` and `,` are legal in the message itself.
    assert github.escape_data("a:b,c") == "a:b,c"


def test_github_command_shape_and_escaping() -> None:
    d = Diagnostic(
        "GPU011",
        "100% wrong: a, b",
        Span("dir,x/k:1.py", 10, 12, 11, 17),
        labels=(Label(Span("dir,x/k:1.py", 8, 3, 8, 4), "here"),),
    )
    line = github.render(d)
    assert "\n" not in line
    head, _, body = line.partition("::")[2].partition("::")
    assert line.startswith("::error ")
    assert head == (
        "error file=dir%2Cx/k%3A1.py,line=10,col=12,endLine=11,endColumn=17,title=GPU011"
    )
    assert body.startswith("100%25 wrong: a, b%0Awhy: ")
    assert body.endswith("%0Anote: dir,x/k:1.py:8:3: here")
    warning = Diagnostic("GPU090", "unused", Span("k.py", 1, 1, 1, 2), severity="warning")
    assert github.render(warning).startswith("::warning file=k.py,")


def test_github_format_prints_only_workflow_commands(tree: Path) -> None:
    lines = mimir("check", "--format", "github", "kernels").stdout.splitlines()
    assert len(lines) == 3
    assert all(line.startswith(("::error ", "::warning ")) for line in lines)
    assert lines[0].startswith(
        "::error file=kernels/matmul.py,line=6,col=12,endLine=6,endColumn=17,title=GPU011::"
    )


# ------------------------------------------------------------------ exit codes


@pytest.mark.parametrize("fmt", FORMATS)
def test_exit_codes_in_every_format(tree: Path, fmt: str) -> None:
    assert mimir("check", "--format", fmt, "kernels/clean.py").exit_code == 0
    assert mimir("check", "--format", fmt, "kernels/matmul.py").exit_code == 1
    # Warnings alone pass, unless asked otherwise.
    assert mimir("check", "--format", fmt, "kernels/suppressed.py").exit_code == 0
    assert (
        mimir("check", "--format", fmt, "--warnings-as-errors", "kernels/suppressed.py").exit_code
        == 1
    )
    assert mimir("check", "--format", fmt, "--exit-zero", "kernels/matmul.py").exit_code == 0
    # Unreadable input and usage errors are 2, even with --exit-zero.
    assert mimir("check", "--format", fmt, "--exit-zero", "missing.py").exit_code == 2
    (tree / "broken.py").write_text("def f(:\n")
    assert mimir("check", "--format", fmt, "broken.py").exit_code == 2
    assert mimir("check", "--format", fmt, "--select", "NOPE", "kernels").exit_code == 2


def test_unknown_format_is_a_usage_error(tree: Path) -> None:
    assert mimir("check", "--format", "xml", "kernels").exit_code == 2


def test_output_file(tree: Path) -> None:
    result = mimir("check", "--format", "sarif", "-o", "out/mimir.sarif", "kernels")
    assert result.exit_code == 1
    assert result.stdout == ""
    doc = json.loads((tree / "out" / "mimir.sarif").read_text())
    assert len(doc["runs"][0]["results"]) == 3


def test_default_path_is_the_current_directory(tree: Path) -> None:
    result = mimir("check", "--format", "concise")
    assert result.stdout.splitlines()[-1].endswith("(checked 4 source files)")


def test_help_does_not_import_z3() -> None:
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from mimir.cli import app\n"
        "for args in (['--help'], ['check', '--help']):\n"
        "    assert CliRunner().invoke(app, args).exit_code == 0\n"
        "print('z3' in sys.modules, 'networkx' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"


# ------------------------------------------------------------------ hooks and docs


def test_pre_commit_hook_runs_mimir_check() -> None:
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    (hook,) = hooks
    assert hook["id"] == "mimir-check"
    assert hook["entry"].split()[:2] == ["mimir", "check"]
    assert "--force-exclude" in hook["entry"]
    assert hook["language"] == "python"
    assert set(hook["types_or"]) == {"python", "pyi"}


def test_github_action_is_composite_and_uploads_sarif() -> None:
    action = yaml.safe_load((REPO / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    steps = action["runs"]["steps"]
    scripts = "\n".join(s.get("run", "") for s in steps)
    assert "pip install" in scripts
    assert "--format github" in scripts
    assert "--format sarif" in scripts
    assert any(s.get("uses", "").startswith("github/codeql-action/upload-sarif@") for s in steps)
    for step in steps:  # composite steps that run a script must name a shell
        if "run" in step:
            assert step.get("shell") == "bash"


def test_ci_docs_cover_the_gate() -> None:
    text = (REPO / "docs" / "ci.md").read_text()
    for word in (
        "--format",
        "sarif",
        "github",
        "concise",
        "diagnostics-v1.schema.json",
        "Exit code",
        "per-file-ignores",
        "z3-timeout",
        "backends",
        "# mimir: ignore[",
        "GPU090",
        "--write-baseline",
        "--baseline",
        ".mimir_cache",
        "MIMIR_CACHE_DIR",
        "MIMIR_CACHE_SECRET",
        "max-file-size",
        ".pre-commit-config.yaml",
        "upload-sarif",
    ):
        assert word in text, word
    # The copy-paste workflow parses as YAML.
    block = text.split("```yaml\n# .github/workflows/mimir.yml\n", 1)[1].split("```", 1)[0]
    workflow = yaml.safe_load(block)
    assert "jobs" in workflow


def test_clean_file_is_clean_in_every_format(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(make_tree(tmp_path, {"k.py": CLEAN}))
    assert mimir("check", "--format", "github", "k.py").stdout == ""
    assert mimir("check", "--format", "text", "k.py").stdout == (
        "Success: no issues found in 1 source file\n"
    )
    doc = json.loads(mimir("check", "--format", "sarif", "k.py").stdout)
    assert doc["runs"][0]["results"] == []
