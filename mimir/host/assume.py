"""What one path through host code has assumed about sizes nobody stated.

A function is checked for every input: a tensor parameter nobody annotated gets sizes
that are free symbols, and the first demand the code makes of them (`B, T, C = x.shape`,
a `Linear(768, ...)` applied to `x`) is not an error but an assumption, kept for the rest
of the path. A later demand is an error only when it contradicts what the path assumed
for every size (it can never succeed). Assumptions are per path: a branch assumes its
own, and where paths meet only what all of them assumed survives.

`Path` is immutable: a branch copies it by reference and the interpreter keeps the one
that holds after each statement. An assumed equality `x == t` whose left side is a free
symbol is also kept as a substitution, so later demands are read with `x` replaced by
`t` (most then fold to True or False without the solver).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mimir.solve.z3lib import z3


@dataclass(frozen=True)
class Path:
    assumed: tuple[Any, ...] = ()  # z3 BoolRefs
    subst: tuple[tuple[Any, Any], ...] = ()  # (free variable, the term it equals)

    def assume(self, cond: Any, free: set[str]) -> Path:
        cond = self.substitute(cond)
        if z3.is_true(cond):
            return self
        pairs = self.subst
        if z3.is_eq(cond):
            lhs, rhs = cond.children()
            for var, term in ((lhs, rhs), (rhs, lhs)):
                if _is_free_var(var, free) and var.get_id() not in {
                    v.get_id() for v in _vars(term)
                }:
                    pairs = (*((v, z3.substitute(t, (var, term))) for v, t in pairs), (var, term))
                    break
        return Path((*self.assumed, cond), pairs)

    def substitute(self, term: Any) -> Any:
        if not self.subst:
            return term
        return z3.simplify(z3.substitute(term, *self.subst))


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
    return Path(
        tuple(t for t in first.assumed if t.get_id() in keep),
        tuple((v, t) for v, t in first.subst if (v.get_id(), t.get_id()) in subst_keys),
    )


def variables(term: Any) -> set[str]:
    return {str(v) for v in _vars(term)}


def _vars(term: Any) -> list[Any]:
    out: dict[int, Any] = {}
    todo = [term]
    while todo:
        t = todo.pop()
        if z3.is_const(t) and t.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            out[t.get_id()] = t
        else:
            todo.extend(t.children())
    return list(out.values())


def _is_free_var(t: Any, free: set[str]) -> bool:
    return z3.is_const(t) and t.decl().kind() == z3.Z3_OP_UNINTERPRETED and str(t) in free
