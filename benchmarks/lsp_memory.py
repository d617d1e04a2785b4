"""Peak memory of checking one big file, on the command line and in the language server:
`python benchmarks/lsp_memory.py --sizes 0.5 1 2 5`.

Two kinds of document: `library` (modules of Python's standard library, pasted together until
the size is reached: ordinary code, no kernels) and `kernels` (examples/ok/mlp.py's kernel and
host code repeated under new names: the densest kind of file Mimir checks). For each size,
`mimir check --no-cache FILE` (its peak resident memory) and `mimir lsp` with the document
opened (its peak resident memory once the diagnostics are published). A document over
`max-file-size` gets one GPU003 diagnostic and no check; its row says `skipped`.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from test_lsp_transport import INIT, Client, notify, request  # noqa: E402


def library(size: int) -> str:
    parts, total = [], 0
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        try:
            compile(text, str(path), "exec")
        except (SyntaxError, ValueError):
            continue
        parts.append(text)
        total += len(text)
        if total >= size:
            break
    return "\n".join(parts)[:size].rsplit("\n\n", 1)[0] + "\n"


def kernels(size: int) -> str:
    source = (REPO / "examples" / "ok" / "mlp.py").read_text()
    head = "".join(line for line in source.splitlines(True) if line.startswith(("from", "import")))
    lines = source.splitlines(True)
    body = "".join(line for line in lines if not line.startswith(("from", "import")))
    body = body.split('if __name__ == "__main__":')[0]
    out, total, i = [head], len(head), 0
    while True:  # whole copies, up to the size and not past it
        copy = body.replace("def ", f"def k{i}_").replace('Dim("B"', f'Dim("B{i}"')
        if total + len(copy) > size:
            return "".join(out)
        out.append(copy)
        total += len(copy)
        i += 1


def cli_peak(path: Path) -> tuple[float, float]:
    """(seconds, peak MB) of `mimir check --no-cache` on `path`, in a child of a child."""
    code = (
        "import resource, subprocess, sys, time; t = time.monotonic(); "
        "subprocess.run([sys.executable, '-m', 'mimir', 'check', '--no-cache', sys.argv[1]], "
        "capture_output=True); print(time.monotonic() - t, "
        "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)"
    )
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True)
    seconds, peak = out.stdout.split()
    return float(seconds), float(peak)


def lsp_peak(path: Path) -> tuple[float, float, list[str]]:
    """(seconds, peak MB, diagnostic codes) of `mimir lsp` opening `path`."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "mimir", "lsp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=path.parent,
    )
    assert proc.stdin and proc.stdout
    stdin, stdout = proc.stdin, proc.stdout

    def send(data: bytes) -> None:
        stdin.write(data)
        stdin.flush()

    client = Client(send, lambda: os.read(stdout.fileno(), 1 << 16))
    send(request(1, "initialize", {**INIT, "rootUri": path.parent.as_uri()}))
    client.reply(1)
    peak, done = [0], [False]

    def watch() -> None:
        while not done[0]:
            try:
                for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
                    if line.startswith("VmHWM"):
                        peak[0] = max(peak[0], int(line.split()[1]))
            except OSError:
                pass
            time.sleep(0.2)

    threading.Thread(target=watch, daemon=True).start()
    start = time.monotonic()
    uri = path.as_uri()
    item = {"uri": uri, "languageId": "python", "version": 1, "text": path.read_text()}
    send(notify("textDocument/didOpen", {"textDocument": item}))
    codes = [d["code"] for d in client.diagnostics(uri)]
    seconds = time.monotonic() - start
    time.sleep(0.5)
    done[0] = True
    send(request(9, "shutdown") + notify("exit"))
    proc.wait(timeout=120)
    return seconds, peak[0] / 1024, codes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[0.5, 1.0, 2.0, 5.0])
    parser.add_argument("--kinds", nargs="+", default=["library", "kernels"])
    args = parser.parse_args(argv)
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    rows = []
    with tempfile.TemporaryDirectory(prefix="mimir-lsp-memory-") as tmp:
        for kind in args.kinds:
            for mb in args.sizes:
                path = Path(tmp) / f"{kind}_{mb}.py"
                path.write_text((library if kind == "library" else kernels)(int(mb * 2**20)))
                cli_s, cli_mb = cli_peak(path)
                lsp_s, lsp_mb, codes = lsp_peak(path)
                note = "skipped (GPU003)" if codes == ["GPU003"] else f"{len(codes)} diagnostics"
                rows.append((kind, mb, cli_s, cli_mb, lsp_s, lsp_mb, note))
                print(*rows[-1], flush=True)
    print(f"{'kind':<8} {'MiB':>5} {'check s':>8} {'check MB':>9} {'lsp s':>7} {'lsp MB':>7}  lsp")
    for kind, mb, cli_s, cli_mb, lsp_s, lsp_mb, note in rows:
        row = f"{kind:<8} {mb:>5.1f} {cli_s:>8.1f} {cli_mb:>9.0f} {lsp_s:>7.1f} {lsp_mb:>7.0f}"
        print(f"{row}  {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
