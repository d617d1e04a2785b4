"""Source files and spans.

`ast` reports columns as 0-based UTF-8 byte offsets; editors, ruff, mypy and
pyright print 1-based character columns. `SourceFile.span` converts, so a
line holding non-ASCII text before the fault still points at the right column.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from mimir.diagnostics.diagnostic import Diagnostic, Span
from mimir.safeio import DEFAULT_MAX_FILE_BYTES, InputError, read_regular


@dataclass
class SourceFile:
    path: str
    content: str
    lines: list[str] = field(init=False)

    def __post_init__(self) -> None:
        self.lines = self.content.splitlines()

    def _column(self, line: int, byte_offset: int) -> int:
        if not 1 <= line <= len(self.lines):
            return byte_offset + 1
        raw = self.lines[line - 1].encode("utf-8")
        return len(raw[:byte_offset].decode("utf-8", errors="replace")) + 1

    def span(self, node: ast.AST) -> Span:
        line = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 0)
        end_line = getattr(node, "end_lineno", None) or line
        end_col = getattr(node, "end_col_offset", None)
        if end_col is None:
            end_col = col
        return Span(
            self.path,
            line,
            self._column(line, col),
            end_line,
            self._column(end_line, end_col),
        )

    def text(self, node: ast.AST) -> str:
        """The source text of `node` as written (falls back to `ast.unparse`)."""
        segment = ast.get_source_segment(self.content, node)
        return segment if segment is not None else ast.unparse(node)


def read_source(
    path: Path, max_bytes: int = DEFAULT_MAX_FILE_BYTES
) -> tuple[str | None, Diagnostic | None]:
    """A file's text (UTF-8, byte-order mark dropped), or the GPU002/GPU003 saying why not.

    Only regular files are read, and only up to `max_bytes` (see `mimir.safeio`).
    """
    shown = str(path)
    try:
        text = read_regular(path, max_bytes).decode("utf-8")
    except InputError as err:
        span = Span(shown, 1, 1, 1, 1)
        message = err.reason if err.code == "GPU003" else f"cannot read file: {err.reason}"
        return None, Diagnostic(err.code, message, span)
    except UnicodeDecodeError as err:
        span = Span(shown, 1, 1, 1, 1)
        return None, Diagnostic("GPU002", f"cannot read file: {err}", span)
    return text.removeprefix("\ufeff"), None
