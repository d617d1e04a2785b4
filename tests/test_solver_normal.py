"""Size normalisation (mimir/solve/normal.py) and the prover's deterministic budget.

- Normalisation is an equivalence: on random size terms (sums, products, `//` and `%` by
  literals and by polynomials in the dims) the normal form has the same value as the
  original at random positive sizes.
- It decides what Z3 alone gives up on: products of dims under `//` and `%` that divide
  exactly, with `multiple_of=m` read as `N = m * k`.
- Verdicts come from Z3's resource limit, not the clock: the same query gives the same
  verdict, reason and counterexample whatever the wall-clock timeout and whatever was
  solved before, and the rlimit alone turns a provable query into UNKNOWN and back.
"""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from mimir.solve.normal import Normaliser
from mimir.solve.prover import PROVEN, REFUTED, UNKNOWN, Prover
from mimir.solve.z3lib import z3

A, B, C = z3.Ints("A B C")
VARS = (A, B, C)


def _terms() -> st.SearchStrategy:
    leaves = st.one_of(st.sampled_from(VARS), st.integers(-3, 9).map(z3.IntVal))

    def extend(children: st.SearchStrategy) -> st.SearchStrategy:
        positive = st.one_of(
            st.integers(1, 9).map(z3.IntVal),
            st.sampled_from(VARS),
            st.tuples(st.sampled_from(VARS), st.integers(1, 4)).map(lambda t: t[0] * t[1]),
            st.tuples(st.sampled_from(VARS), st.sampled_from(VARS)).map(lambda t: t[0] * t[1]),
        )
        return st.one_of(
            st.tuples(children, children).map(lambda t: t[0] + t[1]),
            st.tuples(children, children).map(lambda t: t[0] - t[1]),
            st.tuples(children, children).map(lambda t: t[0] * t[1]),
            st.tuples(children, positive).map(lambda t: t[0] / t[1]),
            st.tuples(children, positive).map(lambda t: t[0] % t[1]),
            st.tuples(children, positive).map(lambda t: (t[0] * t[1]) / t[1]),
            st.tuples(children, positive).map(lambda t: (t[0] * t[1]) % t[1]),
        )

    return st.recursive(leaves, extend, max_leaves=8)


def _value(term: z3.ExprRef, env: dict) -> int:
    pairs = [(v, z3.IntVal(env[str(v)])) for v in VARS]
    out = z3.simplify(z3.substitute(term, *pairs))
    assert z3.is_int_value(out), out
    return out.as_long()


@settings(max_examples=300, deadline=None, derandomize=True)
@given(_terms(), st.tuples(*[st.integers(1, 12)] * 3))
def test_normal_form_has_the_same_value(term: z3.ArithRef, sizes: tuple) -> None:
    env = dict(zip("ABC", sizes, strict=True))
    bounded = Normaliser({}, lambda key: 1 if key in env else None).term(term)
    unbounded = Normaliser({}, lambda key: None).term(term)  # divisors guarded by `If`
    assert _value(bounded, env) == _value(term, env), (term, bounded)
    assert _value(unbounded, env) == _value(term, env), (term, unbounded)


def test_exact_divisions_disappear() -> None:
    k, m = z3.Ints("k m")
    norm = Normaliser({}, {"k": 1, "m": 1}.get)
    assert z3.eq(norm.term(((8 * k) * (8 * k)) / 8), z3.simplify(norm.term(8 * k * k)))
    assert z3.is_true(norm.normalise(((2 * k) * m) % (2 * m) == 0))
    assert z3.is_true(norm.normalise(((2 * k) * m) / (2 * m) == k))
    assert z3.is_true(norm.normalise((6 * k + 1) % 3 == 1))
    # Not exact: stays a division for the solver.
    assert not z3.is_true(norm.normalise((k * m) % (2 * m) == 0))


def test_a_divisor_that_may_be_zero_keeps_its_meaning() -> None:
    """`(K*M) % M` is 0 only where `M != 0`: with `M >= 0` the rewrite is guarded."""
    k, m = z3.Ints("k m")
    normal = Normaliser({}, {"k": 1, "m": 0}.get).normalise((k * m) % m == 0)
    assert not z3.is_true(normal)
    s = z3.Solver()
    s.add(m == 0, k >= 1, z3.Not(normal))
    assert s.check() == z3.sat  # Z3 leaves `x % 0` unspecified, and so does the normal form


