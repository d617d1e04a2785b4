"""SPIR-V numbers: opcodes, operand layouts and the enumerants Mimir's modules use.

Every number here is copied from the SPIR-V unified grammar
(`spirv.core.grammar.json`, SPIR-V 1.6 revision 1, and
`extinst.glsl.std.450.grammar.json`); `tests/test_spirv_builder.py` checks
them against those files when Debian's `spirv-headers` is installed.

`LAYOUT` gives each opcode's operand kinds, in order, for the disassembler
(`mimir.codegen.backends.spirv.disasm`); the instruction builders
(`mimir.codegen.backends.spirv.instructions`) write the same operands.
"""

from __future__ import annotations

from enum import IntEnum

MAGIC = 0x07230203
VERSION_1_3 = 0x00010300
GENERATOR = 0  # no registered generator id


class Op(IntEnum):
    """Opcodes, grouped by the spec's sections (3.52.x)."""

    # Miscellaneous, debug, annotation, extension
    Nop = 0
    Source = 3
    Name = 5
    MemberName = 6
    Extension = 10
    ExtInstImport = 11
    ExtInst = 12
    MemoryModel = 14
    EntryPoint = 15
    ExecutionMode = 16
    Capability = 17
    # Type-declaration
    TypeVoid = 19
    TypeBool = 20
    TypeInt = 21
    TypeFloat = 22
    TypeVector = 23
    TypeArray = 28
    TypeRuntimeArray = 29
    TypeStruct = 30
    TypePointer = 32
    TypeFunction = 33
    # Constant-creation
    ConstantTrue = 41
    ConstantFalse = 42
    Constant = 43
    # Memory
    Variable = 59
    Load = 61
    Store = 62
    AccessChain = 65
    # Function
    Function = 54
    FunctionParameter = 55
    FunctionEnd = 56
    FunctionCall = 57
    # Annotation
    Decorate = 71
    MemberDecorate = 72
    # Composite
    CompositeConstruct = 80
    CompositeExtract = 81
    # Conversion
    ConvertFToU = 109
    ConvertFToS = 110
    ConvertSToF = 111
    ConvertUToF = 112
    FConvert = 115
    Bitcast = 124
    # Arithmetic
    SNegate = 126
    FNegate = 127
    IAdd = 128
    FAdd = 129
    ISub = 130
    FSub = 131
    IMul = 132
    FMul = 133
    UDiv = 134
    SDiv = 135
    FDiv = 136
    UMod = 137
    SRem = 138
    FRem = 140
    # Relational and logical
    IsNan = 156
    IsInf = 157
    LogicalEqual = 164
    LogicalNotEqual = 165
    LogicalOr = 166
    LogicalAnd = 167
    LogicalNot = 168
    Select = 169
    IEqual = 170
    INotEqual = 171
    UGreaterThan = 172
    SGreaterThan = 173
    UGreaterThanEqual = 174
    SGreaterThanEqual = 175
    ULessThan = 176
    SLessThan = 177
    ULessThanEqual = 178
    SLessThanEqual = 179
    FOrdEqual = 180
    FUnordNotEqual = 183
    FOrdLessThan = 184
    FOrdGreaterThan = 186
    FOrdLessThanEqual = 188
    FOrdGreaterThanEqual = 190
    # Bit
    ShiftRightLogical = 194
    ShiftRightArithmetic = 195
    ShiftLeftLogical = 196
    BitwiseOr = 197
    BitwiseXor = 198
    BitwiseAnd = 199
    Not = 200
    # Barrier
    ControlBarrier = 224
    MemoryBarrier = 225
    AtomicLoad = 227
    AtomicStore = 228
    AtomicCompareExchange = 230
    AtomicIAdd = 234
    # Control-flow
    Phi = 245
    LoopMerge = 246
    SelectionMerge = 247
    Label = 248
    Branch = 249
    BranchConditional = 250
    Return = 253
    ReturnValue = 254
    Unreachable = 255


class Capability(IntEnum):
    Shader = 1
    Float16 = 9
    StorageBuffer16BitAccess = 4433


class AddressingModel(IntEnum):
    Logical = 0


class MemoryModel(IntEnum):
    GLSL450 = 1


class ExecutionModel(IntEnum):
    GLCompute = 5


class ExecutionMode(IntEnum):
    LocalSize = 17


class StorageClass(IntEnum):
    UniformConstant = 0
    Input = 1
    Uniform = 2
    Output = 3
    Workgroup = 4
    Private = 6
    Function = 7
    StorageBuffer = 12


class Decoration(IntEnum):
    Block = 2
    ArrayStride = 6
    BuiltIn = 11
    NonWritable = 24
    Binding = 33
    DescriptorSet = 34
    Offset = 35


class BuiltIn(IntEnum):
    NumWorkgroups = 24
    WorkgroupId = 26
    LocalInvocationId = 27
    GlobalInvocationId = 28
    LocalInvocationIndex = 29


class Scope(IntEnum):
    Device = 1
    Workgroup = 2
    Invocation = 4


class MemorySemantics(IntEnum):
    Acquire = 0x2
    Release = 0x4
    AcquireRelease = 0x8
    UniformMemory = 0x40
    WorkgroupMemory = 0x100


class SourceLanguage(IntEnum):
    Unknown = 0


