"""GitHub Actions workflow commands: one annotation per diagnostic.

    ::error file=k.py,line=10,col=12,endLine=10,endColumn=17,title=GPU011::matmul shape ...

GitHub shows each as an annotation on the pull request's diff. Escaping
follows the Actions runner (`ActionCommand.cs`): in the message `%`, `\\r` and
`\\n` become `%25`, `%0D` and `%0A`; in property values `:` and `,` also
become `%3A` and `%2C`. The message holds why and fix on their own lines, so
the annotation reads like the text format.
"""

from __future__ import annotations

from collections.abc import Iterable

from mimir.diagnostics.diagnostic import Diagnostic

# Actions knows error, warning and notice.
_COMMAND = {"error": "error", "warning": "warning"}


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render(diagnostic: Diagnostic) -> str:
    s = diagnostic.span
    props = [
        ("file", s.path),
        ("line", str(s.line)),
        ("col", str(s.column)),
        ("endLine", str(s.end_line)),
        ("endColumn", str(s.end_column)),
        ("title", diagnostic.code),
    ]
    command = _COMMAND.get(diagnostic.severity, "notice")
    body = "\n".join(
        [diagnostic.message, f"why: {diagnostic.why}", f"fix: {diagnostic.fix}"]
        + [
            f"note: {lab.span.path}:{lab.span.line}:{lab.span.column}: {lab.message}"
            for lab in diagnostic.labels
        ]
    )
    fields = ",".join(f"{key}={escape_property(value)}" for key, value in props)
    return f"::{command} {fields}::{escape_data(body)}"


def render_all(diagnostics: Iterable[Diagnostic]) -> str:
    return "\n".join(render(d) for d in diagnostics)
