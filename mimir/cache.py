"""The per-file result cache: re-checking an unchanged file costs one hash.

An entry holds one file's diagnostics after inline suppressions (serialized
with the JSON renderer's `to_dict`), under a key that is the sha256 of

- the file's bytes and the path it is shown as (diagnostics carry the path);
- the settings that change a file's own result (the Z3 timeout). `select`,
  `ignore`, per-file ignores and baselines filter results after the cache, so
  changing them reuses every entry;
- the tool: `mimir.__version__`, the z3 version, and a hash of Mimir's own
  source files, so a development checkout never serves results an older
  checker produced.

Entries live in `.mimir_cache/` in the project root (`MIMIR_CACHE_DIR`
overrides it), which gets a `CACHEDIR.TAG` and a `.gitignore` of `*`. Results
holding GPU050 (the solver ran out of time) are not stored: a timeout depends
on the machine's load, not only on the file. The cache never fails a run:
an entry that cannot be read or written is a miss.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

import mimir
from mimir.diagnostics.diagnostic import Diagnostic
from mimir.diagnostics.render.json import from_dict, to_dict

CACHE_DIR_NAME = ".mimir_cache"
ENV_CACHE_DIR = "MIMIR_CACHE_DIR"
FORMAT = 1
UNCACHED_CODES = frozenset({"GPU050"})

_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by mimir.\n"
    "# For information about cache directory tags see https://bford.info/cachedir/\n"
)


@dataclass(frozen=True)
class Entry:
    diagnostics: list[Diagnostic]
    unreadable: bool


def cache_dir(root: Path) -> Path:
    """Where the cache lives for a project rooted at `root`."""
    override = os.environ.get(ENV_CACHE_DIR)
    return Path(override) if override else root / CACHE_DIR_NAME


@cache
def tool_fingerprint() -> str:
    """A hash of everything about Mimir itself that could change a file's result."""
    h = hashlib.sha256()
    h.update(f"mimir {mimir.__version__}\0".encode())
    try:
        h.update(f"z3 {metadata.version('z3-solver')}\0".encode())
    except metadata.PackageNotFoundError:  # pragma: no cover - z3 is a dependency
        h.update(b"z3 ?\0")
    package = Path(mimir.__file__).resolve().parent
    for source in sorted(package.rglob("*.py")):
        h.update(source.relative_to(package).as_posix().encode() + b"\0")
        with contextlib.suppress(OSError):
            h.update(source.read_bytes())
    return h.hexdigest()


class Cache:
    """Entries under `directory`, salted with the tool and the result-relevant `settings`."""

    def __init__(self, directory: Path, settings: dict[str, Any]) -> None:
        self.directory = directory
        salt = json.dumps({"format": FORMAT, "settings": settings}, sort_keys=True)
        self._salt = hashlib.sha256(f"{tool_fingerprint()}\0{salt}".encode()).digest()
        self.hits = 0
        self.misses = 0

    def key(self, path: str, content: bytes) -> str:
        h = hashlib.sha256(self._salt)
        h.update(path.encode("utf-8", "surrogateescape") + b"\0")
        h.update(content)
        return h.hexdigest()

    def _file(self, key: str) -> Path:
        return self.directory / f"v{FORMAT}" / key[:2] / f"{key}.json"

    def get(self, key: str) -> Entry | None:
        try:
            data = json.loads(self._file(key).read_text(encoding="utf-8"))
            entry = Entry([from_dict(d) for d in data["diagnostics"]], bool(data["unreadable"]))
        except (OSError, ValueError, KeyError, TypeError):
            self.misses += 1
            return None
        self.hits += 1
        return entry

    def put(self, key: str, diagnostics: list[Diagnostic], unreadable: bool) -> None:
        if any(d.code in UNCACHED_CODES for d in diagnostics):
            return
        target = self._file(key)
        data = {"unreadable": unreadable, "diagnostics": [to_dict(d) for d in diagnostics]}
        tmp: str | None = None
        try:
            self._prepare()
            target.parent.mkdir(parents=True, exist_ok=True)
            # Write then rename, so a reader never sees half an entry.
            fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh)
            os.replace(tmp, target)
        except OSError:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)

    def _prepare(self) -> None:
        if (self.directory / "CACHEDIR.TAG").exists():
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "CACHEDIR.TAG").write_text(_TAG)
        (self.directory / ".gitignore").write_text("# Created by mimir automatically.\n*\n")
