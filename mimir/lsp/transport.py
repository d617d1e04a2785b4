"""The LSP base protocol's framing, read from bytes that nobody vouches for.

A message is `Content-Length: N\\r\\n` (other headers allowed), a blank line, and N bytes of
UTF-8 JSON. `Framer` turns a byte stream, fed in chunks of any size, into `Frame`s: a
message's body, or a framing fault (a header block with no usable `Content-Length`, a length
over the limit, a header block too long) with the reason. After a fault it finds its footing
again at the next `Content-Length:` in the stream (a body over the limit is never kept: it is
searched through for that header as it arrives), so one bad message costs that message
only. `Framer` does no I/O and knows nothing of JSON-RPC (`mimir.lsp.session` does).

A body whose declared length was too long swallows the start of the next message; when such
a body is not JSON and holds a `Content-Length:` header, the bytes from that header on are
given back to the stream, so the next message is still read.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["MAX_BODY_BYTES", "MAX_HEADER_BYTES", "Frame", "Framer", "frame"]

# A document over the configured size limit (`max-file-size`, 2 MiB by default) is refused
# by the server with one diagnostic, so its message must be read whole first: the body limit
# is well above that.
MAX_BODY_BYTES = 256 << 20
MAX_HEADER_BYTES = 8192

_HEADER_END = b"\r\n\r\n"
_CONTENT_LENGTH = re.compile(rb"content-length:", re.I)
_LENGTH_LINE = re.compile(rb"[ \t]*([0-9]{1,12})[ \t]*")


@dataclass(frozen=True)
class Frame:
    """A message's body, or (`body` None) a framing fault and why."""

    body: bytes | None
    fault: str | None = None


def frame(body: bytes) -> bytes:
    """`body` framed for the wire."""
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class Framer:
    """Frames from a byte stream; `feed` what arrives, and it yields what is complete."""

    def __init__(self, max_body: int = MAX_BODY_BYTES) -> None:
        self.max_body = max_body
        self._buffer = bytearray()
        self._need: int | None = None  # the body length being read
        self._resync = False  # dropping bytes until the next Content-Length header

    def feed(self, data: bytes) -> Iterator[Frame]:
        """Add `data`; yield the frames now complete, one at a time (a frame's consumer may
        `give_back` bytes before the next is read)."""
        self._buffer += data
        while (found := self._step()) is not None:
            yield found

    @property
    def pending(self) -> bool:
        """Whether a message has started and not ended (the stream ended inside it)."""
        return bool(self._buffer.strip()) or self._need is not None

    def _step(self) -> Frame | None:
        if self._resync:
            found = _CONTENT_LENGTH.search(self._buffer)
            if found is None:
                keep = len(b"content-length:") - 1  # a header cut in two stays
                del self._buffer[: max(0, len(self._buffer) - keep)]
                return None
            del self._buffer[: found.start()]
            self._resync = False
        if self._need is not None:
            if len(self._buffer) < self._need:
                return None
            body = bytes(self._buffer[: self._need])
            del self._buffer[: self._need]
            self._need = None
            return Frame(body)
        end = self._buffer.find(_HEADER_END, 0, MAX_HEADER_BYTES + len(_HEADER_END))
        if end < 0:
            if len(self._buffer) > MAX_HEADER_BYTES + len(_HEADER_END):
                return self._fault(f"a header block longer than {MAX_HEADER_BYTES} bytes")
            return None
        length, fault, garbled = _content_length(bytes(self._buffer[:end]))
        if fault is None and length is not None and length > self.max_body:
            fault = f"a body of {length} bytes, over the limit of {self.max_body}"
        if fault is not None:
            if not garbled:  # well-formed headers with a bad value: the block is done with
                del self._buffer[:end]
            return self._fault(fault)
        assert length is not None
        del self._buffer[: end + len(_HEADER_END)]
        self._need = length
        return None if len(self._buffer) < length else self._step()

    def _fault(self, why: str) -> Frame:
        """A fault in the header block at the front: look for the next message from just
        after its first byte (a garbled block may hold the next message's header)."""
        del self._buffer[:1]
        self._resync = True
        return Frame(None, why)

    def give_back(self, data: bytes) -> None:
        """Put `data` back at the front of the stream (the next message a body swallowed)."""
        self._buffer[:0] = data


_TOKEN = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}")


def _content_length(head: bytes) -> tuple[int | None, str | None, bool]:
    """The Content-Length of a header block, or why there is none to trust, and whether the
    block is garbled (a line that is not a header) rather than well-formed with a bad value."""
    length = None
    for line in head.split(b"\r\n"):
        name, colon, value = line.partition(b":")
        if not colon or not _TOKEN.fullmatch(name):
            return None, f"a malformed header line {_show(line)}", True
        if name.lower() != b"content-length":
            continue
        match = _LENGTH_LINE.fullmatch(value)
        if match is None:
            return None, f"a Content-Length that is not a number: {_show(value)}", False
        if length is not None and int(match.group(1)) != length:
            return None, "two Content-Length headers that differ", False
        length = int(match.group(1))
    if length is None:
        return None, "a header block without Content-Length", False
    return length, None, False


def _show(data: bytes) -> str:
    text = data[:60].decode("utf-8", errors="replace")
    return repr(text + ("..." if len(data) > 60 else ""))
