"""Function bodies: IR statements and expressions as SPIR-V blocks and instructions.

`BodyEmitter` writes one function (`mimir.codegen.backends.spirv.module.Function`)
from IR statements, in structured control flow:

- `If` is a selection construct (`OpSelectionMerge`); when both branches
  return, the merge block holds only `OpUnreachable` and the statements after
  the `If` are dead and not emitted;
- `For` is a loop construct in the shape glslang writes: a header with
  `OpLoopMerge`, a block that tests `var < end` and breaks to the merge, the
  body, and a continue target that adds `step` (`end` and `step` are
  evaluated every iteration, as C and WGSL do);
- `Let` is an SSA value; `VarDecl`, a loop variable and a parameter that is
  assigned are `Function`-storage variables;
- `Select`, `&&` and `||` whose lazy side reads memory become a selection and
  an `OpPhi`, so an out-of-bounds index on the side not taken is never loaded
  (C, MSL and WGSL's `&&`/`||` short-circuit; Vulkan gives no bounds checks).

Operation semantics are the IR's (`mimir.codegen.ir`): integer `+ - *` wrap
(`OpIAdd`...), `/` and `%` truncate (`OpSDiv`/`OpSRem`, `OpUDiv`/`OpUMod`),
`i32 <-> u32` casts reinterpret bits (`OpBitcast`), float comparisons are
ordered except `!=`, which is unordered (true when either side is nan).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from mimir.codegen.backends.spirv import instructions as ins
from mimir.codegen.backends.spirv.module import Function, Module
from mimir.codegen.backends.spirv.spec import GLSL, MemorySemantics, Scope, StorageClass
from mimir.codegen.ir import (
    Assign,
    AtomicAdd,
    Barrier,
    Binary,
    Bitcast,
    Builtin,
    Call,
    Cast,
    Const,
    Expr,
    Fence,
    For,
    GlobalVectorLoad,
    GlobalVectorStore,
    If,
    Let,
    Load,
    Return,
    Select,
    Stmt,
    Store,
    Unary,
    Uniform,
    Var,
    VarDecl,
    walk_expr,
    walk_statements,
)

_SIGNED = {
    "+": ins.op_i_add, "-": ins.op_i_sub, "*": ins.op_i_mul, "/": ins.op_s_div,
    "%": ins.op_s_rem, "&": ins.op_bitwise_and, "|": ins.op_bitwise_or,
    "^": ins.op_bitwise_xor, "<<": ins.op_shift_left_logical,
    ">>": ins.op_shift_right_arithmetic, "<": ins.op_s_less_than,
    "<=": ins.op_s_less_than_equal, ">": ins.op_s_greater_than,
    ">=": ins.op_s_greater_than_equal, "==": ins.op_i_equal, "!=": ins.op_i_not_equal,
}  # fmt: skip
_UNSIGNED = {
    **_SIGNED,
    "/": ins.op_u_div, "%": ins.op_u_mod, ">>": ins.op_shift_right_logical,
    "<": ins.op_u_less_than, "<=": ins.op_u_less_than_equal,
    ">": ins.op_u_greater_than, ">=": ins.op_u_greater_than_equal,
}  # fmt: skip
_FLOAT = {
    "+": ins.op_f_add, "-": ins.op_f_sub, "*": ins.op_f_mul, "/": ins.op_f_div,
    "%": ins.op_f_rem, "<": ins.op_f_ord_less_than, "<=": ins.op_f_ord_less_than_equal,
    ">": ins.op_f_ord_greater_than, ">=": ins.op_f_ord_greater_than_equal,
    "==": ins.op_f_ord_equal, "!=": ins.op_f_unord_not_equal,
}  # fmt: skip
_BOOL = {
    "==": ins.op_logical_equal, "!=": ins.op_logical_not_equal, "^": ins.op_logical_not_equal,
    "&&": ins.op_logical_and, "||": ins.op_logical_or,
    "&": ins.op_logical_and, "|": ins.op_logical_or,
}  # fmt: skip
BINARY: dict[str, dict[str, Callable[..., list[int]]]] = {
    "i32": _SIGNED, "u32": _UNSIGNED, "f32": _FLOAT, "f16": _FLOAT, "bool": _BOOL,
}  # fmt: skip

# IR intrinsic -> GLSL.std.450 instruction, by operand type.
_FLOAT_ONLY = {"exp": GLSL.Exp, "log": GLSL.Log, "sqrt": GLSL.Sqrt, "tanh": GLSL.Tanh}
_FLOAT_ONLY |= {"sin": GLSL.Sin, "cos": GLSL.Cos}
_FLOAT_ONLY |= {"floor": GLSL.Floor, "pow": GLSL.Pow, "fma": GLSL.Fma}
EXT: dict[tuple[str, str], GLSL] = {
    (fn, t): g for fn, g in _FLOAT_ONLY.items() for t in ("f32", "f16")
}
for _t, _abs, _min, _max in (
    ("f32", GLSL.FAbs, GLSL.FMin, GLSL.FMax),
    ("f16", GLSL.FAbs, GLSL.FMin, GLSL.FMax),
    ("i32", GLSL.SAbs, GLSL.SMin, GLSL.SMax),
    ("u32", None, GLSL.UMin, GLSL.UMax),
):
    EXT[("min", _t)], EXT[("max", _t)] = _min, _max
    if _abs is not None:
        EXT[("abs", _t)] = _abs
INTRINSICS = frozenset(fn for fn, _ in EXT) | {"isnan", "isinf"}

_FLOATS = ("f32", "f16")


class Resources:
    """What a body reads besides its locals: arrays, uniforms, builtins, helpers."""

    def __init__(self) -> None:
        # array name -> (variable id, storage class, element type, indexes before the element)
        self.arrays: dict[str, tuple[int, StorageClass, str, tuple[int, ...]]] = {}
        # buffers declared as runtime arrays of vectors: name -> lanes (`ir.vector_only_buffers`)
        self.vector_arrays: dict[str, int] = {}
        self.uniforms: dict[str, int] = {}  # field -> value id (loaded in the entry block)
        self.builtins: dict[str, int] = {}  # `local_x` ... -> value id
        self.helpers: dict[str, Function] = {}
        self.nonfinite: dict[int, int] = {}  # f32 bits -> private variable holding them
        # buffers one workgroup stores to and another loads from across a `Fence` (a
        # one-launch reduction's partials): declared as u32 bits, every access atomic
        self.handed_off: set[str] = set()
        self.glsl = 0


def reads_memory(e: Expr) -> bool:
    return any(isinstance(s, Load) for s in walk_expr(e))


class BodyEmitter:
    """Emits IR statements into one `Function`."""

    def __init__(
        self,
        module: Module,
        function: Function,
        resources: Resources,
        scalar: Callable[[str], int],
        name: Callable[[str], str],
    ) -> None:
        self.m = module
        self.fn = function
        self.res = resources
        self.scalar = scalar
        self.name = name
        self.scopes: list[dict[str, tuple[str, int]]] = [{}]

    # ------------------------------------------------------------ names and values

    def bind_params(self, params: Sequence[Var], body: Sequence[Stmt]) -> None:
        """Parameters are SSA values; one that the body assigns is copied to a variable."""
        assigned = {s.var.name for s in walk_statements(list(body)) if isinstance(s, Assign)}
        for p, pid in zip(params, self.fn.param_ids, strict=True):
            self.m.name(pid, self.name(p.name))
            if p.name in assigned:
                ptr = self.fn.variable(self.scalar(p.type))
                self.fn.emit(ins.op_store(ptr, pid))
                self.scopes[-1][p.name] = ("ptr", ptr)
            else:
                self.scopes[-1][p.name] = ("ssa", pid)

    def _lookup(self, name: str) -> tuple[str, int]:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        raise KeyError(f"IR variable `{name}` used outside its scope")

    def _new(self, make: Callable[[int], list[int]]) -> int:
        result = self.m.new_id()
        self.fn.emit(make(result))
        return result

    def const(self, c: Const) -> int:
        if c.type == "bool":
            return self.m.const_bool(bool(c.value))
        if c.type == "i32":
            return self.m.const_i32(int(c.value))
        if c.type == "u32":
            return self.m.const_u32(int(c.value))
        value = float(c.value)
        if not math.isfinite(value):
            return self._nonfinite(value, c.type)
        if c.type == "f16":
            return self.m.const_f16(value)
        return self.m.const_f32(value)

    def _nonfinite(self, value: float, t: str) -> int:
        """inf or nan, loaded from a private variable holding its bits: naga rejects a
        non-finite constant, and folds a constant bitcast back into one."""
        bits = 0x7FC00000 if math.isnan(value) else 0x7F800000 | (0x80000000 if value < 0 else 0)
        if bits not in self.res.nonfinite:
            u32 = self.scalar("u32")
            var = self.m.variable(StorageClass.Private, u32, self.m.const_u32(bits))
            label = "nan" if math.isnan(value) else ("neg_inf" if value < 0 else "inf")
            self.m.name(var, self.name(f"${label}_bits"))
            self.res.nonfinite[bits] = var
        u32, f32 = self.scalar("u32"), self.scalar("f32")
        loaded = self._new(lambda r: ins.op_load(u32, r, self.res.nonfinite[bits]))
        x = self._new(lambda r: ins.op_bitcast(f32, r, loaded))
        if t == "f16":
            return self._new(lambda r: ins.op_f_convert(self.scalar("f16"), r, x))
        return x

    def pointer(self, array: str, index: Expr) -> tuple[int, str]:
        var, storage, elem, prefix = self.res.arrays[array]
        i = self.value(index)
        ptr_type = self.m.pointer(storage, self.scalar(elem))
        return self._new(lambda r: ins.op_access_chain(ptr_type, r, var, [*prefix, i])), elem

    # ------------------------------------------------------------ expressions

    def value(self, e: Expr) -> int:
        t = self.scalar(e.type)
        if isinstance(e, Const):
            return self.const(e)
        if isinstance(e, Var):
            kind, ident = self._lookup(e.name)
            return ident if kind == "ssa" else self._new(lambda r: ins.op_load(t, r, ident))
        if isinstance(e, Load):
            ptr, elem = self.pointer(e.array, e.index)
            if e.array in self.res.handed_off:
                return self._atomic_load(ptr, elem, e.type)
            return self._new(lambda r: ins.op_load(t, r, ptr))
        if isinstance(e, Uniform):
            return self.res.uniforms[e.field]
        if isinstance(e, Builtin):
            return self.res.builtins[e.name]
        if isinstance(e, Binary):
            return self._binary(e, t)
        if isinstance(e, Unary):
            return self._unary(e, t)
        if isinstance(e, Call):
            return self._call(e, t)
        if isinstance(e, Select):
            if reads_memory(e.if_true) or reads_memory(e.if_false):
                return self._lazy(e.cond, e.if_true, e.if_false, t)
            c, a, b = self.value(e.cond), self.value(e.if_true), self.value(e.if_false)
            return self._new(lambda r: ins.op_select(t, r, c, a, b))
        if isinstance(e, Cast):
            return self._cast(e.a, e.type)
        if isinstance(e, Bitcast):
            a = self.value(e.a)
            return self._new(lambda r: ins.op_bitcast(t, r, a))
        raise TypeError(f"cannot emit {e!r}")

    def _binary(self, e: Binary, t: int) -> int:
        if e.op in ("&&", "||") and reads_memory(e.b):
            other = Const(e.op == "||", "bool")
            return self._lazy(
                e.a, e.b if e.op == "&&" else other, other if e.op == "&&" else e.b, t
            )
        make = BINARY[e.a.type][e.op]
        a, b = self.value(e.a), self.value(e.b)
        return self._new(lambda r: make(t, r, a, b))

    def _unary(self, e: Unary, t: int) -> int:
        a = self.value(e.a)
        if e.op == "!":
            return self._new(lambda r: ins.op_logical_not(t, r, a))
        if e.op == "~":
            return self._new(lambda r: ins.op_not(t, r, a))
        negate = ins.op_f_negate if e.type in _FLOATS else ins.op_s_negate
        return self._new(lambda r: negate(t, r, a))

    def _call(self, e: Call, t: int) -> int:
        args = [self.value(a) for a in e.args]
        helper = self.res.helpers.get(e.fn)
        if helper is not None:
            return self._new(lambda r: ins.op_function_call(t, r, helper.id, args))
        if e.fn == "isnan":
            return self._new(lambda r: ins.op_is_nan(t, r, args[0]))
        if e.fn == "isinf":
            return self._new(lambda r: ins.op_is_inf(t, r, args[0]))
        if e.fn == "abs" and e.args[0].type == "u32":
            return args[0]
        number = EXT[(e.fn, e.args[0].type)]
        return self._new(lambda r: ins.op_ext_inst(t, r, self.res.glsl, number, args))

    def _cast(self, a: Expr, dst: str) -> int:
        src, t = a.type, self.scalar(dst)
        if src == "bool":
            one, zero = (self.const(Const(v, dst)) for v in (1, 0))
            c = self.value(a)
            return self._new(lambda r: ins.op_select(t, r, c, one, zero))
        x = self.value(a)
        if src == dst:
            return x
        if dst == "bool":
            return self._binary_ids("!=", src, t, x, self.const(Const(0, src)))
        if src in _FLOATS and dst in _FLOATS:
            make = ins.op_f_convert
        elif src in _FLOATS:
            make = ins.op_convert_f_to_s if dst == "i32" else ins.op_convert_f_to_u
        elif dst in _FLOATS:
            make = ins.op_convert_s_to_f if src == "i32" else ins.op_convert_u_to_f
        else:
            make = ins.op_bitcast  # i32 <-> u32: the same bits
        return self._new(lambda r: make(t, r, x))

    def _binary_ids(self, op: str, operand_type: str, t: int, a: int, b: int) -> int:
        make = BINARY[operand_type][op]
        return self._new(lambda r: make(self.m.bool_(), r, a, b))

    def _lazy(self, cond: Expr, if_true: Expr, if_false: Expr, t: int) -> int:
        """`cond ? if_true : if_false`, evaluating only the side taken (selection + OpPhi)."""
        c = self.value(cond)
        then_label, else_label, merge = self.m.new_id(), self.m.new_id(), self.m.new_id()
        self.fn.emit(ins.op_selection_merge(merge))
        self.fn.terminate(ins.op_branch_conditional(c, then_label, else_label))
        incoming = []
        for label, side in ((then_label, if_true), (else_label, if_false)):
            self.fn.begin(label)
            incoming.append((self.value(side), self.fn.current))
            self.fn.terminate(ins.op_branch(merge))
        self.fn.begin(merge)
        return self._new(lambda r: ins.op_phi(t, r, incoming))

    # ------------------------------------------------------------ statements

    def block(self, body: Sequence[Stmt], bindings: Mapping[str, tuple[str, int]] = {}) -> None:
        """Emit `body` in a new scope; stop at the first statement no path reaches."""
        self.scopes.append(dict(bindings))
        try:
            for s in body:
                if self.fn.terminated:
                    break
                self.stmt(s)
        finally:
            self.scopes.pop()

    def stmt(self, s: Stmt) -> None:
        if isinstance(s, Let):
            value = self.value(s.value)
            if isinstance(s.value, (Const, Var, Uniform, Builtin)):
                self.scopes[-1][s.var.name] = ("ssa", value)
            else:
                self.m.name(value, self.name(s.var.name))
                self.scopes[-1][s.var.name] = ("ssa", value)
        elif isinstance(s, VarDecl):
            init = self.value(s.init)
            ptr = self.fn.variable(self.scalar(s.var.type))
            self.m.name(ptr, self.name(s.var.name))
            self.fn.emit(ins.op_store(ptr, init))
            self.scopes[-1][s.var.name] = ("ptr", ptr)
        elif isinstance(s, Assign):
            kind, ptr = self._lookup(s.var.name)
            if kind != "ptr":
                raise TypeError(f"assignment to the immutable IR value `{s.var.name}`")
            value = self.value(s.value)
            self.fn.emit(ins.op_store(ptr, value))
        elif isinstance(s, Store):
            value = self.value(s.value)
            ptr, elem = self.pointer(s.array, s.index)
            if s.array in self.res.handed_off:
                self._atomic_store(ptr, elem, value, s.value.type)
            else:
                self.fn.emit(ins.op_store(ptr, value))
        elif isinstance(s, AtomicAdd):
            self._atomic_add(s)
        elif isinstance(s, GlobalVectorLoad):
            self._vector_load(s)
        elif isinstance(s, GlobalVectorStore):
            self._vector_store(s)
        elif isinstance(s, If):
            self._if(s)
        elif isinstance(s, For):
            self._for(s)
        elif isinstance(s, Barrier):
            workgroup = self.m.const_u32(Scope.Workgroup)
            semantics = MemorySemantics.AcquireRelease | MemorySemantics.WorkgroupMemory
            if self.res.handed_off:
                # a handoff's barrier passes thread 0's acquire of the other workgroups'
                # partials on to the workgroup's other threads: it orders buffer memory too
                semantics |= MemorySemantics.UniformMemory
            self.fn.emit(ins.op_control_barrier(workgroup, workgroup, self.m.const_u32(semantics)))
        elif isinstance(s, Fence):
            device = self.m.const_u32(Scope.Device)
            semantics = MemorySemantics.AcquireRelease | MemorySemantics.UniformMemory
            self.fn.emit(ins.op_memory_barrier(device, self.m.const_u32(semantics)))
        elif isinstance(s, Return):
            if s.value is None:
                self.fn.terminate(ins.op_return())
            else:
                self.fn.terminate(ins.op_return_value(self.value(s.value)))
        else:
            raise TypeError(f"cannot emit {s!r}")

    def _vector_pointer(self, array: str, index: Expr) -> tuple[int, int]:
        """A pointer to the vector at element `index` (a multiple of the lanes), and the
        vector's type."""
        var, storage, elem, prefix = self.res.arrays[array]
        lanes = self.res.vector_arrays[array]
        vec = self.m.vector(self.scalar(elem), lanes)
        i = self.value(Binary(">>", index, Const(lanes.bit_length() - 1, "u32"), "u32"))
        ptr_type = self.m.pointer(storage, vec)
        ptr = self._new(lambda r: ins.op_access_chain(ptr_type, r, var, [*prefix, i]))
        return ptr, vec

    def _vector_load(self, s: GlobalVectorLoad) -> None:
        """One load of a 4-vector, then its lanes; a buffer declared with scalar elements
        is read lane by lane."""
        if s.array not in self.res.vector_arrays:
            for k, v in enumerate(s.vars):
                index = s.index if k == 0 else Binary("+", s.index, Const(k, "u32"), "u32")
                self.stmt(Let(v, Load(s.array, index, v.type)))
            return
        ptr, vec = self._vector_pointer(s.array, s.index)
        loaded = self._new(lambda r: ins.op_load(vec, r, ptr))
        for k, v in enumerate(s.vars):
            t = self.scalar(v.type)
            lane = self._new(lambda r, k=k, t=t: ins.op_composite_extract(t, r, loaded, k))
            self.m.name(lane, self.name(v.name))
            self.scopes[-1][v.name] = ("ssa", lane)

    def _vector_store(self, s: GlobalVectorStore) -> None:
        if s.array not in self.res.vector_arrays:
            for k, v in enumerate(s.values):
                index = s.index if k == 0 else Binary("+", s.index, Const(k, "u32"), "u32")
                self.stmt(Store(s.array, index, v))
            return
        elem = self.res.arrays[s.array][2]
        parts = [self._value_as(v, elem) for v in s.values]
        ptr, vec = self._vector_pointer(s.array, s.index)
        value = self._new(lambda r: ins.op_composite_construct(vec, r, parts))
        self.fn.emit(ins.op_store(ptr, value))

    def _value_as(self, e: Expr, elem: str) -> int:
        """`e` as the buffer's element type (an i32 value stored into a u32 buffer keeps
        its bits, as a scalar store does)."""
        value = self.value(e)
        if e.type == elem:
            return value
        return self._new(lambda r: ins.op_bitcast(self.scalar(elem), r, value))

    def _atomic_load(self, ptr: int, elem: str, type_: str) -> int:
        """A relaxed device-scope load of a handed-off element (`elem`, the buffer's
        declared type: u32 bits for a float), as `type_`: atomics are coherent across
        workgroups without the `Coherent` decoration (which naga, how wgpu reads SPIR-V,
        does not take)."""
        device, relaxed = self.m.const_u32(Scope.Device), self.m.const_u32(0)
        t = self.scalar(elem)
        loaded = self._new(lambda r: ins.op_atomic_load(t, r, ptr, device, relaxed))
        if type_ == elem:
            return loaded
        return self._new(lambda r: ins.op_bitcast(self.scalar(type_), r, loaded))

    def _atomic_store(self, ptr: int, elem: str, value: int, type_: str) -> None:
        device, relaxed = self.m.const_u32(Scope.Device), self.m.const_u32(0)
        if type_ != elem:
            value = self._new(lambda r, v=value: ins.op_bitcast(self.scalar(elem), r, v))
        self.fn.emit(ins.op_atomic_store(ptr, device, relaxed, value))

    def _atomic_add(self, s: AtomicAdd) -> None:
        """OpAtomicIAdd for integers; for f32 (SPIR-V has no core float atomics) a
        compare-exchange loop on the element's bits: add to the value last seen, and retry
        while another invocation changed the element in between."""
        value = self.value(s.value)
        ptr, elem = self.pointer(s.array, s.index)
        device = self.m.const_u32(Scope.Device)
        relaxed = self.m.const_u32(0)
        if s.value.type != "f32":
            t = self.scalar(elem)
            old = self._new(lambda r: ins.op_atomic_i_add(t, r, ptr, device, relaxed, value))
            if s.old is not None:
                self.m.name(old, self.name(s.old.name))
                self.scopes[-1][s.old.name] = ("ssa", old)
            return
        u32, f32 = self.scalar("u32"), self.scalar("f32")
        # The first guess is 0 (an output starts zeroed): a wrong guess only costs a retry.
        seen = self.fn.variable(u32)
        self.fn.emit(ins.op_store(seen, self.m.const_u32(0)))
        header, body, cont, merge = (self.m.new_id() for _ in range(4))
        self.fn.terminate(ins.op_branch(header))
        self.fn.begin(header)
        self.fn.emit(ins.op_loop_merge(merge, cont))
        self.fn.terminate(ins.op_branch(body))
        self.fn.begin(body)
        old = self._new(lambda r: ins.op_load(u32, r, seen))
        old_f = self._new(lambda r: ins.op_bitcast(f32, r, old))
        sum_f = self._new(lambda r: ins.op_f_add(f32, r, old_f, value))
        new = self._new(lambda r: ins.op_bitcast(u32, r, sum_f))
        found = self._new(
            lambda r: ins.op_atomic_compare_exchange(
                u32, r, ptr, device, relaxed, relaxed, new, old
            )
        )
        self.fn.emit(ins.op_store(seen, found))
        done = self._new(lambda r: ins.op_i_equal(self.m.bool_(), r, found, old))
        self.fn.terminate(ins.op_branch_conditional(done, merge, cont))
        self.fn.begin(cont)
        self.fn.terminate(ins.op_branch(header))
        self.fn.begin(merge)

    def _if(self, s: If) -> None:
        c = self.value(s.cond)
        then_label, merge = self.m.new_id(), self.m.new_id()
        else_label = self.m.new_id() if s.orelse else merge
        self.fn.emit(ins.op_selection_merge(merge))
        self.fn.terminate(ins.op_branch_conditional(c, then_label, else_label))
        falls_through = not s.orelse
        for label, body in ((then_label, s.then), (else_label, s.orelse)):
            if label == merge:
                continue
            self.fn.begin(label)
            self.block(body)
            if not self.fn.terminated:
                self.fn.terminate(ins.op_branch(merge))
                falls_through = True
        self.fn.begin(merge)
        if not falls_through:
            self.fn.terminate(ins.op_unreachable())

    def _for(self, s: For) -> None:
        u32 = self.scalar("u32")
        start = self.value(s.start)
        var = self.fn.variable(u32)
        self.m.name(var, self.name(s.var.name))
        self.fn.emit(ins.op_store(var, start))
        header, test, body, cont, merge = (self.m.new_id() for _ in range(5))
        self.fn.terminate(ins.op_branch(header))
        self.fn.begin(header)
        self.fn.emit(ins.op_loop_merge(merge, cont))
        self.fn.terminate(ins.op_branch(test))
        self.fn.begin(test)
        current = self._new(lambda r: ins.op_load(u32, r, var))
        end = self.value(s.end)
        keep_going = self._new(lambda r: ins.op_u_less_than(self.m.bool_(), r, current, end))
        self.fn.terminate(ins.op_branch_conditional(keep_going, body, merge))
        self.fn.begin(body)
        self.block(s.body, {s.var.name: ("ptr", var)})
        reaches_continue = not self.fn.terminated
        if reaches_continue:
            self.fn.terminate(ins.op_branch(cont))
        self.fn.begin(cont)
        if reaches_continue:
            now = self._new(lambda r: ins.op_load(u32, r, var))
            step = self.value(s.step)
            self.fn.emit(ins.op_store(var, self._new(lambda r: ins.op_i_add(u32, r, now, step))))
        self.fn.terminate(ins.op_branch(header))
        self.fn.begin(merge)
