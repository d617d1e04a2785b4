"""`mimir explain CODE FILE[:LINE]` re-derives a failure: counterexample and chain of facts."""

from __future__ import annotations

import textwrap
from pathlib import Path

from typer.testing import CliRunner

from mimir.cli import app

ATTENTION = textwrap.dedent(
    """\
    from mimir.array import Dim, Tensor, float32, gpu

    T = Dim("T")
    D = Dim("D", max=64)


    @gpu
    def attn(q: Tensor[float32, T, D], k: Tensor[float32, T, D]) -> Tensor[float32, T, T]:
        s = q * 0.125
        h = s.relu()
        return h @ k
    """
)


def _explain(tmp_path: Path, *args: str) -> tuple[int, str]:
    path = tmp_path / "attention.py"
    path.write_text(ATTENTION)
    result = CliRunner().invoke(app, ["explain", *[a.replace("FILE", str(path)) for a in args]])
    return result.exit_code, result.output.replace(str(path), "FILE")


def test_explain_in_file_prints_the_chain_of_facts(tmp_path: Path) -> None:
    code, out = _explain(tmp_path, "GPU011", "FILE:11")
    assert code == 1
    assert out.splitlines() == [
        "FILE:11:12: error[GPU011]: matmul shape mismatch: left has K=D, right has K=T",
        "  why: matrix multiplication requires inner dimensions to match (A[M,K] @ B[K,N]); "
        "counterexample: T=1, D=2",
        "  fix: ensure the inner dimensions of both matrices are equal",
        "derivation:",
        "  FILE:8:10: `q` : Tensor[float32, T, D] (annotation)",
        "  FILE:8:36: `k` : Tensor[float32, T, D] (annotation)",
        "  FILE:9:9: `q * 0.125` : Tensor[float32, T, D]",
        "  FILE:10:9: `s.relu()` : Tensor[float32, T, D]",
        "  FILE:11:12: `h @ k` : fails here",
        "facts:",
        "  FILE:3:5: `T` is declared here (min=1)",
        "  FILE:4:5: `D` is declared here (min=1, max=64)",
        "  FILE:8:32: `q` axis 1 is D here",
        "  FILE:8:55: `k` axis 0 is T here",
        "counterexample: T=1, D=2",
    ]


def test_explain_without_line_covers_the_whole_file(tmp_path: Path) -> None:
    code, out = _explain(tmp_path, "gpu011", "FILE")
    assert code == 1 and "error[GPU011]" in out


def test_explain_with_nothing_to_explain_exits_clean(tmp_path: Path) -> None:
    code, out = _explain(tmp_path, "GPU011", "FILE:3")
    assert code == 0 and "nothing to explain" in out
    code, out = _explain(tmp_path, "GPU010", "FILE")
    assert code == 0 and "no GPU010" in out


def test_explain_unreadable_file_exits_2(tmp_path: Path) -> None:
    code, _ = _explain(tmp_path, "GPU011", str(tmp_path / "missing.py"))
    assert code == 2
