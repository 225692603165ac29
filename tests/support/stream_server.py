"""A real HTTP/1.1 server on 127.0.0.1 that answers like the servers the client meets, byte
for byte, misbehaviour included — for the transport tests (both transports talk to it).

The first path segment picks the behaviour; the rest is the OpenAI endpoint:
- `/fixture/<file>/...`: 200, the SSE file from tests/fixtures/streams/, chunked, one
  chunk per event (as vLLM, TGI, llama.cpp and layergate send them);
- `/status/<code>/...`: that status with an OpenAI-style error body;
- `/slow-headers/...`: headers after SLOW_HEADERS_S, one content chunk, then silence;
- `/trickle/...`: a content chunk every TRICKLE_S, never a finish_reason;
- `/close-early/...`: two content chunks, then the connection closes mid-body;
- `/strict/<file>/...`: like `fixture`, but a body holding `stream_options` or `logprobs`
  gets a 400 naming the field (as servers that forbid unknown fields answer);
- `/split/...`: SPLIT_TEXT in three content chunks, CRLF line ends and a comment line,
  sent SPLIT_BYTES bytes at a time (cutting lines and UTF-8 characters), a pause between.
"""

from __future__ import annotations

import json
import socket
import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "streams"
SLOW_HEADERS_S = 3.0
TRICKLE_S = 0.3
SILENCE_S = 30.0  # how long a stalled answer stays silent (ended early by `stop`)
_CHUNK = (b'data: {"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}'
          b"\n\n")
SPLIT_PIECES = ("h\u00e9llo", " w\u00f6rld", " \u2713")
SPLIT_TEXT = "".join(SPLIT_PIECES)
SPLIT_BYTES = 5
SPLIT_PAUSE_S = 0.002


def split_stream() -> bytes:
    """The body `/split/` sends, whole."""
    deltas = [{"content": piece} for piece in SPLIT_PIECES] + [{}]
    events = [json.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason":
                                       None if delta else "stop"}]}, ensure_ascii=False)
              for delta in deltas]
    lines = [": keep-alive"] + [f"data: {e}\r\n" for e in events] + ["data: [DONE]\r\n"]
    return "\r\n".join(lines).encode()


def fixture_events(name: str) -> list[bytes]:
    """The SSE events of a fixture file, each with its blank line."""
    text = (FIXTURES / name).read_text(encoding="utf-8")
    return [(block.strip("\n") + "\n\n").encode() for block in text.split("\n\n")
            if block.strip()]


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        sock: socket.socket = self.request
        path = self._read_request(sock)
        if path is None:
            return
        kind, _, rest = path.lstrip("/").partition("/")
        body = self.server.bodies[-1] or {}
        refused = [key for key in ("stream_options", "logprobs") if key in body]
        if kind == "strict" and refused:
            self._status(sock, 400, f"{refused[0]}: Extra inputs are not permitted")
        elif kind in ("fixture", "strict"):
            name = rest.partition("/")[0]
            self._stream(sock, fixture_events(name), end=True)
        elif kind == "status":
            code = int(rest.partition("/")[0])
            self._status(sock, code, f"status {code} as asked")
        elif kind == "slow-headers":
            if not self.server.stop.wait(SLOW_HEADERS_S):
                self._stream(sock, [_CHUNK], end=False)
                self.server.stop.wait(SILENCE_S)
        elif kind == "trickle":
            self._headers(sock)
            while not self.server.stop.wait(TRICKLE_S):
                if not self._send_chunk(sock, _CHUNK):
                    return
        elif kind == "split":
            self._headers(sock)
            body = split_stream()
            for start in range(0, len(body), SPLIT_BYTES):
                self.server.stop.wait(SPLIT_PAUSE_S)
                if not self._send_chunk(sock, body[start:start + SPLIT_BYTES]):
                    return
            sock.sendall(b"0\r\n\r\n")
        elif kind == "close-early":
            self._stream(sock, [_CHUNK, _CHUNK], end=False)
            sock.shutdown(socket.SHUT_RDWR)

    def _read_request(self, sock: socket.socket) -> str | None:
        data = b""
        while b"\r\n\r\n" not in data:
            more = sock.recv(65536)
            if not more:
                return None
            data += more
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        length = next((int(line.split(":", 1)[1]) for line in lines[1:]
                       if line.lower().startswith("content-length:")), 0)
        while len(body) < length:
            body += sock.recv(65536)
        self.server.bodies.append(json.loads(body) if body else None)
        return lines[0].split()[1]

    @staticmethod
    def _status(sock: socket.socket, code: int, message: str) -> None:
        body = json.dumps({"error": {"message": message,
                                     "type": "invalid_request_error"}}).encode()
        sock.sendall(f"HTTP/1.1 {code} Error\r\nContent-Type: application/json\r\n"
                     f"Connection: close\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                     + body)

    @staticmethod
    def _headers(sock: socket.socket) -> None:
        # one request per connection: no client may pool a socket this server closes
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     b"Connection: close\r\nTransfer-Encoding: chunked\r\n\r\n")

    @staticmethod
    def _send_chunk(sock: socket.socket, data: bytes) -> bool:
        try:
            sock.sendall(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        except OSError:  # the client gave up
            return False
        return True

    def _stream(self, sock: socket.socket, events: list[bytes], end: bool) -> None:
        self._headers(sock)
        for event in events:
            if not self._send_chunk(sock, event):
                return
        if end:
            sock.sendall(b"0\r\n\r\n")


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.stop = threading.Event()
        self.bodies: list[object] = []  # the JSON body of every request, in order

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@contextmanager
def stream_server() -> Iterator[_Server]:
    server = _Server()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stop.set()
        server.shutdown()
        server.server_close()
