"""Questions an editor asks about one checked file, answered from the checker's results.

Nothing here proves anything: every type shown is a value the checker derived
(`CheckedKernel.values`, keyed by graph node, each node with its span) and every
declaration is one `read_module` found. Positions are Mimir's: 1-based line,
1-based code-point column.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mimir.check import CheckedKernel, FileResult
from mimir.constraints.checker import SizeVal, TensorVal
from mimir.diagnostics.codes import REGISTRY
from mimir.diagnostics.diagnostic import Span
from mimir.dims import Dim
from mimir.parse.module import ModuleInfo, dims_in
from mimir.parse.spans import read_source, split_lines

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CODE = re.compile(r"GPU\d{3}")
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


@dataclass(frozen=True)
class Symbol:
    name: str
    kind: str  # "kernel" | "function" | "dim" | "constant"
    span: Span  # the whole declaration
    name_span: Span  # the name being declared
    detail: str


def contains(span: Span, line: int, col: int) -> bool:
    start = (span.line, span.column)
    end = (span.end_line, span.end_column)
    return start <= (line, col) <= end


def _size(span: Span) -> tuple[int, int]:
    return (span.end_line - span.line, span.end_column - span.column)


def word_at(lines: list[str], line: int, col: int, pattern: re.Pattern[str] = _WORD) -> str | None:
    found = _match_at(lines, line, col, pattern)
    return found.group() if found else None


def _match_at(lines: list[str], line: int, col: int, pattern: re.Pattern[str]) -> Any:
    text = lines[line - 1] if 1 <= line <= len(lines) else ""
    for m in pattern.finditer(text):
        if m.start() + 1 <= col <= m.end() + 1:
            return m
    return None


def _word_span(path: str, lines: list[str], line: int, col: int, pattern: re.Pattern[str]) -> Span:
    m = _match_at(lines, line, col, pattern)
    return Span(path, line, m.start() + 1, line, m.end() + 1)


# ---------------------------------------------------------------- types of values


def describe(value: Any) -> str | None:
    """A derived value as a kernel type: `Tensor[float32, N, 128]`, `int (= N)`."""
    if isinstance(value, TensorVal):
        return f"Tensor[{', '.join([str(value.dtype), *(s.text for s in value.shape)])}]"
    if isinstance(value, SizeVal):
        return f"int (= {value.sym.text})"
    return None


def _dims_of(value: Any) -> list[Dim]:
    syms = value.shape if isinstance(value, TensorVal) else [value.sym]
    found: dict[str, Dim] = {}
    for s in syms:
        if s.expr is not None:
            for d in dims_in(s.expr) if not isinstance(s.expr, Dim) else [s.expr]:
                found.setdefault(d.name, d)
    return list(found.values())


def value_at(kernels: list[CheckedKernel], line: int, col: int) -> tuple[Span, Any] | None:
    """The smallest expression (or name) at the position whose value the checker derived."""
    best: tuple[Span, Any] | None = None
    for k in kernels:
        if not contains(k.graph.kernel.span, line, col):
            continue
        g = k.graph.graph
        candidates = [(g.nodes[i]["span"], i) for i in g.nodes]
        candidates += list(k.graph.names)
        for span, i in candidates:
            value = k.values.get(i)
            if span.path != k.graph.kernel.span.path:  # inlined from another module
                continue
            if describe(value) is None or not contains(span, line, col):
                continue
            if best is None or _size(span) <= _size(best[0]):
                best = (span, value)
    return best


def hover(result: FileResult, lines: list[str], line: int, col: int) -> tuple[str, Span] | None:
    """Markdown for the hover at a position, and the range it covers."""
    code = word_at(lines, line, col, _CODE)
    if code is not None and code in REGISTRY:
        entry = REGISTRY[code]
        text = f"**{entry.code}** ({entry.name}): {entry.summary}\n\nwhy: {entry.why}\n\n"
        text += f"fix: {entry.fix}"
        if entry.bad:
            text += f"\n\nbad:\n```python\n{entry.bad}```"
        if entry.good:
            text += f"\n\ngood:\n```python\n{entry.good}```"
        return text, _word_span(result.path, lines, line, col, _CODE)
    info = result.info
    word = word_at(lines, line, col)
    dotted = word_at(lines, line, col, _DOTTED)  # `d.N` after `import pkg.dims as d`
    if info is not None and dotted is not None and dotted in info.dims:
        word = dotted
    if info is not None and word is not None and word in info.dims:
        decl = info.dims[word]
        source = _line_text(info, decl.span)
        text = f"```python\n{source}\n```\n`{decl.dim.name}`: {decl.dim.describe_constraints()}"
        text += f" (declared at line {decl.span.line})"
        return text, _word_span(result.path, lines, line, col, _WORD)
    kernel = _hover_kernel(result, lines, line, col)
    if kernel is not None:
        return kernel
    found = value_at(result.kernels, line, col)
    failure = _hover_failure(result, lines, line, col)
    if failure is not None and (found is None or _size(found[0]) >= _size(failure[1])):
        return failure
    if found is None:
        return _hover_host(result, lines, line, col) or _hover_in_callee(result, line, col)
    span, value = found
    text = f"```python\n{describe(value)}\n```\non `gpu`"
    dims = _dims_of(value)
    if dims:
        text += "\n\n" + "\n".join(f"- `{d.name}`: {d.describe_constraints()}" for d in dims)
    return text, span


def _spelling(lines: list[str], span: Span) -> str | None:
    if span.line != span.end_line or not 0 < span.line <= len(lines):
        return None
    return lines[span.line - 1][span.column - 1 : span.end_column - 1] or None


def _hover_failure(
    result: FileResult, lines: list[str], line: int, col: int
) -> tuple[str, Span] | None:
    """On an expression the checker refused: the diagnostic, and the type of each operand
    it was given (what to compare to see why it failed)."""
    failing = [
        d
        for d in result.diagnostics
        if d.span.path == result.path and d.severity == "error" and contains(d.span, line, col)
    ]
    if not failing:
        return None
    d = min(failing, key=lambda d: _size(d.span))
    text = f"**{d.code}**: {d.message}"
    operands: list[str] = []
    for k in result.kernels:
        if d.function is not None and k.graph.name != d.function:
            continue
        g = k.graph.graph
        at = [i for i in g.nodes if g.nodes[i]["span"] == d.span]
        if not at:
            around = [i for i in g.nodes if contains(g.nodes[i]["span"], line, col)]
            at = sorted(around, key=lambda i: _size(g.nodes[i]["span"]))[:1]
        span = g.nodes[at[0]]["span"] if at else d.span
        # each operand as the expression spells it (`h`, not the `x @ w1` that made `h`)
        spelled = {
            j: s
            for s, j in k.graph.names
            if contains(span, s.line, s.column) and contains(span, s.end_line, s.end_column)
        }
        for i in at[:1]:
            for j in g.nodes[i].get("inputs", []):
                shown = describe(k.values.get(j))
                if shown is None:
                    continue
                name = _spelling(lines, spelled[j]) if j in spelled else None
                name = name or g.nodes[j].get("name") or g.nodes[j]["text"]
                operands.append(f"- `{name}`: `{shown}`")
        if operands:
            break
    if operands:
        text += "\n\noperands:\n" + "\n".join(operands)
    text += f"\n\nwhy: {d.why}"
    return text, d.span


def _hover_kernel(
    result: FileResult, lines: list[str], line: int, col: int
) -> tuple[str, Span] | None:
    """On a kernel's name (its `def` or a call): its signature and what the check found."""
    m = _match_at(lines, line, col, _WORD)
    if m is None:
        return None
    kernel = next((k for k in result.kernels if k.graph.name == m.group()), None)
    if kernel is None:
        return None
    node = kernel.graph.kernel.node
    grid = kernel.graph.kernel.grid
    decorator = "@gpu" if grid is None else "@gpu(grid=...)"
    returns = f" -> {ast.unparse(node.returns)}" if node.returns is not None else ""
    signature = f"{decorator}\ndef {node.name}({ast.unparse(node.args)}){returns}"
    errors = [d for d in result.diagnostics if d.function == node.name and d.severity == "error"]
    if errors:
        status = f"{len(errors)} error{'s' * (len(errors) != 1)}: " + "; ".join(
            f"{d.code} at line {d.span.line}" for d in errors[:3]
        )
    else:
        status = "proven: every shape, dtype and bound holds for every admissible size"
    text = f"```python\n{signature}\n```\n{status}"
    return text, Span(result.path, line, m.start() + 1, line, m.end() + 1)


