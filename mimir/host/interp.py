"""The interpreter over host code: every statement outside `@gpu` bodies, abstractly.

Values are `mimir.host.values`; library calls go to the shape table
(`mimir.host.api`, `mimir.host.nn`); sizes are terms of the Z3 size algebra and
every requirement a rule states is proven with the kernel checker's `Prover`
(a counterexample when it fails for some admissible size).

- Assignments, tuples, attributes of `self`: values flow as written.
- Branches: a condition known statically (`if self.downsample is not None`) picks its
  branch; otherwise both run and the join keeps what both agree on (of two tuples of
  different lengths, the items both begin with).
- `try: import pkg ... except ImportError:` with a package neither the project's, the
  standard library's nor known (`apex`): taken as not installed, the fallback runs.
- Loops: a literal sequence (a `ModuleList`) is unrolled; any other loop runs
  its body until the loop-carried values agree, widening sizes that change to
  unknown (never unrolled forever).
- Helper functions and methods are interpreted at each call with the call's
  values (polymorphic in their sizes); functions and classes no call reaches are
  checked once with their annotations.
- `@gpu` calls bind each `Dim` of the parameters once across all arguments
  (GPU040/GPU041/GPU042 at the call) and the result takes the annotated shape.
- Anything else is UNKNOWN, and nothing computed from it is ever reported.

This module holds the entry, expressions and calls; `HostChecker` mixes in how
statements run (`mimir.host.statements`), classes and instances
(`mimir.host.objects`), library calls (`mimir.host.library_calls`), symbolic sizes
(`mimir.host.symbolic`), every function checked without a caller
(`mimir.host.modular`) and Python's builtins (`mimir.host.pybuiltins`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, NoReturn

from mimir.diagnostics.codes import REGISTRY
from mimir.diagnostics.diagnostic import Diagnostic, Label, Span
from mimir.dims import Dim
from mimir.host import api, hf_cache, kernel_calls, nn, pyops
from mimir.host import torch_table as tt
from mimir.host.annotations import read_host_annotation
from mimir.host.assume import Demand
from mimir.host.coverage import KNOWN, PARTIAL, UNKNOWN_SHAPE, Coverage
from mimir.host.flow import (
    DEAD,
    aliases,
    constant,
    decorator_name,
    is_none,
    literal_items,
    segment,
    truth_of,
    uninformative,
    unseen_keywords,
)
from mimir.host.foreign import Foreign, LazyName
from mimir.host.library_calls import OPEN, Dataset, Library
from mimir.host.modular import Modular
from mimir.host.objects import Objects, registered
from mimir.host.pybuiltins import PyBuiltins
from mimir.host.rules import RefutedError
from mimir.host.statements import DTYPE_NAMES, UNROLL, Frame, Statements
from mimir.host.summaries import fingerprint, summarisable
from mimir.host.symbolic import NEVER, Symbolic
from mimir.host.values import (
    OTHER_KEYS,
    UNKNOWN,
    ApiV,
    BoolV,
    CachesV,
    CacheV,
    ClassV,
    ConfigV,
    DictV,
    DTypeV,
    FloatV,
    FuncV,
    HeadV,
    IntV,
    KernelV,
    LambdaV,
    LayerV,
    LoaderV,
    MethodV,
    NoneV,
    ObjectV,
    OptionalV,
    PartialV,
    PrefixV,
    ShapeOfV,
    SpreadV,
    StrV,
    SuperV,
    Sym,
    TensorV,
    TupleV,
    arith,
    const,
    join,
    join_all,
    literal,
    product,
)
from mimir.parse.module import ModuleInfo
from mimir.solve.prover import Prover
from mimir.solve.z3lib import z3

_MAX_DEPTH = 8
_BUDGET = 40_000  # statements interpreted per file; past it, calls are no longer followed
_BUILTIN_ITERS = {"range", "enumerate", "zip", "reversed", "sorted"}
_MUTATORS = {
    "append", "extend", "insert", "pop", "remove", "clear", "update", "add_module", "setdefault",
    "popitem",
}  # fmt: skip
_MODULE_SELF = {"to", "cuda", "cpu", "train", "eval", "float", "double", "half", "requires_grad_"}


@dataclass
class HostResult:
    diagnostics: list[Diagnostic]
    unknown_calls: int = 0  # calls given a known tensor whose result the table does not know
    unproven: int = 0  # obligations Z3 could not decide (never reported as errors)
    shapes: dict[tuple[int, int], str] = field(default_factory=dict)  # hover: (line, col) -> shape
    coverage: Coverage = field(default_factory=Coverage)  # what a clean run checked


class HostChecker(Statements, Objects, Library, Foreign, Symbolic, Modular, PyBuiltins):
    def __init__(self, info: ModuleInfo, timeout_ms: int) -> None:
        self._init_symbolic()
        self._init_modular()
        self.budget = _BUDGET
        self.loop_depth = 0  # fixpoint loops running: what they change is not counted
        self._current: list[tuple[ast.FunctionDef, Any]] = []  # functions running, innermost last
        self._runs: list[_Run] = []  # the same runs, with their parameters' values
        self._run_count = 0
        self._guarding: list[tuple[ast.AST, dict | None, _Run | None]] = []  # rules running
        self._classes: dict[int, ast.ClassDef] | None = None  # method -> class, on demand
        self.info = info
        self.src = info.source
        self.prover = Prover(timeout_ms=timeout_ms)
        self.aliases = aliases(info)
        self.kernels = {k.node.name: k for k in info.kernels}
        self.globals: dict[str, Any] = {}
        self.found: dict[tuple[int, int, str], Diagnostic] = {}
        self.depth = 0
        self.reached: set[int] = set()  # id() of FunctionDefs interpreted at a call
        self.instantiated: set[int] = set()
        self.unknown_nodes: set[tuple[int, int]] = set()
        self.unproven = 0
        self.shapes: dict[tuple[int, int], str] = {}
        self._declared: set[str] = set()
        self._fresh = 0
        self._node: ast.AST | None = None
        self.steps = 0
        self.quiet = 0  # inside code that expects an error (try/except, pytest.raises)
        self._memo: dict[tuple, Any] = {}
        self._summaries: dict[tuple, tuple[Any, tuple, Any]] = {}
        self.coverage = Coverage()
        self._counted_layers: set[tuple[int, int]] = set()
        self._unknown_names: dict[tuple[int, int], str] = {}  # hover: why a name is unknown
        self._reasons: dict[tuple[int, int], str] = {}  # unknown call -> why
        self._hover: dict[tuple[int, int], Any] = {}
        self._init_foreign()

    # ------------------------------------------------------------ entry

    def run(self) -> HostResult:
        tree = self.info.tree
        self.block(tree.body, self.globals, None)
        self.check_every_function(tree)
        diags = sorted(self.found.values(), key=Diagnostic.sort_key)
        for key, reason in self._unknown_names.items():
            self.shapes.setdefault(key, f"unknown: {reason}")
        return HostResult(diags, len(self.unknown_nodes), self.unproven, self.shapes, self.coverage)

    # ------------------------------------------------------------ the context rules use

    def warn(self, code: str, message: str) -> None:
        if self._node is not None:
            self.report(RefutedError(code, message), self._node)

    def fail(self, code: str, message: str) -> NoReturn:
        raise RefutedError(code, message)

    def fresh(self, name: str, lo: int, hi: int | None = None, values: tuple = ()) -> Sym:
        self._fresh += 1
        unique = name if name not in self._declared else f"{name}{self._fresh}"
        self._declared.add(unique)
        var = self.prover.dim(unique)
        self.prover.add_fact(var >= lo, None)
        if hi is not None:
            self.prover.add_fact(var <= hi, None)
        if values:
            self.prover.add_fact(z3.Or(*(var == v for v in values)), None)
        return Sym(var, unique)

    def dim_size(self, dim: Dim) -> Sym:
        var = self.prover.dim(dim.name)
        if dim.name not in self._declared:
            self._declared.add(dim.name)
            self.prover.add_fact(var >= dim.min, None)
            if dim.max is not None:
                self.prover.add_fact(var <= dim.max, None)
            if dim.multiple_of is not None:
                self.prover.add_fact(var % dim.multiple_of == 0, None)
            for bound, upper in ((dim.min_of, False), (dim.max_of, True)):
                if bound is not None:  # `Dim("T", max=MAXT)`: T <= MAXT in every proof
                    limit = self._size_term(bound)
                    self.prover.add_fact(var <= limit if upper else var >= limit, None)
        return Sym(var, dim.name, expr=dim)

    def _size_term(self, size: Any) -> Any:
        if isinstance(size, int):
            return z3.IntVal(size)
        if isinstance(size, Dim):
            return self.dim_size(size).term
        a, b = self._size_term(size.left), self._size_term(size.right)
        if size.op == "+":
            return a + b
        if size.op == "-":
            return a - b
        if size.op == "*":
            return a * b
        return a / b if size.op == "//" else a % b  # z3's integer division and modulo

    def named_size(self, name: str) -> Sym:
        if name in self.info.dims:
            return self.dim_size(self.info.dims[name].dim)
        return self.dim_size(Dim(name))

    def report(self, err: RefutedError, node: ast.AST) -> None:
        if self.quiet:
            return
        if self.captured is not None:  # a probe: kept apart, reported or not as a whole
            self.captured.append((err, node))
            return
        if err.first is not None and self.site is None:
            err, node = _at_first_demand(err, self.src.span(node)), err.first[0].node
        # what fails in another module's code is reported at the checked file's call
        span = self.local_src.span(self.site) if self.site is not None else self.src.span(node)
        if self.site is not None:
            where = self.src.span(node)
            name = where.path.rsplit("/", 1)[-1]
            err.labels = (*err.labels, Label(where, f"it fails here, in `{name}`"))
        key = (span.line, span.column, err.code)
        if key in self.found or any(k[:2] == (span.line, span.column) for k in self.found):
            return  # one diagnostic per node, whichever context found it first
        self.found[key] = Diagnostic(
            err.code,
            err.message,
            span,
            severity=REGISTRY[err.code].severity,
            labels=err.labels,
            counterexample=err.counterexample,
            counterexample_note=err.note if err.counterexample else None,
            extra_why=err.why,
        )

    # ------------------------------------------------------------ statements

    def _api(self, name: str) -> Any:
        head, _, attr = name.rpartition(".")
        if name == "numpy.newaxis":
            return NoneV()
        if head in ("torch", "numpy") and attr in DTYPE_NAMES:
            return DTypeV(DTYPE_NAMES[attr])
        return ApiV(name)

    # ------------------------------------------------------------ expressions

    def expr(self, node: ast.expr | None, env: dict) -> Any:
        if node is None:
            return NoneV()
        if isinstance(node, ast.Constant):
            return constant(node.value)
        if isinstance(node, ast.Name):
            return self.lookup(node.id, env)
        if isinstance(node, (ast.Tuple, ast.List)):
            if any(isinstance(e, ast.Starred) for e in node.elts):
                return self._spread(node, env)
            return TupleV(tuple(self.expr(e, env) for e in node.elts), isinstance(node, ast.List))
        if isinstance(node, ast.Attribute):
            return self.attribute(node, self.expr(node.value, env))
        if isinstance(node, ast.Call):
            inputs: list[Any] = []
            value = self.call(node, env, inputs)
            self._cover(node, value, inputs)
            return value
        if isinstance(node, ast.BinOp):
            left, right = self.expr(node.left, env), self.expr(node.right, env)
            value = self.binop(node, left, node.op, right)
            self._cover(node, value, [left, right])
            return value
        if isinstance(node, ast.UnaryOp):
            return self.unary(node, self.expr(node.operand, env))
        if isinstance(node, ast.Compare):
            return self.compare(node, env)
        if isinstance(node, ast.BoolOp):
            values = [self.expr(v, env) for v in node.values]
            truths = [truth_of(v) for v in values]
            if not all(isinstance(v, BoolV) for v in values):
                return pyops.short_circuit(values, truths, isinstance(node.op, ast.Or))
            terms = [
                z3.BoolVal(t) if t is not None else getattr(v, "term", None)
                for v, t in zip(values, truths, strict=True)
            ]
            symbolic = None if None in terms else terms
            loose = any(isinstance(v, BoolV) and v.loose for v in values)
            if isinstance(node.op, ast.And):
                if False in truths:
                    return BoolV(False)
                if all(t is True for t in truths):
                    return BoolV(True)
                return BoolV(None, z3.And(*symbolic) if symbolic else None, loose)
            if True in truths:
                return BoolV(True)
            if all(t is False for t in truths):
                return BoolV(False)
            return BoolV(None, z3.Or(*symbolic) if symbolic else None, loose)
        if isinstance(node, ast.Subscript):
            return self.subscript(node, env)
        if isinstance(node, ast.IfExp):
            test = self.expr(node.test, env)
            truth = truth_of(test)
            if truth is True:
                return self.expr(node.body, env)
            if truth is False:
                return self.expr(node.orelse, env)
            opaque = test is UNKNOWN  # as for `if`: either side may never be taken
            self.quiet += opaque
            try:
                return join(self.expr(node.body, env), self.expr(node.orelse, env))
            finally:
                self.quiet -= opaque
        if isinstance(node, ast.JoinedStr):
            return self._fstring(node, env)
        if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
            return self.comprehension(node, env)
        if isinstance(node, ast.Dict):
            return self.dict_display(node, env)
        if isinstance(node, ast.Lambda):
            return LambdaV(node, env)
        if isinstance(node, ast.NamedExpr):
            value = self.expr(node.value, env)
            self.bind(node.target, value, env)
            return value
        return UNKNOWN

    def _spread(self, node: ast.Tuple | ast.List, env: dict) -> Any:
        """`(a, *xs, b)`: the items of `xs` in place; `(*x.shape, h)` of a tensor of
        unknown rank is kept for an unpacking to fix the rank."""
        items: list[Any] = []
        shape: ShapeOfV | HeadV | None = None
        after: list[Any] = []
        known = True
        for e in node.elts:
            value = self.expr(e.value if isinstance(e, ast.Starred) else e, env)
            target = after if shape is not None else items
            if not isinstance(e, ast.Starred):
                target.append(value)
            elif isinstance(value, TupleV):
                target.extend(value.items)
            elif isinstance(value, (ShapeOfV, HeadV)) and shape is None:
                shape = value
            else:
                known = False
        if not known:
            return UNKNOWN
        if isinstance(shape, HeadV):  # `(*x.shape[:-1], -1, d)`
            return HeadV(shape.tensor, shape.drop, (*shape.after, *after)) if not items else UNKNOWN
        if shape is not None:
            return SpreadV(tuple(items), shape, tuple(after))
        return TupleV(tuple(items), isinstance(node, ast.List))

    def dict_display(self, node: ast.Dict, env: dict) -> Any:
        items: dict[str, Any] = {}
        for k, v in zip(node.keys, node.values, strict=True):
            value = self.expr(v, env)
            if k is None:
                if not isinstance(value, DictV):
                    return UNKNOWN
                items.update(value.items)
                continue
            key = self.expr(k, env)
            if not isinstance(key, StrV):
                return UNKNOWN
            items[key.value] = value
        return DictV(items)

    def comprehension(self, node: ast.ListComp | ast.GeneratorExp, env: dict) -> Any:
        """`[nn.Linear(d, d) for i in range(3)]`: one item per item iterated, when the
        iterables and conditions are known; else what any item is, of unknown count."""
        items: list[Any] = []

        def generate(k: int, scope: dict) -> bool:
            if k == len(node.generators):
                items.append(self.expr(node.elt, scope))
                return len(items) <= 2 * UNROLL
            g = node.generators[k]
            seq = literal_items(self.expr(g.iter, scope))
            if g.is_async or seq is None or len(seq) > 2 * UNROLL:
                return False
            for x in seq:
                inner = dict(scope)
                self.bind(g.target, x, inner)
                truths = [truth_of(self.expr(c, inner)) for c in g.ifs]
                if None in truths:
                    return False
                if all(truths) and not generate(k + 1, inner):
                    return False
            return True

        if generate(0, dict(env)):
            return TupleV(tuple(items), is_list=True)
        if len(node.generators) == 1 and not node.generators[0].ifs:
            g = node.generators[0]
            scope = dict(env)
            self.bind(g.target, self.element(self.expr(g.iter, env)), scope)
            return LoaderV(self.expr(node.elt, scope))  # items of one kind, count unknown
        return UNKNOWN

    def lookup(self, name: str, env: dict) -> Any:
        if name in env:
            v = env[name]
            if isinstance(v, LazyName):  # an imported name, read the first time
                v = env[name] = self.resolve_name(v)
            if isinstance(v, OptionalV):
                v = v.value
            if isinstance(v, TensorV) and v.origin is not None:
                return self.current(v)
            return v
        if name in self.globals:
            return self.global_value(name)
        if name == "__name__":
            return StrV("__main__")
        if name in ("True", "False"):
            return BoolV(name == "True")
        if name in (
            "len",
            "range",
            "enumerate",
            "zip",
            "int",
            "float",
            "super",
            "isinstance",
            "list",
            "tuple",
            "min",
            "max",
            "sum",
            "print",
            "reversed",
            "sorted",
            "abs",
            "round",
            "iter",
            "next",
            "bool",
            "str",
            "hasattr",
            "getattr",
            "setattr",
            "map",
            "dict",
            "all",
            "any",
        ):
            return ApiV("builtins." + name)
        return UNKNOWN

    def attribute(self, node: ast.Attribute, base: Any) -> Any:
        attr = node.attr
        if isinstance(base, ApiV):
            return self._api(f"{base.name}.{attr}")
        if isinstance(base, TensorV):
            if attr == "shape":
                if base.shape is None:
                    return ShapeOfV(self.current(base), _label(node.value))
                return TupleV(tuple(IntV(s) for s in base.shape))
            if attr in ("T", "mT"):
                return self.guard(node, lambda: api.call_method(self, base, attr, [], {}))
            if attr == "ndim":  # of an unknown rank: a test of it dispatches on what is lost
                return UNKNOWN if base.shape is None else IntV(const(len(base.shape)))
            if attr == "dtype":
                return DTypeV(base.dtype) if base.dtype else UNKNOWN
            if attr == "size" and base.lib == "numpy":
                return IntV(None) if base.shape is None else IntV(product(base.shape))
            if attr in ("device", "grad", "data"):
                return base if attr == "data" else UNKNOWN
            return MethodV(base, attr)
        if isinstance(base, ObjectV):
            if attr in base.attrs:
                return base.attrs[attr]
            method = self._method(base.cls, attr)
            if method is None:
                value = self._class_attr(base.cls, attr)
                if value is not None:
                    return value
            if method is not None:
                kinds = {decorator_name(d) for d in method.decorator_list}
                if "property" in kinds:
                    return self.call_function(FuncV(method, base), node, [], {})
                if "staticmethod" in kinds:  # `self.helper(x)`: no instance is passed
                    return FuncV(method, None)
                return FuncV(method, base)
            if isinstance(base.layer, LayerV):
                if base.layer.kind == "ModuleDict" and attr in ("items", "values", "keys"):
                    found = registered(base)  # `for name, layer in self.items()`
                    return UNKNOWN if found is None else MethodV(found, attr)
                if base.layer.kind in ("ModuleDict", "Sequential") and attr == "add_module":
                    return MethodV(base, attr)  # an attribute of its own, as it is in PyTorch
                return self.attribute(node, base.layer)
            return MethodV(base, attr)
        if isinstance(base, LayerV):
            if base.kind == "ModuleDict" and attr in base.named:
                return base.named[attr]
            if attr in nn.PARAMS.get(base.kind, ()):
                return nn.param(base, attr, UNKNOWN)
            weight = nn.weight(base, attr)
            if weight is not None:
                return weight
            return MethodV(base, attr)
        if isinstance(base, ConfigV):
            return self.config_attribute(base, attr)
        if isinstance(base, ClassV):  # `Weights.verify(w)`, `Block.expansion`
            method = self._method(base.node, attr)
            if method is not None:
                kinds = {decorator_name(d) for d in method.decorator_list}
                if "classmethod" in kinds:
                    return FuncV(method, base)
                return FuncV(method, None) if "staticmethod" in kinds else UNKNOWN
            value = self._class_attr(base.node, attr)
            return UNKNOWN if value is None else value
        if isinstance(base, SuperV):
            return self.super_attribute(base, attr)
        if isinstance(base, (DictV, StrV)):
            return MethodV(base, attr)
        if isinstance(base, (CacheV, CachesV)):
            return hf_cache.attribute(base, attr)
        if isinstance(base, TupleV) and attr in ("values", "indices") and len(base.items) == 2:
            return base.items[attr == "indices"]  # the named tuple `x.max(dim=1)` returns
        if isinstance(base, (TupleV, LoaderV, Dataset)):
            return MethodV(base, attr)
        return UNKNOWN

    def subscript(self, node: ast.Subscript, env: dict) -> Any:
        base = self.expr(node.value, env)
        index = self.index(node.slice, env)
        if isinstance(base, ShapeOfV):
            return self._shape_item(base, index)
        if isinstance(base, TensorV):
            return self.guard(node, lambda: tt.subscript(self, base, index))
        if isinstance(base, TupleV):
            if isinstance(index, IntV) and literal(index.sym) is not None:
                k = literal(index.sym)
                assert k is not None
                if -len(base.items) <= k < len(base.items):
                    return base.items[k]
                return UNKNOWN
            if isinstance(index, tt.SliceV):
                bounds = (index.start, index.stop, index.step)
                if all(
                    b is None or (b != tt.UNREADABLE and literal(b) is not None) for b in bounds
                ):
                    lo, hi, st = (None if b is None else literal(b) for b in bounds)
                    return TupleV(base.items[lo:hi:st], base.is_list)
            return UNKNOWN
        if isinstance(base, PrefixV):
            return _prefix_item(base, index)
        if isinstance(base, LayerV) and isinstance(index, IntV) and literal(index.sym) is not None:
            k = literal(index.sym)
            assert k is not None
            if not base.exact:
                return base.items[0] if base.items else UNKNOWN
            if -len(base.items) <= k < len(base.items):
                return base.items[k]
        if isinstance(base, LayerV) and isinstance(index, tt.SliceV) and base.exact:
            bounds = (index.start, index.stop, index.step)
            if all(b is None or (b != tt.UNREADABLE and literal(b) is not None) for b in bounds):
                lo, hi, st = (None if b is None else literal(b) for b in bounds)
                return LayerV(base.kind, [], {}, base.text, base.items[lo:hi:st], base.span)
        if isinstance(base, LayerV) and base.kind == "ModuleDict" and isinstance(index, StrV):
            return base.named.get(index.value, UNKNOWN)
        if isinstance(base, DictV) and isinstance(index, StrV) and index.value:
            return base.items.get(index.value, UNKNOWN)
        if isinstance(base, ObjectV):  # `ACT2FN["gelu"]`: the class's own `__getitem__`
            getitem = self._method(base.cls, "__getitem__")
            if getitem is not None:
                return self.call_function(FuncV(getitem, base), node, [index], {})
        return UNKNOWN

    def _shape_item(self, shape: ShapeOfV, index: Any) -> Any:
        """`x.shape[k]`, `x.shape[-2:]`, `x.shape[:2]` of a tensor of unknown rank."""
        t = shape.tensor
        if isinstance(index, IntV) and literal(index.sym) is not None:
            k = literal(index.sym)
            assert k is not None
            return IntV(self.axis_size(t, k, shape.label))
        if isinstance(index, tt.SliceV) and index.step is None:
            lo = None if index.start is None else literal(index.start)
            hi = None if index.stop is None else literal(index.stop)
            if index.stop is None and lo is not None and lo < 0:
                return TupleV(tuple(IntV(self.axis_size(t, k, shape.label)) for k in range(lo, 0)))
            if index.start is None and hi is not None and hi >= 0:
                return TupleV(tuple(IntV(self.axis_size(t, k, shape.label)) for k in range(hi)))
            if index.start is None and hi is not None and hi < 0:
                return HeadV(t, -hi)  # `x.shape[:-1]`: all but the last axes
        return UNKNOWN

    def index(self, node: ast.expr, env: dict) -> Any:
        if isinstance(node, ast.Slice):
            return tt.SliceV(*(self._bound(b, env) for b in (node.lower, node.upper, node.step)))
        if isinstance(node, ast.Constant) and node.value is Ellipsis:
            return tt.EllipsisV()
        if isinstance(node, ast.Tuple):
            return TupleV(tuple(self.index(e, env) for e in node.elts))
        return self.expr(node, env)

    def _bound(self, node: ast.expr | None, env: dict) -> Any:
        if node is None:
            return None
        v = self.expr(node, env)
        if isinstance(v, NoneV):
            return None
        if isinstance(v, IntV) and v.sym is not None:
            return v.sym
        return tt.UNREADABLE

    def unary(self, node: ast.UnaryOp, v: Any) -> Any:
        if v is UNKNOWN:
            return UNKNOWN
        if isinstance(node.op, ast.Not):
            t = truth_of(v)
            if t is None and isinstance(v, BoolV) and v.term is not None:
                return BoolV(None, z3.Not(v.term), v.loose)
            return BoolV(None if t is None else not t)
        if isinstance(v, IntV) and isinstance(node.op, ast.USub):
            return IntV(arith("-", const(0), v.sym), v.loose)
        if isinstance(v, (TensorV, FloatV)):
            return v
        if isinstance(v, IntV):
            return IntV(None)
        return UNKNOWN

    def binop(self, node: ast.AST, a: Any, op: ast.operator, b: Any) -> Any:
        if isinstance(a, TensorV) or isinstance(b, TensorV):
            if isinstance(op, ast.MatMult):
                return self.guard(node, lambda: tt.matmul(self, a, b))
            if not all(
                isinstance(x, (TensorV, IntV, FloatV, BoolV)) or x is UNKNOWN for x in (a, b)
            ):
                t = a if isinstance(a, TensorV) else b
                return TensorV(None, None, t.lib)
            if a is UNKNOWN or b is UNKNOWN:  # `scores + mask`, the mask from code not read
                return self.guard(node, lambda: tt.elementwise(self, a, b, dtype=None))
            out = self.guard(node, lambda: tt.elementwise(self, a, b))
            if isinstance(op, ast.Div) and isinstance(out, TensorV) and not tt.is_float(out.dtype):
                lib = out.lib
                return out.with_dtype(None if out.dtype is None else tt.default_float(lib))
            return out
        if isinstance(a, IntV) and isinstance(b, IntV):
            ops = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%"}
            if type(op) in ops:
                return IntV(arith(ops[type(op)], a.sym, b.sym), a.loose or b.loose)
            if isinstance(op, ast.Div):
                return pyops.float_op(op, a, b)
            if (
                isinstance(op, ast.Pow)
                and literal(a.sym) is not None
                and literal(b.sym) is not None
            ):
                x, y = literal(a.sym), literal(b.sym)
                assert x is not None and y is not None
                return IntV(const(x**y)) if 0 <= y < 64 else pyops.float_op(op, a, b)
            return IntV(None)
        if isinstance(a, (IntV, FloatV)) and isinstance(b, (IntV, FloatV)):
            return pyops.float_op(op, a, b)
        if isinstance(a, StrV) and isinstance(op, ast.Mod):
            return pyops.percent(a, b)
        if isinstance(a, TupleV) and isinstance(b, TupleV) and isinstance(op, ast.Add):
            return TupleV(a.items + b.items, a.is_list)
        if isinstance(op, ast.Add) and isinstance(a, PrefixV):
            return a  # what follows its known items is not known
        if isinstance(op, ast.Add) and isinstance(a, TupleV) and not a.is_list:
            if isinstance(b, PrefixV):
                return PrefixV(a.items + b.items)
        if isinstance(a, HeadV) and isinstance(b, TupleV) and isinstance(op, ast.Add):
            return HeadV(a.tensor, a.drop, a.after + b.items)  # `x.size()[:-1] + (nf,)`
        return UNKNOWN

    def _fstring(self, node: ast.JoinedStr, env: dict) -> StrV:
        """`f"stage{i}"` of a literal `i`: its text (`StrV("")`, any string, otherwise)."""
        parts = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                parts.append(str(part.value))
                continue
            if not (
                isinstance(part, ast.FormattedValue)
                and part.conversion == -1
                and part.format_spec is None
                and isinstance(part.value, ast.Name)
            ):
                return StrV("")
            v = self.lookup(part.value.id, env)
            if isinstance(v, StrV):
                parts.append(v.value)
            elif isinstance(v, IntV) and not v.loose and literal(v.sym) is not None:
                parts.append(str(literal(v.sym)))
            else:
                return StrV("")
        return StrV("".join(parts))

    def compare(self, node: ast.Compare, env: dict) -> Any:
        left = self.expr(node.left, env)
        rights = [self.expr(c, env) for c in node.comparators]
        if len(rights) != 1:
            return BoolV(None)
        op, right = node.ops[0], rights[0]
        if (left is UNKNOWN or right is UNKNOWN) and not isinstance(op, (ast.Is, ast.IsNot)):
            return UNKNOWN  # a test of what the interpreter lost stays opaque (see `if_`)
        if isinstance(op, (ast.Is, ast.IsNot)):
            raw = self._raw(node.left, env)
            if isinstance(raw, OptionalV):
                self.none_tests += 1
            if isinstance(raw, OptionalV) or (isinstance(raw, IntV) and raw.loose):
                return BoolV(None)
            result = is_none(left, right)
            if result is None:
                return BoolV(None)
            return BoolV(result if isinstance(op, ast.Is) else not result)
        if isinstance(left, TensorV) or isinstance(right, TensorV):
            out = self.guard(node, lambda: tt.elementwise(self, left, right))
            return out.with_dtype("bool") if isinstance(out, TensorV) else out
        if isinstance(left, IntV) and isinstance(right, IntV):
            a, b = literal(left.sym), literal(right.sym)
            if a is not None and b is not None:
                table = {
                    ast.Eq: a == b,
                    ast.NotEq: a != b,
                    ast.Lt: a < b,
                    ast.LtE: a <= b,
                    ast.Gt: a > b,
                    ast.GtE: a >= b,
                }
                truth = table.get(type(op))
                return BoolV(truth, None if truth is None else z3.BoolVal(truth))
            if left.sym is not None and right.sym is not None:
                term = pyops.relation(op, left.sym.term, right.sym.term)
                return BoolV(None, term, left.loose or right.loose)
        numbers = [_number(v) for v in (left, right)]
        if None not in numbers and (isinstance(left, FloatV) or isinstance(right, FloatV)):
            a, b = numbers  # `new_v < 0.9 * v` of torchvision's `_make_divisible`
            truth = _ORDER[type(op)](a, b) if type(op) in _ORDER else None
            return BoolV(truth, None if truth is None else z3.BoolVal(truth))
        if (
            isinstance(left, TupleV)
            and isinstance(right, TupleV)
            and isinstance(op, (ast.Eq, ast.NotEq))
            and all(isinstance(x, IntV) and not x.loose for x in (*left.items, *right.items))
        ):
            equal = pyops.tuples_equal(left, right)
            if isinstance(equal, bool):
                truth = equal == isinstance(op, ast.Eq)
                return BoolV(truth, z3.BoolVal(truth))
            if equal is not None:
                return BoolV(None, equal if isinstance(op, ast.Eq) else z3.Not(equal))
        if isinstance(op, (ast.In, ast.NotIn)) and isinstance(left, StrV) and left.value:
            found = pyops.contains(right, left.value)
            if found is not None:
                truth = found == isinstance(op, ast.In)
                return BoolV(truth, z3.BoolVal(truth))
        if (
            isinstance(left, StrV)
            and isinstance(right, StrV)
            and isinstance(op, (ast.Eq, ast.NotEq))
        ):
            return BoolV((left.value == right.value) == isinstance(op, ast.Eq))
        if (  # `v == "M"` of an int of a config list: never equal
            isinstance(op, (ast.Eq, ast.NotEq))
            and {type(left), type(right)} in ({StrV, IntV}, {StrV, FloatV})
            and not any(isinstance(v, IntV) and v.loose for v in (left, right))
        ):
            truth = isinstance(op, ast.NotEq)
            return BoolV(truth, z3.BoolVal(truth))
        return BoolV(None)

    def _raw(self, node: ast.expr, env: dict) -> Any:
        """What a name holds, before `lookup` reads an optional value as its value."""
        if isinstance(node, ast.Name):
            return env.get(node.id, self.globals.get(node.id))
        return None

    def guard(self, node: ast.AST, rule: Any) -> Any:
        """Run a shape rule; a refuted requirement becomes one diagnostic at `node`."""
        self._guarding.append((node, self.env, self._runs[-1] if self._runs else None))
        try:
            return rule()
        except RefutedError as err:
            self.report(err, node)
            return UNKNOWN
        finally:
            self._guarding.pop()

    def demand_here(self, code: str, message: str) -> Demand | None:
        guarded = self._guarded_run()
        if guarded is None:
            return None
        node, env, run = guarded
        derived = not _reads_parameter(node, env, run)
        return Demand(node, code, message, self.stated, run.number, derived)

    def frame_here(self) -> int | None:
        guarded = self._guarded_run()
        return None if guarded is None else guarded[2].number

    def _guarded_run(self) -> tuple[ast.AST, dict | None, _Run] | None:
        """The rule running now, in the checked file, inside a function run: its node,
        the scope it reads and the run (None otherwise)."""
        if not self._guarding or self.site is not None:
            return None
        node, env, run = self._guarding[-1]
        return None if run is None else (node, env, run)

    # ------------------------------------------------------------ calls

    def _cover(self, node: ast.expr, value: Any, inputs: list[Any]) -> None:
        """Count a tensor expression for the coverage report (`mimir.host.coverage`)."""
        if self.quiet or self.abroad:
            return
        at = (node.lineno, node.col_offset + 1)
        results = value.items if isinstance(value, TupleV) else (value,)
        made = [v for v in results if isinstance(v, TensorV)]
        if made:
            worst = min(_status(t) for t in made)
            self.coverage.record(at, worst, self._reasons.get(at))
        elif value is UNKNOWN and any(isinstance(v, TensorV) for v in inputs):
            self.coverage.record(at, UNKNOWN_SHAPE, self._reasons.get(at))

    def _reason(self, node: ast.Call, func: Any) -> str:
        """Why a call with tensor inputs gives an unknown result, in the user's words."""
        if isinstance(func, ApiV):
            return f"unknown call `{func.name.removeprefix('builtins.')}`"
        if isinstance(func, MethodV) and isinstance(func.receiver, TensorV):
            return f"unknown method `.{func.name}`"
        text = segment(self.src.lines, node.func)
        return f"unknown call `{text if len(text) <= 40 else text[:37] + '...'}`"

    def call(self, node: ast.Call, env: dict, inputs: list[Any] | None = None) -> Any:
        func = self.expr(node.func, env)
        if inputs is not None and isinstance(func, MethodV):
            inputs.append(func.receiver)
        args: list[Any] = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                spread = self.expr(a.value, env)
                if isinstance(spread, TupleV):
                    args.extend(spread.items)
                elif (
                    isinstance(spread, HeadV)
                    and isinstance(func, MethodV)
                    and isinstance(func.receiver, TensorV)
                    and not args
                    and len(node.args) > 1
                ):
                    # `x.reshape(*x.shape[:-1], -1)`: one shape, its leading axes unknown
                    rest = [self.expr(e, env) for e in node.args[1:]]
                    if any(isinstance(e, ast.Starred) for e in node.args[1:]):
                        return self._unknown_call(node, func, args)
                    args.append(HeadV(spread.tensor, spread.drop, (*spread.after, *rest)))
                    break
                else:
                    return self._unknown_call(node, func, args)
            else:
                args.append(self.expr(a, env))
        kwargs: dict[str, Any] = {}
        for kw in node.keywords:
            value = self.expr(kw.value, env)
            if kw.arg is not None:
                kwargs[kw.arg] = value
            elif isinstance(value, DictV):
                kwargs.update(value.items)
            elif isinstance(func, ApiV) and func.name.startswith("torch.nn."):
                kwargs[OPEN] = True  # a layer built with `**kwargs`: unstated arguments unknown
            elif value is UNKNOWN and (
                isinstance(func, FuncV)
                or isinstance(func, ObjectV)
                and self._method(func.cls, "forward") is not None
            ):
                # `block(h, **kwargs)`: what it does not name is unknown, but for the
                # keywords the running function's own `**kwargs` can never hold
                unseen = self._unseen_keywords(kw.value)
                before = kwargs.get(OPEN)
                if before is None:
                    kwargs[OPEN] = unseen or True
                elif before is not True:
                    kwargs[OPEN] = (before & unseen) or True
            else:
                return self._unknown_call(node, func, args)
        if inputs is not None:
            inputs.extend([*args, *kwargs.values()])
        if (
            isinstance(node.func, ast.Attribute)
            and node.func.attr in _MUTATORS
            and isinstance(func, MethodV)
            and isinstance(func.receiver, (TupleV, LayerV, ObjectV, DictV))
        ):
            return self.mutate(func.receiver, func.name, args, kwargs, node.func.value, env)
        self._forget_lists(node, func, env)
        if (
            isinstance(func, MethodV)
            and isinstance(func.receiver, TensorV)
            and isinstance(node.func, ast.Attribute)
            and (func.name.endswith("_") and not func.name.startswith("_") or func.name == "resize")
        ):
            # in place: the receiver becomes the result (`x.unsqueeze_(0)` changes x's shape)
            plain = MethodV(func.receiver, func.name.rstrip("_"))
            result = self.guard(node, lambda: self.apply(plain, args, kwargs, node))
            if func.name == "resize":
                result = UNKNOWN
            self._rebind(node.func.value, result if isinstance(result, TensorV) else UNKNOWN, env)
            return result
        reported = len(self.found)
        result = self.guard(node, lambda: self.apply(func, args, kwargs, node))
        if result is UNKNOWN and len(self.found) == reported:  # not unknown because refuted
            self._unknown_call(node, func, args)
        return result

    def _unseen_keywords(self, node: ast.expr) -> frozenset[str]:
        """For `**kwargs` passed on by the function running, the keywords it cannot hold."""
        if not isinstance(node, ast.Name) or not self._current:
            return frozenset()
        return unseen_keywords(self._current[-1][0], node.id)

    def _forget_lists(self, node: ast.Call, func: Any, env: dict) -> None:
        """A list passed to a function the interpreter runs or cannot see may be changed."""
        if isinstance(func, (ApiV, LayerV)) or (
            isinstance(func, MethodV) and isinstance(func.receiver, TensorV)
        ):
            return
        if isinstance(func, ObjectV) and self._keeps_lists(func.cls, "forward", 0):
            return  # `layer(features)` of a module whose forward only reads its inputs
        if (
            isinstance(func, FuncV)
            and isinstance(func.owner, ObjectV)
            and self._method(func.owner.cls, func.node.name) is func.node
            and self._keeps_lists(func.owner.cls, func.node.name, 0)
        ):
            return  # `self.bn_function(features)`: the same of a method
        for a in node.args:
            if isinstance(a, ast.Name) and isinstance(env.get(a.id), (TupleV, DictV)):
                v = env[a.id]
                if isinstance(v, DictV) or v.is_list:
                    env[a.id] = UNKNOWN

    def _keeps_lists(self, cls: ast.ClassDef, name: str, depth: int) -> bool:
        """Whether the method `name` of `cls`, and the methods of `cls` it calls on `self`,
        change nothing they are given: no attribute or item written, no `append` and the
        like; the functions they call otherwise are taken to be the libraries'."""
        memo: dict = self.__dict__.setdefault("_keeping", {})  # per run: methods resolve by home
        if (id(cls), name) not in memo:
            memo[id(cls), name] = self._reads_only(cls, name, depth)
        return memo[id(cls), name]

    def _reads_only(self, cls: ast.ClassDef, name: str, depth: int) -> bool:
        fn = self._method(cls, name)
        if fn is None or depth > 4 or not summarisable(fn) or not fn.args.args:
            return False
        me = fn.args.args[0].arg
        # names that may hold a list the caller passed: the parameters, and what is bound
        # to one of them or to a list display
        held = {a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}
        for n in ast.walk(fn):
            if isinstance(n, ast.Assign) and isinstance(n.value, (ast.Name, ast.List)):
                held |= {t.id for t in n.targets if isinstance(t, ast.Name)}
        for n in ast.walk(fn):
            if not isinstance(n, ast.Call):
                continue
            f = n.func
            if isinstance(f, ast.Name) and isinstance(self.globals.get(f.id), FuncV):
                return False  # a function of the module's own: not followed here
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == me:
                if self._method(cls, f.attr) is not None:
                    if not self._keeps_lists(cls, f.attr, depth + 1):
                        return False
                elif any(
                    isinstance(a, ast.Name) and a.id in held
                    for a in [*n.args, *(k.value for k in n.keywords)]
                ):
                    return False  # a list given to a layer of its own: not followed
        return True

    def _unknown_call(self, node: ast.Call, func: Any, args: list) -> Any:
        if self.abroad:
            return UNKNOWN
        receiver = func.receiver if isinstance(func, MethodV) else None
        at = (node.lineno, node.col_offset + 1)
        named = not any(isinstance(n, ast.Call) for n in ast.walk(node.func))
        if (
            named
            and at not in self._reasons
            and any(isinstance(v, TensorV) for v in [receiver, *args])
        ):
            self._reasons[at] = self._reason(node, func)  # a root cause, not a cascade
        if any(isinstance(v, TensorV) and v.shape is not None for v in [receiver, *args]):
            if not (isinstance(func, ApiV) and func.name.startswith("builtins.")):
                self.unknown_nodes.add((node.lineno, node.col_offset))
        return UNKNOWN

    def call_value(self, f: Any, args: list) -> Any:
        return self.apply(f, args, {}, self._node)

    def apply(self, f: Any, args: list, kwargs: dict, node: ast.AST | None) -> Any:
        self._node = node
        if isinstance(f, MethodV):
            return self.method(f, args, kwargs)
        if isinstance(f, ApiV):
            return self.library(f.name, args, kwargs, node)
        if isinstance(f, FuncV):
            return self.call_function(f, node, args, kwargs)
        if isinstance(f, LambdaV):
            return self.call_lambda(f, args, kwargs)
        if isinstance(f, PartialV):
            return self.call_partial(f, args, kwargs, node)
        if isinstance(f, ClassV):
            return self.instantiate(f, args, kwargs)
        if isinstance(f, KernelV):
            return self.kernel_call(f.name, args, kwargs, node)
        if isinstance(f, LayerV):
            try:
                return nn.call_layer(self, f, args, kwargs, self.call_value)
            except RefutedError as err:
                built = any(lab.message.endswith("is built here") for lab in err.labels)
                if f.span is not None and not built and f.kind != "Sequential":
                    err.labels = (Label(f.span, f"`{f.text}` is built here"), *err.labels)
                raise
        if isinstance(f, ObjectV):
            forward = self._method(f.cls, "forward") or self._method(f.cls, "__call__")
            if forward is None:
                return self.apply(f.layer, args, kwargs, node) if f.layer is not None else UNKNOWN
            return self.call_function(FuncV(forward, f), node, args, kwargs)
        return UNKNOWN

    def method(self, f: MethodV, args: list, kwargs: dict) -> Any:
        r = f.receiver
        if isinstance(r, TensorV):
            return api.call_method(self, r, f.name, args, kwargs)
        if isinstance(r, (LayerV, ObjectV)) and f.name in _MODULE_SELF:
            dtype = pyops.module_dtype(f.name, args, kwargs)
            if dtype is not None:
                pyops.convert(r, dtype, set())
            return r
        if isinstance(r, ObjectV) and f.name in ("register_buffer", "register_parameter"):
            if args and isinstance(args[0], StrV):
                r.attrs[args[0].value] = args[1] if len(args) > 1 else UNKNOWN
            return NoneV()
        if isinstance(r, LayerV) and f.name == "forward":
            return self.apply(r, args, kwargs, self._node)
        if isinstance(r, (CacheV, CachesV)):
            return hf_cache.method(r, f.name, args, kwargs)
        if isinstance(r, StrV) and not kwargs:
            return pyops.string_method(r, f.name, args)
        if isinstance(r, DictV) and OTHER_KEYS in r.items and f.name != "get":
            return UNKNOWN
        if isinstance(r, DictV) or (isinstance(r, LayerV) and r.kind == "ModuleDict"):
            named = r.items if isinstance(r, DictV) else r.named
            if f.name == "items":
                return TupleV(tuple(TupleV((StrV(k), v)) for k, v in named.items()))
            if f.name == "values":
                return TupleV(tuple(named.values()))
            if f.name == "keys":
                return TupleV(tuple(StrV(k) for k in named))
            if f.name == "get" and args and isinstance(args[0], StrV) and args[0].value:
                if args[0].value not in named and OTHER_KEYS in named:
                    return UNKNOWN
                return named.get(args[0].value, args[1] if len(args) > 1 else NoneV())
        return UNKNOWN

    def call_function(
        self,
        f: FuncV,
        node: ast.AST | None,
        args: list | None,
        kwargs: dict,
        standalone: bool = False,
    ) -> Any:
        with self.calling_abroad(f.node, node):  # in the scope of the module defining it
            return self._call_function(f, node, args, kwargs, standalone)

    def _call_function(
        self,
        f: FuncV,
        node: ast.AST | None,
        args: list | None,
        kwargs: dict,
        standalone: bool,
    ) -> Any:
        fn = f.node
        if self.depth >= _MAX_DEPTH or self.steps > self.budget or _is_generator(fn):
            return UNKNOWN
        if not standalone:
            self.reached.add(id(fn))
        summary = None
        if args is not None and self.recording is None and summarisable(fn):
            summary = self._summary_key(f, args, kwargs)
            if summary is not None and summary in self._summaries:
                result, assumed, _ = self._summaries[summary]
                for cond in assumed:
                    self._assume(cond)
                return result
        before = self.path
        # a standalone run of a method with some parameters given (`Modular.probe_ranks`)
        overrides = self.overrides.pop(id(fn), None) if standalone else None
        # A call that passes nothing the interpreter knows gives what the last such call gave.
        memo = None
        if (  # a builder run (`Modular.recording`) must build, not recall
            overrides is None
            and self.recording is None
            and all(uninformative(v) for v in [*(args or []), *kwargs.values()])
        ):
            memo = (id(fn), id(f.owner), args is None, len(args or []), tuple(sorted(kwargs)))
            if memo in self._memo:
                return self._memo[memo]
            self._memo[memo] = UNKNOWN  # a recursive call meanwhile learns nothing
        env: dict[str, Any] = {}
        params = [*fn.args.posonlyargs, *fn.args.args]
        # True: unread keywords may give any parameter; a set: any but those named
        open_ = kwargs.pop(OPEN, False) if args is not None else False
        positional = list(args or [])
        if f.owner is not None and params:
            env[params[0].arg] = f.owner
            params = params[1:]
        defaults = fn.args.defaults
        first_default = len(params) - len(defaults)
        kw_defaults = dict(
            zip((p.arg for p in fn.args.kwonlyargs), fn.args.kw_defaults, strict=True)
        )
        for k, p in enumerate([*params, *fn.args.kwonlyargs]):
            default = (
                defaults[k - first_default]
                if first_default <= k < len(params)
                else kw_defaults.get(p.arg)
            )
            if k < len(positional) and k < len(params):
                value = positional[k]
            elif p.arg in kwargs:
                value = kwargs[p.arg]
            elif open_ is True or (open_ and p.arg not in open_):
                value = UNKNOWN  # given by the keywords nobody can read, or its default
            elif args is None and overrides and p.arg in overrides:
                value = overrides[p.arg]
            elif args is None:
                value = self.param_value(fn, p, default, f.owner)
            elif default is not None:
                value = self.expr(default, self.globals)
            else:
                value = self.annotation(p.annotation)
            if isinstance(value, TensorV) and value.shape is None:
                value = self.new_origin(value)
            env[p.arg] = value
        if standalone:
            self.last_params = dict(env)
        if fn.args.vararg is not None:  # `*args`: the positional arguments no parameter takes
            rest = positional[len(params) :]
            known = args is not None and not any(isinstance(a, SpreadV) for a in rest)
            env[fn.args.vararg.arg] = TupleV(tuple(rest)) if known else UNKNOWN
        if fn.args.kwarg is not None:
            # a call's keywords are all known here: those no parameter takes are `**kwargs`
            named = {p.arg for p in [*params, *fn.args.kwonlyargs]}
            extra = {k: v for k, v in kwargs.items() if k not in named}
            env[fn.args.kwarg.arg] = UNKNOWN if args is None or open_ else DictV(extra)
        frame = Frame()
        self.depth += 1
        caller = self.env
        self._current.append((fn, f.owner))
        self._run_count += 1
        self._runs.append(_Run.of(self._run_count, env))
        try:
            self.block(fn.body, env, frame)
        finally:
            self.depth -= 1
            self.env = caller
            self._current.pop()
            self._runs.pop()
        if not env.get(DEAD):
            frame.returns.append(NoneV())
            frame.paths.append(self.path)
        if frame.paths:
            self.path = self.join_paths(frame.paths)
        result = join_all(frame.returns)  # unknown when every path raised
        if standalone:
            self.last_raised = not frame.returns
        if memo is not None:
            self._memo[memo] = result
        if summary is not None:
            # the arguments stay referenced: their sizes' Z3 ids are in the key
            self._summaries[summary] = (result, self._assumed_since(before), (f, args, kwargs))
        return result

    def _summary_key(self, f: FuncV, args: list, kwargs: dict) -> tuple | None:
        parts = [fingerprint(f.owner) if f.owner is not None else "-"]
        parts += [fingerprint(a) for a in args]
        parts += [(k, fingerprint(v)) for k, v in sorted(kwargs.items())]
        if any(p is None or (isinstance(p, tuple) and p[-1] is None) for p in parts):
            return None
        return (id(f.node), tuple(parts), self.quiet > 0)

    def _assumed_since(self, before: Any) -> tuple:
        """What the path assumed after `before` (to assume again where a summary applies)."""
        old = {t.get_id() for t in before.assumed}
        old_pairs = {(v.get_id(), t.get_id()) for v, t in before.subst}
        new = [t for t in self.path.assumed if t.get_id() not in old]
        new += [v == t for v, t in self.path.subst if (v.get_id(), t.get_id()) not in old_pairs]
        return tuple(new)

    def annotation(self, node: ast.expr | None) -> Any:
        return read_host_annotation(self.info, node, self.qualname, self.dim_size, self.named_size)

    def qualname(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Name):
            v = self.globals.get(node.id)
            return v.name if isinstance(v, ApiV) else self.aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.qualname(node.value)
            return None if base is None else f"{base}.{node.attr}"
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                inner = ast.parse(node.value, mode="eval").body
            except SyntaxError:
                return None
            return self.qualname(inner)
        return None

    # ------------------------------------------------------------ @gpu calls

    def kernel_call(self, name: str, args: list, kwargs: dict, node: ast.AST | None) -> Any:
        return kernel_calls.kernel_call(self, name, args, kwargs, node)