def _multiple_of(prover: Prover, name: str, m: int, low: int = 1) -> z3.ArithRef:
    return prover.declare_dim(name, low, None, m, None)


def test_multiple_of_is_a_product() -> None:
    prover = Prover()
    n = _multiple_of(prover, "N", 8)
    assert any(str(f.term) == "N == 8*N/8" for f in prover._facts.values()), (
        "multiple_of=8 is N = 8*k, not N % 8 == 0"
    )
    assert prover.prove((n * n) % 8 == 0).status == PROVEN
    assert prover.prove((n * n) / 8 == 8 * ((n / 8) * (n / 8))).status == PROVEN


def test_refutations_are_smallest_and_reproducible() -> None:
    def run() -> tuple:
        prover = Prover()
        e = _multiple_of(prover, "E", 2)
        m = prover.declare_dim("M", 1, None, None, None)
        v1 = prover.prove((e * e) % 8 == 0)
        v2 = prover.prove((m * e) % (2 * e) == 0)
        return v1.status, v1.counterexample, v2.status, v2.counterexample

    first = run()
    assert first == (REFUTED, (("E", 2),), REFUTED, (("E", 2), ("M", 1)))
    assert all(run() == first for _ in range(3))


def test_bounded_search_finds_what_the_solver_cannot() -> None:
    """An rlimit too small for the solver: the small-size search still refutes."""
    prover = Prover(rlimit=1)
    n = prover.declare_dim("N", 3, None, None, None)
    verdict = prover.prove((n * n * n - n) % 16 == 0)  # 24 % 16 at N=3
    assert (verdict.status, verdict.counterexample) == (REFUTED, (("N", 3),))
    assert Prover(rlimit=1).prove(_hard(Prover(rlimit=1))).status == UNKNOWN


def test_bounded_search_reads_multiple_of_as_a_quotient() -> None:
    prover = Prover(rlimit=1)
    e = _multiple_of(prover, "E", 2)
    m = prover.declare_dim("M", 1, None, None, None)
    verdict = prover.prove((m * e) % (2 * e) == 0)  # needs M even
    assert (verdict.status, verdict.counterexample) == (REFUTED, (("E", 2), ("M", 1)))


# True for every N (six divides a product of three consecutive integers), but only by
# induction: beyond any budget, so UNKNOWN, never PROVEN.
def _hard(prover: Prover) -> z3.BoolRef:
    n = prover.declare_dim("N", 2, None, None, None)
    return (n * n * n - n) % 6 == 0


def test_the_rlimit_decides_not_the_clock() -> None:
    """Same rlimit, wall clock 1000x apart: the same verdicts and reasons."""
    verdicts = []
    for timeout_ms in (10_000, 10_000_000):
        prover = Prover(timeout_ms=timeout_ms, rlimit=2_000_000)
        hard = prover.prove(_hard(prover))
        n = prover.dim("N")
        easy = prover.prove(n * n >= n)  # nonlinear: goes to the solver
        verdicts.append((hard.status, hard.reason, easy.status))
    assert verdicts[0] == verdicts[1] == (UNKNOWN, "resource limit reached", PROVEN)


def test_the_rlimit_alone_turns_a_proof_into_unknown() -> None:
    for rlimit, status in ((1, UNKNOWN), (1_000_000, PROVEN)):
        prover = Prover(timeout_ms=10_000_000, rlimit=rlimit)
        n = prover.declare_dim("N", 1, None, None, None)
        m = prover.declare_dim("M", 1, None, None, None)
        verdict = prover.prove(n * m >= n)
        assert verdict.status == status, (rlimit, verdict)
        if status == UNKNOWN:
            assert verdict.reason == "resource limit reached"


def test_a_tiny_wall_clock_is_only_an_outer_safety() -> None:
    """Under a 1 ms clock the hard query is cut by the clock: still UNKNOWN, never PROVEN."""
    prover = Prover(timeout_ms=1, rlimit=10**9)
    start = time.perf_counter()
    verdict = prover.prove(_hard(prover))
    assert verdict.status == UNKNOWN and verdict.reason == "wall-clock timeout"
    assert time.perf_counter() - start < 5


