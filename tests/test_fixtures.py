"""Checker fixtures (`tests/fixtures/check/*.py`), and the checker/shim agreement test.

A fixture line that must produce a diagnostic ends with `# E: GPU011` (several codes allowed);
the checker's set of (line, code) must equal the markers exactly, so both a missing and an
unexpected diagnostic fail. A fixture with no markers checks clean.

The agreement test imports each fixture under plain Python and calls every `@gpu` kernel on
random inputs built from its annotations (dims bound to the checker's counterexample when it
gave one): the checker reports no error for a kernel exactly when the call raises no
`MimirError`, and when both fail the shim's code is one of the checker's codes for it.
A fixture Python cannot import or call at all says so with `__mimir_shim__ = "skip: ..."`.
"""

from __future__ import annotations

import ast
import functools
import re
from collections import Counter
from pathlib import Path

import pytest
from support import (
    FIXTURES,
    bind_dims,
    call_kernel,
    import_file,
    kernels_of,
    markers,
    negative_axes,
    param_dims,
    shim_skip_reason,
    smallest_sizes,
)

from mimir.array import MimirError, zeros
from mimir.check import FileResult, check_source
from mimir.diagnostics.codes import REGISTRY

FIXTURE_FILES = sorted(FIXTURES.glob("*.py"))

# Kernels on which the shim knowingly disagrees with the checker, with the reason. Each is
# an xfail(strict=True): when the disagreement is fixed the test fails until it is removed.
KNOWN_DISAGREEMENTS: dict[tuple[str, str], str] = {
    ("invalid_args.py", "transpose_axis_not_literal"): (
        "design: the checker needs axes statically (GPU036); the shim sees the int `k` a call "
        "passes and transposes with it"
    ),
    ("tensor_loops.py", "dim_trip_count"): (
        "design: a tensor-level loop is unrolled, so the checker needs a static trip count "
        "(GPU031); the shim runs Python's loop for the size it is bound to"
    ),
    ("tensor_loops.py", "too_many_iterations"): (
        "design: the checker unrolls at most 64 iterations (GPU031); the shim runs them all"
    ),
    ("precision.py", "precision_not_literal"): (
        "design: the checker needs `@gpu(precision=...)` as a literal (GPU036); the shim sees "
        "the string the name holds"
    ),
    ("module_floats.py", "a_call_that_is_not_folded"): (
        "design: the checker folds a module-level float only from literals and `math` (it "
        "never runs the module); the shim reads whatever value the name holds"
    ),
    ("scans.py", "axis_not_literal"): (
        "design: the checker needs the scan axis statically (GPU036); the shim sees the int `k` "
        "a call passes and scans along it"
    ),
}


@functools.cache
def _checked(path: Path) -> FileResult:
    return check_source(str(path), path.read_text())


@functools.cache
def _module(path: Path):
    return import_file(path)


def _kernel_names(path: Path) -> list[str]:
    """`@gpu` functions of a fixture, read from its AST (collection must not import it)."""
    names = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef):
            for dec in node.decorator_list:
                target = dec.func if isinstance(dec, ast.Call) else dec
                if isinstance(target, ast.Name) and target.id == "gpu":
                    names.append(node.name)
    return names


def _ids(paths: list[Path]) -> list[str]:
    return [p.name for p in paths]


# ---------------------------------------------------------------- the checker against markers


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=_ids(FIXTURE_FILES))
def test_fixture_diagnostics_match_markers(path: Path) -> None:
    text = path.read_text()
    result = _checked(path)
    got = {(d.span.line, d.code) for d in result.diagnostics}
    want = markers(text)
    lines = text.splitlines()
    missing = [f"{ln}: {code}  | {lines[ln - 1].strip()}" for ln, code in sorted(want - got)]
    unexpected = [
        f"{d.span.line}:{d.span.column}: {d.code} {d.message}"
        for d in result.diagnostics
        if (d.span.line, d.code) not in want
    ]
    assert not missing and not unexpected, f"missing: {missing}\nunexpected: {unexpected}"
    assert not result.unreadable
    # `_checked` is cached, so this is the only test of the fixture that runs the checker:
    # the checks below run here too, or a mutation tool that selects the tests calling a
    # function would never pair a checker mutant with them.
    _assert_one_diagnostic_per_root_cause(path)
    _assert_well_formed(path)


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=_ids(FIXTURE_FILES))
def test_one_diagnostic_per_root_cause(path: Path) -> None:
    _assert_one_diagnostic_per_root_cause(path)


