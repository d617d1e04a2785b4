"""Readable SPIR-V assembly from a module's words (`mimir compile-gpu --emit spvasm`).

The text follows the conventions of `spirv-dis` and assembles back with
`spirv-as`: one instruction per line, `%name = OpCode operands`, enumerants by
name, strings quoted, constants typed by their result type. Ids are named from
`OpName` where the module gives one, types and constants get descriptive names
(`%uint`, `%_ptr_StorageBuffer_float`, `%float_0_5`), and the rest keep their
number (`%42`). It reads every instruction Mimir's builder writes
(`mimir.codegen.backends.spirv.spec.LAYOUT`) and prints anything else as a comment.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Sequence

from mimir.codegen.backends.spirv.module import split_instructions
from mimir.codegen.backends.spirv.spec import (
    GLSL,
    GLSL_SET,
    LAYOUT,
    MASK_ENUMS,
    VALUE_ENUMS,
    Decoration,
    Op,
)

__all__ = ["disassemble"]

_COLUMN = 15


def _string(operands: Sequence[int], start: int) -> tuple[str, int]:
    """The literal string at `operands[start]` and the index just past it."""
    data = bytearray()
    i = start
    while i < len(operands):
        data += operands[i].to_bytes(4, "little")
        i += 1
        if 0 in data[-4:]:
            break
    return data[: data.index(0)].decode(errors="replace"), i


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _float_text(bits: int, width: int) -> str:
    value = struct.unpack("<e" if width == 16 else "<f", bits.to_bytes(width // 8, "little"))[0]
    if math.isinf(value):
        return ("-" if value < 0 else "") + ("0x1p+16" if width == 16 else "0x1p+128")
    if math.isnan(value):
        return "0x1.8p+16" if width == 16 else "0x1.8p+128"
    return repr(value)


class _Names:
    """Friendly, unique names for ids, in the style of `spirv-dis`."""

    def __init__(self) -> None:
        self.by_id: dict[int, str] = {}
        self._taken: set[str] = set()

    def give(self, id_: int, wanted: str) -> None:
        if id_ in self.by_id:
            return
        base = re.sub(r"[^A-Za-z0-9_]", "_", wanted) or "_"
        name, n = base, 0
        while name in self._taken or name.isdigit():
            n += 1
            name = f"{base}_{n}"
        self._taken.add(name)
        self.by_id[id_] = name

    def __call__(self, id_: int) -> str:
        return "%" + self.by_id.get(id_, str(id_))


def _name_everything(insts: list[tuple[Op | int, list[int]]]) -> tuple[_Names, dict[int, tuple]]:
    names = _Names()
    types: dict[int, tuple] = {}  # id -> ("int", width, signed) | ("float", width) | ...
    for op, ops in insts:
        if op == Op.Name:
            names.give(ops[0], _string(ops, 1)[0])
    for op, ops in insts:
        if op == Op.ExtInstImport:
            names.give(ops[0], "glsl" if _string(ops, 1)[0] == GLSL_SET else "ext")
        elif op == Op.TypeVoid:
            types[ops[0]] = ("void",)
            names.give(ops[0], "void")
        elif op == Op.TypeBool:
            types[ops[0]] = ("bool",)
            names.give(ops[0], "bool")
        elif op == Op.TypeInt:
            types[ops[0]] = ("int", ops[1], bool(ops[2]))
            base = "int" if ops[2] else "uint"
            names.give(ops[0], base if ops[1] == 32 else f"{base}{ops[1]}")
        elif op == Op.TypeFloat:
            types[ops[0]] = ("float", ops[1])
            names.give(ops[0], {32: "float", 16: "half"}.get(ops[1], f"float{ops[1]}"))
        elif op == Op.TypeVector:
            names.give(ops[0], f"v{ops[2]}{names(ops[1])[1:]}")
        elif op == Op.TypeRuntimeArray:
            names.give(ops[0], f"_runtimearr_{names(ops[1])[1:]}")
        elif op == Op.TypeArray:
            names.give(ops[0], f"_arr_{names(ops[1])[1:]}_{names(ops[2])[1:]}")
        elif op == Op.TypeStruct:
            names.give(ops[0], f"_struct_{ops[0]}")
        elif op == Op.TypePointer:
            storage = _enum_text("StorageClass", ops[1])
            names.give(ops[0], f"_ptr_{storage}_{names(ops[2])[1:]}")
        elif op == Op.TypeFunction:
            names.give(ops[0], "_fn_" + "_".join(names(i)[1:] for i in ops[1:]))
        elif op in (Op.ConstantTrue, Op.ConstantFalse):
            names.give(ops[1], "true" if op == Op.ConstantTrue else "false")
        elif op == Op.Constant:
            text = _constant_text(types.get(ops[0], ()), ops[2])
            if text.endswith("p+128") or text.endswith("p+16"):
                text = text[: text.index("0x")] + ("nan" if ".8p" in text else "inf")
            text = text.replace("-", "n").replace(".", "_")
            names.give(ops[1], f"{names(ops[0])[1:]}_{text}")
    return names, types


def _constant_text(type_: tuple, word: int) -> str:
    if type_[:1] == ("float",):
        return _float_text(word, type_[1])
    if type_[:1] == ("int",) and type_[2] and word >= 2**31:
        return str(word - 2**32)
    return str(word)


def _enum_text(kind: str, value: int) -> str:
    if kind in MASK_ENUMS:
        if value == 0:
            return "None"
        bits = MASK_ENUMS[kind]
        parts = [bits[b] for b in sorted(bits) if value & b]
        rest = value & ~sum(b for b in bits if value & b)
        return "|".join(parts + ([hex(rest)] if rest else []))
    enum = VALUE_ENUMS[kind]
    return enum(value).name if value in enum._value2member_map_ else str(value)


def _operands(
    op: Op, ops: list[int], names: _Names, types: dict[int, tuple], glsl: set[int]
) -> tuple[str | None, list[str]]:
    """The result name (if any) and the printed operands of one instruction."""
    result: str | None = None
    out: list[str] = []
    i = 0
    result_type: tuple = ()
    for kind in LAYOUT[op]:
        if i >= len(ops) and kind.endswith("*"):
            break
        if kind == "result":
            result = names(ops[i])
        elif kind == "type":
            result_type = types.get(ops[i], ())
            out.append(names(ops[i]))
        elif kind == "id":
            out.append(names(ops[i]))
        elif kind in ("ids*", "pairs*"):
            out += [names(x) for x in ops[i:]]
            i = len(ops)
            continue
        elif kind == "lit":
            out.append(str(ops[i]))
        elif kind == "lits*":
            out += [str(x) for x in ops[i:]]
            i = len(ops)
            continue
        elif kind == "str":
            text, i = _string(ops, i)
            out.append(_quote(text))
            continue
        elif kind == "num":
            out.append(_constant_text(result_type, ops[i]))
        elif kind == "ext":
            set_id = ops[i - 1]
            known = set_id in glsl and ops[i] in GLSL._value2member_map_
            out.append(GLSL(ops[i]).name if known else str(ops[i]))
        elif kind == "Decoration":
            out.append(_enum_text(kind, ops[i]))
            params = ops[i + 1 :]
            if ops[i] == Decoration.BuiltIn and params:
                out.append(_enum_text("BuiltIn", params[0]))
            else:
                out += [str(x) for x in params]
            i = len(ops)
            continue
        elif kind == "ExecutionMode":
            out.append(_enum_text(kind, ops[i]))
            out += [str(x) for x in ops[i + 1 :]]
            i = len(ops)
            continue
        else:
            out.append(_enum_text(kind, ops[i]))
        i += 1
    return result, out


def disassemble(words: Sequence[int]) -> str:
    """The module as `spirv-dis`-style text (ends with a newline)."""
    insts = split_instructions(words)
    names, types = _name_everything(insts)
    glsl = {
        ops[0] for op, ops in insts if op == Op.ExtInstImport and _string(ops, 1)[0] == GLSL_SET
    }
    version = words[1]
    lines = [
        "; SPIR-V",
        f"; Version: {version >> 16 & 0xFF}.{version >> 8 & 0xFF}",
        f"; Generator: {words[2]}",
        f"; Bound: {words[3]}",
        f"; Schema: {words[4]}",
    ]
    for op, ops in insts:
        if not isinstance(op, Op):
            lines.append(f"; unknown opcode {op}: {ops}")
            continue
        result, operands = _operands(op, ops, names, types, glsl)
        text = " ".join([f"Op{op.name}", *operands])
        if op == Op.Function:
            lines.append("")
        lhs = f"{result} = " if result else ""
        lines.append(f"{lhs:>{_COLUMN + 3}}{text}")
    return "\n".join(lines) + "\n"
