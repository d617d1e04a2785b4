"""Every function and method checked on its own, with what its parameters can be.

The host interpreter mixes this in. `check_every_function` visits each module-level
`def` and each method of each class, whether or not a call reaches it, and runs it with
its parameters bound by `param_value`:

- an annotation is a contract: `Float[Tensor, "b t 64"]`, `Tensor[float32, N, 784]`
  (checked for every size it admits), `torch.Tensor` (any shape), `int` (a free size);
- a tensor parameter nobody annotated has an unknown rank and free sizes, refined by
  what the code demands of it (`mimir.host.symbolic`);
- `x=None` or `Optional[...]` may be None: `if x is not None` checks both branches, and
  where their join loses a tensor's shape the call leaving every such parameter None
  (or, when that always raises, giving the first of them) is run again on its own;
- a class is built once, by its `__init__`, from the configuration the project states:
  a dataclass's defaults (a parameter annotated with it, or named `config` when one
  dataclass in the module has every field it reads), a literal default; an argument
  nobody stated is a free size, and an `assert` in `__init__` is assumed. Errors found
  under a stated configuration carry a label naming it.
"""

from __future__ import annotations

import ast
from functools import cache
from typing import Any

from mimir.diagnostics.diagnostic import Label, Span
from mimir.host.assume import Path
from mimir.host.configs import config_table, imported_config
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
    LayerV,
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
        self.overrides: dict[int, dict[str, Any]] = {}  # function -> parameters given to a probe
        self.last_params: dict[str, Any] = {}  # what the last standalone run bound
        self.captured: list[tuple[Any, ast.AST]] | None = None  # a probe's findings
        self.none_tests = 0  # `x is None` tests of a value that may be None, so far
        self.optional_losses = 0  # branches on such tests whose join lost a tensor's shape
        self.last_raised = False  # every path of the last standalone run raised
        self._imported_config: Any = False  # not looked for yet
        self.recording: tuple[int, list[ObjectV]] | None = None  # class -> what builders made
        self._also: dict[int, list[tuple[ObjectV, tuple[Label, ...], Path]]] = {}

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
        self._check_methods(cls, obj, stated, built)
        for other, labels, path in self._also.get(id(cls), []):
            self._check_methods(cls, other, labels, path)

    def _check_methods(
        self, cls: ast.ClassDef, obj: Any, stated: tuple[Label, ...], built: Path
    ) -> None:
        for fn in cls.body:
            if not isinstance(fn, ast.FunctionDef) or fn.name == "__init__":
                continue
            kinds = {decorator_name(d) for d in fn.decorator_list}
            if "staticmethod" in kinds:
                self.check_def(fn, None, ())
            elif "classmethod" in kinds:
                self.check_def(fn, ClassV(cls), ())
            elif isinstance(obj, ObjectV):
                # each method from the instance `__init__` built: what one method assigns
                # (`set_input_embeddings` replacing `self.wte`) is no state of another
                built_attrs = dict(obj.attrs)
                # what another method computes into an attribute (`build_pyramid` setting
                # `self.corr_pyramid`) may be there first: not the placeholder __init__ set
                later = _computed_elsewhere(cls, fn.name)
                obj.attrs = {k: UNKNOWN if k in later else v for k, v in built_attrs.items()}
                self.check_def(fn, obj, stated, built)
                obj.attrs = dict(built_attrs)
                if fn.name == "forward":
                    self.probe_ranks(cls, fn, obj, stated, built)
                    obj.attrs = dict(built_attrs)

    def check_def(
        self, fn: ast.FunctionDef, owner: Any, stated: tuple[Label, ...], start: Path | None = None
    ) -> None:
        if self.steps > self.budget:
            return
        attrs = dict(owner.attrs) if isinstance(owner, ObjectV) else None
        losses = self.optional_losses
        self.path = start if start is not None else Path()
        self.stated = stated
        try:
            self.call_function(FuncV(fn, owner), None, None, {}, standalone=True)
            optional = [p for p, v in self.last_params.items() if isinstance(v, OptionalV)]
            if optional and self.optional_losses > losses and self.steps <= self.budget:
                # a branch on `x is None` lost a shape where its paths met: the call that
                # leaves every optional parameter None is a path of its own, run alone so
                # what it knows past that branch is checked too
                params = self.last_params
                # when that call always raises (`input_ids` or `inputs_embeds` is needed),
                # the call that gives the first of them instead
                for given in (optional[:0], optional[:1]):
                    if given and (len(optional) < 2 or not self.last_raised):
                        break
                    if attrs is not None:
                        owner.attrs = dict(attrs)
                    self.path = start if start is not None else Path()
                    self.overrides[id(fn)] = {p: NoneV() for p in optional if p not in given}
                    try:
                        self.call_function(FuncV(fn, owner), None, None, {}, standalone=True)
                    finally:
                        self.overrides.pop(id(fn), None)
                self.last_params = params  # what `probe_ranks` reads is the first run's
        finally:
            self.path = Path()
            self.stated = ()

    def probe_ranks(
        self,
        cls: ast.ClassDef,
        fn: ast.FunctionDef,
        obj: ObjectV,
        stated: tuple[Label, ...],
        built: Path,
    ) -> None:
        """`forward` of a module whose layers are all of one spatial kind (`Conv2d`,
        `BatchNorm2d`, `MaxPool2d`, ...) takes a batch of that kind (4-d for 2-d layers)
        or one item (3-d): its input has one of those ranks, when that agrees with what
        the code already demanded of it (`x.mean((2, 3))` demands 4 dims or more). The
        method is run again for each such rank; what it finds is reported only when it
        fails for every one of them (then the batched form's findings), since a rank
        under which it runs clean may be the one the module is meant for. When no layer
        takes the input, a first call that pools two or more trailing axes of the fewest
        the code admits (`x.mean((2, 3))`, squeeze-and-excite's and ECA's global pooling)
        says the input has exactly that many."""
        params = [p.arg for p in [*fn.args.posonlyargs, *fn.args.args][1:]]
        value = next(
            (
                self.last_params.get(p)
                for p in params
                if isinstance(self.last_params.get(p), TensorV)
                and self.last_params[p].shape is None
            ),
            None,
        )
        if value is None:
            return
        name = next(p for p in params if self.last_params.get(p) is value)
        if not _enters_spatially(fn, name, obj):
            return  # reshaped or normalised before any spatial layer: its layers say nothing
        ranks = _input_ranks(obj)
        least = max(
            len(value.tail), _rank_read(fn, name), *(len(t) for t in self._rank_evidence(value))
        )
        ranks = [r for r in ranks if r >= least and (value.max_rank or r) >= r]
        pooled = not ranks and least > 0 and least == _pooled_rank(fn, name)
        if pooled and (value.max_rank or least) >= least:
            ranks = [least]  # `x.mean((2, 3))` first: the pooled axes are its last ones
        if not ranks or self.steps > self.budget:
            return
        found: list[tuple[int, list[tuple[Any, ast.AST]]]] = []
        outer = self.captured
        for rank in sorted(ranks, reverse=True):  # the batched form first: it mostly runs clean
            shape = tuple(self.free_size(f"{name}.shape[{k}]") for k in range(rank))
            self.overrides[id(fn)] = {name: TensorV(shape, value.dtype, value.lib)}
            self.captured = []
            try:
                self.check_def(fn, obj, stated, built)
            finally:
                self.overrides.pop(id(fn), None)
                run, self.captured = self.captured, outer
            if not run:
                return  # it runs clean for some rank its layers take
            found.append((rank, run))
        rank, run = found[0]  # the batched form's findings
        kinds = ", ".join(f"{r}-d" for r, _ in sorted(found))
        why = (
            f"the layers of `{cls.name}` take a {kinds} input, and `{fn.name}` fails for "
            f"every such input (shown: {rank}-d)"
        )
        if pooled:
            why = (
                f"`{fn.name}` first pools the last axes of a {rank}-d `{name}` (the fewest "
                f"axes it admits), and fails for every such input"
            )
        for err, node in run:
            err.why = err.why or why
            self.report(err, node)

    def _rank_evidence(self, t: TensorV) -> list[list[Any]]:
        """The first and last axes the code read of a tensor of unknown rank."""
        if t.origin is None:
            return []
        return [self._heads.get(t.origin, []), self._tails.get(t.origin, [])]

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
            built_by = [] if call is not None else self._builders_of(cls)
            if built_by:
                (obj, label, path), *more = built_by
                self._stating.append(label)
                self._also[key] = [(o, (lab,), p) for o, lab, p in more]
                self.path = path
            elif call is None:
                # built from the signature's defaults: an assert of __init__ that they fail
                # says the defaults are no configuration (`ws: int = 1` then `assert ws != 1`)
                self.defaults_only += 1
                try:
                    obj = self.instantiate(ClassV(cls), None, {}, standalone=True)
                finally:
                    self.defaults_only -= 1
                built = self.path  # what __init__ asserted, kept past the flipped builds
                self._also[key] = self._flipped(cls, obj)
                self.path = built
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

    def _flipped(self, cls: ast.ClassDef, obj: Any) -> list[tuple[Any, tuple[Label, ...], Path]]:
        """Instances built with a flag of `__init__` that defaults to False set True, when
        only that setting builds a layer another method reads (T5's `compute_bias` reads
        `self.relative_attention_bias`, built `if self.has_relative_attention_bias`) and
        the module passes that flag a value other than False somewhere (`T5Stack` builds
        its first layer with `has_relative_attention_bias=bool(i == 0)`): a configuration
        the project builds, under which that method is checked too."""
        if not isinstance(obj, ObjectV):
            return []
        out: list[tuple[Any, tuple[Label, ...], Path]] = []
        init = next(
            (f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None
        )
        if init is None:
            return []
        for flag, param in _flags_building(cls, init, obj):
            if len(out) >= 2 or self.steps > self.budget or not _passed(self.info.tree, flag):
                break
            self.overrides[id(init)] = {flag: BoolV(True)}
            self.path = Path()
            try:
                other = self.instantiate(ClassV(cls), None, {}, standalone=True)
            finally:
                self.overrides.pop(id(init), None)
            span = self.src.span(param)
            said = f"the sizes checked are those of `{cls.name}(..., {flag}=True)`"
            out.append((other, (Label(span, said),), self.path))
        self.path = Path()
        return out

    def _builders_of(self, cls: ast.ClassDef) -> list[tuple[ObjectV, Label, Path]]:
        """Instances of `cls` that the module's builder functions make when called with
        their defaults (`resnet50()` calls `_resnet(Bottleneck, [3, 4, 6, 3], ...)`, which
        builds `ResNet(block, layers)`): each such call is a configuration the project
        states. Only for a class whose `__init__` has parameters without a default; at
        most `BUILDERS` of them, in source order."""
        init = next(
            (f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None
        )
        if init is None:
            return []
        a = init.args
        positional = [*a.posonlyargs, *a.args][1:]
        if len(positional) == len(a.defaults) and all(d is not None for d in a.kw_defaults):
            return []
        out: list[tuple[ObjectV, Label, Path]] = []
        kinds: set[frozenset[str]] = set()
        start = self.steps
        for fn in _builders(self.local_info.tree, cls.name):
            if len(out) >= BUILDERS or self.steps > self.budget:
                break
            if out and self.steps - start > BUILDER_STEPS:
                break  # a network as large as Swin is checked under one configuration
            passed = _classes_passed(fn, self.local_info.tree)
            if passed in kinds:
                continue  # `resnet34()` passes the block `resnet18()` did: one of them
            kinds.add(passed)
            made: list[ObjectV] = []
            outer = self.recording
            self.recording = (id(cls), made)
            self.path = Path()
            try:
                self.call_function(FuncV(fn, None), None, [], {})
            finally:
                self.recording = outer
            if made:
                span = self.local_src.span(fn)
                span = Span(span.path, span.line, span.column, span.line, span.column + 3)
                text = f"{fn.name}()"
                label = Label(span, f"the sizes checked are those of `{text}`")
                out.append((made[0], label, self.path))
        self.path = Path()
        return out

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
        if value is UNKNOWN and in_init and p.arg in CONFIG_NAMES and annotation is not None:
            return self.imported_config_instance(p.arg)  # `config: T5Config`, imported
        if value is UNKNOWN and not in_init and _tensor_in_tuple(annotation):
            value = TensorV(None)  # transformers' `hidden_states: Optional[tuple[FloatTensor]]`
        if value is UNKNOWN and annotation is None:
            if in_init:
                if p.arg in CONFIG_NAMES:
                    return self.imported_config_instance(p.arg)
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

    def imported_config_instance(self, name: str) -> ConfigV:
        """`config` built from the defaults of the one configuration class the module
        imports from its project (`mimir.host.configs`); else a configuration nobody
        stated, every attribute a free size."""
        if self._imported_config is False:
            self._imported_config = imported_config(self.src.path, self.info.tree)
            if self._imported_config is None:  # else a table of named configurations
                self._imported_config = config_table(self.src.path, self.info.tree, CONFIG_NAMES)
        found = self._imported_config
        if found is None:
            return ConfigV(name)
        attrs = {k: constant(v) for k, v in found.defaults.items()}
        attrs = {k: v for k, v in attrs.items() if v is not UNKNOWN}
        if found.span is not None:
            said = (
                f"the sizes checked are those of the configuration {found.name}"
                if found.name.startswith("'")
                else f"the sizes checked are `{found.name}()`'s defaults"
            )
            self._stating.append(Label(found.span, said))
        return ConfigV(name, attrs, dict(found.aliases))

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


# The spatial dims of the layers that say what rank their input has: 1-d layers take
# (N, C, L) or (C, L), 2-d ones (N, C, H, W) or (C, H, W), 3-d ones one more.
_SPATIAL = {
    **{
        f"{k}{d}d": d
        for d in (1, 2, 3)
        for k in (
            "Conv",
            "ConvTranspose",
            "MaxPool",
            "AvgPool",
            "AdaptiveAvgPool",
            "AdaptiveMaxPool",
            "InstanceNorm",
            "BatchNorm",
            "LazyConv",
            "ReflectionPad",
            "ReplicationPad",
            "ZeroPad",
        )
    },
}
_BATCHED = {"BatchNorm2d": 4, "BatchNorm3d": 5}  # these refuse an unbatched input


# Configurations a class is checked under, from its builder functions: a second one (a
# ResNet of bottlenecks after one of basic blocks) only where the first cost few steps.
BUILDERS = 2
BUILDER_STEPS = 600


def _classes_passed(fn: ast.FunctionDef, tree: ast.Module) -> frozenset[str]:
    """The module's classes `fn` passes as arguments (`Bottleneck` to `_resnet`): two
    builders that pass the same ones build the same kind of model."""
    local = {c.name for c in tree.body if isinstance(c, ast.ClassDef)}
    return frozenset(
        a.id
        for n in ast.walk(fn)
        if isinstance(n, ast.Call)
        for a in [*n.args, *(k.value for k in n.keywords)]
        if isinstance(a, ast.Name) and a.id in local
    )


def _builders(tree: ast.Module, name: str) -> list[ast.FunctionDef]:
    """The module's functions that every parameter of has a default (or `**kwargs`)
    and that call `name(...)`, directly or through another function of the module."""
    defs = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
    calls = getattr(tree, "_mimir_called", None)  # made once per tree, asked once per class
    if calls is None:
        calls = {
            f.name: {
                n.func.id
                for n in ast.walk(f)
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
            }
            for f in defs.values()
        }
        tree._mimir_called = calls  # type: ignore[attr-defined]
    builds = {f for f, called in calls.items() if name in called}
    for _ in range(3):  # through helpers, a few levels
        builds |= {f for f, called in calls.items() if called & builds}
    out = []
    for f in defs.values():
        a = f.args
        if (
            f.name not in builds
            or f.decorator_list
            and any((decorator_name(d) or "").endswith("gpu") for d in f.decorator_list)
        ):
            continue
        positional = [*a.posonlyargs, *a.args]
        if len(positional) == len(a.defaults) and all(d is not None for d in a.kw_defaults):
            out.append(f)
    return out


@cache
def _computed_by(cls: ast.ClassDef) -> dict[str, frozenset[str]]:
    """Each method's attributes it computes: `self.X = ...` or `self.X.append(...)` of a
    value that is not one of its own parameters (a setter's `self.wte = value` is not)."""
    out: dict[str, frozenset[str]] = {}
    for fn in cls.body:
        if not isinstance(fn, ast.FunctionDef) or fn.name == "__init__" or not fn.args.args:
            continue
        me = fn.args.args[0].arg
        params = {a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}
        names: set[str] = set()
        for n in ast.walk(fn):
            targets: list[ast.expr] = []
            value: ast.expr | None = None
            if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                value = n.value
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
                if n.func.attr in ("append", "extend", "insert") and n.args:
                    targets, value = [n.func.value], n.args[0]
            if isinstance(value, ast.Name) and value.id in params:
                continue
            moved = _moved(value, me)  # `self.wte = self.wte.to(device)`: the same module
            for t in targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name):
                    if t.value.id == me and t.attr != moved:
                        names.add(t.attr)
        out[fn.name] = frozenset(names)
    return out


_MOVES = frozenset(("to", "cpu", "cuda", "half", "float", "double", "bfloat16", "train", "eval"))


def _moved(value: ast.expr | None, me: str) -> str | None:
    """`X` of `self.X.to(...)` and the like, which give the module itself back (moved to
    a device or a dtype: its sizes are those it was built with)."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
        inner = value.func.value
        if (
            value.func.attr in _MOVES
            and isinstance(inner, ast.Attribute)
            and isinstance(inner.value, ast.Name)
            and inner.value.id == me
        ):
            return inner.attr
    return None


def _computed_elsewhere(cls: ast.ClassDef, name: str) -> frozenset[str]:
    """The attributes methods of `cls` other than `name` compute (see `_computed_by`)."""
    found: set[str] = set()
    for method, names in _computed_by(cls).items():
        if method != name:
            found |= names
    return frozenset(found)


def _tensor_in_tuple(annotation: ast.expr | None) -> bool:
    """`tuple[torch.FloatTensor]`: one tensor in a tuple, which the code uses as a tensor
    (transformers annotates `hidden_states` so; a tuple would fail its first layer)."""
    if not (isinstance(annotation, ast.Subscript) and isinstance(annotation.slice, ast.expr)):
        return False
    head = annotation.value
    name = head.id if isinstance(head, ast.Name) else getattr(head, "attr", "")
    inner = annotation.slice
    leaf = inner.attr if isinstance(inner, ast.Attribute) else getattr(inner, "id", "")
    return name in ("tuple", "Tuple") and leaf.endswith("Tensor")


def _enters_spatially(fn: ast.FunctionDef, name: str, obj: ObjectV) -> bool:
    """Whether the first call `fn` makes of its input `name` is a spatial layer of the
    module (`self.conv1(x)`, a `Sequential` that starts with one) or a reduction over
    named axes (`x.mean((2, 3))`): only then do the layers say what rank it has."""
    calls = [
        n
        for n in ast.walk(fn)
        if isinstance(n, ast.Call)
        and (
            any(isinstance(a, ast.Name) and a.id == name for a in n.args)
            or isinstance(n.func, ast.Attribute)
            and isinstance(n.func.value, ast.Name)
            and n.func.value.id == name
        )
    ]
    if not calls:
        return False
    first = min(calls, key=lambda n: (n.lineno, n.col_offset))
    func = first.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        if func.value.id == name:
            return func.attr in _BY_DIM and bool(first.args or first.keywords)
        if func.value.id == "self":
            layer = obj.attrs.get(func.attr)
            while isinstance(layer, LayerV) and layer.kind == "Sequential" and layer.items:
                layer = layer.items[0]
            return isinstance(layer, LayerV) and layer.kind in _SPATIAL
    return False


def _pooled_rank(fn: ast.FunctionDef, name: str) -> int:
    """`r` when the first call `fn` makes of parameter `name` reduces over the axes
    `(k, ..., r - 1)`, two or more literal positive axes ending at axis `r - 1`
    (`x.mean((2, 3))`: 4); 0 otherwise."""
    calls = [
        n
        for n in ast.walk(fn)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and isinstance(n.func.value, ast.Name)
        and n.func.value.id == name
    ]
    if not calls:
        return 0
    first = min(calls, key=lambda n: (n.lineno, n.col_offset))
    if first.func.attr not in _POOLS:  # type: ignore[attr-defined]
        return 0
    dims = (
        first.args[0]
        if first.args
        else next((k.value for k in first.keywords if k.arg == "dim"), None)
    )
    if not isinstance(dims, (ast.Tuple, ast.List)) or len(dims.elts) < 2:
        return 0
    axes = [e.value for e in dims.elts if isinstance(e, ast.Constant) and type(e.value) is int]
    if len(axes) != len(dims.elts) or sorted(axes) != list(range(min(axes), max(axes) + 1)):
        return 0
    return max(axes) + 1 if min(axes) >= 1 else 0


_POOLS = {"mean", "sum", "amax", "amin", "max", "std", "var", "norm", "logsumexp"}


def _input_ranks(obj: ObjectV) -> list[int]:
    """The ranks the input of a module built as `obj` can have, by its layers: empty when
    it holds no spatial layer or layers of two spatial kinds."""
    dims: set[int] = set()
    batched = False
    seen: set[int] = set()

    def visit(v: Any, depth: int) -> None:
        nonlocal batched
        if id(v) in seen or depth > 4:
            return
        seen.add(id(v))
        if isinstance(v, LayerV):
            if v.kind in _SPATIAL:
                dims.add(_SPATIAL[v.kind])
                batched = batched or v.kind in _BATCHED
            for item in [*v.items, *v.named.values()]:
                visit(item, depth + 1)
        elif isinstance(v, ObjectV):
            for item in v.attrs.values():
                visit(item, depth + 1)
            if v.layer is not None:
                visit(v.layer, depth + 1)

    for v in obj.attrs.values():
        visit(v, 0)
    if len(dims) != 1:
        return []
    d = dims.pop()
    return [d + 2] if batched else [d + 1, d + 2]


_BY_DIM = {
    "mean", "sum", "amax", "amin", "max", "min", "std", "var", "norm", "softmax",
    "log_softmax", "size", "transpose", "flatten", "unsqueeze", "squeeze", "chunk",
    "split", "narrow", "cumsum", "prod", "argmax", "argmin", "logsumexp", "flip",
}  # fmt: skip


_STATES_RANK = 1 << 20  # more than any rank: the code says the rank itself, nothing is probed


def _states_rank(n: ast.AST, name: str) -> bool:
    """`b, c, h, w = x.shape`, `x.size()` unpacked, `x.permute(...)`, `x.dim()`, `x.ndim`:
    the code states (or dispatches on) the rank of `name` itself, whatever its layers are
    (a video's 5 dims folded into a `Conv2d`'s 4)."""

    def of_name(e: ast.expr) -> bool:
        if isinstance(e, ast.Attribute) and e.attr in ("shape", "ndim"):
            return isinstance(e.value, ast.Name) and e.value.id == name
        return (
            isinstance(e, ast.Call)
            and isinstance(e.func, ast.Attribute)
            and e.func.attr in ("size", "dim", "ndimension", "permute")
            and isinstance(e.func.value, ast.Name)
            and e.func.value.id == name
            and (e.func.attr != "size" or not e.args)
        )

    if isinstance(n, ast.Assign) and isinstance(n.targets[0], (ast.Tuple, ast.List)):
        return of_name(n.value)
    if isinstance(n, ast.Attribute) and n.attr == "ndim":
        return of_name(n)
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
        return n.func.attr in ("dim", "ndimension", "permute") and of_name(n)
    return False


def _rank_read(fn: ast.FunctionDef, name: str) -> int:
    """The least rank `fn`'s own reads of parameter `name` demand: `x.mean((2, 3))`,
    `x.shape[3]`, `x.size(-4)` name an axis that must exist; `_STATES_RANK` when the code
    states the rank itself (`_states_rank`)."""
    least = 0

    def axes(node: ast.expr | None) -> list[int]:
        items = node.elts if isinstance(node, (ast.Tuple, ast.List)) else [node]
        out = []
        for item in items:
            if isinstance(item, ast.UnaryOp) and isinstance(item.op, ast.USub):
                item = item.operand
                if isinstance(item, ast.Constant) and type(item.value) is int:
                    out.append(item.value)
            elif isinstance(item, ast.Constant) and type(item.value) is int:
                out.append(item.value + 1)
        return out

    for n in ast.walk(fn):
        if _states_rank(n, name):
            return _STATES_RANK
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and isinstance(n.func.value, ast.Name)
            and n.func.value.id == name
            and n.func.attr in _BY_DIM
        ):
            read = [*(axes(a) for a in n.args[:1])]
            read += [axes(k.value) for k in n.keywords if k.arg == "dim"]
            least = max([least, *(x for r in read for x in r)])
        elif (
            isinstance(n, ast.Subscript)
            and isinstance(n.value, ast.Attribute)
            and n.value.attr == "shape"
            and isinstance(n.value.value, ast.Name)
            and n.value.value.id == name
        ):
            least = max([least, *axes(n.slice)])
    return least


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


def _flags_building(
    cls: ast.ClassDef, init: ast.FunctionDef, obj: ObjectV
) -> list[tuple[str, ast.arg]]:
    """`__init__`'s parameters that default to False and guard (`if flag:` or `if
    self.flag:` of `self.flag = flag`) the building of an attribute the instance built
    from the defaults lacks and another method reads."""
    a = init.args
    positional = [*a.posonlyargs, *a.args][1:]
    pairs = [
        *zip(positional[len(positional) - len(a.defaults) :], a.defaults, strict=True),
        *((p, d) for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None),
    ]
    flags = {p.arg: p for p, d in pairs if isinstance(d, ast.Constant) and d.value is False}
    if not flags:
        return []
    kept = {  # `self.has_bias = has_bias`
        s.targets[0].attr: s.value.id
        for s in ast.walk(init)
        if isinstance(s, ast.Assign)
        and len(s.targets) == 1
        and isinstance(s.targets[0], ast.Attribute)
        and isinstance(s.targets[0].value, ast.Name)
        and s.targets[0].value.id == "self"
        and isinstance(s.value, ast.Name)
        and s.value.id in flags
    }
    read = {
        n.attr
        for fn in cls.body
        if isinstance(fn, ast.FunctionDef) and fn.name != "__init__"
        for n in ast.walk(fn)
        if isinstance(n, ast.Attribute)
        and isinstance(n.ctx, ast.Load)
        and isinstance(n.value, ast.Name)
        and n.value.id == "self"
    }
    out: list[tuple[str, ast.arg]] = []
    for s in ast.walk(init):
        if not isinstance(s, ast.If):
            continue
        t = s.test
        flag = (
            t.id
            if isinstance(t, ast.Name) and t.id in flags
            else kept.get(t.attr)
            if isinstance(t, ast.Attribute)
            and isinstance(t.value, ast.Name)
            and t.value.id == "self"
            else None
        )
        if flag is None or any(f == flag for f, _ in out):
            continue
        built = {
            n.attr
            for st in s.body
            for n in ast.walk(st)
            if isinstance(n, ast.Attribute)
            and isinstance(n.ctx, ast.Store)
            and isinstance(n.value, ast.Name)
            and n.value.id == "self"
        }
        if any(b in read and b not in obj.attrs for b in built):
            out.append((flag, flags[flag]))
    return out


def _passed(tree: ast.Module, flag: str) -> bool:
    """Whether a call of the module passes `flag=` a value other than the literal False."""
    return any(
        kw.arg == flag and not (isinstance(kw.value, ast.Constant) and kw.value.value is False)
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        for kw in n.keywords
    )
