"""The SPIR-V instruction builder, module assembler and disassembler
(`mimir.codegen.backends.spirv`).

Opcode numbers, operand layouts and enumerants are checked against the
Khronos grammar (`spirv.core.grammar.json` and the GLSL.std.450 grammar from
Debian's `spirv-headers`); the assembler's output against `spirv-val`, and
the disassembler's against `spirv-as`. A missing file or tool skips here and
fails under `CI=true`.
"""

from __future__ import annotations

import json
import math
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from harness import require, require_tool

from mimir.codegen.backends.spirv import Function, Module, disassemble, split_instructions
from mimir.codegen.backends.spirv import instructions as ins
from mimir.codegen.backends.spirv.spec import (
    GLSL,
    GLSL_SET,
    LAYOUT,
    VALUE_ENUMS,
    BuiltIn,
    Capability,
    Decoration,
    MemorySemantics,
    Op,
    Scope,
    StorageClass,
)

GRAMMAR_DIR = Path("/usr/include/spirv/unified1")


def _grammar(name: str) -> dict:
    path = GRAMMAR_DIR / name
    require(path.exists(), f"{path} is missing (apt-get install spirv-headers)")
    return json.loads(path.read_text())


# ---------------------------------------------------------------- numbers


def test_opcodes_and_operand_layouts_match_the_core_grammar() -> None:
    grammar = {i["opname"]: i for i in _grammar("spirv.core.grammar.json")["instructions"]}
    kinds = {
        "IdResultType": "type",
        "IdResult": "result",
        "IdRef": "id",
        "IdScope": "id",
        "IdMemorySemantics": "id",
        "LiteralInteger": "lit",
        "LiteralString": "str",
        "LiteralContextDependentNumber": "num",
        "LiteralExtInstInteger": "ext",
        "PairIdRefIdRef": "pairs",
    }
    for op in Op:
        entry = grammar[f"Op{op.name}"]
        assert entry["opcode"] == op.value, op
        theirs = []
        for operand in entry.get("operands", []):
            if operand.get("quantifier") == "?":
                continue  # optional operands Mimir never writes (OpVariable's initializer aside)
            kind = kinds.get(operand["kind"], operand["kind"])
            theirs.append(kind + "*" if operand.get("quantifier") == "*" else kind)
        ours = [k if k != "ids*" else "id*" for k in LAYOUT[op]]
        ours = [{"lits*": "lit*", "pairs*": "pairs*"}.get(k, k) for k in ours]
        if op == Op.Variable:
            ours = ours[:-1]  # the optional initializer, read as trailing ids
        assert ours == theirs, op


def test_enumerants_match_the_core_grammar() -> None:
    kinds = {k["kind"]: k for k in _grammar("spirv.core.grammar.json")["operand_kinds"]}
    checked = dict(VALUE_ENUMS) | {"Scope": Scope, "MemorySemantics": MemorySemantics}
    for kind, enum in checked.items():
        values = {e["enumerant"]: e["value"] for e in kinds[kind]["enumerants"]}
        for member in enum:
            value = values[member.name]
            assert (int(value, 16) if isinstance(value, str) else value) == member.value, member


def test_glsl_std_450_numbers_match_its_grammar() -> None:
    numbers = {
        i["opname"]: i["opcode"]
        for i in _grammar("extinst.glsl.std.450.grammar.json")["instructions"]
    }
    for member in GLSL:
        assert numbers[member.name] == member.value, member


# ---------------------------------------------------------------- instructions


def test_an_instruction_is_its_word_count_and_opcode_then_operands() -> None:
    assert ins.op_i_add(1, 2, 3, 4) == [5 << 16 | 128, 1, 2, 3, 4]
    assert ins.op_return() == [1 << 16 | 253]
    assert ins.op_control_barrier(7, 7, 9) == [4 << 16 | 224, 7, 7, 9]
    assert ins.op_atomic_load(1, 2, 3, 4, 5) == [6 << 16 | 227, 1, 2, 3, 4, 5]


def test_literal_strings_are_nul_terminated_and_padded_to_words() -> None:
    assert ins.string_words("main") == [0x6E69616D, 0]
    assert ins.string_words("abc") == [0x00636261]
    assert ins.string_words("") == [0]
    assert ins.op_name(5, "x") == [3 << 16 | 5, 5, 0x78]


# ---------------------------------------------------------------- the module


def _add_module() -> Module:
    """y[i] = exp(x[i]) + inf for i = global_x: a tiny complete compute module."""
    m = Module()
    m.capability(Capability.Shader)
    glsl = m.ext_inst_import(GLSL_SET)
    f32, u32 = m.float_(32), m.int_(32, False)
    block = m.struct([m.runtime_array(f32, 4)])
    m.decorate(block, Decoration.Block)
    m.member_decorate(block, 0, Decoration.Offset, 0)
    x, y = (m.variable(StorageClass.StorageBuffer, block) for _ in range(2))
    for k, var in enumerate((x, y)):
        m.name(var, "xy"[k])
        m.decorate(var, Decoration.DescriptorSet, 0)
        m.decorate(var, Decoration.Binding, k)
    m.decorate(x, Decoration.NonWritable)
    v3 = m.vector(u32, 3)
    gid = m.builtin_input(BuiltIn.GlobalInvocationId, v3)
    fn = Function(m, m.void(), [])
    m.name(fn.id, "main")
    pf = m.pointer(StorageClass.StorageBuffer, f32)
    g, i, p, v, e, s, q = (m.new_id() for _ in range(7))
    fn.emit(ins.op_load(v3, g, gid))
    fn.emit(ins.op_composite_extract(u32, i, g, 0))
    fn.emit(ins.op_access_chain(pf, p, x, [m.const_u32(0), i]))
    fn.emit(ins.op_load(f32, v, p))
    fn.emit(ins.op_ext_inst(f32, e, glsl, GLSL.Exp, [v]))
    fn.emit(ins.op_f_add(f32, s, e, m.const_f32(math.inf)))
    fn.emit(ins.op_access_chain(pf, q, y, [m.const_u32(0), i]))
    fn.emit(ins.op_store(q, s))
    fn.variable(f32)  # declared late, lands at the top of the entry block
    fn.terminate(ins.op_return())
    m.entry_point(fn.id, "main", [gid])
    m.local_size(fn.id, (64, 1, 1))
    m.add_function(fn.finish())
    return m


