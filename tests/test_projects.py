"""Whole projects: imports between modules resolved without running them.

Each project under tests/projects/ marks its expected diagnostics per file with
`# E: CODE`, as the checker fixtures do; `mimir check` on the whole directory must
give exactly those. The per-module cache re-checks a module when a module it
imports changes, and nothing else.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import markers

from mimir.check import check_source
from mimir.gate.config import load_config
from mimir.gate.runner import run_check
from mimir.project import Project
from mimir.project.index import _ParsedTrees

ROOT = Path(__file__).resolve().parent.parent
PROJECTS = ROOT / "tests" / "projects"
FILES = sorted(PROJECTS.rglob("*.py"))


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(PROJECTS)) for p in FILES])
def test_each_module_gives_exactly_its_markers(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    result = check_source(str(path), text, project=Project())
    assert {(d.span.line, d.code) for d in result.diagnostics} == markers(text)


def test_the_project_markers_cover_every_import_code() -> None:
    codes = {code for p in FILES for _, code in markers(p.read_text(encoding="utf-8"))}
    assert {"GPU080", "GPU081", "GPU082", "GPU060", "GPU011", "GPU018"} <= codes


def test_the_cli_on_the_project_directory() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "mimir", "check", "--format", "json", "--no-cache", "app"],
        cwd=PROJECTS, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert run.returncode == 1, run.stderr
    got = {
        (str((PROJECTS / d["span"]["path"]).resolve()), d["span"]["line"], d["code"])
        for d in json.loads(run.stdout)["diagnostics"]
    }
    want = {
        (str(p.resolve()), line, code)
        for p in FILES
        if "app" in p.relative_to(PROJECTS).parts
        for line, code in markers(p.read_text(encoding="utf-8"))
    }
    assert got == want


def test_notes_in_another_module_are_named_as_the_checked_files_are() -> None:
    # `mimir check pipeline.py` run in the project folder: a note that points into
    # helpers.py says `helpers.py:18:12`, not the absolute path the project loader reads.
    run = subprocess.run(
        [sys.executable, "-m", "mimir", "check", "--no-cache", "pipeline.py"],
        cwd=PROJECTS / "app", capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert run.returncode == 1, run.stderr
    assert "  note: helpers.py:18:12: `forward` calls `linear` here" in run.stdout
    assert str(PROJECTS) not in run.stdout


def test_imported_names_keep_their_meaning() -> None:
    heads = PROJECTS / "app" / "heads.py"
    result = check_source(str(heads), heads.read_text(encoding="utf-8"))
    (bad,) = result.diagnostics
    # `Rows` is `N` from dims.py, with its `min=2`: `x[:2]` is proven, `x[:3]` refuted.
    assert bad.code == "GPU018" and "N=2" in bad.why


def test_a_cpu_tensor_through_an_imported_helper_names_the_kernel_call_inside_it() -> None:
    pipeline = PROJECTS / "app" / "pipeline.py"
    result = check_source(str(pipeline), pipeline.read_text(encoding="utf-8"), project=Project())
    first = next(d for d in result.diagnostics if d.code == "GPU060")
    assert first.span.line == 13 and "passed through `forward`" in first.message
    created, inside = first.labels
    assert created.span.path == str(pipeline) and created.span.line == 12
    assert Path(inside.span.path).name == "helpers.py" and inside.span.line == 18
    # a tensor a helper returns keeps the device it was created on, in the helper's module
    returned = next(d for d in result.diagnostics if d.span.line == 18)
    assert "helpers.py line 10" in returned.message


def test_unsaved_text_of_an_imported_module_wins(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    shutil.copytree(PROJECTS / "app", project / "app")
    heads = project / "app" / "heads.py"
    dims = project / "app" / "dims.py"
    overlay = {str(dims): dims.read_text().replace("min=2", "min=3")}
    result = check_source(str(heads), heads.read_text(), project=Project(overlay=overlay))
    assert result.diagnostics == []


def test_a_changed_module_rechecks_its_dependents_only(tmp_path: Path) -> None:
    shutil.copytree(PROJECTS / "app", tmp_path / "app")
    app = tmp_path / "app"
    config = load_config(start=tmp_path)
    files = sorted(app.glob("*.py"))

    def run() -> dict[str, tuple[bool, list[str]]]:
        out = run_check(files, config, jobs=1, cache_root=tmp_path, progress=False)
        return {Path(c.path).name: (c.cached, [d.code for d in c.diagnostics]) for c in out}

    first = run()
    assert first["heads.py"] == (False, ["GPU018"])
    again = run()
    assert all(cached for cached, _ in again.values())
    dims = app / "dims.py"
    dims.write_text(dims.read_text().replace("min=2", "min=3"))
    after = run()
    # heads.py's kernel is now proven: `Rows` has at least 3 rows.
    assert after["heads.py"] == (False, [])
    dependents = {"dims.py", "layers.py", "heads.py", "model.py", "__init__.py", "broken.py"}
    dependents |= {"aliases.py", "helpers.py", "pipeline.py"}
    assert {name for name, (cached, _) in after.items() if not cached} == dependents
    assert after["cycle_a.py"][0] and after["cycle_b.py"][0]


def test_one_name_from_a_package_reads_the_module_that_defines_it(tmp_path: Path) -> None:
    """A package whose `__init__` imports every module (timm, transformers): importing one
    name reads the `__init__` and the module defining that name, not the whole package,
    and a `Dim` re-exported through the `__init__` keeps its meaning."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    names = [f"m{k}" for k in range(8)]
    (pkg / "__init__.py").write_text(
        "".join(f"from .{n} import Thing{k}\n" for k, n in enumerate(names))
        + "from .dims import N\n"
    )
    for k, n in enumerate(names):
        (pkg / f"{n}.py").write_text(f"from .{names[-1]} import Thing{len(names) - 1}\n\n"
                                     f"class Thing{k}:\n    pass\n")  # fmt: skip
    (pkg / "dims.py").write_text("from mimir.array import Dim\n\nN = Dim('N', min=2)\n")
    main = tmp_path / "main.py"
    main.write_text(
        "from mimir.array import Tensor, float32, gpu\n"
        "from pkg import N, Thing3\n\n\n"
        "@gpu\n"
        "def first(x: Tensor[float32, N]) -> Tensor[float32, 1]:\n"
        "    return x[0:1]\n"
    )
    project = Project()
    result = check_source(str(main), main.read_text(), project=project)
    assert result.diagnostics == []
    read = {p.name for p in project._trees}
    assert read == {"__init__.py", "m3.py", "dims.py"}


def test_trees_parsed_once_per_process_are_bounded_by_their_text() -> None:
    """A language server parses a new text of a document at every edit: the shared trees
    keep the most recently used within a character budget, not one per edit forever."""
    trees = _ParsedTrees(texts=100, characters=1_000)
    texts = [f"x = {n}\n" + "y = 1\n" * 60 for n in range(10)]  # ~370 characters each
    first = trees.tree("m.py", texts[0])
    assert trees.tree("m.py", texts[0]) is first  # parsed once
    for text in texts[1:]:
        trees.tree("m.py", text)
    assert trees.tree("m.py", texts[-1]) is not None
    assert trees.tree("m.py", texts[0]) is not first  # dropped, so parsed again
    assert trees.tree("bad.py", "def (") is None
