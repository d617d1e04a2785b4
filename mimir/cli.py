"""The `mimir` command line (typer).

Exit codes, in every format: 0 clean, 1 errors found, 2 usage error or input
that cannot be read (a missing file, a syntax error). Start-up stays cheap:
z3 and networkx are imported only by the commands that solve.
"""

from __future__ import annotations

import os
import sys
from enum import StrEnum
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


class Format(StrEnum):
    text = "text"
    concise = "concise"
    json = "json"
    sarif = "sarif"
    github = "github"


EXIT_CLEAN, EXIT_ERRORS, EXIT_USAGE = 0, 1, 2


def _print_version(value: bool) -> None:
    if value:
        import mimir

        typer.echo(f"mimir {mimir.__version__}")
        raise typer.Exit(EXIT_CLEAN)


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print Mimir's version and exit.",
        ),
    ] = False,
) -> None:
    """Prove typed-Python GPU kernels before they run."""


def _codes_option(values: list[str] | None, flag: str) -> tuple[str, ...] | None:
    """`--select GPU011,GPU018 --select GPU05` as one validated tuple (None when absent)."""
    if not values:
        return None
    from mimir.gate.config import parse_codes

    items = [v.strip() for value in values for v in value.split(",") if v.strip()]
    return parse_codes(items, f"`{flag}`")


def _globs_option(values: list[str] | None) -> tuple[str, ...] | None:
    if not values:
        return None
    from mimir.gate.config import check_glob

    globs = tuple(v.strip() for value in values for v in value.split(",") if v.strip())
    for glob in globs:
        check_glob(glob, "`--exclude`")
    return globs


def _size_option(value: str | None) -> int | None:
    if value is None:
        return None
    from mimir.gate.config import ConfigError
    from mimir.safeio import parse_size

    try:
        return parse_size(value, "`--max-file-size`")
    except ValueError as err:
        raise ConfigError(str(err)) from None


