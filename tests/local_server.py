"""What the scripted local servers of the tests share (tests/generation/scripted_server.py
for the LLM endpoint, tests/literature/ncbi_server.py for NCBI E-utilities,
tests/literature/europepmc_server.py for Europe PMC, tests/datasets/zenodo_server.py and
hub_server.py for Zenodo and the Hugging Face Hub): an HTTP server on 127.0.0.1 and a
free port, serving from a daemon thread while a `with` block lasts, and queues of scripted
replies whose last one repeats. `ScriptedServer` adds what the two literature servers
share: every request recorded with its arrival time, a queue of replies per endpoint, and
the writing of a reply (any status and headers, a delay, a dropped connection)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class LocalServer:
    url_path = "/"  # what base_url ends with, as the real service's does

    def _listen(self, handler) -> None:
        """Bind to a free port; call once the handler's state is set up."""
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        # A short poll, so that leaving the `with` block (shutdown) takes ~50 ms, not 0.5 s.
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}{self.url_path}"

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def next_in(queue: list):
    """The next scripted reply of a queue: taken off it, except the last, which repeats."""
    return queue.pop(0) if len(queue) > 1 else queue[0]


@dataclass
class Reply:
    body: str = ""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before answering (a slow server, a client's timeout)
    content_type: str = "text/plain; charset=UTF-8"
    drop: bool = False  # close the connection without answering


class ScriptedServer(LocalServer):
    """A LocalServer that records each request (`parse` makes it; it has `received_at`,
    time.monotonic() on arrival) and answers what `choose` returns for it; `scripted`
    takes the next reply of an endpoint's queue, when the test gave one."""

    def _script(self, replies: dict[str, list] | None) -> None:
        self.replies = {k: list(v) for k, v in (replies or {}).items()}
        self.requests: list[Any] = []
        self._lock = threading.Lock()

    def gaps(self) -> list[float]:
        """Seconds between the arrivals of consecutive requests."""
        times = [r.received_at for r in self.requests]
        return [b - a for a, b in zip(times, times[1:], strict=False)]

    def scripted(self, endpoint: str, request: Any) -> Reply | None:
        with self._lock:
            queue = self.replies.get(endpoint)
            item = next_in(queue) if queue else None
        return item(request) if callable(item) else item

    def parse(self, method: str, path: str, body: bytes) -> Any:
        raise NotImplementedError

    def choose(self, request: Any) -> Reply:
        raise NotImplementedError

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def do_GET(self):
                server._serve(self, b"")

            def do_POST(self):
                server._serve(self, self.rfile.read(int(self.headers.get("content-length", 0))))

        return Handler

    def _serve(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        request = self.parse(handler.command, handler.path, body)
        with self._lock:
            self.requests.append(request)
        reply = self.choose(request)
        time.sleep(reply.delay)
        if reply.drop:
            handler.close_connection = True
            return
        data = reply.body.encode("utf-8")
        try:
            handler.send_response(reply.status)
            handler.send_header("content-type", reply.content_type)
            handler.send_header("content-length", str(len(data)))
            for name, value in reply.headers.items():
                handler.send_header(name, value)
            handler.end_headers()
            handler.wfile.write(data)
        except OSError:
            pass  # the client gave up (a timeout test)
