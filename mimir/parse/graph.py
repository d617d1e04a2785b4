"""A `@gpu` body as a dataflow graph (networkx `DiGraph`).

Each expression becomes a node carrying its kind, its source span and text,
and its ordered inputs (also kept as edges with a `pos` attribute, so graph
algorithms see the dataflow). Node ids are assigned in source order, which is a
topological order. The builder resolves names and op spellings against the op
table; it decides nothing about shapes or dtypes (that is `mimir.constraints`).

Node kinds:
  param, const, dim, dtype, binop(symbol), unop(symbol), method(spec),
  call(spec), attribute(spec), subscript(items), tuple, return, poison,
  writeback(names): the values the `InOut` parameters hold when the kernel returns
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from mimir import ops
from mimir.diagnostics.diagnostic import Label, Span
from mimir.dtypes import BY_NAME as DTYPES
from mimir.parse import subset
from mimir.parse.module import (
    MATH_CONSTANTS,
    Annotation,
    KernelDef,
    ModuleInfo,
    Problem,
    TensorAnnotation,
    TupleAnnotation,
    int_literal,
    named_result_fields,
    read_annotation,
    read_return_annotation,
)

# The most iterations a tensor-level `for` loop is unrolled to.
UNROLL_MAX = 64

BINARY_SYMBOLS: dict[type, str] = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
    ast.Mod: "%", ast.Pow: "**", ast.MatMult: "@", ast.BitAnd: "&", ast.BitOr: "|",
    ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>",
    ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
}  # fmt: skip
UNARY_SYMBOLS: dict[type, str] = {ast.USub: "-", ast.Invert: "~", ast.UAdd: "+"}
_BUILTINS = frozenset(dir(builtins))


def is_gelu(node: ast.Call) -> bool:
    return isinstance(node.func, ast.Attribute) and node.func.attr == "gelu"


def gelu_call(node: ast.Call) -> ops.OpSpec | None:
    """The op a `.gelu(...)` call means (`approximate`, positional or keyword, a literal
    "none" or "tanh"; none given is "tanh"), or None for any other argument (GPU036)."""
    given = [*node.args, *(kw.value for kw in node.keywords if kw.arg == "approximate")]
    if len(given) > 1 or any(kw.arg != "approximate" for kw in node.keywords):
        return None
    if not given:
        return ops.BY_NAME["gelu"]
    literal = given[0].value if isinstance(given[0], ast.Constant) else None
    return ops.gelu_variant(literal)


@dataclass
class KernelGraph:
    name: str
    kernel: KernelDef
    graph: nx.DiGraph
    params: list[tuple[str, Annotation, Span]] = field(default_factory=list)
    returns: Annotation | TupleAnnotation | None = None
    problems: list[Problem] = field(default_factory=list)
    # Every use or binding of a local name that adds no node of its own: (span, node id),
    # so a front door (the language server's hover) can ask what value a name holds there.
    names: list[tuple[Span, int]] = field(default_factory=list)
    # For each problem, the call it was found under when inside an inlined function.
    problem_calls: list[Label | None] = field(default_factory=list)

    def node(self, i: int) -> dict[str, Any]:
        return self.graph.nodes[i]

    def inputs(self, i: int) -> list[int]:
        return self.graph.nodes[i]["inputs"]


class _Builder:
    def __init__(self, info: ModuleInfo, kernel: KernelDef) -> None:
        self.info = info
        self.src = info.source
        self.fn = kernel.node
        self.out = KernelGraph(kernel.node.name, kernel, nx.DiGraph())
        self.env: dict[str, int] = {}
        # Inlining a called function: the functions being inlined (recursion guard) and
        # the outermost call in this kernel, which every node of the callee's body names.
        self._inlining: list[str] = []
        self._call: Label | None = None
        self._binds: list[int] = []  # the binding checks of the calls being inlined

    # -- node creation

    def add(self, kind: str, node: ast.AST | None, inputs: list[int] = (), **attrs: Any) -> int:
        g = self.out.graph
        i = g.number_of_nodes()
        span = self.src.span(node) if node is not None else self.out.kernel.span
        text = self.src.text(node) if node is not None else ""
        if self._call is not None:
            attrs["call"] = self._call
        if self._binds and kind != "bind":
            attrs["binds"] = tuple(self._binds)
        g.add_node(i, kind=kind, span=span, text=text, inputs=list(inputs), **attrs)
        for pos, j in enumerate(inputs):
            g.add_edge(j, i, pos=pos)
        return i

    def problem(self, code: str, message: str, node: ast.AST) -> int:
        self.out.problems.append(Problem(code, message, self.src.span(node)))
        self.out.problem_calls.append(self._call)
        return self.add("poison", node)

    # -- the function

    def build(self) -> KernelGraph:
        self._parameters()
        if self.out.kernel.grid is not None:
            # Index-level bodies have control flow; `mimir.constraints.index_kernels`
            # executes them symbolically instead of as a dataflow graph.
            return self.out
        returned = False
        for stmt in self.fn.body:
            found = list(subset.statement_violations(stmt, self.fn.name))
            if found:
                for v in found:
                    self.problem(v.code, v.message, v.node)
                self._poison_targets(stmt)
                # A refused `return` (or `raise`, or one inside a refused `if`/`try`) still
                # leaves the kernel: "never returns" would be a cascade.
                returned = returned or _leaves(stmt)
                continue
            if returned and not subset._is_docstring(stmt):
                self.problem("GPU031", "unreachable code after `return`", stmt)
                break
            returned = self._statement(stmt) or returned
        if not returned and self.out.returns is not None:
            self.problem(
                "GPU015", "the kernel has a return annotation but never returns a value", self.fn
            )
        if not returned:
            self._writeback(self.fn)
        return self.out

    def _inout(self) -> list[str]:
        return [
            name
            for name, ann, _ in self.out.params
            if isinstance(ann, TensorAnnotation) and ann.inout
        ]

    def _writeback(self, node: ast.AST) -> None:
        """The value each `InOut` parameter's name holds as the kernel returns: what is
        written back into the caller's tensor (a parameter never rebound writes nothing)."""
        names = [n for n in self._inout() if n in self.env]
        if names:
            self.add("writeback", node, [self.env[n] for n in names], names=names)

    def _parameters(self) -> None:
        args = self.fn.args
        if args.vararg or args.kwarg or args.posonlyargs:
            self.problem("GPU033", "kernels take plain named parameters only", self.fn)
            # Their names exist (poisoned), so uses are not also "undefined" (GPU032).
            for arg in [*args.posonlyargs, args.vararg, args.kwarg]:
                if arg is not None:
                    self.env[arg.arg] = self.add("poison", arg)
        for arg in [*args.args, *args.kwonlyargs]:
            ann = read_annotation(self.info, arg.annotation)
            span = self.src.span(arg)
            if isinstance(ann, Problem):
                if arg.annotation is None:
                    self.problem(
                        "GPU033",
                        f"parameter `{arg.arg}` has no annotation; annotate it as "
                        "`Tensor[dtype, sizes...]`, `int` or `float`",
                        arg,
                    )
                elif not ann.reported:
                    self.out.problems.append(ann)
                self.env[arg.arg] = self.add("poison", arg)
                continue
            self.out.params.append((arg.arg, ann, span))
            self.env[arg.arg] = self.add("param", arg, name=arg.arg, annotation=ann)
        returns_none = isinstance(self.fn.returns, ast.Constant) and self.fn.returns.value is None
        if self.fn.returns is not None and not returns_none:
            ann = read_return_annotation(self.info, self.fn.returns)
            if isinstance(ann, Problem):
                if not ann.reported:
                    self.out.problems.append(ann)
            elif (
                isinstance(ann, TupleAnnotation)
                and ann.names
                and any(n in self.env for n in ann.names)
            ):
                clash = next(n for n in ann.names if n in self.env)
                self.problem(
                    "GPU033",
                    f"result `{clash}` has the name of a parameter; the manifest names every "
                    "buffer by one of them, so rename the field",
                    self.fn.returns,
                )
            else:
                self.out.returns = ann

    def _poison_targets(self, stmt: ast.stmt) -> None:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self.env[node.id] = self.add("poison", node)

    # -- statements

    def _statement(self, stmt: ast.stmt) -> bool:
        """Build one statement; True when it is the `return`."""
        if isinstance(stmt, ast.Return):
            value = self.expr(stmt.value) if stmt.value is not None else None
            self._writeback(stmt)
            if value is None:
                if not self._inout() or self.out.returns is not None:
                    self.problem("GPU015", "a kernel must return a tensor", stmt)
            else:
                self.add("return", stmt.value, [value])
            return True
        if isinstance(stmt, ast.Assign):
            value = self.expr(stmt.value)
            for target in stmt.targets:
                self._assign(target, value, stmt.value)
        elif isinstance(stmt, ast.AnnAssign):
            if stmt.value is None:
                return False
            self._assign(stmt.target, self.expr(stmt.value), stmt.value)
        elif isinstance(stmt, ast.AugAssign):
            if not isinstance(stmt.target, ast.Name):
                self.problem("GPU031", "augmented assignment to a subscript or attribute", stmt)
                return False
            current = self.name(stmt.target)
            if self._plain_parameter(current):
                self.problem(
                    "GPU029",
                    f"`{stmt.target.id}` is a parameter not annotated `InOut[...]`: "
                    f"`{self.src.text(stmt)}` cannot update the caller's tensor",
                    stmt,
                )
                self.env[stmt.target.id] = self.add("poison", stmt.target)
                return False
            value = self.expr(stmt.value)
            symbol = BINARY_SYMBOLS[type(stmt.op)]
            self.env[stmt.target.id] = self._binop(symbol, stmt, current, value)
            self.out.names.append((self.src.span(stmt.target), self.env[stmt.target.id]))
        elif isinstance(stmt, ast.For):
            self._for(stmt)
        elif isinstance(stmt, (ast.Pass, ast.Expr)):
            pass  # docstrings and `pass`; other expression statements are refused by `subset`
        else:  # pragma: no cover - `subset` refuses every other statement
            self.problem("GPU031", f"`{type(stmt).__name__}` is not allowed inside `@gpu`", stmt)
        return False

    def _for(self, stmt: ast.For) -> None:
        """`for i in range(...)` in a tensor-level kernel, unrolled: the body is built once
        per iteration with `i` the iteration's int, so each iteration's shapes are checked
        as themselves (`h = h[1:]` may shrink `h`). The trip count must be static (int
        literals and module constants), and at most `UNROLL_MAX`."""
        it = stmt.iter
        assert isinstance(it, ast.Call) and isinstance(stmt.target, ast.Name)  # `subset`
        bounds = [self._static_int(a) for a in it.args]
        if any(b is None for b in bounds):
            self.problem(
                "GPU031",
                "a `for` loop in a tensor-level kernel is unrolled, so its trip count must be "
                "static: `range(...)` of int literals or module constants (a `Dim` count is "
                "not unrolled; loop over it in an index-level kernel, `@gpu(grid=...)`)",
                it,
            )
            self._poison_targets(stmt)
            return
        if bounds[2:] == [0]:
            self.problem("GPU036", "`range()` step must not be zero", it)
            self._poison_targets(stmt)
            return
        steps = range(*bounds)  # type: ignore[arg-type]
        if len(steps) > UNROLL_MAX:
            self.problem(
                "GPU031",
                f"a `for` loop in a tensor-level kernel is unrolled, and this one runs "
                f"{len(steps)} times (at most {UNROLL_MAX}); write the repeated step with "
                "a reduction or in an index-level kernel",
                it,
            )
            self._poison_targets(stmt)
            return
        for i in steps:
            self.env[stmt.target.id] = self.add("const", stmt.target, value=i)
            self.out.names.append((self.src.span(stmt.target), self.env[stmt.target.id]))
            for s in stmt.body:
                if _leaves(s):
                    self.problem(
                        "GPU031",
                        "`return` inside a `for` loop of a tensor-level kernel; assign in the "
                        "loop and return after it",
                        s,
                    )
                    self._poison_targets(stmt)
                    return
                self._statement(s)

    def _static_int(self, node: ast.expr) -> int | None:
        """An int literal, a module-level int constant or an outer unrolled loop's
        variable, else None."""
        value = int_literal(node)
        if value is None and isinstance(node, ast.Name) and node.id in self.env:
            bound = self.out.graph.nodes[self.env[node.id]]  # an outer loop's variable
            if bound["kind"] == "const" and type(bound.get("value")) is int:
                return bound["value"]
        if value is None and isinstance(node, ast.Name) and node.id not in self.env:
            const = self.info.constants.get(node.id)
            value = const if type(const) is int else None
        return value

    def _assign(self, target: ast.expr, value: int, value_node: ast.expr) -> None:
        if isinstance(target, ast.Name):
            self.env[target.id] = value
            self.out.names.append((self.src.span(target), value))
        elif isinstance(target, ast.Tuple) and all(isinstance(t, ast.Name) for t in target.elts):
            for k, t in enumerate(target.elts):
                self.env[t.id] = self.add("item", t, [value], index=k, count=len(target.elts))
        elif (
            isinstance(target, ast.Subscript)
            and isinstance(target.value, ast.Name)
            and target.value.id in self.env
            and self.out.graph.nodes[self.env[target.value.id]]["kind"] == "param"
        ):
            name = target.value.id
            if self._plain_parameter(self.env[name]):
                self.problem(
                    "GPU029",
                    f"`{name}` is a parameter not annotated `InOut[...]`: a kernel cannot "
                    "write into it",
                    target,
                )
            else:
                self.problem(
                    "GPU031",
                    f"a tensor-level kernel updates `{name}` by assigning the name "
                    f"(`{name} = ...`, `{name} -= ...`), not a subscript of it",
                    target,
                )
        else:
            self.problem(
                "GPU031",
                "assignment to a subscript or attribute is not allowed in a tensor-level kernel",
                target,
            )

    def _plain_parameter(self, node: int) -> bool:
        """Whether `node` is a tensor parameter that is not `InOut` (its caller's tensor is
        read-only to the kernel)."""
        attrs = self.out.graph.nodes[node]
        ann = attrs.get("annotation")
        return attrs["kind"] == "param" and isinstance(ann, TensorAnnotation) and not ann.inout

    # -- expressions

    def expr(self, node: ast.expr) -> int:
        method = getattr(self, "_" + type(node).__name__, None)
        if method is None:  # pragma: no cover - `subset` refuses every other expression
            return self.problem(
                "GPU031", f"`{self.src.text(node)}` is not allowed inside `@gpu`", node
            )
        return method(node)

    def _Constant(self, node: ast.Constant) -> int:  # noqa: N802
        return self.add("const", node, value=node.value)

    def _Name(self, node: ast.Name) -> int:  # noqa: N802
        return self.name(node)

    def name(self, node: ast.Name) -> int:
        ident = node.id
        if ident in self.env:
            self.out.names.append((self.src.span(node), self.env[ident]))
            return self.env[ident]
        if ident in self.info.dims:
            return self.add("dim", node, dim=self.info.dims[ident].dim)
        if ident in self.info.bad_dims:  # its declaration was reported (GPU034)
            return self.add("poison", node)
        if ident in self.info.constants:
            return self.add("const", node, value=self.info.constants[ident])
        if ident in self.info.floats:  # `GELU_SCALING_FACTOR = 0.797...` at module level
            return self.add("const", node, value=self.info.floats[ident])
        if ident in self.info.sizes:  # `D_HID = 4 * D_IN` at module level
            return self.add("dim", node, dim=self.info.sizes[ident])
        canonical = self.info.imported.get(ident)
        if canonical in DTYPES:
            return self.add("dtype", node, dtype=DTYPES[canonical])
        if canonical in MATH_CONSTANTS:  # `from math import pi`
            return self.add("const", node, value=MATH_CONSTANTS[canonical])
        if canonical is None and ident in self.info.module_names:
            return self.problem(
                "GPU030",
                f"`{ident}` cannot be used as a value inside `@gpu`: a module-level value a "
                "kernel reads is a `Dim`, an int, or a float constant folded from literals, "
                "`math` constants and functions and `+ - * / **`",
                node,
            )
        if canonical is not None:
            return self.problem(
                "GPU030", f"`{ident}` cannot be used as a value inside `@gpu`", node
            )
        if ident in ("True", "False", "None"):  # pragma: no cover - these are Constants
            return self.add("const", node, value={"True": True, "False": False}.get(ident))
        if ident in _BUILTINS:
            return self.problem("GPU030", f"the Python builtin `{ident}` is not a kernel op", node)
        return self.problem("GPU032", f"undefined name `{ident}`", node)

    def _binop(self, symbol: str, node: ast.AST, left: int, right: int) -> int:
        if symbol not in ops.BY_OPERATOR:
            return self.problem("GPU030", f"unknown operator `{symbol}` in a kernel", node)
        return self.add("binop", node, [left, right], symbol=symbol)

    def _BinOp(self, node: ast.BinOp) -> int:  # noqa: N802
        left, right = self.expr(node.left), self.expr(node.right)
        return self._binop(BINARY_SYMBOLS[type(node.op)], node, left, right)

    def _Compare(self, node: ast.Compare) -> int:  # noqa: N802
        left, right = self.expr(node.left), self.expr(node.comparators[0])
        return self._binop(BINARY_SYMBOLS[type(node.ops[0])], node, left, right)

    def _UnaryOp(self, node: ast.UnaryOp) -> int:  # noqa: N802
        operand = self.expr(node.operand)
        symbol = UNARY_SYMBOLS.get(type(node.op), "not")
        if symbol not in ops.BY_UNARY_OPERATOR:
            return self.problem("GPU030", f"unknown unary operator `{symbol}` in a kernel", node)
        return self.add("unop", node, [operand], symbol=symbol)

    def _Tuple(self, node: ast.Tuple) -> int:  # noqa: N802
        return self.add("tuple", node, [self.expr(e) for e in node.elts])

    def _Attribute(self, node: ast.Attribute) -> int:  # noqa: N802
        canonical = self.info.resolve(node)
        if canonical is not None:
            if canonical in DTYPES:
                return self.add("dtype", node, dtype=DTYPES[canonical])
            if canonical in MATH_CONSTANTS:  # `math.pi`
                return self.add("const", node, value=MATH_CONSTANTS[canonical])
            return self.problem(
                "GPU030", f"`{self.src.text(node)}` cannot be used as a value inside `@gpu`", node
            )
        receiver = self.expr(node.value)
        spec = ops.BY_ATTRIBUTE.get(node.attr)
        if spec is None:
            if node.attr in ops.BY_METHOD:
                return self.problem(
                    "GPU030", f"`.{node.attr}` is a method: call it as `.{node.attr}()`", node
                )
            return self.problem("GPU030", f"unknown attribute `.{node.attr}` on a tensor", node)
        return self.add("attribute", node, [receiver], spec=spec)

    def _Subscript(self, node: ast.Subscript) -> int:  # noqa: N802
        value = self.expr(node.value)
        pair = self.out.graph.nodes[value]
        k = int_literal(node.slice)
        if (
            pair["kind"] == "tuple"
            and k is not None
            and -len(pair["inputs"]) <= k < len(pair["inputs"])
        ):  # `topk(x, 3)[1]`, `(a, b)[0]`: the element itself
            return pair["inputs"][k]
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        inputs = [value]
        items: list[tuple] = []

        def slot(e: ast.expr | None) -> int | None:
            if e is None:
                return None
            inputs.append(self.expr(e))
            return len(inputs) - 1

        for e in elts:
            if isinstance(e, ast.Slice):
                items.append(("slice", slot(e.lower), slot(e.upper)))
            elif isinstance(e, ast.Constant) and e.value is None:
                items.append(("newaxis",))
            elif isinstance(e, ast.Constant) and e.value is Ellipsis:
                items.append(("ellipsis",))
            else:
                items.append(("int", slot(e)))
        return self.add("subscript", node, inputs, items=items)

    def _Call(self, node: ast.Call) -> int:  # noqa: N802
        func = node.func
        canonical = self.info.resolve(func)
        if canonical is not None:
            spec = ops.BY_FUNCTION.get(canonical)
            if spec is None:
                return self.problem(
                    "GPU030", f"`{self.src.text(func)}` cannot be called inside `@gpu`", node
                )
            if spec.kind == "atomic":
                return self.problem(
                    "GPU031",
                    f"`{canonical}` is an index-level statement: write it in a "
                    "`@gpu(grid=...)` kernel as `atomic_add(out, index, value)`",
                    node,
                )
            if spec.kind == "einsum":
                return _Einsum(self, node).build()
            if spec.kind == "topk":
                return self._topk(spec, node)
            return self._call_with(spec, node, [], "call")
        if isinstance(func, ast.Attribute):
            receiver = self.expr(func.value)
            if self.out.graph.nodes[receiver]["kind"] == "poison":
                # `math.exp(x)`: the receiver was reported; checking the call would cascade.
                for a in [*node.args, *(kw.value for kw in node.keywords)]:
                    self.expr(a)
                return self.add("poison", node)
            spec = ops.BY_METHOD.get(func.attr)
            if spec is None:
                return self.problem("GPU030", f"unknown method `.{func.attr}()`", func)
            if spec.name == "gelu":
                return self._gelu(node, receiver)
            return self._call_with(spec, node, [receiver], "method")
        if isinstance(func, ast.Name) and func.id not in self.env:
            if func.id in self.info.named_results:
                return self._named_result(node, func.id)
        if isinstance(func, ast.Name):
            if func.id in self.env:
                return self.problem("GPU030", f"`{func.id}` is not callable inside `@gpu`", node)
            callee = callable_function(self.info, func.id)
            if callee is not None:
                return self._inline(node, *callee)
            if func.id in self.info.module_names or func.id in _BUILTINS:
                return self.problem("GPU030", f"unknown function `{func.id}()` in a kernel", func)
            return self.problem("GPU032", f"undefined name `{func.id}`", func)
        return self.problem("GPU030", f"`{self.src.text(func)}` cannot be called here", node)

    def _named_result(self, node: ast.Call, name: str) -> int:
        """`Stats(mean, rstd)` or `Stats(mean=m, rstd=r)`: a tuple of the `NamedTuple`'s fields."""
        fields = [f.target.id for f in named_result_fields(self.info.named_results[name])]  # type: ignore[union-attr]
        given: dict[str, ast.expr] = {}
        for k, a in enumerate(node.args):
            if k >= len(fields) or isinstance(a, ast.Starred):
                return self.problem("GPU036", f"`{name}` has {len(fields)} fields", node)
            given[fields[k]] = a
        for kw in node.keywords:
            if kw.arg not in fields or kw.arg in given:
                return self.problem("GPU036", f"`{name}` has no field `{kw.arg}` to set", node)
            given[kw.arg] = kw.value
        missing = [f for f in fields if f not in given]
        if missing:
            return self.problem("GPU036", f"`{name}(...)` is missing `{missing[0]}`", node)
        return self.add("tuple", node, [self.expr(given[f]) for f in fields])

    def _inline(self, node: ast.Call, info: ModuleInfo, fn: ast.FunctionDef) -> int:
        """The callee's body built into this graph, its parameters bound to the arguments.

        Each call is its own copy, so a helper is polymorphic in its sizes; its nodes keep
        the callee's spans, and name the call (`call`) for the note on a failure inside it.
        """
        if fn.name in self._inlining:
            return self.problem(
                "GPU031", f"`{fn.name}` calls itself; recursion cannot run on a GPU", node
            )
        args = fn.args
        if args.vararg or args.kwarg or args.posonlyargs or args.kwonlyargs or args.defaults:
            return self.problem(
                "GPU030",
                f"`{fn.name}` must take plain positional parameters to be called in a kernel",
                node,
            )
        names = [a.arg for a in args.args]
        bound: dict[str, int] = {}
        for k, a in enumerate(node.args):
            if k >= len(names) or isinstance(a, ast.Starred):
                return self.problem("GPU036", f"`{fn.name}` takes {len(names)} arguments", node)
            bound[names[k]] = self.expr(a)
        for kw in node.keywords:
            if kw.arg not in names or kw.arg in bound:
                return self.problem(
                    "GPU036", f"`{fn.name}` has no argument `{kw.arg}` to bind", node
                )
            bound[kw.arg] = self.expr(kw.value)
        missing = [n for n in names if n not in bound]
        if missing:
            return self.problem(
                "GPU036", f"the call of `{fn.name}` is missing `{missing[0]}`", node
            )
        call = Label(self.src.span(node), f"in this call of `{fn.name}` from `{self.fn.name}`")
        self._inlining.append(fn.name)
        depth = len(self._binds)
        self._bind_annotations(node, info, fn, bound)
        try:
            with _Inlined(self, info, bound, call):
                result = self._inline_body(fn)
        finally:
            self._inlining.pop()
            del self._binds[depth:]
        return (
            result
            if result is not None
            else self.problem("GPU015", f"`{fn.name}` returns no value to its caller", node)
        )

    def _bind_annotations(
        self, node: ast.Call, info: ModuleInfo, fn: ast.FunctionDef, bound: dict[str, int]
    ) -> None:
        """A check node binding the callee's annotated tensor parameters to the arguments:
        the callee's dims take the call's sizes, and every axis and dtype must agree. The
        body's nodes name it (`binds`), so a failed binding poisons the body instead of
        cascading through it. Nothing reads its value: code generation never sees it."""
        at = dict(zip([a.arg for a in fn.args.args], node.args, strict=False))
        at.update({kw.arg: kw.value for kw in node.keywords if kw.arg is not None})
        checks = []
        for a in fn.args.args:
            if a.annotation is None:
                continue
            ann = read_annotation(info, a.annotation)
            if isinstance(ann, TensorAnnotation):
                checks.append((a.arg, ann, self.src.span(at[a.arg])))
        if checks:
            inputs = [bound[name] for name, _, _ in checks]
            self._binds.append(self.add("bind", node, inputs, params=checks, callee=fn.name))

    def _inline_body(self, fn: ast.FunctionDef) -> int | None:
        for stmt in fn.body:
            found = list(subset.statement_violations(stmt, fn.name))
            if found:
                for v in found:
                    self.problem(v.code, v.message, v.node)
                if _leaves(stmt):
                    return self.add("poison", stmt)
                self._poison_targets(stmt)
                continue
            if isinstance(stmt, ast.Return):
                if stmt.value is None:
                    return None
                return self.expr(stmt.value)
            self._statement(stmt)
        return None

    def _gelu(self, node: ast.Call, receiver: int) -> int:
        """`.gelu()` / `.gelu(approximate="none"|"tanh")`: the literal picks the op."""
        spec = gelu_call(node)
        if spec is None:
            return self.problem(
                "GPU036",
                '`.gelu()` takes one argument, `approximate`: the literal "none" or "tanh"',
                node,
            )
        return self.add(
            "method", node, [receiver], spec=spec, n_receiver=1, n_positional=0, keywords=[]
        )

    def _topk(self, spec: ops.OpSpec, node: ast.Call) -> int:
        """`topk(x, k, axis, largest)` built as what it means, after a check node (kind
        `topk`, which owns the rule: a literal axis, 1 <= k <= its size) that every built
        node names (`binds`): the pair `(x.sort(axis, descending=largest)[..., :k],
        x.argsort(axis, descending=largest)[..., :k])`, the cut on `axis`."""
        check = self._call_with(spec, node, [], "topk")
        if self.out.graph.nodes[check]["kind"] != "topk":
            return check  # a reported argument problem
        given = {kw.arg: kw.value for kw in node.keywords}
        given.update(zip(ops.PARAMETERS["topk"], node.args, strict=False))
        if "x" not in given or "k" not in given:
            return self.problem("GPU036", "`topk()` takes a tensor and `k`", node)
        axis = -1 if "axis" not in given else self._static_int(given["axis"])
        if axis is None:
            return self.add("poison", node)  # the check node reports the axis
        largest = given.get("largest")
        if largest is not None and not (
            isinstance(largest, ast.Constant) and isinstance(largest.value, bool)
        ):
            return self.add("poison", node)  # the check node reports it
        check_node = self.out.graph.nodes[check]
        inputs = dict(zip(check_node["keywords"], check_node["inputs"], strict=True))
        self._binds.append(check)
        try:
            axis_node = self.add("const", node, value=axis)
            down = self.add("const", node, value=True if largest is None else largest.value)
            if axis >= 0:
                items = [("slice", None, None)] * axis + [("slice", None, 1)]
            else:
                items = [("ellipsis",), ("slice", None, 1)] + [("slice", None, None)] * (-axis - 1)
            cut = []
            for name in ("sort", "argsort"):
                whole = self.add(
                    "method",
                    node,
                    [inputs["x"], axis_node, down],
                    spec=ops.BY_METHOD[name],
                    n_receiver=1,
                    n_positional=0,
                    keywords=["axis", "descending"],
                )
                cut.append(self.add("subscript", node, [whole, inputs["k"]], items=items))
            return self.add("tuple", node, cut)
        finally:
            self._binds.pop()

    def _argument(self, spec: ops.OpSpec, a: ast.expr) -> int:
        """One argument's node: where an op takes a tuple of tensors (`concatenate`,
        `stack`), a list literal is that tuple, as in NumPy; elsewhere a list is refused."""
        if spec.kind == "join" and isinstance(a, ast.List):
            return self.add("tuple", a, [self.expr(e) for e in a.elts])
        return self.expr(a)

    def _call_with(self, spec: ops.OpSpec, node: ast.Call, inputs: list[int], kind: str) -> int:
        variadic = spec.name in ("reshape", "transpose")
        params = ops.PARAMETERS.get(spec.name, ())
        args: dict[str, int] = {}
        positional: list[int] = []
        if not variadic and spec.kind == "elementwise" and spec.method is None:
            params = tuple(f"arg{k}" for k in range(spec.arity))
        for k, a in enumerate(node.args):
            value = self._argument(spec, a)
            if variadic:
                positional.append(value)
            elif k < len(params):
                args[params[k]] = value
            else:
                return self.problem(
                    "GPU036", f"`{spec.spelling}` takes at most {len(params)} arguments", a
                )
        for kw in node.keywords:
            if kw.arg is None or kw.arg not in params or kw.arg in args:
                return self.problem(
                    "GPU036", f"`{spec.spelling}` has no keyword argument `{kw.arg}`", kw
                )
            args[kw.arg] = self._argument(spec, kw.value)
        names = list(args)
        return self.add(
            kind,
            node,
            [*inputs, *positional, *(args[n] for n in names)],
            spec=spec,
            n_receiver=len(inputs),
            n_positional=len(positional),
            keywords=names,
        )