def _assert_one_diagnostic_per_root_cause(path: Path) -> None:
    """No line carries the same code twice: each marker is one diagnostic, not a cascade."""
    counts = Counter((d.span.line, d.code) for d in _checked(path).diagnostics)
    assert [k for k, n in counts.items() if n > 1] == []


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=_ids(FIXTURE_FILES))
def test_diagnostics_are_well_formed(path: Path) -> None:
    _assert_well_formed(path)


def _assert_well_formed(path: Path) -> None:
    kernels = set(_kernel_names(path))
    for d in _checked(path).diagnostics:
        assert d.code in REGISTRY
        assert d.severity == "error"
        assert d.span.path == str(path)
        assert d.span.line >= 1 and d.span.column >= 1
        assert (d.span.end_line, d.span.end_column) >= (d.span.line, d.span.column)
        # rustc's message style: lowercase start, no final period, never empty.
        assert d.message and not d.message.endswith("."), d.message
        assert not d.message[0].isupper(), d.message
        # Kernel diagnostics name their kernel; only module-level Dim problems have none.
        # module-level, host-code and import findings
        if d.code in ("GPU034", "GPU060", "GPU061", "GPU080", "GPU081", "GPU082"):
            assert d.function is None
        else:
            assert d.function in kernels, (d.function, d.message)
        # Secondary labels point into the same file.
        for label in d.labels:
            assert label.span.path == str(path) and label.span.line >= 1


# The tensor-level checker's codes (GPU050, solver unknown/timeout, cannot be provoked
# reliably by a small fixture; index-level codes belong to their own fixtures).
TENSOR_LEVEL_CODES = {f"GPU0{n}" for n in (*range(10, 22), 24, 25, *range(30, 37))}


def test_every_tensor_level_code_has_a_fixture() -> None:
    covered = {code for p in FIXTURE_FILES for _, code in markers(p.read_text())}
    assert TENSOR_LEVEL_CODES - covered == set()
    assert TENSOR_LEVEL_CODES <= set(REGISTRY)
    assert all(REGISTRY[c].found_by == "checker" for c in TENSOR_LEVEL_CODES)


def test_clean_fixtures_are_clean_and_large() -> None:
    clean = [p for p in FIXTURE_FILES if p.name.startswith("clean_")]
    assert len(clean) >= 5
    for p in clean:
        assert markers(p.read_text()) == set()
        assert _checked(p).diagnostics == []
        assert len(_kernel_names(p)) >= 3 or p.name == "clean_mlp.py"


def test_every_fixture_defines_kernels() -> None:
    for p in FIXTURE_FILES:
        assert "from mimir.array import" in p.read_text() or "import mimir.array" in p.read_text()
        assert _kernel_names(p), p.name


def test_symbolic_counterexample_is_in_why() -> None:
    path = FIXTURES / "matmul.py"
    (d,) = [d for d in _checked(path).diagnostics if d.function == "symbolic_qk"]
    assert d.code == "GPU011"
    assert d.message == "matmul shape mismatch: left has K=D, right has K=T"
    names = dict(d.counterexample)
    assert set(names) == {"T", "D"} and names["T"] != names["D"]
    assert re.search(r"; counterexample: T=\d+, D=\d+$", d.why), d.why
    # Symbolic dims are never compared as numbers in the message (ARCHITECTURE.md, "Traps").
    assert "-" not in d.message


@pytest.mark.parametrize(
    ("fixture", "function", "message"),
    [
        (
            "reshape.py",
            "inferred_then_wrong_return",
            "return shape mismatch: the kernel returns [N, 1], the annotation says [N]",
        ),
        (
            "broadcast.py",
            "symbolic_never_one",
            "shapes [P] and [P + 1] cannot broadcast: P vs P + 1",
        ),
        ("indexing.py", "symbolic_index_by_dim", "index N is out of bounds for axis 0 with size N"),
        (
            "returns.py",
            "symbolic_off_by_one",
            ("return shape mismatch: the kernel returns [N], the annotation says [N + 1]"),
        ),
        ("dtypes.py", "int_plus_uint", "`+` mixes int32 and uint32, which have no common dtype"),
        ("annotations.py", "negative_constant_size", "a size cannot be negative (`S` is -3)"),
    ],
)
def test_messages_show_sizes_as_written(fixture: str, function: str, message: str) -> None:
    found = [d for d in _checked(FIXTURES / fixture).diagnostics if d.function == function]
    assert [d.message for d in found] == [message]


def test_counterexamples_satisfy_dim_constraints() -> None:
    """Every counterexample binds each dim to a size its declaration admits."""
    seen = 0
    for p in FIXTURE_FILES:
        if shim_skip_reason(p.read_text()):
            continue
        dims = {}
        for kernel in kernels_of(_module(p)).values():
            try:
                annotations = kernel.annotations()
            except MimirError:  # postponed annotations Python cannot evaluate
                continue
            dims.update({d.name: d for d in param_dims(annotations)})
        for d in _checked(p).diagnostics:
            for name, value in d.counterexample:
                if name not in dims:
                    continue  # index-level kernels also show program ids, loop variables, indices
                assert dims[name].admits(value), (p.name, d.function, name, value)
                seen += 1
    assert seen >= 10


