"""Abstract values of host code, and sizes that may be unknown.

A host value is what the interpreter knows about a Python value without running
it: a tensor's shape (each size a `Sym` over the Z3 size algebra, or None when
unknown), its dtype and library; a Python int as a size; a tuple; a layer built
from `torch.nn`; an instance of a user class. `UNKNOWN` is everything else: it
carries no facts, so nothing computed from it is ever reported.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mimir.constraints.algebra import Sym, lift
from mimir.solve.z3lib import z3

Size = Sym | None  # None: a size nobody can know statically
Shape = tuple[Size, ...]


class Unknown:
    """A value the interpreter cannot follow (an unknown call, a library object)."""

    _instance: Unknown | None = None

    def __new__(cls) -> Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = Unknown()
UNLISTED = "<modules added under names not known>"  # an attribute: `items()` is unknown
OTHER_KEYS = "<keys added that are not known>"  # of a `DictV`: `k in d` is undecided


@dataclass(frozen=True)
class TensorV:
    """A tensor: shape None when even the rank is unknown; dtype None when unknown.

    When the rank is unknown, `tail` holds the sizes of the last axes that are known
    (`Linear(d, 10)` applied to anything gives `[..., 10]`), and `origin` names the
    shape: every value of one origin (a parameter, its casts, what an element-wise op
    makes of it) has the same shape, so a size read from one (`x.shape[-1]`) or a rank
    fixed by one (`B, T, C = x.shape`) holds for all of them.
    """

    shape: Shape | None
    dtype: str | None = None
    lib: str = "torch"  # "torch" | "numpy" | "mimir"
    tail: Shape = ()
    origin: int | None = None
    max_rank: int | None = None  # when the rank is unknown: at most this (a conv's output)

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    def with_shape(self, shape: Shape | None) -> TensorV:
        return TensorV(None if shape is None else tuple(shape), self.dtype, self.lib)

    def with_dtype(self, dtype: str | None) -> TensorV:
        return TensorV(self.shape, dtype, self.lib, self.tail, self.origin, self.max_rank)

    def with_tail(self, tail: Shape) -> TensorV:
        """A tensor of unknown rank whose last axes are `tail`."""
        return TensorV(None, self.dtype, self.lib, tuple(tail))

    @property
    def last(self) -> Shape:
        """The trailing sizes known: the whole shape, or the tail when the rank is unknown."""
        return self.shape if self.shape is not None else self.tail


@dataclass(frozen=True)
class IntV:
    """A Python int whose value is a size expression (None: an int we cannot know).

    `loose`: a value of a parameter nobody annotated, read as an int because it is used
    as a size, though the caller may pass None or a float (`dropout`, `ratio`): it is never
    compared, truncated or tested, only used as a size (and what is made from it is loose).
    """

    sym: Size
    loose: bool = False


@dataclass(frozen=True)
class FloatV:
    value: float | None = None  # known when computed from literals (`int(2 * d / 3)`)


@dataclass(frozen=True)
class BoolV:
    value: bool | None = None
    term: Any = field(default=None, compare=False)  # a Z3 condition over sizes, when symbolic
    loose: bool = field(default=False, compare=False)  # `term` reads a loose int (see IntV)


@dataclass(frozen=True)
class StrV:
    value: str


@dataclass(frozen=True)
class NoneV:
    pass


@dataclass(frozen=True)
class TupleV:
    items: tuple[Any, ...]
    is_list: bool = False


@dataclass(frozen=True)
class PrefixV:
    """A tuple whose first items are known and whose length is not: `outputs` that is
    `(h, bias)` on one path and `(h, bias, weights)` on another. Indexing a known item and
    slicing off the first ones are exact; what reads its length or its last items is not."""

    items: tuple[Any, ...]


@dataclass(frozen=True)
class DTypeV:
    name: str


@dataclass(frozen=True)
class DeviceV:
    name: str | None  # "cpu" | "cuda" | None


@dataclass
class LayerV:
    """A `torch.nn` layer: its class name and its constructor arguments, evaluated."""

    kind: str
    args: list[Any]
    kwargs: dict[str, Any]
    text: str  # the constructor call as written, for messages
    items: list[Any] = field(default_factory=list)  # Sequential / ModuleList members
    span: Any = None  # where the layer is built (a secondary label on its errors)
    named: dict[str, Any] = field(default_factory=dict)  # ModuleDict members
    exact: bool = True  # False: a ModuleList filled in a loop; `items` holds what any item is
    open: bool = False  # built with `**kwargs` nobody can read: unstated arguments are unknown
    dtype: str | None = None  # after `.double()`, `.half()`, `.to(dtype)`


@dataclass
class ObjectV:
    """An instance of a class defined in the checked file (an `nn.Module` subclass).

    `layer`: the `torch.nn` layer a class derived from one is (`class Linear(nn.Linear)`),
    whose weights and `forward` the instance has unless it overrides them."""

    cls: ast.ClassDef
    attrs: dict[str, Any] = field(default_factory=dict)
    layer: Any = None


@dataclass(frozen=True)
class CacheV:
    """A key/value cache of transformers (`DynamicCache()`), by its class name: what its
    `update` returns is a table's rule (`mimir.host.hf_cache`), not its code's."""

    kind: str
    # an `EncoderDecoderCache`'s self-attention and cross-attention caches, as given
    parts: tuple[Any, ...] = ()


@dataclass(frozen=True)
class CachesV:
    """A cache of one of several classes: paths that made different ones met (a
    `DynamicCache`, wrapped in an `EncoderDecoderCache` under a flag nobody stated)."""

    options: tuple[CacheV, ...]


@dataclass(frozen=True)
class SuperV:
    """`super()` inside a method of `cls`, bound to `obj`."""

    cls: ast.ClassDef
    obj: Any

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)


@dataclass
class DictV:
    """A dict with string keys, every value known to the interpreter or not. Methods that
    change it change `items` in place (aliases share it); a key added that is not known
    adds `OTHER_KEYS`, after which a key missing from `items` may still be there."""

    items: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LambdaV:
    """A `lambda`, with the scope it was made in."""

    node: ast.Lambda
    scope: Any  # the environment dict (captured by reference, as Python does)

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)


@dataclass(frozen=True)
class PartialV:
    """`functools.partial(f, *args, **kwargs)`."""

    func: Any
    args: tuple[Any, ...]
    kwargs: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class FuncV:
    node: ast.FunctionDef
    owner: Any = None  # the `ObjectV` a bound method belongs to


@dataclass(frozen=True)
class ClassV:
    node: ast.ClassDef


@dataclass(frozen=True)
class KernelV:
    name: str


@dataclass(frozen=True)
class ApiV:
    """A library function or module (`torch.cat`, `torch.nn`), by its dotted name."""

    name: str


@dataclass(frozen=True)
class MethodV:
    """`receiver.name` before the call: a tensor method or a layer's method."""

    receiver: Any
    name: str