@dataclass(frozen=True)
class _Run:
    """One run of a function: its number, and the tensors its parameters were bound to
    (by identity, and by origin for those of unknown rank, which a statement that fixes
    the rank rebinds)."""

    number: int
    ids: frozenset[int]
    origins: frozenset[int]

    @staticmethod
    def of(number: int, env: dict) -> _Run:
        tensors = [v for v in env.values() if isinstance(v, TensorV)]
        origins = frozenset(t.origin for t in tensors if t.origin is not None)
        return _Run(number, frozenset(id(t) for t in tensors), origins)


def _reads_parameter(node: ast.AST, env: dict | None, run: _Run) -> bool:
    """Whether what `node` operates on reads a tensor parameter of the run (`self.wq(x)`,
    `x.view(...)`): its demand is the first on that input, not one between values."""
    if env is None:
        return False
    if isinstance(node, ast.Call):
        parts = [*node.args, *(k.value for k in node.keywords)]
        if isinstance(node.func, ast.Attribute):
            parts.append(node.func.value)
    elif isinstance(node, ast.BinOp):
        parts = [node.left, node.right]
    elif isinstance(node, ast.Subscript):
        parts = [node.value]
    else:
        parts = [node]
    for part in parts:
        for n in ast.walk(part):
            v = env.get(n.id) if isinstance(n, ast.Name) else None
            if isinstance(v, TensorV) and (id(v) in run.ids or v.origin in run.origins):
                return True
    return False


