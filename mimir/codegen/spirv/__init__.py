"""SPIR-V: an in-package instruction builder, module assembler and disassembler.

- `mimir.codegen.spirv.spec`: opcodes, operand layouts and enumerants;
- `mimir.codegen.spirv.instructions`: one function per opcode, returning words;
- `mimir.codegen.spirv.module`: `Module` (ids, types, constants, layout), `Function`,
  `split_instructions`;
- `mimir.codegen.spirv.disasm`: `disassemble(words)`, readable assembly.
"""

from __future__ import annotations

from mimir.codegen.spirv.disasm import disassemble
from mimir.codegen.spirv.module import Function, Module, split_instructions

__all__ = ["Function", "Module", "disassemble", "split_instructions"]
