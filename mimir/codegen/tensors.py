"""Evaluating graph nodes element by element: fusion as index arithmetic.

`Evaluator.at(node, idx)` returns the IR value of tensor `node` at position
`idx`. A node that lives in a buffer (a parameter, or a value an earlier
kernel materialised) is a load; every other node is computed in place from
its operands: element-wise ops through the lowering table (`mimir.codegen.lower`)
with NumPy broadcasting as index arithmetic, and layout ops (transpose,
reshape, slicing and indexing, `None`) as a change of index, never a copy.
Values are memoised per (node, position) in the current block, so a chain of
ops becomes one kernel and a shared subexpression is computed once.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

from mimir import ops
from mimir.codegen import lower as lw
from mimir.codegen import sizes as sz
from mimir.codegen.builder import Body, Idx, ibin, size_ir
from mimir.codegen.ir import Assign, Cast, Const, Expr, Load, Uniform
from mimir.codegen.refusal import CANNOT_SCHEDULE, RefusalError
from mimir.constraints.checker import ScalarVal, SizeVal, TensorVal, TupleVal
from mimir.dims import BinOp, Dim, Size, same_size
from mimir.dtypes import (
    DType,
    bfloat16,
    bool_,
    default_dtype,
    float16,
    float32,
    int32,
    uint32,
)
from mimir.ops import dtype_rules as dr
from mimir.ops import numerics as nm
from mimir.ops import shapes as sh

_PY_BINARY = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "&": operator.and_,
    "|": operator.or_, "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift,
    "<": operator.lt, "<=": operator.le, ">": operator.gt,
    ">=": operator.ge, "==": operator.eq, "!=": operator.ne,
}  # fmt: skip
_PY_UNARY = {"-": operator.neg, "~": operator.invert}


@dataclass
class Reduction:
    """What a reduction node reduces: its input, the axes, and the dtypes involved."""

    name: str  # sum | mean | max | min
    x: int  # the input node
    axes: list[int]
    kept: list[int]
    shape: tuple[Size, ...]  # the input's shape
    acc: DType  # the dtype partial results are combined in
    out: DType

    @property
    def kept_shape(self) -> tuple[Size, ...]:
        return tuple(self.shape[k] for k in self.kept)

    @property
    def reduced_shape(self) -> tuple[Size, ...]:
        return tuple(self.shape[k] for k in self.axes)

    @property
    def count(self) -> Size:
        return sz.product(list(self.reduced_shape))

    @property
    def outputs(self) -> Size:
        return sz.product(list(self.kept_shape))


@dataclass
class Scalar:
    """A Python scalar operand: a literal known now, or a run-time expression."""

    dtype: DType  # int32 for Python ints and sizes, float32 for floats, bool_ for bools
    literal: Any = None
    expr: Expr | None = None


class _ExprAlgebra:
    """The shape rules' algebra over dim expressions; obligations were already proven."""

    def eq(self, a: Any, b: Any) -> bool:
        return sz.key(a) == sz.key(b)

    def le(self, a: Any, b: Any) -> bool:
        return True

    def any_(self, *conds: Any) -> bool:
        return True

    def select(self, cond: Any, a: Any, b: Any) -> Any:
        return b

    def literal(self, a: Any) -> int | None:
        return a if isinstance(a, int) else None

    def is_literal(self, a: Any) -> bool:
        # A size expression the checker proved `>= 0` means the same read either way.
        return isinstance(a, int)

    def require(self, cond: Any, code: str, message: str, *args: Any) -> None:
        pass

    def fail(self, code: str, message: str, *args: Any) -> Any:
        raise sh.RuleError(code, message)

    def show(self, a: Any) -> str:
        return str(a)


EXPR_ALGEBRA = _ExprAlgebra()