class _Einsum:
    """`einsum('spec', a, b)` built as the ops it means, after a check node.

    The check node (kind `einsum`, at the spec string) owns the spec's rule (ranks and
    one size per letter, `mimir.ops.einsum.shape`); every node built for the call names
    it (`binds`), so a failed check is reported once, at the string, and poisons them.
    Lowering: a `sum` over the letters only one operand has; then, with a contracted
    letter and a kept letter of each operand's own, transposes into a batched `@` (the
    operands swapped where the output names the second's letters first, so that the
    product is in the output's order; several contracted letters, or several kept by one
    side, merged into one axis by a `reshape` and split again after); otherwise a
    broadcast `*` and a `sum`; and a final transpose into the output's order.
    """

    def __init__(self, b: _Builder, node: ast.Call) -> None:
        self.b, self.node = b, node

    def add(self, kind: str, inputs: list[int] = (), **attrs: Any) -> int:
        return self.b.add(kind, self.node, inputs, **attrs)

    def const(self, value: int) -> int:
        return self.add("const", value=value)

    def method(self, name: str, x: int, positional: list[int] = (), **kw: int) -> int:
        return self.add(
            "method",
            [x, *positional, *kw.values()],
            spec=ops.BY_METHOD[name],
            n_receiver=1,
            n_positional=len(positional),
            keywords=list(kw),
        )

    def build(self) -> int:
        from mimir.ops import einsum as es

        b, node = self.b, self.node
        if node.keywords or not node.args:
            return b.problem("GPU022", "`einsum` takes a spec string and the operands", node)
        first = node.args[0]
        if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
            return b.problem(
                "GPU022",
                "the spec of `einsum` must be a string literal (it is parsed statically)",
                first,
            )
        operands = [b.expr(a) for a in node.args[1:]]
        try:
            spec = es.parse(first.value)
        except ops.RuleError as err:
            return b.problem(err.code, err.message, first)
        check = b.add("einsum", first, operands, spec=spec)
        b._binds.append(check)
        try:
            return self._lower(spec, operands)
        finally:
            b._binds.pop()

    def _sum_out(self, x: int, term: str, keep: str) -> tuple[int, str]:
        """`x` summed over the letters of `term` not in `keep`."""
        axes = [k for k, ch in enumerate(term) if ch not in keep]
        if not axes:
            return x, term
        axis = self.add("tuple", [self.const(k) for k in axes])
        return self.method("sum", x, axis=axis), "".join(ch for ch in term if ch in keep)

    def _transpose(self, x: int, term: str, order: str) -> int:
        """`x` (axes named by `term`) with its axes in `order` (a permutation of term)."""
        if term == order:
            return x
        return self.method("transpose", x, [self.const(term.index(ch)) for ch in order])

    def _size(self, x: int, axis: int) -> int:
        """`x.shape[axis]`."""
        shape = self.add("attribute", [x], spec=ops.BY_ATTRIBUTE["shape"])
        return self.add("subscript", [shape, self.const(axis)], items=[("int", 1)])

    def _reshape(self, x: int, sizes: list[list[int]]) -> int:
        """`x` reshaped to one axis per group of size nodes (their product), or `x` when
        every group has one."""
        if all(len(group) == 1 for group in sizes):
            return x
        merged = []
        for group in sizes:
            size = group[0]
            for more in group[1:]:
                size = self.add("binop", [size, more], symbol="*")
            merged.append(size)
        return self.method("reshape", x, merged)

    def _spread(self, x: int, new: list[bool]) -> int:
        """`x[..., items]`: a new unit axis where `new` says, else `:`."""
        items = [("newaxis",) if unit else ("slice", None, None) for unit in new]
        return self.add("subscript", [x], items=[("ellipsis",), *items])

    def _lower(self, spec: Any, operands: list[int]) -> int:
        from mimir.ops import einsum as es

        if len(operands) != len(spec.inputs):
            return self.add("poison")  # the check node reports it
        if len(operands) == 1:
            x, term = self._sum_out(operands[0], spec.inputs[0], spec.output)
            return self._transpose(x, term, spec.output)
        roles = es.letter_roles(spec)
        (a, ta), (c, tc) = (
            self._sum_out(x, t, "".join(ch for ch in t if ch not in own))
            for x, t, own in zip(operands, spec.inputs, roles.summed, strict=True)
        )
        if roles.matmul:
            m, n, k, batch = roles.left, roles.right, roles.contracted, roles.batch
            kept = "".join(ch for ch in spec.output if ch not in batch)
            if kept[0] in n:  # `'ij,jk->ki'`: `b.T @ a.T` is in the output's order
                (a, ta, m), (c, tc, n) = (c, tc, n), (a, ta, m)
            size = {ch: (a, ta.index(ch)) for ch in ta}
            size.update({ch: (c, tc.index(ch)) for ch in tc if ch not in size})

            def sizes(letters: str) -> list[int]:
                return [self._size(*size[ch]) for ch in letters]

            def merged(x: int, term: str, groups: list[str]) -> int:
                """`x` (axes named by `term`) with one axis per group, in their order:
                reshaped in its own order where each group's letters are adjacent there
                (a contiguous tensor's flat offsets stay as they are), then transposed;
                else transposed, then reshaped."""
                if all(len(g) == 1 for g in groups):
                    return self._transpose(x, term, "".join(groups))
                at = [term.find(g) for g in groups]
                if min(at) < 0:
                    x = self._transpose(x, term, "".join(groups))
                    return self._reshape(x, [sizes(g) for g in groups])
                own = sorted(range(len(groups)), key=lambda i: at[i])
                x = self._reshape(x, [sizes(groups[i]) for i in own])
                tags = [chr(ord("a") + i) for i in range(len(groups))]
                return self._transpose(x, "".join(tags[i] for i in own), "".join(tags))

            left = merged(a, ta, [*batch, *[g for g in (m, k) if g]])
            right = merged(c, tc, [*batch, *[g for g in (k, n) if g]])
            result = self.add("binop", [left, right], symbol="@")
            if len(m) > 1 or len(n) > 1:  # the merged kept letters split again
                result = self.method("reshape", result, sizes(batch + m + n))
            return self._transpose(result, batch + m + n, spec.output)
        letters = roles.batch + roles.left + roles.right + roles.contracted
        spread = []
        for x, t in ((a, ta), (c, tc)):
            x = self._transpose(x, t, "".join(ch for ch in letters if ch in t))
            if any(ch not in t for ch in letters):
                x = self._spread(x, [ch not in t for ch in letters])
            spread.append(x)
        product = self.add("binop", spread, symbol="*")
        kept = roles.batch + roles.left + roles.right
        summed, _ = self._sum_out(product, letters, kept)
        return self._transpose(summed, kept, spec.output)


