"""Checking a whole tree for `mimir check`: which files, the cache, workers, progress.

`select_files` applies the configuration's include and exclude globs to the
files found under the given paths (a file named on the command line is always
taken, unless `force_exclude` and it is excluded, as in ruff). `run_check`
reads each file, serves unchanged files from the cache, checks the rest in a
pool of worker processes when there are several (at most one per available
core, whatever `-j` asks; each worker returns plain
`Diagnostic` dataclasses; z3 objects never cross processes), applies
`select`, `ignore` and per-file ignores, and returns one `Checked` per file
sorted by path, so the output is the same for any number of workers.

A progress bar is drawn on stderr only when stderr is a terminal, the run is
not in CI (`CI` unset) and more than `PROGRESS_MIN_FILES` files need checking.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Generator, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from mimir.diagnostics.diagnostic import Diagnostic
from mimir.gate.cache import Cache, cache_dir
from mimir.gate.config import Config
from mimir.parse.spans import read_source, split_lines

PROGRESS_MIN_FILES = 8
_Todo = tuple[str, str, str, str | None]  # shown path, relative path, text, cache key
_Roots = tuple[str, ...]  # import roots of the project (`Config.import_roots`)


@dataclass
class Checked:
    """One file's outcome, after the configuration's filters."""

    path: str  # as shown in diagnostics
    relpath: str  # POSIX, relative to the project root
    diagnostics: list[Diagnostic]
    unreadable: bool = False
    lines: list[str] = field(default_factory=list, repr=False)
    cached: bool = False


def select_files(paths: Iterable[Path], config: Config, force_exclude: bool = False) -> list[Path]:
    from mimir.gate.discover import discover

    chosen: dict[str, Path] = {}
    for path, explicit in discover(paths):
        rel = config.relative(path)
        if explicit:
            keep = not (force_exclude and config.excluded(rel))
        elif os.path.isdir(path):  # a folder the walk could not list (reported as GPU002)
            keep = not config.excluded(rel)
        else:
            keep = config.included(rel)
        if keep:
            chosen.setdefault(str(path), path)
    return [chosen[k] for k in sorted(chosen)]


def run_check(
    files: list[Path],
    config: Config,
    *,
    jobs: int | None = None,
    use_cache: bool = True,
    progress: bool | None = None,
    cache_root: Path | None = None,
) -> list[Checked]:
    """Check `files` (from `select_files`); `progress=None` decides from the terminal."""
    from mimir.project import Project

    store = Cache(cache_dir(cache_root or config.root), _cache_settings(config))
    roots = tuple(str(r) for r in config.import_roots())
    project = Project(tuple(Path(r) for r in roots))  # for dependency digests only
    done: dict[str, Checked] = {}
    todo: list[_Todo] = []
    for path in files:
        shown = str(path)
        rel = config.relative(path)
        text, problem = read_source(path, config.max_file_size)
        if text is None:
            done[shown] = Checked(shown, rel, [problem], True)
            continue
        # A file's result depends on its own text and on every project module it imports.
        deps = project.digest(path).encode() if use_cache else b""
        key = store.key(shown, text.encode("utf-8") + b"\0" + deps) if use_cache else None
        entry = store.get(key) if key else None
        if entry is not None:
            done[shown] = Checked(
                shown, rel, entry.diagnostics, entry.unreadable, split_lines(text), cached=True
            )
        else:
            todo.append((shown, rel, text, key))

    if todo:
        import mimir.check  # noqa: F401 - loaded once here, so forked workers inherit it

    workers = worker_count(jobs, len(todo))
    show = _want_progress(sys.stderr, len(todo)) if progress is None else progress
    # Workers are started before the progress bar's refresh thread exists.
    results = _check_all(todo, config.z3_timeout, workers, roots)
    try:
        with _progress_bar(show, len(todo)) as advance:
            for (shown, rel, text, key), (diagnostics, unreadable) in results:
                if key:
                    store.put(key, diagnostics, unreadable)
                done[shown] = Checked(shown, rel, diagnostics, unreadable, split_lines(text))
                advance()
    finally:
        results.close()  # stops the worker pool if the loop ended early

    out = []
    for shown in sorted(done):
        item = done[shown]
        item.diagnostics = [d for d in item.diagnostics if config.reports(d.code, item.relpath)]
        out.append(item)
    return out


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity, where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity on macOS and Windows
        return os.cpu_count() or 1


def worker_count(jobs: int | None, files: int) -> int:
    """Worker processes for `files` files: `-j` if given, never more than the cores or files."""
    return max(1, min(jobs or available_cores(), available_cores(), files))


def _cache_settings(config: Config) -> dict[str, object]:
    # Only what changes a file's own result; filters run after the cache.
    return {"z3_timeout": config.z3_timeout, "paths": list(config.paths)}


def check_text(
    path: str, text: str, timeout_ms: int, roots: _Roots = ()
) -> tuple[list[Diagnostic], bool]:
    """One file's diagnostics (suppressions applied) as plain, picklable data."""
    from mimir.check import check_source
    from mimir.project import Project

    result = check_source(path, text, timeout_ms, project=Project(tuple(Path(r) for r in roots)))
    return list(result.diagnostics), result.unreadable


def _check_all(
    todo: list[_Todo], timeout_ms: int, workers: int, roots: _Roots = ()
) -> Generator[tuple[_Todo, tuple[list[Diagnostic], bool]], None, None]:
    """Results in completion order. With several workers, every task is submitted now."""
    if workers <= 1:
        return ((item, check_text(item[0], item[2], timeout_ms, roots)) for item in todo)
    pool = ProcessPoolExecutor(max_workers=workers)
    futures = {pool.submit(check_text, item[0], item[2], timeout_ms, roots): item for item in todo}
    return _completed(pool, futures)


def _completed(pool: ProcessPoolExecutor, futures: dict) -> Generator:
    try:
        for future in as_completed(futures):
            yield futures[future], future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _want_progress(stream: IO[str], files: int) -> bool:
    if files <= PROGRESS_MIN_FILES or os.environ.get("CI"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


@contextmanager
def _progress_bar(show: bool, total: int) -> Iterator[Callable[[], None]]:
    if not show:
        yield lambda: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    with Progress(
        "checking",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task("check", total=total)
        yield lambda: bar.advance(task)
