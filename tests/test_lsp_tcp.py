"""`mimir lsp --tcp`: the same server over a socket answers `initialize`."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time


def _message(payload: dict) -> bytes:
    body = json.dumps(payload).encode()
    return f"Content-Length: {len(body)}\r\n\r\n".encode() + body


def _read(sock: socket.socket) -> dict:
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(4096)
    head, _, rest = data.partition(b"\r\n\r\n")
    length = int(next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length"))
                 .split(b":")[1])  # fmt: skip
    while len(rest) < length:
        rest += sock.recv(4096)
    return json.loads(rest[:length])


def test_tcp_server_answers_initialize():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "mimir", "lsp", "--tcp", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=30)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        with sock:
            init = {"processId": None, "rootUri": None, "capabilities": {}}
            sock.sendall(
                _message({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
            )
            reply = _read(sock)
            assert reply["id"] == 1
            caps = reply["result"]["capabilities"]
            assert caps["hoverProvider"] and caps["inlayHintProvider"]
            assert caps["codeActionProvider"] and caps["definitionProvider"]
            assert reply["result"]["serverInfo"]["name"] == "mimir"
    finally:
        server.terminate()
        server.wait(timeout=30)
