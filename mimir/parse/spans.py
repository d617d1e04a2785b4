"""Source files and spans.

`ast` reports columns as 0-based UTF-8 byte offsets; editors, ruff, mypy and
pyright print 1-based character columns. `SourceFile.span` converts, so a
line holding non-ASCII text before the fault still points at the right column.

Lines end where Python's tokenizer ends them (`\n`, `\r\n`, `\r`), never at the
other breaks `str.splitlines` knows (form feed, U+2028, ...), so line numbers
agree with `ast`'s. `read_source` decodes a file as Python does (PEP 263
coding declaration, UTF-8 byte-order mark).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from mimir.diagnostics.diagnostic import Diagnostic, Span
from mimir.safeio import DEFAULT_MAX_FILE_BYTES, InputError, read_regular

_LINE_END = re.compile(r"\r\n|\r|\n")


def split_lines(text: str) -> list[str]:
    """`text`'s lines without their ends, split as Python's tokenizer splits them."""
    lines = _LINE_END.split(text)
    if lines and not lines[-1]:
        lines.pop()  # a final line end starts no new line (as `str.splitlines`)
    return lines


@dataclass
class SourceFile:
    path: str
    content: str
    lines: list[str] = field(init=False)

    def __post_init__(self) -> None:
        self.lines = split_lines(self.content)

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
        """The source text of `node` as written (falls back to `ast.unparse`).

        As `ast.get_source_segment`, but over the lines split once, so that
        asking for every node of a file costs time linear in the file.
        """
        line = getattr(node, "lineno", None)
        end_line = getattr(node, "end_lineno", None)
        col = getattr(node, "col_offset", None)
        end_col = getattr(node, "end_col_offset", None)
        if None in (line, end_line, col, end_col) or not 1 <= line <= end_line <= len(self.lines):
            return ast.unparse(node)
        first = self.lines[line - 1].encode("utf-8")
        if line == end_line:
            return first[col:end_col].decode("utf-8", errors="replace")
        last = self.lines[end_line - 1].encode("utf-8")
        parts = [first[col:].decode("utf-8", errors="replace")]
        parts += self.lines[line : end_line - 1]
        parts.append(last[:end_col].decode("utf-8", errors="replace"))
        return "\n".join(parts)


def read_source(
    path: Path, max_bytes: int = DEFAULT_MAX_FILE_BYTES
) -> tuple[str | None, Diagnostic | None]:
    """A file's text, or the GPU002/GPU003 saying why not.

    Only regular files are read, and only up to `max_bytes` (see `mimir.safeio`).
    Decoded as Python decodes a source file (`tokenize.open`): the encoding a
    PEP 263 coding declaration names, else UTF-8; a UTF-8 byte-order mark is
    dropped, and one that contradicts the declaration is an error.
    """
    shown = str(path)
    span = Span(shown, 1, 1, 1, 1)
    try:
        text = decode_source(read_regular(path, max_bytes))
    except InputError as err:
        message = err.reason if err.code == "GPU003" else f"cannot read file: {err.reason}"
        return None, Diagnostic(err.code, message, span)
    except (UnicodeDecodeError, SyntaxError) as err:
        reason = err.msg if isinstance(err, SyntaxError) else str(err)
        return None, Diagnostic("GPU002", f"cannot read file: {reason}", span)
    return text, None


def decode_source(data: bytes) -> str:
    """Python source bytes as text; `SyntaxError` for a bad or unknown coding declaration."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    # "utf-8-sig" drops the byte-order mark; no other codec may follow one.
    return data.decode(encoding).removeprefix("\ufeff")
