"""Finding the Python files under the paths given to `mimir check`.

Kept apart from `mimir.check` so that listing files imports neither z3 nor
networkx: a run whose files are all in the result cache never loads them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

# Folders never descended into when a directory is checked.
SKIPPED_DIRS = frozenset(
    {"node_modules", "__pycache__", "site-packages", "build", "dist", "venv", "env"}
)


def discover(paths: Iterable[Path]) -> Iterator[tuple[Path, bool]]:
    """Python files under `paths`; the flag says whether the path was named explicitly.

    Directories are walked recursively in sorted order, skipping hidden folders,
    virtual environments (any folder holding `pyvenv.cfg`) and build outputs.
    """
    for root in paths:
        if not root.is_dir():
            yield root, True
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(
                d
                for d in dirnames
                if not d.startswith(".")
                and d not in SKIPPED_DIRS
                and not (Path(dirpath) / d / "pyvenv.cfg").exists()
            )
            for name in sorted(filenames):
                if name.endswith((".py", ".pyi")):
                    yield Path(dirpath) / name, False
