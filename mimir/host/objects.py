"""Classes and instances in host code: building an object from its `__init__`, reading
class attributes and methods through the bases, `super()`, and a class that derives from
a `torch.nn` layer (`class Linear(nn.Linear)`), whose layer is built from the arguments
its `__init__` passes up.

`HostChecker` mixes this in.
"""

from __future__ import annotations

import ast
from typing import Any

from mimir.host import nn
from mimir.host.values import (
    UNKNOWN,
    ApiV,
    BoolV,
    ClassV,
    DictV,
    FloatV,
    FuncV,
    IntV,
    LayerV,
    MethodV,
    NoneV,
    ObjectV,
    PartialV,
    StrV,
    SuperV,
    TensorV,
    TupleV,
)
from mimir.parse.module import walk_statements

BUILD_LAYER = "<build layer>"  # `super().__init__(...)` of a class over a `torch.nn` layer
ITEMS = "<items>"
SEQ = "Sequential"  # the dict a subclass of `dict` was built from
_BASES = (SEQ, "ModuleDict")  # container bases besides the layers of `nn.PARAMS`
EMPTY = "<built empty>"  # a class over `nn.Sequential` whose `super().__init__()` had none


class Objects:
    """Classes and instances; `HostChecker` inherits them."""

    def _super(self, args: list) -> Any:
        if args or not self._current:
            return UNKNOWN
        fn, owner = self._current[-1]
        if self._classes is None:
            self._classes = {}
        if id(fn) not in self._classes:  # each module's methods, the first time one asks
            home = self.home_of(fn)
            tree = home.info.tree if home is not None else self.local_info.tree
            self._classes.update(
                (id(f), c)
                for c in walk_statements(tree)
                if isinstance(c, ast.ClassDef)
                for f in c.body
                if isinstance(f, ast.FunctionDef)
            )
        cls = self._classes.get(id(fn))
        if cls is None or not isinstance(owner, ObjectV):
            return UNKNOWN
        return SuperV(cls, owner)

    def super_attribute(self, sup: SuperV, attr: str) -> Any:
        """`super().forward`: the method of a base class, or of the `torch.nn` layer below."""
        for base in sup.cls.bases:
            if isinstance(base, ast.Name) and isinstance(self.global_value(base.id), ClassV):
                found = self._method(self.globals[base.id].node, attr)
                if found is not None:
                    return FuncV(found, sup.obj)
        items = sup.obj.attrs.get(ITEMS)
        if attr in ("__getitem__", "get") and isinstance(items, DictV):
            return MethodV(items, "get")  # `super().__getitem__(key)` of a dict subclass
        if attr == "__init__":
            kind = self._layer_base(sup.cls)
            if kind is not None:
                return PartialV(ApiV(BUILD_LAYER), (sup.obj, StrV(kind)), ())
        if isinstance(sup.obj.layer, LayerV):
            if attr == "forward":
                return sup.obj.layer
            return MethodV(sup.obj.layer, attr)
        return UNKNOWN

    def _layer_base(self, cls: ast.ClassDef, seen: int = 0) -> str | None:
        """The `torch.nn` layer a class derives from, directly or through its bases."""
        with self.at_home(self.home_of(cls)):  # its bases are named in its module
            for base in cls.bases:
                name = self.qualname(base)
                short = (name or "").rsplit(".", 1)[-1]
                if (name or "").startswith("torch.nn.") and (short in nn.PARAMS or short in _BASES):
                    return short
                if isinstance(base, ast.Name) and isinstance(self.global_value(base.id), ClassV):
                    if seen < 8:
                        found = self._layer_base(self.globals[base.id].node, seen + 1)
                        if found is not None:
                            return found
            return None

    def build_layer(self, obj: ObjectV, kind: str, args: list | None, kwargs: dict) -> None:
        """`obj`'s `torch.nn` base built from `args` (free sizes when no call says)."""
        if kind == SEQ:  # `class ConvNormActivation(nn.Sequential)`: the layers it was given
            if args:
                layer = self.library("torch.nn.Sequential", list(args), dict(kwargs), None)
                obj.layer = layer if isinstance(layer, LayerV) else None
            else:  # none: its layers are set or added later (`add_module`), in that order
                obj.layer = LayerV(kind, [], {}, EMPTY)
            return
        if kind == "ModuleDict":  # filled by `add_module` or attributes: what `items()` reads
            obj.layer = None if args else LayerV(kind, [], {}, f"{obj.cls.name}(...)")
            return
        if args is None:
            args = [IntV(self.free_size(p)) for p in nn.PARAMS[kind] if p in nn.SIZES]
            kwargs = {}
        text = f"{obj.cls.name}(...)"
        obj.layer = LayerV(kind, list(args), dict(kwargs), text, span=self.src.span(obj.cls))

    def instantiate(
        self, cls: ClassV, args: list | None, kwargs: dict, standalone: bool = False
    ) -> Any:
        if not standalone:
            self.instantiated.add(id(cls.node))
        obj = ObjectV(cls.node)
        if self.recording is not None and self.recording[0] == id(cls.node):
            self.recording[1].append(obj)  # a builder function's instance (`Modular`)
        init = self._method(cls.node, "__init__")
        if init is not None:
            self.call_function(FuncV(init, obj), None, args, kwargs, standalone=standalone)
            seq = isinstance(obj.layer, LayerV) and obj.layer.kind == SEQ
            if seq and obj.layer.text == EMPTY:  # its modules are those it set, in order
                obj.layer = registered(obj, SEQ)
            elif seq and any(isinstance(v, (LayerV, ObjectV)) for v in obj.attrs.values()):
                obj.layer = None  # a module set as an attribute joins the sequence: not read
        else:
            kind = self._layer_base(cls.node)
            if kind is not None:  # `class Linear(nn.Linear)` with the layer's own __init__
                self.build_layer(obj, kind, args, kwargs)
            elif args and isinstance(args[0], DictV) and self._dict_base(cls.node):
                obj.attrs[ITEMS] = args[0]  # `ClassInstantier(ACT2CLS)`: a dict of its own
        return obj

    def _dict_base(self, cls: ast.ClassDef) -> bool:
        """Whether `cls` derives from `dict` or `OrderedDict` directly."""
        with self.at_home(self.home_of(cls)):
            for base in cls.bases:
                name = self.qualname(base) or (base.id if isinstance(base, ast.Name) else "")
                if name in ("dict", "collections.OrderedDict", "typing.OrderedDict"):
                    return True
        return False

    def _class_attr(self, cls: ast.ClassDef, name: str, seen: int = 0) -> Any:
        """A class-level binding (`expansion = 1`, `expansion: int = 4`), evaluated in the
        module's scope."""
        with self.at_home(self.home_of(cls)):  # its bases are named in its module
            for stmt in cls.body:
                if (
                    isinstance(stmt, ast.Assign)
                    and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Name)
                    and stmt.targets[0].id == name
                ):
                    return self.expr(stmt.value, self.globals)
                if (
                    isinstance(stmt, ast.AnnAssign)
                    and stmt.value is not None
                    and isinstance(stmt.target, ast.Name)
                    and stmt.target.id == name
                ):
                    return self.expr(stmt.value, self.globals)
            for base in cls.bases:
                if seen < 8 and isinstance(base, ast.Name):
                    parent = self.global_value(base.id)
                    if isinstance(parent, ClassV):
                        return self._class_attr(parent.node, name, seen + 1)
            return None

    def _method(self, cls: ast.ClassDef, name: str, seen: int = 0) -> ast.FunctionDef | None:
        with self.at_home(self.home_of(cls)):  # its bases are named in its module
            for stmt in reversed(cls.body):  # the last definition (overloads come first)
                if isinstance(stmt, ast.FunctionDef) and stmt.name == name:
                    return stmt
            if seen > 8:
                return None
            for base in cls.bases:
                if isinstance(base, ast.Name) and isinstance(self.global_value(base.id), ClassV):
                    found = self._method(self.globals[base.id].node, name, seen + 1)
                    if found is not None:
                        return found
            return None


def registered(obj: ObjectV, kind: str = "ModuleDict") -> LayerV | None:
    """The modules an instance of a class over `nn.ModuleDict` (or an `nn.Sequential` built
    empty) holds, in the order they were set or added (`add_module`), as PyTorch registers
    them; None when an attribute may or may not be a module."""
    named = {}
    for name, v in obj.attrs.items():
        if isinstance(v, (LayerV, ObjectV)):
            named[name] = v
        elif not isinstance(v, (IntV, FloatV, StrV, BoolV, NoneV, TensorV, TupleV)):
            return None
    text = f"{obj.cls.name}(...)"
    return LayerV(kind, [], {}, text, list(named.values()), named=named)