def test_verdicts_do_not_depend_on_what_was_solved_before() -> None:
    alone = Prover()
    n = _multiple_of(alone, "N", 4)
    expected = alone.prove((n * n) % 32 == 0)
    after = Prover()
    n = _multiple_of(after, "N", 4)
    for k in range(1, 6):
        after.prove((n * k) % 4 == 0)
    after.prove(_hard_after(after))
    got = after.prove((n * n) % 32 == 0)
    assert (got.status, got.counterexample) == (expected.status, expected.counterexample)
    assert expected.status == REFUTED and expected.counterexample == (("N", 4),)


def _hard_after(prover: Prover) -> z3.BoolRef:
    n = prover.dim("N")
    return (n * n * n - n) % 3 == 0


# ---------------------------------------------------------------- reshapes of products of dims

DIM_NAMES = ("A", "B", "C")


@st.composite
def _reshapes(draw: st.DrawFn) -> tuple[dict[str, int | None], list[str], int, str | None]:
    """Dims (name -> multiple_of), a shape of dims and their products, a reshape `(-1, c[, D])`.

    The divisors are powers of two up to 8 and every `multiple_of` divides 8, so whether the
    reshape is valid depends only on each dim's size modulo 8 (through its quotient): sixteen
    consecutive admissible sizes per dim decide it for every size.
    """
    count = draw(st.integers(1, 3))
    dims = {n: draw(st.sampled_from([None, 2, 4])) for n in DIM_NAMES[:count]}
    names = list(dims)
    axis = st.one_of(
        st.sampled_from(names),
        st.tuples(st.sampled_from(names), st.sampled_from(names)).map(" * ".join),
        st.sampled_from(["2", "3"]),
    )
    # Each dim alone on some axis (a dim only inside a product is not fixed by the call).
    shape = draw(st.permutations(names + draw(st.lists(axis, max_size=2))))
    c = draw(st.sampled_from([2, 4, 8]))
    present = sorted({n for a in shape for n in names if n in a.split(" * ")})
    keep = draw(st.sampled_from([None, *present])) if present else None
    return dims, shape, c, keep


def _admissible_sizes(multiple_of: int | None) -> list[int]:
    step = multiple_of or 1
    return [step * i for i in range(1, 17)]


def _fails(dims: dict, shape: list[str], c: int, keep: str | None, env: dict[str, int]) -> bool:
    total = 1
    for axis in shape:
        total *= eval(axis, {}, dict(env))  # noqa: S307 - our own generated arithmetic
    return total % (c * (env[keep] if keep else 1)) != 0


@settings(max_examples=60, deadline=None, derandomize=True)
@given(_reshapes())
def test_reshapes_of_products_are_decided_and_true(tmp_path_factory, case: tuple) -> None:
    """Never GPU050; clean exactly when no admissible size breaks the reshape; a refutation's
    counterexample breaks it, in arithmetic and in the shim (GPU013)."""
    import itertools

    from support import call_kernel, import_file, kernels_of

    from mimir.check import check_source

    dims, shape, c, keep = case
    decls = [f'{n} = Dim("{n}"' + (f", multiple_of={m})" if m else ")") for n, m in dims.items()]
    new = f"-1, {c}" + (f", {keep}" if keep else "")
    ann = ", ".join(shape)
    source = "\n".join(
        [
            "from mimir.array import Dim, Tensor, float32, gpu",
            *decls,
            "",
            "",
            "@gpu",
            f"def kernel(x: Tensor[float32, {ann}]) -> Tensor[float32, {ann}]:",
            f"    y = x.reshape({new})",
            "    return x",
            "",
        ]
    )
    grid = [_admissible_sizes(dims[n]) for n in dims]
    truth = any(
        _fails(dims, shape, c, keep, dict(zip(dims, sizes, strict=True)))
        for sizes in itertools.product(*grid)
    )
    path = tmp_path_factory.mktemp("reshape") / "kernel.py"
    path.write_text(source)
    found = check_source(str(path), source).diagnostics
    assert [d.code for d in found] == (["GPU013"] if truth else []), (source, found)
    if truth:
        (d,) = found
        env = dict(d.counterexample)
        for n, m in dims.items():
            if n in env:
                assert env[n] >= 1 and env[n] % (m or 1) == 0, (source, env)
        assert _fails(dims, shape, c, keep, {n: env.get(n, 1) for n in dims}), (source, env)
        outcome, _ = call_kernel(kernels_of(import_file(path))["kernel"], env)
        assert outcome.code == "GPU013", (source, env, outcome.error)
