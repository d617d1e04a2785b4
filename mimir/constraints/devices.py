"""Device placement in host code, as Datalog rules run by Z3's fixedpoint engine.

Host code (module level and every function that is not `@gpu`) is read into
ground facts over value versions (each assignment makes a new version, so
`x = zeros(3); x = x.to("gpu")` is two values):

    made(v, d, s)     v is created on device d at site s (zeros/ones/full/tensor/rand,
                      `.to(...)`, the result of a `@gpu` call)
    flows(v, u)       v may hold u's tensor (assignment, an op's operand, a branch join,
                      a host function's parameter or return value)
    operand(o, u)     u is an operand of the host op o
    kernel_arg(a)     a is passed to a `@gpu` function

and the rules derive

    on(v, d, s)       :- made(v, d, s)
    on(v, d, s)       :- flows(v, u), on(u, d, s)
    cpu_arg(a, s)     :- kernel_arg(a), on(a, cpu, s)
    mixed(o, s, t)    :- operand(o, u), operand(o, w), on(u, cpu, s), on(w, gpu, t)

Each `cpu_arg` becomes GPU060 at the call, naming the argument and the line where
the tensor was created; each `mixed` becomes GPU061 at the op (once per root cause: an
op fed by an already reported one is not reported again).

A plain host function imported from another module of the project is read at each
call, in its own module, its parameters bound to the call's arguments: a cpu tensor
passed through it to a kernel is GPU060 at that call (with a label at the kernel call
inside the helper), one that meets a gpu tensor inside it is GPU061 there, and what it
creates and returns keeps its device in the caller. What the helper's module creates
and misuses by itself is reported in that module, not again at every caller.

PyTorch placement feeds the same facts: `torch.zeros(..., device="cuda")` and other
creators (cpu without `device=`), `.cuda()`, `.cpu()`, `.to("cuda")`, a device held in a
name (`dev = "cuda"`, `dev = torch.device("cuda")`), `model.cuda()` on a module (calling
it is an op over its parameters and its inputs), and `torch.*` functions as ops. Values the
analysis cannot follow (other libraries, unknown calls) carry no facts, so they
are never reported: no false alarms from what Mimir cannot see.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from mimir.diagnostics.diagnostic import Diagnostic, Label, Span
from mimir.parse.module import ModuleInfo, dotted_name, import_statements
from mimir.solve.z3lib import z3

CPU, GPU = 0, 1
_CREATORS = {"zeros", "ones", "full", "tensor", "rand"}
_BITS = 20


@dataclass
class _Site:
    span: Span
    text: str


@dataclass
class _Call:
    """A call of a `@gpu` function: which value is passed as which parameter."""

    kernel: str
    args: list[tuple[str, int, ast.expr]]  # parameter name, value id, argument node
    through: _Through | None = None  # made inside a helper imported from another module


@dataclass(frozen=True)
class _Through:
    """A kernel call or an op read inside an imported helper, for the call that reached it."""

    outer: ast.AST  # the call of the helper in the module being checked
    helper: str
    inner: Span  # the kernel call or the op inside the helper's module


@dataclass
class _Facts:
    made: list[tuple[int, int, int]] = field(default_factory=list)
    flows: list[tuple[int, int]] = field(default_factory=list)
    operand: list[tuple[int, int]] = field(default_factory=list)
    kernel_calls: list[_Call] = field(default_factory=list)
    ops: dict[int, ast.AST] = field(default_factory=dict)
    foreign_ops: dict[int, _Through] = field(default_factory=dict)


class _Reader:
    """Reads host code into facts; one instance per module."""

    def __init__(self, info: ModuleInfo, parent: _Reader | None = None) -> None:
        self.info = info
        self.src = info.source
        self.root: _Reader = self if parent is None else parent.root
        self.facts = self.root.facts if parent is not None else _Facts()
        self.sites: list[_Site] = self.root.sites if parent is not None else []
        self.n_values = 0
        # inside an imported helper: the call that reached it, and the helpers being read
        self.through: tuple[ast.AST, str] | None = None
        self.stack: tuple[int, ...] = ()
        self.kernels = {k.node.name: k.node for k in info.kernels}
        # `@gpu` functions imported from other modules of the project (`mimir.project`)
        self.kernels.update({name: k.node for name, k in info.imported_kernels.items()})
        self.functions: dict[str, ast.FunctionDef] = {}
        self.params: dict[tuple[str, int], int] = {}  # (function, position) -> value
        self.param_names: dict[tuple[str, str], int] = {}
        self.returns: dict[str, int] = {}
        self.aliases = _torch_aliases(info.tree)
        self.device_names: dict[str, int] = {}  # names bound to a literal device

    def value(self) -> int:
        self.root.n_values += 1
        return self.root.n_values

    def site(self, node: ast.AST) -> int:
        self.sites.append(_Site(self.src.span(node), self.src.text(node)))
        return len(self.sites) - 1

    # -- scopes

    def read(self) -> _Facts:
        tree = self.info.tree
        for stmt in tree.body:
            if isinstance(stmt, ast.FunctionDef) and stmt.name not in self.kernels:
                self.functions[stmt.name] = stmt
                for k, arg in enumerate(stmt.args.args):
                    v = self.value()
                    self.params[(stmt.name, k)] = v
                    self.param_names[(stmt.name, arg.arg)] = v
                self.returns[stmt.name] = self.value()
        self.module_devices()
        for name, fn in self.functions.items():
            env = {arg.arg: self.params[(name, k)] for k, arg in enumerate(fn.args.args)}
            self.block(fn.body, env, name)
        self.block([s for s in tree.body if not isinstance(s, ast.FunctionDef)], {}, None)
        return self.facts

    def module_devices(self) -> None:
        """Module-level devices (`dev = torch.device("cuda")`), read before any function."""
        for stmt in self.info.tree.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                device = self.device_of(stmt.value)
                if device is not None and isinstance(stmt.targets[0], ast.Name):
                    self.device_names[stmt.targets[0].id] = device

    def block(self, body: list[ast.stmt], env: dict[str, int], function: str | None) -> None:
        for stmt in body:
            self.statement(stmt, env, function)

    def statement(self, stmt: ast.stmt, env: dict[str, int], function: str | None) -> None:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            value = self.expr(stmt.value, env) if stmt.value is not None else None
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            device = self.device_of(stmt.value)
            for t in targets:
                if isinstance(t, ast.Name):
                    if device is not None:
                        self.device_names[t.id] = device
                    else:
                        self.device_names.pop(t.id, None)
            for t in targets:
                self.bind(t, value, env)
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            current = env.get(stmt.target.id)
            operand = self.expr(stmt.value, env)
            env[stmt.target.id] = self.op(stmt, [current, operand])
        elif isinstance(stmt, ast.Return) and function is not None and stmt.value is not None:
            value = self.expr(stmt.value, env)
            if value is not None:
                self.facts.flows.append((self.returns[function], value))
        elif isinstance(stmt, ast.Expr):
            self.expr(stmt.value, env)
        elif isinstance(stmt, (ast.If, ast.For, ast.While, ast.With, ast.Try)):
            self.branches(stmt, env, function)

    def branches(self, stmt: ast.stmt, env: dict[str, int], function: str | None) -> None:
        """Each path starts from `env`; afterwards every name joins its values on all paths."""
        if isinstance(stmt, ast.If):
            self.expr(stmt.test, env)
            paths = [stmt.body, stmt.orelse]
        elif isinstance(stmt, (ast.For, ast.While)):
            paths = [[], stmt.body + stmt.orelse]  # the body may run zero times
        elif isinstance(stmt, ast.With):
            paths = [stmt.body]
        else:  # try: the body, or any handler after part of it
            paths = [stmt.body + stmt.orelse, *([[]] + [h.body for h in stmt.handlers])]
        outcomes = []
        for body in paths:
            branch = dict(env)
            self.block(body, branch, function)
            outcomes.append(branch)
        for name in {n for o in outcomes for n in o}:
            versions = {o[name] for o in outcomes if name in o}
            if len(versions) == 1:
                env[name] = versions.pop()
                continue
            joined = self.value()
            for v in versions:
                self.facts.flows.append((joined, v))
            env[name] = joined
        if isinstance(stmt, ast.Try):
            self.block(stmt.finalbody, env, function)

    def bind(self, target: ast.expr, value: int | None, env: dict[str, int]) -> None:
        if isinstance(target, ast.Name):
            if value is None:
                env.pop(target.id, None)
            else:
                fresh = self.value()
                self.facts.flows.append((fresh, value))
                env[target.id] = fresh
        elif isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                self.bind(t, None, env)

    # -- expressions

    def op(self, node: ast.AST, operands: list[int | None]) -> int:
        result = self.value()
        self.facts.ops[result] = node
        if self.through is not None:
            outer, helper = self.through
            self.facts.foreign_ops[result] = _Through(outer, helper, self.src.span(node))
        for u in operands:
            if u is not None:
                self.facts.flows.append((result, u))
                self.facts.operand.append((result, u))
        return result

    def expr(self, node: ast.expr | None, env: dict[str, int]) -> int | None:
        if node is None:
            return None
        if isinstance(node, ast.Name):
            return env.get(node.id)
        if isinstance(node, ast.BinOp):
            return self.op(node, [self.expr(node.left, env), self.expr(node.right, env)])
        if isinstance(node, ast.Compare) and len(node.comparators) == 1:
            return self.op(node, [self.expr(node.left, env), self.expr(node.comparators[0], env)])
        if isinstance(node, ast.UnaryOp):
            return self.op(node, [self.expr(node.operand, env)])
        if isinstance(node, ast.Subscript):
            return self.op(node, [self.expr(node.value, env)])
        if isinstance(node, ast.Attribute):
            base = self.expr(node.value, env)
            return self.op(node, [base]) if base is not None and node.attr == "T" else None
        if isinstance(node, ast.Call):
            return self.call(node, env)
        if isinstance(node, (ast.List, ast.Tuple)):  # `torch.cat([a, b])`: the list holds both
            items = [v for v in (self.expr(e, env) for e in node.elts) if v is not None]
            if not items:
                return None
            joined = self.value()
            self.facts.flows.extend((joined, v) for v in items)
            return joined
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expr(child, env)
        return None

    def call(self, node: ast.Call, env: dict[str, int]) -> int | None:
        func = node.func
        args = [self.expr(a, env) for a in node.args]
        kwargs = {kw.arg: self.expr(kw.value, env) for kw in node.keywords}
        imported = self.imported_function(func)
        if imported is not None:
            return self.inline(node, imported, args, kwargs)
        canonical = self.info.resolve(func)
        torch_name = _qualname(func, self.aliases)
        if torch_name is not None and canonical is None:
            return self.torch_call(node, torch_name, args, kwargs)
        if canonical in _CREATORS:
            device = _device_literal(_keyword(node, "device"), default=CPU)
            if device is None:
                return None
            v = self.value()
            self.facts.made.append((v, device, self.site(node)))
            return v
        if canonical in ("where", "maximum", "minimum"):
            return self.op(node, [*args, *kwargs.values()])
        if isinstance(func, ast.Attribute) and canonical is None:
            receiver = self.expr(func.value, env)
            if func.attr in ("cuda", "cpu") and not node.args:
                v = self.value()
                self.facts.made.append((v, GPU if func.attr == "cuda" else CPU, self.site(node)))
                return v
            if func.attr == "to" and receiver is None:
                arg = node.args[0] if node.args else _keyword(node, "device")
                device = self.device_of(arg) if arg is not None else None
                if device is None or not _is_torch_device(arg, self):
                    return None
                v = self.value()  # a module moved to a device: its parameters are there
                self.facts.made.append((v, device, self.site(node)))
                return v
            if func.attr == "to":
                device = self.device_of(node.args[0] if node.args else _keyword(node, "device"))
                if device is None or receiver is None:
                    return None
                v = self.value()
                self.facts.made.append((v, device, self.site(node)))
                return v
            if receiver is not None:
                return self.op(node, [receiver, *args])
            return None
        if isinstance(func, ast.Name) and func.id in self.kernels:
            return self.kernel_call(node, func.id, args, kwargs)
        if isinstance(func, ast.Name) and env.get(func.id) is not None:
            # calling a value (a module placed with `.cuda()`): an op over it and its inputs
            return self.op(node, [env[func.id], *args])
        if isinstance(func, ast.Name) and func.id in self.functions:
            for k, v in enumerate(args):
                if v is not None and (func.id, k) in self.params:
                    self.facts.flows.append((self.params[(func.id, k)], v))
            for name, v in kwargs.items():
                if v is not None and (func.id, name) in self.param_names:
                    self.facts.flows.append((self.param_names[(func.id, name)], v))
            return self.returns[func.id]
        return None

    def imported_function(self, func: ast.expr) -> tuple[ModuleInfo, ast.FunctionDef] | None:
        """A plain host function of another module (or, inside one, of its own module)."""
        name = dotted_name(func)
        if name is None or name in self.kernels:
            return None
        if self.through is not None and isinstance(func, ast.Name):
            fn = next(
                (
                    f
                    for f in self.info.tree.body
                    if isinstance(f, ast.FunctionDef) and f.name == name
                ),
                None,
            )
            if fn is not None:
                return self.info, fn
        found = self.info.imported_functions.get(name)
        if found is None or any(k.node is found[1] for k in found[0].kernels):
            return None
        return found

    def inline(
        self,
        node: ast.Call,
        imported: tuple[ModuleInfo, ast.FunctionDef],
        args: list[int | None],
        kwargs: dict[str | None, int | None],
    ) -> int | None:
        """Read an imported helper's body once per call, its parameters bound to the arguments.

        Its kernel calls and ops are reported at this call (the one in the module being
        checked); what it creates and returns flows back to the caller.
        """
        info, fn = imported
        if id(fn) in self.stack or len(self.stack) >= 8:
            return None  # recursion, or a chain too deep to follow: no facts, no report
        child = _Reader(info, parent=self)
        child.through = self.through or (node, dotted_name(node.func) or fn.name)
        child.stack = (*self.stack, id(fn))
        child.module_devices()
        env: dict[str, int] = {}
        for k, arg in enumerate(fn.args.args):
            v = child.value()
            env[arg.arg] = v
            passed = args[k] if k < len(args) else kwargs.get(arg.arg)
            if passed is not None:
                self.facts.flows.append((v, passed))
        result = self.value()
        child.returns = {fn.name: result}
        child.block(fn.body, env, fn.name)
        return result

    def device_of(self, node: ast.expr | None) -> int | None:
        """The device a literal, a device name or `torch.device(...)` denotes, or None."""
        if node is None:
            return None
        if isinstance(node, ast.Name) and node.id in self.device_names:
            return self.device_names[node.id]
        if (
            isinstance(node, ast.Call)
            and _qualname(node.func, self.aliases) == "torch.device"
            and len(node.args) == 1
        ):
            return self.device_of(node.args[0])
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            name = node.value.split(":")[0]
            return {"cpu": CPU, "gpu": GPU, "cuda": GPU}.get(name)
        return None

    def torch_call(
        self, node: ast.Call, name: str, args: list[int | None], kwargs: dict
    ) -> int | None:
        short = name.rsplit(".", 1)[-1]
        if name.count(".") == 1 and short in _TORCH_CREATORS:
            spec = _keyword(node, "device")
            device = CPU if spec is None else self.device_of(spec)
            if device is None:
                return None
            v = self.value()
            self.facts.made.append((v, device, self.site(node)))
            return v
        if name.startswith("torch.") and not name.startswith(("torch.nn.", "torch.utils.")):
            operands = [a for a in [*args, *kwargs.values()] if a is not None]
            return self.op(node, operands) if operands else None
        if name.startswith("torch.nn.functional."):
            operands = [a for a in [*args, *kwargs.values()] if a is not None]
            return self.op(node, operands) if operands else None
        return None

    def kernel_call(
        self,
        node: ast.Call,
        kernel: str,
        args: list[int | None],
        kwargs: dict[str | None, int | None],
    ) -> int:
        names = [a.arg for a in self.kernels[kernel].args.args]
        passed = [
            (names[k], v, a)
            for k, (v, a) in enumerate(zip(args, node.args, strict=True))
            if v is not None and k < len(names)
        ]
        passed += [
            (kw.arg, kwargs[kw.arg], kw.value)
            for kw in node.keywords
            if kw.arg in names and kwargs.get(kw.arg) is not None
        ]
        through = None
        if self.through is not None:
            through = _Through(self.through[0], self.through[1], self.src.span(node))
        self.facts.kernel_calls.append(_Call(kernel, passed, through))
        result = self.value()
        self.facts.made.append((result, GPU, self.site(node)))
        return result


_TORCH_CREATORS = {
    "zeros",
    "ones",
    "empty",
    "randn",
    "rand",
    "randint",
    "full",
    "arange",
    "tensor",
    "eye",
    "linspace",
}


def _torch_aliases(tree: ast.Module) -> dict[str, str]:
    """Local names of `torch` and its submodules (`import torch.nn.functional as F`)."""
    out: dict[str, str] = {}
    for node in import_statements(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "torch":
                    out[a.asname or "torch"] = a.name if a.asname else "torch"
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch":
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _qualname(node: ast.expr, aliases: dict[str, str]) -> str | None:
    if isinstance(node, ast.Name):
        return aliases.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _qualname(node.value, aliases)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _is_torch_device(node: ast.expr, reader: _Reader) -> bool:
    """`.to(x)` on something unknown moves a module only for a torch device (`cuda`, a name)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and node.value.split(":")[0] == "cuda"
    return bool(reader.aliases)


