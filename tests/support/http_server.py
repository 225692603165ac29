"""A stdlib HTTP server on 127.0.0.1 in a thread, for the length of a `with` block."""

from __future__ import annotations

import contextlib
import http.server
import threading
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def serving(handler: Callable[..., http.server.BaseHTTPRequestHandler],
            port: int = 0) -> Iterator[str]:
    """`handler` (a request handler class, or a partial of one) served on `port`, or a free
    port when that one is taken or 0; its base URL, with a trailing slash."""
    try:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    except OSError:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