def _usage_error(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(EXIT_USAGE)


@app.command()
def check(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="Files or directories to check (default: the current directory)."),
    ] = None,
    output_format: Annotated[
        Format, typer.Option("--format", help="Output format.", case_sensitive=False)
    ] = Format.text,
    output_file: Annotated[
        Path | None,
        typer.Option("--output-file", "-o", help="Write the report to FILE instead of stdout."),
    ] = None,
    config_file: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="Read settings from FILE (mimir.toml or pyproject.toml) instead of "
            "searching upward from the current directory.",
        ),
    ] = None,
    select: Annotated[
        list[str] | None,
        typer.Option("--select", help="Codes or prefixes to report (comma-separated)."),
    ] = None,
    ignore: Annotated[
        list[str] | None,
        typer.Option("--ignore", help="Codes or prefixes not to report (comma-separated)."),
    ] = None,
    exclude: Annotated[
        list[str] | None,
        typer.Option("--exclude", help="Globs to exclude, replacing the configured ones."),
    ] = None,
    force_exclude: Annotated[
        bool,
        typer.Option(
            "--force-exclude", help="Apply exclude globs to files named on the command line too."
        ),
    ] = False,
    z3_timeout: Annotated[
        int | None,
        typer.Option(
            "--z3-timeout",
            min=1,
            help="Z3 budget per query, in milliseconds (default: 5000): a deterministic "
            "resource limit proportional to it, and a wall-clock cap.",
        ),
    ] = None,
    max_file_size: Annotated[
        str | None,
        typer.Option(
            "--max-file-size",
            help="Skip (GPU003) files larger than this many bytes; K, M, G suffixes (default: 2M).",
        ),
    ] = None,
    baseline: Annotated[
        Path | None,
        typer.Option("--baseline", help="Report only findings not recorded in this baseline."),
    ] = None,
    write_baseline: Annotated[
        Path | None,
        typer.Option("--write-baseline", help="Record every current finding here and exit 0."),
    ] = None,
    exit_zero: Annotated[
        bool, typer.Option("--exit-zero", help="Exit 0 even when errors are found.")
    ] = False,
    warnings_as_errors: Annotated[
        bool, typer.Option("--warnings-as-errors", help="Exit 1 on warnings too.")
    ] = False,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Neither read nor write the result cache.")
    ] = False,
    jobs: Annotated[
        int | None,
        typer.Option("--jobs", "-j", min=1, help="Worker processes (at most one per core)."),
    ] = None,
    coverage: Annotated[
        bool,
        typer.Option(
            "--coverage",
            help="After the findings, print per file how many tensor expressions of host "
            "code have a known shape, and why the others are unknown (to stderr).",
        ),
    ] = False,
) -> None:
    """Prove shapes, dtypes and bounds of every @gpu kernel in PATHS.

    Exit status: 0 no errors, 1 errors found, 2 usage error, bad configuration
    or unreadable input; the same in every format.
    """
    from mimir.gate import baseline as baselines
    from mimir.gate.config import ConfigError, load_config
    from mimir.gate.runner import run_check, select_files

    try:
        config = load_config(config_file).override(
            select=_codes_option(select, "--select"),
            ignore=_codes_option(ignore, "--ignore"),
            exclude=_globs_option(exclude),
            z3_timeout=z3_timeout,
            max_file_size=_size_option(max_file_size),
        )
        recorded = baselines.load(baseline) if baseline is not None else None
    except (ConfigError, baselines.BaselineError) as err:
        raise _usage_error(str(err)) from None
    _check_output_file(output_file)
    _check_output_file(write_baseline)

    files = select_files(paths or [Path(".")], config, force_exclude)
    checked = run_check(files, config, jobs=jobs, use_cache=not no_cache)
    unreadable = any(c.unreadable for c in checked)

    found = [
        (d, baselines.fingerprint(d, c.relpath, c.lines)) for c in checked for d in c.diagnostics
    ]
    if write_baseline is not None:
        try:
            count = baselines.write(write_baseline, (f for _, f in found))
        except baselines.BaselineError as err:
            raise _output_error(str(err)) from None
        typer.echo(f"wrote {count} finding{'s' * (count != 1)} to {write_baseline}", err=True)
        raise typer.Exit(EXIT_USAGE if unreadable else EXIT_CLEAN)
    if recorded is not None:
        diagnostics = baselines.new_findings(found, recorded)
    else:
        diagnostics = [d for d, _ in found]

    report = _render(output_format, diagnostics, checked)
    if output_file is not None:
        _write_file(output_file, report + "\n" if report else "")
    elif report:
        typer.echo(report)

    if coverage:
        _print_coverage(checked, config.z3_timeout)
    if unreadable:
        raise typer.Exit(EXIT_USAGE)
    failing = {"error", "warning"} if warnings_as_errors else {"error"}
    if not exit_zero and any(d.severity in failing for d in diagnostics):
        raise typer.Exit(EXIT_ERRORS)
    raise typer.Exit(EXIT_CLEAN)


def _print_coverage(checked: list, timeout_ms: int) -> None:
    """`path: 412 tensor expressions: 87% known, ...` for each readable file (stderr)."""
    from mimir.host import coverage_of

    for c in checked:
        if not c.unreadable:
            typer.echo(
                f"{c.path}: {coverage_of(c.path, chr(10).join(c.lines), timeout_ms)}", err=True
            )


def _render(fmt: Format, diagnostics: list, checked: list) -> str:
    """The whole report in `fmt` (without a trailing newline)."""
    if fmt is Format.json:
        from mimir.diagnostics.render import json as json_render

        return json_render.render(diagnostics, len(checked))
    if fmt is Format.sarif:
        import mimir
        from mimir.diagnostics.render import sarif

        lines = {c.path: c.lines for c in checked}
        return sarif.render(diagnostics, version=mimir.__version__, source_lines=lines)
    if fmt is Format.github:
        from mimir.diagnostics.render import github

        return github.render_all(diagnostics)
    from mimir.diagnostics.render import concise
    from mimir.diagnostics.render import text as text_render

    body = (concise if fmt is Format.concise else text_render).render_all(diagnostics)
    errors = sum(1 for d in diagnostics if d.severity == "error")
    warnings = sum(1 for d in diagnostics if d.severity == "warning")
    files_with_findings = len({d.span.path for d in diagnostics})
    summary = text_render.summary(errors, files_with_findings, len(checked), warnings)
    return f"{body}\n{summary}" if body else summary