def _at_first_demand(err: RefutedError, later: Span) -> RefutedError:
    """`err`, a demand refuted only by what an earlier demand of its function assumed,
    as that earlier demand's failure: torch raises there for every input but those that
    satisfy it, and for those here."""
    demand, held = err.first
    note = Label(later, f"where `{held}` holds, this fails: {err.message}")
    why = f"it holds only where `{held}`, and there line {later.line} fails: {NEVER}"
    return RefutedError(demand.code, demand.message, labels=(*demand.labels, note), why=why)


def _is_generator(fn: ast.FunctionDef) -> bool:
    """Whether `fn` yields (its body is walked once per tree, not at each call)."""
    found = getattr(fn, "_mimir_yields", None)
    if found is None:
        found = any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in ast.walk(fn))
        fn._mimir_yields = found  # type: ignore[attr-defined]
    return found


def _label(node: ast.expr) -> str:
    """How a tensor is written, to name the sizes read from it (`x`, `self.w`)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return "x"


def _status(t: TensorV) -> int:
    if t.shape is not None and None not in t.shape:
        return KNOWN
    return PARTIAL if t.shape is not None or t.tail else UNKNOWN_SHAPE


def _prefix_item(base: PrefixV, index: Any) -> Any:
    """`outputs[0]`, `outputs[1:]` of a tuple whose first items are known."""
    if isinstance(index, IntV):
        k = literal(index.sym)
        return base.items[k] if k is not None and 0 <= k < len(base.items) else UNKNOWN
    if isinstance(index, tt.SliceV) and index.stop is None and index.step is None:
        lo = 0 if index.start is None else literal(index.start)
        if index.start != tt.UNREADABLE and lo is not None and lo >= 0:
            return PrefixV(base.items[lo:])
    return UNKNOWN


_ORDER = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
}


def _number(v: Any) -> float | None:
    """The value of a float computed from literals, or of a literal int no caller changes."""
    if isinstance(v, FloatV):
        return v.value
    if isinstance(v, IntV) and not v.loose:
        return literal(v.sym)
    return None
