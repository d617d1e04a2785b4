"""Quick fixes where the fix is mechanical, as text edits over Mimir spans.

Each fix is offered only when the checker's own values show it would work:
`.T` on a matmul operand when the transposed operand's sizes line up (compared
as the checker printed them), `keepdims=True` on a reduction whose kept axis
makes the broadcast line up, `.to("gpu")` at a cpu argument of a kernel call
(GPU060), and `# mimir: ignore[CODE]` on the line of any diagnostic.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

from mimir.check import CheckedKernel, FileResult
from mimir.constraints.checker import TensorVal
from mimir.diagnostics.diagnostic import Diagnostic, Span
from mimir.gate.suppressions import UNUSED_SUPPRESSION

_IGNORE = re.compile(r"#\s*mimir:\s*ignore\[(?P<codes>[^\]]*)\]", re.IGNORECASE)


@dataclass(frozen=True)
class Edit:
    span: Span  # replaced range (empty for an insertion)
    text: str


@dataclass(frozen=True)
class Fix:
    title: str
    diagnostic: Diagnostic
    edits: tuple[Edit, ...]
    preferred: bool = False


def fixes(result: FileResult, lines: list[str], diagnostic: Diagnostic) -> list[Fix]:
    out: list[Fix] = []
    if diagnostic.code == "GPU011":
        out.extend(_transpose(result.kernels, diagnostic))
    elif diagnostic.code == "GPU010":
        out.extend(_keepdims(result.kernels, lines, diagnostic))
    elif diagnostic.code == "GPU060":
        out.extend(_to_gpu(lines, diagnostic))
    if diagnostic.code != UNUSED_SUPPRESSION:
        out.append(_ignore(lines, diagnostic))
    return out


def _text(lines: list[str], span: Span) -> str:
    if span.line == span.end_line:
        return lines[span.line - 1][span.column - 1 : span.end_column - 1]
    parts = [lines[span.line - 1][span.column - 1 :]]
    parts += lines[span.line : span.end_line - 1]
    parts.append(lines[span.end_line - 1][: span.end_column - 1])
    return "\n".join(parts)


def _ignore(lines: list[str], d: Diagnostic) -> Fix:
    line = d.span.line
    text = lines[line - 1] if line <= len(lines) else ""
    title = f"ignore {d.code} on this line"
    m = _IGNORE.search(text)
    if m:
        codes = [c.strip() for c in m.group("codes").split(",") if c.strip()]
        new = f"# mimir: ignore[{', '.join([*codes, d.code])}]"
        span = Span(d.span.path, line, m.start() + 1, line, m.end() + 1)
        return Fix(title, d, (Edit(span, new),))
    end = len(text) + 1
    return Fix(
        title, d, (Edit(Span(d.span.path, line, end, line, end), f"  # mimir: ignore[{d.code}]"),)
    )


def _node_at(
    kernels: list[CheckedKernel], span: Span, kind: str
) -> tuple[CheckedKernel, int] | None:
    for k in kernels:
        g = k.graph.graph
        for i in g.nodes:
            if g.nodes[i]["kind"] == kind and g.nodes[i]["span"] == span:
                return k, i
    return None


def _shape(k: CheckedKernel, i: int) -> list[str] | None:
    value = k.values.get(i)
    return [s.text for s in value.shape] if isinstance(value, TensorVal) else None


def _wrap_t(k: CheckedKernel, operand: ast.expr) -> Edit:
    span = k.info.source.span(operand)
    text = k.info.source.text(operand)
    if _is_primary(text):
        end = Span(span.path, span.end_line, span.end_column, span.end_line, span.end_column)
        return Edit(end, ".T")
    return Edit(span, f"({text}).T")


def _matmul_ast(k: CheckedKernel, span: Span) -> ast.BinOp | None:
    for node in ast.walk(k.graph.kernel.node):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            if k.info.source.span(node) == span:
                return node
    return None


def _is_primary(text: str) -> bool:
    """Whether `.attr` can follow `text` without parentheses (a name, call, subscript, ...)."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return False
    return isinstance(node, (ast.Name, ast.Attribute, ast.Call, ast.Subscript))


