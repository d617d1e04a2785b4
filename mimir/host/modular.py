"""Every function and method checked on its own, with what its parameters can be.

The host interpreter mixes this in. `check_every_function` visits each module-level
`def` and each method of each class, whether or not a call reaches it, and runs it with
its parameters bound by `param_value`:

- an annotation is a contract: `Float[Tensor, "b t 64"]`, `Tensor[float32, N, 784]`
  (checked for every size it admits), `torch.Tensor` (any shape), `int` (a free size);
- a tensor parameter nobody annotated has an unknown rank and free sizes, refined by
  what the code demands of it (`mimir.host.symbolic`);
- `x=None` or `Optional[...]` may be None: `if x is not None` checks both branches;
- a class is built once, by its `__init__`, from the configuration the project states:
  a dataclass's defaults (a parameter annotated with it, or named `config` when one
  dataclass in the module has every field it reads), a literal default; an argument
  nobody stated is a free size, and an `assert` in `__init__` is assumed. Errors found
  under a stated configuration carry a label naming it.
"""

from __future__ import annotations

import ast
from typing import Any

from mimir.diagnostics.diagnostic import Label, Span
from mimir.host.assume import Path
from mimir.host.flow import constant, decorator_name
from mimir.host.stated import StatedCall, literal_call
from mimir.host.values import (
    UNKNOWN,
    BoolV,
    ClassV,
    ConfigV,
    FloatV,
    FuncV,
    IntV,
    NoneV,
    ObjectV,
    OptionalV,
    TensorV,
    TupleV,
)

# Names a configuration object goes by when nobody annotated it.
CONFIG_NAMES = {
    "config",
    "cfg",
    "conf",
    "args",
    "params",
    "hparams",
    "hp",
    "opt",
    "opts",
    "options",
    "model_args",
    "model_config",
    "dims",
}