def test_counterexamples_are_callable() -> None:
    """A counterexample never makes a parameter axis negative: it is a call that can be made."""
    seen = 0
    for p in FIXTURE_FILES:
        if shim_skip_reason(p.read_text()):
            continue
        kernels = kernels_of(_module(p))
        for d in _checked(p).diagnostics:
            if d.function not in kernels or not d.counterexample:
                continue
            annotations = kernels[d.function].annotations()
            env = bind_dims(annotations, dict(d.counterexample))
            assert negative_axes(annotations, env) == [], (p.name, d.function, env)
            seen += 1
    assert seen >= 10


def test_uncallable_parameter_is_reported_once() -> None:
    """An axis negative for every admissible size would make every proof vacuous (GPU033)."""
    src = (
        "from mimir.array import Dim, Tensor, float32, gpu\n"
        'H = Dim("H", max=3)\n'
        "@gpu\n"
        "def f(p: Tensor[float32, H - 4], q: Tensor[float32, H]) -> Tensor[float32, 5]:\n"
        "    return q[0:5]\n"
    )
    found = [(d.span.line, d.span.column, d.code) for d in check_source("t.py", src).diagnostics]
    assert found == [(4, 26, "GPU033"), (5, 12, "GPU018")]


def test_explain_names_the_callable_size_fact() -> None:
    from mimir.diagnostics.explain import explain_file

    text, n = explain_file(_checked(FIXTURES / "callable_sizes.py"), "GPU018", None)
    assert n == 1
    assert "`p` axis 0 is H - 2 here, so H - 2 >= 0 in any call" in text
    assert "counterexample: H=2" in text


# ---------------------------------------------------------------- the checker against the shim


def _agreement_cases() -> list:
    cases = []
    for path in FIXTURE_FILES:
        if shim_skip_reason(path.read_text()):
            continue
        for name in _kernel_names(path):
            marks = []
            reason = KNOWN_DISAGREEMENTS.get((path.name, name))
            if reason:
                marks.append(pytest.mark.xfail(reason=reason, strict=True))
            cases.append(pytest.param(path, name, marks=marks, id=f"{path.name}::{name}"))
    return cases


def _assert_agree(path: Path, name: str, counterexample: dict | None, codes: set[str]) -> dict:
    kernel = kernels_of(_module(path))[name]
    outcome, env = call_kernel(kernel, counterexample, seed=len(name))
    gathers = "index" in (counterexample or {})  # a tensor-level gather's failing value
    if codes and outcome.error is None and (kernel.grid is not None or gathers):
        # An index-level error may need one loaded value (`y == C` behind `y < C + 1`), as
        # may a gather through an index tensor: fill the integer inputs with each value at
        # the edges of the sizes.
        edges = sorted({-1, 0, 1, *(v + d for v in env.values() for d in (-1, 0, 1))})
        for value in edges:
            outcome, env = call_kernel(kernel, counterexample, seed=len(name), fill=value)
            if outcome.error is not None:
                break
    if outcome.error is not None and not isinstance(outcome.error, MimirError):
        raise AssertionError(
            f"the shim raised {type(outcome.error).__name__}: {outcome.error} "
            f"(checker: {sorted(codes) or 'clean'}, dims {env})"
        ) from outcome.error
    if not codes:
        assert outcome.error is None, f"checker clean, shim raised {outcome.error} (dims {env})"
    else:
        assert outcome.error is not None, f"checker reports {sorted(codes)}, shim ran (dims {env})"
        assert outcome.code in codes, f"shim {outcome.error}; checker {sorted(codes)} (dims {env})"
    return env


@pytest.mark.parametrize(("path", "name"), _agreement_cases())
def test_checker_and_shim_agree(path: Path, name: str) -> None:
    found = [d for d in _checked(path).diagnostics if d.function == name]
    codes = {d.code for d in found}
    counterexample = next((dict(d.counterexample) for d in found if d.counterexample), None)
    _assert_agree(path, name, counterexample, codes)
    if not codes:
        # Proven for every admissible size: also the smallest ones (size 1, or 0 where
        # a dim admits it), which is where broadcasting and empty axes go wrong.
        kernel = kernels_of(_module(path))[name]
        _assert_agree(path, name, smallest_sizes(kernel.annotations()), codes)


