"""The code reference page, `docs/codes.md`, generated from the registry.

Each code is a `## GPU011` heading (so its anchor is `#gpu011`, the target of
the language server's `codeDescription` links) followed by what `mimir explain`
prints. The same page is installed with the package as `mimir/diagnostics/codes.md`
(the language server links there by default). Regenerate both with
`python -m mimir.diagnostics.docs --write`; a test keeps them equal to the registry.
"""

from __future__ import annotations

from pathlib import Path

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


def write(root: Path) -> list[Path]:
    """Write the page to `root`/docs/codes.md and beside this module; the paths written."""
    text = markdown()
    targets = [root / "docs" / "codes.md", Path(__file__).resolve().parent / "codes.md"]
    for target in targets:
        target.write_text(text, encoding="utf-8")
    return targets


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--write"]:
        for path in write(Path(__file__).resolve().parent.parent.parent):
            print(f"wrote {path}")
    else:
        print(markdown(), end="")
