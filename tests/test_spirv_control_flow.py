"""Hand-built IR that the zoo does not reach, through the SPIR-V backend, spirv-val and wgpu.

The scheduler's kernels use a subset of the IR; these kernels cover the rest
of what `mimir.codegen.backends.spirv.body` emits: `Select`, `&&` and `||` whose lazy
side loads (a selection and an `OpPhi`, so a guarded index past the end is
never read), a helper that assigns its parameter and returns from inside a
loop, an `if`/`else` whose branches both return (an unreachable merge block),
a loop whose body always returns (a bare continue target), arithmetic shifts,
bit casts and float16 constants, inf among them. Each kernel must pass
`spirv-val`, and running it through wgpu must give what Python computes.

Then nan, inf and signed zeros, which random inputs in [-1, 1) never reach,
through the lowering's nan-propagating `maximum`, saturating casts and
Python's `//` and `%`, compared with the shim.
"""

from __future__ import annotations

import json
import math
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest
from harness import assert_close, require_tool, shim_reference

from mimir.codegen import compile_source
from mimir.codegen.backends import SPIRV
from mimir.codegen.ir import (
    Assign,
    Binary,
    Bitcast,
    BufferParam,
    Builtin,
    Call,
    Cast,
    Const,
    For,
    Helper,
    If,
    Kernel,
    Let,
    Load,
    Return,
    Select,
    Store,
    Unary,
    Uniform,
    Var,
)

F32, U32, I32, BOOL = "f32", "u32", "i32", "bool"
LANES = 64


def _f(v: float, t: str = F32) -> Const:
    return Const(v, t)


def _u(v: int) -> Const:
    return Const(v, U32)


def _bin(op: str, a: Any, b: Any, t: str | None = None) -> Binary:
    compare = op in ("<", "<=", ">", ">=", "==", "!=", "&&", "||")
    return Binary(op, a, b, t or (BOOL if compare else a.type))


def _helpers() -> list[Helper]:
    a, k = Var("$a", F32), Var("$k", U32)
    twice_until = Helper(
        "twice_until",
        (a,),
        F32,
        (
            Assign(a, _bin("*", a, _f(2.0))),
            For(
                k,
                _u(0),
                _u(10),
                _u(1),
                [If(_bin(">", a, _f(3.0)), [Return(a)]), Assign(a, _bin("+", a, _f(1.0)))],
            ),
            Return(a),
        ),
    )
    b, j = Var("$b", F32), Var("$j", U32)
    sign_in_loop = Helper(
        "sign_in_loop",
        (b,),
        F32,
        (
            For(
                j,
                _u(0),
                _u(4),
                _u(1),
                [If(_bin("<", b, _f(0.0)), [Return(_f(-1.0))], [Return(_f(1.0))])],
            ),
            Return(_f(0.0)),
        ),
    )
    return [twice_until, sign_in_loop]


def probe_kernel() -> Kernel:
    i, n = Builtin("local_x"), Uniform("N", U32)
    inb, v, w, z = Var("$inb", BOOL), Var("$v", F32), Var("$w", BOOL), Var("$z", BOOL)
    xi = Load("x", i, F32)
    flag = _bin("|", Select(w, _u(1), _u(0), U32), Select(z, _u(2), _u(0), U32))
    shifted = _bin(">>", _bin("*", Cast(i, I32), Const(-3, I32)), _u(1), I32)
    half = Select(
        _bin("==", i, _u(0)),
        Const(-math.inf, "f16"),
        Cast(_bin("*", Cast(i, F32), _f(0.5)), "f16"),
        "f16",
    )
    body = [
        Let(inb, _bin("<", i, n)),
        Let(v, Select(inb, xi, _f(-1.0), F32)),
        Let(w, _bin("&&", inb, _bin(">", xi, _f(0.0)))),
        Let(z, _bin("||", Unary("!", inb, BOOL), _bin("<", xi, _f(0.0)))),
        Store("flags", i, flag),
        Store("ints", i, _bin("^", shifted, Unary("~", Bitcast(_u(0), I32), I32))),
        Store("halfs", i, half),
        If(Unary("!", inb, BOOL), [Return()]),
        Store("out", i, _bin("+", Call("twice_until", (v,), F32), Call("sign_in_loop", (v,), F32))),
    ]
    return Kernel(
        name="probe",
        what="ew",
        workgroup_size=(LANES, 1, 1),
        workgroups=(1, 1, 1),
        buffers=[
            BufferParam("x", F32, "read"),
            BufferParam("out", F32, "read_write"),
            BufferParam("flags", U32, "read_write"),
            BufferParam("ints", I32, "read_write"),
            BufferParam("halfs", "f16", "read_write"),
        ],
        uniform_fields=[("N", U32)],
        uses_uniform=True,
        shared=[],
        body=body,
        helpers=_helpers(),
    )


def _manifest(printed: Any) -> dict[str, Any]:
    dtypes = {
        "x": "float32",
        "out": "float32",
        "flags": "uint32",
        "ints": "int32",
        "halfs": "float16",
    }
    return {
        "format": "mimir-manifest/1",
        "function": "probe",
        "source": "probe.py",
        "backend": "spirv",
        "dims": [{"name": "N", "min": 1, "max": LANES, "multiple_of": None}],
        "buffers": [
            {
                "name": name,
                "role": "input" if name == "x" else "output",
                "dtype": dtype,
                "shape": ["N"] if name in ("x", "out") else [LANES],
            }
            for name, dtype in dtypes.items()
        ],
        "uniform": {"fields": [{"name": "N", "type": "u32"}]},
        "kernels": [
            {
                "file": "probe.spv",
                "entry_point": printed.entry_point,
                "workgroup_size": [LANES, 1, 1],
                "workgroups": [1, 1, 1],
                "bindings": [
                    {"buffer": b, "group": g, "binding": k, "access": a}
                    for b, g, k, a in printed.bindings
                ],
                "uniform_binding": {"group": 0, "binding": 5},
            }
        ],
    }


