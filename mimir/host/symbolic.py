"""Sizes nobody stated: free symbols, what a path assumes of them, and shapes of unknown rank.

The host interpreter mixes this in. Two kinds of symbolic size meet here:

- a *contract* size: a `Dim` of an annotation, a jaxtyping name, a data loader's last
  batch. A requirement over contract sizes must hold for every size the contract admits;
  when it does not, the solver's model is the counterexample.
- a *free* size: what nobody wrote down — the sizes of a tensor parameter without an
  annotation, an `int` parameter, a constructor argument without a stated value. The
  first demand made of a free size is assumed for the rest of the path
  (`mimir.host.assume`); a demand is an error only when it contradicts what the path
  assumed for every size: it can never succeed. When only an equality that the same
  function demanded earlier of values it computed makes it fail, it is reported at that
  demand (`_contradicted`), where PyTorch raises for every size but those that satisfy it.

A tensor whose rank is unknown has an *origin*: the sizes of its last axes, read as
`x.shape[-1]` or demanded by a layer, are free symbols recorded per origin (so every
read gives the same symbol), and a statement that fixes the rank (`B, T, C = x.shape`)
gives every value of that origin in the current scope the full shape.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from mimir.diagnostics.diagnostic import Label
from mimir.host.assume import Demand, Path, join_paths, substitution, variables
from mimir.host.rules import RefutedError
from mimir.host.values import UNKNOWN, IntV, Shape, Size, Sym, TensorV, arith, const
from mimir.solve.prover import PROVEN, REFUTED, Prover
from mimir.solve.z3lib import z3

NEVER = "it fails for every size the code admits"
# Z3 resource units for "can this ever hold?" (a few ms): a query that runs out is
# neither assumed nor reported, so a hard one costs little and claims nothing.
SAT_RLIMIT = 20_000
# Solver queries one file may ask about sizes nobody stated; past them nothing more is
# assumed or reported (what is plainly true or false is still decided without a query).
QUERIES = 300
# Satisfiability queries the solver left undecided (each spends its whole resource limit)
# after which a file asks no more of them: Swin's window sizes, products of remainders.
SAT_UNKNOWNS = 16
BIG_TERM = 80  # nodes of a condition past which it is not sent to the solver
# Demands of one function a refuted demand is checked against, one by one, to find the
# one that dooms it (`_contradicted`): past them it is reported where it fails.
BLAMED = 8
DEEP = 16  # nodes of a size term (a floor formula, a broadcast) past which it is a size of its own


class Symbolic:
    """State and rules for symbolic sizes; `HostChecker` inherits them."""

    prover: Prover
    path: Path
    free: set[str]
    env: dict | None
    unproven: int
    stated: tuple[Label, ...]  # where the configuration being checked is stated

    def _init_symbolic(self) -> None:
        self.path = Path()
        self.free = set()
        self.env = None
        self._tails: dict[int, list[Sym]] = {}  # origin -> sizes of its last axes, last first
        self._heads: dict[int, list[Sym]] = {}  # origin -> sizes of its first axes
        self._origins = 0
        self._names: dict[str, int] = {}
        self._low: dict[str, int] = {}  # free variable -> its lower bound
        self._vars: dict[str, Any] = {}  # free variable name -> its Z3 constant
        self._reported_first: set[int] = set()  # conditions reported as a path's failure
        self.queries_left = QUERIES
        self.sat_unknowns = 0
        self.stated = ()

    # ------------------------------------------------------------ symbols

    def free_size(self, text: str, lo: int = 1) -> Sym:
        """A new free size `>= lo`, shown to the user as `text`."""
        count = self._names.get(text, 0)
        self._names[text] = count + 1
        name = text if count == 0 else f"{text}#{count}"
        var = z3.Int(name)
        # its bound goes into each query that reads it (`_context`), not into the prover's
        # facts: a file makes thousands of free sizes, and every query would scan them all
        self.free.add(name)
        self._low[name] = lo
        self._vars[name] = var
        return Sym(var, text, prec=3 if text.isidentifier() else 0)

    def new_origin(self, t: TensorV) -> TensorV:
        """`t` with an origin of its own (a value bound to a name, a parameter)."""
        if t.shape is not None or t.origin is not None:
            return t
        self._origins += 1
        self._tails[self._origins] = list(reversed(t.tail))
        return TensorV(None, t.dtype, t.lib, t.tail, self._origins, t.max_rank)

    def current(self, t: TensorV) -> TensorV:
        """`t` with every last-axis size its origin has recorded."""
        if t.shape is not None or t.origin is None:
            return t
        tail = self._tails.get(t.origin, [])
        if len(tail) <= len(t.tail):
            return t
        return TensorV(None, t.dtype, t.lib, tuple(reversed(tail)), t.origin, t.max_rank)

    def axis_size(self, t: TensorV, k: int, label: str = "x") -> Size:
        """The size of axis `k` (negative from the end); a free symbol when not known."""
        if t.shape is not None:
            return t.shape[k] if -len(t.shape) <= k < len(t.shape) else None
        if k < 0:
            if -k <= len(t.tail):
                return t.tail[k]
            if t.origin is None:
                return self.free_size(f"{label}.shape[{k}]")
            tail = self._tails.setdefault(t.origin, list(reversed(t.tail)))
            while len(tail) < -k:
                tail.append(self.free_size(f"{label}.shape[{-len(tail) - 1}]"))
            return tail[-k - 1]
        if t.origin is None:
            return self.free_size(f"{label}.shape[{k}]")
        head = self._heads.setdefault(t.origin, [])
        while len(head) <= k:
            head.append(self.free_size(f"{label}.shape[{len(head)}]"))
        return head[k]

    def tail_of(self, t: TensorV, n: int, label: str = "x") -> Shape | None:
        """The last `n` sizes of `t` (free symbols where unknown); None if its rank is less."""
        if t.shape is not None:
            return t.shape[len(t.shape) - n :] if len(t.shape) >= n else None
        return tuple(self.axis_size(t, k, label) for k in range(-n, 0))

    def refine(self, t: TensorV, rank: int, names: tuple[str, ...] = ()) -> TensorV:
        """`t` of unknown rank, given `rank` by a demand that fixes it; rebinds its origin.

        `names` names the sizes where the code does (`B, T, C = x.shape`)."""
        if t.shape is not None:
            return t
        t = self.current(t)
        if len(t.tail) > rank or (t.max_rank is not None and rank > t.max_rank):
            return t  # the caller reports the rank mismatch
        shape: list[Size] = [None] * rank
        for k, s in enumerate(t.tail):
            shape[rank - len(t.tail) + k] = s
        heads = self._heads.get(t.origin, []) if t.origin is not None else []
        for k, s in enumerate(heads[:rank]):
            if shape[k] is None:
                shape[k] = s
            elif shape[k] is not s:
                self._assume(shape[k].term == s.term)
        for k in range(rank):
            if shape[k] is None:
                text = names[k] if k < len(names) and names[k].isidentifier() else None
                shape[k] = self.free_size(text or f"x.shape[{k}]")
                if t.origin is not None:
                    self._record_tail(t.origin, rank, k, shape[k])
        new = TensorV(tuple(shape), t.dtype, t.lib, origin=t.origin)
        if t.origin is not None and self.env is not None:
            for key, v in list(self.env.items()):
                if isinstance(v, TensorV) and v.origin == t.origin and v.shape is None:
                    self.env[key] = TensorV(new.shape, v.dtype, v.lib, origin=t.origin)
        return new

    def _record_tail(self, origin: int, rank: int, k: int, s: Sym) -> None:
        tail = self._tails.setdefault(origin, [])
        if len(tail) == rank - k - 1:  # extends the known tail by one axis
            tail.append(s)

    def _assume(self, cond: Any, demand: Demand | None = None, asked: Any = None) -> None:
        self.path = self.path.assume(cond, self.free, demand, asked)

    def demand_here(self, code: str, message: str) -> Demand | None:
        """What is demanding a condition now (the interpreter knows; None: nobody)."""
        return None

    def frame_here(self) -> int | None:
        """The function run the current demand is made in (None: not known)."""
        return None

    def _contradicted(self, cond: Any) -> tuple[Demand, str] | None:
        """The earlier demand of this function, between values it computed, that pins
        sizes (an equality, which most sizes fail, not a bound) and whose assumption
        makes `cond` fail: `cond` can hold on its own, and never together with
        that assumption (or it can hold on this path without it). Torch then raises at
        that demand for every input but those that satisfy it, and for those at this one,
        so that demand is where the function fails (its condition, shown, comes with it).
        None: `cond` fails on its own, or for what no single such demand assumed."""
        frame = self.frame_here()
        history = self.path.history
        picks = [
            k
            for k, (held, d) in enumerate(history)
            if frame is not None
            and d is not None
            and d.derived
            and d.frame == frame
            and _pins(self.cancel(held))
        ]
        if not picks or len(picks) > BLAMED:
            return None
        if self._admits(cond, Path()) is not True:
            return None  # it fails on its own (or the solver cannot say)
        if self._admits(cond, self._replayed(lambda k: True)) is not False:
            return None  # a rebuild from the history does not refute it (after a join)
        blamed = self._first_blamed(cond, picks)
        if blamed is None:
            return None
        held, demand = history[blamed]
        assert demand is not None
        self._reported_first.add(held.get_id())
        pair = substitution(self.cancel(held), self.free)
        shown = _shown(held) if pair is None else f"{_shown(pair[0])} == {_shown(pair[1])}"
        return demand, shown.replace(" == ", " = ")

    def _after_reported(self, cond: Any) -> bool:
        """Whether `cond` can hold on its own and fails on a path that carries an equality
        already reported as where the path fails (the next layer of a stack keeps the size
        the first one pinned). Every input that reaches `cond` there has passed that
        equality and failed after it, where the report's note says: one failure, one
        report. A demand that fails on its own is still reported."""
        if not self._reported_first or not variables(cond) & self.free:
            return False
        if not any(held.get_id() in self._reported_first for held, _ in self.path.history):
            return False
        return self._admits(cond, Path()) is True

    def _first_blamed(self, cond: Any, picks: list[int]) -> int | None:
        """The first of `picks` (indices into the history) whose condition alone refutes
        `cond`, else the first without which the rest of the path admits it."""
        for k in picks:
            if self._admits(cond, self._replayed(lambda j, k=k: j == k)) is False:
                return k
        for k in picks:
            if self._admits(cond, self._replayed(lambda j, k=k: j != k)):
                return k
        return None

    def _replayed(self, keep: Callable[[int], bool]) -> Path:
        """This path assumed again from its history, with the conditions `keep` accepts."""
        return self.path.replay(keep, self.free, lambda c, p: self.cancel(p.substitute(c)))

    def _admits(self, cond: Any, path: Path) -> bool | None:
        """Whether some sizes `path` admits satisfy `cond` (None: not decided)."""
        cond = self.cancel(path.substitute(cond))
        if z3.is_true(cond) or z3.is_false(cond):
            return z3.is_true(cond)
        status = self._satisfiable(cond, path)
        return None if status == z3.unknown else status == z3.sat

    # ------------------------------------------------------------ requirements

    def need(self, cond: Any, code: str, message: str, shapes: tuple = ()) -> None:
        if cond is None or cond is True:
            return
        if cond is False:
            raise RefutedError(code, message, labels=self.stated)
        asked = cond
        cond = self.cancel(self.path.substitute(cond))
        if z3.is_true(cond):
            return
        names = variables(cond)
        if z3.is_false(cond):
            first = self._contradicted(asked) if variables(asked) & self.free else None
            if first is None and self._after_reported(asked):
                return  # it fails because of a demand already reported as the failure
            raise RefutedError(code, message, labels=self.stated, why=NEVER, first=first)
        if self._bounded(cond):
            return  # `1 <= (h + 2 - 3)//2 + 1` of a size at least 1: its bounds say so
        if names & self.free:
            if any(a.eq(cond) for a in self.path.assumed):
                return  # the path assumed it already (the next layer of one size)
            if self._plainly_satisfiable(cond):
                self._assume(cond, self.demand_here(code, message), asked)
                return
            status = self._satisfiable(cond)
            if status == z3.unsat:
                first = self._contradicted(asked)
                if first is None and self._after_reported(asked):
                    return  # it fails because of a demand already reported as the failure
                raise RefutedError(code, message, labels=self.stated, why=NEVER, first=first)
            if status == z3.sat:
                self._assume(cond, self.demand_here(code, message), asked)
            else:
                self.unproven += 1
            return
        symbolic = [
            s for shape in shapes if shape for s in shape if s is not None and s.value is None
        ]
        show = tuple((f"#{k}", s.term) for k, s in enumerate(symbolic))
        verdict = self.prover.prove(cond, show, self._context(cond))
        if verdict.status == PROVEN:
            return
        if verdict.status == REFUTED:
            cex = tuple(kv for kv in verdict.counterexample if not kv[0].startswith("#"))
            values = dict(kv for kv in verdict.counterexample if kv[0].startswith("#"))
            note = None
            if values:
                by_sym = {id(s): values[f"#{k}"] for k, s in enumerate(symbolic)}
                shown = [
                    "["
                    + ", ".join(
                        "?" if s is None else str(by_sym.get(id(s), s.value)) for s in shape
                    )
                    + "]"
                    for shape in shapes
                    if shape is not None
                ]
                note = f"(then {' and '.join(shown)})"
            raise RefutedError(code, message, cex, labels=self.stated, note=note)
        self.unproven += 1  # unknown to Z3: never reported as an error

    def refuse_coincidence(
        self, a: Sym, b: Sym, code: str, message: str, one_side: bool = False
    ) -> None:
        """Raise where sizes `a` and `b` that this path never makes equal broadcast only
        because one of them happens to be 1 (or 0 against 1): `t` against `t - 1` works at
        t = 1 and t = 2 and fails for every longer sequence. A size the code keeps at 1 (a
        literal, `keepdim`, an assertion) never reaches here as a symbol, and a size nothing
        relates to the other (a parameter's) can equal it, so neither is refused. With
        `one_side` only `a` may be the 1 (`expand`: a size of 1 grows, no other does)."""
        if a.value is not None and b.value is not None:
            return
        same = self.path.substitute(a.term == b.term)
        ones = self.path.substitute(a.term == 1 if one_side else z3.Or(a.term == 1, b.term == 1))
        if z3.is_true(same) or z3.is_true(ones) or z3.is_false(ones):
            return  # equal, kept at 1, or never 1 (then `need` reports it for every size)
        names = variables(same) | variables(ones)
        if not names & self.free or self._plainly_satisfiable(same):
            return  # a size nothing constrains yet can equal the other: no query spent
        if self._satisfiable(same) != z3.unsat:
            return
        context = self._context(z3.And(same, ones))
        failing = self._model(z3.Not(ones), context)
        if failing is None:
            return
        working: list[dict[str, int]] = []
        while len(working) < 3:
            blocked = [z3.Or([self._vars[n] != v for n, v in m.items()]) for m in working]
            model = self._model(ones, (*context, *blocked))
            if model is None:
                break
            working.append(model)
        shown = sorted({_shown(self._vars[n]) for n in failing})
        if len(working) < 3 and len(shown) == 1 and all(len(m) == 1 for m in working):
            values = sorted(next(iter(m.values())) for m in working)
            where = f"{shown[0]} = " + " or ".join(str(v) for v in values)
        else:
            either = _shown(a.term) if one_side else f"{_shown(a.term)} or {_shown(b.term)}"
            where = f"sizes that make {either} 1"
        cex = tuple((_shown(self._vars[n]), v) for n, v in sorted(failing.items()))
        note = f"(it works only at {where}, where one side is 1 by coincidence)"
        raise RefutedError(code, message, cex, labels=self.stated, note=note)

    def _model(self, cond: Any, context: tuple[Any, ...]) -> dict[str, int] | None:
        """Values of the free sizes in `cond` and `context` that satisfy both (None: none
        found within the query budget)."""
        if self.queries_left <= 0:
            return None
        self.queries_left -= 1
        solver = z3.SimpleSolver()
        solver.set("rlimit", SAT_RLIMIT)
        solver.add(cond, *context)
        if solver.check() != z3.sat:
            return None
        model = solver.model()
        names = variables(cond)
        for c in context:
            names |= variables(c)
        return {
            n: model.eval(self._vars[n], model_completion=True).as_long()
            for n in sorted(names)
            if n in self._vars
        }

    def cancel(self, cond: Any) -> Any:
        """`a*x == b*x` as `a == b` and `a*x % (b*x) == 0` as `a % b == 0`, for factors `x`
        that are at least 1 (most reshapes then fold without the solver)."""
        if z3.is_eq(cond):
            lhs, rhs = cond.children()
            if z3.is_int_value(lhs) and z3.is_mod(rhs):
                lhs, rhs = rhs, lhs
            if z3.is_int_value(rhs) and rhs.as_long() == 0 and z3.is_mod(lhs):
                a, b = (self._product(t) for t in lhs.children())
                a, b = self._common(a, b)
                return z3.simplify(_mul(a) % _mul(b) == 0)
            if lhs.sort() == z3.IntSort():
                a, b = self._common(self._product(lhs), self._product(rhs))
                return z3.simplify(_mul(a) == _mul(b))
        return cond

    def quotient(self, a: Size, b: Size) -> Size:
        """`a // b` with the factors both have in common cancelled (`B*T*768 // (B*T*12)`
        is 64), for a reshape that infers a size."""
        if a is None or b is None:
            return None
        if a.value is not None and b.value is not None:
            return arith("//", a, b)
        num, den = self._common(self._product(a.term), self._product(b.term))
        top, bottom = z3.simplify(_mul(num)), z3.simplify(_mul(den))
        if z3.is_int_value(bottom) and bottom.as_long() == 1:
            if top.get_id() == a.term.get_id():
                return a
            return Sym(top, _shown(top), prec=2)
        if z3.is_int_value(top) and z3.is_int_value(bottom) and bottom.as_long() != 0:
            if top.as_long() % bottom.as_long() == 0:
                return const(top.as_long() // bottom.as_long())
        term = z3.simplify(top / bottom)
        return Sym(term, _shown(term), prec=2)

    def _product(self, t: Any) -> list[Any]:
        if z3.is_mul(t):
            return [f for c in t.children() for f in self._product(c)]
        return [t]

    def _common(self, a: list[Any], b: list[Any]) -> tuple[list[Any], list[Any]]:
        rest = list(b)
        keep = []
        for f in a:
            match = next((g for g in rest if g.get_id() == f.get_id()), None)
            if match is not None and self._positive(f):
                rest.remove(match)
            else:
                keep.append(f)
        return keep, rest

    def _positive(self, t: Any) -> bool:
        if z3.is_int_value(t):
            return t.as_long() > 0
        if z3.is_const(t) and t.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            name = t.decl().name()
            if name in self._low:
                return self._low[name] >= 1
            declared = getattr(self.prover, "_declared", {}).get(name)
            return declared is not None and declared.low >= 1
        return False

    def _bounded(self, cond: Any) -> bool:
        """`k <= t` (or `t >= k`) where the least value of `t` by the lower bounds of its
        free sizes is at least `k` (no query: a conv's output size after fifty layers)."""
        if not (z3.is_le(cond) or z3.is_ge(cond)):
            return False
        lo, hi = cond.children() if z3.is_le(cond) else reversed(cond.children())
        if not z3.is_int_value(lo):
            return False
        least = self._least(hi, 0)
        return least is not None and least >= lo.as_long()

    def _least(self, t: Any, depth: int) -> int | None:
        """A lower bound of `t` from the free sizes' lower bounds (None: none found)."""
        if depth > 40:
            return None
        if z3.is_int_value(t):
            return t.as_long()
        if _is_var(t):
            return self._low.get(t.decl().name())
        kids = t.children()
        if z3.is_add(t):
            parts = [self._least(k, depth + 1) for k in kids]
            return None if None in parts else sum(parts)  # type: ignore[arg-type]
        if z3.is_sub(t) and len(kids) == 2 and z3.is_int_value(kids[1]):
            a = self._least(kids[0], depth + 1)
            return None if a is None else a - kids[1].as_long()
        if z3.is_mul(t):
            parts = [self._least(k, depth + 1) for k in kids]
            if None in parts or any(p < 0 for p in parts):  # type: ignore[operator]
                return None
            out = 1
            for p in parts:
                out *= p  # type: ignore[operator]
            return out
        if z3.is_idiv(t) and len(kids) == 2 and z3.is_int_value(kids[1]):
            a, c = self._least(kids[0], depth + 1), kids[1].as_long()
            return None if a is None or c <= 0 else a // c
        if z3.is_app_of(t, z3.Z3_OP_ITE):
            a, b = self._least(kids[1], depth + 1), self._least(kids[2], depth + 1)
            return None if a is None or b is None else min(a, b)
        return None

    def _plainly_satisfiable(self, cond: Any) -> bool:
        """`x == t` (or a disjunction with one) for a free `x` nothing constrains yet."""
        if z3.is_or(cond):
            return any(self._plainly_satisfiable(c) for c in cond.children())
        if not z3.is_eq(cond):
            return False
        lhs, rhs = cond.children()
        for var, term in ((lhs, rhs), (rhs, lhs)):
            if substitution(var == term, self.free) is None or not _is_var(var):
                continue
            name = var.decl().name()
            if not self.path.untouched(name):
                continue
            if z3.is_int_value(term):
                return term.as_long() >= self._low.get(name, 0)
            return True
        return False

    def nonnegative(self, size: Sym) -> bool:
        """Whether `size >= 0` for every size this path admits."""
        if size.value is not None:
            return size.value >= 0
        cond = self.path.substitute(size.term >= 0)
        if z3.is_true(cond):
            return True
        return self._proven(cond)

    def holds_always(self, cond: Any) -> bool:
        """Whether `cond` is proven for every size this path admits (asks the solver)."""
        if cond is None or isinstance(cond, bool):
            return cond is True
        cond = self.cancel(self.path.substitute(cond))
        if z3.is_true(cond):
            return True
        return self._proven(cond)

    def holds(self, cond: Any) -> bool | None:
        """Whether `cond` holds on this path for every size (None: not known)."""
        if cond is None or isinstance(cond, bool):
            return cond
        cond = self.path.substitute(cond)
        if z3.is_true(cond):
            return True
        if z3.is_false(cond):
            return False
        return None

    def feasible(self, cond: Any) -> bool:
        """Whether some sizes this path admits make `cond` true (a branch that can run)."""
        cond = self.path.substitute(cond)
        if z3.is_false(cond):
            return False
        if z3.is_true(cond):
            return True
        return self._satisfiable(cond) != z3.unsat

    def _context(self, cond: Any, path: Path | None = None) -> tuple[Any, ...]:
        """What this path assumed, with the lower bounds of the free sizes involved."""
        path = self.path if path is None else path
        names = set(variables(cond))
        for a in path.assumed:
            names |= variables(a)
        bounds = tuple(self._vars[n] >= self._low[n] for n in sorted(names) if n in self._vars)
        return (*path.assumed, *bounds)

    def _satisfiable(self, cond: Any, path: Path | None = None) -> Any:
        """Whether `cond` can hold on this path; unknown once the file's queries are spent
        (a bounded count, so a file's verdicts never depend on the machine's speed)."""
        if self.queries_left <= 0 or _size(cond, BIG_TERM + 1) > BIG_TERM:
            return z3.unknown  # a large nonlinear term: costly and rarely decided
        if self.sat_unknowns >= SAT_UNKNOWNS:
            return z3.unknown  # the file's sizes are past what the solver decides quickly
        self.queries_left -= 1
        status = self.prover.satisfiable(cond, self._context(cond, path), SAT_RLIMIT)
        self.sat_unknowns += status == z3.unknown
        return status

    def _proven(self, cond: Any) -> bool:
        if self.queries_left <= 0:
            return False
        self.queries_left -= 1
        return self.prover.prove(cond, (), self._context(cond), quick=True).status == PROVEN

    def join_paths(self, paths: list[Path]) -> Path:
        return join_paths(paths)


def size_value(v: Any) -> Size:
    return v.sym if isinstance(v, IntV) else None


_ = UNKNOWN


def _mul(factors: list[Any]) -> Any:
    if not factors:
        return z3.IntVal(1)
    out = factors[0]
    for f in factors[1:]:
        out = out * f
    return out


def _pins(cond: Any) -> bool:
    """Whether `cond` is an equality (or a choice of them): most sizes fail it."""
    if z3.is_or(cond):
        return all(_pins(c) for c in cond.children())
    return z3.is_eq(cond)


def _is_var(t: Any) -> bool:
    return z3.is_const(t) and t.decl().kind() == z3.Z3_OP_UNINTERPRETED


def _shown(term: Any) -> str:
    """A Z3 term as the user reads it: the display names of free sizes, no `#k` suffix
    (printing is slow for a large term: such a term is shown by its size)."""
    if _size(term) > 40:
        return "?"
    return re.sub(r"#\d+", "", str(term)).replace("/", "//").replace("\n", " ")


def term_size(term: Any, limit: int = 41) -> int:
    """The number of nodes of a Z3 term, counted up to `limit`."""
    return _size(term, limit)


def _size(term: Any, limit: int = 41) -> int:
    """Counted through Z3's C API (the Python wrappers of `children()` cost the most)."""
    ctx = term.ctx_ref()
    count, todo = 0, [term.as_ast()]
    while todo and count < limit:
        a = todo.pop()
        count += 1
        if z3.Z3_get_ast_kind(ctx, a) == z3.Z3_APP_AST:
            app = z3.Z3_to_app(ctx, a)
            n = z3.Z3_get_app_num_args(ctx, app)
            todo.extend(z3.Z3_get_app_arg(ctx, app, k) for k in range(n))
    return count
