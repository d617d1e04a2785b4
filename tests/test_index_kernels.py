"""Index-level kernels (`@gpu(grid=...)`): counterexamples in the user's terms, the shim's grid.

The fixtures in tests/fixtures/check/index_*.py prove which lines fail; these tests pin the
wording users see and the shim's run-time behaviour (a loop over the grid).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from support import import_file

from mimir.array import MimirError, rand, zeros
from mimir.check import check_source

SHIFT = textwrap.dedent(
    """\
    from mimir.array import Dim, Tensor, float32, gpu, program_id

    N = Dim("N")


    @gpu(grid=(N,))
    def shift(x: Tensor[float32, N], out: Tensor[float32, N]):
        i = program_id(0)
        out[i] = x[i + 1]
    """
)


def test_out_of_bounds_counterexample_names_program_id_and_index() -> None:
    (d,) = check_source("shift.py", SHIFT).diagnostics
    assert (d.code, d.span.line, d.span.column) == ("GPU018", 9, 16)
    assert d.message == "index `i + 1` may be out of bounds for axis 0 of `x` with size N"
    assert d.why.endswith(
        "counterexample: N=1, program_id(0)=0, index=1 (`x` has 1 element on axis 0)"
    )


def test_race_counterexample_shows_two_program_ids() -> None:
    source = SHIFT.replace("out[i] = x[i + 1]", "out[i // 2] = x[i]")
    (d,) = check_source("race.py", source).diagnostics
    assert d.code == "GPU028"
    ce = dict(d.counterexample)
    assert ce["program_id(0)"] != ce["program_id(0)'"]
    assert ce["program_id(0)"] // 2 == ce["program_id(0)'"] // 2 == ce["element[0]"]


def test_guard_makes_the_read_provable() -> None:
    source = SHIFT.replace(
        "    out[i] = x[i + 1]\n",
        "    if i + 1 < N:\n        out[i] = x[i + 1]\n",
    )
    assert source != SHIFT
    assert check_source("guarded.py", source).diagnostics == []


def test_loop_carried_index_is_havocked_not_trusted() -> None:
    # `j` changes inside the loop, so after it nothing is known about `j`: sound, never a pass.
    source = SHIFT.replace(
        "    out[i] = x[i + 1]\n",
        "    j = i\n    for k in range(3):\n        j = j + 0\n    out[i] = x[j]\n",
    )
    assert source != SHIFT
    (d,) = check_source("havoc.py", source).diagnostics
    assert (d.code, d.span.line) == ("GPU018", 12)


def test_shim_runs_every_program_id(tmp_path: Path) -> None:
    path = tmp_path / "kernels.py"
    path.write_text(SHIFT.replace("x[i + 1]", "x[i] * 2.0"))
    module = import_file(path)
    x = rand((7,), seed=3).to("gpu")
    out = zeros((7,)).to("gpu")
    module.shift(x, out)
    assert out.flat() == pytest.approx([v * 2.0 for v in x.flat()])


def test_shim_raises_the_checkers_code_on_the_counterexample(tmp_path: Path) -> None:
    path = tmp_path / "kernels.py"
    path.write_text(SHIFT)
    module = import_file(path)
    with pytest.raises(MimirError) as err:
        module.shift(rand((1,), seed=0).to("gpu"), zeros((1,)).to("gpu"))
    assert err.value.code == "GPU018"


def test_shim_detects_a_write_race(tmp_path: Path) -> None:
    path = tmp_path / "kernels.py"
    path.write_text(SHIFT.replace("out[i] = x[i + 1]", "out[i // 2] = x[i]"))
    module = import_file(path)
    with pytest.raises(MimirError) as err:
        module.shift(rand((2,), seed=0).to("gpu"), zeros((2,)).to("gpu"))
    assert err.value.code == "GPU028"


def test_element_assignment_outside_index_level_kernels_is_refused() -> None:
    with pytest.raises(MimirError) as err:
        t = zeros((3,)).to("gpu")
        t[0] = 1.0
    assert err.value.code == "GPU031"


GATHER = textwrap.dedent(
    """\
    from mimir.array import Dim, Tensor, float32, gpu, int32, program_id

    N = Dim("N")
    C = Dim("C")


    @gpu(grid=(N,))
    def gather(logits: Tensor[float32, N, C], labels: Tensor[int32, N], out: Tensor[float32, N]):
        i = program_id(0)
        y = labels[i]
        out[i] = 0.0
        if GUARD:
            out[i] = logits[i, y]
    """
)


@pytest.mark.parametrize(
    "guard", ["0 <= y and y < C", "0 <= y < C", "not (y < 0 or y >= C)", "C > y >= 0 != C"]
)
def test_boolean_guards_prove_the_gather(guard: str) -> None:
    assert check_source("gather.py", GATHER.replace("GUARD", guard)).diagnostics == []


@pytest.mark.parametrize(
    ("guard", "holds"),
    [
        ("0 <= y and y <= C", lambda y, c: 0 <= y <= c),
        ("0 <= y or y < C", lambda y, c: 0 <= y or y < c),
        ("0 <= y <= C", lambda y, c: 0 <= y <= c),
        ("not y < 0 and not y > C", lambda y, c: not y < 0 and not y > c),
    ],
)
def test_a_weak_boolean_guard_gives_a_counterexample_on_its_path(guard: str, holds) -> None:
    """The counterexample satisfies the guard: a label that really reaches the read."""
    (d,) = check_source("gather.py", GATHER.replace("GUARD", guard)).diagnostics
    assert (d.code, d.span.line) == ("GPU018", 13)
    ce = dict(d.counterexample)
    assert holds(ce["index"], ce["C"]) and not 0 <= ce["index"] < ce["C"]


def test_the_right_operand_is_proven_only_under_the_left() -> None:
    source = SHIFT.replace(
        "    out[i] = x[i + 1]\n", "    if i + 1 < N and x[i + 1] > 0.0:\n        out[i] = 1.0\n"
    )
    assert check_source("and.py", source).diagnostics == []
    swapped = source.replace("i + 1 < N and x[i + 1] > 0.0", "x[i + 1] > 0.0 and i + 1 < N")
    (d,) = check_source("swapped.py", swapped).diagnostics
    assert (d.code, d.span.line, d.span.column) == ("GPU018", 9, 10)
    assert dict(d.counterexample)["index"] == dict(d.counterexample)["N"]


def test_an_operand_of_and_must_be_a_condition() -> None:
    (d,) = check_source("int.py", GATHER.replace("GUARD", "y and y < C")).diagnostics
    assert (d.code, d.message) == (
        "GPU036",
        "each operand of `and` must be a comparison or a condition",
    )
    assert (d.span.line, d.span.column, d.span.end_column) == (12, 8, 9)


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        (
            "where((x > 0.0) and (x < 1.0), x, 0.0)",
            "`and`/`or` are not allowed in a tensor-level kernel (use `&` and `|`; they are "
            "allowed in index-level kernels)",
        ),
        ("where(not (x > 0.0), x, 0.0)", "`not` is not allowed in a tensor-level kernel (use `~`)"),
        (
            "where(0.0 < x < 1.0, x, 0.0)",
            "chained comparisons are not allowed in a tensor-level kernel "
            "(write `(a < b) & (b < c)`)",
        ),
    ],
)
def test_tensor_level_kernels_refuse_python_booleans_naming_the_operators(
    expr: str, message: str, tmp_path: Path
) -> None:
    source = textwrap.dedent(
        f"""\
        from mimir.array import Dim, Tensor, float32, gpu, where

        N = Dim("N")


        @gpu
        def k(x: Tensor[float32, N]) -> Tensor[float32, N]:
            return {expr}
        """
    )
    (d,) = check_source("tensor.py", source).diagnostics
    assert (d.code, d.message) == ("GPU031", message)
    path = tmp_path / "tensor.py"
    path.write_text(source)
    with pytest.raises(MimirError) as err:  # the shim refuses it with the same code
        import_file(path).k(rand((3,), seed=0).to("gpu"))
    assert err.value.code == "GPU031"