@app.command()
def explain(
    code: Annotated[str | None, typer.Argument(help="A diagnostic code, e.g. GPU011.")] = None,
    target: Annotated[
        str | None,
        typer.Argument(help="FILE or FILE:LINE: re-derive this code's failure in that file."),
    ] = None,
    list_codes: Annotated[bool, typer.Option("--list", help="List every code.")] = False,
    z3_timeout: Annotated[
        int, typer.Option("--z3-timeout", min=1, help="Z3 budget per query, in milliseconds.")
    ] = 5000,
) -> None:
    """Print what a diagnostic code means, why, how to fix it, and examples.

    With FILE[:LINE], re-derive the failure in FILE: the counterexample and the chain
    of facts that produced it, one line per fact with its source location.
    """
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
    if target is not None:
        _explain_in_file(entry.code, target, z3_timeout)
        return
    typer.echo(f"{entry.code} ({entry.name}): {entry.summary}\n")
    typer.echo(f"why: {entry.why}")
    typer.echo(f"fix: {entry.fix}")
    typer.echo(f"reported by: {entry.found_by}")
    if entry.severity != "error":
        typer.echo(f"severity: {entry.severity} (alone it leaves the exit code at 0)")
    if entry.bad:
        typer.echo("\nbad:\n" + _indent(entry.bad))
    if entry.good:
        typer.echo("good:\n" + _indent(entry.good))


def _explain_in_file(code: str, target: str, timeout_ms: int) -> None:
    from mimir.check import check_file
    from mimir.diagnostics.explain import explain_file

    path_text, line = target, None
    head, sep, tail = target.rpartition(":")
    if sep and tail.isdigit():
        path_text, line = head, int(tail)
    path = Path(path_text)
    if not path.is_file():
        typer.echo(f"error: cannot read `{path_text}`", err=True)
        raise typer.Exit(EXIT_USAGE)
    result = check_file(path, timeout_ms)
    if result.unreadable:
        from mimir.diagnostics.render import text as text_render

        typer.echo(text_render.render_all(result.diagnostics))
        raise typer.Exit(EXIT_USAGE)
    from mimir.parse.depth import on_deep_stack

    text, count = on_deep_stack(lambda: explain_file(result, code, line))
    if count == 0:
        where = f"{path_text}:{line}" if line is not None else path_text
        typer.echo(f"no {code} in {where}: nothing to explain")
        raise typer.Exit(EXIT_CLEAN)
    typer.echo(text)
    raise typer.Exit(EXIT_ERRORS)


