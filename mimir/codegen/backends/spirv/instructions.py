"""SPIR-V instructions: one small function per opcode, each returning the instruction's words.

Grouped by the spec's sections (3.52.x), as naga's `spv/instructions.rs`.
Arguments are ids (ints) and literals in the operand order of the spec; the
first word of every instruction is `word_count << 16 | opcode`. Nothing here
allocates ids or orders a module; that is `mimir.codegen.backends.spirv.module`'s job.
"""

from __future__ import annotations

from collections.abc import Sequence

from mimir.codegen.backends.spirv.spec import (
    GLSL,
    AddressingModel,
    Capability,
    Decoration,
    ExecutionMode,
    ExecutionModel,
    MemoryModel,
    Op,
    StorageClass,
)

Words = list[int]


def _inst(op: Op, *operands: int) -> Words:
    return [(len(operands) + 1) << 16 | op, *operands]


def string_words(text: str) -> Words:
    """A literal string: UTF-8, NUL-terminated, zero-padded to whole little-endian words."""
    data = text.encode() + b"\0"
    data += bytes(-len(data) % 4)
    return [int.from_bytes(data[i : i + 4], "little") for i in range(0, len(data), 4)]


# ---------------------------------------------------------------- 3.52.2 debug


def op_name(target: int, name: str) -> Words:
    return _inst(Op.Name, target, *string_words(name))


def op_member_name(struct: int, member: int, name: str) -> Words:
    return _inst(Op.MemberName, struct, member, *string_words(name))


# ---------------------------------------------------------------- 3.52.3 annotation


def op_decorate(target: int, decoration: Decoration, *params: int) -> Words:
    return _inst(Op.Decorate, target, decoration, *params)


def op_member_decorate(struct: int, member: int, decoration: Decoration, *params: int) -> Words:
    return _inst(Op.MemberDecorate, struct, member, decoration, *params)


# ---------------------------------------------------------------- 3.52.4 extension


def op_extension(name: str) -> Words:
    return _inst(Op.Extension, *string_words(name))


def op_ext_inst_import(result: int, name: str) -> Words:
    return _inst(Op.ExtInstImport, result, *string_words(name))


def op_ext_inst(
    result_type: int, result: int, ext_set: int, number: GLSL, args: Sequence[int]
) -> Words:
    return _inst(Op.ExtInst, result_type, result, ext_set, number, *args)


# ---------------------------------------------------------------- 3.52.5 mode-setting


def op_memory_model(addressing: AddressingModel, memory: MemoryModel) -> Words:
    return _inst(Op.MemoryModel, addressing, memory)


def op_entry_point(
    model: ExecutionModel, function: int, name: str, interface: Sequence[int]
) -> Words:
    return _inst(Op.EntryPoint, model, function, *string_words(name), *interface)


def op_execution_mode(function: int, mode: ExecutionMode, *params: int) -> Words:
    return _inst(Op.ExecutionMode, function, mode, *params)


def op_capability(capability: Capability) -> Words:
    return _inst(Op.Capability, capability)


# ---------------------------------------------------------------- 3.52.6 type-declaration


def op_type_void(result: int) -> Words:
    return _inst(Op.TypeVoid, result)


def op_type_bool(result: int) -> Words:
    return _inst(Op.TypeBool, result)


def op_type_int(result: int, width: int, signed: bool) -> Words:
    return _inst(Op.TypeInt, result, width, int(signed))


def op_type_float(result: int, width: int) -> Words:
    return _inst(Op.TypeFloat, result, width)


def op_type_vector(result: int, component: int, count: int) -> Words:
    return _inst(Op.TypeVector, result, component, count)


def op_type_array(result: int, element: int, length: int) -> Words:
    """`length` is the id of a constant."""
    return _inst(Op.TypeArray, result, element, length)


def op_type_runtime_array(result: int, element: int) -> Words:
    return _inst(Op.TypeRuntimeArray, result, element)


def op_type_struct(result: int, members: Sequence[int]) -> Words:
    return _inst(Op.TypeStruct, result, *members)


def op_type_pointer(result: int, storage: StorageClass, pointee: int) -> Words:
    return _inst(Op.TypePointer, result, storage, pointee)


def op_type_function(result: int, return_type: int, params: Sequence[int]) -> Words:
    return _inst(Op.TypeFunction, result, return_type, *params)


