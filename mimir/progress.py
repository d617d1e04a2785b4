"""Progress of a long command on stderr: a rich bar on a terminal, and nothing else there.

    with Bar("compiling", total=12) as bar:
        for name in names:
            bar.step(name)            # before each step: what is running now
            ...
        bar.note("conv1d: ok")        # a line of its own, above the bar

The bar appears only when stderr is a terminal and the run has lasted `delay` seconds
(a quick command draws nothing; `MIMIR_PROGRESS_DELAY` sets it), and is cleared when the
block ends, so the command's own output is what stays. `note` writes its line on every
stream (a terminal or a log): it is how a command says what it finished, one line per
item, wherever stderr goes.
`CI` in the environment turns the bar off, as it does for `mimir check`.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from types import TracebackType
from typing import IO, Any

__all__ = ["Bar", "wants_bar"]


def wants_bar(stream: IO[str] | None = None) -> bool:
    """Whether a bar may be drawn on `stream` (default stderr): a terminal, and not in CI."""
    stream = sys.stderr if stream is None else stream
    if os.environ.get("CI"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Bar:
    """A progress bar over `total` steps (see the module docstring)."""

    def __init__(
        self, label: str, total: int, *, delay: float | None = None, show: bool | None = None
    ) -> None:
        self.label = label
        self.total = total
        if delay is None:  # `MIMIR_PROGRESS_DELAY=0` draws at once (the tests do)
            delay = float(os.environ.get("MIMIR_PROGRESS_DELAY", "0.5"))
        self.delay = delay
        self.show = wants_bar() if show is None else show
        self.start = time.monotonic()
        self.done = 0
        self.current = ""
        self._progress: Any = None
        self._task: Any = None
        self._closed = False
        self._lock = threading.Lock()
        # a run whose steps all began early but which lasts: the bar appears on time anyway
        self._timer = threading.Timer(delay, self._draw) if self.show else None
        if self._timer is not None:
            self._timer.daemon = True
            self._timer.start()

    def __enter__(self) -> Bar:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def step(self, what: str) -> None:
        """A step begins: `what` is shown beside the bar (the steps before it are done)."""
        if self.current:
            self.done += 1
        self.current = what
        self._draw()

    def note(self, line: str) -> None:
        """A line on stderr that stays (above the bar while it is drawn)."""
        if self._progress is not None:
            self._progress.console.print(line, markup=False, highlight=False)
        else:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
            if self._progress is not None:
                self._progress.stop()
                self._progress = None

    def _draw(self) -> None:
        if not self.show:
            return
        with self._lock:
            self._draw_locked()

    def _draw_locked(self) -> None:
        if self._closed:
            return
        if self._progress is None:
            if time.monotonic() - self.start < self.delay * 0.99:
                return
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self._progress = Progress(
                TextColumn(self.label),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.description}"),
                console=Console(stderr=True),
                transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task("", total=self.total)
        # `total` may be learnt after the bar began (compile-gpu counts its functions first)
        self._progress.update(
            self._task, total=self.total, completed=self.done, description=self.current
        )
