"""Reading inputs and writing outputs without trusting the file system.

Inputs: `read_regular` reads only regular files, and at most `limit` bytes, so
a FIFO named `x.py` cannot hang a run and a `*.py` link to `/dev/zero` cannot
exhaust memory. The file is opened without blocking and checked with `fstat`
on the open descriptor (not on the name, which could change in between).

Outputs: `check_writable` validates a path before a command writes anything
(too long a name, a parent that is a file, `/proc`, an unwritable folder), and
`write_atomic` writes through a temporary file in the same folder and
`os.replace`s it into place. `os.replace` swaps the directory entry itself, so
a symlink already at the target is replaced, never followed: nothing outside
the output folder is written. A failed write leaves the old file as it was.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from pathlib import Path

# Files larger than this are skipped (GPU003) unless `max-file-size` says otherwise.
# Checking costs memory in proportion to the source: about 200 MB per MB of kernel code on the
# command line and 310 MB per MB in the language server, which keeps the syntax tree for its
# queries (benchmarks/lsp_memory.py; RECEIPTS.md); at 2 MiB both stay under 1 GB.
DEFAULT_MAX_FILE_BYTES = 2 * 1024 * 1024


class InputError(OSError):
    """An input that is not read: `code` is GPU002 (unreadable) or GPU003 (too large)."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


class OutputError(Exception):
    """An output path that cannot be written; the message names the path and why."""


def read_regular(path: Path | str, limit: int) -> bytes:
    """The bytes of the regular file at `path`, or `InputError` saying why not."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise InputError("GPU002", _reason(err)) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            try:  # a folder `discover` could not list: say why
                os.listdir(path)
            except OSError as err:
                raise InputError("GPU002", f"cannot list folder: {_reason(err)}") from None
            raise InputError("GPU002", "is a directory")
        if not stat.S_ISREG(info.st_mode):
            raise InputError("GPU002", f"not a regular file ({_kind(info.st_mode)})")
        if info.st_size > limit:
            raise InputError("GPU003", too_large(info.st_size, limit))
        chunks = []
        size = 0
        while size <= limit:  # the file may grow after fstat: never read past the limit
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise InputError("GPU003", too_large(size, limit))
        return b"".join(chunks)
    except InputError:
        raise
    except OSError as err:
        raise InputError("GPU002", _reason(err)) from None
    finally:
        os.close(fd)


def too_large(size: int, limit: int) -> str:
    """The GPU003 message for an input of `size` bytes over the `limit`."""
    return (
        f"skipped: too large ({size:,} bytes; the limit is {limit:,}, "
        "raise it with `max-file-size` or `--max-file-size`)"
    )


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"


def _reason(err: OSError) -> str:
    if err.errno == errno.ELOOP:
        return "too many levels of symbolic links (a link loop)"
    return err.strerror or str(err)


def parse_size(value: object, where: str) -> int:
    """A byte count: a positive integer, or a string such as `512K`, `10M`, `1G` (powers of 1024).

    Raises ValueError naming `where`.
    """
    if isinstance(value, bool):
        raise ValueError(f"{where} must be a size in bytes (`10M`), got a boolean")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str):
        text = value.strip().upper().removesuffix("B").removesuffix("I")
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text[:-1] if scale > 1 else text
        if not digits.isdigit():
            raise ValueError(f"{where} must be a size in bytes such as `10M`, got `{value}`")
        number = int(digits) * scale
    else:
        raise ValueError(f"{where} must be a size in bytes (`10M`), got {type(value).__name__}")
    if number < 1:
        raise ValueError(f"{where} must be at least 1 byte, got {value!r}")
    return number


# ------------------------------------------------------------------ outputs


def check_writable(target: Path, *, directory: bool = False) -> None:
    """Raise `OutputError` unless a file (or, with `directory`, a folder) could be made at `target`.

    Nothing is created. The parts of `target` that exist must be folders (the
    last one may be a file or a symlink to replace, unless `directory`); the
    deepest existing folder must be writable; every name must fit the file
    system's limit.
    """
    target = Path(target)
    # os.path's tests, not Path's: they answer False on any error (EACCES, ELOOP)
    name_max = _name_max(target)
    for part in target.parts:
        if len(os.fsencode(part)) > name_max:
            raise OutputError(f"`{target}`: file name too long ({len(part)} characters)")
    if directory and os.path.lexists(target) and not os.path.isdir(target):
        raise OutputError(f"`{target}`: exists and is not a directory")
    if not directory and os.path.isdir(target) and not os.path.islink(target):
        raise OutputError(f"`{target}`: is a directory")
    existing = target if directory else target.parent
    while not os.path.lexists(existing):
        parent = existing.parent
        if parent == existing:
            break
        existing = parent
    if not os.path.isdir(existing):
        raise OutputError(f"`{target}`: `{existing}` is not a directory")
    if _pseudo_fs(existing):
        raise OutputError(f"`{target}`: `{existing}` is not a place for output files")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OutputError(f"`{target}`: `{existing}` is not writable")


def _name_max(path: Path) -> int:
    probe = path
    while not os.path.exists(probe) and probe.parent != probe:
        probe = probe.parent
    try:
        return os.pathconf(probe, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


def _pseudo_fs(path: Path) -> bool:
    """Whether `path` lies in /proc or /sys, where files are not files."""
    resolved = Path(os.path.realpath(path))
    return any(resolved == Path(p) or Path(p) in resolved.parents for p in ("/proc", "/sys"))


def check_inside(directory: Path, target: Path) -> None:
    """Raise `OutputError` when a folder between `directory` and `target` is a symlink.

    The target itself may be a link (`write_all` replaces it); a linked folder
    would carry the write outside `directory`.
    """
    current = Path(directory)
    for part in Path(target).relative_to(directory).parts[:-1]:
        current = current / part
        if os.path.islink(current):
            raise OutputError(f"`{current}`: is a symbolic link; refusing to write through it")
        if os.path.lexists(current) and not os.path.isdir(current):
            raise OutputError(f"`{target}`: `{current}` is not a directory")


def write_all(files: dict[Path, str | bytes]) -> None:
    """Write every file or none: stage each as a temporary file beside its target, then rename.

    Raises `OutputError` when any write fails; the targets are then as they were
    (folders created for them are removed again).
    """
    staged: list[tuple[str, Path]] = []
    created: list[Path] = []
    current: Path | None = None
    done = False
    try:
        for current, content in files.items():
            data = content.encode("utf-8") if isinstance(content, str) else content
            created += _make_parents(current.parent)
            staged.append((_stage(current, data), current))
        for tmp, current in staged:
            os.replace(tmp, current)
        done = True
    except OSError as err:
        raise OutputError(f"`{current}`: cannot write: {_reason(err)}") from None
    finally:
        if not done:
            for tmp, _ in staged:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
            for folder in reversed(created):
                with contextlib.suppress(OSError):
                    folder.rmdir()


def _make_parents(folder: Path) -> list[Path]:
    missing = []
    while not os.path.lexists(folder):
        missing.append(folder)
        folder = folder.parent
    for path in reversed(missing):
        path.mkdir()
    return list(reversed(missing))


def _stage(target: Path, data: bytes) -> str:
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".mimir-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o666 & ~_umask())
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp


def write_atomic(target: Path, content: str | bytes) -> None:
    """Write `content` to `target` via a temporary file and a rename (never through a symlink).

    Raises `OutputError` when the write fails; the old `target` is then unchanged.
    """
    write_all({Path(target): content})


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
