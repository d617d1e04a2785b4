"""Long commands show a progress bar on a terminal, and only there.

`compile-gpu` of many functions and `verify` draw a rich bar on stderr when it is a
terminal (a pseudo-terminal here) and the run lasts past half a second; piped, stderr
holds no bar (verify's one line per function stays). `mimir check` of a large tree has
had its bar since the CI gate (tests/test_ci_runs.py).
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

from harness import require_tool

from mimir.progress import Bar

KERNELS = "from mimir.array import Dim, Tensor, float32, gpu\n\nN = Dim('N')\n" + "".join(
    f"\n\n@gpu\ndef k{i}(x: Tensor[float32, N, 8], w: Tensor[float32, 8, 4]) "
    f"-> Tensor[float32, N, 4]:\n    return (x @ w * {i + 1}.0).softmax()\n"
    for i in range(8)
)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}  # CI turns bars off
    # the bar from the first step, however fast this machine compiles
    env.update(
        TERM="xterm-256color", COLUMNS="120", XDG_RUNTIME_DIR="/tmp", MIMIR_PROGRESS_DELAY="0"
    )
    return env


def _on_a_terminal(args: list[str], cwd: Path) -> tuple[int, str, str]:
    """Run `mimir ARGS` with stderr on a pseudo-terminal: (status, stdout, stderr)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mimir", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=slave,
        env=_env(),
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the other end closed
            break
        if not data:
            break
        chunks.append(data)
    stdout = proc.stdout.read().decode() if proc.stdout else ""
    status = proc.wait(timeout=600)
    os.close(master)
    return status, stdout, b"".join(chunks).decode(errors="replace")


def _piped(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mimir", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=600,
    )


def test_compile_gpu_of_many_functions_shows_a_bar_on_a_terminal_only(tmp_path: Path) -> None:
    (tmp_path / "many.py").write_text(KERNELS)
    args = ["compile-gpu", "many.py", "--backend", "all", "-o", "out"]
    status, stdout, stderr = _on_a_terminal(args, tmp_path)
    assert status == 0, stdout + stderr
    assert "compiling" in stderr and "━" in stderr and "/8" in stderr
    assert stdout.startswith("wrote ")
    piped = _piped([*args[:-1], "out2"], tmp_path)
    assert piped.returncode == 0 and piped.stderr == ""


def test_verify_shows_a_bar_on_a_terminal_and_a_line_per_function_anywhere(
    tmp_path: Path,
) -> None:
    require_tool("wgpu")
    (tmp_path / "many.py").write_text(KERNELS)
    args = ["verify", "many.py", "--backend", "wgsl"]
    status, stdout, stderr = _on_a_terminal(args, tmp_path)
    assert status == 0, stdout + stderr
    assert "verifying" in stderr and "━" in stderr
    assert "many.py: k7: ok (" in stderr
    piped = _piped(args, tmp_path)
    assert piped.returncode == 0
    lines = piped.stderr.splitlines()
    assert [line.split(": ")[1] for line in lines] == [f"k{i}" for i in range(8)]
    assert "━" not in piped.stderr


def test_a_bar_waits_before_it_draws(capsys) -> None:
    with Bar("quick", total=3, show=True, delay=60) as bar:
        bar.step("a")
        bar.note("a: done")
    assert capsys.readouterr().err == "a: done\n"