def _transpose(kernels: list[CheckedKernel], d: Diagnostic) -> list[Fix]:
    found = _node_at(kernels, d.span, "binop")
    if found is None:
        return []
    k, i = found
    left, right = k.graph.inputs(i)
    a, b = _shape(k, left), _shape(k, right)
    if a is None or b is None or len(a) != 2 or len(b) != 2:
        return []
    expr = _matmul_ast(k, d.span)
    if expr is None:
        return []
    out = []
    src = k.info.source
    if a[1] == b[1]:  # a @ b.T: [M, K] @ [K, N] once b is transposed
        title = f"transpose the right operand: `{src.text(expr.right)}.T`"
        out.append(Fix(title, d, (_wrap_t(k, expr.right),), preferred=True))
    if a[0] == b[0]:  # a.T @ b
        title = f"transpose the left operand: `{src.text(expr.left)}.T`"
        out.append(Fix(title, d, (_wrap_t(k, expr.left),), preferred=not out))
    return out


def _broadcasts(a: list[str], b: list[str]) -> bool:
    for x, y in zip(reversed(a), reversed(b), strict=False):
        if x != y and "1" not in (x, y):
            return False
    return True


def _keepdims(kernels: list[CheckedKernel], lines: list[str], d: Diagnostic) -> list[Fix]:
    found = _node_at(kernels, d.span, "binop")
    if found is None:
        return []
    k, i = found
    operands = k.graph.inputs(i)
    out = []
    for j in operands:
        node = k.graph.node(j)
        spec = node.get("spec")
        if node["kind"] != "method" or spec is None or spec.kind != "reduce":
            continue
        if "keepdims" in node["keywords"]:
            continue
        receiver = _shape(k, k.graph.inputs(j)[0])
        axis = _axis(k, j)
        if receiver is None or axis is None:
            continue
        axes = [a % len(receiver) for a in (axis if isinstance(axis, tuple) else (axis,))]
        kept = ["1" if n in axes else s for n, s in enumerate(receiver)]
        others = [_shape(k, o) for o in operands if o != j]
        if any(o is None or not _broadcasts(kept, o) for o in others):
            continue
        call: Span = node["span"]
        call_text = _text(lines, call)
        if not call_text.endswith(")"):
            continue
        sep = "" if call_text.rstrip(")").endswith("(") else ", "
        at = Span(call.path, call.end_line, call.end_column - 1, call.end_line, call.end_column - 1)
        out.append(
            Fix(
                f"keep the reduced axis: `keepdims=True` on `{node['text']}`",
                d,
                (Edit(at, f"{sep}keepdims=True"),),
                preferred=True,
            )
        )
    return out


def _axis(k: CheckedKernel, j: int) -> Any:
    node = k.graph.node(j)
    if "axis" not in node["keywords"]:
        return None  # a full reduction: keeping every axis is not a mechanical fix
    inputs = k.graph.inputs(j)
    slot = node["n_receiver"] + node["n_positional"] + node["keywords"].index("axis")
    value = k.values.get(inputs[slot])
    sym = getattr(value, "sym", None)
    if sym is not None and sym.value is not None:
        return sym.value
    items = getattr(value, "items", None)
    if items is not None:
        found = [getattr(getattr(v, "sym", None), "value", None) for v in items]
        if all(isinstance(v, int) for v in found):
            return tuple(found)
    return None


def _to_gpu(lines: list[str], d: Diagnostic) -> list[Fix]:
    arg = _text(lines, d.span)
    if _is_primary(arg):
        end = Span(
            d.span.path, d.span.end_line, d.span.end_column, d.span.end_line, d.span.end_column
        )
        edit = Edit(end, '.to("gpu")')
    else:
        edit = Edit(d.span, f'({arg}).to("gpu")')
    return [Fix(f'move `{arg}` to the gpu: `.to("gpu")`', d, (edit,), preferred=True)]
