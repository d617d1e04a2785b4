"""Python's builtins and containers, as the host interpreter reads them.

The interpreter mixes this in: `builtin` answers a call of a builtin (`len`, `range`,
`isinstance`, `map`, `getattr`, `dict`, ...), `mutate` a list, `ModuleList` or
`ModuleDict` method that changes its receiver (`append`, `extend`, `update`), and
`call_lambda` a `lambda`. A list changed where the interpreter cannot count the changes
(in a loop it does not unroll) stops being known; a `ModuleList` filled that way keeps
what every item is, but not how many there are.
"""

from __future__ import annotations

import ast
from typing import Any

from mimir.host import hf_cache, nn, pyops
from mimir.host.values import (
    OTHER_KEYS,
    UNKNOWN,
    UNLISTED,
    ApiV,
    BoolV,
    CachesV,
    CacheV,
    ClassV,
    ConfigV,
    DictV,
    FloatV,
    IntV,
    LambdaV,
    LayerV,
    LoaderV,
    NoneV,
    ObjectV,
    PartialV,
    ShapeOfV,
    StrV,
    TensorV,
    TupleV,
    const,
    join_all,
    literal,
)

_UNROLL = 32
# `isinstance(v, T)` for the builtin types the interpreter has values of
_PY_TYPES = {
    "int": (IntV,),
    "float": (FloatV, IntV),
    "bool": (BoolV,),
    "str": (StrV,),
    "tuple": (TupleV, ShapeOfV),
    "list": (TupleV,),
    "dict": (DictV,),
}


