"""`mimir lsp` re-check latency: `didChange` to `publishDiagnostics`, against the cold CLI.

    python benchmarks/lsp_latency.py [--kernels 40] [--matmuls 1] [--edits 50] [--debounce-ms 20]

Writes a generated file of about 1,000 lines holding `--kernels` kernels (every
tenth with a bug), starts `mimir lsp` over stdio as an editor does, opens the
file and waits for its diagnostics (the first, cold check), then sends
`--edits` full-text edits, each inside one kernel (a constant changes, so no
line moves), waiting after each for the diagnostics of that version. The
latency of an edit is the wall time from writing `didChange` to reading its
`publishDiagnostics`, the debounce included. The same file is then checked by
`mimir check --no-cache` in a fresh process. Exits 1 if the server's final
diagnostics differ in count from the CLI's.

`--matmuls M` gives each kernel a stack of M square layers (`h @ w` and a bias, one line
each) instead of the one linear layer: `--matmuls 18` is a file of 40 kernels of 18
matmuls each, about 1,250 lines, the densest code an editor holds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEADER = '''"""Generated for benchmarks/lsp_latency.py."""

from mimir.array import Dim, Tensor, float32, gpu

N = Dim("N", min=1)
T = Dim("T", min=1, max=4096, multiple_of=4)

'''

KERNEL = '''

@gpu
def block_{i}(
    x: Tensor[float32, N, 64],
    w: Tensor[float32, 64, {out}],
    b: Tensor[float32, {out}],
    g: Tensor[float32, {out}],
) -> Tensor[float32, N, {out}]:
    """Linear layer, activation, then layer norm over the last axis."""
    h = x @ w{bug}
    h = h + b
    h = h.relu() * {scale}
    mean = h.mean(axis=-1, keepdims=True)
    centered = h - mean
    var = (centered * centered).mean(axis=-1, keepdims=True)
    normed = centered * (var + 1e-5).rsqrt()
    out = normed * g
    skip = out + h
    gate = skip.sigmoid()
    mixed = gate * skip + (1.0 - gate) * out
    clipped = mixed.clip(-6.0, 6.0)
    return clipped
'''


DEEP_KERNEL = '''

@gpu
def block_{i}(
    x: Tensor[float32, N, 64],
    w: Tensor[float32, 64, 64],
    v: Tensor[float32, 64, {out}],
    b: Tensor[float32, 64],
) -> Tensor[float32, N, {out}]:
    """{matmuls} layers: each a product, a bias and an activation."""
    h = x
{layers}    h = h.relu() * {scale}
    clipped = (h @ v{bug}).clip(-6.0, 6.0)
    return clipped
'''


def generate(kernels: int, matmuls: int = 1) -> str:
    parts = [HEADER]
    for i in range(kernels):
        bug = ".T" if i % 10 == 9 else ""  # [64, out].T cannot multiply [N, 64]
        out = 32 + (i % 4) * 32
        if matmuls == 1:
            parts.append(KERNEL.format(i=i, out=out, bug=bug, scale="1.0"))
            continue
        acts = ("relu", "sigmoid", "tanh")
        layers = "".join(
            f"    h = (h @ w + b).{acts[n % 3]}()\n" for n in range(matmuls - 1)
        )  # the last product is `h @ v`
        parts.append(
            DEEP_KERNEL.format(i=i, out=out, bug=bug, scale="1.0", matmuls=matmuls, layers=layers)
        )
    return "".join(parts)


class Client:
    """A minimal LSP client over the server's stdin and stdout."""

    def __init__(self, command: list[str]) -> None:
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.next_id = 0

    def send(self, method: str, params: object, request: bool = False) -> int | None:
        message: dict[str, object] = {"jsonrpc": "2.0", "method": method, "params": params}
        ident = None
        if request:
            self.next_id += 1
            ident = message["id"] = self.next_id
        body = json.dumps(message).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        self.proc.stdin.flush()
        return ident

    def read(self) -> dict:
        assert self.proc.stdout is not None
        length = 0
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("the server closed its output")
            if line in (b"\r\n", b"\n"):
                break
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        return json.loads(self.proc.stdout.read(length))

    def wait(self, method: str | None = None, ident: int | None = None, version=None) -> dict:
        while True:
            msg = self.read()
            if ident is not None and msg.get("id") == ident:
                return msg
            if method is not None and msg.get("method") == method:
                if version is None or msg["params"].get("version") == version:
                    return msg

    def close(self) -> None:
        ident = self.send("shutdown", None, request=True)
        self.wait(ident=ident)
        self.send("exit", None)
        self.proc.wait(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=40)
    parser.add_argument("--matmuls", type=int, default=1, help="products per kernel")
    parser.add_argument("--edits", type=int, default=50)
    parser.add_argument("--debounce-ms", type=int, default=20)
    args = parser.parse_args()

    text = generate(args.kernels, args.matmuls)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.py"
        path.write_text(text)
        uri = path.resolve().as_uri()

        command = [sys.executable, "-m", "mimir", "lsp", "--debounce-ms", str(args.debounce_ms)]
        client = Client(command)
        started = time.perf_counter()
        ident = client.send(
            "initialize",
            {"processId": None, "rootUri": Path(tmp).as_uri(), "capabilities": {}},
            request=True,
        )
        client.wait(ident=ident)
        client.send("initialized", {})
        opened = time.perf_counter()
        doc = {"uri": uri, "languageId": "python", "version": 1, "text": text}
        client.send("textDocument/didOpen", {"textDocument": doc})
        first = client.wait("textDocument/publishDiagnostics", version=1)
        cold_open = time.perf_counter() - opened
        startup = opened - started

        latencies = []
        current = text
        for n in range(args.edits):
            k = (n * 7) % args.kernels  # a different kernel each time, spread over the file
            start = current.index(f"def block_{k}(")
            end = current.index("return clipped", start)
            body = current[start:end]
            scale = "1.0" if "* 2.0" in body else "2.0"
            old = "* 1.0" if scale == "2.0" else "* 2.0"
            current = current[:start] + body.replace(old, f"* {scale}", 1) + current[end:]
            version = n + 2
            t0 = time.perf_counter()
            client.send(
                "textDocument/didChange",
                {
                    "textDocument": {"uri": uri, "version": version},
                    "contentChanges": [{"text": current}],
                },
            )
            last = client.wait("textDocument/publishDiagnostics", version=version)
            latencies.append(time.perf_counter() - t0)
        client.close()

        t0 = time.perf_counter()
        cli = subprocess.run(
            [sys.executable, "-m", "mimir", "check", "--no-cache", "--format", "json", str(path)],
            capture_output=True,
            text=True,
            check=False,
        )
        cli_s = time.perf_counter() - t0
        cli_count = len(json.loads(cli.stdout)["diagnostics"])

    lines = text.count("\n")
    latencies.sort()
    p50 = statistics.median(latencies)
    p95 = latencies[min(len(latencies) - 1, round(0.95 * (len(latencies) - 1)))]
    found = len(last["params"]["diagnostics"])
    print(
        f"{lines} lines, {args.kernels} kernels of {args.matmuls} matmuls, "
        f"{args.edits} edits (each inside one kernel), "
        f"debounce {args.debounce_ms} ms"
    )
    at_open = len(first["params"]["diagnostics"])
    print(f"diagnostics: server {found}, cli {cli_count}, at open {at_open}")
    print()
    print("| measurement                                   |       ms |")
    print("|-----------------------------------------------|----------|")
    print(f"| server start and initialize                   | {startup * 1000:8.1f} |")
    print(f"| didOpen to publishDiagnostics (cold server)   | {cold_open * 1000:8.1f} |")
    print(f"| didChange to publishDiagnostics, p50          | {p50 * 1000:8.1f} |")
    print(f"| didChange to publishDiagnostics, p95          | {p95 * 1000:8.1f} |")
    print(f"| didChange to publishDiagnostics, max          | {latencies[-1] * 1000:8.1f} |")
    print(f"| mimir check --no-cache (cold process)         | {cli_s * 1000:8.1f} |")
    return 0 if found == cli_count else 1


if __name__ == "__main__":
    sys.exit(main())