@app.command("compile-gpu")
def compile_gpu(
    path: Annotated[Path, typer.Argument(help="The kernel file to compile.")],
    backend: Annotated[
        str | None,
        typer.Option(
            "--backend",
            help="msl, wgsl, ptx, spirv, or all (every backend); comma-separated for several "
            "(default: `backends` from the configuration, else all).",
        ),
    ] = None,
    output_dir: Annotated[
        Path | None,
        typer.Option(
            "--output-dir",
            "-o",
            help="Write the kernels and manifests into DIR (per-backend folders for `all`); "
            "without it the kernel text goes to stdout.",
        ),
    ] = None,
    function: Annotated[
        str | None, typer.Option("--function", help="Compile only this @gpu function.")
    ] = None,
    emit: Annotated[
        str | None,
        typer.Option(
            "--emit",
            help="spvasm: also write each SPIR-V module's readable assembly as FILE.spvasm "
            "(without -o the assembly is what is printed).",
        ),
    ] = None,
    check_only: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Write nothing; fail (exit 1, GPU072) when the kernels committed in the -o "
            "folder are stale against their source.",
        ),
    ] = False,
    output_format: Annotated[
        Format,
        typer.Option("--format", help="Format of diagnostics and refusals.", case_sensitive=False),
    ] = Format.text,
    config_file: Annotated[
        Path | None,
        typer.Option("--config", help="Read settings (default backends) from FILE."),
    ] = None,
    math: Annotated[
        str,
        typer.Option(
            "--math",
            help="fast: PTX exp, log, tanh, sigmoid and gelu through the hardware's ex2/rcp "
            "units (a few ulp; the default); precise: correctly rounded sequences. "
            "Recorded in the PTX manifest.",
        ),
    ] = "fast",
    ptx_target: Annotated[
        str | None,
        typer.Option(
            "--ptx-target",
            help="sm_90a: float16 and bfloat16 matmuls on Hopper's warpgroup tensor cores "
            "(wgmma), in PTX files that only compute capability 9.0 runs (the manifest's "
            '`"requires": ["sm_90a"]`). Default: each file targets the oldest architecture '
            "it can (sm_70, or sm_80 for cp.async and mma.sync).",
        ),
    ] = None,
) -> None:
    """Compile every @gpu function that checks clean into GPU kernels and manifests.

    A function with check errors, or that a backend refuses, is reported and none of its
    files are written; the others are. Exit status: 0 all written (or up to date with
    --check), 1 check errors, refusals or stale files, 2 usage error or unreadable input;
    the same in every format.
    """
    from mimir.codegen import compile_file, resolve_backends
    from mimir.gate.config import ConfigError, load_config

    if backend is None:
        try:
            names = list(load_config(config_file).backends)
        except ConfigError as err:
            raise _usage_error(str(err)) from None
    else:
        names = [b.strip().lower() for b in backend.split(",")]
    try:
        backends = resolve_backends(names)
    except ValueError as err:
        raise _usage_error(str(err)) from None
    math = math.strip().lower()
    if math not in ("fast", "precise"):
        raise _usage_error(f"unknown `--math {math}`; expected fast or precise")
    if ptx_target is not None and ptx_target.strip().lower() != "sm_90a":
        raise _usage_error(f"unknown `--ptx-target {ptx_target}`; expected sm_90a")
    ptx_target = None if ptx_target is None else "sm_90a"
    if check_only and output_dir is None:
        raise _usage_error("`--check` compares with a folder: give it with `-o DIR`")
    if emit is not None and emit.strip().lower() != "spvasm":
        raise _usage_error(f"unknown `--emit {emit}`; expected spvasm")
    if emit is not None and "spirv" not in backends:
        raise _usage_error("`--emit spvasm` needs the spirv backend (`--backend spirv` or `all`)")
    if output_dir is not None and not check_only:
        _check_output_dir(output_dir)
    from mimir.progress import Bar

    with Bar("compiling", total=1) as bar:

        def step(done: int, total: int, name: str) -> None:
            bar.total = total
            bar.step(name)

        result = compile_file(
            path, backends, function, math=math, progress=step, ptx_target=ptx_target
        )
    if result.usage_error is not None:
        raise _usage_error(result.usage_error)
    # Functions that check clean and compile are written; the others are refused with
    # their diagnostics (and none of their files), and the exit status is 1.
    status = EXIT_ERRORS if result.diagnostics else EXIT_CLEAN
    if result.diagnostics and (result.unreadable or check_only or not result.files):
        typer.echo(_render(output_format, result.diagnostics, [_source_of(path)]))
        raise typer.Exit(EXIT_USAGE if result.unreadable else EXIT_ERRORS)
    if check_only:
        assert output_dir is not None
        _check_vendored(path, result, output_dir, names, function, emit, output_format, math)
    if output_dir is None:
        for relative, listing in result.listings.items():
            if relative.endswith(".manifest.json"):
                continue
            typer.echo(f"// file: {relative}")
            typer.echo(listing)
        if result.diagnostics:
            typer.echo(_render(output_format, result.diagnostics, [_source_of(path)]))
        raise typer.Exit(status)
    outputs: dict[Path, str | bytes] = {}
    for relative, content in result.files.items():
        outputs[output_dir / relative] = content
        if emit is not None and relative.endswith(".spv"):
            outputs[(output_dir / relative).with_suffix(".spvasm")] = result.listings[relative]
    _write_outputs(output_dir, outputs)
    count = len(outputs)
    written = f"wrote {count} file{'s' * (count != 1)} to {output_dir}"
    if result.refused:
        refused = ", ".join(f"`{name}`" for name in result.refused)
        written += f"; refused {refused}, whose files were not written"
    if result.diagnostics:
        typer.echo(_render(output_format, result.diagnostics, [_source_of(path)]))
    # in a machine-read format stdout holds the report alone
    typer.echo(written, err=output_format not in (Format.text, Format.concise) and status != 0)
    raise typer.Exit(status)


