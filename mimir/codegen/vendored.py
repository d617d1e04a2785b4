"""`mimir compile-gpu --check -o DIR`: are the kernels committed in DIR current?

Repositories that vendor the emitted kernels (to ship them without Mimir at run
time) check in CI that DIR matches what the sources compile to now. A file
that differs, is missing, or is left over from a function's older output is a
GPU072 diagnostic at the function's definition, so every output format and
the exit code work as they do for `mimir check`.
"""

from __future__ import annotations

from pathlib import Path

from mimir.codegen import CompileResult
from mimir.diagnostics.diagnostic import Diagnostic, Span

STALE = "GPU072"


def expected_files(result: CompileResult, emit_spvasm: bool = False) -> dict[str, bytes]:
    """Every file `compile-gpu -o DIR` writes for `result`, relative to DIR, as bytes."""
    out: dict[str, bytes] = {}
    for relative, content in result.files.items():
        out[relative] = content if isinstance(content, bytes) else content.encode("utf-8")
        if emit_spvasm and relative.endswith(".spv"):
            asm = relative[: -len(".spv")] + ".spvasm"
            out[asm] = result.listings[relative].encode("utf-8")
    return out


def stale_files(
    result: CompileResult,
    directory: Path,
    functions: dict[str, Span],
    command: str,
    emit_spvasm: bool = False,
) -> list[Diagnostic]:
    """GPU072 for each file of DIR that is not what `result` would write.

    `functions` maps each compiled function to its definition's span (where the
    diagnostic points); `command` is the command line that regenerates DIR.
    """
    wanted = expected_files(result, emit_spvasm)
    found: list[Diagnostic] = []

    def owner(relative: str) -> str | None:
        name = Path(relative).name
        for function in sorted(functions, key=len, reverse=True):
            if name == f"{function}.manifest.json" or name.startswith(f"{function}_"):
                return function
        return None

    def report(relative: str, why: str) -> None:
        function = owner(relative)
        span = functions.get(function) if function else None
        span = span or Span(result.path, 1, 1, 1, 1)
        found.append(
            Diagnostic(
                STALE,
                f"`{directory / relative}` is stale: {why}; regenerate it with `{command}`",
                span,
                function=function,
            )
        )

    for relative, content in sorted(wanted.items()):
        target = directory / relative
        if not target.is_file():
            report(relative, "it is missing")
        elif target.read_bytes() != content:
            report(relative, "it differs from what its source compiles to")
    if directory.is_dir():
        for target in sorted(p for p in directory.rglob("*") if p.is_file()):
            relative = target.relative_to(directory).as_posix()
            if relative not in wanted and owner(relative) is not None:
                report(relative, "its source no longer produces it")
    return found
