"""Every Z3 query has a budget; running out of it is its own verdict (GPU050), never a pass.

The budget is Z3's resource limit (deterministic), proportional to `--z3-timeout`, which
stays as a wall-clock cap (tests/test_solver_normal.py shows the rlimit, not the clock, decides).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import z3

from mimir.check import check_source
from mimir.solve import prover as prover_module
from mimir.solve.prover import PROVEN, UNKNOWN, Prover

# (N^3 - N) is divisible by 6 for every N, but proving it needs induction, which Z3's
# nonlinear integer arithmetic cannot do: the obligation is true and unprovable.
HARD = textwrap.dedent(
    """\
    from mimir.array import Dim, Tensor, float32, gpu

    N = Dim("N", min=2)


    @gpu
    def hard(n: Tensor[float32, N], x: Tensor[float32, N * N * N - N]) -> Tensor[float32, N]:
        y = x.reshape(-1, 6)
        return n
    """
)


def test_unprovable_obligation_is_unknown_not_proven() -> None:
    prover = Prover(timeout_ms=200)
    n = prover.dim("N")
    prover.add_fact(n >= 2, None)
    assert prover.prove(n + 1 > n).status == PROVEN
    assert prover.prove((n * n * n - n) % 6 == 0).status == UNKNOWN


def test_timeout_is_reported_as_gpu050() -> None:
    (d,) = check_source("hard.py", HARD, timeout_ms=200).diagnostics
    assert d.code == "GPU050"
    assert d.message.startswith("could not prove: cannot reshape")
    assert (d.span.line, d.span.column) == (8, 9)


def test_timeout_is_configurable_from_the_command_line(tmp_path: Path) -> None:
    path = tmp_path / "hard.py"
    path.write_text(HARD)
    run = subprocess.run(
        [sys.executable, "-m", "mimir", "check", "--no-cache", "--z3-timeout", "100", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 1
    assert "error[GPU050]" in run.stdout


def test_z3_is_given_the_timeout_and_an_rlimit() -> None:
    prover = Prover(timeout_ms=1234)
    assert isinstance(prover.solver, z3.Solver)
    assert "timeout" in str(prover.solver.param_descrs())
    assert prover.rlimit == 1234 * prover_module.RLIMIT_PER_MS


def test_gpu050_comes_from_the_rlimit_and_is_reproducible(monkeypatch: pytest.MonkeyPatch) -> None:
    """A wall clock of 200 s and an rlimit of 200,000 units: the rlimit ends the query."""
    monkeypatch.setattr(prover_module, "RLIMIT_PER_MS", 1)
    runs = [check_source("hard.py", HARD, timeout_ms=200_000).diagnostics for _ in range(2)]
    assert runs[0] == runs[1]
    (d,) = runs[0]
    assert d.code == "GPU050"
    assert d.message.endswith("(the solver returned unknown: resource limit reached)")


RACE = textwrap.dedent(
    """\
    from mimir.array import Dim, Tensor, float32, gpu, program_id

    N = Dim("N")


    @gpu(grid=(N,))
    def halve_index(x: Tensor[float32, N], out: Tensor[float32, N]):
        i = program_id(0)
        out[i // 2] = x[i]
    """
)


def test_an_undecided_race_query_is_gpu050_at_the_store(monkeypatch: pytest.MonkeyPatch) -> None:
    # A race query (it shows the raced `element[k]`) that runs out of budget is GPU050 at the
    # store, never a pass; the other queries are decided as usual.
    prove = Prover.prove

    def undecided_races(self, cond, show=(), *args, **kwargs):
        if any(name.startswith("element[") for name, _ in show):
            return prover_module.Verdict(UNKNOWN, reason="the solver returned unknown: test")
        return prove(self, cond, show, *args, **kwargs)

    monkeypatch.setattr(Prover, "prove", undecided_races)
    (d,) = check_source("race.py", RACE).diagnostics
    assert d.code == "GPU050"
    assert d.message == (
        "could not prove: write race: two program ids may write the same element of `out` "
        "(`out[i // 2]`) (the solver returned unknown: test)"
    )
    assert (d.span.line, d.span.column, d.span.end_line) == (9, 5, 9)