def _check_output_dir(directory: Path) -> None:
    from mimir.safeio import OutputError, check_writable

    try:
        check_writable(directory, directory=True)
    except OutputError as err:
        raise _output_error(str(err)) from None


def _output_error(message: str) -> typer.Exit:
    typer.echo(f"error[GPU005]: {message}", err=True)
    return typer.Exit(EXIT_USAGE)


def _check_output_file(path: Path | None) -> None:
    """Exit 2 (GPU005) before any work when the report or baseline file cannot be written."""
    if path is None:
        return
    from mimir.safeio import OutputError, check_writable

    try:
        check_writable(path)
    except OutputError as err:
        raise _output_error(str(err)) from None


def _write_file(path: Path, content: str) -> None:
    from mimir.safeio import OutputError, write_atomic

    try:
        write_atomic(path, content)
    except OutputError as err:
        raise _output_error(str(err)) from None


def _write_outputs(directory: Path, outputs: dict[Path, str | bytes]) -> None:
    """Validate every path, then write all files or none (GPU005 and exit 2 on failure).

    A symlink at a target is replaced, never followed; a linked folder inside
    `directory` is refused, since writing into it would leave `directory`.
    """
    from mimir.safeio import OutputError, check_inside, check_writable, write_all

    try:
        check_writable(directory, directory=True)
        for target in outputs:
            check_inside(directory, target)
            check_writable(target)
        write_all(outputs)
    except OutputError as err:
        raise _output_error(str(err)) from None


def _source_of(path: Path) -> object:
    """What the renderers need of a compiled file: its path and its lines (for SARIF)."""
    from types import SimpleNamespace

    from mimir.parse.spans import read_source, split_lines

    text, _ = read_source(path)
    return SimpleNamespace(path=str(path), lines=split_lines(text or ""))


def _check_vendored(
    path: Path,
    result: object,
    directory: Path,
    names: list[str],
    function: str | None,
    emit: str | None,
    output_format: Format,
    math: str = "fast",
) -> None:
    """Exit 0 when DIR holds exactly what PATH compiles to now, else report GPU072 and exit 1."""
    import shlex

    from mimir.codegen.vendored import stale_files

    spans = result.functions  # type: ignore[attr-defined]
    command = [
        "mimir",
        "compile-gpu",
        str(path),
        "--backend",
        ",".join(names),
        "-o",
        str(directory),
    ]
    if function is not None:
        command += ["--function", function]
    if emit is not None:
        command += ["--emit", emit]
    if math != "fast":
        command += ["--math", math]
    stale = stale_files(result, directory, spans, shlex.join(command), emit is not None)  # type: ignore[arg-type]
    if stale:
        typer.echo(_render(output_format, stale, [_source_of(path)]))
        raise typer.Exit(EXIT_ERRORS)
    if output_format in (Format.text, Format.concise):
        count = len(result.files)  # type: ignore[attr-defined]
        typer.echo(f"{directory} is up to date ({count} file{'s' * (count != 1)})")
    elif output_format is not Format.github:
        typer.echo(_render(output_format, [], [_source_of(path)]))
    raise typer.Exit(EXIT_CLEAN)


