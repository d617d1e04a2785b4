"""Exact texts the checker builds: diagnostic messages a fixture's `# E:` marker cannot pin
(a marker names the code only), and the size algebra's display of reflected operators."""

from __future__ import annotations

import textwrap

import z3
from support import FIXTURES

from mimir.check import check_source
from mimir.constraints.algebra import Sym

UNPACK = textwrap.dedent(
    """\
    from mimir.array import Dim, Tensor, float32, gpu

    N = Dim("N")


    @gpu
    def f(x: Tensor[float32, N, 4]) -> Tensor[float32, N, 4]:
        a, b, c = x.shape
        return x
    """
)


def test_unpacking_a_shape_into_the_wrong_count_names_both_counts() -> None:
    # one unpacking is one root cause: one diagnostic, at the first name, not one per name
    found = [
        (d.code, d.message, d.span.line, d.span.column)
        for d in check_source("unpack.py", UNPACK).diagnostics
    ]
    assert found == [("GPU036", "cannot unpack 2 into 3 names", 8, 5)]


def test_the_shim_raises_the_checkers_code_for_a_bad_unpacking(tmp_path) -> None:
    from support import import_file

    from mimir.array import MimirError, zeros

    path = tmp_path / "unpack.py"
    path.write_text(UNPACK)
    kernel = import_file(path).f
    try:
        kernel(zeros((3, 4)).to("gpu"))
    except MimirError as err:
        assert err.code == "GPU036"
    else:
        raise AssertionError("the shim ran a kernel that unpacks a rank-2 shape into 3 names")


def test_reflected_operators_keep_the_int_on_the_left() -> None:
    n = Sym(z3.Int("N"), "N")
    one_plus = 1 + n
    twice = 2 * n
    assert (one_plus.text, twice.text) == ("1 + N", "2*N")
    solver = z3.Solver()
    solver.add(z3.Int("N") == 5)
    assert solver.check() == z3.sat
    model = solver.model()
    assert model.eval(one_plus.term).as_long() == 6
    assert model.eval(twice.term).as_long() == 10


def test_a_counterexample_in_an_else_branch_names_the_program_id() -> None:
    path = FIXTURES / "index_bounds.py"
    found = check_source(str(path), path.read_text()).diagnostics
    (d,) = [d for d in found if d.function == "shift_in_the_wrong_branch"]
    assert "counterexample: N=1, program_id(0)=0, index=1" in d.why


GATHER = textwrap.dedent(
    """\
    from mimir.array import Dim, Tensor, float32, gpu, int32, program_id

    N = Dim("N")


    @gpu(grid=(N,))
    def gather(x: Tensor[float32, N], idx: Tensor[int32, N], out: Tensor[float32, N]):
        i = program_id(0)
        out[i] = x[idx[i]]
    """
)


def test_a_gathered_index_is_unknown_and_named_as_written() -> None:
    # Not a fixture: whether the shim's run faults depends on the data in `idx`, so the
    # checker/shim agreement test cannot judge it.
    (d,) = check_source("gather.py", GATHER).diagnostics
    assert d.code == "GPU018"
    assert d.message == "index `idx[i]` may be out of bounds for axis 0 of `x` with size N"


def test_a_transpose_axis_that_is_not_a_literal_says_so() -> None:
    path = FIXTURES / "invalid_args.py"
    found = check_source(str(path), path.read_text()).diagnostics
    (d,) = [d for d in found if d.function == "transpose_axis_not_literal"]
    assert d.message == "a transpose axis must be an int literal"


KEEPDIMS = textwrap.dedent(
    """\
    from mimir.array import Tensor, float32, gpu


    @gpu
    def f(x: Tensor[float32, 3, 4]) -> Tensor[float32, 1, 4]:
        return x.sum(axis=0, keepdims=1)
    """
)


def test_a_keepdims_that_is_not_a_bool_is_named() -> None:
    (d,) = check_source("keepdims.py", KEEPDIMS).diagnostics
    assert (d.code, d.message) == ("GPU036", "`keepdims` must be True or False")


def test_a_failure_inside_a_helper_keeps_its_labels_and_names_the_call() -> None:
    # the mismatch's own notes (where each size comes from) stay, and the call is added
    path = FIXTURES / "calls.py"
    found = check_source(str(path), path.read_text()).diagnostics
    (d,) = [d for d in found if d.function == "mismatched"]
    assert (d.code, d.span.line) == ("GPU011", 19)
    assert [(label.span.line, label.message) for label in d.labels] == [
        (53, "`x` axis 1 is 64 here"),
        (53, "`w` axis 0 is 32 here"),
        (54, "in this call of `project` from `mismatched`"),
    ]


NONE_CONSTANT = textwrap.dedent(
    """\
    from mimir.array import Dim, Tensor, float32, gpu, program_id

    N = Dim("N")


    @gpu(grid=(N,))
    def f(x: Tensor[float32, N], out: Tensor[float32, N]):
        i = program_id(0)
        out[i] = x[i] + None
    """
)