@dataclass(frozen=True)
class OptionalV:
    """A parameter that may be None (`mask=None`, `Optional[Tensor]`).

    `if mask is not None:` narrows it to `value` in the branch that runs with it and to
    None in the other; any other use sees `value`."""

    value: Any


@dataclass
class ConfigV:
    """A configuration object nobody stated (`config` given to `__init__`): every
    attribute read is a free size of its own (`config.n_embd`), the same at each read."""

    name: str
    attrs: dict[str, Any] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)  # `attribute_map` of its class


@dataclass(frozen=True)
class ShapeOfV:
    """`x.shape` of a tensor whose rank is unknown: unpacking it fixes the rank."""

    tensor: TensorV
    label: str = "x"  # how the tensor is written, to name the sizes read from it


@dataclass(frozen=True)
class SpreadV:
    """`(*x.shape, h)` of a tensor of unknown rank: unpacking it fixes the rank."""

    before: tuple[Any, ...]
    shape: ShapeOfV
    after: tuple[Any, ...]


@dataclass(frozen=True)
class HeadV:
    """`x.shape[:-k]` of a tensor of unknown rank, then the sizes `after` (`x.size()[:-1] +
    (nf,)`): a shape whose last sizes are known, its rank not."""

    tensor: TensorV
    drop: int
    after: tuple[Any, ...] = ()


@dataclass(frozen=True)
class LoaderV:
    """A `DataLoader` (or a dataset): iterating it yields `item`."""

    item: Any


# ---------------------------------------------------------------- sizes


def const(v: int) -> Sym:
    return Sym.const(v)


