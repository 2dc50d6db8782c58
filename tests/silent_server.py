"""A dependency that accepts TCP connections and never answers: a broker, a Redis or an
object store that hangs (a stopped process behind a live port, a full proxy, a firewall
that drops replies). Connecting works, every read waits for ever; only the caller's own
timeouts end the wait.

    with SilentServer() as silent:
        silent.url("redis")      # redis://127.0.0.1:<port>/0
        silent.url("amqp")       # amqp://guest:guest@127.0.0.1:<port>//
        silent.url("http")       # http://127.0.0.1:<port>
        silent.accepted          # connections taken so far

The listener is a thread of the test process; it holds every connection it accepts
(closing one would answer the client with an end of stream) until the block ends, and
stops by itself after `lifetime` seconds if the block never ends.
"""

from __future__ import annotations

import select
import socket
import threading
import time

URLS = {
    "redis": "redis://127.0.0.1:{port}/0",
    "amqp": "amqp://guest:guest@127.0.0.1:{port}//",
    "http": "http://127.0.0.1:{port}",
}


class SilentServer:
    def __init__(self, *, lifetime: float = 600.0):
        self.lifetime = lifetime
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        self.port = self._listener.getsockname()[1]
        self._held: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True, name="silent-server")

    @property
    def accepted(self) -> int:
        return len(self._held)

    def url(self, scheme: str) -> str:
        return URLS[scheme].format(port=self.port)

    def __enter__(self) -> SilentServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _accept(self) -> None:
        deadline = time.monotonic() + self.lifetime
        try:
            while not self._stop.is_set() and time.monotonic() < deadline:
                ready, _, _ = select.select([self._listener], [], [], 0.1)
                if ready:
                    connection, _ = self._listener.accept()
                    self._held.append(connection)
        finally:
            for connection in self._held:
                connection.close()
            self._listener.close()