def _keyword(node: ast.Call, name: str) -> ast.expr | None:
    for kw in node.keywords:
        if kw.arg == name:
            return kw.value
    return None


def _device_literal(node: ast.expr | None, default: int | None = None) -> int | None:
    if node is None:
        return default
    if isinstance(node, ast.Constant) and node.value in ("cpu", "gpu"):
        return CPU if node.value == "cpu" else GPU
    return None


# ---------------------------------------------------------------- solving


def check_devices(info: ModuleInfo) -> list[Diagnostic]:
    reader = _Reader(info)
    facts = reader.read()
    if not facts.made or (not facts.kernel_calls and not facts.operand):
        return []  # no tensor is ever placed on a device, or none reaches a kernel or an op
    fp = z3.Fixedpoint()
    fp.set(engine="datalog")
    # Wide enough for every value and site id (a huge host file has more than 2**20).
    bits = max(_BITS, max(reader.n_values, len(reader.sites)).bit_length() + 1)
    sort = z3.BitVecSort(bits)

    def rel(name: str, arity: int) -> z3.FuncDeclRef:
        r = z3.Function(name, *([sort] * arity), z3.BoolSort())
        fp.register_relation(r)
        return r

    def c(i: int) -> z3.BitVecRef:
        return z3.BitVecVal(i, bits)

    made, flows, operand = rel("made", 3), rel("flows", 2), rel("operand", 2)
    kernel_arg, on = rel("kernel_arg", 1), rel("on", 3)
    cpu_arg, mixed = rel("cpu_arg", 2), rel("mixed", 3)
    v, u, w, d, s, t = z3.Consts("v u w d s t", sort)
    fp.declare_var(v, u, w, d, s, t)
    fp.rule(on(v, d, s), [made(v, d, s)])
    fp.rule(on(v, d, s), [flows(v, u), on(u, d, s)])
    fp.rule(cpu_arg(v, s), [kernel_arg(v), on(v, c(CPU), s)])
    fp.rule(mixed(v, s, t), [operand(v, u), operand(v, w), on(u, c(CPU), s), on(w, c(GPU), t)])
    for a, b, e in facts.made:
        fp.fact(made(c(a), c(b), c(e)))
    for a, b in facts.flows:
        fp.fact(flows(c(a), c(b)))
    for a, b in facts.operand:
        fp.fact(operand(c(a), c(b)))
    args = {v_id for call in facts.kernel_calls for _, v_id, _ in call.args}
    for a in args:
        fp.fact(kernel_arg(c(a)))

    out: list[Diagnostic] = []
    cpu_sites = _answers(fp, cpu_arg(v, s), 2)
    by_value: dict[int, list[int]] = {}
    for value, site in cpu_sites:
        by_value.setdefault(value, []).append(site)
    here = reader.src.path
    reported: set[tuple[int, str, str, int]] = set()
    for call in facts.kernel_calls:
        for param, value, node in call.args:
            sites = sorted(by_value.get(value, []), key=lambda i: reader.sites[i].span)
            through = call.through
            if through is not None:
                # inside an imported helper: only the tensors this module passes in are its
                # own to report (the helper's module reports what it creates itself)
                sites = [i for i in sites if reader.sites[i].span.path == here]
            if not sites:
                continue
            first = reader.sites[sites[0]]
            labels = tuple(Label(reader.sites[i].span, "created on cpu here") for i in sites)
            message = (
                f"argument `{param}` of `{call.kernel}` is on cpu: the tensor was created at "
                f"{_where(first.span, here)} (`{first.text}`)"
            )
            span = reader.src.span(node)
            if through is not None:
                key = (id(through.outer), param, call.kernel, sites[0])
                if key in reported:
                    continue  # the helper calls the kernel twice with it: one report
                reported.add(key)
                span = reader.src.span(through.outer)
                message += f", passed through `{through.helper}`"
                labels = (
                    *labels,
                    Label(through.inner, f"`{through.helper}` calls `{call.kernel}` here"),
                )
            out.append(Diagnostic("GPU060", message, span, labels=labels))
    seen: set[int] = set()
    sources: dict[int, set[int]] = {}
    for a, b in facts.flows:
        sources.setdefault(a, set()).add(b)

    def order(r: tuple[int, ...]) -> tuple:
        through = facts.foreign_ops.get(r[0])
        node = facts.ops[r[0]] if through is None else through.outer
        return (reader.src.span(node), through is None, r)

    answers = sorted(_answers(fp, mixed(v, s, t), 3), key=order)
    for op_value, s_cpu, s_gpu in answers:
        if op_value in seen or _fed_by(op_value, seen, sources):
            seen.add(op_value)  # one diagnostic per root cause: not the ops downstream of it
            continue
        seen.add(op_value)
        cpu_site, gpu_site = reader.sites[s_cpu], reader.sites[s_gpu]
        labels = (
            Label(cpu_site.span, "on cpu from here"),
            Label(gpu_site.span, "on gpu from here"),
        )
        through = facts.foreign_ops.get(op_value)
        if through is None:
            node = facts.ops[op_value]
            text, span = f"`{reader.src.text(node)}`", reader.src.span(node)
        elif here in (cpu_site.span.path, gpu_site.span.path):
            text, span = f"`{through.helper}`", reader.src.span(through.outer)
            labels = (*labels, Label(through.inner, "the tensors meet here"))
        else:
            continue  # both made inside the helper's module: reported there
        out.append(
            Diagnostic(
                "GPU061",
                f"{text} mixes a cpu tensor (created at {_where(cpu_site.span, here)}) and a "
                f"gpu tensor ({_where(gpu_site.span, here)})",
                span,
                labels=labels,
            )
        )
    return out


