"""The human format (DESIGN.md section 3).

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


def summary(errors: int, files_with_errors: int, files_checked: int) -> str:
    noun = "file" if files_checked == 1 else "files"
    if errors == 0:
        return f"Success: no issues found in {files_checked} source {noun}"
    plural = "error" if errors == 1 else "errors"
    in_files = "file" if files_with_errors == 1 else "files"
    return (
        f"Found {errors} {plural} in {files_with_errors} {in_files} "
        f"(checked {files_checked} source {noun})"
    )
