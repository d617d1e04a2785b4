"""Mimir's spans and diagnostics as LSP types, and back.

Mimir's spans are 1-based lines and 1-based character (code point) columns with
an exclusive end; LSP positions are 0-based lines and 0-based UTF-16 code-unit
offsets. `Lines` converts with the document's own text, so a line holding text
outside the Basic Multilingual Plane still points at the right character.
"""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from mimir.diagnostics.codes import REGISTRY
from mimir.diagnostics.diagnostic import Diagnostic, Span
from mimir.parse.spans import split_lines

SOURCE = "mimir"
# Where each code's explanation (the registry entry, as `mimir explain` prints it) lives:
# by default the page installed with the package (mimir/diagnostics/codes.md, the same text
# as docs/codes.md), so the link works offline and matches the version that reported it.
CODES_PAGE = Path(__file__).resolve().parent.parent / "diagnostics" / "codes.md"


def docs_link(code: str, template: str | None = None) -> str:
    """The link for `code`: `template` with `{code}` replaced by its anchor (`gpu011`), or
    with `#gpu011` appended when it has no `{code}`; by default the installed codes page."""
    anchor = code.lower()
    if not template:
        return f"{CODES_PAGE.as_uri()}#{anchor}"
    if "{code}" in template:
        return template.replace("{code}", anchor)
    return f"{template}#{anchor}"


class Lines:
    """One document's lines, for converting between code-point and UTF-16 columns."""

    def __init__(self, text: str) -> None:
        # As the tokenizer splits (`\n`, `\r\n`, `\r`): `str.splitlines` also splits at form
        # feeds and U+2028, which would move every later diagnostic down a line.
        self.lines = split_lines(text)

    def line(self, line0: int) -> str:
        return self.lines[line0] if 0 <= line0 < len(self.lines) else ""

    def to_utf16(self, line0: int, char0: int) -> int:
        text = self.line(line0)
        if text.isascii():
            return char0
        return len(text[:char0].encode("utf-16-le")) // 2

    def from_utf16(self, line0: int, units: int) -> int:
        text = self.line(line0)
        if text.isascii():
            return units
        seen = 0
        for k, ch in enumerate(text):
            if seen >= units:
                return k
            seen += 2 if ord(ch) > 0xFFFF else 1
        return len(text)

    def position(self, line1: int, col1: int) -> types.Position:
        line0 = max(line1 - 1, 0)
        return types.Position(line0, self.to_utf16(line0, max(col1 - 1, 0)))

    def range(self, span: Span) -> types.Range:
        return types.Range(
            self.position(span.line, span.column), self.position(span.end_line, span.end_column)
        )

    def point(self, pos: types.Position) -> tuple[int, int]:
        """An LSP position as Mimir's 1-based line and 1-based code-point column."""
        return pos.line + 1, self.from_utf16(pos.line, pos.character) + 1


def uri_of(path: str) -> str:
    return Path(path).resolve().as_uri()


def path_of(uri: str) -> str:
    from pygls.uris import to_fs_path

    path = to_fs_path(uri)
    return str(Path(path).resolve()) if path else uri


def message(d: Diagnostic) -> str:
    """The diagnostic's message, then its why (with the counterexample) and fix."""
    return f"{d.message}\nwhy: {d.why}\nfix: {d.fix}"


def to_lsp(
    d: Diagnostic,
    uri: str,
    lines: Lines,
    others: dict[str, Lines],
    docs_url: str | None = None,
) -> types.Diagnostic:
    """One Mimir diagnostic; its secondary labels become `relatedInformation`.

    `others` holds the lines of other files a label may point into (keyed by path);
    `docs_url` the template of the code's link (`docs_link`).
    """
    related = []
    for label in d.labels:
        in_doc = label.span.path == d.span.path
        label_lines = lines if in_doc else others.get(label.span.path, lines)
        related.append(
            types.DiagnosticRelatedInformation(
                types.Location(
                    uri if in_doc else uri_of(label.span.path), label_lines.range(label.span)
                ),
                label.message,
            )
        )
    severity = (
        types.DiagnosticSeverity.Error
        if d.severity == "error"
        else types.DiagnosticSeverity.Warning
    )
    entry = REGISTRY.get(d.code)
    return types.Diagnostic(
        range=lines.range(d.span),
        message=message(d),
        severity=severity,
        code=d.code,
        code_description=types.CodeDescription(docs_link(d.code, docs_url)),
        source=SOURCE,
        related_information=related or None,
        data={"name": entry.name if entry else d.code, "function": d.function},
    )
