"""One line per diagnostic, for grep, editors' quickfix lists and terse logs.

    path:line:col: error[CODE]: message

The line is the first line of the text format; why, fix and notes are left
out (`mimir explain CODE` has them).
"""

from __future__ import annotations

from collections.abc import Iterable

from mimir.diagnostics.diagnostic import Diagnostic


def render(diagnostic: Diagnostic) -> str:
    s, d = diagnostic.span, diagnostic
    return f"{s.path}:{s.line}:{s.column}: {d.severity}[{d.code}]: {d.message}"


def render_all(diagnostics: Iterable[Diagnostic]) -> str:
    return "\n".join(render(d) for d in diagnostics)
