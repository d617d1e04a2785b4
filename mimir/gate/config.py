"""Project configuration: `mimir.toml`, or `[tool.mimir]` in `pyproject.toml`.

Discovery walks up from the current directory, as ruff does: in each
directory a `mimir.toml` (keys at the top level) wins over a `pyproject.toml`
that has a `[tool.mimir]` table; a `pyproject.toml` without one is passed
over. `--config FILE` names the file instead. The directory holding the file
is the project root: globs are relative to it and the cache lives in it. With
no file, the defaults apply and the current directory is the root.

    [tool.mimir]
    paths = ["src"]                       # more roots for imports between project modules
    include = ["*.py", "*.pyi"]          # files taken when a directory is walked
    exclude = ["tests/fixtures", "legacy/**/*.py"]
    select = ["GPU"]                      # codes or code prefixes to report
    ignore = ["GPU050"]
    per-file-ignores = { "scripts/*.py" = ["GPU031"] }
    backends = ["msl", "wgsl", "ptx", "spirv"]   # default for `compile-gpu`
    z3-timeout = 5000                     # milliseconds per solver query
    max-file-size = "2M"                  # larger files are skipped (GPU003); bytes, K, M, G

A key that is unknown or has the wrong type raises `ConfigError`, whose
message names the file and the key; the command line turns it into exit 2.
Command-line flags override the file (`Config.override`). Nothing here
imports z3.

Glob patterns match POSIX paths relative to the root. A pattern without `/`
matches a file or directory name at any depth (`legacy`, `*_test.py`); a
pattern with `/` is anchored at the root. `*` and `?` stay within one path
segment and `**` spans any number of segments. A pattern that matches a
directory matches everything under it.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from dataclasses import dataclass, field, fields, replace
from functools import cache
from pathlib import Path, PurePosixPath
from typing import Any

from mimir.safeio import DEFAULT_MAX_FILE_BYTES, parse_size

# Matches `mimir.solve.prover.DEFAULT_TIMEOUT_MS` (a test keeps them equal;
# importing the prover here would import z3).
DEFAULT_Z3_TIMEOUT_MS = 5000
BACKENDS = ("msl", "wgsl", "ptx", "spirv")
CONFIG_FILES = ("mimir.toml", "pyproject.toml")
# GPU001, GPU002 and GPU003 mean the input could not be read: the run exits 2
# and the diagnostic is always shown, whatever select, ignore or a baseline say.
UNFILTERED_CODES = frozenset({"GPU001", "GPU002", "GPU003"})


class ConfigError(Exception):
    """A configuration that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class Config:
    paths: tuple[str, ...] = ()  # extra import roots, relative to `root`
    include: tuple[str, ...] = ("*.py", "*.pyi")
    exclude: tuple[str, ...] = ()
    select: tuple[str, ...] = ("GPU",)
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    backends: tuple[str, ...] = BACKENDS
    z3_timeout: int = DEFAULT_Z3_TIMEOUT_MS
    max_file_size: int = DEFAULT_MAX_FILE_BYTES
    # Where the configuration came from; not settings themselves.
    root: Path = field(default_factory=Path.cwd, compare=False)
    source: Path | None = field(default=None, compare=False)

    def override(self, **changes: Any) -> Config:
        """A copy with each change that is not None applied (command-line flags win)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def reports(self, code: str, relpath: str) -> bool:
        """Whether a diagnostic of `code` in the file at `relpath` (root-relative) is shown."""
        if code in UNFILTERED_CODES:
            return True
        if not _matches_code(code, self.select) or _matches_code(code, self.ignore):
            return False
        return not any(
            _matches_code(code, codes)
            for pattern, codes in self.per_file_ignores
            if glob_match(pattern, relpath)
        )

    def included(self, relpath: str) -> bool:
        """Whether a file found by walking a directory is checked."""
        return any(glob_match(p, relpath) for p in self.include) and not self.excluded(relpath)

    def excluded(self, relpath: str) -> bool:
        return any(glob_match(p, relpath) for p in self.exclude)

    def import_roots(self) -> tuple[Path, ...]:
        """Where absolute imports between project modules are looked up (besides a file's
        own package root): the project root, then each of `paths`."""
        return (self.root, *(self.root / p for p in self.paths))

    def relative(self, path: Path | str) -> str:
        """`path` as a POSIX path relative to the root (as given when it lies outside)."""
        p = Path(path)
        try:
            return p.resolve().relative_to(self.root.resolve()).as_posix()
        except (ValueError, OSError, RuntimeError):  # RuntimeError: a symlink loop
            return p.as_posix()

    def normalized(self) -> dict[str, Any]:
        """The settings as plain data, for cache keys and `--show-settings`."""
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.compare:
                value = getattr(self, f.name)
                out[f.name] = (
                    {k: list(v) for k, v in value}
                    if f.name == "per_file_ignores"
                    else list(value)
                    if isinstance(value, tuple)
                    else value
                )
        return out


# ---------------------------------------------------------------- discovery


def find_config_file(start: Path | None = None) -> Path | None:
    """The nearest `mimir.toml`, or `pyproject.toml` with `[tool.mimir]`, at or above `start`."""
    here = (start or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        candidate = directory / "mimir.toml"
        if candidate.is_file():
            return candidate
        candidate = directory / "pyproject.toml"
        if candidate.is_file() and _has_tool_mimir(candidate):
            return candidate
    return None


def load_config(config_file: Path | None = None, start: Path | None = None) -> Config:
    """The configuration from `config_file`, or from the one found above `start`."""
    path = config_file if config_file is not None else find_config_file(start)
    if path is None:
        return Config(root=(start or Path.cwd()).resolve())
    if not path.is_file():
        raise ConfigError(f"{path}: configuration file not found")
    data = _read_toml(path)
    if path.name == "pyproject.toml" or "tool" in data and "mimir" in data.get("tool", {}):
        table = data.get("tool", {}).get("mimir", {})
        where = "[tool.mimir]"
    else:
        table, where = data, "top level"
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: `tool.mimir` must be a table")
    return parse_table(table, path, where)


def parse_table(table: dict[str, Any], path: Path, where: str = "[tool.mimir]") -> Config:
    """Validate one configuration table; every error names `path` and the key."""
    values: dict[str, Any] = {}
    for key, value in table.items():
        spec = _KEYS.get(key)
        if spec is None:
            raise ConfigError(f"{path}: unknown key `{key}` in {where}{_did_you_mean(key)}")
        attr, check = spec
        values[attr] = check(value, f"{path}: `{key}`")
    return Config(root=path.parent.resolve(), source=path, **values)


def _did_you_mean(key: str) -> str:
    close = difflib.get_close_matches(key.replace("_", "-"), list(_KEYS), n=1, cutoff=0.6)
    known = ", ".join(f"`{k}`" for k in _KEYS)
    hint = f"; did you mean `{close[0]}`?" if close else ""
    return f"{hint} (known keys: {known})"


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: invalid TOML: {err}") from None
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not UTF-8 text (byte {err.start}: {err.reason})") from None
    except RecursionError:
        raise ConfigError(f"{path}: invalid TOML: arrays or tables nested too deeply") from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot read: {err.strerror or err}") from None


def _has_tool_mimir(path: Path) -> bool:
    # An unreadable pyproject.toml on the search path is an error, not a pass:
    # it may well hold the settings the user expects.
    data = _read_toml(path)
    return isinstance(data.get("tool"), dict) and "mimir" in data["tool"]


# ---------------------------------------------------------------- validation


def _string_list(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where} must be a list of strings, got {_describe(value)}")
    return tuple(value)


def _globs(value: Any, where: str) -> tuple[str, ...]:
    patterns = _string_list(value, where)
    for p in patterns:
        check_glob(p, where)
    return patterns


def check_glob(pattern: str, where: str) -> None:
    """Raise `ConfigError` naming `where` unless `pattern` is a usable glob."""
    if not pattern.strip():
        raise ConfigError(f"{where} holds an empty pattern")
    try:
        _compile(_normalize_glob(pattern))
    except re.error as err:
        raise ConfigError(f"{where}: `{pattern}` is not a valid glob ({err.msg})") from None


def parse_codes(value: Any, where: str) -> tuple[str, ...]:
    """A list of codes or code prefixes (`GPU011`, `GPU01`, `GPU`), each naming a known code."""
    from mimir.diagnostics.codes import REGISTRY

    items = _string_list(value, where)
    out = []
    for item in items:
        code = item.strip().upper()
        if not code or not any(known.startswith(code) for known in REGISTRY):
            raise ConfigError(
                f"{where}: `{item}` is not a Mimir code or code prefix "
                "(`mimir explain --list` shows them)"
            )
        out.append(code)
    return tuple(out)


def _per_file_ignores(value: Any, where: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be a table of glob = [codes], got {_describe(value)}")
    out = []
    for pattern, listed in value.items():
        key = f'{where[:-1]}."{pattern}"`'
        check_glob(pattern, key)
        out.append((pattern, parse_codes(listed, key)))
    return tuple(out)


def _backends(value: Any, where: str) -> tuple[str, ...]:
    items = _string_list(value, where)
    for item in items:
        if item not in BACKENDS:
            raise ConfigError(
                f"{where}: unknown backend `{item}` (choose from {', '.join(BACKENDS)})"
            )
    return items


def _timeout(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(
            f"{where} must be a positive integer (milliseconds), got {_describe(value)}"
        )
    return value


def _size(value: Any, where: str) -> int:
    try:
        return parse_size(value, where)
    except ValueError as err:
        raise ConfigError(str(err)) from None


def _describe(value: Any) -> str:
    kind = {
        bool: "a boolean",
        int: "an integer",
        float: "a float",
        str: "a string",
        list: "a list",
        dict: "a table",
    }
    return f"{kind.get(type(value), type(value).__name__)} ({value!r})"


_KEYS = {
    "paths": ("paths", _string_list),
    "include": ("include", _globs),
    "exclude": ("exclude", _globs),
    "select": ("select", parse_codes),
    "ignore": ("ignore", parse_codes),
    "per-file-ignores": ("per_file_ignores", _per_file_ignores),
    "backends": ("backends", _backends),
    "z3-timeout": ("z3_timeout", _timeout),
    "max-file-size": ("max_file_size", _size),
}


# ---------------------------------------------------------------- matching


def _matches_code(code: str, selectors: tuple[str, ...]) -> bool:
    return any(code.startswith(s) for s in selectors)


def glob_match(pattern: str, relpath: str) -> bool:
    """Whether `pattern` matches the root-relative POSIX path `relpath` (see the module doc)."""
    pattern = _normalize_glob(pattern)
    parts = PurePosixPath(relpath).parts
    if "/" not in pattern:
        regex = _compile(pattern)
        return any(regex.fullmatch(part) for part in parts)
    regex = _compile(pattern.lstrip("/"))
    return any(regex.fullmatch("/".join(parts[:i])) for i in range(1, len(parts) + 1))


def _normalize_glob(pattern: str) -> str:
    pattern = pattern.strip()
    if pattern.startswith("./"):
        pattern = pattern[2:]
    return pattern.rstrip("/")


@cache
def _compile(pattern: str) -> re.Pattern[str]:
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end]
                negate = body.startswith("!")
                # Every character of a set is literal except `-` between two: escaping
                # keeps `[[:alpha:]]` from reading as a (future) nested set.
                chars = "".join(c if c == "-" else re.escape(c) for c in body[negate:])
                out.append(f"[{'^' if negate else ''}{chars}]")
                i = end + 1
                continue
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out))
