"""What one path through host code has assumed about sizes nobody stated.

A function is checked for every input: a tensor parameter nobody annotated gets sizes
that are free symbols, and the first demand the code makes of them (`B, T, C = x.shape`,
a `Linear(768, ...)` applied to `x`) is not an error but an assumption, kept for the rest
of the path. A later demand is an error only when it contradicts what the path assumed
for every size (it can never succeed). Assumptions are per path: a branch assumes its
own, and where paths meet only what all of them assumed survives.

`Path` is immutable: a branch copies it by reference and the interpreter keeps the one
that holds after each statement. An assumed equality `x == t` whose left side is a free
symbol becomes a substitution instead, so later demands are read with `x` replaced by
`t` (most then fold to True or False without the solver).

The path also keeps each condition as it was assumed, in order, with what demanded it
(`Demand`): a later demand that the path refutes can then be checked again on the path
rebuilt without one of them (`replay`), to find the earlier demand it contradicts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from mimir.solve.prover import variable_names
from mimir.solve.z3lib import z3


@dataclass(frozen=True, eq=False)
class Demand:
    """What made a path assume a condition: the node whose rule demanded it (where its
    failure would be reported), its code and message, the function run it was made in, and
    whether it was made between values that function computed (not the first demand on
    one of its parameters, which defines the input it is checked for)."""

    node: Any
    code: str
    message: str
    labels: tuple[Any, ...]
    frame: int
    derived: bool


@dataclass(frozen=True)
class Path:
    assumed: tuple[Any, ...] = ()  # z3 BoolRefs, none of them a substitution
    subst: tuple[tuple[Any, Any], ...] = ()  # (free variable, the term it equals)
    touched: frozenset[str] = field(default=frozenset())  # variables these mention
    # each condition as given to `assume`, in order, with the demand that made it (if any)
    history: tuple[tuple[Any, Demand | None], ...] = ()

    def assume(
        self, cond: Any, free: set[str], demand: Demand | None = None, asked: Any = None
    ) -> Path:
        """`asked`: the condition as demanded, before it was read on this path (kept in
        the history in its place, so a rebuild reads it afresh)."""
        history = (*self.history, (cond if asked is None else asked, demand))
        cond = self.substitute(cond)
        if z3.is_true(cond):
            return Path(self.assumed, self.subst, self.touched, history)
        pair = substitution(cond, free)
        names = variables(cond)
        if pair is not None:
            var, term = pair
            key = var.decl().name()
            pairs = (
                *((v, _subst(t, var, term) if key in variables(t) else t) for v, t in self.subst),
                (var, term),
            )
            assumed = tuple(
                _subst(a, var, term) if key in variables(a) else a for a in self.assumed
            )
            return Path(assumed, pairs, self.touched | names, history)
        return Path((*self.assumed, cond), self.subst, self.touched | names, history)

    def replay(self, keep: Callable[[int], bool], free: set[str], read: Callable) -> Path:
        """The path assumed again from its history, keeping the conditions whose index
        `keep` accepts; `read(cond, path)` reads a condition on the path rebuilt so far.
        After a join the rebuild may assume less than this path: the caller checks that
        the full rebuild still decides what this path decides."""
        out = Path()
        for k, (cond, demand) in enumerate(self.history):
            if keep(k):
                out = out.assume(read(cond, out), free, demand, cond)
        return out

    def substitute(self, term: Any) -> Any:
        if not self.subst:
            return term
        names = variables(term)
        pairs = [pair for pair, key in zip(self.subst, self._keys, strict=True) if key in names]
        if not pairs:
            return term
        return z3.simplify(z3.substitute(term, *pairs))

    @cached_property
    def _keys(self) -> tuple[str, ...]:
        """The name of each substituted variable (read once per path, not per demand)."""
        return tuple(v.decl().name() for v, _ in self.subst)

    def untouched(self, name: str) -> bool:
        """Nothing this path assumed mentions `name` (besides its lower bound)."""
        return name not in self.touched


def substitution(cond: Any, free: set[str]) -> tuple[Any, Any] | None:
    """`(x, t)` when `cond` is `x == t` for a free variable `x` that `t` does not mention."""
    if not z3.is_eq(cond):
        return None
    lhs, rhs = cond.children()
    for var, term in ((lhs, rhs), (rhs, lhs)):
        if _is_free_var(var, free) and var.decl().name() not in variables(term):
            return var, term
    return None


def join_paths(paths: list[Path]) -> Path:
    """What every path assumed (assumptions each path made from the same start)."""
    if not paths:
        return Path()
    if len(paths) == 1 or all(p is paths[0] for p in paths[1:]):
        return paths[0]
    first = paths[0]
    keep = {t.get_id() for t in first.assumed}
    for p in paths[1:]:
        keep &= {t.get_id() for t in p.assumed}
    subst_keys = {(v.get_id(), t.get_id()) for v, t in first.subst}
    for p in paths[1:]:
        subst_keys &= {(v.get_id(), t.get_id()) for v, t in p.subst}
    touched = first.touched
    for p in paths[1:]:
        touched = touched | p.touched  # conservative: a variable any path constrained
    # a condition every path assumed, with the first path's demand (each path may have
    # made it at a line of its own); a rebuild from it may assume less than the join does
    common = {c.get_id() for c, _ in first.history}
    for p in paths[1:]:
        common &= {c.get_id() for c, _ in p.history}
    history = tuple(h for h in first.history if h[0].get_id() in common)
    return Path(
        tuple(t for t in first.assumed if t.get_id() in keep),
        tuple((v, t) for v, t in first.subst if (v.get_id(), t.get_id()) in subst_keys),
        touched,
        history,
    )


def variables(term: Any) -> frozenset[str]:
    """The names of the free sizes `term` mentions (found once per term)."""
    return variable_names(term)


def _subst(term: Any, var: Any, value: Any) -> Any:
    return z3.simplify(z3.substitute(term, (var, value)))


def _vars(term: Any) -> list[Any]:
    out: dict[int, Any] = {}
    todo = [term]
    seen: set[int] = set()
    while todo:
        t = todo.pop()
        if t.get_id() in seen:
            continue
        seen.add(t.get_id())
        if z3.is_const(t) and t.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            out[t.get_id()] = t
        else:
            todo.extend(t.children())
    return list(out.values())


def _is_free_var(t: Any, free: set[str]) -> bool:
    return z3.is_const(t) and t.decl().kind() == z3.Z3_OP_UNINTERPRETED and t.decl().name() in free
