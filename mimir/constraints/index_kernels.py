"""Index-level kernels (`@gpu(grid=(M, N))`): bounds and race proofs.

An index-level kernel writes its outputs element by element. Its body is
executed symbolically once, for an arbitrary program id and arbitrary loop
iterations: `program_id(a)` is a Z3 variable in `[0, grid[a])`, a loop variable
one in `[start, stop)`, and each `if` adds its condition to the path. So

- every subscript is an obligation `0 <= index < size` under the path, proven
  for every admissible size, every program id and every iteration;
- every store is an obligation that two *different* program ids never write the
  same element, and never write an element another program id reads (the body
  is instantiated twice, with primed copies of every thread-local variable).

Integer locals changed inside a loop are havocked (replaced by an unconstrained
variable) after it: sound, never a missed out-of-bounds, at the price of asking
for a guard the code may not need; after an `if`, a local is `If(cond, then,
else)`. Unlike NumPy, a negative index is out of bounds here (a GPU does not
wrap it).

A loaded integer element is a value, not an unknown: a variable in its dtype's
range (one value per element of a tensor the kernel never writes, however often and
through whichever index it is read), carried through comparisons (path conditions), `minimum`,
`maximum`, `where`, `%` and `//` (Python's floor semantics with `x % 0 == 0`,
exactly as the shim and every backend compute them) and `+ - *` (wrapping as
32-bit two's complement past the dtype's range, as the shim and a GPU do). Index
arithmetic is 32-bit on every backend, so a dim is assumed at most 2**31 - 1. So
`y = labels[i]` under `if 0 <= y < C:` (or `0 <= y and y < C`, or `(0 <= y) & (y < C)`),
`minimum(maximum(y, 0), C - 1)` and `y % C` all index an axis of size C in bounds.

`and`, `or` and chained comparisons short-circuit as in Python: an operand is executed
(its subscripts proven, its reads recorded) under the path on which Python evaluates it,
and every backend lowers them with branches, so that path is also the only one on which
the GPU evaluates it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from mimir import ops
from mimir.constraints.checker import SHIFT_BITS, SHIFTS, KernelChecker
from mimir.diagnostics.diagnostic import Diagnostic, Label, Span
from mimir.dims import Dim
from mimir.dtypes import BY_NAME as DTYPES
from mimir.dtypes import DType, default_dtype, promote_weak
from mimir.ops.shapes import RuleError
from mimir.parse import subset
from mimir.parse.graph import BINARY_SYMBOLS, KernelGraph, gelu_call, is_gelu
from mimir.parse.module import (
    MATH_CONSTANTS,
    ModuleInfo,
    ScalarAnnotation,
    TensorAnnotation,
    int_literal,
    read_size,
)
from mimir.solve.prover import PROVEN, REFUTED
from mimir.solve.z3lib import z3

# ---------------------------------------------------------------- values


@dataclass
class Idx:
    """An integer known symbolically: a program id, a loop variable, a dim, arithmetic."""

    term: z3.ArithRef
    text: str


@dataclass
class Elem:
    """An element value: a tensor dtype, or a weak Python scalar kind.

    `term` is the value of an integer element as a Z3 term (in its dtype's range),
    or None where it is not tracked (floats, bools).
    """

    dtype: DType | str
    term: z3.ArithRef | None = None


@dataclass
class Cond:
    term: z3.BoolRef


@dataclass
class TensorRef:
    name: str
    shape: tuple[Any, ...]  # Syms
    dtype: DType
    # `Range(lo, hi)` of an input the kernel never writes: every element v has lo <= v < hi
    value_range: tuple[z3.ArithRef, z3.ArithRef] | None = None


@dataclass
class ShapeOf:
    tensor: TensorRef


@dataclass
class _Access:
    tensor: str
    index: tuple[z3.ArithRef, ...]
    path: tuple[z3.BoolRef, ...]
    span: Span
    text: str
    store: bool
    atomic: bool = False  # `atomic_add`: never races with another atomic_add
    # the variables of the loops around the access, outermost first
    loops: tuple[z3.ArithRef, ...] = ()


@dataclass
class _Scope:
    path: list[z3.BoolRef] = field(default_factory=list)
    show: list[tuple[str, z3.ArithRef]] = field(default_factory=list)
    loops: list[z3.ArithRef] = field(default_factory=list)  # enclosing loops' variables


class _RefusedError(Exception):
    def __init__(self, code: str, message: str, node: ast.AST) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.node = node


_INT_OPS = {"+", "-", "*", "//", "%"}
_SILENT = ""  # a refusal already reported (or poisoned upstream): stop the statement quietly
_COMPARE = {"<", "<=", ">", ">=", "==", "!="}


def _arith(symbol: str, a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef:
    # Z3's `/` and `%` are Euclidean; for the positive divisors proven below they
    # equal Python's floor division and modulo.
    return {
        "+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
        "//": lambda: a / b, "%": lambda: a % b,
    }[symbol]()  # fmt: skip


_INT_RANGE = {"int32": (-(2**31), 2**31 - 1), "uint32": (0, 2**32 - 1)}


def _int_range(kind: DType | str) -> tuple[int, int] | None:
    """The values an integer element can hold (a weak Python int is an i32 register)."""
    name = kind.name if isinstance(kind, DType) else {"int": "int32"}.get(kind)
    return _INT_RANGE.get(name or "")


def _floor_mod(a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef:
    # Python's `%` (the shim, and every backend's mimir_mod helper): the sign of the
    # divisor, and `x % 0 == 0`. Z3's `%` is Euclidean (never negative): equal for b > 0.
    euclid = a % b
    negative = z3.If(euclid == 0, 0, euclid + b)
    return z3.If(b == 0, 0, z3.If(b > 0, euclid, negative))


def _compare(symbol: str, a: z3.ArithRef, b: z3.ArithRef) -> z3.BoolRef:
    return {
        "<": lambda: a < b, "<=": lambda: a <= b, ">": lambda: a > b,
        ">=": lambda: a >= b, "==": lambda: a == b, "!=": lambda: a != b,
    }[symbol]()  # fmt: skip


class IndexKernelChecker(KernelChecker):
    """Symbolic execution of one index-level kernel body."""

    def __init__(self, info: ModuleInfo, kg: KernelGraph, timeout_ms: int) -> None:
        super().__init__(info, kg, timeout_ms)
        self.src = info.source
        self.env: dict[str, Any] = {}
        self.thread_vars: list[z3.ArithRef] = []
        self.pids: list[z3.ArithRef] = []  # program_id(0), program_id(1), ...
        self.accesses: list[_Access] = []
        self.grid: list[Any] = []
        self._fresh = 0
        # A tensor the kernel never writes holds the same values for its whole run: its
        # integer elements are an uninterpreted function of the index, so two reads of one
        # element are one value (`0 <= labels[i] < C` guards `labels[i]`, and
        # `labels[N - 1 - i]` too where N - 1 - i == i), in every program id.
        self.written = {
            n.value.id
            for n in ast.walk(kg.kernel.node)
            if isinstance(n, ast.Subscript)
            and isinstance(n.ctx, ast.Store)
            and isinstance(n.value, ast.Name)
        } | {
            n.args[0].id
            for n in ast.walk(kg.kernel.node)
            if isinstance(n, ast.Call)
            and info.resolve(n.func) == "atomic_add"
            and n.args
            and isinstance(n.args[0], ast.Name)
        }
        self.memory: dict[str, Any] = {}

    # -- entry point

    def run(self) -> list[Diagnostic]:
        for p in self.kg.problems:
            self._emit(p.code, p.message, p.span)
        self._declare_dims()
        if self.kg.returns is not None:
            self._emit(
                "GPU033",
                "an index-level kernel writes its outputs and returns nothing; "
                "remove the return annotation",
                self.src.span(self.kg.kernel.node.returns),
            )
        for name, ann, _ in self.kg.params:
            if isinstance(ann, TensorAnnotation):
                ref = TensorRef(name, self._annotated_shape(name, ann), ann.dtype)
                ref.value_range = self._value_range(name, ann)
                self.env[name] = ref
            elif isinstance(ann, ScalarAnnotation):
                # One value for the whole launch (a uniform): not a thread-local variable,
                # so the race rule compares two program ids under the same value.
                self.env[name] = Elem(ann.kind, self._ranged(name, ann.kind, uniform=True))
        for arg in self.kg.kernel.node.args.args:
            self.env.setdefault(arg.arg, None)  # poisoned parameters
        scope = _Scope()
        if not self._read_grid(scope):
            return self.diagnostics
        self._block(self.kg.kernel.node.body, scope)
        self._check_plain_read_writes()
        self._check_races()
        return self.diagnostics

    def _value_range(self, name: str, ann: TensorAnnotation) -> tuple | None:
        """The Z3 bounds of a parameter's `Range(lo, hi)`: the shim checks them at each call,
        so every element the kernel reads lies in them (an input's values never change)."""
        if ann.value_range is None:
            return None
        if name in self.written:
            self._emit(
                "GPU033",
                f"`{name}` is written by the kernel, so its values are not known at the call; "
                "a `Range` describes an input: remove it from this parameter",
                ann.span,
            )
            return None
        lo, hi = ann.value_range
        if not (self._require_bound(lo, ann.span) and self._require_bound(hi, ann.span)):
            return None
        return self._term(lo), self._term(hi)

    def _check_plain_read_writes(self) -> None:
        """A parameter that is read and written must be `InOut`: a plain one is an output,
        whose contents before the kernel writes it are nobody's (GPU029). A program may read
        back an element it wrote itself before (zero, then accumulate: `out[i] = 0.0`, then
        `out[i] += x[i, j]` in a loop); the race rule proves no other program touches it."""
        annotations = {name: ann for name, ann, _ in self.kg.params}
        # A buffer updated only by `atomic_add` and also read is the race rule's (GPU028).
        stored = {a.tensor for a in self.accesses if a.store and not a.atomic}
        for k, access in enumerate(self.accesses):
            ann = annotations.get(access.tensor)
            if access.store or access.tensor not in stored or not isinstance(ann, TensorAnnotation):
                continue
            if ann.inout or self._written_before(access, self.accesses[:k]):
                continue
            stored.discard(access.tensor)  # one report per parameter
            self._emit(
                "GPU029",
                f"`{access.text}` reads an element of the output `{access.tensor}` that this "
                "program has not written yet: a plain parameter the kernel writes is an "
                "output, and its old contents are not the caller's (write the element first, "
                "or annotate the parameter `InOut[...]`)",
                access.span,
                labels=(Label(ann.span, f"`{access.tensor}` is annotated here"),),
            )

    def _written_before(self, read: _Access, earlier: list[_Access]) -> bool:
        """Whether on every path to `read` the same program has already stored the element
        it reads: some earlier plain store of the tensor, on a path the read's implies, at
        an equal index. A store inside a loop that has ended covers the read when some
        iteration of it wrote the element (its loop variables exist)."""
        covers = []
        for store in earlier:
            if not store.store or store.atomic or store.tensor != read.tensor:
                continue
            same = [a == b for a, b in zip(store.index, read.index, strict=True)]
            wrote = z3.And(*store.path, *same)
            ended = [v for v in store.loops if not any(v is w for w in read.loops)]
            covers.append(z3.Exists(ended, wrote) if ended else wrote)
        if not covers:
            return False
        verdict = self.prover.prove(z3.Implies(z3.And(*read.path), z3.Or(*covers)), ())
        return verdict.status == PROVEN

    def _read_grid(self, scope: _Scope) -> bool:
        grid = self.kg.kernel.grid
        assert grid is not None
        items = grid.elts if isinstance(grid, ast.Tuple) else None
        # any rank: codegen flattens the grid onto one dispatch axis and recovers each
        # `program_id(k)` by division and modulo (`mimir.codegen.kernels.index_level`)
        if not items:
            self._emit(
                "GPU036",
                "`grid=` takes a tuple of one or more sizes, e.g. `grid=(N,)`",
                self.src.span(grid),
            )
            return False
        for dim in self.info.dims.values():  # index arithmetic is i32 on every backend
            self.prover.add_fact(self.prover.dim(dim.dim.name) <= 2**31 - 1, None)
        for axis, item in enumerate(items):
            size = read_size(self.info, item)
            if not isinstance(size, (int, Dim)) and not hasattr(size, "dims"):
                self._emit(size.code, size.message, size.span)
                return False
            if not self._require_bound(size, self.src.span(item)):
                return False
            pid = z3.Int(f"program_id({axis})")
            self.thread_vars.append(pid)
            self.pids.append(pid)
            scope.path.extend([pid >= 0, pid < self._term(size)])
            scope.show.append((f"program_id({axis})", pid))
            self.grid.append(size)
        return True

    # -- statements

    def _block(self, body: list[ast.stmt], scope: _Scope) -> None:
        shadowed = frozenset(self.info.module_names)  # `range = Dim(...)` is not Python's
        for stmt in body:
            found = list(subset.statement_violations(stmt, self.kg.name, True, shadowed))
            if found:
                for v in found:
                    self._emit(v.code, v.message, self.src.span(v.node))
                self._poison_names(stmt)
                continue
            try:
                self._statement(stmt, scope)
            except _RefusedError as r:
                if r.code != _SILENT:
                    self._emit(r.code, r.message, self.src.span(r.node))
                self._poison_names(stmt)

    def _poison_names(self, stmt: ast.AST) -> None:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self.env[node.id] = None

    def _statement(self, stmt: ast.stmt, scope: _Scope) -> None:
        if isinstance(stmt, ast.Assign):
            value = self._expr(stmt.value, scope)
            for target in stmt.targets:
                self._assign(target, value, scope, stmt)
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            self._assign(stmt.target, self._expr(stmt.value, scope), scope, stmt)
        elif isinstance(stmt, ast.AugAssign):
            symbol = BINARY_SYMBOLS[type(stmt.op)]
            if isinstance(stmt.target, ast.Name):
                current = self._name(stmt.target)
                value = self._binary(symbol, current, self._expr(stmt.value, scope), stmt, scope)
                self.env[stmt.target.id] = value
            else:
                load = ast.Subscript(stmt.target.value, stmt.target.slice, ast.Load())
                ast.copy_location(load, stmt.target)
                current = self._expr(load, scope)
                value = self._binary(symbol, current, self._expr(stmt.value, scope), stmt, scope)
                self._assign(stmt.target, value, scope, stmt)
        elif isinstance(stmt, ast.If):
            self._if(stmt, scope)
        elif isinstance(stmt, ast.For):
            self._for(stmt, scope)
        elif isinstance(stmt, ast.Return):
            if stmt.value is not None:
                raise _RefusedError(
                    "GPU015", "an index-level kernel writes its outputs and returns nothing", stmt
                )
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            self._atomic(stmt.value, scope)
        elif isinstance(stmt, (ast.Pass, ast.Expr, ast.AnnAssign)):
            pass

    def _atomic(self, call: ast.Call, scope: _Scope) -> None:
        """`atomic_add(out, index, value)`: a bounds-checked element of `out`, added to
        atomically. Atomic adds of one element by several program ids do not race (they
        commute: the sum is the same in every order, up to float rounding); a plain read or
        write of an element another program id adds to does (`_check_races`)."""
        canonical = self.info.resolve(call.func)
        if canonical != "atomic_add":
            name = self.src.text(call.func)
            raise _RefusedError(
                "GPU030" if canonical or name in self.info.module_names else "GPU032",
                f"unknown function `{name}()` in a kernel",
                call.func,
            )
        if len(call.args) != 3 or call.keywords:
            raise _RefusedError(
                "GPU036",
                "`atomic_add` takes the tensor, the index and the value: "
                "`atomic_add(out, i, v)` or `atomic_add(out, (i, j), v)`",
                call,
            )
        target, index_node, value_node = call.args
        element = ast.Subscript(target, index_node, ast.Store())
        ast.copy_location(element, call)
        element.end_lineno, element.end_col_offset = call.end_lineno, call.end_col_offset
        tensor, index = self._element(element, scope)
        value = self._expr(value_node, scope)
        if value is None:
            return
        if not isinstance(value, (Elem, Idx, Cond)):
            raise _RefusedError("GPU036", "`atomic_add` adds a scalar value", value_node)
        spec = ops.BY_FUNCTION["atomic_add"]
        try:
            spec.dtype_rule(spec.spelling, [tensor.dtype, self._kind(value)])
        except RuleError as err:
            raise _RefusedError(err.code, err.message, call) from None
        self.accesses.append(
            _Access(
                tensor.name,
                index,
                tuple(scope.path),
                self.src.span(call),
                self.src.text(call),
                True,
                atomic=True,
            )
        )

    def _assign(self, target: ast.expr, value: Any, scope: _Scope, stmt: ast.stmt) -> None:
        if isinstance(target, ast.Name):
            if isinstance(value, (TensorRef, ShapeOf)):
                raise _RefusedError(
                    "GPU031", "a tensor cannot be renamed in an index-level kernel", stmt
                )
            self.env[target.id] = value
            return
        if isinstance(target, ast.Subscript):
            tensor, index = self._element(target, scope)
            if value is None:
                return
            if not isinstance(value, (Elem, Idx, Cond)):
                raise _RefusedError("GPU036", "an element store needs a scalar value", stmt)
            self._check_store_dtype(tensor, value, target)
            self.accesses.append(
                _Access(
                    tensor.name,
                    index,
                    tuple(scope.path),
                    self.src.span(target),
                    self.src.text(target),
                    True,
                    loops=tuple(scope.loops),
                )
            )
            return
        raise _RefusedError("GPU031", "only names and tensor elements can be assigned", target)

    def _check_store_dtype(self, tensor: TensorRef, value: Any, node: ast.AST) -> None:
        kind = self._kind(value)
        got = promote_weak(tensor.dtype, kind) if isinstance(kind, str) else kind
        if got != tensor.dtype:
            raise _RefusedError(
                "GPU027",
                f"store dtype mismatch: `{tensor.name}` holds {tensor.dtype}, the value is "
                f"{kind if isinstance(kind, DType) else 'a Python ' + kind}",
                node,
            )

    def _if(self, stmt: ast.If, scope: _Scope) -> None:
        cond = self._expr(stmt.test, scope)
        if cond is None:
            return
        if not isinstance(cond, Cond):
            raise _RefusedError("GPU036", "an `if` condition must be a comparison", stmt.test)
        before = dict(self.env)
        self._block(stmt.body, _Scope([*scope.path, cond.term], scope.show, scope.loops))
        after_then = self.env
        self.env = dict(before)
        self._block(stmt.orelse, _Scope([*scope.path, z3.Not(cond.term)], scope.show, scope.loops))
        after_else = self.env
        self.env = dict(before)
        for name in set(after_then) | set(after_else):
            a, b = after_then.get(name), after_else.get(name)
            self.env[name] = self._join(name, a, b, cond.term)

    def _join(self, name: str, a: Any, b: Any, cond: z3.BoolRef) -> Any:
        if a is b:
            return a
        if a is None or b is None:
            return None
        if isinstance(a, (Idx, Elem)) and isinstance(b, (Idx, Elem)):
            ta, tb = self._int_term(a), self._int_term(b)
            if (isinstance(a, Elem) or isinstance(b, Elem)) and ta is not None and tb is not None:
                kind = _join_kinds(self._kind(a), self._kind(b))
                return Elem(kind, z3.If(cond, ta, tb))
        if isinstance(a, Idx) and isinstance(b, Idx):
            if z3.eq(z3.simplify(a.term), z3.simplify(b.term)):
                return a
            return self._havoc(name)
        if isinstance(a, Elem) and isinstance(b, Elem):
            kind = a.dtype if a.dtype == b.dtype else _join_kinds(a.dtype, b.dtype)
            return Elem(kind, None if _int_range(kind) is None else self._ranged(name, kind))
        if isinstance(a, Cond) and isinstance(b, Cond):
            return Cond(z3.Bool(self._fresh_name(name)))
        return a

    def _for(self, stmt: ast.For, scope: _Scope) -> None:
        call = stmt.iter
        assert isinstance(call, ast.Call) and isinstance(stmt.target, ast.Name)
        args = [self._expr(a, scope) for a in call.args]
        if any(a is None for a in args):
            return
        for a, node in zip(args, call.args, strict=True):
            if not isinstance(a, Idx):
                raise _RefusedError(
                    "GPU036", "`range` bounds must be ints, dims or index arithmetic", node
                )
        start, stop, step = (
            (Idx(z3.IntVal(0), "0"), args[0], 1) if len(args) == 1 else (args[0], args[1], None)
        )
        if len(args) == 3:
            lit = z3.simplify(args[2].term)
            if not z3.is_int_value(lit) or lit.as_long() <= 0:
                raise _RefusedError(
                    "GPU036", "a `range` step must be a positive int literal", call.args[2]
                )
            step = lit.as_long()
        step = step or 1
        var = z3.Int(f"{stmt.target.id}@{stmt.lineno}")
        self.thread_vars.append(var)
        cond = [var >= start.term, var < stop.term]
        if step != 1:
            cond.append((var - start.term) % step == 0)
        # Loop-carried integers are unknown inside and after the loop.
        assigned = {
            n.id
            for n in ast.walk(stmt)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id != stmt.target.id
        }
        self._havoc_all(assigned)
        self.env[stmt.target.id] = Idx(var, stmt.target.id)
        inner = _Scope(
            [*scope.path, *cond], [*scope.show, (stmt.target.id, var)], [*scope.loops, var]
        )
        self._block(stmt.body, inner)
        # A second pass lets loop-carried element dtypes settle (weak -> concrete).
        self._block_quiet(stmt.body, inner)
        self._havoc_all(assigned)

    def _havoc_all(self, names: set[str]) -> None:
        for name in names:
            value = self.env.get(name)
            if isinstance(value, Idx):
                self.env[name] = self._havoc(name)
            elif isinstance(value, Elem) and value.term is not None:
                self.env[name] = Elem(value.dtype, self._ranged(name, value.dtype))

    def _block_quiet(self, body: list[ast.stmt], scope: _Scope) -> None:
        saved = (list(self.diagnostics), list(self.accesses))
        self._block(body, scope)
        self.diagnostics, self.accesses = saved[0], saved[1]

    # -- expressions

    def _expr(self, node: ast.expr, scope: _Scope) -> Any:
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, bool):
                return Cond(z3.BoolVal(v))
            if isinstance(v, int):
                return Idx(z3.IntVal(v), str(v))
            if isinstance(v, float):
                return Elem("float")
            raise _RefusedError(
                "GPU031", f"the constant `{self.src.text(node)}` cannot be used inside `@gpu`", node
            )
        if isinstance(node, ast.Name):
            return self._name(node)
        if isinstance(node, ast.BinOp):
            symbol = BINARY_SYMBOLS[type(node.op)]
            left, right = self._expr(node.left, scope), self._expr(node.right, scope)
            return self._binary(symbol, left, right, node, scope)
        if isinstance(node, ast.Compare):
            return self._compare_chain(node, scope)
        if isinstance(node, ast.BoolOp):
            return self._bool_op(node, scope)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            operand = self._expr(node.operand, scope)
            if operand is None:
                return None
            return Cond(z3.Not(self._condition(operand, "not", node.operand).term))
        if isinstance(node, ast.UnaryOp):
            return self._unary(node, self._expr(node.operand, scope))
        if isinstance(node, ast.Subscript):
            base = self._expr(node.value, scope)
            if isinstance(base, ShapeOf):
                k = self._literal(node.slice)
                shape = base.tensor.shape
                if k is None or not -len(shape) <= k < len(shape):
                    raise _RefusedError(
                        "GPU018",
                        "a shape index must be an int literal within the tensor's rank",
                        node,
                    )
                return Idx(shape[k].term, shape[k].text)
            tensor, index = self._element(node, scope)
            self.accesses.append(
                _Access(
                    tensor.name,
                    index,
                    tuple(scope.path),
                    self.src.span(node),
                    self.src.text(node),
                    False,
                    loops=tuple(scope.loops),
                )
            )
            bounds = _int_range(tensor.dtype)
            if tensor.name in self.written or bounds is None:
                return Elem(tensor.dtype, self._ranged(f"{tensor.name}[]", tensor.dtype))
            if tensor.name not in self.memory:
                sorts = [z3.IntSort()] * (len(index) + 1)
                self.memory[tensor.name] = z3.Function(f"{tensor.name}[]", *sorts)
            value = self.memory[tensor.name](*index)
            self.prover.add_fact(z3.And(value >= bounds[0], value <= bounds[1]), None)
            if tensor.value_range is not None:  # checked by the shim (GPU043) at the call
                lo, hi = tensor.value_range
                self.prover.add_fact(z3.And(value >= lo, value < hi), None)
            return Elem(tensor.dtype, value)
        if isinstance(node, ast.Attribute):
            if self.info.resolve(node) in MATH_CONSTANTS:  # `math.pi`
                return Elem("float")
            base = self._expr(node.value, scope)
            if isinstance(base, TensorRef) and node.attr == "shape":
                return ShapeOf(base)
            if base is None:
                return None
            raise _RefusedError(
                "GPU030", f"unknown attribute `.{node.attr}` in an index-level kernel", node
            )
        if isinstance(node, ast.Call):
            return self._call(node, scope)
        raise _RefusedError(
            "GPU031", f"`{self.src.text(node)}` is not allowed in an index-level kernel", node
        )

    def _bool_op(self, node: ast.BoolOp, scope: _Scope) -> Cond | None:
        """`a and b` / `a or b` with Python's short-circuit: each operand is evaluated, and
        its subscripts proven, only on the path where the operands before it let Python
        reach it (`and`: all true so far; `or`: all false so far). Every backend lowers it
        with a branch, so a right operand's loads never run where they were not proven."""
        is_and = isinstance(node.op, ast.And)
        word = "and" if is_and else "or"
        terms: list[z3.BoolRef] = []
        reached = list(scope.path)
        for operand in node.values:
            value = self._expr(operand, _Scope(reached, scope.show))
            if value is None:
                return None
            term = self._condition(value, word, operand).term
            terms.append(term)
            reached = [*reached, term if is_and else z3.Not(term)]
        return Cond(z3.And(*terms) if is_and else z3.Or(*terms))

    def _compare_chain(self, node: ast.Compare, scope: _Scope) -> Any:
        """`a < b` and Python's chains `a < b <= c` (`a < b and b <= c`, `b` evaluated once,
        `c` only where `a < b` holds)."""
        left = self._expr(node.left, scope)
        terms: list[z3.BoolRef] = []
        reached = list(scope.path)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = self._expr(comparator, _Scope(reached, scope.show))
            result = self._binary(
                BINARY_SYMBOLS[type(op)], left, right, node, _Scope(reached, scope.show)
            )
            if len(node.ops) == 1 or result is None:
                return result
            assert isinstance(result, Cond)  # a comparison is always a condition
            term = result.term
            terms.append(term)
            reached = [*reached, term]
            left = right
        return Cond(z3.And(*terms))

    def _condition(self, value: Any, word: str, node: ast.AST) -> Cond:
        if isinstance(value, Cond):
            return value
        raise _RefusedError(
            "GPU036", f"each operand of `{word}` must be a comparison or a condition", node
        )

    def _name(self, node: ast.Name) -> Any:
        if node.id in self.env:
            return self.env[node.id]
        if node.id in self.info.dims:
            dim = self.info.dims[node.id].dim
            if not self._require_bound(dim, self.src.span(node)):
                return None
            return Idx(self.prover.dim(dim.name), dim.name)
        if node.id in self.info.constants:
            value = self.info.constants[node.id]
            return Idx(z3.IntVal(value), str(value))
        if node.id in self.info.sizes:  # module-level size arithmetic (`D_HID = 4 * D_IN`)
            size = self.info.sizes[node.id]
            if not self._require_bound(size, self.src.span(node)):
                return None
            return Idx(self._term(size), node.id)
        if node.id in self.info.floats:  # a module-level float constant: a float literal
            return Elem("float")
        canonical = self.info.imported.get(node.id)
        if canonical in DTYPES:
            return DTYPES[canonical]
        if canonical in MATH_CONSTANTS:  # `from math import pi`
            return Elem("float")
        if canonical is not None or node.id in self.info.module_names:
            raise _RefusedError(
                "GPU030", f"`{node.id}` cannot be used as a value inside `@gpu`", node
            )
        raise _RefusedError("GPU032", f"undefined name `{node.id}`", node)

    def _element(self, node: ast.Subscript, scope: _Scope) -> tuple[TensorRef, tuple]:
        tensor = self._expr(node.value, scope)
        if tensor is None:
            raise _RefusedError(_SILENT, "", node)  # poisoned upstream: stay silent
        if not isinstance(tensor, TensorRef):
            raise _RefusedError("GPU036", "only tensor parameters can be subscripted", node)
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if any(isinstance(i, ast.Slice) for i in items) or len(items) != len(tensor.shape):
            raise _RefusedError(
                "GPU036",
                f"an index-level kernel reads and writes single elements: index all "
                f"{len(tensor.shape)} axes of `{tensor.name}` with ints",
                node,
            )
        index = []
        for axis, item in enumerate(items):
            value = self._expr(item, scope)
            if value is None:
                raise _RefusedError(_SILENT, "", node)
            loaded = False
            if isinstance(value, Elem) and (
                value.dtype == "int" or (isinstance(value.dtype, DType) and value.dtype.is_integer)
            ):
                term = value.term if value.term is not None else self._fresh_int("index")
                value = Idx(term, self.src.text(item))
                loaded = True
            if not isinstance(value, Idx):
                raise _RefusedError("GPU036", "an index must be an int expression", item)
            self._prove_bound(tensor, axis, value, item, scope, loaded)
            index.append(value.term)
        return tensor, tuple(index)

    def _prove_bound(
        self,
        tensor: TensorRef,
        axis: int,
        idx: Idx,
        node: ast.expr,
        scope: _Scope,
        loaded: bool = False,
    ) -> None:
        size = tensor.shape[axis]
        cond = z3.Implies(z3.And(*scope.path), z3.And(idx.term >= 0, idx.term < size.term))
        show = (*scope.show, ("index", idx.term))
        verdict = self.prover.prove(cond, show)
        if verdict.status == PROVEN:
            return
        message = (
            f"index `{self.src.text(node)}` may be out of bounds for axis {axis} of "
            f"`{tensor.name}` with size {size.text}"
        )
        if verdict.status != REFUTED:
            raise _RefusedError("GPU050", f"could not prove: {message} ({verdict.reason})", node)
        note = None
        if verdict.counterexample:
            n = self._eval_size(size.term, verdict)
            note = (
                f"(`{tensor.name}` has {n} element{'s' if n != 1 else ''} on axis {axis})"
                if n is not None
                else None
            )
        self.diagnostics.append(
            Diagnostic(
                "GPU018",
                message,
                self.src.span(node),
                labels=verdict.labels,
                counterexample=verdict.counterexample,
                function=self.kg.name,
                counterexample_note=note,
                extra_fix=self._gather_fix(idx, size.text) if loaded else None,
            )
        )
        raise _RefusedError(_SILENT, "", node)

    def _gather_fix(self, idx: Idx, size: str) -> str:
        """How to prove a gather through a loaded integer: a range, a clamp or a guard."""
        sources = sorted(
            {
                name.split("[]")[0]
                for name in _decl_names(idx.term)
                if "[]" in name and name.split("[]")[0] in self.env
            }
        )
        text = idx.text
        hi = size if size.isidentifier() or size.isdigit() else f"({size})"
        declared = (
            f"declare the values of `{sources[0]}` with `Range(0, {size})` last in its type "
            f"(`Tensor[int32, ..., Range(0, {size})]`; the call checks them)"
            if sources
            else f"declare the loaded tensor's values with `Range(0, {size})` last in its type"
        )
        return (
            f"{declared}, clamp the index with `minimum(maximum({text}, 0), {hi} - 1)`, "
            f"or guard it with `if 0 <= {text} < {size}:`"
        )

    def _eval_size(self, term: z3.ArithRef, verdict: Any) -> int | None:
        subs = [
            (z3.Int(name), z3.IntVal(v))
            for name, v in verdict.counterexample
            if not name.startswith(("program_id", "index"))
        ]
        value = z3.simplify(z3.substitute(term, *subs)) if subs else z3.simplify(term)
        if z3.is_int_value(value):
            return value.as_long()
        # The size is an annotation variable: solve it under the counterexample.
        s = z3.Solver()
        s.add(self.prover.solver.assertions())
        for name, v in subs:
            s.add(name == v)
        if s.check() == z3.sat:
            return s.model().eval(term, model_completion=True).as_long()
        return None

    def _binary(self, symbol: str, left: Any, right: Any, node: ast.AST, scope: _Scope) -> Any:
        if left is None or right is None:
            return None
        if isinstance(left, Idx) and isinstance(right, Idx):
            if symbol in _INT_OPS:
                if symbol in ("//", "%"):
                    cond = z3.Implies(z3.And(*scope.path), right.term >= 1)
                    if self.prover.prove(cond).status != PROVEN:
                        raise _RefusedError(
                            "GPU036", f"the divisor `{right.text}` may be zero or negative", node
                        )
                return Idx(
                    _arith(symbol, left.term, right.term), f"{left.text} {symbol} {right.text}"
                )
            if symbol in _COMPARE:
                return Cond(_compare(symbol, left.term, right.term))
        if isinstance(left, Cond) and isinstance(right, Cond) and symbol in ("&", "|"):
            return Cond(
                z3.And(left.term, right.term) if symbol == "&" else z3.Or(left.term, right.term)
            )
        spec = ops.BY_OPERATOR.get(symbol)
        if spec is None or symbol == "@":
            raise _RefusedError(
                "GPU030", f"unknown operator `{symbol}` in an index-level kernel", node
            )
        result = self._element_op(spec, [left, right], node)
        if spec.name in SHIFTS:
            self._prove_shift_count(spec, right, node, scope)
        if symbol in _COMPARE:
            terms = self._exact_terms(spec, [left, right], scope)
            if terms is not None:
                return Cond(_compare(symbol, *terms))
            return Cond(z3.Bool(self._fresh_name("compare")))
        if isinstance(left, Idx) and isinstance(right, Idx):
            return Idx(self._fresh_int("bits"), "?")
        return self._with_term(result, symbol, [left, right], spec, scope)

    def _prove_shift_count(
        self, spec: ops.OpSpec, count: Any, node: ast.AST, scope: _Scope
    ) -> None:
        """The count of `<<`/`>>` in 0..31 on this path (GPU037), as the tensor-level rule."""
        term = self._int_term(count)
        if term is None:
            term = self._ranged("count", self._kind(count))
        ok = z3.And(term >= 0, term < SHIFT_BITS) if term is not None else z3.BoolVal(False)
        verdict = self.prover.prove(
            z3.Implies(z3.And(*scope.path), ok),
            (*scope.show, ("count", term)) if term is not None else scope.show,
        )
        if verdict.status == PROVEN:
            return
        where = (
            node.right
            if isinstance(node, ast.BinOp)
            else node.value
            if isinstance(node, ast.AugAssign)
            else node
        )
        message = (
            f"the count `{self.src.text(where)}` of `{spec.spelling}` may be negative or "
            f"{SHIFT_BITS} or more (it must be in 0..{SHIFT_BITS - 1})"
        )
        if verdict.status != REFUTED:
            raise _RefusedError("GPU050", f"could not prove: {message} ({verdict.reason})", node)
        self.diagnostics.append(
            Diagnostic(
                "GPU037",
                message,
                self.src.span(where),
                labels=verdict.labels,
                counterexample=verdict.counterexample,
                function=self.kg.name,
            )
        )
        raise _RefusedError(_SILENT, "", node)

    def _unary(self, node: ast.UnaryOp, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, Idx) and isinstance(node.op, ast.USub):
            return Idx(-value.term, f"-{value.text}")
        if isinstance(value, Cond) and isinstance(node.op, ast.Invert):
            return Cond(z3.Not(value.term))
        symbol = {ast.USub: "-", ast.Invert: "~"}.get(type(node.op))
        if symbol is None:
            raise _RefusedError("GPU030", "unknown unary operator in a kernel", node)
        spec = ops.BY_UNARY_OPERATOR[symbol]
        result = self._element_op(spec, [value], node)
        if symbol == "-" and isinstance(value, Elem) and value.term is not None:
            return self._with_term(result, "neg", [value], spec, None)
        return result

    def _call(self, node: ast.Call, scope: _Scope) -> Any:
        func = node.func
        canonical = self.info.resolve(func)
        if canonical == "program_id":
            axis = self._literal(node.args[0]) if len(node.args) == 1 else None
            if axis is None or not 0 <= axis < len(self.grid):
                raise _RefusedError(
                    "GPU036",
                    f"`program_id` takes an axis literal below the grid's rank {len(self.grid)}",
                    node,
                )
            return Idx(self.pids[axis], f"program_id({axis})")
        # `.gelu(approximate="none")`: a literal, not an operand
        args = [] if is_gelu(node) else [self._expr(a, scope) for a in node.args]
        if any(a is None for a in args):
            return None
        if canonical is not None:
            spec = ops.BY_FUNCTION.get(canonical)
            if spec is not None and spec.kind == "scalar_math":
                # `math.sqrt(HS)`, `math.exp(x[i])`: a Python float, weak as in the shim
                self._element_op(spec, args, node)
                return Elem("float")
            if spec is None or spec.kind != "elementwise":
                raise _RefusedError(
                    "GPU031",
                    f"`{canonical}` is a tensor-level op; an index-level "
                    "kernel computes on single elements",
                    node,
                )
            result = self._element_op(spec, args, node)
            if canonical in ("minimum", "maximum", "where"):
                return self._with_term(result, canonical, args, spec, scope)
            return result
        if isinstance(func, ast.Attribute):
            receiver = self._expr(func.value, scope)
            if receiver is None:
                return None
            if isinstance(receiver, TensorRef):
                raise _RefusedError(
                    "GPU031",
                    f"`.{func.attr}()` on a whole tensor is a tensor-level "
                    "op; an index-level kernel computes on single elements",
                    node,
                )
            if isinstance(receiver, (Idx, Cond)):
                # `program_id(0)`, its arithmetic and comparisons are Python ints and bools
                # when the kernel runs in the shim: they have no methods.
                what = "an index" if isinstance(receiver, Idx) else "a condition"
                if func.attr == "astype":
                    instead = "an index is already an int32 and a condition a bool: drop it"
                elif func.attr in ops.BY_FUNCTION:
                    instead = f"call the function `{func.attr}(...)` instead"
                else:
                    instead = "compute on a loaded element instead"
                raise _RefusedError(
                    "GPU030",
                    f"`.{func.attr}()` on {what}: `{self.src.text(func.value)}` is a plain "
                    f"Python value when the kernel runs, which has no methods; {instead}",
                    node,
                )
            spec = ops.BY_METHOD.get(func.attr)
            if spec is None:
                raise _RefusedError("GPU030", f"unknown method `.{func.attr}()`", func)
            if spec.kind == "cast":
                target = args[0] if args else None
                if not isinstance(target, DType):
                    raise _RefusedError("GPU036", "`astype` takes a dtype such as `float32`", node)
                return self._cast(receiver, target)
            if spec.kind != "elementwise":
                raise _RefusedError("GPU031", f"`.{func.attr}()` is a tensor-level op", node)
            if spec.name == "gelu":
                variant = gelu_call(node)
                if variant is None:
                    raise _RefusedError(
                        "GPU036",
                        '`.gelu()` takes one argument, `approximate`: the literal "none" or "tanh"',
                        node,
                    )
                return self._element_op(variant, [receiver], node)
            return self._element_op(spec, [receiver, *args], node)
        if isinstance(func, ast.Name) and func.id in self.info.module_names:
            raise _RefusedError("GPU030", f"unknown function `{func.id}()` in a kernel", func)
        raise _RefusedError("GPU032", f"undefined name `{self.src.text(func)}`", func)

    def _cast(self, value: Any, target: DType) -> Elem:
        """`value.astype(target)`. An integer keeps its exact value when the cast cannot
        change it (an index or an int32 to int32); any other cast to an integer dtype is
        some value of that dtype, so a clamp after it (`minimum(maximum(v.astype(int32),
        0), N - 1)`) still proves an index in bounds."""
        term = self._int_term(value)
        unchanged = target.name == "int32" if isinstance(value, Idx) else value.dtype == target
        if term is not None and unchanged:
            return Elem(target, term)
        return Elem(target, self._ranged("astype", target))

    def _element_op(self, spec: ops.OpSpec, operands: list, node: ast.AST) -> Elem:
        kinds = [self._kind(v) for v in operands]
        try:
            dtype = spec.dtype_rule(spec.spelling, kinds)
        except RuleError as err:
            raise _RefusedError(err.code, err.message, node) from None
        if all(isinstance(k, str) for k in kinds) and spec.compute_in_common is False:
            weak = "bool" if dtype.is_bool else "float" if dtype.is_float else "int"
            return Elem(weak)
        return Elem(dtype)

    def _kind(self, value: Any) -> DType | str:
        if isinstance(value, Idx):
            return "int"
        if isinstance(value, Cond):
            return "bool"
        if isinstance(value, Elem):
            return value.dtype
        raise _RefusedError(
            "GPU031",
            "a whole tensor cannot be used in element arithmetic; subscript it",
            ast.Pass(),
        )

    def _literal(self, node: ast.expr) -> int | None:
        return int_literal(node)  # `-1` too: `x.shape[-1]` counts from the end

    # -- integer element values

    def _int_term(self, value: Any) -> z3.ArithRef | None:
        if isinstance(value, Idx):
            return value.term
        if isinstance(value, Elem):
            return value.term
        return None

    def _exact_terms(
        self, spec: ops.OpSpec, operands: list, scope: _Scope | None
    ) -> list[z3.ArithRef] | None:
        """The operands' terms when the op computes on them exactly, else None.

        Index values (`Idx`) are i32 registers (modelled exactly everywhere in this
        checker); an op computing in uint32 converts them, so it is exact only where they
        are proven non-negative on this path.
        """
        terms = [self._int_term(v) for v in operands]
        if any(t is None for t in terms):
            return None
        try:
            compute = ops.dtype_rules.common(spec.spelling, [self._kind(v) for v in operands])
        except RuleError:
            return None
        bounds = _int_range(compute)
        if bounds is None:
            return None
        if bounds[0] == 0:
            path = scope.path if scope is not None else []
            for v, t in zip(operands, terms, strict=True):
                if isinstance(v, Idx):
                    inside = z3.Implies(z3.And(*path), t >= 0)
                    if self.prover.prove(inside).status != PROVEN:
                        return None
        return terms  # type: ignore[return-value]

    def _with_term(
        self, result: Elem, op: str, operands: list, spec: ops.OpSpec, scope: _Scope | None
    ) -> Elem:
        """`result` with the Z3 value of an integer op, as the shim and backends compute it."""
        bounds = _int_range(result.dtype)
        if bounds is None:
            return result
        if op == "where":
            cond, *values = operands
            terms = self._exact_terms(spec, values, scope)
            if isinstance(cond, Cond) and terms is not None:
                return Elem(result.dtype, z3.If(cond.term, *terms))
            return Elem(result.dtype, self._ranged("where", result.dtype))
        terms = self._exact_terms(spec, operands, scope)
        if terms is None:
            return Elem(result.dtype, self._ranged(op, result.dtype))
        if op == "neg":
            exact = -terms[0]
        elif op in ("+", "-", "*"):
            exact = _arith(op, terms[0], terms[1])
        elif op == "minimum":
            return Elem(result.dtype, z3.If(terms[0] <= terms[1], terms[0], terms[1]))
        elif op == "maximum":
            return Elem(result.dtype, z3.If(terms[0] >= terms[1], terms[0], terms[1]))
        elif op == "%":
            return Elem(result.dtype, _floor_mod(terms[0], terms[1]))
        elif op == "//":
            a, b = terms
            # Floor division for a positive divisor (Z3's `/` is Euclidean), `x // 0 == 0`.
            quotient = z3.If(b == 0, 0, z3.If(b > 0, a / b, self._ranged(op, result.dtype)))
            return Elem(result.dtype, quotient)
        else:  # `**`, `&`, `|`: some value of the dtype
            return Elem(result.dtype, self._ranged(op, result.dtype))
        lo, hi = bounds
        # Past the dtype's range a GPU wraps (two's complement, as the shim's int32/uint32).
        span = hi - lo + 1
        wrapped = (exact - lo) % span + lo
        return Elem(result.dtype, z3.If(z3.And(exact >= lo, exact <= hi), exact, wrapped))

    def _ranged(self, base: str, kind: DType | str, uniform: bool = False) -> z3.ArithRef | None:
        """A fresh thread-local (or launch-`uniform`) integer within `kind`'s range (None for
        non-integer kinds)."""
        bounds = _int_range(kind)
        if bounds is None:
            return None
        var = z3.Int(self._fresh_name(base)) if uniform else self._fresh_int(base)
        self.prover.add_fact(z3.And(var >= bounds[0], var <= bounds[1]), None)
        return var

    # -- fresh variables

    def _fresh_name(self, base: str) -> str:
        self._fresh += 1
        return f"{base}!{self._fresh}"

    def _fresh_int(self, base: str) -> z3.ArithRef:
        var = z3.Int(self._fresh_name(base))
        self.thread_vars.append(var)
        return var

    def _havoc(self, name: str) -> Idx:
        return Idx(self._fresh_int(name), name)

    # -- races

    def _check_races(self) -> None:
        stores = [a for a in self.accesses if a.store]
        reported: set[tuple] = set()
        primed = [(v, z3.Int(str(v) + "'")) for v in self.thread_vars]
        pids = self.pids
        different = z3.Or(*[p != z3.Int(str(p) + "'") for p in pids])
        for s in stores:
            for other in self.accesses:
                if other.tensor != s.tensor or (s.atomic and other.atomic):
                    continue
                key = (s.span, other.span)
                if key in reported or (other.span, s.span) in reported:
                    continue
                other_index = [z3.substitute(t, *primed) for t in other.index]
                other_path = [z3.substitute(c, *primed) for c in other.path]
                same = z3.And(*[a == b for a, b in zip(s.index, other_index, strict=True)])
                cond = z3.Implies(z3.And(*s.path, *other_path, different), z3.Not(same))
                show = tuple(
                    [(f"program_id({k})", p) for k, p in enumerate(pids)]
                    + [(f"program_id({k})'", z3.Int(str(p) + "'")) for k, p in enumerate(pids)]
                    + [(f"element[{k}]", t) for k, t in enumerate(s.index)]
                )
                verdict = self.prover.prove(cond, show)
                if verdict.status == PROVEN:
                    continue
                reported.add(key)
                what = "write" if other.store else "read"
                where = f"`{s.text}`" if other is s else f"`{s.text}` and `{other.text}`"
                message = (
                    f"write race: two program ids may {what} the same element of "
                    f"`{s.tensor}` ({where})"
                )
                if verdict.status != REFUTED:
                    self._emit("GPU050", f"could not prove: {message} ({verdict.reason})", s.span)
                    continue
                self.diagnostics.append(
                    Diagnostic(
                        "GPU028",
                        message,
                        s.span,
                        labels=(Label(other.span, f"the other {what}"),) if other is not s else (),
                        counterexample=verdict.counterexample,
                        function=self.kg.name,
                    )
                )


def _decl_names(term: z3.ExprRef) -> set[str]:
    """The names of every function and constant applied in `term`."""
    names: set[str] = set()
    stack = [term]
    seen: set[int] = set()
    while stack:
        t = stack.pop()
        if t.get_id() in seen:
            continue
        seen.add(t.get_id())
        if z3.is_app(t):
            names.add(t.decl().name())
            stack.extend(t.children())
    return names


def _join_kinds(a: DType | str, b: DType | str) -> DType | str:
    if isinstance(a, DType):
        return a
    if isinstance(b, DType):
        return b
    return "float" if "float" in (a, b) else a


def _default(kind: DType | str) -> DType:
    return kind if isinstance(kind, DType) else default_dtype(kind)