def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def _expected(x: list[float], n: int) -> dict[str, list]:
    def twice_until(a: float) -> float:
        a = _f32(a * 2)
        for _ in range(10):
            if a > 3.0:
                return a
            a = _f32(a + 1.0)
        return a

    flags, out = [], []
    for i in range(LANES):
        w = i < n and x[i] > 0.0
        z = not i < n or x[i] < 0.0
        flags.append((1 if w else 0) | (2 if z else 0))
    for i in range(n):
        out.append(_f32(twice_until(x[i]) + (-1.0 if x[i] < 0.0 else 1.0)))
    ints = [((-3 * i) >> 1) ^ -1 for i in range(LANES)]
    halfs = [-math.inf] + [i * 0.5 for i in range(1, LANES)]
    return {"out": out, "flags": flags, "ints": ints, "halfs": halfs}


def _function_body(text: str, name: str) -> str:
    """The disassembly of one function, from its `OpFunction` to its `OpFunctionEnd`."""
    start = text.index(f"%{name} = OpFunction ")
    return text[start : text.index("OpFunctionEnd", start)]


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], str]:
    printed = SPIRV().print_kernel(probe_kernel(), "probe")
    assert printed.data is not None
    folder = tmp_path_factory.mktemp("probe")
    (folder / "probe.spv").write_bytes(printed.data)
    return folder, _manifest(printed), printed.text


def test_the_probe_passes_spirv_val(probe: tuple[Path, dict[str, Any], str]) -> None:
    require_tool("spirv-val")
    folder, _, _ = probe
    run = subprocess.run(
        ["spirv-val", "--target-env", "vulkan1.1", str(folder / "probe.spv")],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_lazy_loads_are_branches_and_dead_ends_are_unreachable(
    probe: tuple[Path, dict[str, Any], str],
) -> None:
    _, _, text = probe
    assert text.count("OpPhi") == 3  # the select and the `&&` and `||` that load
    # The kernel's own `&&` and `||` guard loads, so they branch; the f16 rounding
    # helper combines register values eagerly, which is allowed.
    kernel = _function_body(text, "probe")
    assert "OpLogicalAnd" not in kernel and "OpLogicalOr" not in kernel
    assert "OpUnreachable" in text  # if/else whose branches both return
    assert text.count("OpLoopMerge") == 2
    assert "OpShiftRightArithmetic" in text
    assert "OpCapability Float16" in text


@pytest.mark.parametrize("n", [1, 40, LANES])
def test_the_probe_runs_on_wgpu_as_python_computes(
    probe: tuple[Path, dict[str, Any], str], n: int
) -> None:
    require_tool("wgpu")
    from mimir.runtime.wgpu_runner import run_manifest

    folder, manifest, _ = probe
    x = [_f32(math.sin(k * 1.7) * 0.9) for k in range(n)]
    x[0] = 0.0
    actual = run_manifest(manifest, folder, {"x": x}, {"N": n})
    expected = _expected(x, n)
    dtypes = {"out": "float32", "flags": "uint32", "ints": "int32", "halfs": "float16"}
    for name, values in expected.items():
        assert_close(actual[name], values, dtypes[name], label=name)


# ---------------------------------------------------------------- special values, end to end

SPECIAL_SOURCE = """
from mimir.array import Dim, Tensor, float32, gpu, int32, maximum, minimum, uint32

N = Dim("N")


@gpu
def special(x: Tensor[float32, N], y: Tensor[float32, N]):
    return (
        maximum(x, y) + minimum(x, y) * 0.5,
        x.clip(-2.0, 2.0),
        x.log() + y.sqrt(),
        x // y,
        x % y,
    )


@gpu
def special_casts(x: Tensor[float32, N], y: Tensor[float32, N]):
    return (
        x.astype(int32),
        x.astype(uint32),
        x.relu() + x.tanh() + x.sigmoid() + x.gelu() + x.exp(),
        (x == y).astype(float32) + (x != y).astype(float32) * 2.0 + (x < y).astype(float32) * 4.0,
    )
"""
# No subnormals: GPUs may flush them to zero, which the shim does not model.
SPECIAL = (math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 0.5, 3e9, -3e9, 5e9)


@pytest.mark.parametrize("function", ["special", "special_casts"])
def test_nan_inf_and_signed_zero_follow_the_shim(function: str, tmp_path: Path) -> None:
    """nan propagation, saturating casts, floor division and modulo by zero and by inf."""
    require_tool("wgpu")
    from mimir.runtime.wgpu_runner import run_manifest

    source = tmp_path / "special.py"
    source.write_text(SPECIAL_SOURCE)
    result = compile_source(str(source), SPECIAL_SOURCE, ["spirv"], function=function)
    assert result.ok, [d.message for d in result.diagnostics]
    for name, content in result.files.items():
        target = tmp_path / name
        target.write_bytes(content) if isinstance(content, bytes) else target.write_text(content)
    manifest = json.loads((tmp_path / f"{function}.manifest.json").read_text())
    xs = [a for a in SPECIAL for _ in SPECIAL]
    ys = [b for _ in SPECIAL for b in SPECIAL]
    inputs, dims = {"x": xs, "y": ys}, {"N": len(xs)}
    expected = shim_reference(source, function, inputs, dims)
    actual = run_manifest(manifest, tmp_path, inputs, dims)
    for name, values in expected.items():
        dtype = next(b["dtype"] for b in manifest["buffers"] if b["name"] == name)
        assert_close(actual[name], values, dtype, label=name)