def _hover_host(
    result: FileResult, lines: list[str], line: int, col: int
) -> tuple[str, Span] | None:
    """A name host code binds to a tensor (torch, NumPy, mimir): its inferred shape."""
    m = _match_at(lines, line, col, _WORD)
    if m is None or (line, m.start() + 1) not in result.host_shapes:
        return None
    shape = result.host_shapes[(line, m.start() + 1)]
    if shape.startswith("unknown: "):  # nothing downstream of it is checked: say why
        text = (
            f"```python\n{m.group()}: ?\n```\nshape unknown ({shape[9:]}): "
            "nothing computed from it is checked"
        )
        return text, Span(result.path, line, m.start() + 1, line, m.end() + 1)
    text = f"```python\n{m.group()}: {shape}\n```\nshape inferred from host code"
    return text, Span(result.path, line, m.start() + 1, line, m.end() + 1)


def _hover_in_callee(result: FileResult, line: int, col: int) -> tuple[str, Span] | None:
    """In a function kernels call (and inline), the type at each call, per kernel."""
    shown: list[str] = []
    best_span: Span | None = None
    for k in result.kernels:
        g = k.graph.graph
        best: tuple[Span, Any] | None = None
        candidates = [(g.nodes[i]["span"], i) for i in g.nodes if "call" in g.nodes[i]]
        candidates += [(span, i) for span, i in k.graph.names if "call" in g.nodes[i]]
        for span, i in candidates:
            value = k.values.get(i)
            if span.path != result.path or describe(value) is None:
                continue
            if contains(span, line, col) and (best is None or _size(span) <= _size(best[0])):
                best = (span, value)
        if best is not None:
            shown.append(f"- `{describe(best[1])}` in the call from `{k.graph.name}`")
            best_span = best[0]
    if not shown or best_span is None:
        return None
    return "inlined into each kernel that calls it:\n\n" + "\n".join(shown), best_span


