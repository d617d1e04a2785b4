"""Proving obligations with Z3.

Facts (dim constraints, annotation sizes) go in with `assert_and_track`, each
under a label that maps back to its source span. An obligation is:

- PROVEN when `facts ∧ ¬obligation` is unsat;
- REFUTED when it is sat: the model is the counterexample. The conflicting
  annotations are then the unsat core of `facts ∧ obligation` (when the
  obligation fails for every size), or the annotations of the sizes it
  mentions (when it fails only for some);
- UNKNOWN when Z3 gives up or times out: its own verdict, never a pass.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from mimir.diagnostics.diagnostic import Label
from mimir.solve.z3lib import z3

PROVEN = "proven"
REFUTED = "refuted"
UNKNOWN = "unknown"

DEFAULT_TIMEOUT_MS = 5000


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
class Prover:
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    dim_order: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.solver = z3.Solver()
        self.solver.set("timeout", self.timeout_ms)
        self.solver.set("unsat_core", True)
        self.solver.set("core.minimize", True)
        self._facts: dict[str, _Fact] = {}
        self._dims: dict[str, z3.ArithRef] = {}
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

    def prove(
        self, obligation: z3.BoolRef, show: tuple[tuple[str, z3.ArithRef], ...] = ()
    ) -> Verdict:
        """Prove `obligation`; on refutation, also evaluate the `show` terms in the model."""
        start = time.perf_counter()
        try:
            return self._prove(obligation, show)
        finally:
            self.solve_seconds += time.perf_counter() - start
            self.queries += 1

    def _prove(self, obligation: z3.BoolRef, show: tuple = ()) -> Verdict:
        s = self.solver
        s.push()
        try:
            s.add(z3.Not(obligation))
            result = s.check()
            if result == z3.unsat:
                return Verdict(PROVEN)
            if result == z3.unknown:
                return Verdict(UNKNOWN, reason=s.reason_unknown())
            model = s.model()
        finally:
            s.pop()
        variables = _variables(obligation)
        involved = self._dims_of(variables)
        model = self._smallest(obligation, involved, show) or model
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
        labels, always = self._conflict(obligation, variables)
        return Verdict(REFUTED, counterexample, labels, always)

    def _smallest(
        self, obligation: z3.BoolRef, involved: set[str], show: tuple
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
        for fact in self._facts.values():
            opt.add(fact.term)
        opt.add(z3.Not(obligation))
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
        self, obligation: z3.BoolRef, variables: set[str]
    ) -> tuple[tuple[Label, ...], bool]:
        s = self.solver
        s.push()
        try:
            s.add(obligation)
            result = s.check()
            if result == z3.unsat:
                core = {str(b) for b in s.unsat_core()}
                labels = [self._facts[k].label for k in self._facts if k in core]
                return _unique(labels), True
        finally:
            s.pop()
        labels = [self._var_label[v] for v in sorted(variables) if v in self._var_label]
        return _unique(labels), False


def _unique(labels: list[Label | None]) -> tuple[Label, ...]:
    seen: list[Label] = []
    for label in labels:
        if label is not None and label not in seen:
            seen.append(label)
    return tuple(sorted(seen, key=lambda lab: (lab.span.line, lab.span.column)))


def _variables(term: z3.ExprRef) -> set[str]:
    out: set[str] = set()
    todo = [term]
    seen: set[int] = set()
    while todo:
        t = todo.pop()
        if t.get_id() in seen:
            continue
        seen.add(t.get_id())
        if z3.is_const(t) and t.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            out.add(str(t))
        todo.extend(t.children())
    return out
