"""Every registry entry's examples are tests (rustc's `compile_fail,E0308` blocks).

- `checker` entries: the bad example fires exactly that code via `check_source`, and only
  that code; the good example checks clean.
- `shim` entries: executing the bad example under plain Python raises `MimirError` with that
  code; the good example runs clean. (The checker proves kernels, not host calls, so both
  check clean.)
- `cli` entries are input the checker cannot read; `test_cli.py` covers them end to end.

`mimir explain CODE` prints an entry, `--list` lists them all, an unknown code exits 2.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import import_file
from typer.testing import CliRunner

from mimir.array import MimirError
from mimir.check import check_source
from mimir.cli import app
from mimir.diagnostics.codes import REGISTRY, get

ENTRIES = sorted(REGISTRY.values(), key=lambda e: e.code)


def _found_by(entry) -> set[str]:
    return set(entry.found_by.split("+"))


CHECKER = [e for e in ENTRIES if "checker" in _found_by(e) and e.bad]
SHIM = [e for e in ENTRIES if "shim" in _found_by(e)]
SHIM_ONLY = [e for e in SHIM if _found_by(e) == {"shim"}]
# Kernel rules both halves enforce on a kernel call (not comments, devices or host code).
KERNEL_RULES = [
    e
    for e in CHECKER
    if "grid=" not in e.bad and 10 <= int(e.code[3:]) <= 36 and e.code != "GPU034"
]


def _ids(entries) -> list[str]:
    return [e.code for e in entries]


def test_registry_is_well_formed() -> None:
    assert len(REGISTRY) >= 25
    names = [e.name for e in ENTRIES]
    assert len(set(names)) == len(names), "one code, one meaning: names are unique"
    for code, e in REGISTRY.items():
        assert code == e.code and code.startswith("GPU") and len(code) == 6
        assert _found_by(e) <= {"checker", "shim", "cli", "compile", "compiler"}
        assert e.summary and e.why and e.fix
        for text in (e.summary, e.why, e.fix):
            assert not text.endswith("."), (code, text)
            proper = text.startswith(("Z3", "NumPy", "Mimir", "CUDA", "GPU"))
            assert not text[0].isupper() or proper, text
    # Only the codes no small example can show go without one (GPU080, GPU082: two modules;
    # GPU073: a compiler bug, which no source is meant to reach).
    no_example = {
        "GPU002", "GPU003", "GPU004", "GPU005", "GPU050", "GPU072", "GPU073", "GPU080", "GPU082"
    }  # fmt: skip
    assert {e.code for e in ENTRIES if not e.bad} <= no_example
    assert get("gpu011") is REGISTRY["GPU011"]
    assert get("GPU999") is None


@pytest.mark.parametrize("entry", CHECKER, ids=_ids(CHECKER))
def test_checker_bad_example_fires_exactly_its_code(entry) -> None:
    result = check_source(f"{entry.code}_bad.py", entry.bad_source())
    codes = [d.code for d in result.diagnostics]
    assert codes and set(codes) == {entry.code}, [str(d.message) for d in result.diagnostics]
    assert len(codes) == 1, "one diagnostic per root cause"
    assert not result.unreadable


@pytest.mark.parametrize("entry", CHECKER, ids=_ids(CHECKER))
def test_checker_good_example_checks_clean(entry) -> None:
    result = check_source(f"{entry.code}_good.py", entry.good_source())
    assert [(d.code, d.message) for d in result.diagnostics] == []


def _run(tmp_path: Path, name: str, source: str) -> BaseException | None:
    """Import the source as a module (so `inspect.getsource` works); return what it raised."""
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    try:
        import_file(path)
    except Exception as err:  # noqa: BLE001
        return err
    return None


@pytest.mark.parametrize("entry", SHIM, ids=_ids(SHIM))
def test_shim_bad_example_raises_its_code(entry, tmp_path: Path) -> None:
    err = _run(tmp_path, f"{entry.code}_bad", entry.bad_source())
    assert isinstance(err, MimirError), repr(err)
    assert err.code == entry.code
    assert str(err).startswith(f"[{entry.code}] ")


@pytest.mark.parametrize("entry", SHIM, ids=_ids(SHIM))
def test_shim_good_example_runs_clean(entry, tmp_path: Path) -> None:
    assert _run(tmp_path, f"{entry.code}_good", entry.good_source()) is None


def test_every_shim_code_is_found_by_the_checker_too() -> None:
    # GPU040-042 (a kernel call's arguments) were shim-only until host code was checked;
    # a code only the shim can raise would be a run-time failure the checker cannot prove.
    # GPU043 is the one exception by design: a `Range` is a contract on an argument's
    # values, which the checker assumes and only the call (the shim, a host) can check.
    assert [e.code for e in SHIM_ONLY] == ["GPU043"]


@pytest.mark.parametrize("entry", KERNEL_RULES, ids=_ids(KERNEL_RULES))
def test_shim_agrees_on_checker_examples_that_run(entry, tmp_path: Path) -> None:
    """A checker example whose kernel can be called: the shim raises the same code (bad) or none."""
    from support import call_kernel, kernels_of

    for kind, source in (("bad", entry.bad_source()), ("good", entry.good_source())):
        path = tmp_path / f"{entry.code}_{kind}.py"
        path.write_text(source)
        try:
            module = import_file(path)
        except Exception as err:  # noqa: BLE001 - annotations Python cannot evaluate
            assert kind == "bad" and entry.code == "GPU033", repr(err)
            continue
        found = check_source(str(path), source).diagnostics
        cex = next((dict(d.counterexample) for d in found if d.counterexample), None)
        for kernel in kernels_of(module).values():
            outcome, env = call_kernel(kernel, cex)
            if kind == "good":
                assert outcome.error is None, (outcome.error, env)
            else:
                assert outcome.code == entry.code, (outcome.error, env)


COMPILE = [e for e in ENTRIES if "compile" in _found_by(e)]


@pytest.mark.parametrize("entry", COMPILE, ids=_ids(COMPILE))
def test_compile_examples_check_clean_and_only_the_bad_one_is_refused(entry) -> None:
    """`compile` entries: both examples check clean; compiling the bad one for every
    backend fires exactly that code, the good one compiles."""
    from mimir.codegen import compile_source

    for source in (entry.bad_source(), entry.good_source()):
        assert check_source("k.py", source).diagnostics == []
    bad = compile_source("bad.py", entry.bad_source(), ["all"])
    assert bad.diagnostics and {d.code for d in bad.diagnostics} == {entry.code}
    assert bad.files == {}
    assert compile_source("good.py", entry.good_source(), ["all"]).ok


def test_cli_entries_exist() -> None:
    cli = {e.code for e in ENTRIES if e.found_by == "cli"}
    assert cli == {"GPU001", "GPU002", "GPU003", "GPU005", "GPU072"}
    result = check_source("bad.py", REGISTRY["GPU001"].bad_source())
    assert [d.code for d in result.diagnostics] == ["GPU001"] and result.unreadable
    assert check_source("good.py", REGISTRY["GPU001"].good_source()).diagnostics == []


# ---------------------------------------------------------------- mimir explain

runner = CliRunner()


@pytest.mark.parametrize("entry", ENTRIES, ids=_ids(ENTRIES))
def test_explain_prints_the_entry(entry) -> None:
    result = runner.invoke(app, ["explain", entry.code])
    assert result.exit_code == 0, result.output
    out = result.output
    assert out.startswith(f"{entry.code} ({entry.name}): {entry.summary}\n")
    assert f"why: {entry.why}\n" in out
    assert f"fix: {entry.fix}\n" in out
    for line in entry.bad.splitlines() + entry.good.splitlines():
        if line.strip():
            assert f"    {line}\n" in out, line


def test_explain_is_case_insensitive() -> None:
    lower = runner.invoke(app, ["explain", "gpu011"])
    assert lower.exit_code == 0
    assert lower.output == runner.invoke(app, ["explain", "GPU011"]).output


def test_explain_list_lists_every_code_once() -> None:
    result = runner.invoke(app, ["explain", "--list"])
    assert result.exit_code == 0
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert [ln.split()[0] for ln in lines] == [e.code for e in REGISTRY.values()]
    for ln, e in zip(lines, REGISTRY.values(), strict=True):
        assert e.name in ln and e.summary in ln


@pytest.mark.parametrize("args", [["explain", "GPU999"], ["explain", "E0308"], ["explain"]])
def test_explain_usage_errors_exit_2(args: list[str]) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert "Traceback" not in result.output
