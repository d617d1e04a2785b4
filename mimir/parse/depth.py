"""How deep an expression may nest, and room on the stack to walk one that deep.

The parser, the graph builder, the checker and the code generators walk
expressions recursively, as `ast` itself does. Rather than rewrite each walk,
Mimir bounds the depth and makes room for it:

- `MAX_EXPRESSION_DEPTH` (3,000) is at least what CPython accepts: with its
  default settings, Python 3.11 compiles `1 + 1 + ...` up to about 2,990 terms
  and stops with `RecursionError` beyond. A file holding a deeper expression
  gets GPU004 at that expression (`too_deep`, an iterative walk) and nothing
  else in it is checked; other files go on.
- `on_deep_stack(work)` runs `work()` in a thread with a large stack and a
  recursion limit sized for that depth, so every walk of an accepted expression
  finishes. The limit is set only while the call runs, and only one such call
  runs at a time. Callers pass the call itself, `on_deep_stack(lambda:
  _check_source(path, text, ...))`, so the data flow reads as a plain call.
"""

from __future__ import annotations

import ast
import sys
import threading
from collections.abc import Callable
from typing import TypeVar

MAX_EXPRESSION_DEPTH = 3000
# Python frames per level of nesting, over all the walks (visitor dispatch,
# helpers): generous, since frames are cheap and running out is a crash.
_FRAMES_PER_LEVEL = 40
_RECURSION_LIMIT = MAX_EXPRESSION_DEPTH * _FRAMES_PER_LEVEL
_STACK_BYTES = (
    256 << 20
)  # address space; pages are touched as the stack grows (~32 MiB at the limit)

T = TypeVar("T")
_lock = threading.Lock()
_inside = threading.local()


def on_deep_stack(work: Callable[[], T]) -> T:
    """`work()`, run with room for `MAX_EXPRESSION_DEPTH` levels of recursion: in a thread
    of its own with a large stack, or in this one when it is already such a thread."""
    if getattr(_inside, "active", False):
        return work()
    outcome: list = []

    def run() -> None:
        _inside.active = True
        try:
            outcome.append((True, work()))
        except BaseException as err:  # noqa: BLE001 - re-raised in the caller's thread
            outcome.append((False, err))

    with _lock:
        old_limit = sys.getrecursionlimit()
        old_stack = threading.stack_size()
        try:
            threading.stack_size(_STACK_BYTES)
            worker = threading.Thread(target=run, name="mimir-deep", daemon=True)
        except (ValueError, RuntimeError):  # a platform without settable stacks
            return work()
        finally:
            threading.stack_size(old_stack)
        sys.setrecursionlimit(max(old_limit, _RECURSION_LIMIT))
        try:
            worker.start()
            worker.join()
        finally:
            sys.setrecursionlimit(old_limit)
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def too_deep(
    tree: ast.AST, limit: int = MAX_EXPRESSION_DEPTH, lines: list[str] | None = None
) -> list[ast.expr]:
    """The outermost expressions of `tree` that nest more than `limit` expressions deep.

    Depth counts nested `ast.expr` nodes: `x` is 1, `-x` is 2, `a + b + c` is 3.
    Iterative, so it works on any tree `ast.parse` returns.

    With the source `lines`, statements whose lines hold at most `limit` characters are
    not walked: every nested expression adds at least one character of its own (an
    operator, a bracket, a name), so such a statement cannot nest deeper than `limit`.
    The language server re-checks on every edit; this keeps the walk off that path.
    """
    roots: list[ast.AST] = [tree] if lines is None else _long_statements(tree, limit, lines)
    found: list[ast.expr] = []
    # (node, depth of expressions above it, outermost expression above it)
    stack: list[tuple[ast.AST, int, ast.expr | None]] = [(r, 0, None) for r in roots]
    reported: set[int] = set()
    while stack:
        node, depth, outer = stack.pop()
        if isinstance(node, ast.expr):
            depth += 1
            outer = outer or node
            if depth > limit:
                if id(outer) not in reported:
                    reported.add(id(outer))
                    found.append(outer)
                continue
        elif not isinstance(node, ast.expr_context):
            outer, depth = (None, 0) if isinstance(node, ast.stmt) else (outer, depth)
        for child in ast.iter_child_nodes(node):
            stack.append((child, depth, outer))
    found.sort(key=lambda e: (e.lineno, e.col_offset))
    return found


def _long_statements(tree: ast.AST, limit: int, lines: list[str]) -> list[ast.AST]:
    """The smallest statements of `tree` (and the non-statement parts of compound ones)
    whose lines hold more than `limit` characters: the only places a deeper nest fits."""
    widths = [0]
    for line in lines:
        widths.append(widths[-1] + len(line) + 1)

    def chars(stmt: ast.stmt) -> int:
        # a decorated definition starts at its first decorator, above `def` / `class`
        decorators = getattr(stmt, "decorator_list", [])
        first = min([stmt.lineno, *(d.lineno for d in decorators)])
        last = stmt.end_lineno or len(lines)
        return widths[min(last, len(lines))] - widths[max(first - 1, 0)]

    out: list[ast.AST] = []
    todo: list[ast.AST] = list(getattr(tree, "body", [tree]))
    while todo:
        node = todo.pop()
        if isinstance(node, ast.stmt) and chars(node) <= limit:
            continue
        children = list(ast.iter_child_nodes(node))
        if not any(isinstance(c, ast.stmt) for c in children):
            out.append(node)
            continue
        for child in children:
            if isinstance(child, ast.stmt):
                todo.append(child)
            else:  # a decorator, a test, an argument list: walked whole
                out.append(child)
    return out
