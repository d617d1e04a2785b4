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

The cache folder is not trusted. It may come from a checked-out repository or
a shared CI cache, and its keys are hashes of public information, so anyone can
write an entry for a given file. Each entry therefore carries an HMAC-SHA256,
over its key and its bytes, under a secret that never lives in the cache folder:
`MIMIR_CACHE_SECRET` when set (for CI, from the CI's secret store), else a
random 32-byte key created once per user and machine, mode 0600, at
`$XDG_STATE_HOME/mimir/cache-secret` (`~/.local/state/...`). An entry whose
MAC does not verify, or whose content is not exactly what `put` writes
(`_valid`), is a miss. Without a usable secret the cache is off. Writes never
follow a symbolic link inside the folder, and a default `.mimir_cache` that is
itself a link is not written to.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import stat
import tempfile
from dataclasses import dataclass
from functools import cache, cached_property
from importlib import metadata
from pathlib import Path
from types import EllipsisType
from typing import Any

import mimir
from mimir.diagnostics.diagnostic import Diagnostic
from mimir.diagnostics.render.json import from_dict, to_dict
from mimir.safeio import OutputError, check_inside, read_regular, write_atomic

CACHE_DIR_NAME = ".mimir_cache"
ENV_CACHE_DIR = "MIMIR_CACHE_DIR"
ENV_SECRET = "MIMIR_CACHE_SECRET"
FORMAT = 2  # 2: entries carry a MAC
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


def secret_file() -> Path:
    """Where the per-user, per-machine cache secret lives (never inside a cache folder)."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(Path.home(), ".local", "state")
    return Path(state) / "mimir" / "cache-secret"


def cache_secret() -> bytes | None:
    """The key that authenticates cache entries, or None when there is none to be had."""
    given = os.environ.get(ENV_SECRET)
    if given:
        return hashlib.sha256(b"mimir cache secret\0" + given.encode()).digest()
    try:
        path = secret_file()
        return _read_secret(path) or _create_secret(path)
    except (OSError, RuntimeError, ValueError):
        return None


def _read_secret(path: Path) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        # Only a private regular file of this user's: anyone who can read the
        # secret can forge entries, anyone who can write it can swap it.
        if not stat.S_ISREG(info.st_mode) or info.st_mode & 0o077:
            raise ValueError("cache secret is not a private regular file")
        if hasattr(os, "getuid") and info.st_uid != os.getuid():
            raise ValueError("cache secret belongs to another user")
        data = fh.read(64)
    if len(data) < 32:
        raise ValueError("cache secret is too short")
    return data


def _create_secret(path: Path) -> bytes | None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".cache-secret.")  # mode 0600
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(secrets.token_bytes(32))
        try:
            os.link(tmp, path)  # fails when another run created it first: use theirs
        except FileExistsError:
            pass
    finally:
        os.unlink(tmp)
    return _read_secret(path)


class Cache:
    """Entries under `directory`, salted with the tool and the result-relevant `settings`.

    `secret` authenticates entries (default: `cache_secret()`); with none, every
    lookup is a miss and nothing is written.
    """

    def __init__(
        self, directory: Path, settings: dict[str, Any], secret: bytes | None | EllipsisType = ...
    ) -> None:
        self.directory = directory
        salt = json.dumps({"format": FORMAT, "settings": settings}, sort_keys=True)
        self._salt = hashlib.sha256(f"{tool_fingerprint()}\0{salt}".encode()).digest()
        if secret is not ...:
            self._secret = secret
        self.hits = 0
        self.misses = 0

    @cached_property
    def _secret(self) -> bytes | None:  # looked up on first use: `--no-cache` never creates it
        return cache_secret()

    def key(self, path: str, content: bytes) -> str:
        h = hashlib.sha256(self._salt)
        h.update(path.encode("utf-8", "surrogateescape") + b"\0")
        h.update(content)
        return h.hexdigest()

    def _file(self, key: str) -> Path:
        return self.directory / f"v{FORMAT}" / key[:2] / f"{key}.json"

    def _mac(self, key: str, payload: bytes) -> str:
        assert self._secret is not None
        return hmac.new(self._secret, key.encode() + b"\0" + payload, hashlib.sha256).hexdigest()

    def get(self, key: str) -> Entry | None:
        entry = self._read(key) if self._secret is not None else None
        if entry is None:
            self.misses += 1
        else:
            self.hits += 1
        return entry

    def _read(self, key: str) -> Entry | None:
        try:
            raw = read_regular(self._file(key), MAX_ENTRY_BYTES)
            mac, _, payload = raw.partition(b"\n")
            if not hmac.compare_digest(mac, self._mac(key, payload).encode()):
                return None
            data = json.loads(payload)
            if not _valid(data):
                return None
            entry = Entry([from_dict(d) for d in data["diagnostics"]], data["unreadable"])
            # Exactly what `put` writes, or it is not ours.
            if [to_dict(d) for d in entry.diagnostics] != data["diagnostics"]:
                return None
        except Exception:  # noqa: BLE001 - whatever is wrong with an entry, it is a miss
            return None
        return entry

    def put(self, key: str, diagnostics: list[Diagnostic], unreadable: bool) -> None:
        if self._secret is None or any(d.code in UNCACHED_CODES for d in diagnostics):
            return
        target = self._file(key)
        data = {"unreadable": unreadable, "diagnostics": [to_dict(d) for d in diagnostics]}
        payload = json.dumps(data).encode("utf-8")
        tmp: str | None = None
        try:
            self._prepare()
            check_inside(self.directory, target)  # a planted link would lead the write out
            target.parent.mkdir(parents=True, exist_ok=True)
            # Write then rename, so a reader never sees half an entry.
            fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".tmp")
            with os.fdopen(fd, "wb") as fh:
                fh.write(self._mac(key, payload).encode() + b"\n" + payload)
            os.replace(tmp, target)
        except (OSError, OutputError):
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)

    def _prepare(self) -> None:
        if self.directory.is_symlink() and ENV_CACHE_DIR not in os.environ:
            # `.mimir_cache` linked elsewhere (say, by a checked-out repository): not ours
            raise OutputError(f"{self.directory} is a symbolic link")
        if (self.directory / "CACHEDIR.TAG").exists():
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        # temp file and rename: a link planted at either name is replaced, not written through
        write_atomic(self.directory / "CACHEDIR.TAG", _TAG)
        write_atomic(self.directory / ".gitignore", "# Created by mimir automatically.\n*\n")


MAX_ENTRY_BYTES = 16 * 1024 * 1024
_SPAN_KEYS = {"path": str, "line": int, "column": int, "end_line": int, "end_column": int}
_DIAGNOSTIC_KEYS = {
    "code",
    "severity",
    "message",
    "why",
    "fix",
    "span",
    "labels",
    "counterexample",
    "function",
    "notes",
}


def _valid(data: Any) -> bool:
    """Whether `data` has exactly the shape and types `put` writes."""
    if not isinstance(data, dict) or set(data) != {"unreadable", "diagnostics"}:
        return False
    if not isinstance(data["unreadable"], bool) or not isinstance(data["diagnostics"], list):
        return False
    return all(_valid_diagnostic(d) for d in data["diagnostics"])


def _valid_diagnostic(d: Any) -> bool:
    from mimir.diagnostics.codes import REGISTRY

    if not isinstance(d, dict) or set(d) != _DIAGNOSTIC_KEYS:
        return False
    strings = ("code", "severity", "message", "why", "fix")
    if not all(isinstance(d[k], str) for k in strings) or d["code"] not in REGISTRY:
        return False
    if d["severity"] not in ("error", "warning") or not _valid_span(d["span"]):
        return False
    if not (d["function"] is None or isinstance(d["function"], str)):
        return False
    labels, cex, notes = d["labels"], d["counterexample"], d["notes"]
    if not isinstance(labels, list) or not all(
        isinstance(lab, dict)
        and set(lab) == {"span", "message"}
        and _valid_span(lab["span"])
        and isinstance(lab["message"], str)
        for lab in labels
    ):
        return False
    if not isinstance(cex, dict) or not all(_is_int(v) for v in cex.values()):
        return False
    return isinstance(notes, list) and all(isinstance(n, str) for n in notes)


def _valid_span(span: Any) -> bool:
    if not isinstance(span, dict) or set(span) != set(_SPAN_KEYS):
        return False
    if not isinstance(span["path"], str):
        return False
    numbers = [span[k] for k in ("line", "column", "end_line", "end_column")]
    return all(_is_int(n) and n >= 1 for n in numbers)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