class Modular:
    """Checking each `def` and each method with symbolic parameters."""

    globals: dict[str, Any]
    path: Path
    stated: tuple[Label, ...]

    def _init_modular(self) -> None:
        self._instances: dict[int, tuple[Any, tuple[Label, ...]]] = {}
        self._built: dict[int, Path] = {}  # class -> the path its __init__ ended on
        self.defaults_only = 0  # building an instance from its signature's defaults
        self._listed: dict[str, Any] = {}  # project root -> its files, for stated calls
        self._configs: dict[int, ObjectV] = {}
        self._stating: list[Label] = []  # labels of stated configurations met while building

    # ------------------------------------------------------------ orchestration

    def check_every_function(self, tree: ast.Module) -> None:
        for stmt in tree.body:
            if isinstance(stmt, ast.FunctionDef) and stmt.name not in self.kernels:
                self.check_def(stmt, None, ())
            elif isinstance(stmt, ast.ClassDef):
                self.check_class(stmt)

    def check_class(self, cls: ast.ClassDef) -> None:
        if self.steps > self.budget:
            return
        obj, stated = self.instance_of(cls)
        built = self._built.get(id(cls), Path())  # what __init__ asserted of the sizes
        for fn in cls.body:
            if not isinstance(fn, ast.FunctionDef) or fn.name == "__init__":
                continue
            kinds = {decorator_name(d) for d in fn.decorator_list}
            if "staticmethod" in kinds:
                self.check_def(fn, None, ())
            elif "classmethod" in kinds:
                self.check_def(fn, ClassV(cls), ())
            elif isinstance(obj, ObjectV):
                self.check_def(fn, obj, stated, built)

    def check_def(
        self, fn: ast.FunctionDef, owner: Any, stated: tuple[Label, ...], start: Path | None = None
    ) -> None:
        if self.steps > self.budget:
            return
        self.path = start if start is not None else Path()
        self.stated = stated
        try:
            self.call_function(FuncV(fn, owner), None, None, {}, standalone=True)
        finally:
            self.path = Path()
            self.stated = ()

    def instance_of(self, cls: ast.ClassDef) -> tuple[Any, tuple[Label, ...]]:
        """The instance every method of `cls` is checked on, and the labels of what it
        was built from (a stated configuration)."""
        key = id(cls)
        if key in self._instances:
            return self._instances[key]
        self._instances[key] = (UNKNOWN, ())  # a class whose __init__ builds itself
        outer = self._stating
        self._stating = []
        self.path = Path()
        try:
            call = self._stated_call(cls)
            if call is None:
                # built from the signature's defaults: an assert of __init__ that they fail
                # says the defaults are no configuration (`ws: int = 1` then `assert ws != 1`)
                self.defaults_only += 1
                try:
                    obj = self.instantiate(ClassV(cls), None, {}, standalone=True)
                finally:
                    self.defaults_only -= 1
            else:
                args = [_literal(a) for a in call.args]
                kwargs = {k: _literal(v) for k, v in call.kwargs}
                obj = self.instantiate(ClassV(cls), args, kwargs, standalone=True)
                span = Span(call.path, call.line, call.column, call.end_line, call.end_column)
                self._stating.append(Label(span, f"the sizes checked are those of `{call.text}`"))
            self._built[key] = self.path
        finally:
            self.path = Path()
            stated = tuple(dict.fromkeys(self._stating))
            self._stating = outer
        self._instances[key] = (obj, stated)
        return obj, stated

    def _stated_call(self, cls: ast.ClassDef) -> StatedCall | None:
        """A literal call that builds `cls` in the project, when its `__init__` has
        parameters without a default (what the call states and nothing else does)."""
        init = next(
            (f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None
        )
        if init is None:
            return None
        a = init.args
        positional = [*a.posonlyargs, *a.args][1:]
        required = len(positional) > len(a.defaults) or any(d is None for d in a.kw_defaults)
        if not required:
            return None
        needed = positional[: len(positional) - len(a.defaults)]
        if any(p.arg in CONFIG_NAMES for p in needed):
            return None  # a configuration object is never written as a literal
        names = {p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]}
        accepts = None if a.kwarg is not None else names
        try:
            return literal_call(self.src.path, self.info.tree, cls.name, accepts, self._listed)
        except (OSError, ValueError):
            return None

    # ------------------------------------------------------------ parameters

    def param_value(
        self, fn: ast.FunctionDef, p: ast.arg, default: ast.expr | None, owner: Any
    ) -> Any:
        """What parameter `p` of `fn` can be when no call says (see the module docstring)."""
        in_init = fn.name == "__init__"
        annotation, optional = _unwrap_optional(p.annotation)
        config = self._config_class(annotation, p.arg, fn)
        if config is not None:
            return self.config_instance(config)
        if default is not None:
            value = self.expr(default, self.globals)
            if in_init:
                return value  # the configuration the signature states
            if isinstance(value, NoneV):
                inner = self._annotated(annotation, p.arg, in_init)
                return OptionalV(inner) if inner is not UNKNOWN else OptionalV(TensorV(None))
            if isinstance(value, BoolV):
                return BoolV(None)
            if isinstance(value, IntV) and value.sym is not None and value.sym.value is not None:
                # a caller may pass any int: the default is one value among them, and taken
                # alone it would meet flags explored both ways in combinations no call makes
                low = min(0, value.sym.value)
                return IntV(self.free_size(p.arg, lo=low), loose=annotation is None)
            return value
        value = self._annotated(annotation, p.arg, in_init)
        if value is UNKNOWN and annotation is None:
            if in_init:
                if p.arg in CONFIG_NAMES:
                    return ConfigV(p.arg)
                return IntV(self.free_size(p.arg), loose=True)
            value = TensorV(None)
        return OptionalV(value) if optional and value is not UNKNOWN else value

    def _annotated(self, annotation: ast.expr | None, name: str, in_init: bool) -> Any:
        if annotation is None:
            return UNKNOWN
        value = self.annotation(annotation)
        if isinstance(value, IntV) and value.sym is None:
            return IntV(self.free_size(name, lo=1 if in_init else 0))
        if isinstance(value, (TensorV, IntV, FloatV)):
            return value
        return UNKNOWN

    # ------------------------------------------------------------ configurations

    def _config_class(
        self, annotation: ast.expr | None, name: str, fn: ast.FunctionDef
    ) -> ast.ClassDef | None:
        if annotation is not None:
            target = self.globals.get(annotation.id) if isinstance(annotation, ast.Name) else None
            if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
                target = self.globals.get(annotation.value)
            if isinstance(target, ClassV) and _is_dataclass(target.node):
                return target.node
            return None
        if name not in CONFIG_NAMES:
            return None
        read = _attributes_read(fn, name)
        if not read:
            return None
        found = [
            v.node
            for v in self.globals.values()
            if isinstance(v, ClassV)
            and _is_dataclass(v.node)
            and read <= set(_fields(v.node))
            and all(f.value is not None for f in _fields(v.node).values())
        ]
        return found[0] if len(found) == 1 else None

    def config_instance(self, cls: ast.ClassDef) -> ObjectV:
        """The dataclass `cls` as its defaults state it; a field without one is a free size."""
        if id(cls) in self._configs:
            obj = self._configs[id(cls)]
        else:
            obj = ObjectV(cls)
            for name, field in _fields(cls).items():
                if field.value is not None:
                    obj.attrs[name] = self.expr(field.value, self.globals)
                else:
                    ann = self.annotation(field.annotation)
                    if isinstance(ann, IntV):
                        obj.attrs[name] = IntV(self.free_size(name))
                    elif isinstance(ann, (TensorV, FloatV)):
                        obj.attrs[name] = ann
            self._configs[id(cls)] = obj
        if any(f.value is not None for f in _fields(cls).values()):
            self._stating.append(
                Label(self.src.span(cls), f"the sizes checked are `{cls.name}()`'s defaults")
            )
        return obj


def _literal(value: Any) -> Any:
    """A Python literal from a stated call as a host value."""
    if isinstance(value, (tuple, list)):
        return TupleV(tuple(_literal(v) for v in value), isinstance(value, list))
    return constant(value)


def _unwrap_optional(node: ast.expr | None) -> tuple[ast.expr | None, bool]:
    """`Optional[X]` and `X | None` as `X` and True."""
    if isinstance(node, ast.Subscript):
        head = node.value
        name = head.id if isinstance(head, ast.Name) else getattr(head, "attr", None)
        if name == "Optional":
            return node.slice, True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        for a, b in ((node.left, node.right), (node.right, node.left)):
            if isinstance(b, ast.Constant) and b.value is None:
                return a, True
    return node, False


def _is_dataclass(cls: ast.ClassDef) -> bool:
    for d in cls.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        name = target.id if isinstance(target, ast.Name) else getattr(target, "attr", None)
        if name == "dataclass":
            return True
    return False


def _fields(cls: ast.ClassDef) -> dict[str, ast.AnnAssign]:
    return {
        s.target.id: s
        for s in cls.body
        if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
    }


def _attributes_read(fn: ast.FunctionDef, name: str) -> set[str]:
    return {
        n.attr
        for n in ast.walk(fn)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == name
    }
