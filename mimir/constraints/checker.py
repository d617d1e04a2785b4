"""Facts and obligations for one kernel graph, proven as they are derived.

Nodes are visited in source order. Each node's abstract value is computed from
its inputs' values by the op table's rules run over the Z3 algebra; each
obligation a rule records is proven before the next node is visited. The first
failing obligation of a node becomes its one diagnostic and poisons the node,
and every node downstream of a poisoned one is skipped silently: one diagnostic
per root cause.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mimir import ops
from mimir.constraints.algebra import Obligation, Sym, Z3Algebra, _z3_op, lift
from mimir.diagnostics.diagnostic import Diagnostic, Label, Span
from mimir.dims import BinOp, Dim, Size, same_size, solve_dims
from mimir.dtypes import ALL_DTYPES, DType, float32, int32
from mimir.ops import dtype_rules as dr
from mimir.ops import einsum as einsum_rules
from mimir.ops import shapes as sh
from mimir.parse.graph import KernelGraph
from mimir.parse.module import (
    ModuleInfo,
    ScalarAnnotation,
    TensorAnnotation,
    TupleAnnotation,
    dims_in,
)
from mimir.solve.prover import PROVEN, REFUTED, Prover
from mimir.solve.z3lib import z3

# ---------------------------------------------------------------- abstract values


@dataclass
class TensorVal:
    shape: tuple[Sym, ...]
    dtype: DType
    # an integer parameter's `Range(lo, hi)` as Z3 terms (the call checks it, GPU043)
    value_range: tuple[Any, Any] | None = None

    def __post_init__(self) -> None:
        # Shape rules return plain ints for sizes they create (`x[:, None]`, keepdims).
        self.shape = tuple(lift(s) for s in self.shape)


@dataclass
class SizeVal:
    """An int known statically up to its dims: a literal, a `Dim`, `x.shape[0]`."""

    sym: Sym


@dataclass
class ScalarVal:
    kind: str  # "bool" | "int" | "float"
    value: Any = None  # the literal, when the scalar is one


@dataclass
class TupleVal:
    items: list[Any]


@dataclass
class DTypeVal:
    dtype: DType


@dataclass
class NoneVal:
    pass


class _Poison:
    def __repr__(self) -> str:
        return "POISON"


POISON = _Poison()

DTYPE_SORT, DTYPE_CONSTS = z3.EnumSort("DType", [d.name for d in ALL_DTYPES])
_DTYPE_TERM = dict(zip(ALL_DTYPES, DTYPE_CONSTS, strict=True))


_SILENT_CODE = ""  # a failure already reported elsewhere: poison the node quietly


# `<<` and `>>`: the count must be proven below the 32 bits of int32 and uint32 (GPU037)
SHIFTS = ("lshift", "rshift")
SHIFT_BITS = 32


class _RuleFailedError(Exception):
    def __init__(self, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.extra = extra


def _shape_text(shape: tuple[Sym, ...]) -> str:
    return "[" + ", ".join(s.text for s in shape) + "]"


def _sym_of(size: Size, env: dict[str, Sym]) -> Sym | None:
    """A size of a callee's annotation with its dims replaced by the call's sizes."""
    if isinstance(size, int):
        return Sym.const(size)
    if isinstance(size, Dim):
        return env.get(size.name)
    left, right = _sym_of(size.left, env), _sym_of(size.right, env)
    if left is None or right is None:
        return None
    return getattr(left, _DUNDER[size.op])(right)


def refuse_unsatisfiable_relations(info: ModuleInfo) -> list[Diagnostic]:
    """GPU034 for each dim whose relations with earlier dims no size satisfies
    (`Dim("A", min=B + 1, max=B - 1)`): assumed, they would make every proof vacuous. The
    dim is then a bad dim (its uses are poisoned, not reported again)."""
    found = []
    solver = z3.Solver()
    terms: dict[str, z3.ArithRef] = {}

    def term(size: Size) -> z3.ArithRef:
        if isinstance(size, int):
            return z3.IntVal(size)
        if isinstance(size, Dim):
            return terms.setdefault(size.name, z3.Int(size.name))
        return _z3_op(size.op, term(size.left), term(size.right))

    for name, decl in list(info.dims.items()):
        dim = decl.dim
        var = term(dim)
        solver.add(var >= dim.min)
        if dim.max is not None:
            solver.add(var <= dim.max)
        if dim.multiple_of is not None:
            solver.add(var % dim.multiple_of == 0)
        relations = [var >= term(dim.min_of)] if dim.min_of is not None else []
        relations += [var <= term(dim.max_of)] if dim.max_of is not None else []
        if not relations:
            continue
        solver.push()
        solver.add(*relations)
        if solver.check() == z3.unsat:
            solver.pop()
            found.append(
                Diagnostic(
                    "GPU034",
                    f"dim `{dim.name}` has {dim.describe_constraints()}, which no size "
                    "satisfies with the dims it names",
                    decl.span,
                )
            )
            del info.dims[name]
            info.bad_dims.add(name)
    return found


class KernelChecker:
    def __init__(self, info: ModuleInfo, kg: KernelGraph, timeout_ms: int) -> None:
        self.info = info
        self.kg = kg
        self.path = info.source.path
        self.prover = Prover(timeout_ms=timeout_ms)
        self.values: dict[int, Any] = {}
        self.diagnostics: list[Diagnostic] = []
        self.bound_dims: set[str] = set()
        self._reported_unbound: set[str] = set()
        args = kg.kernel.node.args
        n_params = len([*args.posonlyargs, *args.args, *args.kwonlyargs])
        n_params += (args.vararg is not None) + (args.kwarg is not None)
        # alg parameter whose annotation was refused (GPU033) may be the one that fixes a dim:
        # reporting that dim as unbound (GPU035) would be a cascade.
        self._params_untyped = len(kg.params) < n_params
        self._visiting = -1
        # a reduction that drops axes: node -> (its input's shape, the axes it reduces)
        self.reductions: dict[int, tuple[tuple[Sym, ...], tuple[int, ...]]] = {}

    # -- entry point

    def run(self) -> list[Diagnostic]:
        calls = self.kg.problem_calls
        for k, p in enumerate(self.kg.problems):
            call = calls[k] if k < len(calls) else None
            self._emit(p.code, p.message, p.span, labels=(call,) if call else ())
        self._declare_dims()
        g = self.kg.graph
        for i in sorted(g.nodes):
            self._visiting = i
            self.values[i] = self._visit(i, g.nodes[i])
        return self.diagnostics

    def _emit(
        self,
        code: str,
        message: str,
        span: Span,
        labels: tuple[Label, ...] = (),
        counterexample: tuple = (),
        extra_why: str | None = None,
        extra_fix: str | None = None,
    ) -> None:
        self.diagnostics.append(
            Diagnostic(
                code=code,
                message=message,
                span=span,
                labels=labels,
                counterexample=counterexample,
                function=self.kg.name,
                extra_why=extra_why,
                extra_fix=extra_fix,
            )
        )

    # -- facts from declarations and annotations

    def _declare_dims(self) -> None:
        for name in self.info.dims:
            decl = self.info.dims[name]
            dim = decl.dim
            label = Label(
                decl.span, f"`{dim.name}` is declared here ({dim.describe_constraints()})"
            )
            self.prover.declare_dim(dim.name, dim.min, dim.max, dim.multiple_of, label)
        for name in self.info.dims:  # `Dim("T", max=MAXT)`: a fact every proof may use
            decl = self.info.dims[name]
            dim = decl.dim
            label = Label(
                decl.span, f"`{dim.name}` is declared here ({dim.describe_constraints()})"
            )
            var = self.prover.dim(dim.name)
            if dim.min_of is not None:
                self.prover.add_fact(var >= self._term(dim.min_of), label)
            if dim.max_of is not None:
                self.prover.add_fact(var <= self._term(dim.max_of), label)
        for _, ann, _ in self.kg.params:
            if isinstance(ann, TensorAnnotation):
                for d in ann.dims:
                    if isinstance(d, Dim):
                        self.bound_dims.add(d.name)
        # a dim no axis names alone, fixed by an equation (`x: Tensor[float32, 3 * C]`)
        shapes = [(n, a.dims) for n, a, _ in self.kg.params if isinstance(a, TensorAnnotation)]
        self.bound_dims.update(s.dim.name for s in solve_dims(shapes))
        for _, ann, _ in self.kg.params:
            if isinstance(ann, TensorAnnotation):
                for d, span in zip(ann.dims, ann.dim_spans, strict=True):
                    self._require_bound(d, span)
        self._assume_callable()
        returns = self.kg.returns
        for ann in returns.items if isinstance(returns, TupleAnnotation) else [returns]:
            if isinstance(ann, TensorAnnotation):
                for d, span in zip(ann.dims, ann.dim_spans, strict=True):
                    self._require_bound(d, span)

    def _assume_callable(self) -> None:
        """Every parameter axis is `>= 0` in any call: a fact, so counterexamples are callable.

        `p: Tensor[float32, H - 2, H]` admits only H >= 2 however `H` is declared; an axis
        that is negative for every admissible size makes the kernel uncallable (GPU033).
        """
        for name, ann, _ in self.kg.params:
            if not isinstance(ann, TensorAnnotation):
                continue
            for k, (d, span) in enumerate(zip(ann.dims, ann.dim_spans, strict=True)):
                if not isinstance(d, BinOp) or any(
                    x.name not in self.bound_dims for x in dims_in(d)
                ):
                    continue
                fact = self._term(d) >= 0
                s = self.prover.solver
                s.push()
                s.add(fact)
                callable_ = s.check() != z3.unsat
                s.pop()
                if not callable_:
                    self._emit(
                        "GPU033",
                        f"`{name}` axis {k} is {d}, which is negative for every admissible "
                        "size: no call can pass this parameter",
                        span,
                    )
                    continue
                self.prover.add_fact(fact, Label(span, callable_size_note(name, k, d)))

    def _require_bound(self, size: Size, span: Span) -> bool:
        for dim in dims_in(size):
            if dim.name not in self.bound_dims:
                if dim.name not in self._reported_unbound and not self._params_untyped:
                    self._reported_unbound.add(dim.name)
                    self._emit(
                        "GPU035",
                        f"dim `{dim.name}` is not fixed by any parameter of `{self.kg.name}`",
                        span,
                    )
                return False
        return True

    def _term(self, size: Size) -> z3.ArithRef:
        if isinstance(size, int):
            return z3.IntVal(size)
        if isinstance(size, Dim):
            return self.prover.dim(size.name)
        assert isinstance(size, BinOp)
        return _z3_op(size.op, self._term(size.left), self._term(size.right))

    def _annotated_shape(self, owner: str, ann: TensorAnnotation) -> tuple[Sym, ...]:
        shape = []
        for k, (d, span) in enumerate(zip(ann.dims, ann.dim_spans, strict=True)):
            label = Label(span, f"`{owner}` axis {k} is {d} here")
            name = f"{owner}.shape[{k}]"
            dims = tuple(x.name for x in dims_in(d))
            var = self.prover.annotation_var(name, self._term(d), dims, label)
            shape.append(
                Sym(
                    var,
                    str(d),
                    d if isinstance(d, int) else None,
                    1 if isinstance(d, BinOp) and d.op in "+-" else 3,
                    expr=d,
                )
            )
        return tuple(shape)

    # -- visiting

    def _visit(self, i: int, node: dict[str, Any]) -> Any:
        inputs = [self.values[j] for j in node["inputs"]]
        if node["kind"] == "poison" or any(v is POISON for v in inputs):
            return POISON
        if any(self.values.get(b) is POISON for b in node.get("binds", ())):
            return POISON  # inside a call whose arguments did not fit: reported there
        try:
            return getattr(self, "_" + node["kind"])(node, inputs)
        except _RuleFailedError as f:
            if f.code == _SILENT_CODE:  # already reported (an unbound dim)
                return POISON
            extra = dict(f.extra)
            if f.code == "GPU010":  # a mismatch made by a reduction a few lines up: say so
                notes, fix = reduction_notes(self, node, inputs)
                extra["labels"] = (*extra.get("labels", ()), *notes)
                if fix is not None:
                    extra["extra_fix"] = fix
            if node.get("call") is not None:  # inside an inlined function: name the call
                extra["labels"] = (*extra.get("labels", ()), node["call"])
            self._emit(f.code, f.message, node["span"], **extra)
            return POISON
        except sh.RuleError as err:
            call = node.get("call")
            self._emit(err.code, err.message, node["span"], labels=(call,) if call else ())
            return POISON

    def _prove_all(self, obligations: list[Obligation]) -> None:
        for ob in obligations:
            verdict = self.prover.prove(ob.condition)
            if verdict.status == PROVEN:
                continue
            if verdict.status == REFUTED:
                raise _RuleFailedError(
                    ob.code,
                    ob.message,
                    labels=verdict.labels,
                    counterexample=verdict.counterexample,
                )
            raise _RuleFailedError(
                "GPU050",
                f"could not prove: {ob.message} (the solver returned unknown: {verdict.reason})",
            )

    def _rule(self, fn: Any, *args: Any) -> Any:
        alg = Z3Algebra()
        result = fn(alg, *args)
        self._prove_all(alg.obligations)
        return result

    # -- node kinds

    def _param(self, node: dict, _: list) -> Any:
        ann = node["annotation"]
        if isinstance(ann, ScalarAnnotation):
            return ScalarVal(ann.kind)
        value = TensorVal(self._annotated_shape(node["name"], ann), ann.dtype)
        if ann.value_range is not None and all(
            self._require_bound(b, ann.span) for b in ann.value_range
        ):
            value.value_range = (self._term(ann.value_range[0]), self._term(ann.value_range[1]))
        return value

    def _const(self, node: dict, _: list) -> Any:
        v = node["value"]
        if v is None:
            return NoneVal()
        if isinstance(v, bool):
            return ScalarVal("bool", v)
        if isinstance(v, int):
            return SizeVal(Sym.const(v))
        if isinstance(v, float):
            return ScalarVal("float")
        raise _RuleFailedError(
            "GPU031", f"the constant `{node['text']}` cannot be used inside `@gpu`"
        )

    def _dim(self, node: dict, _: list) -> Any:
        dim: Size = node["dim"]  # a `Dim`, or module-level size arithmetic (`D_HID`)
        if not self._require_bound(dim, node["span"]):
            return POISON
        if isinstance(dim, Dim):
            return SizeVal(Sym(self.prover.dim(dim.name), dim.name, expr=dim))
        prec = 1 if isinstance(dim, BinOp) and dim.op in "+-" else 3
        return SizeVal(Sym(self._term(dim), str(dim), None, prec, expr=dim))

    def _dtype(self, node: dict, _: list) -> Any:
        return DTypeVal(node["dtype"])

    def _tuple(self, node: dict, inputs: list) -> Any:
        return TupleVal(inputs)

    def _item(self, node: dict, inputs: list) -> Any:
        (value,) = inputs
        if not isinstance(value, TupleVal) or len(value.items) != node["count"]:
            if node["index"] != 0:  # one unpacking, one root cause: reported at the first name
                return POISON
            have = len(value.items) if isinstance(value, TupleVal) else "a non-tuple"
            raise _RuleFailedError("GPU036", f"cannot unpack {have} into {node['count']} names")
        return value.items[node["index"]]

    def _binop(self, node: dict, inputs: list) -> Any:
        symbol = node["symbol"]
        left, right = inputs
        if symbol == "@":
            a, b = (self._tensor(v, "@") for v in inputs)
            dtype = self._dtype_rule(ops.BY_OPERATOR["@"], [a.dtype, b.dtype])
            return TensorVal(self._rule(sh.matmul, a.shape, b.shape), dtype)
        spec = ops.BY_OPERATOR[symbol]
        if spec.name in SHIFTS:
            result = (
                self._elementwise(spec, inputs)
                if isinstance(left, TensorVal) or isinstance(right, TensorVal)
                else ScalarVal(self._scalar_kinds(spec, inputs))
            )
            self._prove_shift_count(spec, right)
            return result
        if isinstance(left, TensorVal) or isinstance(right, TensorVal):
            return self._elementwise(spec, inputs)
        if isinstance(left, SizeVal) and isinstance(right, SizeVal) and symbol in _DUNDER:
            if symbol in ("//", "%") and right.sym.value == 0:
                raise _RuleFailedError("GPU036", "division by zero in a size expression")
            if symbol in ("//", "%"):
                self._rule(
                    lambda alg: alg.require(
                        alg.le(1, right.sym),
                        "GPU036",
                        "the divisor {} may be zero or negative",
                        right.sym,
                    )
                )
            return SizeVal(getattr(left.sym, _DUNDER[symbol])(right.sym))
        kind = self._scalar_kinds(spec, inputs)
        return ScalarVal(kind)

    def _prove_shift_count(self, spec: ops.OpSpec, count: Any) -> None:
        """A shift's count in 0..31 for every value it can hold (a tensor's `Range` or its
        dtype, a literal, a size): past that the shim and the GPUs disagree (Python shifts
        by any amount, PTX clamps, WGSL and SPIR-V mask or leave it undefined)."""
        held = self._value_range(count)
        c = z3.Int(f"shift!count!{self._visiting}")
        within = z3.And(c >= held[0], c < held[1]) if held is not None else z3.BoolVal(True)
        verdict = self.prover.prove(
            z3.Implies(within, z3.And(c >= 0, c < SHIFT_BITS)), (("count", c),)
        )
        if verdict.status == PROVEN:
            return
        message = (
            f"the count of `{spec.spelling}` may be negative or {SHIFT_BITS} or more "
            f"(it must be in 0..{SHIFT_BITS - 1})"
        )
        if verdict.status != REFUTED:
            raise _RuleFailedError("GPU050", f"could not prove: {message} ({verdict.reason})")
        raise _RuleFailedError(
            "GPU037", message, labels=verdict.labels, counterexample=verdict.counterexample
        )

    def _scalar_kinds(self, spec: ops.OpSpec, inputs: list) -> str:
        kinds = [self._operand_kind(v, spec) for v in inputs]
        dtype = self._dtype_rule(spec, kinds)
        return "bool" if dtype.is_bool else "float" if dtype.is_float else "int"

    def _unop(self, node: dict, inputs: list) -> Any:
        (value,) = inputs
        spec = ops.BY_UNARY_OPERATOR[node["symbol"]]
        if isinstance(value, TensorVal):
            return self._elementwise(spec, inputs)
        if isinstance(value, SizeVal) and node["symbol"] == "-":
            return SizeVal(0 - value.sym)
        return ScalarVal(self._scalar_kinds(spec, inputs))

    def _attribute(self, node: dict, inputs: list) -> Any:
        spec: ops.OpSpec = node["spec"]
        x = self._tensor(inputs[0], spec.spelling)
        if spec.name == "shape":
            # `x.shape[0] - 3` is a size expression, as the shim's `SizeInt` (never a literal).
            return TupleVal([SizeVal(s.as_expression()) for s in x.shape])
        return TensorVal(self._rule(sh.transpose, x.shape, None), x.dtype, x.value_range)

    def _method(self, node: dict, inputs: list) -> Any:
        return self._apply(node, inputs)

    def _call(self, node: dict, inputs: list) -> Any:
        return self._apply(node, inputs)

    def _bind(self, node: dict, inputs: list) -> Any:
        """A call of an annotated function: its dims take the call's sizes (first use binds,
        within the dim's constraints), then every axis and the dtype must agree."""
        callee = node["callee"]
        env: dict[str, Sym] = {}
        for (name, ann, span), value in zip(node["params"], inputs, strict=True):
            annotated = f"`{name}` of `{callee}` is annotated {_ann_text(ann)} here"
            labels = (Label(ann.span, annotated),)
            if node.get("call") is not None:
                labels = (*labels, node["call"])
            try:
                self._bind_one(callee, name, ann, value, env)
            except _RuleFailedError as f:
                found = (*f.extra.get("labels", ()), *labels)
                self._emit(f.code, f.message, span, labels=found,
                           counterexample=f.extra.get("counterexample", ()))  # fmt: skip
                return POISON
        return NoneVal()

    def _bind_one(
        self, callee: str, name: str, ann: TensorAnnotation, value: Any, env: dict
    ) -> None:
        if not isinstance(value, TensorVal):
            raise _RuleFailedError("GPU040", f"argument `{name}` of `{callee}` must be a tensor")
        got = _shape_text(value.shape)
        message = (
            f"argument `{name}` of `{callee}` has shape {got}, the parameter is annotated "
            f"{_ann_text(ann)}"
        )
        if len(value.shape) != len(ann.dims):
            raise _RuleFailedError("GPU040", message)
        if value.dtype != ann.dtype:
            raise _RuleFailedError(
                "GPU041",
                f"argument `{name}` of `{callee}` is {value.dtype}, the parameter is annotated "
                f"{ann.dtype}",
            )
        for d, sym in zip(ann.dims, value.shape, strict=True):
            if isinstance(d, Dim) and d.name not in env:
                env[d.name] = sym
                ok = [sym.term >= d.min]
                if d.max is not None:
                    ok.append(sym.term <= d.max)
                for bound, upper in ((d.min_of, False), (d.max_of, True)):
                    limit = None if bound is None else _sym_of(bound, env)
                    if limit is not None:
                        ok.append(sym.term <= limit.term if upper else sym.term >= limit.term)
                if d.multiple_of is not None:
                    ok.append(sym.term % d.multiple_of == 0)
                self._prove_all(
                    [
                        Obligation(
                            z3.And(*ok),
                            "GPU042",
                            f"the call binds `{d.name}` of `{callee}` to {sym.text}, outside "
                            f"its constraints ({d.describe_constraints()})",
                            (),
                        )
                    ]
                )
        expected = [_sym_of(d, env) for d in ann.dims]
        needed = (
            "["
            + ", ".join(
                str(d) if e is None else e.text for d, e in zip(ann.dims, expected, strict=True)
            )
            + "]"
        )
        message = f"argument `{name}` of `{callee}` has shape {got}, the call needs {needed}"
        for e, sym in zip(expected, value.shape, strict=True):
            if e is None:
                continue  # a dim no parameter binds: the callee's own check reports it
            self._prove_all([Obligation(sym.term == e.term, "GPU040", message, ())])

    def _einsum(self, node: dict, inputs: list) -> Any:
        """The check of an `einsum` spec against its operands (at the spec string); the
        ops the call is lowered to are checked as themselves (`mimir.parse.graph`)."""
        for v in inputs:
            self._tensor(v, "einsum()")
        self._rule(einsum_rules.shape, node["spec"], [v.shape for v in inputs])
        return NoneVal()

    def _topk(self, node: dict, inputs: list) -> Any:
        """The check node of `topk(x, k, axis, largest)` (the graph builder lowers the call
        to a `sort` and an `argsort`, each cut to k): keys `sort` takes, a literal axis,
        `largest` a bool, and 1 <= k <= the axis's size, proven or refuted (GPU018)."""
        spec = node["spec"]
        kwargs = dict(zip(node["keywords"], inputs, strict=True))
        x = self._tensor(kwargs.get("x"), spec.spelling)
        if "k" not in kwargs:
            raise _RuleFailedError("GPU036", "`topk()` takes a tensor and `k`")
        k = self._index_size(kwargs["k"])
        axis = self._axis_arg(kwargs.get("axis", SizeVal(Sym.const(-1))), spec)
        largest = kwargs.get("largest")
        if largest is not None:
            self._bool_arg(largest, "largest")
        self._dtype_rule(spec, [x.dtype])
        self._rule(sh.topk, x.shape, k, axis, "topk")
        return NoneVal()

    def _subscript(self, node: dict, inputs: list) -> Any:
        value, *slots = inputs
        items = node["items"]
        if isinstance(value, TupleVal):
            if len(items) != 1 or items[0][0] != "int":
                raise _RuleFailedError("GPU036", "a shape can only be indexed with one int")
            k = self._literal_int(inputs[items[0][1]], "a shape index")
            if not -len(value.items) <= k < len(value.items):
                raise _RuleFailedError(
                    "GPU018", f"index {k} is out of range for a shape of rank {len(value.items)}"
                )
            return value.items[k]
        x = self._tensor(value, "[]")
        if len(items) == 1 and items[0][0] == "int" and isinstance(inputs[items[0][1]], TensorVal):
            # `table[idx]`: NumPy's integer-array index on axis 0, a row gather
            return self._gather(x, inputs[items[0][1]], 0, False, "[]", node)
        resolved = []
        for it in items:
            if it[0] in ("newaxis", "ellipsis"):
                resolved.append(it)
            elif it[0] == "int":
                resolved.append(("int", self._index_size(inputs[it[1]])))
            else:
                resolved.append(
                    ("slice", *(None if s is None else self._index_size(inputs[s]) for s in it[1:]))
                )
        shape, _ = self._rule(sh.index, x.shape, resolved)
        # a view holds the same values: an index tensor keeps its `Range` through `ids[:, None]`
        return TensorVal(shape, x.dtype, x.value_range)

    def _return(self, node: dict, inputs: list) -> Any:
        (value,) = inputs
        ann = self.kg.returns
        if ann is None:
            return value
        if isinstance(ann, TupleAnnotation):
            n = len(ann.items)
            if not isinstance(value, TupleVal):
                raise _RuleFailedError(
                    "GPU015",
                    f"the kernel returns one value, the annotation says a tuple of {n} tensors",
                    labels=(Label(ann.span, "the return annotation"),),
                )
            if len(value.items) != n:
                raise _RuleFailedError(
                    "GPU015",
                    f"the kernel returns {len(value.items)} values, the annotation says {n}",
                    labels=(Label(ann.span, "the return annotation"),),
                )
            for k, (item, item_ann) in enumerate(zip(value.items, ann.items, strict=True)):
                what = f"result `{ann.names[k]}`" if ann.names else f"result {k}"
                self._check_result(item, item_ann, what, what)
            return value
        if isinstance(ann, ScalarAnnotation):  # pragma: no cover - refused when read
            raise _RuleFailedError(
                "GPU033", "a kernel returns a tensor; annotate it as `Tensor[...]`"
            )
        self._check_result(value, ann, "the kernel", "return")
        return value

    def _writeback(self, node: dict, inputs: list) -> Any:
        """Each `InOut` parameter's final value must fit the caller's tensor exactly."""
        params = {name: ann for name, ann, _ in self.kg.params}
        for name, value in zip(node["names"], inputs, strict=True):
            ann = params[name]
            if not isinstance(value, TensorVal):
                raise _RuleFailedError(
                    "GPU015",
                    f"`{name}` is `InOut` and must hold a tensor when the kernel returns, "
                    "not a scalar",
                    labels=(Label(ann.span, f"`{name}` is annotated here"),),
                )
            self._check_result(value, ann, f"the value written back into `{name}`", name)
        return NoneVal()

    def _check_result(self, value: Any, ann: TensorAnnotation, what: str, owner: str) -> None:
        """A result (a returned tensor, or an `InOut` parameter's final value) has exactly
        the annotated shape and dtype. `what` names it: "the kernel", "result 1", or
        "the value written back into `p`"."""
        returned = owner == "return" or owner.startswith("result")
        if not isinstance(value, TensorVal):
            verb = "the kernel returns" if what == "the kernel" else f"{what} is"
            raise _RuleFailedError(
                "GPU015",
                f"return shape mismatch: {verb} a scalar, the annotation says a tensor of "
                f"shape {_ann_text(ann)}",
            )
        if not self._require_all_bound(ann):
            raise _RuleFailedError(_SILENT_CODE, "")
        expected = self._annotated_shape(owner, ann)
        got = _shape_text(value.shape)
        if what == "the kernel":
            message = f"return shape mismatch: the kernel returns {got}, the annotation says "
        elif returned:
            message = f"return shape mismatch: {what} has shape {got}, the annotation says "
        else:
            message = f"{what} has shape {got}, the parameter is annotated "
        message += _ann_text(ann)
        label = "the return annotation" if returned else f"`{owner}` is annotated here"
        if len(expected) != len(value.shape):
            raise _RuleFailedError("GPU015", message, labels=(Label(ann.span, label),))
        obligation = z3.And(*[a.term == b.term for a, b in zip(value.shape, expected, strict=True)])
        self._prove_all([Obligation(obligation, "GPU015", message, ())])
        # Dtypes: the annotation is a tracked fact, so the conflict names it.
        ret = z3.Const(f"{owner}.dtype", DTYPE_SORT)
        self.prover.add_fact(
            ret == _DTYPE_TERM[ann.dtype], Label(ann.span, f"the annotation says {ann.dtype}")
        )
        if what == "the kernel":
            dmessage = f"return dtype mismatch: the kernel returns {value.dtype}, "
        elif returned:
            dmessage = f"return dtype mismatch: {what} is {value.dtype}, "
        else:
            dmessage = f"dtype mismatch: {what} is {value.dtype}, "
        dmessage += f"the annotation says {ann.dtype}"
        self._prove_all([Obligation(ret == _DTYPE_TERM[value.dtype], "GPU016", dmessage, ())])

    def _require_all_bound(self, ann: TensorAnnotation) -> bool:
        return all(self._require_bound(d, s) for d, s in zip(ann.dims, ann.dim_spans, strict=True))

    # -- op families

    def _apply(self, node: dict, inputs: list) -> Any:
        spec: ops.OpSpec = node["spec"]
        n_recv, n_pos = node["n_receiver"], node["n_positional"]
        receiver = inputs[:n_recv]
        positional = inputs[n_recv : n_recv + n_pos]
        kwargs = dict(zip(node["keywords"], inputs[n_recv + n_pos :], strict=True))
        kind = spec.kind
        if kind == "elementwise":
            params = ops.PARAMETERS.get(spec.name)
            if params is None:
                params = tuple(f"arg{k}" for k in range(spec.arity - len(receiver)))
            missing = [p for p in params if p not in kwargs]
            if missing:
                raise _RuleFailedError("GPU036", f"`{spec.spelling}` is missing `{missing[0]}`")
            return self._elementwise(spec, [*receiver, *(kwargs[p] for p in params)])
        if kind == "create":
            return self._create(spec, kwargs)
        if kind == "gather":
            if "arr" not in kwargs or "indices" not in kwargs or "axis" not in kwargs:
                raise _RuleFailedError(
                    "GPU036", f"`{spec.spelling}` takes the tensor, the indices and an axis literal"
                )
            arr = self._tensor(kwargs["arr"], spec.spelling)
            idx = self._tensor(kwargs["indices"], spec.spelling)
            axis = self._axis_arg(kwargs["axis"], spec)
            return self._gather(arr, idx, axis, True, spec.spelling, node)
        if kind == "iota":
            return self._arange(spec, kwargs)
        if kind == "mask":
            x = self._tensor(kwargs.get("x"), spec.spelling)
            self._literal_int(kwargs.get("k", SizeVal(Sym.const(0))), f"`k` of `{spec.spelling}`")
            return TensorVal(self._rule(sh.triangle, x.shape, spec.name), x.dtype)
        if kind == "join":
            return self._join(spec, kwargs)
        if kind == "scalar_math":
            return self._scalar_math(spec, kwargs)
        x = self._tensor(receiver[0], spec.spelling)
        if kind == "argreduce":
            axis = self._axis_arg(kwargs.get("axis"), spec, allow_tuple=False, allow_none=True)
            keepdims = self._bool_arg(kwargs.get("keepdims"), "keepdims")
            shape = self._rule(sh.argreduction, x.shape, axis, keepdims, spec.name)
            self._note_reduction(x.shape, axis, keepdims)
            return TensorVal(shape, self._dtype_rule(spec, [x.dtype]))
        if kind == "moments":
            axis = self._axis_arg(kwargs.get("axis"), spec, allow_tuple=True)
            ddof = self._literal_int(kwargs.get("ddof", SizeVal(Sym.const(0))), "`ddof`")
            keepdims = self._bool_arg(kwargs.get("keepdims"), "keepdims")
            shape = self._rule(sh.moments, x.shape, axis, ddof, keepdims, spec.name)
            self._note_reduction(x.shape, axis, keepdims)
            return TensorVal(shape, self._dtype_rule(spec, [x.dtype]))
        if kind == "reduce":
            axis = self._axis_arg(kwargs.get("axis"), spec, allow_tuple=True)
            keepdims = self._bool_arg(kwargs.get("keepdims"), "keepdims")
            shape = self._rule(sh.reduction, x.shape, axis, keepdims, spec.name)
            self._note_reduction(x.shape, axis, keepdims)
            return TensorVal(shape, self._dtype_rule(spec, [x.dtype]))
        if kind == "scan":
            axis = self._axis_arg(kwargs.get("axis"), spec, allow_tuple=False, allow_none=True)
            shape = self._rule(sh.scan, x.shape, axis, spec.name)
            return TensorVal(shape, self._dtype_rule(spec, [x.dtype]))
        if kind == "sort":
            axis = self._axis_arg(kwargs.get("axis", SizeVal(Sym.const(-1))), spec)
            self._bool_arg(kwargs.get("descending"), "descending")
            shape = self._rule(sh.along_axis, x.shape, axis, spec.name)
            result = TensorVal(shape, self._dtype_rule(spec, [x.dtype]), x.value_range)
            if spec.name == "argsort":  # positions along the axis: [0, size)
                result.value_range = (z3.IntVal(0), shape[axis % len(shape)].term)
            return result
        if kind == "softmax":
            axis = self._axis_arg(kwargs.get("axis", SizeVal(Sym.const(-1))), spec)
            shape = self._rule(sh.along_axis, x.shape, axis, spec.name)
            return TensorVal(shape, self._dtype_rule(spec, [x.dtype]))
        if kind == "cast":
            target = kwargs.get("dtype")
            if not isinstance(target, DTypeVal):
                raise _RuleFailedError("GPU036", "`astype` takes a dtype such as `float32`")
            return TensorVal(x.shape, target.dtype, self._cast_range(x, target.dtype))
        if kind == "reshape":
            sizes = self._sizes(positional, spec.spelling)
            return TensorVal(self._rule(sh.reshape, x.shape, sizes), x.dtype, x.value_range)
        if kind == "transpose":
            axes = None
            if positional:
                items = (
                    positional[0].items
                    if (len(positional) == 1 and isinstance(positional[0], TupleVal))
                    else positional
                )
                axes = [self._literal_int(v, "a transpose axis") for v in items]
            return TensorVal(self._rule(sh.transpose, x.shape, axes), x.dtype, x.value_range)
        raise _RuleFailedError(
            "GPU030", f"`{spec.spelling}` is not supported here"
        )  # pragma: no cover

    def _note_reduction(self, shape: tuple[Sym, ...], axis: Any, keepdims: bool) -> None:
        """Remember a reduction that drops axes, for `reduction_notes`."""
        if keepdims or axis is None:
            return
        axes = axis if isinstance(axis, tuple) else (axis,)
        if not shape:
            return
        self.reductions[self._visiting] = (shape, tuple(a % len(shape) for a in axes))

    def _elementwise(self, spec: ops.OpSpec, operands: list) -> TensorVal:
        kinds = [self._operand_kind(v, spec) for v in operands]
        dtype = self._dtype_rule(spec, kinds)
        shapes = [v.shape for v in operands if isinstance(v, TensorVal)]
        result = TensorVal(self._rule(sh.broadcast, *shapes), dtype)
        if dtype.is_integer and spec.name in ("minimum", "maximum", "clip"):
            result.value_range = self._clamped_range(spec.name, operands)
        return result

    def _value_range(self, v: Any) -> tuple[Any, Any] | None:
        """[lo, hi) of an integer operand: a tensor's `Range` or its dtype, an int, a size."""
        if isinstance(v, TensorVal):
            if v.value_range is not None:
                return v.value_range
            if v.dtype.name == "int32":
                return z3.IntVal(-(2**31)), z3.IntVal(2**31)
            return (z3.IntVal(0), z3.IntVal(2**32)) if v.dtype.name == "uint32" else None
        if isinstance(v, SizeVal):
            return v.sym.term, v.sym.term + 1
        if isinstance(v, ScalarVal) and type(v.value) is int:
            return z3.IntVal(v.value), z3.IntVal(v.value + 1)
        return None

    def _cast_range(self, x: TensorVal, target: DType) -> tuple[Any, Any] | None:
        """The `Range` an integer cast keeps: all of it when every value fits the target
        dtype (0..V-1 as uint32), none when a value could wrap (-1 is 4294967295 as uint32)."""
        if x.value_range is None or not target.is_integer:
            return None

        def span(dtype: DType) -> tuple[int, int]:
            bits = 8 * dtype.itemsize
            return (0, 2**bits) if dtype.kind == "u" else (-(2 ** (bits - 1)), 2 ** (bits - 1))

        (lo, hi), (src_lo, src_hi), (dst_lo, dst_hi) = x.value_range, span(x.dtype), span(target)
        value = z3.Int("cast!value")
        held = z3.And(value >= lo, value < hi, value >= src_lo, value < src_hi)
        fits = self.prover.prove(z3.Implies(held, z3.And(value >= dst_lo, value < dst_hi)))
        return x.value_range if fits.status == PROVEN else None

    def _clamped_range(self, name: str, operands: list) -> tuple[Any, Any] | None:
        """`minimum`/`maximum`/`.clip` of integers keep their result in a known interval,
        so `table[minimum(maximum(ids, 0), V - 1)]` is proven as the fix suggests."""
        ranges = [self._value_range(v) for v in operands]
        if any(r is None for r in ranges):
            return None

        def pick(op: str, a: Any, b: Any) -> Any:
            return z3.If(a >= b, a, b) if op == "max" else z3.If(a <= b, a, b)

        def combine(op: str, a: tuple, b: tuple) -> tuple:
            # the max of x in [a0, a1) and y in [b0, b1) lies in [max(a0, b0), max(a1, b1))
            return pick(op, a[0], b[0]), pick(op, a[1], b[1])

        if name == "clip":  # x.clip(lo, hi) = minimum(maximum(x, lo), hi)
            return combine("min", combine("max", ranges[0], ranges[1]), ranges[2])
        return combine("max" if name == "maximum" else "min", ranges[0], ranges[1])

    def _scalar_math(self, spec: ops.OpSpec, kwargs: dict) -> ScalarVal:
        """`math.sqrt(D)`: Python's function of one scalar or size, a float. Python raises
        on a domain error (`math.log(0)`) where the GPU would give nan or -inf, so a size
        argument must be proven in the domain for every admissible size."""
        if "x" not in kwargs:
            raise _RuleFailedError("GPU036", f"`{spec.spelling}` takes one argument")
        x = kwargs["x"]
        if isinstance(x, TensorVal):
            method = spec.name.removeprefix("math_")
            raise _RuleFailedError(  # the shim: a tensor is no Python number (GPU030)
                "GPU030",
                f"`{spec.spelling}` takes a Python scalar or a size, not a tensor; "
                f"for a tensor write `x.{method}()`",
            )
        if isinstance(x, SizeVal):
            low = {"math_sqrt": 0, "math_log": 1}.get(spec.name)
            if low is not None:
                what = "negative" if low == 0 else "zero or negative"
                self._rule(
                    lambda alg: alg.require(
                        alg.le(low, x.sym),
                        "GPU036",
                        f"`{spec.spelling}` of {{}}, which may be {what} (Python raises "
                        "a math domain error)",
                        x.sym,
                    )
                )
        elif not isinstance(x, ScalarVal):
            raise _RuleFailedError("GPU036", f"`{spec.spelling}` takes a Python scalar or a size")
        return ScalarVal("float")

    def _create(self, spec: ops.OpSpec, kwargs: dict) -> TensorVal:
        if "shape" not in kwargs:
            raise _RuleFailedError("GPU036", f"`{spec.spelling}` needs a shape")
        shape_arg = kwargs["shape"]
        items = shape_arg.items if isinstance(shape_arg, TupleVal) else [shape_arg]
        sizes = self._sizes(items, spec.spelling)
        if spec.name == "full":
            fill = kwargs.get("fill_value")
            if not isinstance(fill, (SizeVal, ScalarVal)):
                raise _RuleFailedError("GPU036", "`full` needs a scalar fill value")
        dtype = kwargs.get("dtype", DTypeVal(float32))
        if not isinstance(dtype, DTypeVal):
            raise _RuleFailedError(
                "GPU036", f"the `dtype` of `{spec.spelling}` must be a dtype name"
            )
        return TensorVal(self._rule(sh.creation, sizes), dtype.dtype)

    def _gather(
        self, x: TensorVal, idx: TensorVal, axis: int, along: bool, spelling: str, node: dict
    ) -> TensorVal:
        """`x[idx]` (rows along axis 0) or `take_along_axis(x, idx, axis)`, as NumPy.

        The obligation: every value `idx` may hold indexes `x`'s axis. An integer
        parameter's `Range(lo, hi)` bounds them (the call checks it); without one they
        are anything in the dtype, and the counterexample names such a value.
        """
        if not idx.dtype.is_integer:
            raise _RuleFailedError(
                "GPU020", f"the index of `{spelling}` must hold int32 or uint32, not {idx.dtype}"
            )
        rank = len(x.shape)
        if rank == 0:
            raise _RuleFailedError("GPU019", f"`{spelling}` gathers from a tensor of rank 0")
        if along:
            if not -rank <= axis < rank:
                raise _RuleFailedError(
                    "GPU014", f"axis {axis} is out of range for a tensor of rank {rank}"
                )
            axis %= rank
            if len(idx.shape) != rank:
                raise _RuleFailedError(
                    "GPU010",
                    f"`{spelling}` needs an index of the same rank as the tensor "
                    f"({len(idx.shape)} vs {rank})",
                )
            for k in range(rank):
                if k == axis:
                    continue
                self._prove_all(
                    [
                        Obligation(
                            idx.shape[k].term == x.shape[k].term,
                            "GPU010",
                            f"`{spelling}`: the index has size {idx.shape[k].text} on axis {k}, "
                            f"the tensor {x.shape[k].text}",
                            (),
                        )
                    ]
                )
            shape = idx.shape
        else:
            shape = (*idx.shape, *x.shape[1:])
        size = x.shape[axis]
        value = z3.Int(f"index!{node['span'].line}:{node['span'].column}")
        lo, hi = idx.value_range or (
            (z3.IntVal(-(2**31)), z3.IntVal(2**31))
            if idx.dtype.name == "int32"
            else (z3.IntVal(0), z3.IntVal(2**32))
        )
        claim = z3.Implies(z3.And(value >= lo, value < hi), z3.And(value >= 0, value < size.term))
        verdict = self.prover.prove(claim, (("index", value),))
        if verdict.status == REFUTED:
            fix = (
                f"declare the index's values with `Range(0, {size.text})` last in its type "
                f"(`Tensor[int32, ..., Range(0, {size.text})]`; the call checks them), or clamp "
                f"it with `minimum(maximum(idx, 0), {size.text} - 1)`"
            )
            raise _RuleFailedError(
                "GPU018",
                f"an index in `{node['text']}` may be out of bounds for axis {axis} with size "
                f"{size.text}",
                labels=verdict.labels,
                counterexample=verdict.counterexample,
                extra_fix=fix,
            )
        if verdict.status != PROVEN:
            raise _RuleFailedError(
                "GPU050", f"could not prove the index of `{spelling}` in bounds ({verdict.reason})"
            )
        # the gathered values are `x`'s own, so they keep its `Range`
        return TensorVal(shape, x.dtype, x.value_range)

    def _arange(self, spec: ops.OpSpec, kwargs: dict) -> TensorVal:
        n = kwargs.get("n")
        if not isinstance(n, SizeVal):
            raise _RuleFailedError(
                "GPU036", "the size of `arange()` must be an int, a dim or `x.shape[i]`"
            )
        dtype = kwargs.get("dtype", DTypeVal(int32))
        if not isinstance(dtype, DTypeVal):
            raise _RuleFailedError("GPU036", "the `dtype` of `arange()` must be a dtype name")
        try:
            out = dr.iota(spec.spelling, dtype.dtype)
        except sh.RuleError as err:
            raise _RuleFailedError(err.code, err.message) from None
        return TensorVal(self._rule(sh.arange, n.sym), out)

    def _join(self, spec: ops.OpSpec, kwargs: dict) -> TensorVal:
        parts = kwargs.get("tensors")
        if not isinstance(parts, TupleVal) or not parts.items:
            raise _RuleFailedError(
                "GPU036",
                f"`{spec.spelling}` takes a tuple or list of tensors: `{spec.name}([a, b])`",
            )
        tensors = [self._tensor(v, spec.spelling) for v in parts.items]
        axis = self._literal_int(
            kwargs.get("axis", SizeVal(Sym.const(0))), f"the axis of `{spec.spelling}`"
        )
        shape = self._rule(sh.join, [t.shape for t in tensors], axis, spec.name == "stack")
        return TensorVal(shape, self._dtype_rule(spec, [t.dtype for t in tensors]))

    # -- argument helpers

    def _tensor(self, value: Any, spelling: str) -> TensorVal:
        if not isinstance(value, TensorVal):
            raise _RuleFailedError("GPU036", f"`{spelling}` needs a tensor operand")
        return value

    def _operand_kind(self, value: Any, spec: ops.OpSpec) -> DType | str:
        if isinstance(value, TensorVal):
            return value.dtype
        if isinstance(value, SizeVal):
            return "int"
        if isinstance(value, ScalarVal):
            return value.kind
        raise _RuleFailedError("GPU036", f"`{spec.spelling}` cannot take this operand")

    def _dtype_rule(self, spec: ops.OpSpec, kinds: list) -> DType:
        try:
            return spec.dtype_rule(spec.spelling, kinds)
        except sh.RuleError as err:
            raise _RuleFailedError(err.code, err.message) from None

    def _literal_int(self, value: Any, what: str) -> int:
        if isinstance(value, SizeVal) and value.sym.value is not None:
            return value.sym.value
        raise _RuleFailedError("GPU036", f"{what} must be an int literal")

    def _axis_arg(
        self, value: Any, spec: ops.OpSpec, allow_tuple: bool = False, allow_none: bool = False
    ) -> Any:
        if value is None or isinstance(value, NoneVal):
            if allow_tuple or allow_none:
                return None
            raise _RuleFailedError(
                "GPU036", f"the axis of `{spec.spelling}` must be an int literal"
            )
        if allow_tuple and isinstance(value, TupleVal):
            return tuple(self._literal_int(v, "an axis") for v in value.items)
        return self._literal_int(value, f"the axis of `{spec.spelling}`")

    def _bool_arg(self, value: Any, name: str) -> bool:
        if value is None:
            return False
        if isinstance(value, ScalarVal) and isinstance(value.value, bool):
            return value.value
        raise _RuleFailedError("GPU036", f"`{name}` must be True or False")

    def _sizes(self, values: list, spelling: str) -> list[Sym]:
        if len(values) == 1 and isinstance(values[0], TupleVal):
            values = values[0].items
        out = []
        for v in values:
            if not isinstance(v, SizeVal):
                raise _RuleFailedError(
                    "GPU036", f"the sizes of `{spelling}` must be ints, dims or `x.shape[i]`"
                )
            out.append(v.sym)
        return out

    def _index_size(self, value: Any) -> Sym:
        if isinstance(value, SizeVal):
            return value.sym
        if isinstance(value, ScalarVal) and value.kind == "int":
            raise _RuleFailedError(
                "GPU026",
                "a slice bound or index is a run-time `int`; a tensor-level kernel's shapes "
                "are sizes (ints, dims, `x.shape[i]`)",
            )
        raise _RuleFailedError(
            "GPU036",
            "an index must be an int, a dim or `x.shape[i]`; gather with a tensor of indices "
            "as `x[idx]` (rows, the only index) or `take_along_axis(x, idx, axis)`",
        )