# ---------------------------------------------------------------- 3.52.7 constant-creation


def op_constant_true(result_type: int, result: int) -> Words:
    return _inst(Op.ConstantTrue, result_type, result)


def op_constant_false(result_type: int, result: int) -> Words:
    return _inst(Op.ConstantFalse, result_type, result)


def op_constant(result_type: int, result: int, value_word: int) -> Words:
    """A 32-bit or narrower scalar constant; `value_word` holds its bits (low-order)."""
    return _inst(Op.Constant, result_type, result, value_word)


# ---------------------------------------------------------------- 3.52.8 memory


def op_variable(
    pointer_type: int, result: int, storage: StorageClass, initializer: int | None = None
) -> Words:
    return _inst(
        Op.Variable, pointer_type, result, storage, *(() if initializer is None else (initializer,))
    )


def op_load(result_type: int, result: int, pointer: int) -> Words:
    return _inst(Op.Load, result_type, result, pointer)


def op_store(pointer: int, value: int) -> Words:
    return _inst(Op.Store, pointer, value)


def op_access_chain(result_type: int, result: int, base: int, indexes: Sequence[int]) -> Words:
    return _inst(Op.AccessChain, result_type, result, base, *indexes)


# ---------------------------------------------------------------- 3.52.9 function


def op_function(result_type: int, result: int, function_type: int, control: int = 0) -> Words:
    return _inst(Op.Function, result_type, result, control, function_type)


def op_function_parameter(result_type: int, result: int) -> Words:
    return _inst(Op.FunctionParameter, result_type, result)


def op_function_end() -> Words:
    return _inst(Op.FunctionEnd)


def op_function_call(result_type: int, result: int, function: int, args: Sequence[int]) -> Words:
    return _inst(Op.FunctionCall, result_type, result, function, *args)


# ---------------------------------------------------------------- 3.52.12 composite


def op_composite_construct(result_type: int, result: int, parts: Sequence[int]) -> Words:
    return _inst(Op.CompositeConstruct, result_type, result, *parts)


def op_composite_extract(result_type: int, result: int, composite: int, index: int) -> Words:
    return _inst(Op.CompositeExtract, result_type, result, composite, index)


# ---------------------------------------------------------------- 3.52.11 conversion


def op_convert_f_to_u(result_type: int, result: int, value: int) -> Words:
    return _inst(Op.ConvertFToU, result_type, result, value)


def op_convert_f_to_s(result_type: int, result: int, value: int) -> Words:
    return _inst(Op.ConvertFToS, result_type, result, value)


def op_convert_s_to_f(result_type: int, result: int, value: int) -> Words:
    return _inst(Op.ConvertSToF, result_type, result, value)


def op_convert_u_to_f(result_type: int, result: int, value: int) -> Words:
    return _inst(Op.ConvertUToF, result_type, result, value)


def op_f_convert(result_type: int, result: int, value: int) -> Words:
    return _inst(Op.FConvert, result_type, result, value)


def op_bitcast(result_type: int, result: int, value: int) -> Words:
    return _inst(Op.Bitcast, result_type, result, value)


# ---------------------------------------------------------------- 3.52.13 arithmetic


def op_s_negate(result_type: int, result: int, value: int) -> Words:
    return _inst(Op.SNegate, result_type, result, value)


def op_f_negate(result_type: int, result: int, value: int) -> Words:
    return _inst(Op.FNegate, result_type, result, value)


def op_i_add(result_type: int, result: int, a: int, b: int) -> Words:
    return _inst(Op.IAdd, result_type, result, a, b)


def op_f_add(result_type: int, result: int, a: int, b: int) -> Words:
    return _inst(Op.FAdd, result_type, result, a, b)


def op_i_sub(result_type: int, result: int, a: int, b: int) -> Words:
    return _inst(Op.ISub, result_type, result, a, b)


def op_f_sub(result_type: int, result: int, a: int, b: int) -> Words:
    return _inst(Op.FSub, result_type, result, a, b)


def op_i_mul(result_type: int, result: int, a: int, b: int) -> Words:
    return _inst(Op.IMul, result_type, result, a, b)


def op_f_mul(result_type: int, result: int, a: int, b: int) -> Words:
    return _inst(Op.FMul, result_type, result, a, b)


def op_u_div(result_type: int, result: int, a: int, b: int) -> Words:
    return _inst(Op.UDiv, result_type, result, a, b)