class Evaluator:
    """A checked kernel's nodes: their shapes, dtypes and reductions, and, given the `body`
    of a kernel being built, their values at a position (`at`). Without a body (the
    scheduler's) it answers the questions about shapes only."""

    def __init__(
        self, kernel: Any, body: Body | None = None, buffers: dict[int, str] | None = None
    ) -> None:
        self.kg = kernel.graph
        self.values = kernel.values
        self.body: Body = body  # type: ignore[assignment]  # (None: shapes only)
        # node -> buffer holding its value (row-major, dense)
        self.buffers = buffers if buffers is not None else {}
        # buffers that hold a bfloat16 value as float32 (a scratch buffer, or the one a
        # packing launch reads, `schedule.packing`): loaded as f32, not two to a word
        self.wide: set[str] = set()
        self.overrides: dict[int, tuple[Any, Expr]] = {}
        # nodes whose value is one per workgroup (a row kernel's reductions): any index
        self.row_values: dict[int, Expr] = {}
        # nodes a row kernel computes from its row's values at any index (a softmax, from
        # the row's max and sum): node -> its value at an index
        self.row_functions: dict[int, Any] = {}
        self.scalars: dict[int, Scalar] = {}  # scalar node -> its value (`scalar`)
        # function name -> (op spelling, span) of the first op whose lowering calls it
        self.origins: dict[str, tuple[str, Any]] = {}

    def _note(self, n: int, spelling: str, e: Expr) -> Expr:
        for fn in lw.functions_called(e):
            self.origins.setdefault(fn, (spelling, self.node(n)["span"]))
        return e

    # -- graph plumbing

    def node(self, n: int) -> dict[str, Any]:
        return self.kg.node(n)

    def refuse(self, n: int, message: str) -> RefusalError:
        return RefusalError(CANNOT_SCHEDULE, message, self.node(n)["span"])

    def resolve(self, n: int) -> int:
        """Look through tuple unpacking (`a, b = x, y`) to the node that computes a value."""
        while self.node(n)["kind"] == "item":
            (t,) = self.node(n)["inputs"]
            t = self.resolve(t)
            if self.node(t)["kind"] != "tuple":
                raise self.refuse(n, f"cannot compile the unpacking `{self.node(n)['text']}`")
            n = self.node(t)["inputs"][self.node(n)["index"]]
        return n

    def shape(self, n: int) -> tuple[Size, ...]:
        """The node's shape as dim expressions, simplified (`N + 1 - 1` is `N`)."""
        n = self.resolve(n)
        value = self.values[n]
        rank = len(value.shape)
        out = []
        for k, s in enumerate(value.shape):
            expr = s.expr if s.expr is not None else self._broadcast_size(n, k - rank)
            if expr is None:
                raise self.refuse(
                    n, f"the size `{s.text}` of `{self.node(n)['text']}` has no dim expression"
                )
            out.append(sz.simplify(expr))
        return tuple(out)

    def _broadcast_size(self, n: int, axis: int) -> Size | None:
        """An element-wise result's size that the checker only knows as "a or b" where
        the operands' sizes are equal once simplified (`N + 2 - 2` and `N`); a cast
        (`.astype`) has its operand's sizes."""
        spec = self.spec(n)
        if spec is not None and spec.kind == "cast":
            (x, *_) = self.node(n)["inputs"]
            return self.shape(x)[axis]
        if spec is None or spec.kind != "elementwise":
            return None
        found: list[Size] = []
        for o in self.operands(n):
            v = self.values[self.resolve(o)]
            if isinstance(v, TensorVal) and len(v.shape) >= -axis:
                size = self.shape(o)[axis]
                if not (isinstance(size, int) and size == 1):
                    found.append(size)
        if found and len({sz.key(f) for f in found}) == 1:
            return found[0]
        return None

    def dtype(self, n: int) -> DType:
        return self.values[self.resolve(n)].dtype

    def operands(self, n: int) -> list[int]:
        """The operand nodes of an element-wise op, in its element function's order."""
        node = self.node(n)
        if node["kind"] in ("binop", "unop"):
            return list(node["inputs"])
        spec: ops.OpSpec = node["spec"]
        inputs = node["inputs"]
        n_recv, n_pos = node["n_receiver"], node["n_positional"]
        kwargs = dict(zip(node["keywords"], inputs[n_recv + n_pos :], strict=True))
        params = ops.PARAMETERS.get(spec.name)
        if params is None:
            params = tuple(f"arg{k}" for k in range(spec.arity - n_recv))
        return [*inputs[:n_recv], *(kwargs[p] for p in params)]

    def spec(self, n: int) -> ops.OpSpec | None:
        node = self.node(n)
        if node["kind"] == "binop":
            return ops.BY_OPERATOR[node["symbol"]]
        if node["kind"] == "unop":
            return ops.BY_UNARY_OPERATOR[node["symbol"]]
        return node.get("spec")

    def reduction(self, root: int) -> Reduction:
        node = self.node(root)
        spec = node["spec"]
        x = node["inputs"][0]
        kw = dict(zip(node["keywords"], node["inputs"][1:], strict=True))
        axis: Any = None
        if "axis" in kw:
            v = self.values[self.resolve(kw["axis"])]
            if isinstance(v, TupleVal):
                axis = tuple(i.sym.value for i in v.items)
            elif isinstance(v, SizeVal):
                axis = v.sym.value
        shape = self.shape(x)
        axes = list(sh.reduce_axes(sh.INT_ALGEBRA, len(shape), axis, spec.name))
        out = self.dtype(root)
        # Sums accumulate in the result dtype (a sum of bools counts in int32),
        # max/min in the input's; bools as u32 0/1 (threadgroup bool is not portable).
        acc = self.dtype(x) if spec.name in ("max", "min") else out
        acc = uint32 if acc == bool_ else float32 if acc in (float16, bfloat16) else acc
        kept = [k for k in range(len(shape)) if k not in axes]
        return Reduction(spec.name, x, axes, kept, shape, acc, out)

    # -- tensors

    def at(self, n: int, idx: Idx) -> Expr:
        """The value of tensor node `n` at `idx`, in its dtype's register type."""
        n = self.resolve(n)
        if n in self.row_values:
            return self.row_values[n]
        if n in self.row_functions:
            f = self.row_functions[n]
            return self.body.memo(("at", n, idx.key), lambda: f(idx), "v")
        if n in self.overrides:
            key, value = self.overrides[n]
            assert key == idx.key, "an epilogue must read its root at the root's own position"
            return value
        return self.body.memo(("at", n, idx.key), lambda: self._compute(n, idx), "v")

    def _compute(self, n: int, idx: Idx) -> Expr:
        dtype = self.dtype(n)
        if n in self.buffers:
            if dtype == bfloat16:
                if self.buffers[n] in self.wide:  # held as float32
                    return Load(self.buffers[n], idx.flat(self.body), "f32")
                return lw.load_bfloat16(self.buffers[n], idx.flat(self.body))
            load = Load(self.buffers[n], idx.flat(self.body), lw.STORAGE[dtype])
            return lw.from_storage(load, dtype)
        node = self.node(n)
        spec = self.spec(n)
        kind = spec.kind if spec is not None else node["kind"]
        if node["kind"] == "subscript":
            kind = "index"
            items = node["items"]
            if len(items) == 1 and items[0][0] == "int":
                operand = self.values[self.resolve(node["inputs"][items[0][1]])]
                if isinstance(operand, TensorVal):
                    return self._gather(node["inputs"][0], node["inputs"][items[0][1]], None, idx)
        if kind == "gather":
            named = dict(zip(node["keywords"], node["inputs"], strict=True))
            axis = self.values[self.resolve(named["axis"])].sym.value
            return self._gather(named["arr"], named["indices"], axis, idx)
        if kind == "elementwise":
            return self._elementwise(n, spec, idx)
        if kind == "matmul":  # by a small matrix (`schedule.small_matmul`); others have launches
            return self._dot(n, idx)
        if kind == "cast":
            x = node["inputs"][0]
            value = lw.convert(self.at(x, self.same(idx, x)), self.dtype(x), dtype)
            return self._note(n, ".astype()", value)
        if kind == "transpose":
            return self._transpose(n, spec, idx)
        if kind == "reshape":
            x = node["inputs"][0]
            if [sz.key(s) for s in self.shape(x)] == [sz.key(s) for s in idx.shape]:
                return self.at(x, self.same(idx, x))
            return self.at(x, Idx(self.shape(x), flat=idx.flat(self.body)))
        if kind == "index":
            return self._index(n, idx)
        if kind == "create":
            return self._create(n, spec)
        if kind == "iota":
            value = lw.convert(Cast(idx.axes(self.body)[0], "i32"), int32, dtype)
            return self._note(n, spec.spelling, value)
        if kind == "mask":
            return self._mask(n, spec, idx)
        if kind == "join":
            return self._join(n, spec, idx)
        raise self.refuse(n, f"`{node['text']}` cannot be computed element by element")

    def same(self, idx: Idx, x: int) -> Idx:
        """`idx` re-labelled with `x`'s shape (equal sizes, possibly spelled differently)."""
        shape = self.shape(x)
        if tuple(sz.key(s) for s in shape) == idx.key[0]:
            return idx
        return Idx(shape, axes=idx.axes(self.body))

    def broadcast(self, idx: Idx, x: int) -> Idx:
        """The position in operand `x` that NumPy broadcasting reads for output `idx`."""
        shape = self.shape(x)
        keys = tuple(sz.key(s) for s in shape)
        if keys == idx.key[0]:
            return idx
        out_axes = idx.axes(self.body)
        pad = len(idx.shape) - len(shape)
        axes: list[Expr] = []
        for k, s in enumerate(shape):
            if isinstance(s, int) and s == 1:
                axes.append(Const(0, "u32"))
            elif sz.key(s) == sz.key(idx.shape[pad + k]) or same_size(s, idx.shape[pad + k]):
                axes.append(out_axes[pad + k])
            else:
                raise self.refuse(
                    x,
                    f"cannot tell how `{self.node(x)['text']}` (size {s}) broadcasts to size "
                    f"{idx.shape[pad + k]}",
                )
        return Idx(shape, axes=axes)

    def _elementwise(self, n: int, spec: ops.OpSpec, idx: Idx) -> Expr:
        operands = self.operands(n)
        out = self.dtype(n)
        kinds: list[Any] = []
        for o in operands:
            v = self.values[self.resolve(o)]
            kinds.append(v.dtype if isinstance(v, TensorVal) else _scalar_kind(v))
        if spec.compute_in_common:
            compute = [dr.common(spec.spelling, kinds)] * len(operands)
        elif spec.name == "where":
            compute = [bool_] + [out] * (len(operands) - 1)
        else:
            compute = [out] * len(operands)
        args = []
        for o, c in zip(operands, compute, strict=True):
            v = self.values[self.resolve(o)]
            if isinstance(v, TensorVal):
                value = self.at(o, self.broadcast(idx, o))
                # NumPy reads each operand as the compute dtype without rounding it first.
                args.append(lw.convert(value, v.dtype, float32 if c in (float16, bfloat16) else c))
            else:
                args.append(self.scalar_as(o, c))
        return self._note(n, spec.spelling, lw.lower_element(spec.name, args, compute[-1], out))

    def _dot(self, n: int, idx: Idx) -> Expr:
        """Element (..., i, j) of `x @ w`, w a small matrix parameter: the sum over k of
        x[..., i, k] * w[k, j], in k order, as the tiled matmul accumulates (operands in the
        result's register dtype, a float16 result rounded once at the end); a thread that
        computes a row's elements loads x's row once (`at` is memoised)."""
        x, w = (self.resolve(i) for i in self.node(n)["inputs"][:2])
        out = self.dtype(n)
        reg = float32 if out in (float16, bfloat16) else out
        xshape, wshape = self.shape(x), self.shape(w)
        *lead, j = idx.axes(self.body)  # w is a matrix: x's row is the output's
        acc: Expr | None = None
        for k in range(int(wshape[0])):
            a = self.at(x, Idx(xshape, axes=[*lead, Const(k, "u32")]))
            b = self.at(w, Idx(wshape, axes=[Const(k, "u32"), j]))
            term = lw.bin_(
                "*", lw.convert(a, self.dtype(x), reg), lw.convert(b, self.dtype(w), reg)
            )
            acc = term if acc is None else lw.bin_("+", acc, term)
        if acc is None:  # k == 0: the empty sum
            return lw.const(0, lw.REG[out])
        return self._note(n, "@", lw.round_to(self.body.let(acc, "dot"), out))

    def permutation(self, n: int) -> list[int]:
        """A transpose node's permutation: its axis k is axis `perm[k]` of its input."""
        node = self.node(n)
        rank = len(self.shape(node["inputs"][0]))
        axes_arg = None
        if node["spec"].name == "transpose" and node["n_positional"]:
            items = [self.values[i] for i in node["inputs"][1 : 1 + node["n_positional"]]]
            if len(items) == 1 and hasattr(items[0], "items"):
                items = items[0].items
            axes_arg = [v.sym.value for v in items]
        return list(sh.permutation(rank, axes_arg))

    def _transpose(self, n: int, spec: ops.OpSpec, idx: Idx) -> Expr:
        x = self.node(n)["inputs"][0]
        rank = len(self.shape(x))
        perm = self.permutation(n)
        out_axes = idx.axes(self.body)
        src: list[Expr] = [Const(0, "u32")] * rank
        for k, p in enumerate(perm):
            src[p] = out_axes[k]
        return self.at(x, Idx(self.shape(x), axes=src))

    def _gather(self, x: int, indices: int, axis: int | None, idx: Idx) -> Expr:
        """`x[indices]` (axis None: rows) or `take_along_axis(x, indices, axis)` at `idx`.

        The checker proved every value of `indices` within `x`'s axis, so the loaded value
        is the position on that axis, as is.
        """
        out_axes = idx.axes(self.body)
        ishape = self.shape(indices)
        rank = len(self.shape(x))
        if axis is None:
            at = self.at(indices, Idx(ishape, axes=out_axes[: len(ishape)]))
            src = [Cast(at, "u32"), *out_axes[len(ishape) :]]
        else:
            at = self.at(indices, Idx(ishape, axes=out_axes))
            src = list(out_axes)
            src[axis % rank] = Cast(at, "u32")
        return self.at(x, Idx(self.shape(x), axes=src))

    def _index(self, n: int, idx: Idx) -> Expr:
        x = self.node(n)["inputs"][0]
        resolved = self.index_items(n)
        out_axes = idx.axes(self.body)
        src: list[Expr] = []
        k = 0
        for it in resolved:
            if it[0] == "newaxis":
                k += 1
            elif it[0] == "int":
                src.append(size_ir(it[1]))
            else:
                src.append(ibin("+", out_axes[k], size_ir(it[1])))
                k += 1
        return self.at(x, Idx(self.shape(x), axes=src))

    def index_items(self, n: int) -> list[tuple]:
        """A subscript's items, one per axis of its operand: `("int", i)`, `("slice",
        start, ...)` with the bounds resolved, or `("newaxis",)`."""
        node = self.node(n)
        x = node["inputs"][0]
        items = []
        for it in node["items"]:
            if it[0] in ("newaxis", "ellipsis"):
                items.append(it)
            elif it[0] == "int":
                items.append(("int", self._size_arg(node["inputs"][it[1]])))
            else:
                items.append(
                    (
                        "slice",
                        *(None if s is None else self._size_arg(node["inputs"][s]) for s in it[1:]),
                    )
                )
        _, resolved = sh.index(EXPR_ALGEBRA, self.shape(x), items)
        return list(resolved)

    def _kwargs(self, n: int) -> dict[str, int]:
        node = self.node(n)
        first = node["n_receiver"] + node["n_positional"]
        return dict(zip(node["keywords"], node["inputs"][first:], strict=True))

    def literal_arg(self, n: int | None, default: int) -> int:
        if n is None:
            return default
        v = self.values[self.resolve(n)]
        assert isinstance(v, SizeVal) and v.sym.value is not None  # the checker proved it
        return v.sym.value

    def _mask(self, n: int, spec: ops.OpSpec, idx: Idx) -> Expr:
        """`tril` keeps j - i <= k, `triu` keeps j - i >= k (i, j: the last two axes)."""
        kw = self._kwargs(n)
        x, k = kw["x"], self.literal_arg(kw.get("k"), 0)
        axes = idx.axes(self.body)
        i, j = (Cast(a, "i32") for a in axes[-2:])
        diagonal = lw.bin_("-", j, i)
        op = ">=" if spec.name == "triu" else "<="
        keep = lw.bin_(op, diagonal, Const(k, "i32"))
        dtype = self.dtype(n)
        zero = lw.const(nm.cast([0], dtype)[0], lw.REG[dtype])
        return lw.select(keep, self.at(x, self.same(idx, x)), zero)

    def _join(self, n: int, spec: ops.OpSpec, idx: Idx) -> Expr:
        """`concatenate` / `stack`: the part that holds position `idx`, read under an `if`
        so that no part is ever read outside its own bounds (a `select` would read all)."""
        parts, axis = self.join_parts(n)
        stack = spec.name == "stack"
        dtype = self.dtype(n)
        body = self.body
        axes = idx.axes(body)
        at = body.let(axes[axis], "ax")
        value = body.var(lw.const(nm.cast([0], dtype)[0], lw.REG[dtype]), "part")
        offset: Size = 0
        for k, p in enumerate(parts):
            if stack:
                cond = lw.bin_("==", at, Const(k, "u32"))
                src = [*axes[:axis], *axes[axis + 1 :]]
            else:
                size = self.shape(p)[axis]
                start, stop = size_ir(offset), size_ir(sz.simplify(BinOp("+", offset, size)))
                cond = lw.bin_("<", at, stop)
                if k:
                    cond = lw.bin_("&&", lw.bin_(">=", at, start), cond)
                src = list(axes)
                src[axis] = ibin("-", at, start)
                offset = sz.simplify(BinOp("+", offset, size)) if k else size
            with body.if_(cond):
                v = self.at(p, Idx(self.shape(p), axes=src))
                body.emit(Assign(value, lw.convert(v, self.dtype(p), dtype)))
        return value

    def join_parts(self, n: int) -> tuple[list[int], int]:
        """A `concatenate` or `stack`: its parts, and the axis of its result they are
        joined along."""
        kw = self._kwargs(n)
        parts = self.node(self.resolve(kw["tensors"]))["inputs"]
        return parts, self.literal_arg(kw.get("axis"), 0) % len(self.shape(n))

    def _size_arg(self, n: int) -> Size:
        v = self.values[self.resolve(n)]
        if not isinstance(v, SizeVal) or v.sym.expr is None:
            raise self.refuse(n, f"the index `{self.node(n)['text']}` has no dim expression")
        return v.sym.expr

    def _create(self, n: int, spec: ops.OpSpec) -> Expr:
        dtype = self.dtype(n)
        if spec.name in ("zeros", "ones"):
            return lw.const(nm.cast([1 if spec.name == "ones" else 0], dtype)[0], lw.REG[dtype])
        node = self.node(n)
        kw = dict(
            zip(
                node["keywords"],
                node["inputs"][node["n_receiver"] + node["n_positional"] :],
                strict=True,
            )
        )
        fill = self.scalar(kw["fill_value"])
        if fill.literal is not None:
            return lw.const(nm.cast([fill.literal], dtype)[0], lw.REG[dtype])
        return lw.convert(fill.expr, fill.dtype, dtype)

    # -- scalars

    def scalar(self, n: int) -> Scalar:
        """Scalar node `n`: a literal, or an expression of uniforms computed once, at the
        top of the kernel (`Body.at_top`: `1 - b1**step` of an Adam step is not computed
        again for each element)."""
        n = self.resolve(n)
        if self.body is None:  # the scheduler's evaluator: shapes and dtypes only
            return self._scalar(n)
        if n not in self.scalars:
            with self.body.at_top():
                self.scalars[n] = self._scalar(n)
        return self.scalars[n]

    def _scalar(self, n: int) -> Scalar:
        v = self.values[n]
        node = self.node(n)
        if isinstance(v, SizeVal):
            if v.sym.expr is None:
                raise self.refuse(n, f"the size `{node['text']}` has no dim expression")
            if isinstance(v.sym.expr, int):
                return Scalar(int32, literal=v.sym.expr)
            return Scalar(int32, expr=self.body.let(size_i32(v.sym.expr), "s"))
        if not isinstance(v, ScalarVal):
            raise self.refuse(n, f"`{node['text']}` is not a scalar")
        dtype = default_dtype(v.kind)
        if node["kind"] == "const":
            return Scalar(dtype, literal=node["value"])
        if node["kind"] == "param":
            return Scalar(dtype, expr=Uniform(node["name"], lw.REG[dtype]))
        spec = self.spec(n)
        scalar_math = node["kind"] == "call" and spec is not None and spec.kind == "scalar_math"
        if (node["kind"] not in ("binop", "unop") and not scalar_math) or spec is None:
            raise self.refuse(n, f"the scalar expression `{node['text']}` cannot be compiled")
        args = [self.scalar(i) for i in node["inputs"]]
        if all(a.literal is not None for a in args):
            try:
                if scalar_math:
                    value = spec.element(float(args[0].literal))
                elif node["kind"] == "binop":
                    value = _PY_BINARY[node["symbol"]](args[0].literal, args[1].literal)
                else:
                    value = _PY_UNARY[node["symbol"]](args[0].literal)
            except (ArithmeticError, ValueError) as err:
                raise self.refuse(n, f"`{node['text']}` fails in Python: {err}") from None
            return Scalar(dtype, literal=value)
        kinds = [_kind_of(a.dtype) for a in args]
        compute = dr.common(spec.spelling, kinds) if spec.compute_in_common else dtype
        values = [self._scalar_value(a, compute) for a in args]
        value = lw.lower_element(spec.name, values, compute, dtype)
        return Scalar(dtype, expr=self.body.let(value))

    def scalar_as(self, n: int, dtype: DType) -> Expr:
        """A scalar operand as NumPy reads it next to tensors of `dtype` (weak typing)."""
        return self._scalar_value(self.scalar(n), dtype)

    def _scalar_value(self, s: Scalar, dtype: DType) -> Expr:
        if s.literal is not None:
            value = nm.as_operand(nm.python_value(s.literal, dtype), dtype)
            return lw.const(value, lw.REG[dtype])
        assert s.expr is not None
        return lw.convert(s.expr, s.dtype, dtype)


def _scalar_kind(v: Any) -> str:
    if isinstance(v, SizeVal):
        return "int"
    if isinstance(v, ScalarVal):
        return v.kind
    raise TypeError(v)


def _kind_of(dtype: DType) -> str:
    return "bool" if dtype.is_bool else "float" if dtype.is_float else "int"


def size_i32(size: Size) -> Expr:
    """A size as a signed Python-int value (i32), floor semantics for `//` and `%`."""
    if isinstance(size, int):
        return Const(size, "i32")
    if isinstance(size, Dim):
        return Cast(Uniform(size.name, "u32"), "i32")
    if isinstance(size, BinOp):
        a, b = size_i32(size.left), size_i32(size.right)
        if size.op in ("//", "%"):
            return lw.lower_element("floordiv" if size.op == "//" else "mod", [a, b], int32, int32)
        return lw.bin_(size.op, a, b)
    raise TypeError(f"not a size: {size!r}")
