"""Baselines: adopt Mimir on an existing codebase and fail only on new findings.

`mimir check --write-baseline FILE` records every current finding;
`mimir check --baseline FILE` then hides the findings recorded there. A
finding is identified by a fingerprint that survives unrelated edits:

    (path relative to the project root, code, message, the stripped source line)

Line numbers are left out, so inserting lines above a finding keeps it in the
baseline; editing the offending line itself makes it new again, as do ruff's
and pylint's baselines. Identical fingerprints are counted, so a second copy
of a recorded bug in the same file is still reported.

    {"version": 1, "tool": "mimir",
     "findings": [{"path": "k.py", "code": "GPU011", "message": "...",
                   "source": "return x @ w", "count": 1}]}
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from mimir.diagnostics.diagnostic import Diagnostic
from mimir.safeio import OutputError, read_regular, write_atomic

VERSION = 1


MAX_BASELINE_BYTES = 256 * 1024 * 1024


class BaselineError(Exception):
    """A baseline file that cannot be read; the message names the file."""


@dataclass(frozen=True, order=True)
class Fingerprint:
    path: str
    code: str
    message: str
    source: str


def fingerprint(d: Diagnostic, relpath: str, lines: list[str]) -> Fingerprint:
    """The fingerprint of `d`, found in the file at `relpath` whose text is `lines`."""
    line = lines[d.span.line - 1] if 0 < d.span.line <= len(lines) else ""
    return Fingerprint(relpath, d.code, d.message, line.strip())


def write(file: Path, fingerprints: Iterable[Fingerprint]) -> int:
    """Write the baseline; returns the number of findings recorded."""
    counts = Counter(fingerprints)
    findings = [
        {"path": f.path, "code": f.code, "message": f.message, "source": f.source, "count": n}
        for f, n in sorted(counts.items())
    ]
    doc = {"version": VERSION, "tool": "mimir", "findings": findings}
    try:  # temp file and rename: never half a baseline, never through a symlink
        write_atomic(file, json.dumps(doc, indent=2) + "\n")
    except OutputError as err:
        raise BaselineError(str(err)) from None
    return sum(counts.values())


def load(file: Path) -> Counter[Fingerprint]:
    try:
        # only a regular file, and not without bound (a link to /dev/zero)
        doc = json.loads(read_regular(file, MAX_BASELINE_BYTES).decode("utf-8"))
    except OSError as err:
        raise BaselineError(f"{file}: cannot read baseline: {err.strerror or err}") from None
    except RecursionError:
        raise BaselineError(f"{file}: baseline is not JSON: nested too deeply") from None
    except ValueError as err:
        raise BaselineError(f"{file}: baseline is not JSON: {err}") from None
    if not isinstance(doc, dict) or doc.get("version") != VERSION:
        raise BaselineError(f"{file}: not a version {VERSION} Mimir baseline")
    counts: Counter[Fingerprint] = Counter()
    try:
        for item in doc["findings"]:
            f = Fingerprint(
                str(item["path"]), str(item["code"]), str(item["message"]), str(item["source"])
            )
            counts[f] += int(item.get("count", 1))
    except (KeyError, TypeError, ValueError) as err:
        raise BaselineError(f"{file}: malformed finding in baseline ({err!r})") from None
    return counts


def new_findings(
    found: Iterable[tuple[Diagnostic, Fingerprint]], baseline: Counter[Fingerprint]
) -> list[Diagnostic]:
    """The diagnostics not covered by `baseline`, each recorded finding covering one."""
    remaining = Counter(baseline)
    out = []
    for d, f in found:
        if remaining[f] > 0:
            remaining[f] -= 1
        else:
            out.append(d)
    return out
