"""What the scripted local servers of the tests share (tests/generation/scripted_server.py
for the LLM endpoint, tests/literature/ncbi_server.py for NCBI E-utilities): an HTTP
server on 127.0.0.1 and a free port, serving from a daemon thread while a `with` block
lasts, and queues of scripted replies whose last one repeats."""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer


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
