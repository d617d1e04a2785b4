"""SARIF 2.1.0: the format code-scanning services (GitHub, GitLab, Azure) read.

One run whose `tool.driver.rules` describe each code that occurs, taken from
the registry (summary as `shortDescription`, why as `fullDescription`, why and
fix with the examples as `help`), and one result per diagnostic: `ruleId`,
`level`, the message with its why and fix, the primary location, and a
related location per secondary label. Regions are 1-based; columns count
Unicode code points (`columnKind`) and `endColumn` is exclusive, as SARIF
defines it. Relative paths resolve against `%SRCROOT%`, the directory Mimir ran
in. Each result carries a `mimir/v1` partial fingerprint (code, message and
the stripped source line, as in `--baseline`) that does not move when lines
shift.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from mimir.diagnostics.codes import REGISTRY, Code
from mimir.diagnostics.diagnostic import Diagnostic, Span

SCHEMA_URI = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
SRCROOT = "%SRCROOT%"
_LEVEL = {"error": "error", "warning": "warning"}


def rule(entry: Code) -> dict[str, Any]:
    """A `reportingDescriptor` for one registry entry."""
    markdown = [f"{entry.summary}.", "", f"**Why:** {entry.why}.", "", f"**Fix:** {entry.fix}."]
    if entry.bad:
        markdown += ["", "Bad:", "", "```python", entry.bad.rstrip("\n"), "```"]
    if entry.good:
        markdown += ["", "Good:", "", "```python", entry.good.rstrip("\n"), "```"]
    return {
        "id": entry.code,
        "name": entry.name,
        "shortDescription": {"text": entry.summary},
        "fullDescription": {"text": entry.why},
        "help": {"text": f"why: {entry.why}\nfix: {entry.fix}", "markdown": "\n".join(markdown)},
        "defaultConfiguration": {"level": _LEVEL.get(entry.severity, "note")},
        "properties": {"foundBy": entry.found_by},
    }


def _uri(path: str) -> dict[str, str]:
    p = Path(path)
    if p.is_absolute():
        return {"uri": p.as_uri()}
    return {"uri": PurePosixPath(*p.parts).as_posix(), "uriBaseId": SRCROOT}


def _region(span: Span) -> dict[str, int]:
    return {
        "startLine": span.line,
        "startColumn": span.column,
        "endLine": max(span.end_line, span.line),
        "endColumn": max(span.end_column, 1),
    }


def _location(span: Span) -> dict[str, Any]:
    return {"physicalLocation": {"artifactLocation": _uri(span.path), "region": _region(span)}}


def result(d: Diagnostic, rule_index: int, fingerprint: str | None = None) -> dict[str, Any]:
    text = f"{d.message}\nwhy: {d.why}\nfix: {d.fix}"
    out: dict[str, Any] = {
        "ruleId": d.code,
        "ruleIndex": rule_index,
        "level": _LEVEL.get(d.severity, "note"),
        "message": {"text": text},
        "locations": [_location(d.span)],
    }
    if d.labels:
        out["relatedLocations"] = [
            {"id": i, **_location(lab.span), "message": {"text": lab.message}}
            for i, lab in enumerate(d.labels)
        ]
    if fingerprint:
        out["partialFingerprints"] = {"mimir/v1": fingerprint}
    props: dict[str, Any] = {}
    if d.counterexample:
        props["counterexample"] = dict(d.counterexample)
    if d.function:
        props["function"] = d.function
    if props:
        out["properties"] = props
    return out


def document(
    diagnostics: Iterable[Diagnostic],
    *,
    version: str,
    root: Path | None = None,
    source_lines: Mapping[str, list[str]] | None = None,
) -> dict[str, Any]:
    """The SARIF log. `source_lines` (path -> lines) enables line-shift-proof fingerprints."""
    diagnostics = list(diagnostics)
    codes = sorted({d.code for d in diagnostics})
    index = {code: i for i, code in enumerate(codes)}
    results = []
    for d in diagnostics:
        fingerprint = None
        if source_lines is not None:
            lines = source_lines.get(d.span.path, [])
            line = lines[d.span.line - 1] if 0 < d.span.line <= len(lines) else ""
            fingerprint = _fingerprint(d, line)
        results.append(result(d, index[d.code], fingerprint))
    base = (root or Path.cwd()).resolve().as_uri().rstrip("/") + "/"
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "mimir",
                "version": version,
                "semanticVersion": version,
                "rules": [rule(REGISTRY[c]) for c in codes],
            }
        },
        "originalUriBaseIds": {SRCROOT: {"uri": base}},
        "columnKind": "unicodeCodePoints",
        "results": results,
    }
    return {"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run]}


def render(diagnostics: Iterable[Diagnostic], **kwargs: Any) -> str:
    return json.dumps(document(diagnostics, **kwargs), indent=2)


def _fingerprint(d: Diagnostic, line: str) -> str:
    key = "\0".join([d.code, d.message, line.strip()])
    return hashlib.sha256(key.encode()).hexdigest()[:32]
