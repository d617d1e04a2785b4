"""docs/editors.md's Neovim set-up works as written, in the Neovim Debian ships (0.7.2).

The page's block for Neovim 0.7 to 0.10 and its diagnostics settings become an `init.lua`;
Neovim runs headless on `examples/bad_matmul.py` with `mimir` on its PATH, waits for the
server's diagnostic, opens the diagnostic window on the `x @ w` and writes what it shows,
which must be the text the page shows (message, why, fix, both notes). The 0.11 block
needs a newer Neovim than Debian has: it is compiled by Neovim's Lua, so at least it parses.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from harness import require_tool

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "editors.md"
_LUA = re.compile(r"```lua\n(.*?)```", re.DOTALL)

DRIVE = """
local ok = vim.wait(90000, function() return #vim.diagnostic.get(0) > 0 end, 50)
local out = {}
if ok then
  vim.api.nvim_win_set_cursor(0, {10, 13})
  local bufnr = vim.diagnostic.open_float(nil, { focus = false })
  for _, l in ipairs(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)) do
    table.insert(out, l)
  end
else
  table.insert(out, "no diagnostics")
end
vim.fn.writefile(out, vim.env.MIMIR_NVIM_OUT)
vim.cmd("qa!")
"""


def _blocks() -> dict[str, str]:
    text = PAGE.read_text(encoding="utf-8")
    blocks = _LUA.findall(text)
    found = {}
    for block in blocks:
        if block.startswith("-- Neovim 0.7 to 0.10"):
            found["0.7"] = block
        elif block.startswith("-- diagnostics:"):
            found["settings"] = block
        elif "vim.lsp.config(" in block:
            found["0.11"] = block
    return found


def _shown_on_the_page() -> list[str]:
    text = PAGE.read_text(encoding="utf-8")
    after = text.split("which shows, on the `x @ w` of `examples/bad_matmul.py`:", 1)[1]
    return after.split("```\n", 2)[1].rstrip("\n").splitlines()


def test_the_page_has_every_block() -> None:
    assert set(_blocks()) == {"0.7", "settings", "0.11"}


def test_the_neovim_set_up_runs_in_debian_neovim(tmp_path: Path) -> None:
    require_tool("nvim")
    blocks = _blocks()
    (tmp_path / "init.lua").write_text(blocks["0.7"] + "\n" + blocks["settings"])
    (tmp_path / "drive.lua").write_text(DRIVE)
    (tmp_path / "examples").mkdir()
    shutil.copy(ROOT / "examples" / "bad_matmul.py", tmp_path / "examples")
    (tmp_path / "pyproject.toml").write_text("[tool.mimir]\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    mimir = bin_dir / "mimir"  # the `mimir` of this interpreter, as an installed script is
    mimir.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m mimir "$@"\n')
    mimir.chmod(0o755)
    out = tmp_path / "shown.txt"
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "MIMIR_NVIM_OUT": str(out),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),  # no user configuration
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }
    run = subprocess.run(
        ["nvim", "--headless", "-u", "init.lua", "-c", "luafile drive.lua",
         "examples/bad_matmul.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert out.read_text().splitlines() == _shown_on_the_page()


def test_the_newer_block_parses(tmp_path: Path) -> None:
    require_tool("nvim")
    source = tmp_path / "newer.lua"
    source.write_text(_blocks()["0.11"])
    check = tmp_path / "check.lua"
    check.write_text(
        f"local ok, err = loadfile({str(source)!r})\n"
        "vim.fn.writefile({ok and 'ok' or tostring(err)}, vim.env.MIMIR_NVIM_OUT)\n"
        "vim.cmd('qa!')\n"
    )
    out = tmp_path / "out.txt"
    env = {**os.environ, "MIMIR_NVIM_OUT": str(out), "XDG_CONFIG_HOME": str(tmp_path)}
    run = subprocess.run(
        ["nvim", "--headless", "-u", "NONE", "-c", f"luafile {check}"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert out.read_text().strip() == "ok"
