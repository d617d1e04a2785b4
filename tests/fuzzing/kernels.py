"""Hypothesis strategies for kernel files: tensor-level and index-level, clean or planted bug.

`cases()` draws a `Case`: the text of one kernel file (a single `@gpu` function named
`kernel`), its category (the op or index pattern it exercises) and, for about half of
them, the label of the bug planted in it. The generator knows the kernel language
only as a user does (its spelling); it does not import the checker, so it cannot
share the checker's mistakes. Its notion of "clean" is a label for the report, not the
oracle: the oracle (`fuzzing.oracle`) compares the checker with the shim.

Tensor-level kernels exercise every op of `mimir.ops.TABLE` (`TENSOR_OPS` is checked
against it) on every dtype, chained with further element-wise ops. Dims carry `min`,
`max` and `multiple_of`, and parameter shapes use size arithmetic (`N + 1`, `2 * M`).
Index-level kernels use `program_id`, loops, conditions, loaded indices and clamps.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

DTYPES = ("float32", "float16", "int32", "uint32", "bool_")
FLOATS = ("float32", "float16")
INTS = ("int32", "uint32")

# Every op of `mimir.ops.TABLE`, by name (tests/test_fuzz.py checks the two agree).
TENSOR_OPS = (
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow",
    "bitand", "bitor", "bitxor", "lshift", "rshift", "lt", "le", "gt", "ge", "eq", "ne",
    "neg", "invert", "relu", "abs", "sigmoid", "tanh", "gelu", "gelu_erf", "exp", "log", "sqrt",
    "rsqrt", "sin", "cos", "cosh", "sinh", "atan", "erf", "erfc", "log1p", "expm1", "clip",
    "astype", "where", "maximum", "minimum", "atan2", "rand", "randn",
    "sum", "mean", "max", "min", "cumsum", "cumprod", "softmax", "log_softmax",
    "matmul", "einsum", "reshape", "transpose", "T", "index", "shape", "zeros", "ones", "full",
    "math_sqrt", "math_exp", "math_log", "math_sin", "math_cos", "take_along_axis",
    "arange", "tril", "triu", "concatenate", "stack", "argmax", "argmin", "var", "std",
    "sort", "argsort", "topk",
)  # fmt: skip
# Ops of the table that only index-level kernels hold (fuzzed through fixtures, not here).
INDEX_LEVEL_OPS = ("atomic_add",)

INDEX_PATTERNS = ("map", "row_loop", "gather", "stencil", "grid2d", "strided")

TENSOR_BUGS = (
    "off_by_one",
    "swapped_axes",
    "broadcast_needs_1",
    "reshape_some_sizes",
    "empty_axis",
    "slice_past_end",
    "int_uint_mix",
    "wrong_return",
)
INDEX_BUGS = ("off_by_one", "unguarded_gather", "racing_write", "loop_past_end", "int_uint_mix")

_BINARY = {
    "add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
    "pow": "**", "bitand": "&", "bitor": "|", "bitxor": "^", "lshift": "<<", "rshift": ">>",
    "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!=",
}  # fmt: skip
_FLOAT_UNARY = (
    "sigmoid", "tanh", "gelu", "exp", "log", "sqrt", "rsqrt", "sin", "cos",
    "cosh", "sinh", "atan", "erf", "erfc", "log1p", "expm1", "gelu_erf",
)  # fmt: skip


@dataclass
class Case:
    """One generated kernel file."""

    source: str
    tier: str  # "tensor" | "index"
    category: str  # the op (tensor) or pattern (index) exercised
    planted: str | None = None  # the planted bug's label, None for a kernel meant clean
    notes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.tier}:{self.category}" + (f"+{self.planted}" if self.planted else "")


@dataclass
class _Val:
    expr: str
    shape: tuple[str, ...]
    dtype: str


class _Builder:
    """Collects the parameters and dims of one kernel while its body is drawn."""

    def __init__(self, draw, dims: dict[str, str]) -> None:
        self.draw = draw
        self.dims = dims  # name -> `Dim(...)` declaration
        self.params: list[tuple[str, str]] = []  # (name, annotation)
        self.imports: set[str] = {"Dim", "Tensor", "gpu"}
        self.notes: list[str] = []
        self.bare: set[str] = set()  # dims some axis already names alone (fixes them: GPU035)
        self.math = False  # the body calls `math.*` (the file imports math)

    def param(self, shape: tuple[str, ...], dtype: str, name: str | None = None) -> _Val:
        name = name or "xyzwvu"[len(self.params)]
        self.imports.add(dtype)
        self.params.append((name, _annotation(dtype, shape)))
        return _Val(name, shape, dtype)

    def dim(self) -> str:
        return self.draw(st.sampled_from(sorted(self.dims)))

    def size(self) -> str:
        """An axis size for a parameter: a dim, a small literal or size arithmetic."""
        d = self.dim()
        if d not in self.bare:  # a dim only ever used in arithmetic is bound by no argument
            self.bare.add(d)
            return d
        return self.draw(
            st.sampled_from([d, d, "1", "3", "4", f"{d} + 1", f"2 * {d}", f"{d} + 2", f"{d} - 1"])
        )


def _annotation(dtype: str, shape: tuple[str, ...]) -> str:
    return f"Tensor[{', '.join((dtype, *shape))}]"


@st.composite
def dim_declarations(draw, names: tuple[str, ...] = ("N", "M", "K")) -> dict[str, str]:
    """`Dim`s with a mix of constraints: min 0/1/2, a max, a multiple_of."""
    out = {}
    for name in names:
        kw = []
        low = draw(st.sampled_from([1, 1, 1, 0, 2]))
        if low != 1:
            kw.append(f"min={low}")
        if draw(st.integers(0, 5)) == 0:
            kw.append(f"max={draw(st.sampled_from([8, 64, 4096]))}")
        if draw(st.integers(0, 5)) == 0:
            kw.append(f"multiple_of={draw(st.sampled_from([2, 4, 8]))}")
        out[name] = f'Dim("{name}"' + "".join(f", {k}" for k in kw) + ")"
    return out


def _render(b: _Builder, body: list[str], ret: str | None, grid: str | None = None) -> str:
    names = sorted(b.imports)
    lines = ["import math", ""] if b.math else []
    lines += [f"from mimir.array import {', '.join(names)}", ""]
    lines += [f"{name} = {decl}" for name, decl in b.dims.items()]
    lines += ["", ""]
    lines.append("@gpu" if grid is None else f"@gpu(grid={grid})")
    sig = ", ".join(f"{n}: {a}" for n, a in b.params)
    lines.append(f"def kernel({sig})" + (f" -> {ret}:" if ret else ":"))
    lines += [f"    {line}" for line in body]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- tensor level


def _scalar(dtype: str, draw) -> str:
    if dtype in FLOATS:
        return draw(st.sampled_from(["0.5", "2.0", "1.5", "-1.0"]))
    if dtype == "bool_":
        return draw(st.sampled_from(["True", "False"]))
    return draw(st.sampled_from(["2", "3", "1"]))


def _numeric(b: _Builder, v: _Val, kinds: tuple[str, ...]) -> _Val:
    """`v` cast to a dtype in `kinds` when it is not one already."""
    if v.dtype in kinds:
        return v
    target = kinds[0]
    b.imports.add(target)
    return _Val(f"{_paren(v.expr)}.astype({target})", v.shape, target)


def _paren(expr: str) -> str:
    return expr if expr.isidentifier() else f"({expr})"


def _partner(b: _Builder, v: _Val, dtype: str) -> _Val:
    """A second operand that broadcasts with `v`: same shape, a suffix, 1s, or a scalar."""
    form = b.draw(st.sampled_from(["same", "suffix", "ones", "scalar"]))
    if form == "scalar":
        return _Val(_scalar(dtype, b.draw), (), dtype)
    shape = v.shape
    if form == "suffix" and shape:
        shape = shape[b.draw(st.integers(0, len(shape) - 1)) :]
    elif form == "ones" and shape:
        k = b.draw(st.integers(0, len(shape) - 1))
        shape = shape[:k] + ("1",) + shape[k + 1 :]
    return b.param(shape, dtype)


def _apply_op(b: _Builder, op: str, v: _Val) -> _Val:
    draw = b.draw
    rank = len(v.shape)
    if op in _BINARY:
        sym = _BINARY[op]
        if op in ("bitand", "bitor", "bitxor"):
            v = _numeric(b, v, ("int32", "uint32", "bool_"))
        elif op in ("lshift", "rshift"):
            # a literal count in 0..31: anything else must be proven (GPU037)
            v = _numeric(b, v, INTS)
            count = draw(st.integers(0, 31))
            b.imports.add(v.dtype)
            return _Val(f"{_paren(v.expr)} {sym} {count}", v.shape, v.dtype)
        elif v.dtype == "bool_":
            v = _numeric(b, v, ("int32", "float32"))
        other = _partner(b, v, v.dtype)
        if op == "pow" and v.dtype in INTS:
            other = _Val("2", (), v.dtype)
        if op in ("floordiv", "mod", "truediv") and other.shape:
            other = _Val(f"({_paren(other.expr)} * {other.expr} + 1)", other.shape, other.dtype)
        shape = _broadcast(v.shape, other.shape)
        dtype = v.dtype
        if op in ("lt", "le", "gt", "ge", "eq", "ne"):
            dtype = "bool_"
        elif op == "truediv" and v.dtype not in FLOATS:
            dtype = "float32"
        left, right = draw(st.sampled_from([(v, other), (other, v)])) if other.shape else (v, other)
        if not left.shape and left.expr.lstrip("-")[:1].isdigit() is False:
            left, right = v, other
        b.imports.add(dtype)
        return _Val(f"{_paren(left.expr)} {sym} {_paren(right.expr)}", shape, dtype)
    if op == "neg":
        v = _numeric(b, v, ("float32", "float16", "int32"))
        return _Val(f"-{_paren(v.expr)}", v.shape, v.dtype)
    if op == "invert":
        v = _numeric(b, v, ("int32", "uint32", "bool_"))
        return _Val(f"~{_paren(v.expr)}", v.shape, v.dtype)
    if op in ("relu", "abs"):
        v = _numeric(b, v, ("float32", "float16", "int32"))
        return _Val(f"{_paren(v.expr)}.{op}()", v.shape, v.dtype)
    if op == "clip":
        v = _numeric(b, v, ("float32", "float16", "int32"))
        lo, hi = ("-1.0", "1.0") if v.dtype in FLOATS else ("-1", "1")
        return _Val(f"{_paren(v.expr)}.clip({lo}, {hi})", v.shape, v.dtype)
    if op in _FLOAT_UNARY:
        v = _numeric(b, v, FLOATS)
        if op in ("log", "sqrt", "rsqrt"):
            v = _Val(f"({_paren(v.expr)}.abs() + 1.0)", v.shape, v.dtype)
        if op in ("exp", "cosh", "sinh", "expm1"):
            v = _Val(f"{_paren(v.expr)}.clip(-4.0, 4.0)", v.shape, v.dtype)
        if op == "log1p":
            v = _Val(f"{_paren(v.expr)}.abs()", v.shape, v.dtype)
        if op == "gelu_erf":
            return _Val(f'{_paren(v.expr)}.gelu(approximate="none")', v.shape, v.dtype)
        return _Val(f"{_paren(v.expr)}.{op}()", v.shape, v.dtype)
    if op == "astype":
        target = draw(st.sampled_from(DTYPES))
        b.imports.add(target)
        if v.dtype in FLOATS and target in INTS:
            v = _Val(f"{_paren(v.expr)}.clip(0.0, 8.0)", v.shape, v.dtype)
        return _Val(f"{_paren(v.expr)}.astype({target})", v.shape, target)
    if op == "where":
        b.imports.add("where")
        cond = _Val(f"{_paren(v.expr)} > {_scalar(v.dtype, draw)}", v.shape, "bool_")
        if v.dtype == "bool_":
            cond = v
        other = _partner(b, v, v.dtype)
        shape = _broadcast(v.shape, other.shape)
        return _Val(f"where({cond.expr}, {v.expr}, {other.expr})", shape, v.dtype)
    if op == "atan2":
        b.imports.add(op)
        v = _numeric(b, v, FLOATS)
        other = _partner(b, v, v.dtype)
        return _Val(f"atan2({v.expr}, {other.expr})", _broadcast(v.shape, other.shape), v.dtype)

    if op in ("rand", "randn"):  # Philox of int offsets under a literal seed: float32
        b.imports.update({op, "float32"})
        v = _numeric(b, v, INTS)
        return _Val(f"{op}({draw(st.integers(0, 99))}, {v.expr})", v.shape, "float32")
    if op in ("maximum", "minimum"):
        b.imports.add(op)
        if v.dtype == "bool_":
            v = _numeric(b, v, ("float32",))
        other = _partner(b, v, v.dtype)
        return _Val(f"{op}({v.expr}, {other.expr})", _broadcast(v.shape, other.shape), v.dtype)
    if op in ("sum", "mean", "max", "min"):
        if op == "mean":
            v = _numeric(b, v, FLOATS)
        elif v.dtype == "bool_":
            v = _numeric(b, v, ("int32", "float32"))
        if not v.shape:
            return _Val(f"{_paren(v.expr)}.{op}()", (), v.dtype)
        keep = draw(st.booleans())
        form = draw(st.sampled_from(["axis", "negative", "none", "tuple"]))
        if form == "none":
            shape = tuple("1" for _ in v.shape) if keep else ()
            args = "keepdims=True" if keep else ""
        else:
            axis = draw(st.integers(0, rank - 1))
            axes = (axis,)
            text = str(axis if form != "negative" else axis - rank)
            if form == "tuple" and rank > 1:
                axes = tuple(sorted({axis, draw(st.integers(0, rank - 1))}))
                text = "(" + ", ".join(map(str, axes)) + ("," if len(axes) == 1 else "") + ")"
            shape = tuple(
                ("1" if keep else None) if i in axes else s for i, s in enumerate(v.shape)
            )
            shape = tuple(s for s in shape if s is not None)
            args = f"axis={text}" + (", keepdims=True" if keep else "")
        return _Val(f"{_paren(v.expr)}.{op}({args})", shape, v.dtype)
    if op in ("cumsum", "cumprod"):
        if v.dtype == "bool_":
            v = _numeric(b, v, ("int32",))
        if not v.shape or draw(st.booleans()):
            flat = _product(v.shape) if v.shape else "1"
            return _Val(f"{_paren(v.expr)}.{op}()", (flat,), v.dtype)
        axis = draw(st.integers(-rank, rank - 1))
        return _Val(f"{_paren(v.expr)}.{op}(axis={axis})", v.shape, v.dtype)
    if op == "einsum":
        if not v.shape or v.dtype == "bool_":
            return v
        b.imports.add("einsum")
        letters = "abcdefgh"[:rank]
        if rank >= 2 and draw(st.booleans()):  # a contraction with a new operand: a matmul
            cols = b.size()
            w = b.param((v.shape[-1], cols), v.dtype)
            spec = f"{letters},{letters[-1]}z->{letters[:-1]}z"
            return _Val(f'einsum("{spec}", {v.expr}, {w.expr})', (*v.shape[:-1], cols), v.dtype)
        spec = f"{letters}->{letters[::-1]}"
        return _Val(f'einsum("{spec}", {v.expr})', tuple(reversed(v.shape)), v.dtype)
    if op in ("math_sqrt", "math_exp", "math_log", "math_sin", "math_cos"):
        v = _numeric(b, v, FLOATS)
        b.math = True
        named = [s for s in v.shape if s.isidentifier()]  # a dim some parameter binds
        d = draw(st.sampled_from(named)) if named else "4"
        arg = {"math_sqrt": d, "math_exp": "0.5", "math_log": f"{d} + 1"}.get(op, d)
        return _Val(f"{_paren(v.expr)} * math.{op[5:]}({arg})", v.shape, v.dtype)
    if op in ("softmax", "log_softmax"):
        v = _numeric(b, v, FLOATS)
        if not v.shape:
            v = _Val(f"{_paren(v.expr)}.reshape(1)", ("1",), v.dtype)
        axis = draw(st.sampled_from(["", "axis=-1", "axis=0"]))
        return _Val(f"{_paren(v.expr)}.{op}({axis})", v.shape, v.dtype)
    if op == "matmul":
        if v.dtype in ("bool_", "uint32"):
            v = _numeric(b, v, ("float32",))
        if rank < 2:
            v = _Val(f"{_paren(v.expr)}.reshape(1, -1)", ("1", _product(v.shape)), v.dtype)
        inner = v.shape[-1]
        cols = b.size()
        batch = v.shape[:-2] if draw(st.booleans()) else ()
        w = b.param((*batch, inner, cols), v.dtype)
        lead = v.shape[:-2] if len(v.shape[:-2]) >= len(batch) else batch
        return _Val(f"{_paren(v.expr)} @ {w.expr}", (*lead, v.shape[-2], cols), v.dtype)
    if op == "reshape":
        if not v.shape:
            return _Val(f"{_paren(v.expr)}.reshape(1, 1)", ("1", "1"), v.dtype)
        form = draw(st.sampled_from(["flat", "minus_one", "split"]))
        if form == "flat" or rank == 1:
            total = _product(v.shape)
            arg = draw(st.sampled_from(["-1", total]))
            return _Val(f"{_paren(v.expr)}.reshape({arg})", (total,), v.dtype)
        if form == "minus_one":
            last = v.shape[-1]
            return _Val(
                f"{_paren(v.expr)}.reshape(-1, {last})", (_product(v.shape[:-1]), last), v.dtype
            )
        head = v.shape[0]
        rest = _product(v.shape[1:])
        return _Val(f"{_paren(v.expr)}.reshape({head}, {rest})", (head, rest), v.dtype)
    if op in ("transpose", "T"):
        if rank < 2:
            return _Val(f"{_paren(v.expr)}.T", v.shape, v.dtype)
        if op == "T":
            return _Val(f"{_paren(v.expr)}.T", tuple(reversed(v.shape)), v.dtype)
        perm = draw(st.permutations(range(rank)))
        text = ", ".join(map(str, perm))
        return _Val(f"{_paren(v.expr)}.transpose({text})", tuple(v.shape[p] for p in perm), v.dtype)
    if op == "take_along_axis":
        axis = draw(st.integers(0, rank - 1))
        if v.shape[axis] == "0":  # `Range(0, 0)` holds no value: nothing to gather from
            return v
        b.imports.update(("Range", "int32", "take_along_axis"))
        idx = b.param((*v.shape, f"Range(0, {v.shape[axis]})"), "int32")
        return _Val(f"take_along_axis({v.expr}, {idx.expr}, axis={axis})", v.shape, v.dtype)
    if op == "index":
        if not v.shape:
            return v
        s0 = v.shape[0]
        forms = ["last", "first", "from1", "head", "sym_tail", "full"]
        form = draw(st.sampled_from(forms))
        lead = ":, " if rank > 1 and draw(st.booleans()) else ""
        axis = 1 if lead else 0
        s = v.shape[axis]
        if form == "last":
            key, size = f"{lead}-1", None
        elif form == "first":
            key, size = f"{lead}0", None
        elif form == "from1":
            key, size = f"{lead}1:", f"{s} - 1"
        elif form == "head":
            key, size = f"{lead}:1", "1"
        elif form == "sym_tail":
            key, size = f"{lead}{s} - 1 : {s}", "1"
        else:
            key, size = f"{lead}:", s
        shape = list(v.shape)
        if size is None:
            del shape[axis]
        else:
            shape[axis] = size
        b.notes.append(f"index on an axis of size {s0}")
        return _Val(f"{_paren(v.expr)}[{key}]", tuple(shape), v.dtype)
    if op == "shape":
        if not v.shape or v.dtype == "bool_":
            return v
        k = draw(st.integers(0, rank - 1))
        scalar = f"{_paren(v.expr)}.shape[{k}]"
        named = [s for s in v.shape if s.isidentifier()]
        form = draw(st.sampled_from(["shape", "shape", "dim", "scale"]))
        if form != "shape" and named and v.dtype in FLOATS:
            d = draw(st.sampled_from(named))  # a Dim used as a value, as users write it
            if form == "dim":
                return _Val(f"{_paren(v.expr)} * (1.0 / {d})", v.shape, v.dtype)
            return _Val(f"{_paren(v.expr)} / ({d} ** 0.5)", v.shape, v.dtype)
        if v.dtype in FLOATS:
            return _Val(f"{_paren(v.expr)} + {scalar}", v.shape, v.dtype)
        return _Val(f"{_paren(v.expr)} * 0 + {scalar}", v.shape, v.dtype)
    if op in ("zeros", "ones", "full"):
        b.imports.add(op)
        dims = ", ".join(v.shape) + ("," if len(v.shape) == 1 else "")
        dtype = v.dtype
        b.imports.add(dtype)
        if op == "full":
            made = f"full(({dims}), {_scalar(dtype, draw)}, {dtype})"
        else:
            made = f"{op}(({dims}), {dtype})"
        if dtype == "bool_":
            return _Val(f"{_paren(v.expr)} | {made}", v.shape, dtype)
        return _Val(f"{_paren(v.expr)} + {made}", v.shape, dtype)
    return _apply_new_op(b, op, v)


def _apply_new_op(b: _Builder, op: str, v: _Val) -> _Val:
    """The ranges, masks and joins: iota, masks, joins, arg-reductions and moments."""
    draw = b.draw
    if not v.shape:
        v = _Val(f"{_paren(v.expr)}.reshape(1)", ("1",), v.dtype)
    rank = len(v.shape)
    if op == "arange":
        v = _numeric(b, v, ("float32", "float16", "int32", "uint32"))
        b.imports.add("arange")
        return _Val(f"{_paren(v.expr)} + arange({v.shape[-1]}, {v.dtype})", v.shape, v.dtype)
    if op in ("tril", "triu"):
        if rank < 2:
            v = _Val(f"{_paren(v.expr)}.reshape(1, -1)", ("1", _product(v.shape)), v.dtype)
        b.imports.add(op)
        return _Val(f"{op}({v.expr}, k={draw(st.integers(-2, 2))})", v.shape, v.dtype)
    if op in ("concatenate", "stack"):
        b.imports.add(op)
        if op == "stack":
            axis = draw(st.integers(0, rank))
            shape = (*v.shape[:axis], "2", *v.shape[axis:])
        else:
            axis = draw(st.integers(0, rank - 1))
            s = v.shape[axis]
            shape = (*v.shape[:axis], f"{s} + {s}", *v.shape[axis + 1 :])
        text = str(axis if draw(st.booleans()) else axis - len(shape))
        return _Val(f"{op}(({v.expr}, {v.expr}), axis={text})", shape, v.dtype)
    if op in ("argmax", "argmin"):
        b.imports.add("int32")
        if draw(st.booleans()):
            return _Val(f"{_paren(v.expr)}.{op}()", (), "int32")
        axis = draw(st.integers(0, rank - 1))
        shape = tuple(s for i, s in enumerate(v.shape) if i != axis)
        return _Val(f"{_paren(v.expr)}.{op}(axis={axis - rank})", shape, "int32")
    if op in ("sort", "argsort"):
        # (an axis without a `max=` of at most 2048 is a loud refusal, GPU071)
        if not v.shape:
            return v
        v = _numeric(b, v, ("float32", "int32", "uint32"))
        axis = draw(st.integers(-rank, rank - 1))
        descending = draw(st.booleans())
        dtype = "int32" if op == "argsort" else v.dtype
        b.imports.add(dtype)
        text = f"{_paren(v.expr)}.{op}(axis={axis}, descending={descending})"
        return _Val(text, v.shape, dtype)
    if op == "topk":  # the first of the pair, or the second; k = 1 fits every axis
        if not v.shape:
            return v
        v = _numeric(b, v, ("float32", "int32", "uint32"))
        b.imports.add("topk")
        axis = draw(st.integers(-rank, rank - 1))
        which = draw(st.integers(0, 1))
        shape = tuple("1" if i == axis % rank else s for i, s in enumerate(v.shape))
        dtype = "int32" if which else v.dtype
        b.imports.add(dtype)
        largest = draw(st.booleans())
        return _Val(f"topk({v.expr}, 1, axis={axis}, largest={largest})[{which}]", shape, dtype)
    if op in ("var", "std"):
        v = _numeric(b, v, FLOATS)
        axis = draw(st.integers(0, rank - 1))
        ddof = draw(st.sampled_from([0, 0, 1]))
        shape = tuple(s for i, s in enumerate(v.shape) if i != axis)
        return _Val(f"{_paren(v.expr)}.{op}(axis={axis}, ddof={ddof})", shape, v.dtype)
    raise AssertionError(f"no generator for op {op}")


def _product(shape: tuple[str, ...]) -> str:
    if not shape:
        return "1"
    parts = [s if s.isidentifier() or s.isdigit() else f"({s})" for s in shape]
    return " * ".join(parts)


def _broadcast(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    """NumPy broadcasting of two shapes the generator made compatible (equal or 1)."""
    if len(a) < len(b):
        a, b = b, a
    b = ("1",) * (len(a) - len(b)) + b
    return tuple(y if x == "1" else x for x, y in zip(a, b, strict=True))


# the ops a second step draws from: those that move elements or rows around
_STRUCTURAL = (
    "sum", "mean", "max", "min", "softmax", "cumsum", "transpose", "T", "index", "reshape",
    "take_along_axis", "matmul",
)  # fmt: skip


def _combines(a: _Val, b: _Val) -> bool:
    """Whether `a` and `b` broadcast by their spelled shapes (equal sizes or 1, aligned at
    the end), with one numeric dtype: `a op b` then checks clean."""
    if a.dtype != b.dtype or a.dtype in ("bool_", "uint32"):
        return False
    return all(x == y or "1" in (x, y) for x, y in zip(a.shape[::-1], b.shape[::-1], strict=False))


def _plant_tensor(b: _Builder, bug: str, v: _Val, ret: tuple[str, ...]) -> tuple[_Val, tuple]:
    """Rewrite a kernel so it carries `bug`; returns the value returned and its annotation."""
    draw = b.draw
    d = b.dim()
    if bug == "off_by_one":
        if ret:
            k = draw(st.integers(0, len(ret) - 1))
            ret = ret[:k] + (f"{ret[k]} + 1",) + ret[k + 1 :]
        else:
            ret = ("1",)
    elif bug == "swapped_axes":
        if len(v.shape) >= 2:
            y = b.param((v.shape[1], v.shape[0], *v.shape[2:]), v.dtype)
        else:
            y = b.param((d, "2"), v.dtype)
            ret = _broadcast(v.shape, y.shape)
        op = "+" if v.dtype != "bool_" else "|"
        v = _Val(f"{_paren(v.expr)} {op} {y.expr}", v.shape, v.dtype)
    elif bug == "broadcast_needs_1":
        other = [n for n in sorted(b.dims) if n not in v.shape] or ["K"]
        y = b.param((other[0], *v.shape[1:]) if v.shape else (other[0],), v.dtype)
        op = "+" if v.dtype != "bool_" else "|"
        v = _Val(f"{_paren(v.expr)} {op} {y.expr}", v.shape or (other[0],), v.dtype)
        ret = v.shape
    elif bug == "reshape_some_sizes":
        v = _Val(f"{_paren(v.expr)}.reshape(-1, 3)", (f"({_product(v.shape)}) // 3", "3"), v.dtype)
        ret = v.shape
    elif bug == "empty_axis":
        z = b.param((d, "3"), "float32", name="e")
        b.dims[d] = f'Dim("{d}", min=0)'
        red = draw(st.sampled_from(["max(axis=0)", "mean(axis=0)", "softmax(axis=0)", "min()"]))
        shape = {"softmax(axis=0)": (d, "3"), "min()": ()}.get(red, ("3",))
        v = _Val(f"{z.expr}.{red}", shape, "float32")
        ret = shape
    elif bug == "slice_past_end":
        y = b.param((d,), v.dtype if v.dtype != "bool_" else "float32")
        form = draw(st.sampled_from(["lit", "sym"]))
        if form == "lit":
            v, ret = _Val(f"{y.expr}[0:4]", ("4",), y.dtype), ("4",)
        else:
            v, ret = _Val(f"{y.expr}[{d} - 3 : {d}]", ("3",), y.dtype), ("3",)
    elif bug == "int_uint_mix":
        x = b.param(v.shape or ("1",), "int32")
        y = b.param(v.shape or ("1",), "uint32")
        v, ret = _Val(f"{x.expr} + {y.expr}", x.shape, "int32"), x.shape
    elif bug == "wrong_return":
        if len(ret) >= 2 and ret[0] != ret[1]:
            ret = (ret[1], ret[0], *ret[2:])
        else:
            ret = (*ret, "2")
    return v, ret


@st.composite
def tensor_cases(draw, planted: bool | None = None, op: str | None = None) -> Case:
    b = _Builder(draw, draw(dim_declarations()))
    rank = draw(st.integers(1, 3))
    if rank == 2 and draw(st.integers(0, 3)) == 0:
        # square: a row's reduction broadcast along the last axis, or read through a
        # transpose, then lines up with the other axis (`x - x.max(axis=1)`); one size
        # drawn, so no dim is marked bound by an axis that is not there (`_Builder.bare`)
        side = b.size()
        shape = (side, side)
    else:
        shape = tuple(b.size() for _ in range(rank))
    dtype = draw(st.sampled_from(DTYPES + ("float32", "float32")))
    v = b.param(shape, dtype)
    first = v
    op = op or draw(st.sampled_from(TENSOR_OPS))
    v = _apply_op(b, op, v)
    if v.shape and draw(st.integers(0, 3)) == 0:  # a second layout or reduction op on it
        v = _apply_op(b, draw(st.sampled_from(_STRUCTURAL)), v)
    if draw(st.integers(0, 2)) == 0 and _combines(v, first):
        # the result against its input (`x - x.max(axis=1)`, a residual): a reduction read
        # back at every element, through any layout op between
        sym = draw(st.sampled_from(["+", "-", "*"]))
        v = _Val(f"{_paren(v.expr)} {sym} {first.expr}", _broadcast(v.shape, first.shape), v.dtype)
    for _ in range(draw(st.integers(0, 2))):
        v = _apply_op(b, draw(st.sampled_from(("add", "mul", "relu", "abs", "maximum"))), v)
    ret = v.shape
    bug = None
    if planted is None:
        planted = draw(st.booleans())
    if planted:
        bug = draw(st.sampled_from(TENSOR_BUGS))
        v, ret = _plant_tensor(b, bug, v, ret)
    b.imports.add(v.dtype)
    if not planted and first.shape and draw(st.integers(0, 4)) == 0:
        # a second result from the same input: a reduction along its rows, which the launch
        # computing the first may fold in its pass over them (a `narrow` product's,
        # `schedule._narrow_row_reductions`; a row group's)
        red = draw(st.sampled_from(["sum", "mean", "max", "min"]))
        x = _numeric(b, first, FLOATS) if red == "mean" else first
        if x.dtype == "bool_":
            x = _numeric(b, x, ("int32",))
        keep = ", keepdims=True" if draw(st.booleans()) else ""
        w = _Val(f"{_paren(x.expr)}.{red}(axis=-1{keep})", (), x.dtype)
        b.imports.add(w.dtype)
        source = _render(b, [f"return {v.expr}, {w.expr}"], None)
        return Case(source, "tensor", op, bug, [*b.notes, "a row reduction of the input"])
    if not planted and len(b.params) <= 3 and draw(st.integers(0, 2)) == 0:
        # a second result from an input of its own: launches that may run side by side
        # (`mimir.codegen.passes.side_by_side`)
        rank = draw(st.integers(1, 3))
        w = b.param(tuple(b.size() for _ in range(rank)), draw(st.sampled_from(DTYPES)))
        w = _apply_op(b, draw(st.sampled_from(TENSOR_OPS)), w)
        b.imports.add(w.dtype)
        source = _render(b, [f"return {v.expr}, {w.expr}"], None)
        return Case(source, "tensor", op, bug, [*b.notes, "two results"])
    source = _render(b, [f"return {v.expr}"], _annotation(v.dtype, ret))
    return Case(source, "tensor", op, bug, b.notes)


# ---------------------------------------------------------------- graphs of reductions

# The category of `reduction_graphs` in a campaign's rotation (`fuzzing.campaign`).
REDUCTION_GRAPH = "reduction_graph"
_REDUCERS = ("sum", "mean", "max", "min", "var", "std", "argmax", "argmin")


@st.composite
def reduction_graphs(draw, planted: bool | None = None) -> Case:
    """Several reductions of different kinds feeding each other: rows, columns and whole
    tensors of `x: [N, C]`, `w: [N]` and `v: [C]`, each `sum mean max min var std argmax
    argmin`, divided, multiplied and broadcast back into each other (`x - x.max(axis=1)[:,
    None]`), one to three results. Drawn as expression trees of a wanted shape (a scalar,
    a value per row, per column, or per element), some subtrees bound to locals, as ported
    code spells them: `(x.max(axis=1) * w).sum() / w.sum()` is one draw. A launch of such a
    kernel reads what earlier launches reduced, so this exercises the order of launches
    (`mimir.codegen.passes.launch_order`). Planted: a row reduction broadcast against `x` without
    its `[:, None]` (GPU010 where N != C)."""
    dims = {"N": 'Dim("N", min=1)', "C": 'Dim("C", min=1)'}
    if draw(st.integers(0, 3)) == 0:
        dims["N"] = draw(st.sampled_from(['Dim("N", min=1, max=64)', 'Dim("N", multiple_of=4)']))
    b = _Builder(draw, dims)
    b.imports.add("float32")
    x = b.param(("N", "C"), "float32", "x")
    inputs = {"matrix": x}
    if draw(st.integers(0, 3)):
        inputs["row"] = b.param(("N",), "float32", "w")
    if draw(st.integers(0, 2)) == 0:
        inputs["column"] = b.param(("C",), "float32", "v")
    body: list[str] = []
    shapes = {"scalar": (), "row": ("N",), "column": ("C",), "matrix": ("N", "C")}

    def reduced(of: str, axis: str) -> _Val:
        v = value(of, 2)
        op = draw(st.sampled_from(_REDUCERS))
        if axis == "whole":
            args, shape = "", ()
        else:
            args, shape = f"axis={1 if axis == 'row' else 0}", shapes[axis]
        expr = f"{_paren(v.expr)}.{op}({args})"
        if op in ("argmax", "argmin"):  # positions, as floats to combine with the rest
            expr = f"{expr}.astype(float32)"
        return _Val(expr, shape, "float32")

    def combine(a: _Val, c: _Val) -> _Val:
        sym = draw(st.sampled_from(["+", "-", "*", "/", "/"]))
        right = f"({_paren(c.expr)}.abs() + 1.0)" if sym == "/" else _paren(c.expr)
        if a.shape == ("N",) and c.shape == ("N", "C"):
            a = _Val(f"{_paren(a.expr)}[:, None]", ("N", "1"), "float32")
        if c.shape == ("N",) and a.shape == ("N", "C"):
            right = f"{right}[:, None]"
        shape = max([a.shape, c.shape], key=len)
        return _Val(f"{_paren(a.expr)} {sym} {right}", shape, "float32")

    def value(kind: str, depth: int) -> _Val:
        """A value of shape `kind`, its tree at most `depth` deep."""
        forms = ["leaf"] if depth == 0 else ["leaf", "reduce", "reduce", "combine", "combine"]
        form = draw(st.sampled_from(forms))
        if kind == "scalar" and form == "leaf":
            form = "reduce"
        if form == "leaf" and kind in inputs:
            return inputs[kind]
        if form == "reduce" or (form == "leaf" and kind != "scalar"):
            if kind == "scalar":
                of = draw(st.sampled_from(["matrix", "row", "row", "column"]))
                return reduced(of, "whole")
            if kind == "matrix":  # a per-element value: a row's softmax, or a combination
                v = value("matrix", depth - 1) if depth else x
                # times x: a softmax's rows sum to 1, and an argmax over such sums (equal up
                # to rounding) would pick by rounding, not by the kernel
                expr = f"{_paren(v.expr)}.softmax(axis=-1) * x"
                return _Val(expr, shapes["matrix"], "float32")
            return reduced("matrix", kind)
        a = value(kind, depth - 1)
        other = draw(st.sampled_from(["scalar", "row", kind] if kind != "scalar" else ["scalar"]))
        if kind == "column" and other == "row":
            other = "column"
        c = value(other, depth - 1)
        pair = (a, c) if draw(st.booleans()) else (c, a)
        got = combine(*pair)
        if draw(st.integers(0, 2)) == 0:  # bound to a local, read by name from here on
            local = f"t{len(body)}"
            body.append(f"{local} = {got.expr}")
            got = _Val(local, got.shape, got.dtype)
        return got

    bug = None
    if planted is None:
        planted = draw(st.booleans())
    if planted:
        bug = "broadcast_needs_1"
        row = reduced("matrix", "row")
        body.append(f"return {_paren(x.expr)} - {_paren(row.expr)}")
        return Case(_render(b, body, _annotation("float32", ("N", "C"))), "tensor",
                    REDUCTION_GRAPH, bug, b.notes)  # fmt: skip
    kinds = ["scalar", *draw(st.lists(st.sampled_from(list(shapes)), max_size=2))]
    results = [value(kind, draw(st.integers(1, 3))) for kind in kinds]
    if len(results) == 1:
        body.append(f"return {results[0].expr}")
        ret: str | None = _annotation("float32", results[0].shape)
    else:
        body.append("return " + ", ".join(r.expr for r in results))
        ret = None
    return Case(_render(b, body, ret), "tensor", REDUCTION_GRAPH, bug, b.notes)


# ---------------------------------------------------------------- index level


@st.composite
def index_cases(draw, planted: bool | None = None, pattern: str | None = None) -> Case:
    b = _Builder(draw, draw(dim_declarations(("N", "M", "C"))))
    b.imports.add("program_id")
    pattern = pattern or draw(st.sampled_from(INDEX_PATTERNS))
    if planted is None:
        planted = draw(st.booleans())
    bugs = {
        "map": ("off_by_one", "racing_write", "int_uint_mix"),
        "row_loop": ("loop_past_end", "racing_write", "off_by_one"),
        "gather": ("unguarded_gather", "off_by_one", "racing_write"),
        "stencil": ("off_by_one", "racing_write"),
        "grid2d": ("off_by_one", "racing_write", "loop_past_end"),
        "strided": ("off_by_one", "loop_past_end"),
    }[pattern]
    bug = draw(st.sampled_from(bugs)) if planted else None
    dt = draw(st.sampled_from(["float32", "float32", "int32", "float16"]))
    lit = "1.0" if dt in FLOATS else "1"
    zero = "0.0" if dt in FLOATS else "0"
    body: list[str] = ["i = program_id(0)"]
    grid = "(N,)"
    at = "0" if bug == "racing_write" else "i"
    if pattern == "map":
        b.param(("N",), dt, "x")
        if bug == "int_uint_mix":
            b.param(("N",), "uint32", "u")
            b.param(("N",), "int32", "out")
            body.append(f"out[{at}] = x[i] + u[i]" if dt == "int32" else "out[i] = u[i] + i")
        else:
            b.param(("N",), dt, "out")
            op = draw(st.sampled_from(["*", "+", "-"]))
            src = "x[i + 1]" if bug == "off_by_one" else "x[i]"
            body.append(f"out[{at}] = {src} {op} {lit}")
    elif pattern == "row_loop":
        b.param(("N", "M"), dt, "x")
        b.param(("N",), dt, "out")
        end = "M + 1" if bug == "loop_past_end" else "M"
        start = draw(st.sampled_from(["", "1, "]))
        body += [f"acc = {zero}", f"for j in range({start}{end}):"]
        cond = draw(st.booleans())
        j = "j + 1" if bug == "off_by_one" else "j"
        if cond:
            body += [f"    if x[i, {j}] > {zero}:", f"        acc += x[i, {j}]"]
        else:
            body += [f"    acc += x[i, {j}]"]
        body.append(f"out[{at}] = acc")
    elif pattern == "gather":
        b.param(("N",), "int32", "idx")
        b.param(("C",), dt, "x")
        b.param(("N",), dt, "out")
        body.append("y = idx[i]")
        guard = draw(st.sampled_from(["if", "clamp", "mod"]))
        if bug == "unguarded_gather":
            body.append(f"out[{at}] = x[y]")
        elif guard == "if":
            hi = "C + 1" if bug == "off_by_one" else "C"
            body += [
                f"if (0 <= y) & (y < {hi}):",
                f"    out[{at}] = x[y]",
                "else:",
                f"    out[{at}] = {zero}",
            ]
        elif guard == "clamp":
            b.imports.update({"maximum", "minimum"})
            hi = "C" if bug == "off_by_one" else "C - 1"
            body += [f"k = minimum(maximum(y, 0), {hi})", f"out[{at}] = x[k]"]
        else:
            body.append(
                f"out[{at}] = x[y % C]" if bug != "off_by_one" else f"out[{at}] = x[y % C + 1]"
            )
    elif pattern == "stencil":
        b.param(("N",), dt, "x")
        b.param(("N",), dt, "out")
        hi = "N" if bug != "off_by_one" else "N + 1"
        body += [
            f"if i + 1 < {hi}:",
            f"    out[{at}] = x[i + 1] - x[i]",
            "else:",
            f"    out[{at}] = {zero}",
        ]
    elif pattern == "grid2d":
        grid = "(N, M)"
        b.param(("N", "C"), dt, "a")
        b.param(("C", "M"), dt, "w")
        b.param(("N", "M"), dt, "out")
        end = "C + 1" if bug == "loop_past_end" else "C"
        col = "j + 1" if bug == "off_by_one" else "j"
        target = "0, j" if bug == "racing_write" else "i, j"
        body += ["j = program_id(1)", f"acc = {zero}", f"for k in range({end}):",
                 f"    acc += a[i, k] * w[k, {col}]", f"out[{target}] = acc"]  # fmt: skip
    else:  # strided
        b.param(("N", "M"), dt, "x")
        b.param(("N",), dt, "out")
        end = "M + 2" if bug == "loop_past_end" else "M"
        step = draw(st.sampled_from(["2", "3"]))
        j = "j + 1" if bug == "off_by_one" else "j"
        body += [f"acc = {zero}", f"for j in range(0, {end}, {step}):", f"    acc += x[i, {j}]",
                 "out[i] = acc"]  # fmt: skip
    source = _render(b, body, None, grid)
    return Case(source, "index", pattern, bug, b.notes)


def cases() -> st.SearchStrategy[Case]:
    """Every kind of generated kernel: three tensor-level to one index-level."""
    return st.one_of(tensor_cases(), tensor_cases(), tensor_cases(), index_cases())