def callable_function(info: ModuleInfo, name: str) -> tuple[ModuleInfo, ast.FunctionDef] | None:
    """The function a kernel may call by `name`: a plain helper or a tensor-level `@gpu`
    function, defined in this module or imported from another one of the project."""
    if name in info.imported_functions:
        return info.imported_functions[name]
    for stmt in info.tree.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == name:
            kernel = next((k for k in info.kernels if k.node is stmt), None)
            if kernel is not None and kernel.grid is not None:
                return None  # an index-level kernel is launched, not called
            return info, stmt
    return None


class _Inlined:
    """Switches a builder into a callee's module and scope, and back."""

    def __init__(self, builder: _Builder, info: ModuleInfo, env: dict[str, int], call: Label):
        self.b, self.info, self.env, self.call = builder, info, env, call

    def __enter__(self) -> None:
        b = self.b
        self.saved = (b.info, b.src, b.env, b._call)
        b.info, b.src, b.env = self.info, self.info.source, self.env
        b._call = b._call or self.call  # the outermost call is the one in this kernel

    def __exit__(self, *exc: object) -> None:
        self.b.info, self.b.src, self.b.env, self.b._call = self.saved


def _leaves(stmt: ast.stmt) -> bool:
    """Whether `stmt` holds a `return` or `raise` of the kernel itself (not of a nested def)."""
    scopes = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
    if isinstance(stmt, scopes):
        return False
    todo: list[ast.AST] = [stmt]
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.Return, ast.Raise)):
            return True
        todo.extend(c for c in ast.iter_child_nodes(n) if not isinstance(c, scopes))
    return False


def build_graph(info: ModuleInfo, kernel: KernelDef) -> KernelGraph:
    return _Builder(info, kernel).build()