def test_types_and_constants_are_declared_once() -> None:
    m = Module()
    assert m.int_(32, False) == m.int_(32, False) != m.int_(32, True)
    assert m.const_u32(7) == m.const_u32(7) != m.const_i32(7)
    assert m.const_bool(True) == m.const_bool(True) != m.const_bool(False)
    assert m.const_f32(0.5) == m.const_f32(0.5)
    assert m.struct([m.float_(32)]) != m.struct([m.float_(32)])  # structs carry decorations
    ops = [op for op, _ in split_instructions(m.words())]
    assert ops.count(Op.TypeInt) == 2 and ops.count(Op.TypeFloat) == 1


def test_sections_follow_the_logical_layout() -> None:
    ws = _add_module().words()
    assert ws[:3] == [0x07230203, 0x00010300, 0]
    order = [
        Op.Capability, Op.ExtInstImport, Op.MemoryModel, Op.EntryPoint, Op.ExecutionMode,
        Op.Name, Op.Decorate,
    ]  # fmt: skip
    ops = [op for op, _ in split_instructions(ws)]
    firsts = [ops.index(op) for op in order]
    assert firsts == sorted(firsts)
    assert ops.index(Op.MemberDecorate) < ops.index(Op.TypeFloat) < ops.index(Op.Function)
    function = ops[ops.index(Op.Function) :]
    assert function[:3] == [Op.Function, Op.Label, Op.Variable]
    results = [
        operands[LAYOUT[op].index("result")]
        for op, operands in split_instructions(ws)
        if "result" in LAYOUT[op]
    ]
    assert len(set(results)) == len(results) and ws[3] == max(results) + 1  # the id bound


def test_the_assembled_module_passes_spirv_val(tmp_path: Path) -> None:
    require_tool("spirv-val")
    path = tmp_path / "add.spv"
    path.write_bytes(_add_module().to_bytes())
    run = subprocess.run(
        ["spirv-val", "--target-env", "vulkan1.1", str(path)], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout + run.stderr


# ---------------------------------------------------------------- the disassembler


def test_disassembly_names_ids_and_prints_enumerants() -> None:
    text = disassemble(_add_module().words())
    assert text.startswith("; SPIR-V\n; Version: 1.3\n")
    for line in (
        'OpEntryPoint GLCompute %main "main" %',
        "OpExecutionMode %main LocalSize 64 1 1",
        "OpDecorate %x NonWritable",
        "BuiltIn GlobalInvocationId",
        "%uint = OpTypeInt 32 0",
        "%float_inf = OpConstant %float 0x1p+128",
        "OpExtInst %float %glsl Exp %",
        "OpAccessChain %_ptr_StorageBuffer_float %x %uint_0 %",
    ):
        assert line in text, line


def test_disassembly_reassembles_with_spirv_as(tmp_path: Path) -> None:
    require_tool("spirv-as")
    m = _add_module()
    (tmp_path / "a.spvasm").write_text(disassemble(m.words()))
    run = subprocess.run(
        [
            "spirv-as",
            "--target-env",
            "vulkan1.1",
            str(tmp_path / "a.spvasm"),
            "-o",
            str(tmp_path / "a.spv"),
        ],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    data = (tmp_path / "a.spv").read_bytes()
    back = list(struct.unpack(f"<{len(data) // 4}I", data))
    assert [op for op, _ in split_instructions(back)] == [
        op for op, _ in split_instructions(m.words())
    ]


def test_unknown_opcodes_print_as_comments_and_garbage_is_refused() -> None:
    ws = Module().words() + [1 << 16 | 4000]
    assert "; unknown opcode 4000" in disassemble(ws)
    with pytest.raises(ValueError, match="magic"):
        disassemble([1, 2, 3, 4, 5])
    with pytest.raises(ValueError, match="malformed"):
        split_instructions(Module().words() + [9 << 16 | 5])


def test_spirv_dis_agrees_on_every_opcode(tmp_path: Path) -> None:
    require_tool("spirv-dis")
    assert shutil.which("spirv-dis")
    (tmp_path / "a.spv").write_bytes(_add_module().to_bytes())
    run = subprocess.run(["spirv-dis", str(tmp_path / "a.spv")], capture_output=True, text=True)
    theirs = [t for line in run.stdout.splitlines() for t in line.split() if t.startswith("Op")]
    ours = [
        t
        for line in disassemble(_add_module().words()).splitlines()
        for t in line.split()
        if t.startswith("Op")
    ]
    assert theirs == ours
