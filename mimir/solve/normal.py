"""Normalising size arithmetic before it reaches the solver.

Z3 gives up on nonlinear integer arithmetic quickly (`(K*M) % (2*M)` with `K` even), yet the
size terms Mimir builds are polynomials over dims, and most divisions in them are exact.
`normalise` rewrites an obligation into polynomial normal form:

- annotation variables are replaced by the sizes they were fixed to, and a dim declared with
  `multiple_of=m` by `m * k` with its integer quotient `k` (see `Prover.declare_dim`);
- sums and products are expanded and like terms collected (`(8k)*(8k) - 64k*k` is `0`);
- `P // c` and `P % c` for a literal `c > 0` split `P` into `c*A + B` (the coefficients of `B`
  in `[0, c)`): `P // c = A + B // c` and `P % c = B % c`, so `64k*k // 8` is `8k*k` and
  `(6N + 1) % 3` is `1`;
- `P // Q` and `P % Q` where the polynomial `Q` divides `P` exactly are `P / Q` and `0` (for a
  divisor that may be zero the original term is kept under `If(Q == 0, ...)`, so the rewrite
  never changes what division by zero means);
- comparisons become `P - Q ⋈ 0`, decided outright when `P - Q` is a constant.

Everything is an equivalence under the dim facts, so a normalised obligation is proven
exactly when the original one is; what cannot be normalised (a division that is not exact
by a non-literal divisor) stays an opaque atom for the solver.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from mimir.solve.z3lib import z3

Monomial = tuple[str, ...]  # sorted atom keys, with repetition: ("M", "k", "k") is M*k^2
Poly = dict[Monomial, int]


class Normaliser:
    """Normal forms of the terms of one prover (memoised: terms are immutable)."""

    def __init__(
        self,
        definitions: Mapping[str, z3.ArithRef],
        lower_bound: Callable[[str], int | None],
    ) -> None:
        # `definitions`: a variable's name -> the term it stands for (annotation sizes,
        # `N -> 8*k`). `lower_bound`: the least value of a variable (by name), when known.
        self._defs = definitions
        self._lower = lower_bound
        self._atoms: dict[str, z3.ArithRef] = {}
        # Keyed by Z3's term id; each entry keeps its term alive, so the id is never reused.
        self._poly_memo: dict[int, tuple[z3.ExprRef, Poly]] = {}
        self._bool_memo: dict[int, tuple[z3.ExprRef, z3.BoolRef]] = {}

    # ---------------------------------------------------------------- booleans

    def normalise(self, term: z3.BoolRef) -> z3.BoolRef:
        return z3.simplify(self._bool(term))

    def _bool(self, t: z3.ExprRef) -> z3.BoolRef:
        key = t.get_id()
        if key not in self._bool_memo:
            self._bool_memo[key] = (t, self._bool_uncached(t))
        return self._bool_memo[key][1]

    def _bool_uncached(self, t: z3.ExprRef) -> z3.BoolRef:
        if not z3.is_app(t):
            return t
        kind = t.decl().kind()
        kids = t.children()
        if kind == z3.Z3_OP_AND:
            return z3.And(*[self._bool(c) for c in kids])
        if kind == z3.Z3_OP_OR:
            return z3.Or(*[self._bool(c) for c in kids])
        if kind == z3.Z3_OP_NOT:
            return z3.Not(self._bool(kids[0]))
        if kind == z3.Z3_OP_IMPLIES:
            return z3.Implies(self._bool(kids[0]), self._bool(kids[1]))
        if kind == z3.Z3_OP_ITE:
            return z3.If(self._bool(kids[0]), self._bool(kids[1]), self._bool(kids[2]))
        compare = _COMPARE.get(kind)
        if compare is not None and len(kids) == 2 and z3.is_int(kids[0]):
            diff = _sub(self._poly(kids[0]), self._poly(kids[1]))
            if not diff:
                return z3.BoolVal(compare(0, 0))
            if set(diff) == {()}:
                return z3.BoolVal(compare(diff[()], 0))
            return compare(self._term(diff), z3.IntVal(0))
        if kind == z3.Z3_OP_EQ and len(kids) == 2:  # a dtype, or another non-integer sort
            return self._subst(kids[0]) == self._subst(kids[1])
        return t

    def _subst(self, t: z3.ExprRef) -> z3.ExprRef:
        if t.num_args() == 0 and t.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            return self._defs.get(t.decl().name(), t)
        return t

    # ---------------------------------------------------------------- integers

    def term(self, t: z3.ArithRef) -> z3.ArithRef:
        """The normal form of an integer term, as a Z3 term."""
        return self._term(self._poly(t))

    def _poly(self, t: z3.ExprRef) -> Poly:
        key = t.get_id()
        if key not in self._poly_memo:
            self._poly_memo[key] = (t, self._poly_uncached(t))
        return self._poly_memo[key][1]

    def _poly_uncached(self, t: z3.ExprRef) -> Poly:
        kind = t.decl().kind() if z3.is_app(t) else None
        if kind == z3.Z3_OP_ANUM:
            return _const(t.as_long())
        if kind == z3.Z3_OP_UNINTERPRETED and t.num_args() == 0:
            name = t.decl().name()
            if name in self._defs:
                return self._poly(self._defs[name])
            return self._atom(t, name)
        kids = t.children()
        if kind == z3.Z3_OP_ADD:
            out: Poly = {}
            for c in kids:
                out = _add(out, self._poly(c))
            return out
        if kind == z3.Z3_OP_SUB:
            out = self._poly(kids[0])
            for c in kids[1:]:
                out = _sub(out, self._poly(c))
            return out
        if kind == z3.Z3_OP_UMINUS:
            return _scale(self._poly(kids[0]), -1)
        if kind == z3.Z3_OP_MUL:
            out = _const(1)
            for c in kids:
                out = _mul(out, self._poly(c))
            return out
        if kind in (z3.Z3_OP_IDIV, z3.Z3_OP_MOD):
            return self._divide(kind == z3.Z3_OP_IDIV, self._poly(kids[0]), self._poly(kids[1]))
        if kind == z3.Z3_OP_ITE:
            cond = z3.simplify(self._bool(kids[0]))
            if z3.is_true(cond):
                return self._poly(kids[1])
            if z3.is_false(cond):
                return self._poly(kids[2])
            return self._atom(
                z3.If(cond, self._term(self._poly(kids[1])), self._term(self._poly(kids[2])))
            )
        return self._atom(t)

    def _divide(self, is_div: bool, p: Poly, q: Poly) -> Poly:
        def opaque(pp: Poly, qq: Poly) -> Poly:
            a, b = self._term(pp), self._term(qq)
            return self._atom(a / b if is_div else a % b)

        if not q:  # division by zero: Z3's own (unspecified) value
            return opaque(p, q)
        if set(q) == {()}:
            c = q[()]
            if c <= 0:  # sizes divide by positive literals; keep anything else as written
                return opaque(p, q)
            rest = {m: v % c for m, v in p.items() if v % c}
            whole = {m: (v - rest.get(m, 0)) // c for m, v in p.items()}
            whole = {m: v for m, v in whole.items() if v}
            if set(rest) <= {()}:  # the remainder is a constant in [0, c)
                r = rest.get((), 0)
                return _add(whole, _const(r // c)) if is_div else _const(r % c)
            if is_div:
                return _add(whole, opaque(rest, q))
            return opaque(rest, q)
        quotient = _exact_quotient(p, q)
        if quotient is None:
            return opaque(p, q)
        exact = quotient if is_div else {}
        if self._positive(q):
            return exact
        # Q may be zero: keep Z3's meaning of division by zero there.
        a, b = self._term(p), self._term(q)
        original = a / b if is_div else a % b
        return self._atom(z3.If(b == 0, original, self._term(exact)))

    def _positive(self, q: Poly) -> bool:
        """Whether `q >= 1` follows from the variables' lower bounds alone."""
        total = 0
        for mono, coeff in q.items():
            if coeff < 0:
                return False
            value = coeff
            for key in mono:
                low = self._lower(key)
                if low is None or low < 0:
                    return False
                value *= low
            total += value
        return total >= 1

    def _atom(self, t: z3.ExprRef, key: str | None = None) -> Poly:
        # A variable's key is its name (what `lower_bound` is asked about); any other atom's
        # is its s-expression, so equal terms are one atom.
        key = key or t.sexpr()
        self._atoms.setdefault(key, t)
        return {(key,): 1}

    def _term(self, p: Poly) -> z3.ArithRef:
        if not p:
            return z3.IntVal(0)
        parts = []
        for mono in sorted(p, key=lambda m: (len(m), m)):
            coeff = p[mono]
            factors = [self._atoms[k] for k in mono]
            if not factors:
                parts.append(z3.IntVal(coeff))
                continue
            prod = factors[0]
            for f in factors[1:]:
                prod = prod * f
            parts.append(prod if coeff == 1 else z3.IntVal(coeff) * prod)
        out = parts[0]
        for part in parts[1:]:
            out = out + part
        return out


