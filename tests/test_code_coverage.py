"""Every code the project can emit is fired by at least one fixture or example.

A code that nothing fires is either dead or untested: both fail here. Checker codes need a
`# E: CODE` marker in tests/fixtures/check, tests/fixtures/host or tests/torch_programs;
shim codes need their registry example to raise them under plain Python; compile codes
need their registry example to be refused by `compile_source`; the input codes
(GPU001-GPU005) and the solver's own verdict (GPU050) are fired here directly.
"""

from __future__ import annotations

import re
from pathlib import Path

from support import FIXTURES, import_file, markers
from test_solver_limits import HARD
from typer.testing import CliRunner

from mimir.array import MimirError
from mimir.check import check_file, check_source
from mimir.cli import app
from mimir.diagnostics.codes import REGISTRY
from mimir.parse.depth import MAX_EXPRESSION_DEPTH
from mimir.parse.spans import read_source


def _fixture_codes() -> set[str]:
    # Kernel fixtures, host-code fixtures and the PyTorch corpus's buggy programs.
    paths = [*FIXTURES.glob("*.py"), *(FIXTURES.parent / "host").glob("*.py")]
    paths += (FIXTURES.parent.parent / "torch_programs").glob("*.py")
    return {code for p in paths for _, code in markers(p.read_text())}


def _shim_code(tmp_path: Path, code: str) -> str | None:
    path = tmp_path / f"{code}.py"
    path.write_text(REGISTRY[code].bad_source())
    try:
        import_file(path)
    except MimirError as err:
        return err.code
    return None


def _broken_launch_order_codes() -> set[str]:
    """GPU073 guards an invariant the scheduler keeps, so only a hand-broken order fires
    it (tests/test_launch_order.py covers the messages)."""
    from mimir.codegen import compile_source
    from mimir.codegen.passes import launch_order

    weighted = Path(__file__).parent / "kernels" / "weighted.py"
    keep = launch_order.dependency_order
    launch_order.dependency_order = lambda kernels, roles: list(range(len(kernels)))
    try:
        result = compile_source(
            str(weighted), weighted.read_text(), ["wgsl"], function="row_max_over_total"
        )
    finally:
        launch_order.dependency_order = keep
    return {d.code for d in result.diagnostics}


def test_every_code_has_something_that_fires_it(tmp_path: Path) -> None:
    fired = _fixture_codes()
    # Input the checker cannot read.
    fired |= {d.code for d in check_source("broken.py", "def f(:\n").diagnostics}
    fired |= {d.code for d in check_file(tmp_path / "missing.py").diagnostics}
    # Input skipped for its size; an expression nested past the limit; an output
    # path that cannot be written (tests/test_hostile_input.py covers each in depth).
    (tmp_path / "big.py").write_text("x = 1\n")
    fired.add(read_source(tmp_path / "big.py", max_bytes=2)[1].code)
    deep = "x = " + " + ".join(["1"] * (MAX_EXPRESSION_DEPTH + 1)) + "\n"
    fired |= {d.code for d in check_source("deep.py", deep).diagnostics}
    unwritable = CliRunner().invoke(app, ["check", "-o", "/proc/x", str(tmp_path / "big.py")])
    fired |= set(re.findall(r"error\[(GPU\d{3})\]", unwritable.stderr))
    # The solver's own verdict, under a small timeout.
    fired |= {d.code for d in check_source("hard.py", HARD, timeout_ms=200).diagnostics}
    # Vendored kernels that are stale against their source (`compile-gpu --check`).
    from mimir.codegen import compile_source
    from mimir.codegen.vendored import stale_files

    compiled = compile_source("k.py", REGISTRY["GPU011"].good_source(), ["wgsl"])
    fired |= {d.code for d in stale_files(compiled, tmp_path / "empty", {}, "regen")}
    for code, entry in REGISTRY.items():
        if "shim" in entry.found_by.split("+") and entry.bad:
            shim = _shim_code(tmp_path, code)
            if shim is not None:
                fired.add(shim)
        if "checker" in entry.found_by.split("+") and entry.bad and code not in fired:
            # Warnings (suppression bookkeeping) live outside the error fixtures.
            fired |= {
                d.code
                for d in check_source(f"{code}.py", entry.bad_source()).diagnostics
                if d.severity == "warning"
            }
        if "compile" in entry.found_by.split("+"):
            from mimir.codegen import compile_source

            result = compile_source(f"{code}.py", entry.bad_source(), ["all"])
            fired |= {d.code for d in result.diagnostics}
    fired |= _broken_launch_order_codes()
    missing = sorted(set(REGISTRY) - fired)
    assert not missing, f"codes nothing fires: {missing}"


def test_fixture_markers_only_name_registered_codes() -> None:
    unknown = _fixture_codes() - set(REGISTRY)
    assert not unknown, unknown
