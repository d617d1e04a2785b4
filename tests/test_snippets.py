"""The shell snippets of the README and the docs run as written, on this GPU-less machine.

Every ```sh block of the repository's Markdown runs, from the root of a copy of the
repository, in a fresh virtual environment where nothing of Mimir is installed until the
README's `pip install .` installs it (the environment sees the test environment's other
packages, so nothing is downloaded that is installed already). A block is marked by an
HTML comment on the line before its fence, which renders as nothing:

- `<!-- not run here: WHY -->`: the block cannot run on this machine (a GPU, VS Code, the
  whole suite); WHY says so;
- `<!-- exit status N -->`: the block ends with status N (default 0);
- `<!-- run: python -->` before a ```python block: run it too, with the environment's
  `python`, from the same root;
- `<!-- output of the block above -->` before a plain block: the block above prints it,
  at the end of its output.

Each block runs in its own `bash -e` from the root, in page order; pages run in the order
of `PAGES` (the README first: it installs Mimir), then any other page that has a block.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import pytest
from harness import require, require_tool

ROOT = Path(__file__).resolve().parent.parent
PAGES = [
    "README.md",
    "docs/hosts.md",
    "docs/hosts-js.md",
    "zoo/README.md",
    "js/README.md",
    "docs/editors.md",
    "docs/ci.md",
    "docs/compiling.md",
]
# what each page's runnable blocks use beyond Python
NEEDS = {
    "docs/hosts.md": ["wgpu", "make", "cc"],
    "docs/hosts-js.md": ["node", "npm", "chromium"],
    "zoo/README.md": ["wgpu"],
}
_FENCE = re.compile(r"^```(\S*)\s*$")
_MARK = re.compile(
    r"^<!-- (not run here: .+|exit status \d+|run: python|output of the block above) -->$"
)


@dataclass
class Block:
    page: str
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    mark: str | None

    @property
    def runs(self) -> bool:
        if self.lang == "sh":
            return not (self.mark or "").startswith("not run here")
        return self.lang == "python" and self.mark == "run: python"

    @property
    def status(self) -> int:
        m = re.fullmatch(r"exit status (\d+)", self.mark or "")
        return int(m.group(1)) if m else 0


def blocks(page: str) -> list[Block]:
    lines = (ROOT / page).read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start = i
        i += 1
        body = []
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        before = lines[start - 1] if start else ""
        mark = _MARK.match(before)
        out.append(Block(page, start + 1, m.group(1), "\n".join(body) + "\n", mark and mark[1]))
        i += 1
    return out


def _markdown_pages() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [p for p in listed if p != "RECEIPTS.md" and (ROOT / p).is_file()]


def test_every_shell_block_runs_or_says_why_not() -> None:
    """A new ```sh block anywhere is run by this test unless it is marked; the marks used are
    the ones this test knows, and every page with a block is in PAGES."""
    unknown = []
    for page in _markdown_pages():
        text = (ROOT / page).read_text(encoding="utf-8")
        unknown += [f"{page}: {m}" for m in re.findall(r"^<!-- .* -->$", text, re.M)
                    if "run" in m and not _MARK.match(m)]  # fmt: skip
        if any(b.lang == "sh" for b in blocks(page)):
            assert page in PAGES, f"{page} has shell blocks: add it to PAGES"
    assert unknown == []
    assert sum(b.runs for page in PAGES for b in blocks(page)) >= 10


# ---------------------------------------------------------------- the sandbox


def _copy_repository(target: Path) -> None:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        source = ROOT / name
        if not source.is_file() or source.is_symlink():
            continue
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target / name)


@dataclass
class Sandbox:
    root: Path
    env: dict[str, str]
    scripts: Path


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Sandbox:
    base = tmp_path_factory.mktemp("snippets")
    root = base / "mimir"
    _copy_repository(root)
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    inner = subprocess.run(
        [str(bin_dir / "python"), "-c", purelib], capture_output=True, text=True, check=True
    ).stdout.strip()
    # this environment's packages (wgpu, numpy...), not its Mimir: a .pth adds the folders
    # to sys.path, and the editable install's own .pth files in them are not run from there
    paths = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(inner) / "_test_environment.pth").write_text("\n".join(sorted(paths)) + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        VIRTUAL_ENV=str(venv),
        XDG_RUNTIME_DIR=env.get("XDG_RUNTIME_DIR", "/tmp"),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        npm_config_prefer_offline="true",
        npm_config_audit="false",
        npm_config_fund="false",
        npm_config_update_notifier="false",
    )
    scripts = base / "scripts"
    scripts.mkdir()
    return Sandbox(root, env, scripts)


def _run(sandbox: Sandbox, block: Block) -> subprocess.CompletedProcess[str]:
    where = f"{block.page}:{block.line}"
    if block.lang == "python":
        script = sandbox.scripts / f"{block.page.replace('/', '_')}_{block.line}.py"
        script.write_text(block.text)
        command = ["python", str(script)]
    else:
        command = ["bash", "-e", "-c", block.text]
    run = subprocess.run(
        command, cwd=sandbox.root, env=sandbox.env, capture_output=True, text=True, timeout=900
    )
    assert run.returncode == block.status, (
        f"{where} exited {run.returncode}, not {block.status}:\n{block.text}\n"
        f"--- stdout\n{run.stdout[-3000:]}\n--- stderr\n{run.stderr[-3000:]}"
    )
    return run


def _run_page(sandbox: Sandbox, page: str) -> None:
    for tool in NEEDS.get(page, []):
        if tool == "cc":
            found = any(shutil.which(c) for c in ("cc", "gcc", "clang"))
            require(found, "no C compiler (cc, gcc or clang) on PATH")
        else:
            require_tool(tool)
    found = blocks(page)
    last: subprocess.CompletedProcess[str] | None = None
    for block in found:
        if block.mark == "output of the block above":
            assert last is not None, f"{page}:{block.line}: no block above to compare with"
            assert last.stdout.endswith(block.text), (
                f"{page}:{block.line}: the block above printed\n{last.stdout[-2000:]}"
            )
            continue
        if block.runs:
            last = _run(sandbox, block)


@pytest.fixture(scope="module")
def installed(sandbox: Sandbox) -> Sandbox:
    """The README's set-up run in the sandbox: Mimir installed from the copy."""
    _run_page(sandbox, "README.md")
    return sandbox


def test_the_readme_installs_and_checks_as_written(installed: Sandbox) -> None:
    which = shutil.which("mimir", path=installed.env["PATH"])
    assert which is not None and Path(which).is_relative_to(Path(installed.env["VIRTUAL_ENV"]))
    where = subprocess.run(
        ["python", "-c", "import mimir, sys; print(mimir.__file__)"],
        cwd="/", env=installed.env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert where.startswith(installed.env["VIRTUAL_ENV"])  # the installed copy, not a checkout


@pytest.mark.parametrize("page", [p for p in PAGES if p != "README.md"])
def test_the_quick_starts_run_as_written(installed: Sandbox, page: str) -> None:
    _run_page(installed, page)
