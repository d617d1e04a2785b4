"""benchmarks/triton_anchors.py covers every op of benchmarks/roofline_ops.py, and the
counters benchmarks/kernel_static.py uses on Triton's PTX and SASS find loops.

Triton itself is not needed (it is in the `bench` extra, not `test`): the anchor list is
read with MIMIR_ANCHORS_SPEC_ONLY=1, which keeps the module from importing triton.
"""

from __future__ import annotations

import ast
from pathlib import Path

from support import import_file

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


def _gpu_functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and any(isinstance(d, ast.Name) and d.id == "gpu" for d in node.decorator_list)
    }


def test_every_roofline_op_has_one_anchor(monkeypatch):
    monkeypatch.setenv("MIMIR_ANCHORS_SPEC_ONLY", "1")
    anchors = import_file(BENCH / "triton_anchors.py")
    assert anchors.AVAILABLE is False
    names = [a.function for a in anchors.ANCHORS]
    assert sorted(names) == sorted(_gpu_functions(BENCH / "roofline_ops.py"))
    source = (BENCH / "triton_anchors.py").read_text()
    for anchor in [*anchors.ANCHORS, anchors.TF32]:
        assert f"def {anchor.kernel}(" in source
        params = set(anchor.signature)
        assert set(anchor.constexprs) <= params and set(anchor.divisible) <= params


PTX = """
.visible .entry k(
)
{
\t.reg .b32 %r<4>;
\tmov.u32 %r1, 0;
$L__loop:
\tadd.s32 %r1, %r1, 1;  // body
\tsetp.lt.s32 %p1, %r1, 8;
\t@%p1 bra $L__loop;
\tret;
}
"""

SASS = [
    (0x00, "MOV R1, RZ"),
    (0x10, "IADD3 R1, R1, 0x1, RZ"),
    (0x20, "ISETP.GE.AND P0, PT, R1, 0x8, PT"),
    (0x30, "@!P0 BRA 0x10"),
    (0x40, "EXIT"),
    (0x50, "BRA 0x50"),
]


def test_loop_counters():
    ks = import_file(BENCH / "kernel_static.py")
    assert ks.ptx_count(PTX) == 5
    assert ks.ptx_loop_body(PTX) == 3
    assert ks.ptx_loop_body(PTX.replace("bra $L__loop", "bra $L__out")) == 0
    assert ks.sass_loop_body(SASS) == 3  # the self-branch after EXIT is not a loop
    assert ks.sass_loop_body(SASS[:3] + SASS[4:]) == 0