def test_a_constant_an_index_level_kernel_cannot_hold_is_named() -> None:
    # (no fixture: the shim refuses `x + None` as a bad operand, GPU036, not GPU031)
    (d,) = check_source("none.py", NONE_CONSTANT).diagnostics
    assert (d.code, d.message) == ("GPU031", "the constant `None` cannot be used inside `@gpu`")
    assert (d.span.line, d.span.column) == (9, 21)


RANK = textwrap.dedent(
    """\
    from mimir.array import Dim, Tensor, float32, gpu

    N = Dim("N")


    @gpu
    def f(x: Tensor[float32, N, 4]) -> Tensor[float32, N]:
        return x
    """
)


def test_a_return_of_the_wrong_rank_points_at_the_return_annotation() -> None:
    (d,) = check_source("rank.py", RANK).diagnostics
    assert d.code == "GPU015"
    assert [(label.span.line, label.message) for label in d.labels] == [
        (7, "the return annotation")
    ]


HELPER_AXIS = textwrap.dedent(
    """\
    from mimir.array import Dim, Tensor, float32, gpu

    N = Dim("N")


    def total(t):
        return t.sum(axis=3)


    @gpu
    def k(x: Tensor[float32, N, 4]) -> Tensor[float32, N]:
        return total(x)
    """
)


def test_a_shape_rule_failing_inside_a_helper_names_the_call() -> None:
    (d,) = check_source("helper_axis.py", HELPER_AXIS).diagnostics
    assert (d.code, d.span.line) == ("GPU014", 7)
    assert [(label.span.line, label.message) for label in d.labels] == [
        (12, "in this call of `total` from `k`")
    ]


def test_a_compound_size_keeps_its_dims_expression() -> None:
    # code generation and the manifest read a size's `mimir.dims` expression (`Sym.expr`)
    from mimir.dims import Dim, evaluate

    n = Sym(z3.Int("N"), "N", expr=Dim("N"))
    size = 2 * n + 1
    assert size.text == "2*N + 1"
    assert size.expr is not None
    assert evaluate(size.expr, {"N": 5}) == 11


NOT_A_TENSOR_PART = textwrap.dedent(
    """\
    from mimir.array import Dim, Tensor, concatenate, float32, gpu

    N = Dim("N")


    @gpu
    def f(x: Tensor[float32, N]) -> Tensor[float32, N]:
        return concatenate((x, 1.0))
    """
)


def test_a_part_of_a_join_that_is_not_a_tensor_names_the_op() -> None:
    (d,) = check_source("join.py", NOT_A_TENSOR_PART).diagnostics
    assert (d.code, d.message) == ("GPU036", "`concatenate()` needs a tensor operand")


INDEX_LEVEL_NAMES = textwrap.dedent(
    """\
    from mimir.array import Dim, Tensor, float32, gpu, program_id

    N = Dim("N")
    ZERO = 0


    @gpu(grid=(N,))
    def shape_of_an_element(x: Tensor[float32, N], out: Tensor[float32, N]):
        i = program_id(0)
        out[i] = x[i].shape[0]


    @gpu(grid=(N,))
    def divide_by_a_zero_constant(x: Tensor[float32, N], out: Tensor[float32, N]):
        i = program_id(0)
        out[i] = x[i // ZERO]
    """
)


def test_index_level_refusals_name_the_attribute_and_the_constants_value() -> None:
    # (the shim refuses the first with GPU018, so it is no fixture; a marker would not pin
    # the second's text: the constant shown by its value)
    found = [
        (d.function, d.code, d.message, d.span.line)
        for d in check_source("names.py", INDEX_LEVEL_NAMES).diagnostics
    ]
    assert found == [
        (
            "shape_of_an_element",
            "GPU030",
            "unknown attribute `.shape` in an index-level kernel",
            10,
        ),
        ("divide_by_a_zero_constant", "GPU036", "the divisor `0` may be zero or negative", 16),
    ]


def test_a_broadcast_broken_by_a_reduction_notes_the_reduction_and_the_fix() -> None:
    """`m = x.mean(axis=-1)` then `x - m`: GPU010 at `x - m` (where it fails), with a note at
    the reduction saying what `keepdims=True` gives; a sum over the wrong axis gets the axis
    that broadcasts instead."""
    path = FIXTURES / "reduced_operands.py"
    found = check_source(str(path), path.read_text()).diagnostics
    first, _, wrong_axis = found
    assert (first.code, first.span.line) == ("GPU010", 13)
    note = first.labels[-1]
    assert (note.span.line, note.span.column) == (12, 9)
    assert note.message == (
        "`x.mean(axis=-1)` drops axis 1: shape [N]; with `keepdims=True` it is [N, 1], "
        "which broadcasts"
    )
    assert first.extra_fix == "keep the reduced axis: `x.mean(axis=-1, keepdims=True)`"
    note = wrong_axis.labels[-1]
    assert (wrong_axis.span.line, note.span.line) == (20, 19)
    assert note.message == (
        "`x.sum(axis=1)` reduces axis 1 to shape [N]; over axis 0 it would be [D], which broadcasts"
    )
