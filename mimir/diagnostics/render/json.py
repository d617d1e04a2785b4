"""The machine format: one JSON document per run, versioned.

    {"version": 1, "diagnostics": [...], "summary": {...}}

Each diagnostic carries code, severity, message, why, fix, the primary span
(`path`, `line`, `column`, `end_line`, `end_column`; 1-based, end exclusive),
secondary `labels` (span + message), the `counterexample` as a name -> int
object, the kernel (`function`) it belongs to and any `notes`. The summary
counts `errors`, `warnings`, `files_checked` and `files_with_errors`.

The document's JSON Schema ships with the package
(`mimir/diagnostics/schemas/diagnostics-v1.schema.json`, loaded by `schema()`).
Version 1 only ever gains optional keys; a change that removes or retypes a
key is version 2.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict
from functools import cache
from importlib import resources
from typing import Any

from mimir.diagnostics.diagnostic import Diagnostic, Label, Span, format_counterexample

VERSION = 1
SCHEMA_FILE = "diagnostics-v1.schema.json"


def to_dict(d: Diagnostic) -> dict[str, Any]:
    return {
        "code": d.code,
        "severity": d.severity,
        "message": d.message,
        "why": d.why,
        "fix": d.fix,
        "span": asdict(d.span),
        "labels": [{"span": asdict(lab.span), "message": lab.message} for lab in d.labels],
        "counterexample": dict(d.counterexample),
        "function": d.function,
        "notes": list(d.notes),
    }


def from_dict(data: dict[str, Any]) -> Diagnostic:
    """The `Diagnostic` that `to_dict` turned into `data` (the inverse of `to_dict`).

    `why` is stored rendered (registry why; case-specific sentence;
    counterexample and its note). The case-specific parts are recovered by
    removing the registry's text, so the round trip is exact while the registry
    is unchanged (the cache key covers Mimir's own sources for that reason).
    """
    from mimir.diagnostics.codes import REGISTRY

    code = data["code"]
    counterexample = tuple((str(k), int(v)) for k, v in data.get("counterexample", {}).items())
    extra_why, note = _split_why(data.get("why", ""), REGISTRY[code].why, counterexample)
    return Diagnostic(
        code=code,
        message=data["message"],
        span=Span(**data["span"]),
        severity=data.get("severity", "error"),
        labels=tuple(Label(Span(**lab["span"]), lab["message"]) for lab in data.get("labels", ())),
        counterexample=counterexample,
        function=data.get("function"),
        extra_why=extra_why,
        counterexample_note=note,
        notes=tuple(data.get("notes", ())),
        extra_fix=_split_fix(data.get("fix", ""), REGISTRY[code].fix),
    )


def _split_fix(fix: str, base: str) -> str | None:
    """The case-specific part of a rendered `Diagnostic.fix`."""
    return fix[len(base) + 2 :] if fix.startswith(base + "; ") else None


def _split_why(
    why: str, base: str, counterexample: tuple[tuple[str, int], ...]
) -> tuple[str | None, str | None]:
    """(extra_why, counterexample_note) out of a rendered `Diagnostic.why`."""
    note = None
    if counterexample:
        marker = f"; counterexample: {format_counterexample(counterexample)}"
        at = why.rfind(marker)
        if at >= 0:
            note = why[at + len(marker) :].strip() or None
            why = why[:at]
    extra = why[len(base) + 2 :] if why.startswith(base + "; ") else None
    return extra, note


def document(diagnostics: Iterable[Diagnostic], files_checked: int) -> dict[str, Any]:
    items = [to_dict(d) for d in diagnostics]
    return {
        "version": VERSION,
        "diagnostics": items,
        "summary": {
            "errors": sum(1 for d in items if d["severity"] == "error"),
            "warnings": sum(1 for d in items if d["severity"] == "warning"),
            "files_checked": files_checked,
            "files_with_errors": len(
                {d["span"]["path"] for d in items if d["severity"] == "error"}
            ),
        },
    }


def render(diagnostics: Iterable[Diagnostic], files_checked: int) -> str:
    return json.dumps(document(diagnostics, files_checked), indent=2)


@cache
def schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) that every `render` output validates against."""
    text = resources.files("mimir.diagnostics").joinpath("schemas", SCHEMA_FILE).read_text()
    return json.loads(text)