@app.command()
def verify(
    paths: Annotated[list[Path], typer.Argument(help="The kernel files to verify.")],
    function: Annotated[
        str | None, typer.Option("--function", help="Verify only this @gpu function.")
    ] = None,
    dim: Annotated[
        list[str] | None,
        typer.Option("--dim", help="Fix a dim's size, e.g. `--dim N=1000` (repeatable)."),
    ] = None,
    backend: Annotated[
        list[str] | None,
        typer.Option(
            "--backend",
            help="Run only this backend: wgsl, spirv or ptx (repeatable; default: every "
            "backend this machine can run).",
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the random inputs.")] = 0,
    rtol: Annotated[
        float | None, typer.Option("--rtol", help="Relative tolerance for float outputs.")
    ] = None,
    atol: Annotated[
        float | None, typer.Option("--atol", help="Absolute tolerance for float outputs.")
    ] = None,
    reference: Annotated[
        str,
        typer.Option(
            "--reference",
            help="numpy: the shim's semantics computed with NumPy where it is installed (the "
            "default; fast); shim: the shim's own element-by-element loops.",
        ),
    ] = "numpy",
) -> None:
    """Compile each file for every backend this machine runs, run it, and compare with the
    Python shim.

    WGSL and SPIR-V run through wgpu on the adapter it finds (a GPU, or a CPU Vulkan
    driver such as Mesa lavapipe); PTX runs through the CUDA driver where a CUDA device
    is present. Each @gpu function runs on random inputs at a few sizes on each
    backend; one table lists the max absolute and relative error of every output. A
    function that fails `mimir check` is reported and not run. stderr has a line per
    function as it finishes (and a progress bar on a terminal). Exit 1 on any mismatch,
    check error or refusal. Needs `pip install 'mimir-kernels[gpu]'` (or a CUDA driver).
    Each file is imported to run the shim.
    """
    from mimir.diagnostics.render import text as text_render

    for path in paths:
        if not path.is_file():
            raise _usage_error(f"cannot read `{path}`")
    reference = reference.strip().lower()
    if reference not in ("numpy", "shim"):
        raise _usage_error(f"unknown `--reference {reference}`; expected numpy or shim")
    fixed: dict[str, int] = {}
    for item in dim or []:
        name, _, value = item.partition("=")
        if not name.strip().isidentifier() or not value.strip().isdigit():
            raise _usage_error(f"`--dim {item}`: expected NAME=SIZE, e.g. `--dim N=1000`")
        fixed[name.strip()] = int(value)
    from mimir.progress import Bar
    from mimir.runtime.verify_run import BACKENDS, verify_file
    from mimir.runtime.wgpu_runner import GpuUnavailableError

    for b in backend or []:
        if b not in BACKENDS:
            raise _usage_error(f"`--backend {b}`: expected one of {', '.join(BACKENDS)}")
    reports = []
    with Bar("verifying", total=1) as bar:
        for path in paths:
            started = [_now()]

            def step(done: int, total: int, what: str, where: Path = path) -> None:
                bar.total = total
                bar.step(f"{where.name}: {what}")

            def finished(
                name: str, outcome: str, where: Path = path, clock: list[float] = started
            ) -> None:
                seconds = _now() - clock[0]
                clock[0] = _now()
                bar.note(f"{where}: {name}: {outcome} ({seconds:.1f} s)")

            try:
                report = verify_file(
                    path, function, seed, fixed, rtol, atol, backend or None, step,
                    on_function=finished, fast=reference == "numpy",
                )  # fmt: skip
            except GpuUnavailableError as err:
                raise _usage_error(str(err)) from None
            reports.append((path, report))
    several = len(paths) > 1
    typer.echo(f"adapter: {reports[0][1].adapter}")
    for name, reason in reports[0][1].missing.items():
        typer.echo(f"{name}: not run ({reason})")
    matched: list[str] = []
    mismatched: list[str] = []
    unchecked: list[str] = []
    refused: list[str] = []
    for path, report in reports:
        label = (lambda f, p=path: f"{p}:{f}") if several else (lambda f: f)
        if several:
            typer.echo(f"\n{path}:")
        if report.diagnostics:
            typer.echo(text_render.render_all(report.diagnostics))
        if report.checks:
            typer.echo(_verify_table(report.checks))
        for check in report.checks:
            for i in check.bad[:3]:
                sizes = ", ".join(f"{k}={v}" for k, v in check.dims.items()) or "-"
                typer.echo(
                    f"    {check.function} {check.backend} [{sizes}] {check.output}[{i}]: "
                    f"got {check.actual[i]!r}, expected {check.expected[i]!r}"
                )
        for name, message in report.failures:
            typer.echo(f"{name}: error: {message}")
        bad = {c.function for c in report.checks if not c.ok} | {n for n, _ in report.failures}
        refusing = {d.function for d in report.diagnostics} - set(report.check_failed) - bad
        ran = dict.fromkeys(c.function for c in report.checks)
        matched += [label(f) for f in ran if f not in bad and f not in refusing]
        mismatched += [label(f) for f in sorted(bad)]
        unchecked += [label(f) for f in report.check_failed]
        refused += [label(f) for f in sorted(refusing) if f is not None]
    if not (mismatched or unchecked or refused):
        count = len(matched)
        typer.echo(f"verified {count} function{'s' * (count != 1)}: all outputs match")
        raise typer.Exit(EXIT_CLEAN)
    parts = []
    if matched:
        parts.append(f"{len(matched)} function{'s' * (len(matched) != 1)} matched")
    if mismatched:
        parts.append(_named(mismatched, "failed verification"))
    if refused:
        parts.append(_named(refused, "could not be compiled for every backend"))
    if unchecked:
        parts.append(_named(unchecked, "failed `mimir check` and did not run"))
    typer.echo("; ".join(parts))
    raise typer.Exit(EXIT_ERRORS)


def _named(names: list[str], what: str) -> str:
    shown = ", ".join(f"`{n}`" for n in names)
    return f"{len(names)} function{'s' * (len(names) != 1)} {what} ({shown})"


def _now() -> float:
    import time

    return time.monotonic()


def _verify_table(checks: list) -> str:
    """One row per output, function, backend and dim binding; columns padded to fit."""
    header = ("function", "backend", "dims", "output", "values", "max abs", "max rel", "result")
    rows = [header]
    for c in checks:
        sizes = ", ".join(f"{k}={v}" for k, v in c.dims.items()) or "-"
        verdict = "ok" if c.ok else f"MISMATCH in {len(c.bad)} of {c.count}"
        rows.append(
            (
                c.function,
                c.backend,
                f"[{sizes}]",
                f"{c.output} ({c.dtype})",
                str(c.count),
                f"{c.max_abs:.3g}",
                f"{c.max_rel:.3g}",
                verdict,
            )  # fmt: skip
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    right = {4, 5, 6}
    lines = [
        "  ".join(
            cell.rjust(w) if i in right else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]
    return "\n".join(lines)


@app.command()
def lsp(
    tcp: Annotated[
        bool, typer.Option("--tcp", help="Listen on TCP (--host, --port) instead of stdio.")
    ] = False,
    host: Annotated[str, typer.Option("--host", help="Address to listen on with --tcp.")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, typer.Option("--port", help="Port to listen on with --tcp.")] = 2087,
    z3_timeout: Annotated[
        int | None,
        typer.Option(
            "--z3-timeout",
            min=1,
            help="Z3 timeout per query, in milliseconds (default: the configuration's).",
        ),
    ] = None,
    debounce_ms: Annotated[
        int,
        typer.Option("--debounce-ms", min=0, help="Wait this long after an edit before checking."),
    ] = 20,
    docs_url: Annotated[
        str | None,
        typer.Option(
            "--docs-url",
            help="Link each diagnostic's code here: a URL with `{code}` for the code's anchor "
            "(e.g. https://example.org/codes.html#{code}); default: the codes page installed "
            "with Mimir. The client's initializationOptions `docsUrl` does the same.",
        ),
    ] = None,
) -> None:
    """Run the language server (stdio by default): diagnostics, hovers, fixes as you type."""
    try:
        from mimir.lsp.server import serve
    except ImportError as err:  # pygls is a dependency; a broken install says so plainly
        raise _usage_error(f"the language server needs pygls: {err}") from None
    status = serve(
        tcp=tcp,
        host=host,
        port=port,
        z3_timeout=z3_timeout,
        debounce=debounce_ms / 1000,
        docs_url=docs_url,
    )
    raise typer.Exit(status)


def _indent(text: str) -> str:
    return "\n".join("    " + line if line else "" for line in text.splitlines()) + "\n"


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:  # pragma: no cover
        sys.exit(130)
    except Exception as err:  # a bug in Mimir: say so in one line, never a traceback
        if os.environ.get("MIMIR_TRACEBACK"):
            raise
        print(
            f"mimir: internal error: {type(err).__name__}: {err} "
            "(set MIMIR_TRACEBACK=1 for the traceback, and please report it)",
            file=sys.stderr,
        )
        sys.exit(EXIT_USAGE)
