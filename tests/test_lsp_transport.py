"""`mimir lsp` survives its transport: what a client sends can cost a message, never the server.

Driven over its real stdio (and TCP) with raw bytes, since a well-behaved client library cannot
send what these tests send: framing faults and bodies that are not UTF-8 JSON get a JSON-RPC
Parse error and the next message is answered; `shutdown`/`exit` give the exit status the LSP
specification asks for; each TCP connection is a session of its own; a request about a document
is answered from its newest text; a document over `max-file-size` gets one GPU003 and no check.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from mimir.lsp.transport import Frame, Framer, frame

ROOT = Path(__file__).resolve().parent.parent
INIT = {"processId": None, "rootUri": None, "capabilities": {}}
KERNEL = (
    "from mimir.array import Dim, Tensor, float32, gpu\n\n"
    'N = Dim("N")\n\n\n'
    "@gpu\n"
    "def scale(x: Tensor[float32, N, 4]) -> Tensor[float32, N, 4]:\n"
    "    y = x * 2.0\n"
    "    return y\n"
)


def request(ident: int, method: str, params: Any = None) -> bytes:
    payload = {"jsonrpc": "2.0", "id": ident, "method": method}
    if params is not None:
        payload["params"] = params
    return frame(json.dumps(payload).encode())


def notify(method: str, params: Any = None) -> bytes:
    payload = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        payload["params"] = params
    return frame(json.dumps(payload).encode())


def replies(data: bytes) -> list[dict]:
    framer = Framer()
    out = []
    for found in framer.feed(data):
        assert found.body is not None, found.fault  # the server's own framing is always sound
        out.append(json.loads(found.body))
    return out


def run_server(data: bytes, cwd: Path | None = None) -> tuple[int, list[dict], str]:
    """Feed `data` to `mimir lsp` on stdin, then close it; (exit status, messages, stderr)."""
    proc = subprocess.run(
        [sys.executable, "-m", "mimir", "lsp"],
        input=data,
        capture_output=True,
        timeout=300,
        cwd=cwd,
        env={**os.environ, "MIMIR_TRACEBACK": ""},
    )
    stderr = proc.stderr.decode(errors="replace")
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr[-3000:]
    return proc.returncode, replies(proc.stdout), stderr


def by_id(messages: list[dict]) -> dict[Any, dict]:
    return {m.get("id"): m for m in messages if "result" in m or "error" in m}


# ---------------------------------------------------------------- framing, without a process


def test_the_framer_reads_messages_split_anywhere() -> None:
    stream = request(1, "a") + request(2, "b", {"x": "é"}) + notify("c")
    for cut in range(1, len(stream)):
        framer = Framer()
        found = [*framer.feed(stream[:cut]), *framer.feed(stream[cut:])]
        assert [json.loads(f.body)["method"] for f in found if f.body] == ["a", "b", "c"]
        assert not framer.pending


@pytest.mark.parametrize(
    "bad",
    [
        b"Content-Length: abc\r\n\r\n{}",
        b"Content-Length: -5\r\n\r\n{}",
        b"Content-Type: application/json\r\n\r\n{}",
        b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
        b"garbage without a colon\r\n\r\n",
        b"Content-Length: 99999999999\r\n\r\n{}",
        b"X" * 10000,
    ],
    ids=["not-a-number", "negative", "missing", "twice", "no-colon", "over-the-limit", "endless"],
)
def test_a_framing_fault_costs_one_message(bad: bytes) -> None:
    framer = Framer()
    found = list(framer.feed(bad + request(7, "after")))
    assert found[0] == Frame(None, found[0].fault) and found[0].fault
    assert [json.loads(f.body)["id"] for f in found[1:]] == [7]


# ---------------------------------------------------------------- over stdio


def test_a_body_that_is_not_utf8_gets_a_parse_error_and_the_server_goes_on() -> None:
    bad = b'{"jsonrpc": "2.0", "id": 2, "method": "shutdown", "params": "\xff"}'
    status, messages, _ = run_server(
        request(1, "initialize", INIT) + frame(bad) + request(3, "shutdown") + notify("exit")
    )
    answered = by_id(messages)
    assert answered[1]["result"]["serverInfo"]["name"] == "mimir"
    assert answered[None]["error"]["code"] == -32700
    assert "not UTF-8" in answered[None]["error"]["message"]
    assert answered[3] == {"jsonrpc": "2.0", "id": 3, "result": None}
    assert status == 0


@pytest.mark.parametrize(
    "bad",
    [
        b"Content-Length: abc\r\n\r\n{}",
        b"Content-Length: 99999999999\r\n\r\n",
        b"Content-Type: application/json\r\n\r\n{}",
        # a body shorter than its Content-Length: it swallows the next header, given back
        b'Content-Length: 60\r\n\r\n{"jsonrpc": "2.0", "id": 2, "method": "x"}',
        frame(b'{"jsonrpc": "2.0", "id": 2, "method": '),  # truncated JSON
        frame(b"[1, 2]"),
        frame(b"[" * 100_000),
    ],
    ids=[
        "length-not-a-number",
        "length-over-limit",
        "no-length",
        "length-too-long",
        "truncated-json",
        "not-an-object",
        "nested-100000",
    ],  # fmt: skip
)
def test_framing_and_json_faults_are_answered_and_the_next_request_is_too(bad: bytes) -> None:
    status, messages, _ = run_server(
        request(1, "initialize", INIT) + bad + request(3, "shutdown") + notify("exit")
    )
    answered = by_id(messages)
    assert answered[None]["error"]["code"] in (-32700, -32600), messages
    assert answered[3]["result"] is None, messages
    assert status == 0


def test_exit_without_shutdown_is_status_1() -> None:
    status, messages, _ = run_server(request(1, "initialize", INIT) + notify("exit"))
    assert status == 1
    assert by_id(messages)[1]["result"]


def test_a_request_after_shutdown_is_invalid_and_exit_is_then_0() -> None:
    status, messages, _ = run_server(
        request(1, "initialize", INIT)
        + request(2, "shutdown")
        + request(3, "textDocument/hover", {"textDocument": {"uri": "file:///x.py"},
                                            "position": {"line": 0, "character": 0}})
        + notify("exit")
    )  # fmt: skip
    answered = by_id(messages)
    assert answered[2]["result"] is None
    assert answered[3]["error"]["code"] == -32600
    assert status == 0


def test_the_stream_ending_without_exit_is_status_1() -> None:
    status, _, _ = run_server(request(1, "initialize", INIT))
    assert status == 1


# ---------------------------------------------------------------- a live session


class Client:
    """A JSON-RPC client over a stream; keeps notifications, returns replies by id."""

    def __init__(self, send: Any, receive: Any) -> None:
        self.send, self.receive = send, receive
        self.framer = Framer()
        self.waiting: list[dict] = []
        self.notifications: list[dict] = []

    def next(self, timeout: float = 120) -> dict:
        deadline = time.monotonic() + timeout
        while not self.waiting:
            assert time.monotonic() < deadline, "no message from the server"
            data = self.receive()
            assert data, "the server closed the stream"
            self.waiting += [json.loads(f.body) for f in self.framer.feed(data) if f.body]
        return self.waiting.pop(0)

    def reply(self, ident: int) -> dict:
        while True:
            message = self.next()
            if message.get("id") == ident and "method" not in message:
                return message
            self.notifications.append(message)

    def diagnostics(self, uri: str) -> list[dict]:
        while True:
            for m in self.notifications:
                if m.get("method") == "textDocument/publishDiagnostics":
                    if m["params"]["uri"] == uri:
                        self.notifications.remove(m)
                        return m["params"]["diagnostics"]
            self.notifications.append(self.next())


def _stdio_client(cwd: Path) -> tuple[subprocess.Popen, Client]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "mimir", "lsp", "--debounce-ms", "200"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=cwd,
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout

    def send(data: bytes) -> None:
        stdin.write(data)
        stdin.flush()

    client = Client(send, lambda: os.read(stdout.fileno(), 1 << 16))
    client.send(request(1, "initialize", {**INIT, "rootUri": cwd.as_uri()}))
    assert client.reply(1)["result"]
    client.send(notify("initialized", {}))
    return proc, client


def _close(proc: subprocess.Popen, client: Client) -> int:
    client.send(request(99, "shutdown") + notify("exit"))
    assert client.reply(99)["result"] is None
    return proc.wait(timeout=60)


def _open(client: Client, uri: str, text: str) -> None:
    client.send(notify("textDocument/didOpen", {"textDocument": {
        "uri": uri, "languageId": "python", "version": 1, "text": text}}))  # fmt: skip


def _hover(client: Client, ident: int, uri: str, line: int, character: int) -> Any:
    position = {"line": line, "character": character}
    client.send(
        request(ident, "textDocument/hover", {"textDocument": {"uri": uri}, "position": position})
    )
    return client.reply(ident)["result"]


def test_a_hover_after_a_burst_of_edits_equals_one_after_opening_the_final_text(
    tmp_path: Path,
) -> None:
    proc, client = _stdio_client(tmp_path)
    edited, fresh = (tmp_path / "edited.py").as_uri(), (tmp_path / "fresh.py").as_uri()
    # the final text changes what `y` is: a hover from any earlier text would differ
    final = KERNEL.replace("y = x * 2.0\n    return y", "y = x.sum(axis=1)\n    return x * 2.0")
    assert final != KERNEL
    _open(client, edited, KERNEL)
    burst = b"".join(
        notify("textDocument/didChange", {
            "textDocument": {"uri": edited, "version": v + 2},
            "contentChanges": [{"text": final if v == 999 else KERNEL + f"# edit {v}\n"}]})
        for v in range(1000)
    )  # fmt: skip
    client.send(burst)
    after_burst = _hover(client, 2, edited, 7, 4)  # `y`, asked while the last check is pending
    _open(client, fresh, final)
    after_open = _hover(client, 3, fresh, 7, 4)
    assert after_open is not None and "Tensor[float32, N]" in json.dumps(after_open)
    assert after_burst == after_open
    assert _close(proc, client) == 0


def test_a_document_over_the_size_limit_gets_one_diagnostic_and_no_check(tmp_path: Path) -> None:
    (tmp_path / "mimir.toml").write_text('max-file-size = "2K"\n')
    proc, client = _stdio_client(tmp_path)
    big, small = (tmp_path / "big.py").as_uri(), (tmp_path / "small.py").as_uri()
    _open(client, big, KERNEL + "# padding\n" * 300)
    (only,) = client.diagnostics(big)
    assert only["code"] == "GPU003" and "too large" in only["message"]
    client.send(request(5, "workspace/executeCommand", {"command": "mimir.stats"}))
    assert client.reply(5)["result"]["checks"] == 0
    assert _hover(client, 6, big, 7, 4) is None
    _open(client, small, KERNEL)
    assert client.diagnostics(small) == []
    client.send(request(7, "workspace/executeCommand", {"command": "mimir.stats"}))
    assert client.reply(7)["result"]["checks"] == 1
    assert _close(proc, client) == 0


def test_the_default_size_limit_applies_to_open_documents(tmp_path: Path) -> None:
    """With no configuration, one byte over the default `max-file-size` is refused unchecked."""
    from mimir.safeio import DEFAULT_MAX_FILE_BYTES

    proc, client = _stdio_client(tmp_path)
    big = (tmp_path / "big.py").as_uri()
    text = KERNEL + "#" * (DEFAULT_MAX_FILE_BYTES - len(KERNEL)) + "\n"
    assert len(text.encode()) == DEFAULT_MAX_FILE_BYTES + 1
    _open(client, big, text)
    assert [d["code"] for d in client.diagnostics(big)] == ["GPU003"]
    client.send(request(5, "workspace/executeCommand", {"command": "mimir.stats"}))
    assert client.reply(5)["result"]["checks"] == 0
    assert _close(proc, client) == 0


# ---------------------------------------------------------------- over TCP


def _tcp_client(port: int) -> tuple[socket.socket, Client]:
    deadline = time.monotonic() + 60
    while True:
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=120)
            break
        except OSError:
            assert time.monotonic() < deadline, "the server never listened"
            time.sleep(0.1)
    return sock, Client(sock.sendall, lambda: sock.recv(1 << 16))


def test_each_tcp_connection_is_its_own_session(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "mimir", "lsp", "--tcp", "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path,
    )  # fmt: skip
    try:
        first, one = _tcp_client(port)
        second, two = _tcp_client(port)
        with first, second:
            # both connected before either initializes: each gets its own reply
            two.send(request(7, "initialize", INIT))
            one.send(request(1, "initialize", INIT))
            assert one.reply(1)["result"]["serverInfo"]["name"] == "mimir"
            assert two.reply(7)["result"]["serverInfo"]["name"] == "mimir"
            uri = (tmp_path / "k.py").as_uri()
            _open(one, uri, KERNEL)
            assert one.diagnostics(uri) == []
            assert _hover(two, 8, uri, 7, 4) is None  # the other session never opened it
            assert _hover(one, 2, uri, 7, 4) is not None
            one.send(request(3, "shutdown") + notify("exit"))
            assert one.reply(3)["result"] is None
            assert first.recv(1 << 16) == b""  # that session ended; the server goes on
            two.send(request(9, "shutdown"))
            assert two.reply(9)["result"] is None
    finally:
        server.terminate()
        server.wait(timeout=30)
