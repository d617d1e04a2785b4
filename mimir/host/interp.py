"""The interpreter over host code: every statement outside `@gpu` bodies, abstractly.

Values are `mimir.host.values`; library calls go to the shape table
(`mimir.host.api`, `mimir.host.nn`); sizes are terms of the Z3 size algebra and
every requirement a rule states is proven with the kernel checker's `Prover`
(a counterexample when it fails for some admissible size).

- Assignments, tuples, attributes of `self`: values flow as written.
- Branches: a condition known statically (`if self.downsample is not None`) picks its
  branch; otherwise both run and the join keeps what both agree on.
- Loops: a literal sequence (a `ModuleList`) is unrolled; any other loop runs
  its body until the loop-carried values agree, widening sizes that change to
  unknown (never unrolled forever).
- Helper functions and methods are interpreted at each call with the call's
  values (polymorphic in their sizes); functions and classes no call reaches are
  checked once with their annotations.
- `@gpu` calls bind each `Dim` of the parameters once across all arguments
  (GPU040/GPU041/GPU042 at the call) and the result takes the annotated shape.
- Anything else is UNKNOWN, and nothing computed from it is ever reported.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, NoReturn

from mimir.diagnostics.codes import REGISTRY
from mimir.diagnostics.diagnostic import Diagnostic, Label
from mimir.dims import Dim
from mimir.host import api, einops, kernel_calls, nn, nn_spatial, pyops
from mimir.host import torch_table as tt
from mimir.host.annotations import read_host_annotation
from mimir.host.assume import variables
from mimir.host.coverage import KNOWN, PARTIAL, UNKNOWN_SHAPE, Coverage
from mimir.host.flow import (
    DEAD,
    aliases,
    as_load,
    constant,
    decorator_name,
    envs_agree,
    has_break,
    is_none,
    join_envs,
    literal_items,
    replace_env,
    segment,
    truth_of,
    uninformative,
    unpack,
)
from mimir.host.modular import Modular
from mimir.host.pybuiltins import PyBuiltins
from mimir.host.rules import RefutedError
from mimir.host.summaries import fingerprint, summarisable
from mimir.host.symbolic import NEVER, Symbolic
from mimir.host.values import (
    UNKNOWN,
    ApiV,
    BoolV,
    ClassV,
    ConfigV,
    DictV,
    DTypeV,
    FloatV,
    FuncV,
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
    ShapeOfV,
    SpreadV,
    StrV,
    SuperV,
    Sym,
    TensorV,
    TupleV,
    agree,
    arith,
    const,
    eq,
    join,
    literal,
    product,
    same,
    show_shape,
    show_tensor,
)
from mimir.parse.module import ModuleInfo
from mimir.solve.prover import Prover
from mimir.solve.z3lib import z3

_MAX_DEPTH = 8
_BUDGET = 40_000  # statements interpreted per file; past it, calls are no longer followed
_LOOP_ROUNDS = 4
_UNROLL = 32
_BUILTIN_ITERS = {"range", "enumerate", "zip", "reversed", "sorted"}
_MUTATORS = {"append", "extend", "insert", "pop", "remove", "clear", "update", "add_module"}
OPEN = "**"  # the keyword a layer built with unreadable `**kwargs` gets
_BUILD_LAYER = "<build layer>"
_EINOPS_LAYERS = ("Rearrange", "Repeat", "Reduce")
_LIBRARIES = ("torch", "numpy", "jaxtyping", "mimir", "functools", "math", "einops")
_MODULE_SELF = {"to", "cuda", "cpu", "train", "eval", "float", "double", "half", "requires_grad_"}
_DTYPE_NAMES = {
    **tt.DTYPE_ALIASES,
    "float_": "float64",
    "int_": "int64",
    "longlong": "int64",
}


@dataclass
class HostResult:
    diagnostics: list[Diagnostic]
    unknown_calls: int = 0  # calls given a known tensor whose result the table does not know
    unproven: int = 0  # obligations Z3 could not decide (never reported as errors)
    shapes: dict[tuple[int, int], str] = field(default_factory=dict)  # hover: (line, col) -> shape
    coverage: Coverage = field(default_factory=Coverage)  # what a clean run checked


@dataclass
class _Dataset:
    tensors: list[Any]


@dataclass
class _Frame:
    returns: list[Any] = field(default_factory=list)
    generator: bool = False
    paths: list[Any] = field(default_factory=list)  # the path at each return


class HostChecker(Symbolic, Modular, PyBuiltins):
    def __init__(self, info: ModuleInfo, timeout_ms: int) -> None:
        self._init_symbolic()
        self._init_modular()
        self.budget = _BUDGET
        self.loop_depth = 0  # fixpoint loops running: what they change is not counted
        self._current: list[tuple[ast.FunctionDef, Any]] = []  # functions running, innermost last
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
        span = self.src.span(node)
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

    def block(self, body: list[ast.stmt], env: dict, frame: _Frame | None) -> None:
        for stmt in body:
            if env.get(DEAD):
                return
            self.statement(stmt, env, frame)

    def statement(self, stmt: ast.stmt, env: dict, frame: _Frame | None) -> None:
        self.steps += 1
        self.env = env
        if isinstance(stmt, ast.FunctionDef):
            top = frame is None and stmt.name in self.kernels
            env[stmt.name] = KernelV(stmt.name) if top else FuncV(stmt)
        elif isinstance(stmt, ast.AsyncFunctionDef):
            env[stmt.name] = UNKNOWN
        elif isinstance(stmt, ast.ClassDef):
            env[stmt.name] = ClassV(stmt)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            self.imports(stmt, env)
        elif isinstance(stmt, ast.Assign):
            value = self.expr(stmt.value, env)
            for target in stmt.targets:
                self.bind(target, value, env)
            if value is UNKNOWN and isinstance(stmt.value, ast.Call):
                reason = self._reasons.get((stmt.value.lineno, stmt.value.col_offset + 1))
                for target in stmt.targets:
                    if reason and isinstance(target, ast.Name):
                        self._unknown_names[(target.lineno, target.col_offset + 1)] = reason
        elif isinstance(stmt, ast.AnnAssign):
            if stmt.value is not None:
                value = self.expr(stmt.value, env)
                if value is UNKNOWN:
                    value = self.annotation(stmt.annotation)
                self.bind(stmt.target, value, env)
        elif isinstance(stmt, ast.AugAssign):
            load = as_load(stmt.target)
            value = self.binop(stmt, self.expr(load, env), stmt.op, self.expr(stmt.value, env))
            self.bind(stmt.target, value, env)
        elif isinstance(stmt, ast.Expr):
            self.expr(stmt.value, env)
        elif isinstance(stmt, ast.Return):
            value = self.expr(stmt.value, env) if stmt.value is not None else NoneV()
            if frame is not None:
                frame.returns.append(value)
                frame.paths.append(self.path)
            env[DEAD] = True
        elif isinstance(stmt, ast.Assert):
            self.check_assert(stmt, self.expr(stmt.test, env))
        elif isinstance(stmt, ast.If):
            self.if_(stmt, env, frame)
        elif isinstance(stmt, (ast.For, ast.While)):
            self.loop(stmt, env, frame)
        elif isinstance(stmt, ast.With):
            for item in stmt.items:
                self.expr(item.context_expr, env)
                if item.optional_vars is not None:
                    self.bind(item.optional_vars, UNKNOWN, env)
            expecting = any(_expects_error(item.context_expr) for item in stmt.items)
            self.quiet += expecting  # `with pytest.raises(...)`: the crash is the point
            try:
                self.block(stmt.body, env, frame)
            finally:
                self.quiet -= expecting
        elif isinstance(stmt, ast.Try):
            self.try_(stmt, env, frame)
        elif isinstance(stmt, ast.Raise):
            env[DEAD] = True
        elif isinstance(stmt, (ast.Global, ast.Nonlocal, ast.Delete)):
            for name in getattr(stmt, "names", []):
                env[name] = UNKNOWN

    def imports(self, stmt: ast.Import | ast.ImportFrom, env: dict) -> None:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                local = alias.asname or alias.name.split(".")[0]
                full = alias.name if alias.asname else alias.name.split(".")[0]
                env[local] = ApiV(full)
            return
        module = stmt.module or ""
        for alias in stmt.names:
            local = alias.asname or alias.name
            full = f"{module}.{alias.name}"
            if module == "mimir.array":
                if alias.name in _DTYPE_NAMES:
                    env[local] = DTypeV(_DTYPE_NAMES[alias.name])
                else:
                    env[local] = ApiV(full)
            elif module.split(".")[0] in _LIBRARIES:
                env[local] = self._api(full)
            else:
                env[local] = UNKNOWN

    def _api(self, name: str) -> Any:
        head, _, attr = name.rpartition(".")
        if name == "numpy.newaxis":
            return NoneV()
        if head in ("torch", "numpy") and attr in _DTYPE_NAMES:
            return DTypeV(_DTYPE_NAMES[attr])
        return ApiV(name)

    def bind(self, target: ast.expr, value: Any, env: dict) -> None:
        if isinstance(target, ast.Name) and isinstance(value, TensorV) and value.shape is None:
            value = self.new_origin(value)
        if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ShapeOfV, SpreadV)):
            value = self._unpack_shape(target, value)
        if isinstance(target, ast.Name):
            env[target.id] = value
            if isinstance(value, TensorV):  # hover: what every context agrees on
                key = (target.lineno, target.col_offset + 1)
                seen = self._hover.get(key)
                self._hover[key] = value if seen is None else join(seen, value)
                joined = self._hover[key]
                if isinstance(joined, TensorV) and (joined.shape is not None or joined.tail):
                    self.shapes[key] = show_tensor(joined)
                else:
                    self.shapes.pop(key, None)
        elif isinstance(target, (ast.Tuple, ast.List)):
            starred = any(isinstance(t, ast.Starred) for t in target.elts)
            items = unpack(value, len(target.elts))
            if not starred and items is None and self._unpack_count(target, value) and self.depth:
                env[DEAD] = True  # the unpacking raises: nothing after it runs
            if starred or items is None:
                for t in target.elts:
                    self.bind(t.value if isinstance(t, ast.Starred) else t, UNKNOWN, env)
                return
            for t, v in zip(target.elts, items, strict=True):
                self.bind(t, v, env)
        elif isinstance(target, ast.Attribute):
            base = self.expr(target.value, env)
            if isinstance(base, ObjectV):
                base.attrs[target.attr] = value
            elif isinstance(base, TensorV):  # `a.shape = (...)`, `x.data = ...`
                self._rebind(target.value, UNKNOWN, env)
        elif isinstance(target, ast.Subscript):
            self.expr(target.value, env)
            if isinstance(target.value, ast.Name) and not isinstance(
                env.get(target.value.id), TensorV
            ):
                env[target.value.id] = UNKNOWN  # a list or dict item changed

    def _unpack_shape(self, target: ast.Tuple | ast.List, value: ShapeOfV | SpreadV) -> Any:
        """`B, T, C = x.shape` (or `*_, H, W = x.shape`) of a tensor of unknown rank."""
        before: tuple = value.before if isinstance(value, SpreadV) else ()
        after: tuple = value.after if isinstance(value, SpreadV) else ()
        shape = value.shape if isinstance(value, SpreadV) else value
        elts = target.elts[len(before) : len(target.elts) - len(after)]
        names = tuple(e.id if isinstance(e, ast.Name) else "" for e in elts)
        stars = [k for k, e in enumerate(elts) if isinstance(e, ast.Starred)]
        t = shape.tensor
        if not stars:
            t = self.refine(t, len(elts), names)
            if t.shape is None or len(t.shape) != len(elts):
                if t.shape is None and len(elts) > (t.max_rank or len(elts)):
                    self.report(
                        RefutedError(
                            "GPU107",
                            f"`{segment(self.src.lines, target)}` unpacks the shape of a tensor "
                            f"of rank at most {t.max_rank} into {len(elts)} names",
                            labels=self.stated,
                        ),
                        target,
                    )
                elif t.shape is None and len(t.tail) > len(elts):
                    self.report(
                        RefutedError(
                            "GPU107",
                            f"`{segment(self.src.lines, target)}` unpacks the shape of a tensor "
                            f"of rank {len(t.tail)} or more into {len(elts)} names",
                            labels=self.stated,
                        ),
                        target,
                    )
                return UNKNOWN
            sizes: list[Any] = [IntV(s) for s in t.shape]
        elif len(stars) == 1:
            k = stars[0]
            head = [IntV(self.axis_size(t, i, shape.label)) for i in range(k)]
            rest = len(elts) - k - 1
            tail = [IntV(self.axis_size(t, i, shape.label)) for i in range(-rest, 0)]
            sizes = [*head, UNKNOWN, *tail]
        else:
            return UNKNOWN
        return TupleV((*before, *sizes, *after))

    def _unpack_count(self, target: ast.Tuple | ast.List, value: Any) -> bool:
        """`q, k, v = x.split(d, dim=2)` when the split makes another number of pieces;
        whether the unpacking certainly raises."""
        n = len(target.elts)
        names = segment(self.src.lines, target)
        if isinstance(value, TupleV) and not value.is_list:
            got = len(value.items)
            self.report(
                RefutedError(
                    "GPU107",
                    f"`{names}` unpacks {got} value{'s' * (got != 1)} into {n} names",
                    labels=self.stated,
                ),
                target,
            )
            return True
        elif isinstance(value, TensorV) and value.shape:
            size = value.shape[0]
            shown = show_shape(value.shape)
            self.guard(
                target,
                lambda: self.need(
                    eq(size, const(n)),
                    "GPU107",
                    f"`{names}` unpacks dim 0 of a {shown} tensor into {n} names",
                ),
            )
        return False

    def widen(self, value: Any, entry: Any) -> Any:
        """A loop-carried value that still changes: its changing sizes become free sizes."""
        if agree(value, entry):
            return value
        if (
            isinstance(value, TensorV)
            and isinstance(entry, TensorV)
            and value.shape is not None
            and entry.shape is not None
            and len(value.shape) == len(entry.shape)
        ):
            shape = tuple(
                a if same(a, b) else self.free_size(f"loop.shape[{k}]", lo=0)
                for k, (a, b) in enumerate(zip(value.shape, entry.shape, strict=True))
            )
            return TensorV(shape, value.dtype if value.dtype == entry.dtype else None, value.lib)
        if isinstance(value, IntV) and isinstance(entry, IntV):
            return IntV(self.free_size("loop", lo=0))
        return join(value, entry) if isinstance(value, TensorV) else UNKNOWN

    def check_assert(self, stmt: ast.Assert, value: Any) -> None:
        """`assert cond` on sizes: an error when it can never hold, else assumed."""
        term = value.term if isinstance(value, BoolV) else None
        if term is None:
            return
        text = segment(self.src.lines, stmt.test)
        if len(text) > 60:
            text = text[:57] + "..."
        cond = self.path.substitute(term)
        if z3.is_true(cond):
            return
        if value.loose:  # over a value that may be a float: assumed when it can hold, never judged
            if not z3.is_false(cond) and self.feasible(cond):
                self._assume(cond)
            return
        if z3.is_false(cond) or self._satisfiable(cond) == z3.unsat:
            if self.defaults_only and not self._stating:
                if self.env is not None:
                    self.env[DEAD] = True  # the defaults are no configuration: stop here
                return
            why = None if not variables(cond) else NEVER
            self.report(
                RefutedError("GPU108", f"`assert {text}` never holds", labels=self.stated, why=why),
                stmt.test,
            )
            if self.env is not None:
                self.env[DEAD] = True  # what follows never runs
            return
        self._assume(cond)

    def _rebind(self, target: ast.expr, value: Any, env: dict) -> None:
        """A value changed in place: a name or `self.attr` now holds `value`."""
        if isinstance(target, ast.Name):
            env[target.id] = value
        elif isinstance(target, ast.Attribute):
            base = self.expr(target.value, env)
            if isinstance(base, ObjectV):
                base.attrs[target.attr] = value

    def if_(self, stmt: ast.If, env: dict, frame: _Frame | None) -> None:
        test = self.expr(stmt.test, env)
        truth = truth_of(test)
        term = test.term if isinstance(test, BoolV) and not test.loose else None
        if truth is None and term is not None:
            truth = self.holds(term)
        if truth is True:
            self.block(stmt.body, env, frame)
            return
        if truth is False:
            self.block(stmt.orelse, env, frame)
            return
        base = self.path
        objects = _objects(env)
        before = [dict(o.attrs) for o in objects]
        paths, ends, attrs = [], [], []
        conds = (term, z3.Not(term)) if term is not None else (None, None)
        # A condition on a value the interpreter lost (not one an input leaves open): a
        # branch may be one the configuration never takes, so nothing in it is reported.
        opaque = test is UNKNOWN
        for body, cond in zip((stmt.body, stmt.orelse), conds, strict=True):
            branch = dict(env)
            self.path = base
            for o, b in zip(objects, before, strict=True):
                o.attrs = dict(b)
            if cond is not None:
                if not self.feasible(cond):
                    continue  # no size this path admits takes this branch
                self._assume(cond)
            self.quiet += opaque
            try:
                self.block(body, branch, frame)
            finally:
                self.quiet -= opaque
            self.env = env
            paths.append(branch)
            ends.append(self.path)
            attrs.append([o.attrs for o in objects])
        live = [k for k, e in enumerate(paths) if not e.get(DEAD)]
        self.path = self.join_paths([ends[k] for k in live]) if live else base
        for i, o in enumerate(objects):
            o.attrs = join_envs([attrs[k][i] for k in live]) if live else before[i]
            o.attrs.pop(DEAD, None)
        replace_env(env, join_envs(paths))

    def loop(self, stmt: ast.For | ast.While, env: dict, frame: _Frame | None) -> None:
        if isinstance(stmt, ast.For):
            iterable = self.expr(stmt.iter, env)
            items = literal_items(iterable)
            if items is not None and len(items) <= _UNROLL and not has_break(stmt.body):
                for item in items:  # a ModuleList, a tuple of layers: exact
                    self.bind(stmt.target, item, env)
                    self.block(stmt.body, env, frame)
                    if env.get(DEAD):
                        return
                self.block(stmt.orelse, env, frame)
                return
            item = self.element(iterable)
        else:
            self.expr(stmt.test, env)
            item = None
        entry = dict(env)
        state = dict(env)
        entry_path = self.path
        self.loop_depth += 1
        try:
            self._fixpoint(stmt, item, env, entry, state, entry_path, frame)
        finally:
            self.loop_depth -= 1

    def _fixpoint(
        self,
        stmt: ast.For | ast.While,
        item: Any,
        env: dict,
        entry: dict,
        state: dict,
        entry_path: Any,
        frame: _Frame | None,
    ) -> None:
        for rounds in range(_LOOP_ROUNDS + 1):
            body = dict(state)
            body.pop(DEAD, None)
            self.path = entry_path  # what one iteration assumes need not hold after it
            if item is not None:
                self.bind(stmt.target, item, body)  # type: ignore[union-attr]
            self.block(stmt.body, body, frame)
            self.env = env
            body.pop(DEAD, None)
            new = join_envs([state, body])
            if envs_agree(new, state):
                break
            state = new
            if rounds == _LOOP_ROUNDS - 1:  # widen what still changes
                state = {k: self.widen(v, entry.get(k, v)) for k, v in state.items()}
        self.path = entry_path
        replace_env(env, state)
        self.block(stmt.orelse, env, frame)

    def try_(self, stmt: ast.Try, env: dict, frame: _Frame | None) -> None:
        paths = []
        body = dict(env)
        entry_path = self.path
        caught = bool(stmt.handlers)  # a crash in the body is handled, not a crash of the run
        self.quiet += caught
        try:
            self.block(stmt.body, body, frame)
        finally:
            self.quiet -= caught
        self.block(stmt.orelse, body, frame)
        self.env = env
        paths.append(body)
        ends = [self.path]
        for handler in stmt.handlers:
            self.path = entry_path
            h = {k: (v if k in env else UNKNOWN) for k, v in body.items()}
            h.update({k: join(v, body.get(k, v)) for k, v in env.items()})
            h.pop(DEAD, None)
            if handler.name:
                h[handler.name] = UNKNOWN
            self.block(handler.body, h, frame)
            self.env = env
            paths.append(h)
            ends.append(self.path)
        live = [p for p, e in zip(ends, paths, strict=True) if not e.get(DEAD)]
        self.path = self.join_paths(live) if live else entry_path
        replace_env(env, join_envs(paths))
        self.block(stmt.finalbody, env, frame)

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
            return StrV("")
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
        shape: ShapeOfV | None = None
        after: list[Any] = []
        known = True
        for e in node.elts:
            value = self.expr(e.value if isinstance(e, ast.Starred) else e, env)
            target = after if shape is not None else items
            if not isinstance(e, ast.Starred):
                target.append(value)
            elif isinstance(value, TupleV):
                target.extend(value.items)
            elif isinstance(value, ShapeOfV) and shape is None:
                shape = value
            else:
                known = False
        if not known:
            return UNKNOWN
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

    def _super(self, args: list) -> Any:
        if args or not self._current:
            return UNKNOWN
        fn, owner = self._current[-1]
        if self._classes is None:
            self._classes = {
                id(f): c
                for c in ast.walk(self.info.tree)
                if isinstance(c, ast.ClassDef)
                for f in c.body
                if isinstance(f, ast.FunctionDef)
            }
        cls = self._classes.get(id(fn))
        if cls is None or not isinstance(owner, ObjectV):
            return UNKNOWN
        return SuperV(cls, owner)

    def super_attribute(self, sup: SuperV, attr: str) -> Any:
        """`super().forward`: the method of a base class, or of the `torch.nn` layer below."""
        for base in sup.cls.bases:
            if isinstance(base, ast.Name) and isinstance(self.globals.get(base.id), ClassV):
                found = self._method(self.globals[base.id].node, attr)
                if found is not None:
                    return FuncV(found, sup.obj)
        if attr == "__init__":
            kind = self._layer_base(sup.cls)
            if kind is not None:
                return PartialV(ApiV(_BUILD_LAYER), (sup.obj, StrV(kind)), ())
        if isinstance(sup.obj.layer, LayerV):
            if attr == "forward":
                return sup.obj.layer
            return MethodV(sup.obj.layer, attr)
        return UNKNOWN

    def _layer_base(self, cls: ast.ClassDef, seen: int = 0) -> str | None:
        """The `torch.nn` layer a class derives from, directly or through its bases."""
        for base in cls.bases:
            name = self.qualname(base)
            if name and name.startswith("torch.nn.") and name.rsplit(".", 1)[-1] in nn.PARAMS:
                return name.rsplit(".", 1)[-1]
            if isinstance(base, ast.Name) and isinstance(self.globals.get(base.id), ClassV):
                if seen < 8:
                    found = self._layer_base(self.globals[base.id].node, seen + 1)
                    if found is not None:
                        return found
        return None

    def build_layer(self, obj: ObjectV, kind: str, args: list | None, kwargs: dict) -> None:
        """`obj`'s `torch.nn` base built from `args` (free sizes when no call says)."""
        if args is None:
            args = [IntV(self.free_size(p)) for p in nn.PARAMS[kind] if p in nn.SIZES]
            kwargs = {}
        text = f"{obj.cls.name}(...)"
        obj.layer = LayerV(kind, list(args), dict(kwargs), text, span=self.src.span(obj.cls))

    def comprehension(self, node: ast.ListComp | ast.GeneratorExp, env: dict) -> Any:
        """`[nn.Linear(d, d) for i in range(3)]`: one item per item iterated, when the
        iterables and conditions are known; else what any item is, of unknown count."""
        items: list[Any] = []

        def generate(k: int, scope: dict) -> bool:
            if k == len(node.generators):
                items.append(self.expr(node.elt, scope))
                return len(items) <= 2 * _UNROLL
            g = node.generators[k]
            seq = literal_items(self.expr(g.iter, scope))
            if g.is_async or seq is None or len(seq) > 2 * _UNROLL:
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
            if isinstance(v, OptionalV):
                v = v.value
            if isinstance(v, TensorV) and v.origin is not None:
                return self.current(v)
            return v
        if name in self.globals:
            return self.globals[name]
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
                if any(decorator_name(d) == "property" for d in method.decorator_list):
                    return self.call_function(FuncV(method, base), node, [], {})
                return FuncV(method, base)
            if isinstance(base.layer, LayerV):
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
        if isinstance(base, SuperV):
            return self.super_attribute(base, attr)
        if isinstance(base, DictV):
            return MethodV(base, attr)
        if isinstance(base, TupleV) and attr in ("values", "indices") and len(base.items) == 2:
            return base.items[attr == "indices"]  # the named tuple `x.max(dim=1)` returns
        if isinstance(base, (TupleV, LoaderV, _Dataset)):
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
        if isinstance(base, DictV) and isinstance(index, StrV):
            return base.items.get(index.value, UNKNOWN)
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
            if not all(isinstance(x, (TensorV, IntV, FloatV, BoolV)) for x in (a, b)):
                t = a if isinstance(a, TensorV) else b
                return TensorV(None, None, t.lib)
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
        if isinstance(a, TupleV) and isinstance(b, TupleV) and isinstance(op, ast.Add):
            return TupleV(a.items + b.items, a.is_list)
        return UNKNOWN

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
        if (
            isinstance(left, StrV)
            and isinstance(right, StrV)
            and isinstance(op, (ast.Eq, ast.NotEq))
        ):
            return BoolV((left.value == right.value) == isinstance(op, ast.Eq))
        return BoolV(None)

    def _raw(self, node: ast.expr, env: dict) -> Any:
        """What a name holds, before `lookup` reads an optional value as its value."""
        if isinstance(node, ast.Name):
            return env.get(node.id, self.globals.get(node.id))
        return None

    def guard(self, node: ast.AST, rule: Any) -> Any:
        """Run a shape rule; a refuted requirement becomes one diagnostic at `node`."""
        try:
            return rule()
        except RefutedError as err:
            self.report(err, node)
            return UNKNOWN

    # ------------------------------------------------------------ calls

    def _cover(self, node: ast.expr, value: Any, inputs: list[Any]) -> None:
        """Count a tensor expression for the coverage report (`mimir.host.coverage`)."""
        if self.quiet:
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
            return self.mutate(func.receiver, func.name, args, node.func.value, env)
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

    def _forget_lists(self, node: ast.Call, func: Any, env: dict) -> None:
        """A list passed to a function the interpreter runs or cannot see may be changed."""
        if isinstance(func, (ApiV, LayerV)) or (
            isinstance(func, MethodV) and isinstance(func.receiver, TensorV)
        ):
            return
        for a in node.args:
            if isinstance(a, ast.Name) and isinstance(env.get(a.id), (TupleV, DictV)):
                v = env[a.id]
                if isinstance(v, DictV) or v.is_list:
                    env[a.id] = UNKNOWN

    def _unknown_call(self, node: ast.Call, func: Any, args: list) -> Any:
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
        if isinstance(r, DictV) or (isinstance(r, LayerV) and r.kind == "ModuleDict"):
            named = r.items if isinstance(r, DictV) else r.named
            if f.name == "items":
                return TupleV(tuple(TupleV((StrV(k), v)) for k, v in named.items()))
            if f.name == "values":
                return TupleV(tuple(named.values()))
            if f.name == "keys":
                return TupleV(tuple(StrV(k) for k in named))
            if f.name == "get" and args and isinstance(args[0], StrV):
                return named.get(args[0].value, args[1] if len(args) > 1 else NoneV())
        return UNKNOWN

    def library(self, name: str, args: list, kwargs: dict, node: ast.AST | None) -> Any:
        if name == "builtins.super":
            return self._super(args)
        if name.startswith("builtins."):
            return self.builtin(name[9:], args, kwargs)
        if name.startswith("mimir.array."):
            short = name[12:]
            if short in ("zeros", "ones", "full", "rand"):
                shape = args[0] if args else kwargs.get("shape", UNKNOWN)
                dtype = kwargs.get("dtype", args[1] if short != "full" and len(args) > 1 else None)
                kw = {"dtype": dtype} if isinstance(dtype, DTypeV) else {}
                return tt.creation(self, [shape], kw, "mimir")
            if short in ("where", "maximum", "minimum"):
                return tt.elementwise(self, *args)
            if short == "tensor":
                # `tensor(data, dtype=float32)`: float32 unless a dtype is given, whatever
                # the literals (the shim converts them), never NumPy's int64 guess.
                given = kwargs.get("dtype", args[1] if len(args) > 1 else None)
                if given is None:
                    dtype = "float32"
                else:
                    dtype = tt.dtype_arg(given) if isinstance(given, DTypeV) else None
                return tt.from_data(args[0] if args else UNKNOWN, "mimir", dtype)
            return UNKNOWN
        if name in ("torch.nn.Parameter", "torch.nn.parameter.Parameter"):
            return args[0] if args and isinstance(args[0], TensorV) else UNKNOWN
        if name in ("functools.partial",) and args:
            return PartialV(args[0], tuple(args[1:]), tuple(kwargs.items()))
        if name.startswith("math."):
            return pyops.math_call(name[5:], args)
        if name in ("einops.rearrange", "einops.repeat", "einops.reduce"):
            return einops.apply(self, name[7:], args, kwargs)
        if name.startswith("einops.layers.") and name.rsplit(".", 1)[-1] in _EINOPS_LAYERS:
            kind = name.rsplit(".", 1)[-1].lower()
            given = dict(kwargs)
            for key, v in zip(("pattern", "reduction"), args, strict=False):
                given[key] = v
            return PartialV(ApiV(f"einops.{kind}"), (), tuple(given.items()))
        if name == _BUILD_LAYER and len(args) >= 2 and isinstance(args[0], ObjectV):
            self.build_layer(args[0], args[1].value, args[2:], kwargs)
            return NoneV()
        if name.startswith("torch.nn.") and not name.startswith("torch.nn.functional."):
            kind = name.rsplit(".", 1)[-1]
            if kind not in nn.KNOWN_LAYERS:
                if node is not None and kind[:1].isupper() and not self.quiet:
                    key = (node.lineno, node.col_offset)
                    if key not in self._counted_layers:
                        self._counted_layers.add(key)
                        self.coverage.layers[f"nn.{kind}"] += 1
                return UNKNOWN
            text = segment(self.src.lines, node) if node is not None else kind
            open_ = bool(kwargs.pop(OPEN, False))
            items: list[Any] = []
            named: dict[str, Any] = {}
            exact = True
            if kind == "Sequential":
                if len(args) == 1 and isinstance(args[0], DictV):  # Sequential(OrderedDict(...))
                    named = dict(args[0].items)
                    items = list(named.values())
                else:
                    items = list(args)
            if kind in ("ModuleList", "ParameterList") and args:
                if isinstance(args[0], TupleV):
                    items = list(args[0].items)
                elif isinstance(args[0], LayerV) and args[0].kind in ("ModuleList", "Sequential"):
                    items, exact = list(args[0].items), args[0].exact
                elif isinstance(args[0], LoaderV) and args[0].item is not UNKNOWN:
                    items, exact = [args[0].item], False  # `[Block(c) for _ in range(n)]`
                else:
                    return UNKNOWN  # built from a comprehension or a list we cannot read
            if kind in ("ModuleDict", "ParameterDict"):
                if args and isinstance(args[0], DictV):
                    named = dict(args[0].items)
                elif args:
                    return UNKNOWN
            span = self.src.span(node) if node is not None else None
            layer = LayerV(kind, args, kwargs, text, items, span, named, exact, open_)
            dtype = kwargs.get("dtype")
            if isinstance(dtype, DTypeV):
                layer.dtype = dtype.name
            if kind == "GroupNorm" and node is not None:
                groups = tt.size_of(nn.param(layer, "num_groups"))
                channels = tt.size_of(nn.param(layer, "num_channels"))
                self.guard(node, lambda: nn_spatial.group_norm_built(self, groups, channels, text))
            return layer
        if name in ("torch.utils.data.TensorDataset",):
            return _Dataset(list(args))
        if name == "torch.utils.data.DataLoader":
            return self.loader(args, kwargs)
        if name.startswith("torch.cuda.") or name in ("torch.manual_seed", "torch.no_grad"):
            return UNKNOWN
        return api.call_function(self, name, args, kwargs)

    def element(self, iterable: Any) -> Any:
        """What iterating `iterable` yields (the join of a tuple's items)."""
        if isinstance(iterable, LoaderV):
            return iterable.item
        if isinstance(iterable, TensorV):
            if iterable.shape:
                return TensorV(iterable.shape[1:], iterable.dtype, iterable.lib)
            return TensorV(None, iterable.dtype, iterable.lib)
        if isinstance(iterable, TupleV) and iterable.items:
            out = iterable.items[0]
            for x in iterable.items[1:]:
                out = join(out, x)
            return out
        if isinstance(iterable, _Dataset):
            return TupleV(tuple(self.element(t) for t in iterable.tensors))
        if isinstance(iterable, LayerV) and iterable.kind in ("ModuleList", "Sequential"):
            return iterable.items[0] if len(iterable.items) == 1 else UNKNOWN
        return UNKNOWN

    def loader(self, args: list, kwargs: dict) -> Any:
        data = tt.arg(args, kwargs, 0, "dataset")
        bs = tt.int_lit(tt.arg(args, kwargs, 1, "batch_size", IntV(const(1))))
        drop = kwargs.get("drop_last")
        drop_last = isinstance(drop, BoolV) and drop.value is True
        if not isinstance(data, _Dataset) or bs is None or bs < 1:
            return LoaderV(UNKNOWN)
        tensors = [tt.tensor(t) for t in data.tensors]
        if any(t is None or not t.shape for t in tensors):
            return LoaderV(UNKNOWN)
        n = literal(tensors[0].shape[0])  # type: ignore[union-attr, index]
        if n is not None and (n % bs == 0 or drop_last) and n >= bs:
            batch: Sym = const(bs)
        elif n is not None and n < bs:
            batch = const(n)
        elif n is not None:
            batch = self.fresh("batch", 1, bs, values=(bs, n % bs))
        else:
            batch = self.fresh("batch", 1, bs)
        return LoaderV(
            TupleV(tuple(t.with_shape((batch, *t.shape[1:])) for t in tensors if t and t.shape))
        )

    def call_function(
        self,
        f: FuncV,
        node: ast.AST | None,
        args: list | None,
        kwargs: dict,
        standalone: bool = False,
    ) -> Any:
        fn = f.node
        if (
            self.depth >= _MAX_DEPTH
            or self.steps > self.budget
            or any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in ast.walk(fn))
        ):
            return UNKNOWN
        if not standalone:
            self.reached.add(id(fn))
        summary = None
        if args is not None and summarisable(fn):
            summary = self._summary_key(f, args, kwargs)
            if summary is not None and summary in self._summaries:
                result, assumed, _ = self._summaries[summary]
                for cond in assumed:
                    self._assume(cond)
                return result
        before = self.path
        # A call that passes nothing the interpreter knows gives what the last such call gave.
        memo = None
        if all(uninformative(v) for v in [*(args or []), *kwargs.values()]):
            memo = (id(fn), id(f.owner), args is None, len(args or []), tuple(sorted(kwargs)))
            if memo in self._memo:
                return self._memo[memo]
            self._memo[memo] = UNKNOWN  # a recursive call meanwhile learns nothing
        env: dict[str, Any] = {}
        params = [*fn.args.posonlyargs, *fn.args.args]
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
            elif args is None:
                value = self.param_value(fn, p, default, f.owner)
            elif default is not None:
                value = self.expr(default, self.globals)
            else:
                value = self.annotation(p.annotation)
            if isinstance(value, TensorV) and value.shape is None:
                value = self.new_origin(value)
            env[p.arg] = value
        if fn.args.vararg is not None:
            env[fn.args.vararg.arg] = UNKNOWN
        if fn.args.kwarg is not None:
            env[fn.args.kwarg.arg] = UNKNOWN
        frame = _Frame()
        self.depth += 1
        caller = self.env
        self._current.append((fn, f.owner))
        try:
            self.block(fn.body, env, frame)
        finally:
            self.depth -= 1
            self.env = caller
            self._current.pop()
        if not env.get(DEAD):
            frame.returns.append(NoneV())
            frame.paths.append(self.path)
        if frame.paths:
            self.path = self.join_paths(frame.paths)
        result = frame.returns[0] if frame.returns else UNKNOWN  # every path raised
        for r in frame.returns[1:]:
            result = join(result, r)
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

    def instantiate(
        self, cls: ClassV, args: list | None, kwargs: dict, standalone: bool = False
    ) -> Any:
        if not standalone:
            self.instantiated.add(id(cls.node))
        obj = ObjectV(cls.node)
        init = self._method(cls.node, "__init__")
        if init is not None:
            self.call_function(FuncV(init, obj), None, args, kwargs, standalone=standalone)
        else:
            kind = self._layer_base(cls.node)
            if kind is not None:  # `class Linear(nn.Linear)` with the layer's own __init__
                self.build_layer(obj, kind, args, kwargs)
        return obj

    def _class_attr(self, cls: ast.ClassDef, name: str, seen: int = 0) -> Any:
        """A class-level binding (`expansion = 1`), evaluated in the module's scope."""
        for stmt in cls.body:
            if (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
                and stmt.targets[0].id == name
            ):
                return self.expr(stmt.value, self.globals)
        for base in cls.bases:
            if seen < 8 and isinstance(base, ast.Name):
                parent = self.globals.get(base.id)
                if isinstance(parent, ClassV):
                    return self._class_attr(parent.node, name, seen + 1)
        return None

    def _method(self, cls: ast.ClassDef, name: str, seen: int = 0) -> ast.FunctionDef | None:
        for stmt in cls.body:
            if isinstance(stmt, ast.FunctionDef) and stmt.name == name:
                return stmt
        if seen > 8:
            return None
        for base in cls.bases:
            if isinstance(base, ast.Name) and isinstance(self.globals.get(base.id), ClassV):
                found = self._method(self.globals[base.id].node, name, seen + 1)
                if found is not None:
                    return found
        return None

    # ------------------------------------------------------------ @gpu calls

    def kernel_call(self, name: str, args: list, kwargs: dict, node: ast.AST | None) -> Any:
        return kernel_calls.kernel_call(self, name, args, kwargs, node)


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


def _objects(env: dict) -> list[ObjectV]:
    """The instances a scope holds (`self`): their attributes are joined like variables."""
    seen: dict[int, ObjectV] = {}
    for v in env.values():
        if isinstance(v, ObjectV):
            seen.setdefault(id(v), v)
    return list(seen.values())


def _expects_error(node: ast.expr) -> bool:
    """`pytest.raises(...)`, `self.assertRaises(...)`: a block whose crash is expected."""
    func = node.func if isinstance(node, ast.Call) else node
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name in ("raises", "assertRaises", "assertRaisesRegex", "assertWarns")