def literal(s: Size) -> int | None:
    return None if s is None else s.value


def arith(op: str, a: Size, b: Size) -> Size:
    """`a op b` over sizes; unknown when either side is."""
    if a is None or b is None:
        return None
    if op in ("//", "%") and b.value == 0:
        return None
    return lift(a)._op(op, b)


def product(sizes: Shape) -> Size:
    total: Size = const(1)
    for s in sizes:
        total = arith("*", total, s)
    return total


def eq(a: Size, b: Size) -> Any:
    """A condition `a == b`: a bool when both are literal, a Z3 term, or None (unknown)."""
    if a is None or b is None:
        return None
    if a.value is not None and b.value is not None:
        return a.value == b.value
    if a.text == b.text:
        return True
    return a.term == b.term


def le(a: Size, b: Size) -> Any:
    if a is None or b is None:
        return None
    if a.value is not None and b.value is not None:
        return a.value <= b.value
    return a.term <= b.term


def any_(*conds: Any) -> Any:
    if any(c is True for c in conds):
        return True
    if any(c is None for c in conds):
        return None
    terms = [c for c in conds if c is not False]
    if not terms:
        return False
    return terms[0] if len(terms) == 1 else z3.Or(*terms)


def same(a: Size, b: Size) -> bool:
    """Syntactically the same size (for joins: keep what both paths agree on)."""
    if a is None or b is None:
        return False
    if a.value is not None or b.value is not None:
        return a.value == b.value
    return a.text == b.text and z3.eq(a.term, b.term)


def show(s: Size) -> str:
    return "?" if s is None else s.text


def show_shape(shape: Shape | None, tail: bool = False) -> str:
    """`[B, 768]`; with `tail`, the last sizes of a tensor of unknown rank: `[..., 768]`."""
    if shape is None:
        return "[?]"
    if tail:
        return "[" + ", ".join(["...", *(show(s) for s in shape)]) + "]"
    return "[" + ", ".join(show(s) for s in shape) + "]"


def show_tensor(t: TensorV) -> str:
    return show_shape(t.shape) if t.shape is not None else show_shape(t.tail, True)


# ---------------------------------------------------------------- joins


def join(a: Any, b: Any, depth: int = 0) -> Any:
    """What is known of a value that is `a` on one path and `b` on another."""
    if a is b:
        return a
    if isinstance(a, (ObjectV, LayerV)) and type(a) is type(b):
        return _join_modules(a, b, depth) if depth < 6 else UNKNOWN
    if a == b and not isinstance(a, (TensorV, IntV, TupleV)):
        return a
    if isinstance(a, TensorV) and isinstance(b, TensorV):
        dtype = a.dtype if a.dtype == b.dtype else None
        lib = a.lib if a.lib == b.lib else "torch"
        if a.shape is None or b.shape is None or len(a.shape) != len(b.shape):
            origin = a.origin if a.origin == b.origin and a.shape is None else None
            return TensorV(None, dtype, lib, _common_tail(a.last, b.last), origin)
        shape = tuple(x if same(x, y) else None for x, y in zip(a.shape, b.shape, strict=True))
        return TensorV(shape, dtype, lib)
    if isinstance(a, IntV) and isinstance(b, IntV):
        if same(a.sym, b.sym):
            return a if a.loose or not b.loose else b
        return IntV(None)
    if isinstance(a, FloatV) and isinstance(b, FloatV):
        return FloatV()
    if isinstance(a, TupleV) and isinstance(b, TupleV) and len(a.items) == len(b.items):
        return TupleV(tuple(join(x, y) for x, y in zip(a.items, b.items, strict=True)), a.is_list)
    if _tuple_like(a) and _tuple_like(b):
        # tuples of different lengths: the items both begin with
        prefix = tuple(join(x, y, depth) for x, y in zip(a.items, b.items, strict=False))
        return PrefixV(prefix) if prefix else UNKNOWN
    if isinstance(a, BoolV) and isinstance(b, BoolV):
        return a if a.value == b.value else BoolV(None)
    if isinstance(a, OptionalV) and isinstance(b, TensorV):
        # `if x is None: x = f(...)`: a use sees the tensor either path gives
        return OptionalV(join(a.value, b, depth))
    if isinstance(b, OptionalV) and isinstance(a, TensorV):
        return OptionalV(join(a, b.value, depth))
    caches = _join_caches(a, b)
    return UNKNOWN if caches is None else caches