_COMPARE: dict[int, Callable] = {
    z3.Z3_OP_EQ: lambda a, b: a == b,
    z3.Z3_OP_DISTINCT: lambda a, b: a != b,
    z3.Z3_OP_LE: lambda a, b: a <= b,
    z3.Z3_OP_LT: lambda a, b: a < b,
    z3.Z3_OP_GE: lambda a, b: a >= b,
    z3.Z3_OP_GT: lambda a, b: a > b,
}


def _const(v: int) -> Poly:
    return {(): v} if v else {}


def _add(a: Poly, b: Poly) -> Poly:
    out = dict(a)
    for m, v in b.items():
        s = out.get(m, 0) + v
        if s:
            out[m] = s
        else:
            out.pop(m, None)
    return out


def _scale(a: Poly, c: int) -> Poly:
    return {m: v * c for m, v in a.items()} if c else {}


def _sub(a: Poly, b: Poly) -> Poly:
    return _add(a, _scale(b, -1))


def _mul(a: Poly, b: Poly) -> Poly:
    out: Poly = {}
    for ma, va in a.items():
        for mb, vb in b.items():
            out = _add(out, {tuple(sorted(ma + mb)): va * vb})
    return out


def _order(m: Monomial) -> tuple[int, Monomial]:
    # Graded order (degree, then the sorted atoms): multiplying two monomials by the same
    # monomial keeps their order, which exact division relies on.
    return (len(m), m)


def _divides(small: Monomial, big: Monomial) -> Monomial | None:
    """`big / small` when `small` divides `big`, else None."""
    rest = list(big)
    for key in small:
        if key not in rest:
            return None
        rest.remove(key)
    return tuple(rest)


def _exact_quotient(p: Poly, q: Poly, steps: int = 256) -> Poly | None:
    """`R` with `P = Q * R` and integer coefficients, or None when there is none.

    Polynomial long division by the leading term: if `P = Q*R` then the leading monomial of `P`
    is the leading monomial of `Q` times that of `R`, so a leading term `Q` does not divide
    means `Q` does not divide `P`.
    """
    lead = max(q, key=_order)
    lead_coeff = q[lead]
    quotient: Poly = {}
    rest = dict(p)
    for _ in range(steps):
        if not rest:
            return quotient
        top = max(rest, key=_order)
        mono = _divides(lead, top)
        if mono is None or rest[top] % lead_coeff:
            return None
        step = {mono: rest[top] // lead_coeff}
        quotient = _add(quotient, step)
        rest = _sub(rest, _mul(q, step))
    return None
