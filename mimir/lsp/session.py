"""One client's session: framed bytes in, JSON-RPC checked, handed to the server's handlers.

The server is pygls' protocol over `MimirServer`; this module is what stands between it and
the wire, so that nothing a client sends can stop it:

- a framing fault (`mimir.lsp.transport`) or a body that is not UTF-8 JSON is answered with a
  JSON-RPC Parse error (-32700, id null) and the session goes on with the next message;
- a message that is not a JSON-RPC 2.0 request, notification or response is answered with
  Invalid Request (-32600), with its id when it has a usable one;
- after `shutdown`, every request but `exit` is answered with Invalid Request, and
  notifications are dropped;
- `exit` ends the session with status 0 after `shutdown` and 1 without it, as the LSP
  specification says; a stream that ends without `exit` ends it with 1 (0 after `shutdown`).

Nothing here knows Mimir: `run` takes the protocol and the transport.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from pygls.exceptions import JsonRpcException

from mimir.lsp.transport import Framer, frame

__all__ = ["INVALID_REQUEST", "PARSE_ERROR", "Session"]

log = logging.getLogger("mimir.lsp")

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
_CONTENT_LENGTH = b"Content-Length:"


class Session:
    """Reads framed messages with `read` (b"" at the end), writes replies with `write`."""

    def __init__(self, protocol: Any, write: Callable[[bytes], Any]) -> None:
        self.protocol = protocol
        self.write = write
        self.framer = Framer()
        self.shut_down = False

    async def run(self, read: Callable[[], Awaitable[bytes]]) -> int:
        """Serve until `exit` or the end of the stream; the exit status."""
        while True:
            data = await read()
            if not data:
                if self.framer.pending:
                    self._error(None, PARSE_ERROR, "the stream ended inside a message")
                return 0 if self.shut_down else 1
            for found in self.framer.feed(data):
                if found.body is None:
                    self._error(None, PARSE_ERROR, f"Parse error: {found.fault}")
                    continue
                status = self._message(found.body)
                if status is not None:
                    return status

    def _message(self, body: bytes) -> int | None:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as err:
            self._error(None, PARSE_ERROR, f"Parse error: the body is not UTF-8 (byte {err.start})")
            return None
        try:
            message = json.loads(text)
        except (ValueError, RecursionError) as err:
            # a body longer than it said swallows the next message's header: give that back
            at = body.find(_CONTENT_LENGTH, 1)
            if at > 0:
                self.framer.give_back(body[at:])
            self._error(None, PARSE_ERROR, f"Parse error: the body is not JSON ({err})")
            return None
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            self._error(_id_of(message), INVALID_REQUEST, "not a JSON-RPC 2.0 message")
            return None
        method = message.get("method")
        ident = message.get("id")
        if "id" in message and not _valid_id(ident):
            self._error(None, INVALID_REQUEST, "an id must be a string or an integer")
            return None
        if "method" in message and not isinstance(method, str):
            self._error(_id_of(message), INVALID_REQUEST, "a method must be a string")
            return None
        request = method is not None and "id" in message
        if method == "exit":
            return 0 if self.shut_down else 1
        if self.shut_down and method is not None:
            if request:
                self._error(ident, INVALID_REQUEST, f"the server is shut down: `{method}` refused")
            return None
        if method is None and "result" not in message and "error" not in message:
            self._error(_id_of(message), INVALID_REQUEST, "neither a request nor a response")
            return None
        try:
            structured = self.protocol.structure_message(message)
        except JsonRpcException as err:
            if request:
                self._error(ident, err.code, err.message or "invalid message")
            return None
        if method == "shutdown" and request:
            self.shut_down = True  # answered by the protocol below; anything after is refused
        self.protocol.handle_message(structured)
        return None

    def _error(self, ident: Any, code: int, message: str) -> None:
        log.warning("%s", message)
        reply = {"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}}
        self.write(frame(json.dumps(reply).encode()))


def _valid_id(ident: Any) -> bool:
    return isinstance(ident, str) or (isinstance(ident, int) and not isinstance(ident, bool))


def _id_of(message: Any) -> Any:
    ident = message.get("id") if isinstance(message, dict) else None
    return ident if _valid_id(ident) else None
