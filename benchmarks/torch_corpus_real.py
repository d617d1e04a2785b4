"""The corpus of public PyTorch projects: planted bugs found, false alarms, coverage.

    python benchmarks/torch_corpus.py --real SOURCES [--run] [--tools] [--pytea PYTEA]

SOURCES holds one entry per project of `torch_corpus_data.PROJECTS`, named `owner+name`:
a git directory (a bare clone, or a folder holding one as `repo`) from which the pinned
commit's Python files are read, or a checkout at that commit. The files are written to a
temporary folder (nothing of the projects is kept in this repository), then:

- each unmodified file is checked: any diagnostic is a false alarm, any exception an
  internal error; the CPU time of the whole check (in one process, files in order: a
  package's modules read for one file are not read again) and the coverage are recorded;
- each planted bug is applied to a copy of its file's text and checked at the file's own
  path (so its imports resolve): *found* when a diagnostic is on the line CPU PyTorch
  raises at, *elsewhere* when there are diagnostics but none there, *missed* otherwise;
- `--run` runs every unmodified file and every copy under CPU PyTorch (the `RUNS`
  snippets) and fails if a copy does not raise at its recorded line (`--deps DIR` is put
  on the runner's path, for einops and the projects' light dependencies);
- `--tools` runs mypy and pyright on every copy: a bug is seen when the tool reports an
  error on its line that it does not report on the unmodified file (both report type
  errors on these files, some on the very lines the copies raise at); `--pytea` runs
  PyTea (a built `ropas/pytea` folder) on an entry script per copy that builds the module
  and calls it as the `RUNS` snippet does.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from torch_corpus_data import BUGS, PROJECTS, RUNS, SWEEP, SWEPT, Bug, Project

HERE = Path(__file__).resolve().parent


@dataclass
class Row:
    files: int = 0
    bugs: int = 0
    at_line: int = 0
    elsewhere: int = 0
    missed: int = 0
    alarms: int = 0
    errors: int = 0
    times: list[float] = field(default_factory=list)
    host_times: list[float] = field(default_factory=list)
    known: int = 0
    partial: int = 0
    unknown: int = 0
    peers: dict[str, int] = field(default_factory=dict)


def materialise(sources: Path, project: Project, out: Path) -> Path:
    """The project's Python files at its pinned commit, under `out/owner+name`."""
    key = project.name.replace("/", "+")
    src, dest = sources / key, out / key
    if project.wheel:
        return _installed(src, project, dest)
    gitdir = next((p for p in (src / "repo", src) if (p / "HEAD").is_file()), None)
    if gitdir is not None and not (src / ".git").exists():
        listing = subprocess.run(
            ["git", f"--git-dir={gitdir}", "ls-tree", "-r", project.commit],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        blobs = [
            (line.split()[2], line.split("\t", 1)[1])
            for line in listing.splitlines()
            if (line.endswith(".py") or line.endswith("\tREADME.md")) and " blob " in line
        ]  # the README too: its usage examples state configurations
        batch = subprocess.run(
            ["git", f"--git-dir={gitdir}", "cat-file", "--batch"],
            input="".join(f"{obj}\n" for obj, _ in blobs).encode(),
            capture_output=True, check=True,
        ).stdout  # fmt: skip
        pos = 0
        for _, path in blobs:
            header_end = batch.index(b"\n", pos)
            size = int(batch[pos:header_end].split()[2])
            body = batch[header_end + 1 : header_end + 1 + size]
            pos = header_end + 1 + size + 1
            target = dest / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(body)
        return dest
    if not src.is_dir():
        raise SystemExit(f"{src}: no checkout or git directory of {project.name}")
    head = subprocess.run(
        ["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    if head and head != project.commit:
        print(f"warning: {src} is at {head[:12]}, the corpus pins {project.commit[:12]}")
    shutil.copytree(src, dest, ignore=_not_python)
    return dest


def _installed(src: Path, project: Project, dest: Path) -> Path:
    """A project installed from its wheel (`pip install --no-deps --target SRC NAME==VERSION`):
    the whole tree is copied, compiled extensions included, for `--run` to import it."""
    name, version = project.wheel.split("==")
    meta = src / f"{name}-{version}.dist-info"
    if not meta.is_dir():
        raise SystemExit(f"{src}: no {project.wheel} installed there (pip install --target)")
    shutil.copytree(src, dest, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def _not_python(folder: str, names: list[str]) -> list[str]:
    keep = (".py", "README.md")
    return [n for n in names if n == ".git" or (not n.endswith(keep) and "." in n)]


def patched(text: str, bug: Bug) -> str:
    lines = text.splitlines(keepends=True)
    if lines[bug.line - 1].count(bug.old) != 1:
        raise SystemExit(f"{bug.file}:{bug.line}: `{bug.old}` is not on that line once")
    lines[bug.line - 1] = lines[bug.line - 1].replace(bug.old, bug.new)
    return "".join(lines)


def check(path: Path, text: str) -> tuple[set[int] | None, float, float, tuple[int, int, int]]:
    """Lines with a diagnostic (None: an internal error), CPU seconds for the whole check
    and for host analysis alone (CPU time: the machine may be shared), and the coverage."""
    import ast

    from mimir.check import check_source
    from mimir.host import check_host
    from mimir.parse.module import read_module
    from mimir.parse.spans import SourceFile

    start = time.process_time()
    try:
        found = check_source(str(path), text).diagnostics
    except Exception:  # noqa: BLE001 - an internal error is what is measured
        traceback.print_exc()
        return None, time.process_time() - start, 0.0, (0, 0, 0)
    seconds = time.process_time() - start
    start = time.process_time()
    host = check_host(read_module(SourceFile(str(path), text), ast.parse(text)))
    host_seconds = time.process_time() - start
    return {d.span.line for d in found}, seconds, host_seconds, host.coverage.counts


def run_copy(root: Path, project: Project, file: str, text: str, deps: list[str]) -> dict:
    module = file[len(project.path) + 1 if project.path else 0 : -3].replace("/", ".")
    job = {
        "path": [str(root / project.path) if project.path else str(root), *deps],
        "module": module.removesuffix(".__init__"),
        "file": str(root / file),
        "text": text,
        "run": RUNS[(project.name, file)],
    }
    out = subprocess.run(
        [sys.executable, str(HERE / "torch_corpus_run.py")],
        input=json.dumps(job), capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    try:
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {"line": "?", "error": out.stderr[-400:]}


def tool_lines(tool: str, root: Path, path: Path) -> set[int] | None:
    """Lines of `path` on which mypy or pyright reports an error (None: not installed)."""
    if tool == "mypy":
        cmd = [sys.executable, "-m", "mypy", "--ignore-missing-imports", "--no-error-summary"]
        if subprocess.run([*cmd[:3], "--version"], capture_output=True).returncode:
            return None
        cache = root.parent / ".mypy_cache"  # shared by every copy: torch is read once
        out = subprocess.run(
            [*cmd, "--cache-dir", str(cache), "--follow-imports=silent", str(path)],
            capture_output=True, text=True, cwd=root,
        ).stdout  # fmt: skip
        return {
            int(row.split(":")[1])
            for row in out.splitlines()
            if row.startswith(str(path)) and ": error:" in row
        }
    local = HERE / "node_modules" / ".bin" / "pyright"
    exe = str(local) if local.exists() else shutil.which("pyright")
    if exe is None:
        return None
    out = subprocess.run(
        [exe, "--outputjson", "--pythonpath", sys.executable, str(path)],
        capture_output=True, text=True, cwd=root,
    ).stdout  # fmt: skip
    return {
        d["range"]["start"]["line"] + 1
        for d in json.loads(out or "{}").get("generalDiagnostics", [])
        if d.get("severity") == "error"
    }


def pytea_lines(pytea: Path, root: Path, project: Project, bug: Bug, text: str) -> set[int] | None:
    """Lines of the copy PyTea reports a violated constraint at (None: it gave no verdict)."""
    target = root / bug.file
    module = bug.file[len(project.path) + 1 if project.path else 0 : -3].replace("/", ".")
    entry = (root / project.path if project.path else root) / "pytea_entry.py"
    entry.write_text(
        f"import torch\nimport {module} as m\n" + RUNS[(project.name, bug.file)], "utf-8"
    )
    original = target.read_text("utf-8")
    target.write_text(text, "utf-8")
    try:
        out = subprocess.run(
            ["python", str(pytea / "bin" / "pytea.py"), str(entry)],
            capture_output=True, text=True, timeout=300, cwd=entry.parent,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return None
    finally:
        target.write_text(original, "utf-8")
        entry.unlink()
    lines = set()
    for row in (out.stdout + out.stderr).splitlines():
        if target.name in row and "line" in row:
            for word in row.replace(",", " ").replace(":", " ").split():
                if word.isdigit():
                    lines.add(int(word))
    return lines


def main(sources: Path, run: bool, tools: bool, pytea: Path | None, deps: list[str]) -> int:
    rows: dict[str, Row] = defaultdict(Row)
    unmodified: dict[tuple[str, str], set[int] | None] = {}
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        roots = {p.name: materialise(sources, p, out) for p in PROJECTS}
        print(f"{'file':<58}{'result':>10}{'ms':>7}{'host ms':>9}  coverage")
        for p in PROJECTS:
            row = rows[p.name]
            for file in p.files:
                path = roots[p.name] / file
                text = path.read_text("utf-8")
                lines, seconds, host_seconds, counts = check(path, text)
                row.files += 1
                row.times.append(seconds)
                row.host_times.append(host_seconds)
                k, q, u = counts
                row.known, row.partial, row.unknown = (
                    row.known + k,
                    row.partial + q,
                    row.unknown + u,
                )
                if lines is None:
                    row.errors += 1
                else:
                    row.alarms += len(lines)
                shown = (
                    "ERROR" if lines is None else "clean" if not lines else f"{len(lines)} alarm"
                )
                total = max(1, k + q + u)
                print(
                    f"{p.name.split('/')[1] + '/' + file:<58}{shown:>10}{seconds * 1000:>7.0f}"
                    f"{host_seconds * 1000:>9.0f}  {round(100 * k / total)}% known, "
                    f"{round(100 * q / total)}% partly, {round(100 * u / total)}% unknown"
                )
                if run and (p.name, file) in RUNS:
                    got = run_copy(roots[p.name], p, file, text, deps)
                    if got["line"] is not None:
                        failures += 1
                        print(f"  RUN: the unmodified file raised: {got}")
        print()
        print(f"{'bug':<58}{'raises':>7}{'result':>11}")
        for bug in BUGS:
            p = next(q for q in PROJECTS if q.name == bug.project)
            row = rows[bug.project]
            path = roots[bug.project] / bug.file
            text = patched(path.read_text("utf-8"), bug)
            lines, _, _, _ = check(path, text)
            row.bugs += 1
            if lines is None:
                row.errors += 1
                result = "ERROR"
            elif bug.raises in lines:
                row.at_line += 1
                result = "at line"
            elif lines:
                row.elsewhere += 1
                result = "elsewhere"
            else:
                row.missed += 1
                result = "missed"
            name = f"{bug.project.split('/')[1]}/{bug.file}:{bug.line}"
            print(f"{name:<58}{bug.raises:>7}{result:>11}  {bug.what}")
            if run:
                got = run_copy(roots[bug.project], p, bug.file, text, deps)
                if got["line"] != bug.raises:
                    failures += 1
                    print(f"  RUN: raised at {got['line']}, not {bug.raises}: {got['error']}")
            if tools:
                original = path.read_text("utf-8")
                for tool in ("mypy", "pyright"):
                    key = (tool, str(path))
                    if key not in unmodified:  # the tool's errors on the file as published
                        unmodified[key] = tool_lines(tool, roots[bug.project], path)
                path.write_text(text, "utf-8")
                try:
                    for tool in ("mypy", "pyright"):
                        seen = tool_lines(tool, roots[bug.project], path)
                        if seen is not None:
                            new = seen - (unmodified[(tool, str(path))] or set())
                            row.peers[tool] = row.peers.get(tool, 0) + (bug.raises in new)
                finally:
                    path.write_text(original, "utf-8")
            if pytea is not None:
                seen = pytea_lines(pytea, roots[bug.project], p, bug, text)
                row.peers["PyTea"] = row.peers.get("PyTea", 0) + bool(seen and bug.raises in seen)
    _table(rows)
    return 1 if failures else 0


def sweep(sources: Path) -> int:
    """Every Python file under the `SWEEP` folders of each project, checked unmodified:
    each diagnostic is printed (to be looked at: a false alarm or a real bug), each
    exception is an internal error, and a file over 1 s of CPU time is named."""
    errors = 0
    print(f"{'project':<34}{'files':>7}{'flagged':>9}{'diags':>7}{'errors':>8}{'ms/file':>9}"
          f"{'max ms':>8}  slowest")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for p in (*PROJECTS, *SWEPT):
            root = materialise(sources, p, Path(tmp))
            files = sorted(
                f
                for prefix in SWEEP[p.name]
                for f in (root / prefix).rglob("*.py")
                if "__pycache__" not in f.parts
            )
            flagged = diags = failed = 0
            times: list[tuple[float, str]] = []
            for f in files:
                rel = str(f.relative_to(root))
                try:
                    text = f.read_text("utf-8")
                except (OSError, UnicodeDecodeError):
                    continue
                lines, seconds, _, _ = check(f, text)
                times.append((seconds, rel))
                if lines is None:
                    failed += 1
                    print(f"  ERROR {p.name} {rel}")
                elif lines:
                    flagged += 1
                    diags += len(lines)
                    print(f"  {p.name} {rel}: diagnostics at lines {sorted(lines)}")
                if seconds > 1.0:
                    print(f"  {p.name} {rel}: {seconds * 1000:.0f} ms")
            errors += failed
            mean = sum(t for t, _ in times) / len(times) * 1000 if times else 0
            worst = max(times, default=(0.0, "-"))
            print(f"{p.name:<34}{len(files):>7}{flagged:>9}{diags:>7}{failed:>8}{mean:>9.0f}"
                  f"{worst[0] * 1000:>8.0f}  {worst[1]}")  # fmt: skip
    return 1 if errors else 0


def _table(rows: dict[str, Row]) -> None:
    print()
    peers = sorted({k for r in rows.values() for k in r.peers})
    head = (
        f"{'project':<34}{'files':>6}{'bugs':>6}{'at line':>9}{'elsewhere':>10}{'missed':>8}"
        f"{'alarms':>8}{'errors':>8}{'known':>7}{'ms/file':>9}{'max ms':>8}{'host ms':>9}"
    )
    print(head + "".join(f"{p:>9}" for p in peers))
    total = Row()
    for name, r in rows.items():
        _line(name, r, peers)
        for f in ("files", "bugs", "at_line", "elsewhere", "missed", "alarms", "errors"):
            setattr(total, f, getattr(total, f) + getattr(r, f))
        total.known, total.partial, total.unknown = (
            total.known + r.known, total.partial + r.partial, total.unknown + r.unknown
        )  # fmt: skip
        total.times += r.times
        total.host_times += r.host_times
        for k, v in r.peers.items():
            total.peers[k] = total.peers.get(k, 0) + v
    _line("all", total, peers)


def _line(name: str, r: Row, peers: list[str]) -> None:
    cov = r.known + r.partial + r.unknown
    known = f"{round(100 * r.known / cov)}%" if cov else "-"
    mean = sum(r.times) / len(r.times) * 1000 if r.times else 0
    host = sum(r.host_times) / len(r.host_times) * 1000 if r.host_times else 0
    print(
        f"{name:<34}{r.files:>6}{r.bugs:>6}{r.at_line:>9}{r.elsewhere:>10}{r.missed:>8}"
        f"{r.alarms:>8}{r.errors:>8}{known:>7}{mean:>9.0f}{max(r.times, default=0) * 1000:>8.0f}"
        f"{host:>9.0f}" + "".join(f"{r.peers.get(p, 0):>9}" for p in peers)
    )