# ---------------------------------------------------------------- inlay hints


def inlay_hints(result: FileResult) -> list[tuple[int, int, str]]:
    """(line, column, label) after each assignment in a kernel: the shape it binds."""
    out = []
    for k in result.kernels:
        names = {span: i for span, i in k.graph.names}  # the last binding of a span wins
        for stmt in k.graph.kernel.node.body:
            targets: list[ast.expr] = []
            if isinstance(stmt, ast.Assign):
                targets = stmt.targets
            elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
                targets = [stmt.target]
            labels = []
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        i = names.get(k.info.source.span(name))
                        value = k.values.get(i) if i is not None else None
                        if isinstance(value, TensorVal):
                            labels.append("[" + ", ".join(s.text for s in value.shape) + "]")
            if labels:
                end = k.info.source.span(stmt)
                out.append((end.end_line, end.end_column, " ▸ " + ", ".join(labels)))
    return out


# ---------------------------------------------------------------- symbols and definitions


def symbols(info: ModuleInfo) -> list[Symbol]:
    """The module's Dims, int constants, kernels and other functions, in source order."""
    src = info.source
    out: list[Symbol] = []
    kernels = {k.node.name: k for k in info.kernels}
    for stmt in info.tree.body:
        if isinstance(stmt, ast.FunctionDef):
            name_span = _name_span(info, stmt.lineno, stmt.name)
            args = ", ".join(a.arg for a in stmt.args.args)
            kind, detail = (
                ("kernel", f"@gpu ({args})") if stmt.name in kernels else ("function", f"({args})")
            )
            out.append(Symbol(stmt.name, kind, src.span(stmt), name_span, detail))
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                if not isinstance(target, ast.Name):
                    continue
                if target.id in info.dims:
                    dim = info.dims[target.id].dim
                    detail = f"Dim({dim.describe_constraints()})"
                    out.append(Symbol(target.id, "dim", src.span(stmt), src.span(target), detail))
                elif target.id in info.constants:
                    detail = f"= {info.constants[target.id]}"
                    out.append(
                        Symbol(target.id, "constant", src.span(stmt), src.span(target), detail)
                    )
    return out


def _name_span(info: ModuleInfo, line: int, name: str) -> Span:
    text = info.source.lines[line - 1] if line <= len(info.source.lines) else ""
    m = re.search(rf"\bdef\s+({re.escape(name)})\b", text)
    col = m.start(1) + 1 if m else 1
    return Span(info.source.path, line, col, line, col + len(name))


def definition(result: FileResult, lines: list[str], line: int, col: int) -> Span | None:
    """Where the Dim, constant or kernel named at the position is declared."""
    info = result.info
    word = word_at(lines, line, col)
    if info is None or word is None:
        return None
    for sym in symbols(info):
        if sym.name == word:
            return sym.name_span
    dotted = word_at(lines, line, col, _DOTTED)  # `d.N` after `import pkg.dims as d`
    if dotted is not None and dotted in info.origins:
        return info.origins[dotted]
    return info.origins.get(word)  # imported from another module of the project


def _line_text(info: ModuleInfo, span: Span) -> str:
    """The first line of `span`, which may lie in another module of the project."""
    if span.path == info.source.path:
        lines = info.source.lines
    else:
        text, _ = read_source(Path(span.path))  # decoded and split as `mimir check` does
        lines = split_lines(text or "")
    return lines[span.line - 1].strip() if 0 < span.line <= len(lines) else ""
