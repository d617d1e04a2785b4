"""The state of the running `@gpu` call, and the error every rule raises."""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

from mimir.dims import DimExpr, SizeInt, UnboundDimError, evaluate, set_binding_hook
from mimir.ops import shapes as sh

DEVICES = ("cpu", "gpu")

# The dim bindings of the @gpu call being executed (None outside kernels).
BINDINGS: contextvars.ContextVar[dict[str, int] | None] = contextvars.ContextVar(
    "mimir_bindings", default=None
)


class GridRun:
    """The state of one index-level launch: the current program id and who touched what."""

    def __init__(self) -> None:
        self.pids: tuple[int, ...] = ()
        self.writes: dict[tuple[int, int], tuple[int, ...]] = {}
        self.reads: dict[tuple[int, int], set[tuple[int, ...]]] = {}
        self.atomics: dict[tuple[int, int], set[tuple[int, ...]]] = {}
        # the buffers a program read an element of that it had not written itself before
        self.unwritten_reads: set[int] = set()

    def check_atomics(self, slot: tuple[int, int], what: str) -> None:
        """A plain read or write of an element another program id adds to atomically."""
        others = self.atomics.get(slot, set()) - {self.pids}
        if others:
            raise MimirError(
                "GPU028",
                f"write race: program ids {sorted(others)[0]} and {self.pids} "
                f"`atomic_add` and {what} the same element",
            )


# The matmul precision of the @gpu call being executed (`@gpu(precision=...)`): "float32"
# (exact products, one rounding) or "tf32" (float32 operands of `@` and of an einsum that
# lowers to `@` rounded to TF32 first, as a tensor core reads them).
PRECISIONS = ("float32", "tf32")
PRECISION: contextvars.ContextVar[str] = contextvars.ContextVar(
    "mimir_precision", default="float32"
)


# The index-level launch being executed (None outside `@gpu(grid=...)` kernels).
GRID: contextvars.ContextVar[GridRun | None] = contextvars.ContextVar("mimir_grid", default=None)


class MimirError(Exception):
    """A kernel-language rule failed at run time; `code` is the checker's code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"[{code}] {message}")
        self.code = code
        self.message = message


# Users import and catch it as `mimir.array.MimirError`, and a traceback names it so.
MimirError.__module__ = "mimir.array"


def in_kernel() -> bool:
    return BINDINGS.get() is not None


def resolve(size: Any) -> Any:
    """A Dim or dim expression as its value in the running kernel (a `SizeInt`)."""
    if isinstance(size, DimExpr):
        env = BINDINGS.get()
        try:
            return SizeInt(evaluate(size, env or {}))
        except UnboundDimError as err:
            raise MimirError(
                "GPU035", f"dim `{err.name}` is not fixed by any parameter of the kernel"
            ) from None
        except ZeroDivisionError:
            raise MimirError("GPU036", f"the size `{size}` divides by zero") from None
    return size


def static_int(value: Any, what: str) -> int:
    """An int that decides a shape (an axis, a size): the checker's GPU036 when it is not one."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise MimirError("GPU036", f"{what} must be an int, got {type(value).__name__}")
    return value


def rule(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except sh.RuleError as err:
        raise MimirError(err.code, err.message) from None


class RuntimeInt(int):
    """An `int` parameter's value in a running tensor-level kernel: a number known only at
    the call, so it can scale and shift tensors but never size one (the checker's GPU026)."""

    __slots__ = ()


# `range(N)` and `i < N` inside a running kernel read the dims bound by its call.
set_binding_hook(BINDINGS.get)