_DUNDER = {"+": "__add__", "-": "__sub__", "*": "__mul__", "//": "__floordiv__", "%": "__mod__"}


def reduction_notes(
    checker: KernelChecker, node: dict[str, Any], inputs: list
) -> tuple[tuple[Label, ...], str | None]:
    """Where a broadcast that failed (GPU010) has an operand made by a reduction that drops
    an axis (`m = x.mean(axis=-1)` a few lines up, then `x - m`): a note at the reduction
    saying what `keepdims=True`, or reducing the other axis, would have given, when that
    shape broadcasts against the other operands; and the fix to write."""
    tensors = [(j, v) for j, v in zip(node["inputs"], inputs, strict=False)
               if isinstance(v, TensorVal)]  # fmt: skip
    notes: list[Label] = []
    fix = None
    for j, value in tensors:
        origin = _reduction_origin(checker, j, value.shape)
        if origin is None:
            continue
        shape, axes = checker.reductions[origin]
        others = [v.shape for k, v in tensors if k != j]
        if not others:
            continue
        red = checker.kg.graph.nodes[origin]
        text = red["text"]
        kept = tuple(Sym.const(1) if a in axes else s for a, s in enumerate(shape))
        dropped = tuple(s for a, s in enumerate(shape) if a not in axes)
        # keeping the axis fixes it where the result is no larger than the other operands
        # (`x - m` with m [N, 1] against x [N, D]); else reducing another axis may
        if len(kept) <= max(len(o) for o in others) and _broadcasts([kept, *others]):
            axis_text = ", ".join(str(a) for a in axes)
            notes.append(Label(red["span"], (
                f"`{text}` drops axis {axis_text}: shape {_shape_text(dropped)}; with "
                f"`keepdims=True` it is {_shape_text(kept)}, which broadcasts"
            )))  # fmt: skip
            fix = f"keep the reduced axis: `{_with_keepdims(text)}`"
            continue
        if len(axes) == 1 and len(shape) >= 2:
            for b in range(len(shape)):
                other_axis = tuple(s for a, s in enumerate(shape) if a != b)
                if b != axes[0] and _broadcasts([other_axis, *others]):
                    notes.append(Label(red["span"], (
                        f"`{text}` reduces axis {axes[0]} to shape {_shape_text(dropped)}; "
                        f"over axis {b} it would be {_shape_text(other_axis)}, which broadcasts"
                    )))  # fmt: skip
                    fix = f"reduce over the other axis (`axis={b}`), or transpose the operand"
                    break
    return tuple(notes), fix


