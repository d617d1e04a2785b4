"""The order of a function's launches (`mimir.codegen.passes.launch_order`): each launch after the
launches whose results it reads, and the invariant every manifest is checked against before
any file is written (GPU073 when it breaks, never an emitted kernel)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mimir.codegen import compile_source
from mimir.codegen.ir import BufferParam, Kernel
from mimir.codegen.passes import launch_order

REPO = Path(__file__).resolve().parent.parent
WEIGHTED = REPO / "tests" / "kernels" / "weighted.py"


def _kernel(name: str, **access: str) -> Kernel:
    buffers = [BufferParam(b, "f32", a) for b, a in access.items()]
    return Kernel(name, "ew", (64, 1, 1), (1, 1, 1), buffers, [], False, [], [], [])


def _manifest(buffers: dict[str, str], *launches: dict[str, str], zero=()) -> dict:
    return {
        "buffers": [
            {"name": n, "role": r, **({"zero": True} if n in zero else {})}
            for n, r in buffers.items()
        ],
        "kernels": [
            {
                "file": f"k_{k}.wgsl",
                "bindings": [{"buffer": b, "access": a} for b, a in launch.items()],
            }
            for k, launch in enumerate(launches)
        ],
    }


def test_a_row_launch_runs_after_the_reduction_it_divides_by() -> None:
    """`(x.max(axis=1) * w).sum() / w.sum()`: the row launch's last workgroup reads
    `w.sum()`, so the launch that reduces `w` comes first, on every backend."""
    result = compile_source(
        str(WEIGHTED), WEIGHTED.read_text(), ["all"], function="row_max_over_total"
    )
    assert result.ok, [d.message for d in result.diagnostics]
    for backend in ("msl", "wgsl", "ptx", "spirv"):
        manifest = json.loads(result.files[f"{backend}/row_max_over_total.manifest.json"])
        assert [k["file"].rsplit("_", 1)[1].split(".")[0] for k in manifest["kernels"]] == [
            "reduce",
            "row",
        ]
        assert launch_order.violations(manifest) == []


def test_a_hand_broken_launch_order_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the scheduler's order kept as it was (the row launch first), every backend's
    manifest breaks the invariant: GPU073 naming the launches and the buffer, no files."""
    monkeypatch.setattr(
        launch_order, "dependency_order", lambda kernels, roles: list(range(len(kernels)))
    )
    result = compile_source(
        str(WEIGHTED), WEIGHTED.read_text(), ["wgsl", "spirv"], function="row_max_over_total"
    )
    assert result.files == {}
    assert [d.code for d in result.diagnostics] == ["GPU073", "GPU073"]
    message = result.diagnostics[0].message
    assert "internal error" in message
    assert "launch 0 (`row_max_over_total_0_row.wgsl`) reads scratch `scratch2`" in message
    assert "launch 1 (`row_max_over_total_1_reduce.wgsl`) writes it after" in message


def test_launches_that_read_each_other_in_a_cycle_are_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(launch_order, "dependency_order", lambda kernels, roles: None)
    result = compile_source(
        str(WEIGHTED), WEIGHTED.read_text(), ["wgsl"], function="row_max_over_total"
    )
    assert result.files == {}
    assert [d.code for d in result.diagnostics] == ["GPU073"]
    assert "in a cycle" in result.diagnostics[0].message


def test_dependency_order_moves_a_reader_after_its_writer_and_keeps_the_rest() -> None:
    roles = {"x": "input", "a": "scratch", "b": "scratch", "out": "output"}
    reader = _kernel("reader", x="read", a="read", out="read_write")
    writer = _kernel("writer", x="read", a="read_write")
    other = _kernel("other", x="read", b="read_write")
    assert launch_order.dependency_order([reader, other, writer], roles) == [1, 2, 0]
    assert launch_order.dependency_order([writer, other, reader], roles) == [0, 1, 2]


def test_dependency_order_keeps_the_order_of_an_inout_parameters_launches() -> None:
    """A launch that reads an `InOut` parameter's old value and the one that writes it
    keep the scheduler's order either way round."""
    roles = {"p": "inout", "t": "scratch"}
    reads_old = _kernel("reads_old", p="read", t="read_write")
    writes = _kernel("writes", p="read_write", t="read")
    assert launch_order.dependency_order([reads_old, writes], roles) == [0, 1]


def test_dependency_order_finds_a_cycle() -> None:
    roles = {"a": "scratch", "b": "scratch", "c": "scratch"}
    first = _kernel("first", a="read", b="read_write")
    second = _kernel("second", b="read", c="read_write")
    third = _kernel("third", c="read", a="read_write")
    assert launch_order.dependency_order([first, second, third], roles) is None
    # two launches, each reading what the other writes
    one = _kernel("one", a="read", b="read_write")
    other = _kernel("other", b="read", a="read_write")
    assert launch_order.dependency_order([one, other], roles) is None


def test_each_broken_rule_is_named() -> None:
    roles = {"x": "input", "s": "scratch", "out": "output", "lost": "output"}
    found = launch_order.violations(
        _manifest(roles, {"x": "read_write", "s": "read"}, {"s": "read_write", "out": "read_write"},
                  {"out": "read_write"})
    )  # fmt: skip
    assert found == [
        "launch 0 (`k_0.wgsl`) writes the input `x`",
        "launch 0 (`k_0.wgsl`) reads scratch `s` before any launch writes it; launch 1 "
        "(`k_1.wgsl`) writes it after",
        "no launch writes the output `lost`",
        "launches 1 and 2 both write `out`, which the kernels do not keep themselves (no "
        "`zero`): which write the readers see depends on the order",
    ]
    unknown = launch_order.violations(
        _manifest({"out": "output"}, {"out": "read_write", "y": "read"})
    )
    assert unknown == ["launch 0 (`k_0.wgsl`) binds `y`, which is no buffer of the manifest"]


def test_a_zeroed_buffer_may_be_read_first_and_written_by_every_launch() -> None:
    roles = {"count": "scratch", "out": "output"}
    manifest = _manifest(
        roles, {"count": "read"}, {"count": "read_write", "out": "read_write"},
        {"count": "read_write"}, zero=("count",),
    )  # fmt: skip
    assert launch_order.violations(manifest) == []
