"""The human format (ARCHITECTURE.md, "Diagnostics").

    path:line:col: error[CODE]: message
      why: ...
      fix: ...
      note: path:line:col: a secondary label

Paths, lines and 1-based columns are clickable in editors and terminals.
"""

from __future__ import annotations

from collections.abc import Iterable

from mimir.diagnostics.diagnostic import Diagnostic


def render(diagnostic: Diagnostic) -> str:
    s = diagnostic.span
    lines = [
        f"{s.path}:{s.line}:{s.column}: {diagnostic.severity}[{diagnostic.code}]: "
        f"{diagnostic.message}",
        f"  why: {diagnostic.why}",
        f"  fix: {diagnostic.fix}",
    ]
    for label in diagnostic.labels:
        ls = label.span
        lines.append(f"  note: {ls.path}:{ls.line}:{ls.column}: {label.message}")
    return "\n".join(lines)


def render_all(diagnostics: Iterable[Diagnostic]) -> str:
    return "\n".join(render(d) for d in diagnostics)


def summary(errors: int, files_with_errors: int, files_checked: int, warnings: int = 0) -> str:
    """The last line of the report; `files_with_errors` counts files with any finding."""
    noun = "file" if files_checked == 1 else "files"
    if errors == 0 and warnings == 0:
        return f"Success: no issues found in {files_checked} source {noun}"
    found = [_count(errors, "error")] if errors else []
    if warnings:
        found.append(_count(warnings, "warning"))
    in_files = "file" if files_with_errors == 1 else "files"
    return (
        f"Found {' and '.join(found)} in {files_with_errors} {in_files} "
        f"(checked {files_checked} source {noun})"
    )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
