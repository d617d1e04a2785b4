"""The code reference page, `docs/codes.md`, generated from the registry.

Each code is a `## GPU011` heading (so its anchor is `#gpu011`, the target of
the language server's `codeDescription` links) followed by what `mimir explain`
prints. Regenerate with `python -m mimir.diagnostics.docs > docs/codes.md`; a
test keeps the page equal to the registry.
"""

from __future__ import annotations

from mimir.diagnostics.codes import REGISTRY


def markdown() -> str:
    parts = [
        "# Diagnostic codes\n",
        "Generated from the registry (`python -m mimir.diagnostics.docs > docs/codes.md`); "
        "`mimir explain CODE` prints the same text.\n",
    ]
    for entry in sorted(REGISTRY.values(), key=lambda e: e.code):
        parts.append(f"## {entry.code}\n")
        parts.append(f"`{entry.name}`: {entry.summary}\n")
        parts.append(f"- why: {entry.why}\n- fix: {entry.fix}\n- reported by: {entry.found_by}")
        if entry.severity != "error":
            parts[-1] += f"\n- severity: {entry.severity}"
        parts[-1] += "\n"
        if entry.bad:
            parts.append(f"Bad:\n\n```python\n{entry.bad}```\n")
        if entry.good:
            parts.append(f"Good:\n\n```python\n{entry.good}```\n")
    return "\n".join(parts)


if __name__ == "__main__":
    print(markdown(), end="")