def op_s_div(result_type: int, result: int, a: int, b: int) -> Words:
    return _inst(Op.SDiv, result_type, result, a, b)


def op_f_div(result_type: int, result: int, a: int, b: int) -> Words:
    return _inst(Op.FDiv, result_type, result, a, b)


def op_u_mod(result_type: int, result: int, a: int, b: int) -> Words:
    return _inst(Op.UMod, result_type, result, a, b)


def op_s_rem(result_type: int, result: int, a: int, b: int) -> Words:
    """Signed remainder with the sign of the dividend (C's and WGSL's truncating `%`)."""
    return _inst(Op.SRem, result_type, result, a, b)


def op_f_rem(result_type: int, result: int, a: int, b: int) -> Words:
    """Float remainder with the sign of the dividend (C's `fmod`)."""
    return _inst(Op.FRem, result_type, result, a, b)


# ---------------------------------------------------------------- 3.52.14 bit


def op_shift_right_logical(result_type: int, result: int, base: int, shift: int) -> Words:
    return _inst(Op.ShiftRightLogical, result_type, result, base, shift)


def op_shift_right_arithmetic(result_type: int, result: int, base: int, shift: int) -> Words:
    return _inst(Op.ShiftRightArithmetic, result_type, result, base, shift)


def op_shift_left_logical(result_type: int, result: int, base: int, shift: int) -> Words:
    return _inst(Op.ShiftLeftLogical, result_type, result, base, shift)


def op_bitwise_or(result_type: int, result: int, a: int, b: int) -> Words:
    return _inst(Op.BitwiseOr, result_type, result, a, b)


def op_bitwise_xor(result_type: int, result: int, a: int, b: int) -> Words:
    return _inst(Op.BitwiseXor, result_type, result, a, b)


def op_bitwise_and(result_type: int, result: int, a: int, b: int) -> Words:
    return _inst(Op.BitwiseAnd, result_type, result, a, b)


def op_not(result_type: int, result: int, value: int) -> Words:
    return _inst(Op.Not, result_type, result, value)


# ---------------------------------------------------------------- 3.52.15 relational and logical


def op_is_nan(result_type: int, result: int, value: int) -> Words:
    return _inst(Op.IsNan, result_type, result, value)


def op_is_inf(result_type: int, result: int, value: int) -> Words:
    return _inst(Op.IsInf, result_type, result, value)


def op_logical_equal(result_type: int, result: int, a: int, b: int) -> Words:
    return _inst(Op.LogicalEqual, result_type, result, a, b)


def op_logical_not_equal(result_type: int, result: int, a: int, b: int) -> Words:
    return _inst(Op.LogicalNotEqual, result_type, result, a, b)


def op_logical_or(result_type: int, result: int, a: int, b: int) -> Words:
    return _inst(Op.LogicalOr, result_type, result, a, b)


def op_logical_and(result_type: int, result: int, a: int, b: int) -> Words:
    return _inst(Op.LogicalAnd, result_type, result, a, b)


def op_logical_not(result_type: int, result: int, value: int) -> Words:
    return _inst(Op.LogicalNot, result_type, result, value)


def op_select(result_type: int, result: int, cond: int, if_true: int, if_false: int) -> Words:
    return _inst(Op.Select, result_type, result, cond, if_true, if_false)


def op_i_equal(result_type: int, result: int, a: int, b: int) -> Words:
    return _inst(Op.IEqual, result_type, result, a, b)


def op_i_not_equal(result_type: int, result: int, a: int, b: int) -> Words:
    return _inst(Op.INotEqual, result_type, result, a, b)


def op_u_greater_than(result_type: int, result: int, a: int, b: int) -> Words:
    return _inst(Op.UGreaterThan, result_type, result, a, b)


def op_s_greater_than(result_type: int, result: int, a: int, b: int) -> Words:
    return _inst(Op.SGreaterThan, result_type, result, a, b)


def op_u_greater_than_equal(result_type: int, result: int, a: int, b: int) -> Words:
    return _inst(Op.UGreaterThanEqual, result_type, result, a, b)


def op_s_greater_than_equal(result_type: int, result: int, a: int, b: int) -> Words:
    return _inst(Op.SGreaterThanEqual, result_type, result, a, b)


def op_u_less_than(result_type: int, result: int, a: int, b: int) -> Words:
    return _inst(Op.ULessThan, result_type, result, a, b)


