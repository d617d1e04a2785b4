"""Assembling a SPIR-V module: ids, deduplicated types and constants, the logical layout.

`Module` hands out result ids, declares each type and constant once (SPIR-V
forbids two declarations of the same non-aggregate type), and writes the
sections in the order the spec's logical layout (2.4) requires: capabilities,
extensions, extended-instruction imports, the memory model, entry points,
execution modes, debug names, annotations, then types, constants and global
variables (each declared before its first use, which creation order gives),
then function definitions. `Function` builds one function's blocks, keeping
its `Function`-storage variables at the top of the entry block as the spec
requires.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from mimir.codegen.backends.spirv import instructions as ins
from mimir.codegen.backends.spirv.spec import (
    GENERATOR,
    MAGIC,
    VERSION_1_3,
    AddressingModel,
    BuiltIn,
    Capability,
    Decoration,
    ExecutionMode,
    ExecutionModel,
    MemoryModel,
    Op,
    StorageClass,
)

Words = list[int]


class Module:
    """One module under construction; `words()` returns the finished binary as words."""

    def __init__(self) -> None:
        self._bound = 1
        self._capabilities: list[Capability] = []
        self._extensions: list[str] = []
        self._imports: dict[str, int] = {}
        self._entry_points: Words = []
        self._modes: Words = []
        self._names: Words = []
        self._annotations: Words = []
        self._globals: Words = []
        self._functions: Words = []
        self._types: dict[tuple, int] = {}
        self._constants: dict[tuple[int, int], int] = {}
        self._named: set[int] = set()

    def new_id(self) -> int:
        self._bound += 1
        return self._bound - 1

    # ------------------------------------------------------------ mode-setting and debug

    def capability(self, capability: Capability) -> None:
        if capability not in self._capabilities:
            self._capabilities.append(capability)

    def extension(self, name: str) -> None:
        if name not in self._extensions:
            self._extensions.append(name)

    def ext_inst_import(self, name: str) -> int:
        if name not in self._imports:
            self._imports[name] = self.new_id()
        return self._imports[name]

    def entry_point(self, function: int, name: str, interface: Sequence[int]) -> None:
        self._entry_points += ins.op_entry_point(
            ExecutionModel.GLCompute, function, name, interface
        )

    def local_size(self, function: int, size: Sequence[int]) -> None:
        self._modes += ins.op_execution_mode(function, ExecutionMode.LocalSize, *size)

    def name(self, target: int, name: str) -> None:
        """Name `target` for readers of the assembly (the first name given wins)."""
        if target not in self._named:
            self._named.add(target)
            self._names += ins.op_name(target, name)

    def member_name(self, struct_id: int, member: int, name: str) -> None:
        self._names += ins.op_member_name(struct_id, member, name)

    def decorate(self, target: int, decoration: Decoration, *params: int) -> None:
        self._annotations += ins.op_decorate(target, decoration, *params)

    def member_decorate(
        self, struct_id: int, member: int, decoration: Decoration, *params: int
    ) -> None:
        self._annotations += ins.op_member_decorate(struct_id, member, decoration, *params)

    # ------------------------------------------------------------ types

    def _type(self, key: tuple, make: object) -> int:
        if key not in self._types:
            result = self.new_id()
            self._globals += make(result)  # type: ignore[operator]
            self._types[key] = result
        return self._types[key]

    def void(self) -> int:
        return self._type(("void",), ins.op_type_void)

    def bool_(self) -> int:
        return self._type(("bool",), ins.op_type_bool)

    def int_(self, width: int, signed: bool) -> int:
        return self._type(("int", width, signed), lambda r: ins.op_type_int(r, width, signed))

    def float_(self, width: int) -> int:
        return self._type(("float", width), lambda r: ins.op_type_float(r, width))

    def vector(self, component: int, count: int) -> int:
        return self._type(
            ("vector", component, count), lambda r: ins.op_type_vector(r, component, count)
        )

    def pointer(self, storage: StorageClass, pointee: int) -> int:
        return self._type(
            ("pointer", storage, pointee), lambda r: ins.op_type_pointer(r, storage, pointee)
        )

    def array(self, element: int, length: int) -> int:
        """A fixed-size array (no explicit layout: for Workgroup and Function storage)."""
        length_id = self.const_u32(length)
        return self._type(
            ("array", element, length), lambda r: ins.op_type_array(r, element, length_id)
        )

    def runtime_array(self, element: int, stride: int) -> int:
        """A runtime array decorated with its `ArrayStride` (for storage buffers)."""
        key = ("runtime_array", element, stride)
        if key not in self._types:
            result = self._type(key, lambda r: ins.op_type_runtime_array(r, element))
            self.decorate(result, Decoration.ArrayStride, stride)
        return self._types[key]

    def struct(self, members: Sequence[int]) -> int:
        """A new struct type (never shared: each carries its own decorations)."""
        result = self.new_id()
        self._globals += ins.op_type_struct(result, members)
        return result

    def function_type(self, return_type: int, params: Sequence[int]) -> int:
        key = ("function", return_type, tuple(params))
        return self._type(key, lambda r: ins.op_type_function(r, return_type, params))

    # ------------------------------------------------------------ constants

    def constant(self, type_id: int, word: int) -> int:
        key = (type_id, word)
        if key not in self._constants:
            result = self.new_id()
            self._globals += ins.op_constant(type_id, result, word)
            self._constants[key] = result
        return self._constants[key]

    def const_bool(self, value: bool) -> int:
        key = (self.bool_(), -1 if value else -2)
        if key not in self._constants:
            result = self.new_id()
            make = ins.op_constant_true if value else ins.op_constant_false
            self._globals += make(key[0], result)
            self._constants[key] = result
        return self._constants[key]

    def const_u32(self, value: int) -> int:
        return self.constant(self.int_(32, False), value % 2**32)

    def const_i32(self, value: int) -> int:
        return self.constant(self.int_(32, True), value % 2**32)

    def const_f32(self, value: float) -> int:
        return self.constant(self.float_(32), struct.unpack("<I", struct.pack("<f", value))[0])

    def const_f16(self, value: float) -> int:
        return self.constant(self.float_(16), struct.unpack("<H", struct.pack("<e", value))[0])

    # ------------------------------------------------------------ globals and functions

    def variable(self, storage: StorageClass, pointee: int, initializer: int | None = None) -> int:
        """A module-scope variable; returns its (pointer) id."""
        result = self.new_id()
        ptr = self.pointer(storage, pointee)
        self._globals += ins.op_variable(ptr, result, storage, initializer)
        return result

    def builtin_input(self, builtin: BuiltIn, pointee: int) -> int:
        result = self.variable(StorageClass.Input, pointee)
        self.decorate(result, Decoration.BuiltIn, builtin)
        return result

    def add_function(self, words: Words) -> None:
        self._functions += words

    def words(self) -> Words:
        header = [MAGIC, VERSION_1_3, GENERATOR, self._bound, 0]
        body: Words = []
        for capability in self._capabilities:
            body += ins.op_capability(capability)
        for name in self._extensions:
            body += ins.op_extension(name)
        for name, result in self._imports.items():
            body += ins.op_ext_inst_import(result, name)
        body += ins.op_memory_model(AddressingModel.Logical, MemoryModel.GLSL450)
        body += self._entry_points + self._modes + self._names + self._annotations
        return header + body + self._globals + self._functions

    def to_bytes(self) -> bytes:
        words = self.words()
        return struct.pack(f"<{len(words)}I", *words)


class Function:
    """One function definition: parameters, local variables and a sequence of blocks.

    The entry block is open from the start. `emit` appends to the open block;
    `terminate` appends its terminator and closes it; `begin(label)` opens the
    next one. `variable` declares a `Function`-storage variable, which lands at
    the top of the entry block whenever it is declared.
    """

    def __init__(self, module: Module, return_type: int, param_types: Sequence[int]) -> None:
        self.module = module
        self.id = module.new_id()
        self.return_type = return_type
        self.type_id = module.function_type(return_type, param_types)
        self.params = [(t, module.new_id()) for t in param_types]
        self._variables: Words = []
        self._body: Words = []
        self.current = module.new_id()
        self._entry = self.current
        self.terminated = False

    @property
    def param_ids(self) -> list[int]:
        return [p for _, p in self.params]

    def variable(self, pointee: int) -> int:
        result = self.module.new_id()
        ptr = self.module.pointer(StorageClass.Function, pointee)
        self._variables += ins.op_variable(ptr, result, StorageClass.Function)
        return result

    def emit(self, words: Words) -> None:
        assert not self.terminated, "instruction after a block's terminator"
        self._body += words

    def terminate(self, words: Words) -> None:
        self.emit(words)
        self.terminated = True

    def begin(self, label: int) -> None:
        assert self.terminated, "a block was left without a terminator"
        self._body += ins.op_label(label)
        self.current = label
        self.terminated = False

    def finish(self) -> Words:
        assert self.terminated, "the last block has no terminator"
        words = ins.op_function(self.return_type, self.id, self.type_id)
        for t, p in self.params:
            words += ins.op_function_parameter(t, p)
        words += ins.op_label(self._entry) + self._variables + self._body
        return words + ins.op_function_end()


def split_instructions(words: Sequence[int]) -> list[tuple[Op | int, list[int]]]:
    """Split a module's words (header included) into (opcode, operands) pairs."""
    if len(words) < 5 or words[0] != MAGIC:
        raise ValueError("not a SPIR-V module (bad magic number)")
    out: list[tuple[Op | int, list[int]]] = []
    i = 5
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        if count == 0 or i + count > len(words):
            raise ValueError(f"malformed instruction at word {i}")
        try:
            op: Op | int = Op(opcode)
        except ValueError:
            op = opcode
        out.append((op, list(words[i + 1 : i + count])))
        i += count
    return out
