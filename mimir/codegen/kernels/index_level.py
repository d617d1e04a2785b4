"""Index-level kernels (`@gpu(grid=...)`) to one IR kernel: one thread per program id.

The checker has already proven every subscript in bounds and every store free
of races (`mimir.constraints.index_kernels`), so the body is translated
statement by statement, without guards of its own:

- the grid is flattened (row-major, `program_id(0)` slowest, as the shim's
  loop) onto 256-thread workgroups, and a guard drops the threads past its end;
- integers that index (`program_id`, loop variables, dims, arithmetic on
  them) are i32 registers, with Python's floor `//` and `%` (the op table's
  lowering, `mimir.codegen.lower`);
- elements are computed with the same lowering as tensor-level kernels, in the
  dtype the op table's dtype rules give (weak Python scalars included), and
  stores convert to the tensor's dtype as the checker allowed;
- every local becomes one mutable variable declared at the top with the type
  all its assignments join to (found by a first, type-only pass), so values
  assigned in a loop or a branch are visible after it, as in Python;
- `and`, `or` and chained comparisons short-circuit as in Python, with branches on a
  bool variable (an operand's loads were proven only where Python evaluates it);
- `for v in range(a, b, step)` runs `cdiv(b - a, step)` iterations when
  `b > a` (none otherwise) and computes `v = a + k * step`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from mimir import ops
from mimir.codegen import lower as lw
from mimir.codegen import sizes as sz
from mimir.codegen.builder import Body, group_id, ibin, linearise, size_ir, u32, unravel
from mimir.codegen.helpers import const, select
from mimir.codegen.ir import (
    Assign,
    AtomicAdd,
    Binary,
    BufferParam,
    Builtin,
    Cast,
    Expr,
    Kernel,
    Load,
    Store,
    Uniform,
    Var,
    VarDecl,
    all_expressions,
    walk_statements,
)
from mimir.codegen.kernels.context import reg_dtype
from mimir.codegen.refusal import BACKEND_CANNOT_EMIT, CANNOT_SCHEDULE, RefusalError
from mimir.codegen.schedule import refuse_oversized
from mimir.codegen.schedule.layout import WG
from mimir.codegen.schedule.plan import BufferSpec, Grid, Schedule
from mimir.dims import Dim
from mimir.dtypes import BY_NAME as DTYPES
from mimir.dtypes import DType, bool_, default_dtype, float32, int32
from mimir.parse.graph import BINARY_SYMBOLS, gelu_call, is_gelu
from mimir.parse.module import (
    MATH_CONSTANTS,
    ScalarAnnotation,
    TensorAnnotation,
    int_literal,
    read_size,
)

I32 = "i32"


@dataclass(frozen=True)
class _Val:
    """A value in the kernel: an index (i32), an element of `kind`, or a condition."""

    expr: Expr | None  # None in the type-only pass
    kind: str  # "index" | "elem" | "cond"
    dtype: DType | str = int32  # elements: a dtype, or a weak kind ("int" | "float" | "bool")

    @property
    def concrete(self) -> DType:
        if self.kind == "cond":
            return bool_
        if self.kind == "index":
            return int32
        return self.dtype if isinstance(self.dtype, DType) else default_dtype(self.dtype)


def build_index_level(kernel: Any) -> tuple[Schedule, list[Kernel]]:
    """The schedule (buffers, uniform, one launch) and the IR kernel of an index-level kernel."""
    return _Lowering(kernel).run()


class _Lowering:
    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel
        self.kg = kernel.graph
        self.info = kernel.info
        self.fn: ast.FunctionDef = self.kg.kernel.node
        self.tensors: dict[str, TensorAnnotation] = {}
        self.scalars: dict[str, ScalarAnnotation] = {}
        for name, ann, _ in self.kg.params:
            if isinstance(ann, TensorAnnotation):
                self.tensors[name] = ann
            elif isinstance(ann, ScalarAnnotation):
                self.scalars[name] = ann
        self.grid = [read_size(self.info, e) for e in self.kg.kernel.grid.elts]
        self.body = Body()
        self.locals: dict[str, Var] = {}
        self.types: dict[str, _Val] = {}
        self.emit = False
        self.pids: list[Expr] = []
        self.stored: set[str] = set()

    # -- the kernel

    def run(self) -> tuple[Schedule, list[Kernel]]:
        for name, ann in self.tensors.items():
            if ann.dtype.name == "bfloat16":
                raise RefusalError(
                    BACKEND_CANNOT_EMIT,
                    f"`{name}` is bfloat16, which index-level kernels do not read or write on "
                    "any backend (msl, wgsl, ptx, spirv): a program storing one element would "
                    "share its 32-bit word with another's; use a tensor-level kernel, which "
                    "reads and stores bfloat16, or pass float32",
                    self.kg.kernel.span,
                )
        dims = self._dims()
        self._block(self.fn.body)  # type-only pass: the joined type of every local
        self._block(self.fn.body)
        self.emit = True
        total = sz.product(list(self.grid))
        dispatch = sz.dispatch(sz.cdiv(total, WG), {d.name: d for d in dims})
        g = group_id(self.body, dispatch)
        flat = self.body.let(ibin("+", ibin("*", g, u32(WG)), Builtin("local_x")), "pid")
        with self.body.if_(Binary("<", flat, size_ir(total), "bool")):
            axes = unravel(self.body, flat, tuple(self.grid))
            self.pids = [self.body.let(Cast(a, I32), "pid") for a in axes]
            for name, val in self.types.items():
                t = lw.REG[reg_dtype(val.concrete)]
                var = self.body.fresh(name, t)
                self.body.emit(VarDecl(var, const(0 if t != "bool" else False, t)))
                self.locals[name] = var
            self._block(self.fn.body)
        body = self.body.root
        exprs = list(all_expressions(body))
        atomic = {s.array for s in walk_statements(body) if isinstance(s, AtomicAdd)}
        stored = {s.array for s in walk_statements(body) if isinstance(s, Store)}
        loaded = {e.array for e in exprs if isinstance(e, Load)}
        plain = sorted(atomic & (stored | loaded))
        if plain:
            raise RefusalError(
                CANNOT_SCHEDULE,
                f"`{plain[0]}` is updated with `atomic_add` and also read or written plainly; "
                "a buffer `atomic_add` targets is only updated with `atomic_add` in its kernel "
                "(outputs start zeroed: drop the plain store, or write it from another kernel)",
                self.kg.kernel.span,
            )
        # an output the kernel also reads: each program reads back only elements it wrote
        # itself (the checker's GPU029 proves it), so the buffer is an output bound read-write
        stored |= atomic
        buffers_spec = [
            BufferSpec(
                n,
                "inout" if a.inout else "output" if n in stored else "input",
                a.dtype,
                tuple(a.dims),
                None if n in stored else a.value_range,
            )
            for n, a in self.tensors.items()
        ]
        refuse_oversized(dims, buffers_spec, self.kg.kernel.span, total)
        fields = [(d.name, "u32") for d in dims] + [
            (n, "i32" if a.kind == "int" else "f32") for n, a in self.scalars.items()
        ]
        ir = Kernel(
            name=f"{self.kg.name}_0_grid",
            what="grid",
            workgroup_size=(WG, 1, 1),
            workgroups=dispatch,
            buffers=[
                BufferParam(
                    b.name,
                    lw.STORAGE[b.dtype],
                    "read_write" if b.name in stored else "read",
                    atomic=b.name in atomic,
                )
                for b in buffers_spec
                if b.name in stored | loaded
            ],
            uniform_fields=fields,
            uses_uniform=any(isinstance(e, Uniform) for e in exprs),
            shared=[],
            body=body,
            helpers=lw.helpers_needed(exprs),
            origins={},
        )
        first = next(iter(sorted(self.kg.graph.nodes)), 0)
        plan = Grid(first, sorted(stored))
        s = Schedule(self.kg.name, dims, fields, buffers_spec, [plan], {}, self.kernel)
        return s, [ir]

    def _dims(self) -> list[Dim]:
        declared = self.info.dims
        found: list[Dim] = []
        for ann in self.tensors.values():
            for d in ann.dims:
                for dim in [] if isinstance(d, int) else d.dims():
                    if dim not in found:
                        found.append(declared[dim.name].dim if dim.name in declared else dim)
        for n in self.scalars:
            if any(d.name == n for d in found):
                raise RefusalError(
                    CANNOT_SCHEDULE,
                    f"the parameter `{n}` has the name of a dim; rename it",
                    self.kg.kernel.span,
                )
        return found

    # -- statements

    def _block(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            self._statement(stmt)

    def _statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Assign):
            value = self._expr(stmt.value)
            for target in stmt.targets:
                self._assign(target, value)
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            self._assign(stmt.target, self._expr(stmt.value))
        elif isinstance(stmt, ast.AugAssign):
            symbol = BINARY_SYMBOLS[type(stmt.op)]
            if isinstance(stmt.target, ast.Name):
                current = self._name(stmt.target.id)
            else:
                load = ast.Subscript(stmt.target.value, stmt.target.slice, ast.Load())
                current = self._expr(ast.copy_location(load, stmt.target))
            self._assign(stmt.target, self._binary(symbol, current, self._expr(stmt.value)))
        elif isinstance(stmt, ast.If):
            cond = self._expr(stmt.test)
            if not self.emit:
                self._block(stmt.body)
                self._block(stmt.orelse)
                return
            with self.body.if_(cond.expr):
                self._block(stmt.body)
            if stmt.orelse:
                with self.body.if_(lw.LOWERING["invert"]([cond.expr], "bool")):
                    self._block(stmt.orelse)
        elif isinstance(stmt, ast.For):
            self._for(stmt)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            self._atomic_add(stmt.value)
        # `pass`, docstrings and a bare `return` emit nothing

    def _atomic_add(self, call: ast.Call) -> None:
        """`atomic_add(out, index, value)` (the checker proved the index and the dtypes)."""
        target, index, value_node = call.args
        assert isinstance(target, ast.Name)
        dtype = self.tensors[target.id].dtype
        value = self._expr(value_node)
        if not self.emit:
            return
        element = ast.copy_location(ast.Subscript(target, index, ast.Store()), call)
        flat = self._flat(target.id, element)
        self.body.emit(AtomicAdd(target.id, flat, self._convert(value, dtype)))

    def _for(self, stmt: ast.For) -> None:
        assert isinstance(stmt.iter, ast.Call) and isinstance(stmt.target, ast.Name)
        args = [self._expr(a) for a in stmt.iter.args]
        name = stmt.target.id
        if not self.emit:
            self._assign(stmt.target, _Val(None, "index"))
            self._block(stmt.body)
            return
        start, stop = (_Val(const(0, I32), "index"), args[0]) if len(args) == 1 else args[:2]
        step = 1
        if len(args) == 3:
            step = _literal_int(stmt.iter.args[2])
        span = self.body.let(Binary("-", stop.expr, start.expr, I32), "n")
        count = self.body.let(
            select(
                Binary(">", span, const(0, I32), "bool"),
                Cast(
                    Binary(
                        "/", Binary("+", span, const(step - 1, I32), I32), const(step, I32), I32
                    ),
                    "u32",
                ),
                u32(0),
            ),
            "count",
        )
        with self.body.for_("k", u32(0), count, u32(1)) as k:
            value = Binary("+", start.expr, Binary("*", Cast(k, I32), const(step, I32), I32), I32)
            self.body.emit(Assign(self.locals[name], value))
            self._block(stmt.body)

    def _assign(self, target: ast.expr, value: _Val) -> None:
        if isinstance(target, ast.Name):
            old = self.types.get(target.id)
            self.types[target.id] = value if old is None else _join(old, value)
            if self.emit:
                var = self.locals[target.id]
                joined = self.types[target.id]
                self.body.emit(Assign(var, self._convert(value, joined.concrete)))
            return
        assert isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
        tensor = target.value.id
        dtype = self.tensors[tensor].dtype
        if not self.emit:
            return
        flat = self._flat(tensor, target)
        stored = lw.to_storage(self._convert(value, dtype), dtype)
        self.body.emit(Store(tensor, flat, stored))

    # -- expressions

    def _expr(self, node: ast.expr) -> _Val:
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, bool):
                return _Val(const(v, "bool"), "cond")
            if isinstance(v, int):
                return _Val(const(v, I32), "index")
            return _Val(const(float(v), "f32"), "elem", "float")
        if isinstance(node, ast.Name):
            return self._name(node.id)
        if isinstance(node, ast.BinOp):
            return self._binary(
                BINARY_SYMBOLS[type(node.op)], self._expr(node.left), self._expr(node.right)
            )
        if isinstance(node, ast.Compare):
            return self._compare(node)
        if isinstance(node, ast.BoolOp):
            is_and = isinstance(node.op, ast.And)
            first, *rest = node.values
            return self._short_circuit(
                is_and, self._expr(first), [lambda v=v: self._expr(v) for v in rest]
            )
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            operand = self._expr(node.operand)
            return _Val(self._e(lambda: lw.LOWERING["invert"]([operand.expr], "bool")), "cond")
        if isinstance(node, ast.UnaryOp):
            operand = self._expr(node.operand)
            if isinstance(node.op, ast.Invert) and operand.kind == "cond":
                return _Val(self._e(lambda: lw.LOWERING["invert"]([operand.expr], "bool")), "cond")
            symbol = "-" if isinstance(node.op, ast.USub) else "~"
            return self._element(ops.BY_UNARY_OPERATOR[symbol], [operand])
        if isinstance(node, ast.Attribute) and self.info.resolve(node) in MATH_CONSTANTS:
            return _Val(
                const(MATH_CONSTANTS[self.info.resolve(node) or ""], "f32"), "elem", "float"
            )
        if isinstance(node, ast.Subscript):
            base = node.value
            if isinstance(base, ast.Attribute) and base.attr == "shape":
                ann = self.tensors[base.value.id]  # type: ignore[union-attr]
                k = _literal_int(node.slice)
                return _Val(self._e(lambda: Cast(size_ir(ann.dims[k]), I32)), "index")
            assert isinstance(base, ast.Name)
            dtype = self.tensors[base.id].dtype
            value = self._e(
                lambda: lw.from_storage(
                    Load(base.id, self._flat(base.id, node), lw.STORAGE[dtype]), dtype
                )
            )
            return _Val(value, "elem", dtype)
        if isinstance(node, ast.Call):
            return self._call(node)
        raise RefusalError(
            CANNOT_SCHEDULE, f"`{ast.unparse(node)}` cannot be lowered", self.info.source.span(node)
        )

    def _compare(self, node: ast.Compare) -> _Val:
        """`a < b`, and a chain `a < b <= c` as Python's `a < b and b <= c` (`b` once)."""
        left = self._expr(node.left)
        pairs = list(zip(node.ops, node.comparators, strict=True))
        state = {"left": left}

        def compare(k: int) -> _Val:
            op, comparator = pairs[k]
            right = self._expr(comparator)
            if k + 1 < len(pairs) and self.emit:  # the next comparison reads it again
                right = _Val(self.body.let(right.expr, "cmp"), right.kind, right.dtype)
            result = self._binary(BINARY_SYMBOLS[type(op)], state["left"], right)
            state["left"] = right
            return result

        first = compare(0)
        if len(pairs) == 1:
            return first
        return self._short_circuit(
            True, first, [lambda k=k: compare(k) for k in range(1, len(pairs))]
        )

    def _short_circuit(self, is_and: bool, first: _Val, rest: list[Any]) -> _Val:
        """`first and r1 and ...` (`or`) evaluating each `r` only when Python would.

        The result is a bool variable, and each further operand is computed inside an
        `if` on it (nested, so a value bound in one operand is visible to the next): the
        checker proved an operand's subscripts only on that path, so a load in it must
        never run elsewhere. Branches, not `&&`/`||`, so SPIR-V and PTX short-circuit too.
        """
        if not self.emit:
            for make in rest:
                make()
            return _Val(None, "cond", bool_)
        result = self.body.var(first.expr, "and" if is_and else "or")

        def chain(k: int) -> None:
            if k == len(rest):
                return
            test = result if is_and else lw.LOWERING["invert"]([result], "bool")
            with self.body.if_(test):
                self.body.emit(Assign(result, rest[k]().expr))
                chain(k + 1)

        chain(0)
        return _Val(result, "cond", bool_)

    def _name(self, name: str) -> _Val:
        if name in self.types:
            val = self.types[name]
            var = self.locals.get(name)
            return _Val(var if self.emit else None, val.kind, val.dtype)
        if name in self.scalars:
            ann = self.scalars[name]
            dtype = int32 if ann.kind == "int" else float32
            return _Val(Uniform(name, lw.REG[dtype]), "elem", ann.kind)
        if name in self.info.dims:
            dim = self.info.dims[name].dim
            return _Val(Cast(Uniform(dim.name, "u32"), I32), "index")
        if name in self.info.constants:
            return _Val(const(self.info.constants[name], I32), "index")
        if name in self.info.sizes:  # module-level size arithmetic (`D_HID = 4 * D_IN`)
            size = self.info.sizes[name]
            return _Val(self._e(lambda: Cast(size_ir(size), I32)), "index")
        canonical = self.info.imported.get(name)
        if canonical in DTYPES:
            return _Val(None, "dtype", DTYPES[canonical])
        value = self.info.floats.get(name, MATH_CONSTANTS.get(canonical or ""))
        if value is not None:  # a module-level float constant, `from math import pi`
            return _Val(const(value, "f32"), "elem", "float")
        raise RefusalError(CANNOT_SCHEDULE, f"`{name}` cannot be lowered", self.kg.kernel.span)

    def _call(self, node: ast.Call) -> _Val:
        canonical = self.info.resolve(node.func)
        if canonical == "program_id":
            axis = _literal_int(node.args[0])
            return _Val(self.pids[axis] if self.emit else None, "index")
        args = [] if is_gelu(node) else [self._expr(a) for a in node.args]
        if canonical is not None:
            return self._element(ops.BY_FUNCTION[canonical], args)
        assert isinstance(node.func, ast.Attribute)
        receiver = self._expr(node.func.value)
        spec = ops.BY_METHOD[node.func.attr]
        if spec.name == "gelu":
            variant = gelu_call(node)  # the checker refused anything else
            assert variant is not None
            return self._element(variant, [receiver])
        if spec.kind == "cast":
            target = args[0].dtype
            assert isinstance(target, DType)
            return _Val(self._e(lambda: self._convert(receiver, target)), "elem", target)
        return self._element(spec, [receiver, *args])

    def _binary(self, symbol: str, a: _Val, b: _Val) -> _Val:
        if a.kind == "index" and b.kind == "index" and symbol in _INDEX_OPS:
            spec = ops.BY_OPERATOR[symbol]
            kind = "cond" if symbol in _COMPARISONS else "index"
            return _Val(
                self._e(lambda: lw.lower_element(spec.name, [a.expr, b.expr], int32, int32)), kind
            )
        if a.kind == "cond" and b.kind == "cond" and symbol in ("&", "|"):
            spec = ops.BY_OPERATOR[symbol]
            return _Val(
                self._e(lambda: lw.lower_element(spec.name, [a.expr, b.expr], bool_, bool_)), "cond"
            )
        return self._element(ops.BY_OPERATOR[symbol], [a, b])

    def _element(self, spec: ops.OpSpec, operands: list[_Val]) -> _Val:
        kinds = [_kind(v) for v in operands]
        dtype = spec.dtype_rule(spec.spelling, kinds)
        if spec.compute_in_common:
            compute = [ops.dtype_rules.common(spec.spelling, kinds)] * len(operands)
        elif spec.name == "where":
            compute = [bool_] + [dtype] * (len(operands) - 1)
        else:
            compute = [dtype] * len(operands)
        weak = all(isinstance(k, str) for k in kinds) and not spec.compute_in_common
        kind: DType | str = dtype
        if weak:
            kind = "bool" if dtype.is_bool else "float" if dtype.is_float else "int"
        result_kind = "cond" if dtype == bool_ else "elem"

        def make() -> Expr:
            args = [self._convert(v, c) for v, c in zip(operands, compute, strict=True)]
            return lw.lower_element(spec.name, args, compute[-1], dtype)

        return _Val(self._e(make), result_kind, kind if result_kind == "elem" else bool_)

    # -- helpers

    def _e(self, make: Any) -> Expr | None:
        return make() if self.emit else None

    def _convert(self, v: _Val, dtype: DType) -> Expr:
        assert v.expr is not None
        return lw.convert(v.expr, v.concrete, dtype)

    def _flat(self, tensor: str, node: ast.Subscript) -> Expr:
        ann = self.tensors[tensor]
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        axes = []
        for item in items:
            v = self._expr(item)
            index = v.expr if v.kind == "index" else self._convert(v, int32)
            axes.append(Cast(index, "u32"))
        return self.body.let(linearise(axes, tuple(ann.dims)), "at")


def _kind(v: _Val) -> DType | str:
    if v.kind == "index":
        return "int"
    if v.kind == "cond":
        return "bool"
    return v.dtype


def _join(a: _Val, b: _Val) -> _Val:
    if a.kind == b.kind == "index" or a.kind == b.kind == "cond":
        return a
    ka, kb = _kind(a), _kind(b)
    if isinstance(ka, DType) and isinstance(kb, DType):
        return _Val(None, "elem", ka if ka == kb else ops.dtype_rules.common("=", [ka, kb]))
    if isinstance(ka, DType) or isinstance(kb, DType):
        return _Val(None, "elem", ka if isinstance(ka, DType) else kb)
    weak = "float" if "float" in (ka, kb) else "int" if "int" in (ka, kb) else "bool"
    return _Val(None, "elem", weak)


def _literal_int(node: ast.expr) -> int:
    value = int_literal(node)  # the checker accepted only literals here (`x.shape[-1]` too)
    assert value is not None
    return value


_INDEX_OPS = {"+", "-", "*", "//", "%", "<", "<=", ">", ">=", "==", "!="}
_COMPARISONS = {"<", "<=", ">", ">=", "==", "!="}