@pytest.mark.parametrize(
    "path",
    [p for p in FIXTURE_FILES if shim_skip_reason(p.read_text())],
    ids=_ids([p for p in FIXTURE_FILES if shim_skip_reason(p.read_text())]),
)
def test_shim_skip_is_justified(path: Path) -> None:
    """A skipped fixture is one Python cannot run: bad annotations/dims, imports that cannot
    be resolved, or it does not compile."""
    text = path.read_text()
    codes = {code for _, code in markers(text)}
    try:
        compile(text, str(path), "exec")
        compiles = True
    except SyntaxError:
        compiles = False
    unrunnable = {"GPU033", "GPU034", "GPU080", "GPU081", "GPU082"}
    assert (codes & unrunnable) or not compiles, shim_skip_reason(text)


def test_shim_skips_are_rare() -> None:
    skipped = [p for p in FIXTURE_FILES if shim_skip_reason(p.read_text())]
    assert len(skipped) <= 4, skipped  # imports.py: relative imports need a package


def test_bad_annotation_fixture_fails_under_python() -> None:
    """The skipped annotation fixture really cannot be imported (else it should be tested)."""
    with pytest.raises((TypeError, NameError)):
        import_file(FIXTURES / "annotations.py")


def test_a_dim_no_size_satisfies_never_lets_a_kernel_run(tmp_path: Path) -> None:
    """`Dim("N", min=8, max=4)`: refused at the declaration, or by every call (GPU042)."""
    source = tmp_path / "empty_dim.py"
    source.write_text(
        "from mimir.array import Dim, Tensor, float32, gpu\n"
        'EMPTY = Dim("EMPTY", min=8, max=4)\n'
        "@gpu\n"
        "def k(x: Tensor[float32, EMPTY]) -> Tensor[float32, EMPTY]:\n"
        "    return x\n"
    )
    try:
        k = import_file(source).k
    except (ValueError, MimirError) as err:  # refused where it is declared
        assert not isinstance(err, MimirError) or err.code == "GPU034"
        return
    for n in (1, 4, 6, 8, 9):
        with pytest.raises(MimirError) as info:
            k(zeros((n,)).to("gpu"))
        assert info.value.code == "GPU042"


# ---------------------------------------------------------------- checker regressions


def test_use_of_bad_dim_is_not_reported_again() -> None:
    """Uses of a Dim whose declaration failed are poisoned, not reported as GPU033 again."""
    src = (
        "from mimir.array import Dim, Tensor, float32, gpu\n"
        'EMPTY = Dim("EMPTY", min=8, max=4)\n'
        "@gpu\n"
        "def f(x: Tensor[float32, EMPTY]) -> Tensor[float32, EMPTY]:\n"
        "    return x\n"
    )
    assert [(d.span.line, d.code) for d in check_source("t.py", src).diagnostics] == [(2, "GPU034")]


def test_a_module_value_that_is_not_a_size_is_reported_once() -> None:
    """`SCALE = 2.5` used as a size three times is one root cause: one GPU033, at its first use."""
    src = (
        "from mimir.array import Dim, Tensor, float32, gpu\n"
        "SCALE = 2.5\n"
        'N = Dim("N")\n'
        "@gpu\n"
        "def f(x: Tensor[float32, SCALE]) -> Tensor[float32, SCALE]:\n"
        "    return x\n"
        "@gpu\n"
        "def g(x: Tensor[float32, N, SCALE]) -> Tensor[float32, N]:\n"
        "    return x.sum(axis=1)\n"
    )
    found = [(d.span.line, d.span.column, d.code) for d in check_source("t.py", src).diagnostics]
    assert found == [(5, 26, "GPU033")]


def test_size_arithmetic_on_a_bad_dim_is_not_reported_again() -> None:
    src = (
        "from mimir.array import Dim, Tensor, float32, gpu\n"
        'EMPTY = Dim("EMPTY", min=8, max=4)\n'
        "TWICE = 2 * EMPTY\n"
        "@gpu\n"
        "def f(x: Tensor[float32, TWICE]) -> Tensor[float32, TWICE]:\n"
        "    return x\n"
    )
    assert [(d.span.line, d.code) for d in check_source("t.py", src).diagnostics] == [(2, "GPU034")]


def test_default_sizes_are_distinct_and_admissible() -> None:
    """The harness's own contract: dims get different admissible sizes unless told otherwise."""
    from mimir.array import Dim, Tensor, float32

    a, b, c = Dim("A", multiple_of=4), Dim("B", min=1, max=3), Dim("C", min=0, max=0)
    env = bind_dims({"x": Tensor[float32, a, b, c]})
    assert env == {"A": 4, "B": 3, "C": 0}
    assert bind_dims({"x": Tensor[float32, a, b]}, {"A": 8}) == {"A": 8, "B": 3}
