"""The `mimir` command line (typer).

Exit codes, in every format: 0 clean, 1 errors found, 2 usage error or input
that cannot be read (a missing file, a syntax error). Start-up stays cheap:
z3 and networkx are imported only by the commands that solve.
"""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    name="mimir",
    help="Prove typed-Python GPU kernels before they run.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


class Format(str, Enum):
    text = "text"
    json = "json"


EXIT_CLEAN, EXIT_ERRORS, EXIT_USAGE = 0, 1, 2


@app.command()
def check(
    paths: Annotated[list[Path], typer.Argument(help="Files or directories to check.")],
    output_format: Annotated[Format, typer.Option("--format", help="Output format.")] = Format.text,
    z3_timeout: Annotated[
        int, typer.Option("--z3-timeout", min=1, help="Z3 timeout per query, in milliseconds.")
    ] = 5000,
) -> None:
    """Prove shapes, dtypes and bounds of every @gpu kernel in PATHS."""
    from mimir.check import check_paths
    from mimir.diagnostics.render import json as json_render
    from mimir.diagnostics.render import text as text_render

    missing = [p for p in paths if not p.exists()]
    results = check_paths(paths, z3_timeout)
    diagnostics = [d for r in results for d in r.diagnostics]
    if output_format is Format.json:
        typer.echo(json_render.render(diagnostics, len(results)))
    else:
        if diagnostics:
            typer.echo(text_render.render_all(diagnostics))
        errors = sum(1 for d in diagnostics if d.severity == "error")
        files_with_errors = len({d.span.path for d in diagnostics})
        typer.echo(text_render.summary(errors, files_with_errors, len(results)))
    if missing or any(r.unreadable for r in results):
        raise typer.Exit(EXIT_USAGE)
    raise typer.Exit(EXIT_ERRORS if diagnostics else EXIT_CLEAN)


@app.command()
def explain(
    code: Annotated[str | None, typer.Argument(help="A diagnostic code, e.g. GPU011.")] = None,
    list_codes: Annotated[bool, typer.Option("--list", help="List every code.")] = False,
) -> None:
    """Print what a diagnostic code means, why, how to fix it, and examples."""
    from mimir.diagnostics.codes import REGISTRY, get

    if list_codes:
        for entry in REGISTRY.values():
            typer.echo(f"{entry.code}  {entry.name:<24} {entry.summary}")
        raise typer.Exit(EXIT_CLEAN)
    if code is None:
        typer.echo("error: give a code (e.g. `mimir explain GPU011`) or --list", err=True)
        raise typer.Exit(EXIT_USAGE)
    entry = get(code)
    if entry is None:
        typer.echo(f"error: unknown code `{code}`; `mimir explain --list` shows them", err=True)
        raise typer.Exit(EXIT_USAGE)
    typer.echo(f"{entry.code} ({entry.name}): {entry.summary}\n")
    typer.echo(f"why: {entry.why}")
    typer.echo(f"fix: {entry.fix}")
    typer.echo(f"reported by: {entry.found_by}")
    if entry.bad:
        typer.echo("\nbad:\n" + _indent(entry.bad))
    if entry.good:
        typer.echo("good:\n" + _indent(entry.good))


def _indent(text: str) -> str:
    return "\n".join("    " + line if line else "" for line in text.splitlines()) + "\n"


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:  # pragma: no cover
        sys.exit(130)