def join_all(values: Sequence[Any]) -> Any:
    """What every one of `values` agrees on (`join` of them all); unknown when none."""
    if not values:
        return UNKNOWN
    out = values[0]
    for v in values[1:]:
        out = join(out, v)
    return out


_CACHE_OPTIONS = 4  # more classes of cache met at one join than this: unknown


def _join_caches(a: Any, b: Any) -> Any:
    """Caches of different classes, or a cache and None (a cache made only when the
    caller gave none): one of those caches, maybe None. None when `a` or `b` is no cache."""
    optional = False
    options: list[CacheV] = []
    for v in (a, b):
        if isinstance(v, OptionalV):
            optional, v = True, v.value
        if isinstance(v, NoneV):
            optional = True
        elif isinstance(v, CacheV):
            options.append(v)
        elif isinstance(v, CachesV):
            options.extend(v.options)
        else:
            return None
    unique = tuple(dict.fromkeys(options))
    if not unique or len(unique) > _CACHE_OPTIONS:
        return None
    cache = unique[0] if len(unique) == 1 else CachesV(unique)
    return OptionalV(cache) if optional else cache


def _tuple_like(v: Any) -> bool:
    return isinstance(v, PrefixV) or isinstance(v, TupleV) and not v.is_list


def agree(a: Any, b: Any) -> bool:
    """Whether two values carry the same facts (a loop has reached its fixpoint)."""
    if isinstance(a, TensorV) and isinstance(b, TensorV):
        if a.dtype != b.dtype or (a.shape is None) != (b.shape is None):
            return False
        if a.shape is None or b.shape is None:
            return len(a.tail) == len(b.tail) and all(
                same(x, y) for x, y in zip(a.tail, b.tail, strict=True)
            )
        return len(a.shape) == len(b.shape) and all(
            (x is None and y is None) or same(x, y) for x, y in zip(a.shape, b.shape, strict=True)
        )
    if isinstance(a, IntV) and isinstance(b, IntV):
        return (a.sym is None and b.sym is None) or same(a.sym, b.sym)
    both = (TupleV, TupleV), (PrefixV, PrefixV)
    if any(isinstance(a, x) and isinstance(b, y) for x, y in both):
        return len(a.items) == len(b.items) and all(
            agree(x, y) for x, y in zip(a.items, b.items, strict=True)
        )
    return a is b or a == b


def _join_modules(a: Any, b: Any, depth: int) -> Any:
    """Two modules of one class (built in two rounds of a loop): what both agree on."""
    if isinstance(a, ObjectV):
        if a.cls is not b.cls:
            return UNKNOWN
        attrs = {k: join(v, b.attrs[k], depth + 1) for k, v in a.attrs.items() if k in b.attrs}
        if a.attrs.keys() != b.attrs.keys():  # an attribute of one path only: maybe a module
            attrs[UNLISTED] = UNKNOWN
        layer = join(a.layer, b.layer, depth + 1) if a.layer is not None else b.layer
        return ObjectV(a.cls, attrs, layer if b.layer is not None else None)
    if (
        a.kind != b.kind
        or len(a.args) != len(b.args)
        or a.kwargs.keys() != b.kwargs.keys()
        or len(a.items) != len(b.items)
        or a.named.keys() != b.named.keys()
        or a.exact != b.exact
    ):
        return UNKNOWN
    return LayerV(
        a.kind,
        [join(x, y, depth + 1) for x, y in zip(a.args, b.args, strict=True)],
        {k: join(v, b.kwargs[k], depth + 1) for k, v in a.kwargs.items()},
        a.text,
        [join(x, y, depth + 1) for x, y in zip(a.items, b.items, strict=True)],
        a.span,
        {k: join(v, b.named[k], depth + 1) for k, v in a.named.items()},
        a.exact,
        a.open or b.open,
        a.dtype if a.dtype == b.dtype else None,
    )


def _common_tail(a: Shape, b: Shape) -> Shape:
    """The trailing sizes of a join of tensors of different ranks: as many axes as both
    have (the rank is at least that), each size where they agree, unknown where not."""
    out = [x if same(x, y) else None for x, y in zip(reversed(a), reversed(b), strict=False)]
    return tuple(reversed(out))
