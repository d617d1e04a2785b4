"""Finding the Python files under the paths given to `mimir check`.

Kept apart from `mimir.check` so that listing files imports neither z3 nor
networkx: a run whose files are all in the result cache never loads them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

# Folders never descended into when a directory is checked.
SKIPPED_DIRS = frozenset(
    {"node_modules", "__pycache__", "site-packages", "build", "dist", "venv", "env"}
)


def discover(paths: Iterable[Path]) -> Iterator[tuple[Path, bool]]:
    """Python files under `paths`; the flag says whether the path was named explicitly.

    Directories are walked recursively in sorted order, skipping hidden folders,
    virtual environments (any folder holding `pyvenv.cfg`) and build outputs.
    A folder that cannot be listed is yielded itself (reading it then reports
    why, GPU002), so one unreadable folder never stops the walk; the caller's
    exclude globs apply to it like to a file.
    """
    for root in paths:
        if not os.path.isdir(root):  # never raises: reading the path says what is wrong
            yield root, True
            continue
        unlisted: list[Path] = []
        for dirpath, dirnames, filenames in os.walk(root, onerror=_collect(unlisted)):
            yield from ((p, False) for p in unlisted)
            unlisted.clear()
            dirnames[:] = sorted(
                d
                for d in dirnames
                if not d.startswith(".")
                and d not in SKIPPED_DIRS
                # os.path.exists, not Path.exists: an unreadable folder is not a venv
                and not os.path.exists(os.path.join(dirpath, d, "pyvenv.cfg"))
            )
            for name in sorted(filenames):
                if name.endswith((".py", ".pyi")):
                    yield Path(dirpath) / name, False
        yield from ((p, False) for p in unlisted)


def _collect(unlisted: list[Path]) -> Callable[[OSError], None]:
    return lambda err: unlisted.append(Path(err.filename))