class PyBuiltins:
    """Builtins and containers; `HostChecker` inherits them."""

    loop_depth: int

    def builtin(self, name: str, args: list, kwargs: dict) -> Any:
        a = args[0] if args else UNKNOWN
        if name == "len" and isinstance(a, ShapeOfV):
            return UNKNOWN  # `len(x.shape)` of an unknown rank: opaque, as `if_` needs it
        if name == "len":
            if isinstance(a, TensorV) and a.shape:
                return IntV(a.shape[0])
            if isinstance(a, TensorV) and a.shape is None:
                return IntV(self.axis_size(a, 0))
            if isinstance(a, TupleV):
                return IntV(const(len(a.items)))
            if isinstance(a, LayerV) and a.kind in ("Sequential", "ModuleList") and a.exact:
                return IntV(const(len(a.items)))
            if isinstance(a, LayerV) and a.kind == "ModuleDict":
                return IntV(const(len(a.named)))
            if isinstance(a, DictV):
                return IntV(const(len(a.items)))
            return IntV(None)
        if name == "range":
            bounds = [literal(x.sym) if isinstance(x, IntV) else None for x in args]
            if len(args) in (1, 2, 3) and None not in bounds and not kwargs:
                r = range(*bounds)  # type: ignore[arg-type]
                if len(r) <= _UNROLL:
                    return TupleV(tuple(IntV(const(i)) for i in r))
            return LoaderV(IntV(None))
        if name == "enumerate":
            items = _items(a)
            if items is not None:
                return TupleV(tuple(TupleV((IntV(const(k)), x)) for k, x in enumerate(items)))
            return LoaderV(TupleV((IntV(None), self.element(a))))
        if name == "zip":
            lists = [_items(x) for x in args]
            if lists and all(x is not None for x in lists):
                return TupleV(tuple(TupleV(row) for row in zip(*lists, strict=False)))
            return LoaderV(TupleV(tuple(self.element(x) for x in args)))
        if name == "map" and len(args) == 2:
            items = _items(args[1])
            if items is None:
                return UNKNOWN
            return TupleV(tuple(self.call_value(args[0], [x]) for x in items))
        if name in ("list", "tuple") and isinstance(a, TupleV):
            return TupleV(a.items, name == "list")
        if name in ("list", "tuple") and isinstance(a, LayerV) and a.exact and a.items:
            return TupleV(tuple(a.items), name == "list")
        if name in ("list", "tuple") and not args:
            return TupleV((), name == "list")
        if name == "reversed" and isinstance(a, TupleV):
            return TupleV(tuple(reversed(a.items)))
        if name in ("list", "tuple", "reversed", "sorted"):
            return UNKNOWN
        if name == "dict":
            if not args:
                return DictV(dict(kwargs))
            if isinstance(a, DictV):
                return DictV({**a.items, **kwargs})
            pairs = _items(a) if isinstance(a, TupleV) else None
            if pairs is not None and all(
                isinstance(p, TupleV) and len(p.items) == 2 and _named(p.items[0]) for p in pairs
            ):  # `dict([("conv0", conv), ...])`: the last of a name repeated wins, as there
                return DictV({**{p.items[0].value: p.items[1] for p in pairs}, **kwargs})
            return UNKNOWN
        if name == "int":
            if isinstance(a, FloatV) and a.value is not None:
                return IntV(const(int(a.value)))
            return a if isinstance(a, IntV) and not a.loose else IntV(None)
        if name == "float":
            if isinstance(a, IntV) and literal(a.sym) is not None:
                return FloatV(float(literal(a.sym)))  # type: ignore[arg-type]
            return a if isinstance(a, FloatV) else FloatV()
        if name == "abs" and isinstance(a, (IntV, FloatV)):
            return _abs(a)
        if name in ("min", "max") and len(args) >= 2 and not kwargs:
            values = [literal(x.sym) if isinstance(x, IntV) else None for x in args]
            if None not in values:
                pick = min if name == "min" else max
                return IntV(const(pick(values)))  # type: ignore[type-var]
            return IntV(None) if all(isinstance(x, IntV) for x in args) else UNKNOWN
        if name == "isinstance" and len(args) == 2:
            return BoolV(self.is_instance(args[0], args[1]))
        if name in ("getattr", "hasattr") and len(args) >= 2 and isinstance(args[1], StrV):
            value = self.get_attribute(args[0], args[1].value)
            if name == "hasattr":
                # `hasattr(F, "scaled_dot_product_attention")`: the PyTorch this checks
                # against has every functional its table knows
                known = isinstance(args[0], ApiV) and args[0].name == "torch.nn.functional"
                return BoolV(True if known and args[1].value in nn.FUNCTIONAL else None)
            if value is UNKNOWN and len(args) > 2:
                return UNKNOWN
            return value
        if name == "setattr" and len(args) == 3 and isinstance(args[0], ObjectV):
            if isinstance(args[1], StrV) and args[1].value:  # `setattr(self, f"stage{i}", ...)`
                args[0].attrs[args[1].value] = args[2]
            return NoneV()
        if name == "print":
            return NoneV()
        return UNKNOWN

    def is_instance(self, value: Any, kinds: Any) -> bool | None:
        """`isinstance(value, kinds)` when both are known well enough to say."""
        if isinstance(kinds, TupleV):
            answers = [self.is_instance(value, k) for k in kinds.items]
            if True in answers:
                return True
            return False if all(x is False for x in answers) else None
        if not isinstance(kinds, (ApiV, ClassV)) or value is UNKNOWN:
            return None
        if isinstance(kinds, ClassV):
            if isinstance(value, ObjectV):
                return value.cls is kinds.node or None
            return False if isinstance(value, (IntV, FloatV, StrV, TupleV, TensorV)) else None
        name = kinds.name
        if name.startswith("builtins."):
            types = _PY_TYPES.get(name[9:])
            if types is None:
                return None
            if isinstance(value, IntV) and name[9:] in ("tuple", "list", "str", "dict"):
                return False  # a size nobody stated is checked as the int it is read as
            if isinstance(value, IntV) and (value.loose or value.sym is None):
                return None
            # a class (`ACT2CLS["gelu"]`) or a library callable is no builtin container
            known = (IntV, FloatV, BoolV, StrV, TupleV, DictV, TensorV, NoneV, LayerV, ObjectV)
            known += (CacheV, CachesV)
            if isinstance(value, (ClassV, ApiV)) and name[9:] in ("tuple", "list", "dict"):
                return False
            if not isinstance(value, known):
                return None
            if isinstance(value, TupleV) and name[9:] in ("tuple", "list"):
                return value.is_list == (name[9:] == "list")
            return isinstance(value, types)
        if name in ("torch.Tensor", "numpy.ndarray"):
            if isinstance(value, TensorV):
                return (value.lib == "numpy") == (name == "numpy.ndarray")
            return False if isinstance(value, (IntV, FloatV, StrV, TupleV, NoneV)) else None
        if isinstance(value, (CacheV, CachesV)):
            return hf_cache.is_instance(value, name)
        if name.startswith("torch.nn."):
            kind = name.rsplit(".", 1)[-1]
            if isinstance(value, LayerV):
                return value.kind == kind or kind == "Module"
            if isinstance(value, (IntV, FloatV, StrV, TupleV, NoneV, TensorV)):
                return False
        return None

    # ------------------------------------------------------------ containers

    def mutate(
        self, receiver: Any, name: str, args: list, kwargs: dict, target: ast.expr, env: dict
    ) -> Any:
        """`xs.append(v)` and the like; the receiver is rebound to what it now holds."""
        a = args[0] if args else UNKNOWN
        if isinstance(receiver, LayerV) and receiver.kind in ("ModuleList", "Sequential"):
            if name == "add_module" and len(args) == 2 and _adds(receiver, args[0]):
                if (receiver.named or not receiver.items) and not self.loop_depth:
                    receiver.named[args[0].value] = args[1]  # `seq.norm5` reads it
                name, a = "append", args[1]  # a new name goes last, as `append` does
            if name in ("append", "extend"):
                new = [a] if name == "append" else _items(a)
                if new is None:
                    receiver.exact = False
                    receiver.items = []
                    return NoneV()
                if self.loop_depth or not receiver.exact:
                    # filled in a loop the interpreter does not count: what any item is
                    merged = [*receiver.items, *new]
                    one = join_all(merged)
                    receiver.items = [one] if one is not UNKNOWN else []
                    receiver.exact = False
                else:
                    receiver.items = [*receiver.items, *new]
                return NoneV()
            receiver.exact = False
            receiver.items = []
            return UNKNOWN
        if isinstance(receiver, LayerV) and receiver.kind == "ModuleDict":
            if name == "update" and isinstance(a, DictV):
                receiver.named.update(a.items)
                return NoneV()
            if name == "add_module" and len(args) == 2 and isinstance(a, StrV) and a.value:
                if not self.loop_depth:
                    receiver.named[a.value] = args[1]
                    return NoneV()
            receiver.named = {}
            return UNKNOWN
        if isinstance(receiver, TupleV) and receiver.is_list:
            new_items = [a] if name == "append" else _items(a) if name == "extend" else None
            if new_items is None or self.loop_depth:
                self._rebind(target, UNKNOWN, env)
                return UNKNOWN if name not in ("append", "extend") else NoneV()
            self._rebind(target, TupleV((*receiver.items, *new_items), True), env)
            return NoneV()
        if isinstance(receiver, DictV):
            if env is not self.globals:
                # in a function, its name holds a changed copy: a module's table that a
                # function checked on its own changes stays as the module made it
                receiver = DictV(dict(receiver.items))
                self._rebind(target, receiver, env)
            if self.loop_depth:  # changed in a loop the interpreter does not count
                name = "<not counted>"
            out = pyops.change_dict(receiver, name, args, kwargs)
            if OTHER_KEYS in receiver.items:
                self._rebind(target, UNKNOWN, env)
            return out
        if isinstance(receiver, ObjectV) and name == "add_module" and len(args) == 2:
            if isinstance(args[0], StrV) and args[0].value and not self.loop_depth:
                receiver.attrs[args[0].value] = args[1]
            else:  # some module under a name not known: `self.items()` cannot be listed
                receiver.attrs[UNLISTED] = UNKNOWN
            return NoneV()
        return UNKNOWN

    def call_lambda(self, f: LambdaV, args: list, kwargs: dict) -> Any:
        if self.depth >= 8:
            return UNKNOWN
        scope = dict(f.scope)
        params = f.node.args
        names = [p.arg for p in [*params.posonlyargs, *params.args]]
        defaults = params.defaults
        for k, n in enumerate(names):
            if k < len(args):
                scope[n] = args[k]
            elif n in kwargs:
                scope[n] = kwargs[n]
            elif k >= len(names) - len(defaults):
                scope[n] = self.expr(defaults[k - len(names) + len(defaults)], f.scope)
            else:
                scope[n] = UNKNOWN
        if params.vararg is not None:
            scope[params.vararg.arg] = TupleV(tuple(args[len(names) :]))
        self.depth += 1
        caller = self.env
        try:
            return self.expr(f.node.body, scope)
        finally:
            self.depth -= 1
            self.env = caller

    def call_partial(self, f: PartialV, args: list, kwargs: dict, node: Any) -> Any:
        return self.apply(f.func, [*f.args, *args], {**dict(f.kwargs), **kwargs}, node)

    def get_attribute(self, base: Any, name: str) -> Any:
        """`getattr(base, "name")` with a literal name, as `base.name` reads."""
        if isinstance(base, ApiV):
            return self._api(f"{base.name}.{name}")
        if isinstance(base, ObjectV) and name in base.attrs:
            return base.attrs[name]
        if isinstance(base, ConfigV):
            return self.config_attribute(base, name)
        if isinstance(base, LayerV) and base.kind == "ModuleDict":
            return base.named.get(name, UNKNOWN)
        return UNKNOWN

    def config_attribute(self, config: ConfigV, name: str) -> Any:
        name = config.aliases.get(name, name)
        if name not in config.attrs:
            config.attrs[name] = IntV(self.free_size(f"{config.name}.{name}"), loose=True)
        return config.attrs[name]