def _reduction_origin(checker: KernelChecker, n: int, shape: tuple[Sym, ...]) -> int | None:
    """The reduction (dropping axes) an operand's shape comes from, through element-wise ops
    and casts that keep that shape; None when the shape has another origin."""
    g = checker.kg.graph
    for _ in range(8):
        if n in checker.reductions:
            return n
        node = g.nodes[n]
        spec = node.get("spec")
        kind = spec.kind if spec is not None else node["kind"]
        if node["kind"] == "binop" and node.get("symbol") != "@":
            kind = "elementwise"
        if node["kind"] == "unop":
            kind = "elementwise"
        if kind not in ("elementwise", "cast"):
            return None
        same = [
            i for i in node["inputs"]
            if isinstance(v := checker.values.get(i), TensorVal)
            and _shape_text(v.shape) == _shape_text(shape)
        ]  # fmt: skip
        if len(same) != 1:
            return None
        n = same[0]
    return None


def _same_sym(a: Sym, b: Sym) -> bool:
    if a.expr is not None and b.expr is not None:
        return same_size(a.expr, b.expr)
    return a.text == b.text


def _broadcasts(shapes: list[tuple[Sym, ...]]) -> bool:
    """Whether shapes broadcast by their sizes as written: equal, or 1."""
    rank = max(len(s) for s in shapes)
    for k in range(1, rank + 1):
        sizes = [s[-k] for s in shapes if len(s) >= k and s[-k].value != 1]
        if any(not _same_sym(sizes[0], s) for s in sizes[1:]):
            return False
    return True


def _with_keepdims(text: str) -> str:
    """`x.mean(axis=-1)` spelled with `keepdims=True`."""
    if text.endswith(")") and "keepdims" not in text:
        inner = text[:-1].rstrip()
        return inner + (", keepdims=True)" if not inner.endswith("(") else "keepdims=True)")
    return text


def callable_size_note(param: str, axis: int, size: Size) -> str:
    """The fact `_assume_callable` adds, as `explain` shows it."""
    return f"`{param}` axis {axis} is {size} here, so {size} >= 0 in any call"


def _ann_text(ann: TensorAnnotation) -> str:
    return "[" + ", ".join(str(d) for d in ann.dims) + "]"
