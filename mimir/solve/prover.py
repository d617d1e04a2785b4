"""Proving obligations with Z3.

Facts (dim constraints, annotation sizes) go in with `assert_and_track`, each
under a label that maps back to its source span. An obligation is:

- PROVEN when `facts ∧ ¬obligation` is unsat;
- REFUTED when it is sat: the model is the counterexample. The conflicting
  annotations are then the unsat core of `facts ∧ obligation` (when the
  obligation fails for every size), or the annotations of the sizes it
  mentions (when it fails only for some);
- UNKNOWN when Z3 gives up or runs out of budget: its own verdict, never a pass.

A query goes through the cheapest procedure that can decide it:

1. Z3's rewriter (`simplify` with sums of monomials) on the obligation with annotation sizes
   and `multiple_of` quotients substituted; then normalisation (`mimir.solve.normal`):
   products expanded, exact divisions by literals and by polynomials carried out. Most
   obligations become `True` here without a solver;
2. fresh, non-incremental solvers on `facts ∧ ¬normalised` (only the facts it reaches):
   Z3's SMT core (linear arithmetic, nonlinear heuristics), then its `qfnia` tactic;
3. when both give up, a bounded search for a small counterexample: the admissible sizes of
   the dims involved, smallest first, each substituted and simplified;
4. otherwise UNKNOWN (GPU050).

A counterexample is the least one: the bounded search's first (dims in declaration order)
where the obligation is over dims alone, else Z3's Optimize, minimising the same way.

Budgets are deterministic: every solver call gets a Z3 resource limit (`rlimit`, counted
in Z3's own steps, so the same query gets the same verdict on an idle or a busy machine)
proportional to `timeout_ms`; the wall-clock `timeout_ms` stays only as an outer safety,
reached first only on a machine many times slower than `RLIMIT_PER_MS` assumes.
Every query uses fresh solvers, so its verdict never depends on what was solved before.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

from mimir.diagnostics.diagnostic import Label
from mimir.solve.normal import Normaliser
from mimir.solve.z3lib import z3

PROVEN = "proven"
REFUTED = "refuted"
UNKNOWN = "unknown"

DEFAULT_TIMEOUT_MS = 5000
# Z3 resource units per millisecond of `timeout_ms`. One core of the development machine
# spends about 7,500 units per millisecond of CPU, so a solver call's rlimit runs out in about
# a thirtieth of its wall-clock timeout: the rlimit, not the clock, ends a hard query unless
# the machine is thirty times slower (two cores shared by seven busy checkers: ten to twenty).
RLIMIT_PER_MS = 250
# The bounded counterexample search tries at most this many size combinations.
SEARCH_CANDIDATES = 512


@dataclass
class Verdict:
    status: str
    counterexample: tuple[tuple[str, int], ...] = ()
    labels: tuple[Label, ...] = ()
    always: bool = False  # refuted for every admissible size
    reason: str = ""


@dataclass
class _Fact:
    term: z3.BoolRef
    label: Label | None
    variables: frozenset[str]


@dataclass
class _DimFacts:
    low: int
    high: int | None
    multiple_of: int | None
    quotient: z3.ArithRef | None  # `k` in `N = multiple_of * k`


@dataclass
class Prover:
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    dim_order: list[str] = field(default_factory=list)
    rlimit: int | None = None  # per solver call; None: `timeout_ms * RLIMIT_PER_MS`

    def __post_init__(self) -> None:
        if self.rlimit is None:
            self.rlimit = self.timeout_ms * RLIMIT_PER_MS
        self.solver = z3.Solver()
        self.solver.set("timeout", self.timeout_ms)
        self.solver.set("rlimit", self.rlimit)
        self.solver.set("unsat_core", True)
        self.solver.set("core.minimize", True)
        self._facts: dict[str, _Fact] = {}
        self._dims: dict[str, z3.ArithRef] = {}
        self._declared: dict[str, _DimFacts] = {}
        # Variables that stand for a term (annotation sizes, `N -> m*k`), for normalising.
        self._defs: dict[str, z3.ArithRef] = {}
        self._def_lhs: dict[str, z3.ExprRef] = {}
        self._lower: dict[str, int] = {}  # least value of a variable, by name
        self._normaliser: Normaliser | None = None  # rebuilt when a definition is added
        self._pairs: list[tuple[z3.ArithRef, z3.ArithRef]] | None = None  # for `_substitute`
        # For an annotation variable: the dims its size is written in.
        self._var_dims: dict[str, tuple[str, ...]] = {}
        self._var_label: dict[str, Label] = {}
        self.solve_seconds = 0.0  # wall time inside Z3, for benchmarks
        self.queries = 0

    def dim(self, name: str) -> z3.ArithRef:
        if name not in self._dims:
            self._dims[name] = z3.Int(name)
            if name not in self.dim_order:
                self.dim_order.append(name)
        return self._dims[name]

    def declare_dim(
        self, name: str, low: int, high: int | None, multiple_of: int | None, label: Label | None
    ) -> z3.ArithRef:
        """The facts of `Dim(name, min=low, max=high, multiple_of=...)`, tracked under `label`.

        `multiple_of=m` is `N = m * k` for an integer `k`, not `N % m == 0`: products and
        quotients of `N` then stay polynomials in `k`, which normalisation can simplify.
        """
        var = self.dim(name)
        self.add_fact(var >= low, label)
        if high is not None:
            self.add_fact(var <= high, label)
        quotient = None
        if multiple_of is not None and multiple_of > 0:
            quotient = z3.Int(f"{name}/{multiple_of}")
            self.add_fact(var == multiple_of * quotient, label)
            self._lower[str(quotient)] = -(-low // multiple_of)
        self._lower[name] = low
        self._normaliser = None
        self._declared[name] = _DimFacts(low, high, multiple_of, quotient)
        return var

    def annotation_var(
        self, name: str, term: z3.ArithRef, dims: tuple[str, ...], label: Label
    ) -> z3.ArithRef:
        """A fresh variable fixed to `term` by a fact tracked under `label`."""
        var = z3.Int(name)
        self._var_dims[name] = dims
        self._var_label[name] = label
        self.add_fact(var == term, label)
        return var

    def add_fact(self, term: z3.BoolRef, label: Label | None) -> None:
        key = f"fact{len(self._facts)}"
        self._facts[key] = _Fact(term, label, frozenset(_variables(term)))
        self.solver.assert_and_track(term, z3.Bool(key))
        self._define(term)

    def _define(self, fact: z3.BoolRef) -> None:
        """A fact `x == t` lets normalisation read `x` as `t` (never in a cycle)."""
        if not z3.is_eq(fact):
            return
        lhs, rhs = fact.children()
        if not _is_variable(lhs):
            lhs, rhs = rhs, lhs  # Z3 may print (and store) `x == 8` as `8 == x`
        if not _is_variable(lhs):
            return
        name = str(lhs)
        if name in self._defs:
            return
        seen: set[str] = set()
        todo = list(_variables(rhs))
        while todo:
            v = todo.pop()
            if v == name:
                return
            if v not in seen:
                seen.add(v)
                if v in self._defs:
                    todo.extend(_variables(self._defs[v]))
        self._defs[name] = rhs
        self._def_lhs[name] = lhs
        self._normaliser = None
        self._pairs = None

    def normalise(self, term: z3.BoolRef) -> z3.BoolRef:
        """`term` in polynomial normal form (equivalent under the facts)."""
        if self._normaliser is None:
            self._normaliser = Normaliser(self._defs, self._lower.get)
        return self._normaliser.normalise(term)

    def _substitute(self, term: z3.ExprRef) -> z3.ExprRef:
        """`term` with every defined variable replaced by what it stands for."""
        if self._pairs is None:
            self._pairs = [(self._def_lhs[name], rhs) for name, rhs in self._defs.items()]
        for _ in range(len(self._pairs)):  # definitions never form a cycle
            done = z3.substitute(term, *self._pairs) if self._pairs else term
            if done.eq(term):
                break
            term = done
        return term

    def prove(
        self,
        obligation: z3.BoolRef,
        show: tuple[tuple[str, z3.ArithRef], ...] = (),
        assumptions: tuple[z3.BoolRef, ...] = (),
        quick: bool = False,
    ) -> Verdict:
        """Prove `obligation`; on refutation, also evaluate the `show` terms in the model.

        `assumptions` hold for this query only, besides the facts (what one path through
        host code has assumed). `quick`: Z3's core alone under a twentieth of the budget,
        for a fact the caller can do without."""
        start = time.perf_counter()
        try:
            return self._prove(obligation, show, assumptions, quick)
        finally:
            self.solve_seconds += time.perf_counter() - start
            self.queries += 1

    def satisfiable(
        self,
        term: z3.BoolRef,
        assumptions: tuple[z3.BoolRef, ...] = (),
        rlimit: int | None = None,
    ) -> z3.CheckSatResult:
        """Whether `term` holds for some sizes the facts and `assumptions` admit
        (`rlimit`: this query's budget, smaller than a proof's; Z3's core alone)."""
        start = time.perf_counter()
        try:
            variables = _variables(term)
            for a in assumptions:
                variables |= _variables(a)
            facts = self._relevant(variables)
            return self._check(facts, term, *assumptions, rlimit=rlimit, quick=True)[0]
        finally:
            self.solve_seconds += time.perf_counter() - start
            self.queries += 1

    def _prove(
        self, obligation: z3.BoolRef, show: tuple = (), assumed: tuple = (), quick: bool = False
    ) -> Verdict:
        # Z3's own rewriter first (fast, in C++): it expands products and divides by literals,
        # which settles most obligations; `normalise` handles what it leaves.
        if z3.is_true(z3.simplify(self._substitute(obligation), som=True)):
            return Verdict(PROVEN)
        normal = self.normalise(obligation)
        if z3.is_true(normal):
            return Verdict(PROVEN)
        variables = _variables(obligation)
        involved = self._dims_of(variables)
        reach = (
            variables | _variables(normal) | involved | {v for _, t in show for v in _variables(t)}
        )
        for a in assumed:
            reach |= _variables(a)
        facts = self._relevant(reach)
        result, model, reason = self._check(
            facts,
            z3.Not(normal),
            *assumed,
            rlimit=self.rlimit // 20 if quick else None,
            quick=quick,
        )
        if result == z3.unsat:
            return Verdict(PROVEN)
        if quick and result != z3.sat:
            return Verdict(UNKNOWN, reason=reason)
        searched = None
        if result == z3.unknown:
            searched = self._search(facts, normal, involved, assumed)
            if searched is None:
                return Verdict(UNKNOWN, reason=reason)
        # The least counterexample: the small-size search (smallest sizes first, dims in
        # order) where it applies, as it costs a few simplifications where Optimize can spend
        # its whole budget on nonlinear terms; otherwise Optimize; the solver's model last.
        model = (
            searched
            or self._search(facts, normal, involved, assumed)
            or self._smallest(facts, normal, involved, show, assumed)
            or model
        )
        shown = tuple(
            (name, model.eval(term, model_completion=True).as_long()) for name, term in show
        )
        counterexample = (
            tuple(
                (name, model.eval(self._dims[name], model_completion=True).as_long())
                for name in self.dim_order
                if name in involved
            )
            + shown
        )
        labels, always = self._conflict(facts, obligation, normal, variables, assumed)
        return Verdict(REFUTED, counterexample, labels, always)

    def _relevant(self, variables: set[str]) -> list[str]:
        """The facts that constrain `variables`, directly or through other facts (by key).

        A fact over variables the query never reaches cannot change its verdict; leaving it
        out keeps each fresh solver small. Facts without variables always go in.
        """
        reached = set(variables)
        chosen: set[str] = set()
        grew = True
        while grew:
            grew = False
            for key, fact in self._facts.items():
                if key not in chosen and (not fact.variables or fact.variables & reached):
                    chosen.add(key)
                    reached |= fact.variables
                    grew = True
        return [k for k in self._facts if k in chosen]

    def _check(
        self,
        facts: list[str],
        *extra: z3.BoolRef,
        rlimit: int | None = None,
        quick: bool = False,
    ) -> tuple[z3.CheckSatResult, z3.ModelRef | None, str]:
        """`facts ∧ extra` on fresh solvers under the query budget (`rlimit=0`: none).

        Z3's SMT core first (it decides linear queries, and many nonlinear ones, with no
        set-up cost), then Z3's `qfnia` tactic (preprocessing, bounded bit-blasting of
        nonlinear terms, nlsat; about 2 ms to set up) when the core gives up (`quick`: the
        core alone).
        """
        result, reason = z3.unknown, ""
        makers = [z3.SimpleSolver] if quick else [z3.SimpleSolver, _nonlinear_solver]
        for make in makers:
            s = make()
            s.set("timeout", self.timeout_ms)
            s.set("rlimit", self.rlimit if rlimit is None else rlimit)
            s.add(*[self._facts[k].term for k in facts], *extra)
            try:
                result = s.check()
            except z3.Z3Exception as err:  # a tactic that does not apply to this query
                result, reason = z3.unknown, str(err)
                continue
            if result == z3.sat:
                return result, s.model(), ""
            if result == z3.unsat:
                return result, None, ""
            reason = _reason(s.reason_unknown())
        return result, None, reason

    def _search(
        self, facts: list[str], normal: z3.BoolRef, involved: set[str], assumed: tuple = ()
    ) -> z3.ModelRef | None:
        """The first admissible sizes (smallest first, dims in order) that refute `normal`.

        Only for an obligation over declared dims alone, where substituting sizes leaves a
        ground formula that simplification decides.
        """
        names = [n for n in self.dim_order if n in involved and n in self._declared]
        known = {str(self._dims[n]) for n in names}
        known |= {
            str(self._declared[n].quotient) for n in names if self._declared[n].quotient is not None
        }
        if not names or not _variables(normal) <= known:
            return None
        per_dim = min(64, max(2, int(SEARCH_CANDIDATES ** (1 / len(names)))))
        values = [self._admissible(self._declared[n], per_dim) for n in names]
        for sizes in itertools.islice(itertools.product(*values), SEARCH_CANDIDATES):
            pairs = []
            for n, v in zip(names, sizes, strict=True):
                pairs.append((self._dims[n], z3.IntVal(v)))
                decl = self._declared[n]
                if decl.quotient is not None and decl.multiple_of:
                    pairs.append((decl.quotient, z3.IntVal(v // decl.multiple_of)))
            if z3.is_false(z3.simplify(z3.substitute(normal, *pairs))):
                fixed = [self._dims[n] == v for n, v in zip(names, sizes, strict=True)]
                # Every dim fixed: propagation decides it, no budget needed.
                result, model, _ = self._check(facts, z3.Not(normal), *assumed, *fixed, rlimit=0)
                if result == z3.sat:
                    return model
        return None

    @staticmethod
    def _admissible(facts: _DimFacts, count: int) -> list[int]:
        step = facts.multiple_of or 1
        first = max(facts.low, 0)
        first += -first % step
        out = []
        v = first
        while len(out) < count and (facts.high is None or v <= facts.high):
            out.append(v)
            v += step
        return out

    def _smallest(
        self,
        facts: list[str],
        normal: z3.BoolRef,
        involved: set[str],
        show: tuple,
        assumed: tuple = (),
    ) -> z3.ModelRef | None:
        """The least counterexample: dims in declaration order, then the shown terms.

        Minimising makes counterexamples small (N=1 rather than N=7) and deterministic:
        the same file gives the same counterexample whatever was solved before it.
        """
        objectives = [self._dims[n] for n in self.dim_order if n in involved]
        objectives += [term for _, term in show]
        if not objectives:
            return None
        opt = z3.Optimize()
        opt.set("timeout", self.timeout_ms)
        opt.set("rlimit", self.rlimit)
        for key in facts:
            opt.add(self._facts[key].term)
        opt.add(z3.Not(normal), *assumed)
        for term in objectives:
            opt.minimize(term)
        if opt.check() != z3.sat:
            return None
        return opt.model()

    def _dims_of(self, variables: set[str]) -> set[str]:
        found = set()
        for v in variables:
            if v in self._dims:
                found.add(v)
            found.update(self._var_dims.get(v, ()))
        return found

    def _conflict(
        self,
        facts: list[str],
        obligation: z3.BoolRef,
        normal: z3.BoolRef,
        variables: set[str],
        assumed: tuple = (),
    ) -> tuple[tuple[Label, ...], bool]:
        """The annotations in conflict: the unsat core of `facts ∧ obligation`, when it is unsat.

        The original obligation first (its core names the facts that normalisation read,
        e.g. a dtype annotation), its normal form when Z3 cannot decide the original.
        """
        for goal in (obligation, normal):
            s = z3.SimpleSolver()
            s.set("timeout", self.timeout_ms)
            s.set("rlimit", self.rlimit)
            s.set("unsat_core", True)
            s.set("core.minimize", True)
            for key in facts:
                s.assert_and_track(self._facts[key].term, z3.Bool(key))
            s.add(goal, *assumed)
            result = s.check()
            if result == z3.sat:
                break
            if result == z3.unsat:
                core = {str(b) for b in s.unsat_core()}
                labels = _unique([self._facts[k].label for k in self._facts if k in core])
                return labels or self._labels_of(variables), True
        return self._labels_of(variables), False

    def _labels_of(self, variables: set[str]) -> tuple[Label, ...]:
        return _unique([self._var_label[v] for v in sorted(variables) if v in self._var_label])


def _nonlinear_solver() -> z3.Solver:
    return z3.Tactic("qfnia").solver()


def _reason(z3_reason: str) -> str:
    """Z3's reason for `unknown`, in the user's words."""
    # Z3 says either when the rlimit runs out (which depends on where it was cut).
    if z3_reason in ("canceled", "max. resource limit exceeded"):
        return "resource limit reached"
    if z3_reason == "timeout":
        return "wall-clock timeout"
    return z3_reason


def _unique(labels: list[Label | None]) -> tuple[Label, ...]:
    seen: list[Label] = []
    for label in labels:
        if label is not None and label not in seen:
            seen.append(label)
    return tuple(sorted(seen, key=lambda lab: (lab.span.line, lab.span.column)))


def _is_variable(term: z3.ExprRef) -> bool:
    return z3.is_const(term) and term.decl().kind() == z3.Z3_OP_UNINTERPRETED


# (context, term id) -> (the term, kept alive so that Z3 never gives its id to another,
# its variables): host code asks about the same assumptions at every query of a path
_VARIABLES: dict[tuple[int, int], tuple[z3.ExprRef, frozenset[str]]] = {}


def _variables(term: z3.ExprRef) -> set[str]:
    """The names of the uninterpreted constants in `term` (a new set: callers add to it)."""
    return set(variable_names(term))


def variable_names(term: z3.ExprRef) -> frozenset[str]:
    """The names of the uninterpreted constants in `term`, found once per term."""
    key = (id(term.ctx), term.get_id())
    found = _VARIABLES.get(key)
    if found is None:
        if len(_VARIABLES) > 100_000:
            _VARIABLES.clear()
        found = _VARIABLES[key] = (term, frozenset(_walk_variables(term)))
    return found[1]


def _walk_variables(term: z3.ExprRef) -> set[str]:
    """Walks Z3's own AST through the C API: the Python wrappers `children()` builds cost
    more than the rest of a typical query (the borrowed pointers live as long as `term`)."""
    ctx = term.ctx_ref()
    out: set[str] = set()
    todo = [term.as_ast()]
    seen: set[int] = set()
    while todo:
        ast = todo.pop()
        ident = z3.Z3_get_ast_id(ctx, ast)
        if ident in seen or z3.Z3_get_ast_kind(ctx, ast) != z3.Z3_APP_AST:
            continue
        seen.add(ident)
        app = z3.Z3_to_app(ctx, ast)
        n = z3.Z3_get_app_num_args(ctx, app)
        if n == 0:
            decl = z3.Z3_get_app_decl(ctx, app)
            if z3.Z3_get_decl_kind(ctx, decl) == z3.Z3_OP_UNINTERPRETED:
                out.add(z3.Z3_get_symbol_string(ctx, z3.Z3_get_decl_name(ctx, decl)))
        else:
            todo.extend(z3.Z3_get_app_arg(ctx, app, k) for k in range(n))
    return out
