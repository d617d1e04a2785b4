"""How the host interpreter runs statements: assignments and unpacking, `assert`,
branches, loops and `try`.

`HostChecker` mixes this in. A branch whose condition is known runs alone; otherwise
both run and the join keeps what both agree on, and a branch on a value the interpreter
lost reports nothing. A loop over a literal sequence (a `ModuleList`) is unrolled; any
other loop runs until the loop-carried values agree, widening sizes that still change to
free sizes. An `assert` on sizes is an error when it never holds and an assumption
otherwise. Unpacking the shape of a tensor of unknown rank fixes its rank.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mimir.host import torch_table as tt
from mimir.host.assume import variables
from mimir.host.flow import (
    DEAD,
    as_load,
    envs_agree,
    has_break,
    join_envs,
    literal_items,
    replace_env,
    segment,
    truth_of,
    unpack,
)
from mimir.host.rules import RefutedError
from mimir.host.symbolic import NEVER
from mimir.host.values import (
    UNKNOWN,
    ApiV,
    BoolV,
    CachesV,
    ClassV,
    DTypeV,
    FuncV,
    IntV,
    KernelV,
    NoneV,
    ObjectV,
    OptionalV,
    ShapeOfV,
    SpreadV,
    TensorV,
    TupleV,
    agree,
    const,
    eq,
    join,
    same,
    show_shape,
    show_tensor,
)
from mimir.project.resolve import resolve_module
from mimir.solve.z3lib import z3

LOOP_ROUNDS = 4
UNROLL = 32
_ORDERED = "collections.OrderedDict"  # a dict, as the host reads it
_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}
LIBRARIES = ("torch", "numpy", "jaxtyping", "mimir", "functools", "math", "einops")
DTYPE_NAMES = {
    **tt.DTYPE_ALIASES,
    "float_": "float64",
    "int_": "int64",
    "longlong": "int64",
}


@dataclass
class Frame:
    returns: list[Any] = field(default_factory=list)
    generator: bool = False
    paths: list[Any] = field(default_factory=list)  # the path at each return


class Statements:
    """Statements; `HostChecker` inherits them."""

    def block(self, body: list[ast.stmt], env: dict, frame: Frame | None) -> None:
        for stmt in body:
            if env.get(DEAD):
                return
            self.statement(stmt, env, frame)

    def statement(self, stmt: ast.stmt, env: dict, frame: Frame | None) -> None:
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

    def _optional_dependency(self, stmt: ast.stmt) -> bool:
        """Whether `stmt` imports a package that is neither the project's, nor the standard
        library's, nor one the interpreter knows (`from apex.normalization import
        FusedRMSNorm`)."""
        if isinstance(stmt, ast.Import):
            modules = [alias.name for alias in stmt.names]
        elif isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
            modules = [stmt.module]
        else:
            return False
        for module in modules:
            top = module.split(".")[0]
            if top in sys.stdlib_module_names or top in LIBRARIES:
                return False
            try:
                target = resolve_module(Path(self.src.path).resolve(), module, 0, ())
            except (OSError, ValueError):
                return False
            if not target.external:
                return False
        return True

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
                if alias.name in DTYPE_NAMES:
                    env[local] = DTypeV(DTYPE_NAMES[alias.name])
                else:
                    env[local] = ApiV(full)
            elif module.split(".")[0] in LIBRARIES or full in ("typing.cast", _ORDERED):
                env[local] = self._api(full)
            elif alias.name != "*":
                env[local] = self.imported_name(stmt, alias.name)  # another module's, run
            else:
                env.update(self.star_imported(stmt))

    def bind(self, target: ast.expr, value: Any, env: dict) -> None:
        if isinstance(target, ast.Name) and isinstance(value, TensorV) and value.shape is None:
            value = self.new_origin(value)
        if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ShapeOfV, SpreadV)):
            value = self._unpack_shape(target, value)
        if isinstance(target, ast.Name):
            env[target.id] = value
            if isinstance(value, TensorV) and not self.abroad:  # hover: every context's join
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

    def if_(self, stmt: ast.If, env: dict, frame: Frame | None) -> None:
        tests_before = self.none_tests
        test = self.expr(stmt.test, env)
        # `if x is not None:` alone; `if self.use_global and x is not None:` says that x
        # may be None only in some configurations, so its None path need not be one
        tests_none = self.none_tests > tests_before and _none_test(stmt.test)
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
        narrowed = self._narrowed(stmt.test, env)
        for k, (body, cond) in enumerate(zip((stmt.body, stmt.orelse), conds, strict=True)):
            branch = dict(env)
            if narrowed is not None:
                branch[narrowed[0]] = narrowed[1 + k]
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
        joined = join_envs(paths)
        if tests_none and _shape_lost(paths, joined):
            self.optional_losses += 1  # `Modular.check_def` runs the None path on its own
        replace_env(env, joined)

    def _narrowed(self, test: ast.expr, env: dict) -> tuple[str, Any, Any] | None:
        """`if isinstance(cache, EncoderDecoderCache):` of a name holding a cache of one of
        several classes: the name, what it holds where the test holds and where not."""
        negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
        call = test.operand if isinstance(test, ast.UnaryOp) and negated else test
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id == "isinstance"
            and len(call.args) == 2
            and not call.keywords
            and isinstance(call.args[0], ast.Name)
        ):
            return None
        raw = self._raw(call.args[0], env)
        optional = isinstance(raw, OptionalV)
        value = raw.value if isinstance(raw, OptionalV) else raw
        if not isinstance(value, CachesV):
            return None
        kinds = self.expr(call.args[1], env)
        answers = [self.is_instance(c, kinds) for c in value.options]
        held = [c for c, a in zip(value.options, answers, strict=True) if a is not False]
        not_held = [c for c, a in zip(value.options, answers, strict=True) if a is not True]
        if not held or not not_held:
            return None
        yes = held[0] if len(held) == 1 else CachesV(tuple(held))
        no = not_held[0] if len(not_held) == 1 else CachesV(tuple(not_held))
        if optional:  # None is no instance of any class
            no = OptionalV(no)
        return (call.args[0].id, no, yes) if negated else (call.args[0].id, yes, no)

    def loop(self, stmt: ast.For | ast.While, env: dict, frame: Frame | None) -> None:
        if isinstance(stmt, ast.For):
            iterable = self.expr(stmt.iter, env)
            items = literal_items(iterable)
            if items is not None and len(items) <= UNROLL and not has_break(stmt.body):
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
        frame: Frame | None,
    ) -> None:
        for rounds in range(LOOP_ROUNDS + 1):
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
            if rounds == LOOP_ROUNDS - 1:  # widen what still changes
                state = {k: self.widen(v, entry.get(k, v)) for k, v in state.items()}
        self.path = entry_path
        replace_env(env, state)
        self.block(stmt.orelse, env, frame)

    def try_(self, stmt: ast.Try, env: dict, frame: Frame | None) -> None:
        if stmt.body and self._optional_dependency(stmt.body[0]) and _catches_import(stmt):
            # `try: from apex.normalization import FusedRMSNorm ... except ImportError:`:
            # the package is taken as not installed, so the project's fallback runs
            for handler in stmt.handlers:
                if _catches_import_error(handler):
                    if handler.name:
                        env[handler.name] = UNKNOWN
                    self.block(handler.body, env, frame)
                    break
            self.block(stmt.finalbody, env, frame)
            return
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


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    """Whether an `except` clause catches a failed import (`ImportError`, or wider)."""
    if handler.type is None:
        return True
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    names = [k.id if isinstance(k, ast.Name) else getattr(k, "attr", None) for k in kinds]
    return any(name in _IMPORT_ERRORS for name in names)


def _catches_import(stmt: ast.Try) -> bool:
    return any(_catches_import_error(h) for h in stmt.handlers)


def _none_test(test: ast.expr) -> bool:
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and len(test.ops) == 1
        and isinstance(test.ops[0], (ast.Is, ast.IsNot))
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    )


def _shape_lost(paths: list[dict], joined: dict) -> bool:
    """Whether a tensor whose shape one live path knew has no known shape after the join."""
    for name, value in joined.items():
        if isinstance(value, TensorV) and value.shape is not None:
            continue
        if any(
            isinstance(p.get(name), TensorV) and p[name].shape is not None
            for p in paths
            if not p.get(DEAD)
        ):
            return True
    return False


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
