"""What a host shape rule may ask of the checker: obligations over sizes.

A rule states each requirement as `cx.need(condition, code, message)`: the
condition is a bool (decided already), a Z3 term over the size algebra (proven
for every admissible size), or None (a size is unknown: nothing is claimed).
A requirement that fails raises `RefutedError`, which the interpreter turns into one
diagnostic at the call and an unknown result, so nothing downstream cascades.
"""

from __future__ import annotations

from typing import Any, NoReturn, Protocol

from mimir.diagnostics.diagnostic import Label


class RefutedError(Exception):
    def __init__(
        self,
        code: str,
        message: str,
        counterexample: tuple[tuple[str, int], ...] = (),
        labels: tuple[Label, ...] = (),
        note: str | None = None,
        why: str | None = None,
        first: Any = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.counterexample = counterexample
        self.labels = labels
        self.note = note  # the shapes in the counterexample: "(then [4, 16, 6, 6])"
        self.why = why  # a sentence for the case: "it fails for every size the code admits"
        # (the earlier demand whose assumption alone dooms this one, the condition it
        # assumed): reported there instead (`mimir.host.symbolic`)
        self.first = first


class Ctx(Protocol):
    def need(self, cond: Any, code: str, message: str, shapes: tuple = ()) -> None:
        """`shapes`: shapes the message names, shown with the counterexample's sizes."""
        ...

    def fail(self, code: str, message: str) -> NoReturn: ...

    def warn(self, code: str, message: str) -> None:
        """A finding that does not stop the rule (a warning-severity code)."""
        ...

    def fresh(self, name: str, lo: int, hi: int | None = None) -> Any:
        """A new symbolic size `lo <= name <= hi` (a data loader's last batch)."""
        ...

    def free_size(self, text: str, lo: int = 1) -> Any:
        """A size nobody stated: its first demand is assumed, not checked."""
        ...

    def axis_size(self, t: Any, k: int, label: str = "x") -> Any:
        """The size of axis `k` of `t` (negative from the end), a free size if not known."""
        ...

    def tail_of(self, t: Any, n: int, label: str = "x") -> Any:
        """The last `n` sizes of `t`, free sizes where unknown; None if its rank is less."""
        ...

    def refine(self, t: Any, rank: int, names: tuple[str, ...] = ()) -> Any:
        """`t`, whose rank was unknown, with the rank a demand fixes."""
        ...

    def refuse_coincidence(
        self, a: Any, b: Any, code: str, message: str, one_side: bool = False
    ) -> None:
        """Raise where `a` and `b` are never equal and meet only where one is 1 by chance."""
        ...

    def holds(self, cond: Any) -> bool | None:
        """Whether `cond` holds on this path for every size (None: not known)."""
        ...

    def holds_always(self, cond: Any) -> bool:
        """Whether `cond` is proven for every size this path admits."""
        ...

    def quotient(self, a: Any, b: Any) -> Any:
        """`a // b` for a reshape that infers a size, common factors cancelled."""
        ...

    def nonnegative(self, size: Any) -> bool:
        """Whether a size is at least 0 for every size this path admits."""
        ...