def _adds(seq: LayerV, name: Any) -> bool:
    """`seq.add_module(name, m)` puts `m` last: a name it does not hold yet (an existing
    one is replaced in place). The names are `named`'s, or "0", "1", ... of the layers it
    was given."""
    if not isinstance(name, StrV) or not name.value or not seq.exact:
        return False
    if seq.named or not seq.items:
        return name.value not in seq.named
    return not name.value.isdigit()


def _items(v: Any) -> list[Any] | None:
    """The items of a value iterated exactly (a tuple, a list, a literal ModuleList)."""
    if isinstance(v, TupleV):
        return list(v.items)
    if isinstance(v, LayerV) and v.kind in ("ModuleList", "Sequential") and v.exact:
        return list(v.items)
    if isinstance(v, LayerV) and v.kind == "ModuleDict":
        return [StrV(k) for k in v.named]
    if isinstance(v, DictV):
        return [StrV(k) for k in v.items]
    return None


def _abs(v: IntV | FloatV) -> Any:
    if isinstance(v, FloatV):
        return FloatV(None if v.value is None else abs(v.value))
    k = literal(v.sym)
    return IntV(None) if k is None else IntV(const(abs(k)))


def _named(v: Any) -> bool:
    """A string known to the letter (`StrV("")` stands for any string)."""
    return isinstance(v, StrV) and bool(v.value)