class GLSL(IntEnum):
    """GLSL.std.450 extended instructions."""

    FAbs = 4
    SAbs = 5
    Floor = 8
    Sin = 13
    Cos = 14
    Tanh = 21
    Pow = 26
    Exp = 27
    Log = 28
    Sqrt = 31
    FMin = 37
    UMin = 38
    SMin = 39
    FMax = 40
    UMax = 41
    SMax = 42
    Fma = 50


GLSL_SET = "GLSL.std.450"

# Operand kinds: `type` result type id, `result` result id, `id` one id, `ids*` the rest
# as ids, `lit` one literal word, `lits*` the rest as literal words, `str` a literal
# string, `num` a literal typed by the result type, `ext` an extended-instruction
# number, `pairs*` (id, id) pairs, or an enum class name (its value, printed by name;
# `Decoration` and `ExecutionMode` take their literal parameters after them).
LAYOUT: dict[Op, tuple[str, ...]] = {
    Op.Nop: (),
    Op.Source: ("SourceLanguage", "lit"),
    Op.Name: ("id", "str"),
    Op.MemberName: ("id", "lit", "str"),
    Op.Extension: ("str",),
    Op.ExtInstImport: ("result", "str"),
    Op.ExtInst: ("type", "result", "id", "ext", "ids*"),
    Op.MemoryModel: ("AddressingModel", "MemoryModel"),
    Op.EntryPoint: ("ExecutionModel", "id", "str", "ids*"),
    Op.ExecutionMode: ("id", "ExecutionMode"),
    Op.Capability: ("Capability",),
    Op.TypeVoid: ("result",),
    Op.TypeBool: ("result",),
    Op.TypeInt: ("result", "lit", "lit"),
    Op.TypeFloat: ("result", "lit"),
    Op.TypeVector: ("result", "id", "lit"),
    Op.TypeArray: ("result", "id", "id"),
    Op.TypeRuntimeArray: ("result", "id"),
    Op.TypeStruct: ("result", "ids*"),
    Op.TypePointer: ("result", "StorageClass", "id"),
    Op.TypeFunction: ("result", "id", "ids*"),
    Op.ConstantTrue: ("type", "result"),
    Op.ConstantFalse: ("type", "result"),
    Op.Constant: ("type", "result", "num"),
    Op.Variable: ("type", "result", "StorageClass", "ids*"),
    Op.Load: ("type", "result", "id"),
    Op.Store: ("id", "id"),
    Op.AccessChain: ("type", "result", "id", "ids*"),
    Op.Function: ("type", "result", "FunctionControl", "id"),
    Op.FunctionParameter: ("type", "result"),
    Op.FunctionEnd: (),
    Op.FunctionCall: ("type", "result", "id", "ids*"),
    Op.Decorate: ("id", "Decoration"),
    Op.MemberDecorate: ("id", "lit", "Decoration"),
    Op.CompositeConstruct: ("type", "result", "ids*"),
    Op.CompositeExtract: ("type", "result", "id", "lits*"),
    Op.ControlBarrier: ("id", "id", "id"),
    Op.MemoryBarrier: ("id", "id"),
    Op.AtomicLoad: ("type", "result", "id", "id", "id"),
    Op.AtomicStore: ("id", "id", "id", "id"),
    Op.AtomicCompareExchange: ("type", "result", "id", "id", "id", "id", "id", "id"),
    Op.AtomicIAdd: ("type", "result", "id", "id", "id", "id"),
    Op.Phi: ("type", "result", "pairs*"),
    Op.LoopMerge: ("id", "id", "LoopControl"),
    Op.SelectionMerge: ("id", "SelectionControl"),
    Op.Label: ("result",),
    Op.Branch: ("id",),
    Op.BranchConditional: ("id", "id", "id", "lits*"),
    Op.Return: (),
    Op.ReturnValue: ("id",),
    Op.Unreachable: (),
}
_UNARY = (Op.ConvertFToU, Op.ConvertFToS, Op.ConvertSToF, Op.ConvertUToF, Op.FConvert, Op.Bitcast)
_UNARY += (Op.SNegate, Op.FNegate, Op.IsNan, Op.IsInf, Op.LogicalNot, Op.Not)
for _op in _UNARY:
    LAYOUT[_op] = ("type", "result", "id")
for _op in Op:
    if _op not in LAYOUT:  # every remaining opcode is a binary operation (or OpSelect)
        LAYOUT[_op] = ("type", "result", "id", "id") + (("id",) if _op == Op.Select else ())

# Bit-mask enums print as `A|B`; value enums by name.
MASK_ENUMS = {
    "FunctionControl": {0x1: "Inline", 0x2: "DontInline", 0x4: "Pure", 0x8: "Const"},
    "SelectionControl": {0x1: "Flatten", 0x2: "DontFlatten"},
    "LoopControl": {0x1: "Unroll", 0x2: "DontUnroll"},
}
VALUE_ENUMS: dict[str, type[IntEnum]] = {
    "Capability": Capability,
    "AddressingModel": AddressingModel,
    "MemoryModel": MemoryModel,
    "ExecutionModel": ExecutionModel,
    "ExecutionMode": ExecutionMode,
    "StorageClass": StorageClass,
    "Decoration": Decoration,
    "BuiltIn": BuiltIn,
    "SourceLanguage": SourceLanguage,
}
