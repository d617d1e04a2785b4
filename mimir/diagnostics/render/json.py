"""The machine format: one JSON document per run, versioned.

    {"version": 1, "diagnostics": [...], "summary": {...}}

Each diagnostic carries code, severity, message, why, fix, the primary span
(`path`, `line`, `column`, `end_line`, `end_column`; 1-based, end exclusive),
secondary `labels` (span + message), the `counterexample` as a name -> int
object, and the kernel (`function`) it belongs to.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

from mimir.diagnostics.diagnostic import Diagnostic

VERSION = 1


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
    }


def render(diagnostics: Iterable[Diagnostic], files_checked: int) -> str:
    items = [to_dict(d) for d in diagnostics]
    errors = sum(1 for d in items if d["severity"] == "error")
    doc = {
        "version": VERSION,
        "diagnostics": items,
        "summary": {
            "errors": errors,
            "files_checked": files_checked,
            "files_with_errors": len({d["span"]["path"] for d in items}),
        },
    }
    return json.dumps(doc, indent=2)
