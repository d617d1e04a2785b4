"""ARCHITECTURE.md names only paths and modules that exist.

The map is worth reading only while it is true: every path it names in backticks
(`mimir/codegen/schedule/`, `tests/test_layers.py`, a file named within its folder's
section, such as `launches.py`) is a file or folder of the repository, and every dotted
`mimir.` module it names can be found.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "ARCHITECTURE.md"
_SUFFIXES = (".py", ".md", ".json", ".yml", ".c", ".h", ".js", ".ts", ".toml")
# files of a user's project or of a compiler's output that the page names, not the repository's
_NOT_OURS = {"mimir.toml", "NAME.manifest.json"}


def _tracked() -> list[str]:
    """The repository's files (untracked ones too, so a new file counts before a commit)."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [p for p in listed if (REPO / p).exists()]


def _named() -> list[str]:
    text = PAGE.read_text(encoding="utf-8")
    return re.findall(r"`([^`\s]+)`", text)


def _is_path(token: str) -> bool:
    token = token.split("::")[0]
    return ("/" in token and not token.startswith(("http", "$"))) or token.endswith(_SUFFIXES)


def test_every_path_the_architecture_page_names_exists() -> None:
    files = _tracked()
    folders = {str(Path(f).parent) + "/" for f in files}
    folders |= {"/".join(f.split("/")[:k]) + "/" for f in files for k in range(1, f.count("/"))}
    missing = []
    for token in _named():
        if not _is_path(token) or token in _NOT_OURS or "<" in token or "*" in token:
            continue
        path = token.rstrip("/")
        if (REPO / path).exists():
            continue
        # a name within the section's folder (`launches.py`, `ptx/`): some file or folder
        # of the repository ends with it
        suffix = "/" + path
        if any(f.endswith(suffix) for f in files) or any(d.endswith(suffix + "/") for d in folders):
            continue
        missing.append(token)
    assert not missing, f"ARCHITECTURE.md names paths that do not exist: {sorted(set(missing))}"


def test_every_module_the_architecture_page_names_exists() -> None:
    missing = []
    for token in _named():
        if not re.fullmatch(r"mimir(\.\w+)+", token):
            continue
        parts = token.split(".")
        # the longest prefix that is a module or a package; what follows is a name in it
        for k in range(len(parts), 0, -1):
            base = REPO.joinpath(*parts[:k])
            if base.with_suffix(".py").exists() or (base / "__init__.py").exists():
                break
        else:
            missing.append(token)
    assert not missing, f"ARCHITECTURE.md names modules that do not exist: {missing}"


def test_the_page_does_not_cite_what_the_repository_lacks() -> None:
    """Docstrings cite ARCHITECTURE.md, not design notes kept outside the repository."""
    citing = [
        f
        for f in _tracked()
        if f.endswith(".py") and "DESIGN" + ".md" in (REPO / f).read_text(encoding="utf-8")
    ]
    assert not citing, citing