def op_s_less_than(result_type: int, result: int, a: int, b: int) -> Words:
    return _inst(Op.SLessThan, result_type, result, a, b)


def op_u_less_than_equal(result_type: int, result: int, a: int, b: int) -> Words:
    return _inst(Op.ULessThanEqual, result_type, result, a, b)


def op_s_less_than_equal(result_type: int, result: int, a: int, b: int) -> Words:
    return _inst(Op.SLessThanEqual, result_type, result, a, b)


def op_f_ord_equal(result_type: int, result: int, a: int, b: int) -> Words:
    return _inst(Op.FOrdEqual, result_type, result, a, b)


def op_f_unord_not_equal(result_type: int, result: int, a: int, b: int) -> Words:
    """`a != b` as C and WGSL mean it: true when either side is nan."""
    return _inst(Op.FUnordNotEqual, result_type, result, a, b)


def op_f_ord_less_than(result_type: int, result: int, a: int, b: int) -> Words:
    return _inst(Op.FOrdLessThan, result_type, result, a, b)


def op_f_ord_greater_than(result_type: int, result: int, a: int, b: int) -> Words:
    return _inst(Op.FOrdGreaterThan, result_type, result, a, b)


def op_f_ord_less_than_equal(result_type: int, result: int, a: int, b: int) -> Words:
    return _inst(Op.FOrdLessThanEqual, result_type, result, a, b)


def op_f_ord_greater_than_equal(result_type: int, result: int, a: int, b: int) -> Words:
    return _inst(Op.FOrdGreaterThanEqual, result_type, result, a, b)


# ---------------------------------------------------------------- 3.52.17 control-flow


def op_phi(result_type: int, result: int, incoming: Sequence[tuple[int, int]]) -> Words:
    """`incoming` is (value, parent block label) pairs."""
    return _inst(Op.Phi, result_type, result, *(w for pair in incoming for w in pair))


def op_loop_merge(merge: int, continue_target: int, control: int = 0) -> Words:
    return _inst(Op.LoopMerge, merge, continue_target, control)


def op_selection_merge(merge: int, control: int = 0) -> Words:
    return _inst(Op.SelectionMerge, merge, control)


def op_label(result: int) -> Words:
    return _inst(Op.Label, result)


def op_branch(target: int) -> Words:
    return _inst(Op.Branch, target)


def op_branch_conditional(cond: int, if_true: int, if_false: int) -> Words:
    return _inst(Op.BranchConditional, cond, if_true, if_false)


def op_return() -> Words:
    return _inst(Op.Return)


def op_return_value(value: int) -> Words:
    return _inst(Op.ReturnValue, value)


def op_unreachable() -> Words:
    return _inst(Op.Unreachable)


# ---------------------------------------------------------------- 3.52.20 barrier


def op_atomic_load(result_type: int, result: int, pointer: int, scope: int, sem: int) -> Words:
    """Scope and memory semantics are ids of u32 constants, as for every atomic."""
    return _inst(Op.AtomicLoad, result_type, result, pointer, scope, sem)


def op_atomic_store(pointer: int, scope: int, sem: int, value: int) -> Words:
    return _inst(Op.AtomicStore, pointer, scope, sem, value)


def op_atomic_compare_exchange(
    result_type: int,
    result: int,
    pointer: int,
    scope: int,
    equal: int,
    unequal: int,
    value: int,
    comparator: int,
) -> Words:
    """Stores `value` where `*pointer == comparator`; the result is the old value either way."""
    return _inst(
        Op.AtomicCompareExchange, result_type, result, pointer, scope, equal, unequal, value,
        comparator,
    )  # fmt: skip


def op_atomic_i_add(
    result_type: int, result: int, pointer: int, scope: int, sem: int, value: int
) -> Words:
    return _inst(Op.AtomicIAdd, result_type, result, pointer, scope, sem, value)


def op_control_barrier(execution: int, memory: int, semantics: int) -> Words:
    """The three operands are ids of u32 constants (scope, scope, memory semantics)."""
    return _inst(Op.ControlBarrier, execution, memory, semantics)


def op_memory_barrier(memory: int, semantics: int) -> Words:
    """A fence: the operands are ids of u32 constants (scope, memory semantics)."""
    return _inst(Op.MemoryBarrier, memory, semantics)