def _where(span: Span, here: str) -> str:
    """`line 5`, or `helpers.py line 5` for a line of another module."""
    if span.path == here:
        return f"line {span.line}"
    return f"{span.path.replace(chr(92), '/').rsplit('/', 1)[-1]} line {span.line}"


def _fed_by(value: int, reported: set[int], sources: dict[int, set[int]]) -> bool:
    """Whether `value` is computed (through flows) from an op already reported."""
    todo, seen = list(sources.get(value, ())), set()
    while todo:
        u = todo.pop()
        if u in reported:
            return True
        if u not in seen:
            seen.add(u)
            todo.extend(sources.get(u, ()))
    return False


def _answers(fp: z3.Fixedpoint, query: z3.BoolRef, arity: int) -> list[tuple[int, ...]]:
    """Every tuple satisfying `query` (its free variables in declaration order)."""
    if fp.query(query) != z3.sat:
        return []
    answer = fp.get_answer()
    rows = answer.children() if z3.is_or(answer) else [answer]
    out = []
    for row in rows:
        eqs = row.children() if z3.is_and(row) else [row]
        values: dict[int, int] = {}
        for eq in eqs:
            if z3.is_eq(eq):
                var, val = eq.children()
                if z3.is_var(var) and z3.is_bv_value(val):
                    values[z3.get_var_index(var)] = val.as_long()
        if len(values) == arity:
            out.append(tuple(values[i] for i in range(arity)))
    return out
