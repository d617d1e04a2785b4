"""`mimir explain CODE FILE[:LINE]`: re-derive a failure and show how it came about.

For each diagnostic of CODE in FILE (at LINE, if given) this prints the
diagnostic, the chain of values that fed the failing op — one line per node,
from the annotated parameters to the op, each with its source location and its
proven type — the facts the solver used (the annotations and `Dim`
declarations in the unsat core, and that a parameter axis written as an
expression such as `H - 2` is `>= 0` in any call), and the counterexample when
sizes are symbolic.
"""

from __future__ import annotations

from collections.abc import Iterator

import networkx as nx

from mimir.check import CheckedKernel, FileResult
from mimir.constraints.checker import callable_size_note
from mimir.diagnostics.diagnostic import Diagnostic, Label, format_counterexample
from mimir.diagnostics.render import text as text_render
from mimir.dims import BinOp


def explain_file(result: FileResult, code: str, line: int | None) -> tuple[str, int]:
    """The explanation text and how many diagnostics it covers."""
    found = [
        d
        for d in result.diagnostics
        if d.code == code and (line is None or d.span.line <= line <= d.span.end_line)
    ]
    blocks = [_explain(d, result) for d in found]
    return "\n\n".join(blocks), len(found)


def _explain(d: Diagnostic, result: FileResult) -> str:
    lines = [text_render.render(d).split("\n  note:")[0]]
    kernel = next((k for k in result.kernels if k.graph.name == d.function), None)
    chain = list(_chain(kernel, d)) if kernel is not None else []
    if chain:
        lines.append("derivation:")
        lines.extend(f"  {row}" for row in chain)
    facts = list(d.labels)
    if kernel is not None:
        dims = kernel.info.dims
        for name, _ in d.counterexample:
            decl = next((x for x in dims.values() if x.dim.name == name), None)
            if decl is not None:
                message = f"`{name}` is declared here ({decl.dim.describe_constraints()})"
                facts.append(Label(decl.span, message))
        # Parameter axes written as expressions are facts too: no call passes a negative size.
        shown = {name for name, _ in d.counterexample}
        for param, ann, _ in kernel.graph.params:
            for axis, (size, span) in enumerate(
                zip(getattr(ann, "dims", ()), getattr(ann, "dim_spans", ()), strict=True)
            ):
                if isinstance(size, BinOp) and {x.name for x in size.dims()} & shown:
                    facts.append(Label(span, callable_size_note(param, axis, size)))
        grid = kernel.graph.kernel.grid
        if grid is not None:
            sizes = grid.elts if hasattr(grid, "elts") else [grid]
            for axis, size in enumerate(sizes):
                text = kernel.info.source.text(size)
                facts.append(
                    Label(
                        kernel.info.source.span(size),
                        f"0 <= program_id({axis}) < {text} (the grid)",
                    )
                )
    if facts:
        lines.append("facts:")
        for label in sorted(set(facts), key=lambda lab: (lab.span.line, lab.span.column)):
            s = label.span
            lines.append(f"  {s.path}:{s.line}:{s.column}: {label.message}")
    if d.counterexample:
        text = format_counterexample(d.counterexample)
        if d.counterexample_note:
            text = f"{text} {d.counterexample_note}"
        lines.append(f"counterexample: {text}")
    return "\n".join(lines)


def _chain(kernel: CheckedKernel, d: Diagnostic) -> Iterator[str]:
    g = kernel.graph.graph
    target = next(
        (
            i
            for i in g.nodes
            if (g.nodes[i]["span"].line, g.nodes[i]["span"].column) == (d.span.line, d.span.column)
            and g.nodes[i]["kind"] != "poison"
        ),
        None,
    )
    if target is None:
        return
    ancestors = nx.ancestors(g, target) | {target}
    for i in sorted(ancestors):
        node = g.nodes[i]
        if node["kind"] in ("const", "dtype", "tuple"):
            continue
        s = node["span"]
        value = kernel.values.get(i)
        shown = _describe(value) if i != target else "fails here"
        text = node["name"] if node["kind"] == "param" else node["text"]
        origin = " (annotation)" if node["kind"] == "param" else ""
        yield f"{s.path}:{s.line}:{s.column}: `{text}` : {shown}{origin}"


def _describe(value: object) -> str:
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        return f"Tensor[{', '.join([str(dtype), *(s.text for s in shape)])}]"
    sym = getattr(value, "sym", None)
    if sym is not None:
        return f"size {sym.text}"
    kind = getattr(value, "kind", None)
    if kind is not None:
        return f"{kind} scalar"
    return "not derived (an input failed)"
