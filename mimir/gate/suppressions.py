"""Inline suppressions: `# mimir: ignore[GPU011]` on the line a diagnostic starts.

A comment `# mimir: ignore[CODE, ...]` drops the diagnostics with those codes
whose primary span starts on the comment's line; a bare `# mimir: ignore`
drops every diagnostic there. Codes are matched exactly (no prefixes), so a
wrong code in the brackets suppresses nothing.

Each code (or bare comment) that suppressed nothing is itself reported as
GPU090 (`unused-suppression`, a warning) at the comment, unless the same
comment also names GPU090. Suppressions are applied in
`mimir.check.check_source`, so every caller of the library sees the same
result as the command line. Comments are found with `tokenize`, so the text
inside a string literal is never read as a suppression.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass

from mimir.diagnostics.codes import REGISTRY
from mimir.diagnostics.diagnostic import Diagnostic, Span
from mimir.parse.spans import split_lines

UNUSED_SUPPRESSION = "GPU090"

_PATTERN = re.compile(r"#\s*mimir:\s*ignore\b(?:\[(?P<codes>[^\]]*)\])?", re.IGNORECASE)


@dataclass(frozen=True)
class Suppression:
    """One `# mimir: ignore[...]` comment. `codes` is empty for a bare comment."""

    line: int
    column: int  # 1-based, at the `#`
    end_column: int  # exclusive
    codes: tuple[str, ...]


def find_suppressions(text: str) -> list[Suppression]:
    """Every suppression comment in `text`, in source order."""
    found: list[Suppression] = []
    for line, column, comment in _comments(text):
        match = _PATTERN.search(comment)
        if match is None:
            continue
        raw = match.group("codes")
        codes = tuple(c.strip().upper() for c in raw.split(",") if c.strip()) if raw else ()
        start = column + match.start()
        found.append(Suppression(line, start + 1, start + 1 + len(match.group(0)), codes))
    return found


def apply_suppressions(path: str, text: str, diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """`diagnostics` without the suppressed ones, plus a GPU090 for each unused suppression.

    The result is sorted with `Diagnostic.sort_key`.
    """
    suppressions = find_suppressions(text) if "mimir" in text else []
    if not suppressions:
        return diagnostics
    by_line: dict[int, list[Suppression]] = {}
    for s in suppressions:
        by_line.setdefault(s.line, []).append(s)
    used: set[tuple[Suppression, str]] = set()
    kept: list[Diagnostic] = []
    for d in diagnostics:
        hit = None
        for s in by_line.get(d.span.line, ()):
            if not s.codes:
                hit = (s, "")
            elif d.code in s.codes:
                hit = (s, d.code)
            if hit:
                break
        if hit is None:
            kept.append(d)
        else:
            used.add(hit)
    for s in suppressions:
        if UNUSED_SUPPRESSION in s.codes:
            continue
        span = Span(path, s.line, s.column, s.line, s.end_column)
        for code in s.codes or ("",):
            if (s, code) in used:
                continue
            kept.append(_unused(span, code))
    kept.sort(key=Diagnostic.sort_key)
    return kept


def _unused(span: Span, code: str) -> Diagnostic:
    severity = REGISTRY[UNUSED_SUPPRESSION].severity
    if not code:
        message = "unused suppression: no diagnostic starts on this line"
    elif code not in REGISTRY:
        message = f"unused suppression: `{code}` is not a Mimir code"
    else:
        message = f"unused suppression for `{code}`: no `{code}` diagnostic starts on this line"
    return Diagnostic(UNUSED_SUPPRESSION, message, span, severity=severity)


def _comments(text: str) -> list[tuple[int, int, str]]:
    """(1-based line, 0-based character column, text) of each comment."""
    try:
        return [
            (tok.start[0], tok.start[1], tok.string)
            for tok in tokenize.generate_tokens(io.StringIO(text).readline)
            if tok.type == tokenize.COMMENT
        ]
    except (tokenize.TokenError, SyntaxError):
        # The file parsed with `ast` but not with `tokenize` (rare edge cases):
        # read from the first `#` on each line.
        out = []
        for number, line in enumerate(split_lines(text), start=1):
            at = line.find("#")
            if at >= 0:
                out.append((number, at, line[at:]))
        return out
