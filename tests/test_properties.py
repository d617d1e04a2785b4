"""Property tests: on random shapes, the checker's verdict equals the shim's and NumPy's.

Each example renders a small kernel file with concrete (or symbolic) annotations, checks it
with `check_source`, imports it under plain Python and calls the kernel on random inputs:

- concrete sizes: the checker is clean exactly when NumPy accepts the same op, the shim then
  returns NumPy's shape, and otherwise the shim raises the one code the checker reported;
- symbolic sizes (`Dim`s): when the checker is clean the shim runs for random admissible
  sizes; when it reports an error, the shim run on the checker's counterexample raises
  that error's code.

Sizes include 1 (broadcasting) and primes (no accidental divisibility). Example counts are
kept small so the suite stays fast on two cores.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from support import call_kernel, import_file, kernels_of, smallest_sizes

from mimir.check import check_source

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    derandomize=True,
)

SIZES = st.sampled_from([1, 1, 2, 3, 5, 7])
_counter = itertools.count()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("kernels")


def _shape_text(shape) -> str:
    return "".join(f", {d}" for d in shape)


def render(params: dict[str, tuple], body: str, ret: tuple | None, dims: dict[str, str] = ()):
    """A kernel file: `params` name -> shape (ints or dim names), one `return body`."""
    lines = ["from mimir.array import Dim, Tensor, float32, gpu, maximum, where", ""]
    lines += [f"{name} = {decl}" for name, decl in dict(dims).items()]
    sig = ", ".join(f"{n}: Tensor[float32{_shape_text(s)}]" for n, s in params.items())
    out = f" -> Tensor[float32{_shape_text(ret)}]" if ret is not None else ""
    lines += ["", "", "@gpu", f"def kernel({sig}){out}:", f"    return {body}", ""]
    return "\n".join(lines)


def verdicts(workdir: Path, source: str, symbolic: bool = False):
    """(checker codes, shim outcome, env, kernel) for the one kernel in `source`."""
    path = workdir / f"k{next(_counter)}.py"
    path.write_text(source)
    found = check_source(str(path), source).diagnostics
    codes = [d.code for d in found]
    kernel = kernels_of(import_file(path))["kernel"]
    cex = next((dict(d.counterexample) for d in found if d.counterexample), None)
    outcome, env = call_kernel(kernel, cex, seed=len(source))
    event(f"checker: {codes[0] if codes else 'clean'}")
    return codes, outcome, env, kernel


def assert_agree(codes: list[str], outcome, numpy_ok: bool | None, want_code: str, np_shape=None):
    assert len(codes) <= 1, f"one diagnostic per root cause, got {codes}"
    if outcome.error is not None:
        assert outcome.code is not None, f"the shim raised {outcome.error!r}, not a MimirError"
    if numpy_ok is not None:
        assert (codes == []) == numpy_ok, (codes, numpy_ok)
    if codes == []:
        assert outcome.error is None, outcome.error
        if np_shape is not None:
            assert outcome.value.shape == tuple(np_shape)
    else:
        assert codes == [want_code], codes
        assert outcome.code == want_code, outcome.error


def _np_shape(fn, *shapes):
    try:
        return fn(*(np.zeros(s, dtype=np.float32) for s in shapes)).shape
    except ValueError:  # incompatible shapes; NumPy's AxisError is a ValueError too
        return None


# ---------------------------------------------------------------- concrete shapes


@st.composite
def broadcast_pairs(draw):
    """Two shapes, compatible about half the time (sizes set to 1 or leading axes dropped)."""
    base = draw(st.lists(SIZES, min_size=0, max_size=3))
    other = list(base)
    if draw(st.booleans()):
        other = [1 if draw(st.booleans()) else d for d in other]
        other = other[draw(st.integers(0, len(other))) :]
    else:
        other = draw(st.lists(SIZES, min_size=0, max_size=3))
    return tuple(base), tuple(other)


BROADCAST_OPS = {
    "a + b": lambda a, b: a + b,
    "a * b - a": lambda a, b: a * b - a,
    "maximum(a, b)": np.maximum,
    "where(a > b, a, b)": lambda a, b: np.where(a > b, a, b),
    "(a / (b * b + 1.0)).relu()": lambda a, b: a / (b * b + 1),
}


@SETTINGS
@given(pair=broadcast_pairs(), op=st.sampled_from(sorted(BROADCAST_OPS)), swap=st.booleans())
def test_broadcasting_agrees(workdir, pair, op, swap) -> None:
    sa, sb = pair[::-1] if swap else pair
    np_shape = _np_shape(BROADCAST_OPS[op], sa, sb)
    src = render({"a": sa, "b": sb}, op, np_shape if np_shape is not None else sa)
    codes, outcome, _, _ = verdicts(workdir, src)
    assert_agree(codes, outcome, np_shape is not None, "GPU010", np_shape)


@st.composite
def matmul_pairs(draw):
    m, k, n = draw(SIZES), draw(SIZES), draw(SIZES)
    k2 = k if draw(st.booleans()) else draw(SIZES)
    batch = draw(st.lists(SIZES, max_size=2))
    other = [1 if draw(st.booleans()) else d for d in batch][draw(st.integers(0, len(batch))) :]
    if draw(st.integers(0, 4)) == 0:
        other = draw(st.lists(SIZES, max_size=2))
    left, right = (*batch, m, k), (*other, k2, n)
    if draw(st.integers(0, 9)) == 0:  # a vector operand
        left = (k,)
    return left, right


@SETTINGS
@given(pair=matmul_pairs())
def test_matmul_agrees(workdir, pair) -> None:
    sa, sb = pair
    np_shape = _np_shape(np.matmul, sa, sb)
    if len(sa) < 2:  # NumPy multiplies vectors; the kernel language refuses them (GPU012)
        np_shape = None
    src = render({"x": sa, "w": sb}, "x @ w", np_shape if np_shape is not None else sa)
    codes, outcome, _, _ = verdicts(workdir, src)
    if len(sa) < 2:
        want = "GPU012"
    elif sa[-1] != sb[-2]:
        want = "GPU011"
    else:
        want = "GPU010"
    assert_agree(codes, outcome, np_shape is not None, want, np_shape)


AXES = st.one_of(
    st.none(),
    st.integers(-4, 3),
    st.lists(st.integers(-3, 2), min_size=1, max_size=3).map(tuple),
)


@SETTINGS
@given(
    shape=st.lists(SIZES, min_size=1, max_size=3).map(tuple),
    method=st.sampled_from(["sum", "mean", "max", "min"]),
    axis=AXES,
    keepdims=st.booleans(),
)
def test_reductions_agree(workdir, shape, method, axis, keepdims) -> None:
    def np_reduce(x):
        return getattr(x, method)(axis=axis, keepdims=keepdims)

    np_shape = _np_shape(np_reduce, shape)
    src = render(
        {"x": shape},
        f"x.{method}(axis={axis!r}, keepdims={keepdims})",
        np_shape if np_shape is not None else shape,
    )
    codes, outcome, _, _ = verdicts(workdir, src)
    assert_agree(codes, outcome, np_shape is not None, "GPU014", np_shape)


@st.composite
def reshape_chains(draw):
    shape = tuple(draw(st.lists(SIZES, min_size=1, max_size=3)))
    total = int(np.prod(shape))
    chain = []
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.booleans()):  # a valid factorisation, maybe with one -1
            first = draw(st.sampled_from([d for d in range(1, total + 1) if total % d == 0]))
            target = [first, total // first]
            if draw(st.booleans()):
                target[draw(st.integers(0, 1))] = -1
        else:
            target = draw(
                st.lists(st.sampled_from([-1, 1, 2, 3, 4, 5, 6, 7]), min_size=1, max_size=3)
            )
        chain.append(tuple(target))
    return shape, chain


@SETTINGS
@given(case=reshape_chains())
def test_reshape_chains_agree(workdir, case) -> None:
    shape, chain = case

    def np_chain(x):
        for target in chain:
            x = x.reshape(target)
        return x

    np_shape = _np_shape(np_chain, shape)
    body = "x" + "".join(f".reshape{t if len(t) > 1 else f'({t[0]})'}" for t in chain)
    src = render({"x": shape}, body, np_shape if np_shape is not None else shape)
    codes, outcome, _, _ = verdicts(workdir, src)
    assert_agree(codes, outcome, np_shape is not None, "GPU013", np_shape)


# ---------------------------------------------------------------- symbolic shapes

DIM_DECLS = st.sampled_from(
    ['Dim("{}")', 'Dim("{}", min=2)', 'Dim("{}", max=3)', 'Dim("{}", multiple_of=2)',
     'Dim("{}", min=1, max=1)']
)  # fmt: skip
SYMBOLIC_SIZES = st.sampled_from(["A", "B", "1", "3"])


def _declare(draw, names):
    return {n: draw(DIM_DECLS).format(n) for n in names}


def _run_symbolic(workdir, params, body, dims, want):
    src = render(params, body, None, dims)
    codes, outcome, env, kernel = verdicts(workdir, src)
    assert len(codes) <= 1, codes
    if codes:
        assert codes == [want], codes
        assert outcome.code == want, f"checker {codes} with {env}, shim: {outcome.error!r}"
    else:
        assert outcome.error is None, f"checker clean, shim with {env}: {outcome.error!r}"
        # Proven for every admissible size: the smallest ones too (size 1 broadcasts).
        again, env = call_kernel(kernel, smallest_sizes(kernel.annotations()), seed=7)
        assert again.error is None, f"checker clean, shim with {env}: {again.error!r}"


@SETTINGS
@given(data=st.data())
def test_symbolic_broadcasting_agrees(workdir, data) -> None:
    sa = tuple(data.draw(st.lists(SYMBOLIC_SIZES, min_size=1, max_size=2)))
    sb = tuple(data.draw(st.lists(SYMBOLIC_SIZES, min_size=1, max_size=2)))
    # Every dim the body uses must be fixed by a parameter on its own.
    sa = (*sa, "A") if "A" not in sa + sb else sa
    sb = (*sb, "B") if "B" not in sa + sb else sb
    dims = _declare(data.draw, ["A", "B"])
    _run_symbolic(workdir, {"a": sa, "b": sb}, "a + b", dims, "GPU010")


@SETTINGS
@given(data=st.data())
def test_symbolic_matmul_agrees(workdir, data) -> None:
    left = ("M", data.draw(st.sampled_from(["K", "L", "4"])))
    right = (data.draw(st.sampled_from(["K", "L", "4"])), "N")
    params = {"x": left, "w": right}
    used = {s for s in left + right if s.isidentifier()}
    dims = _declare(data.draw, sorted(used))
    _run_symbolic(workdir, params, "x @ w", dims, "GPU011")


@SETTINGS
@given(data=st.data())
def test_symbolic_slicing_agrees(workdir, data) -> None:
    stop = data.draw(st.sampled_from(["2", "A", "A - 1", "A + 1", "B"]))
    start = data.draw(st.sampled_from(["0", "1"]))
    dims = _declare(data.draw, ["A", "B"])
    _run_symbolic(workdir, {"x": ("A",), "y": ("B",)}, f"x[{start}:{stop}]", dims, "GPU018")
