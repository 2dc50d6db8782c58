"""A scripted OpenAI-compatible chat server for tests, on 127.0.0.1 and a free port.

The real `openai` client talks HTTP to it. Each request is routed to a pipeline step
by the first line of its prompt (every prompt file under generation/prompts/ starts
with a "TASK: ..." line); the script then decides the reply: a queue of replies per
step (the last one repeats), or a function of the request. Replies can be slow,
fail with any status and headers, carry token logprobs, or be malformed.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from tests.local_server import LocalServer, next_in

PROMPT_DIR = Path(__file__).resolve().parents[2] / "generation" / "prompts"


def _markers() -> dict[str, str]:
    """First line of each prompt file → its id (the step the server reports)."""
    markers = {}
    for path in PROMPT_DIR.glob("*.txt"):
        first = path.read_text(encoding="utf-8").splitlines()[0].strip()
        if first.startswith("TASK:"):
            markers[first] = path.stem
    return markers


@dataclass
class Reply:
    content: str = ""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    # [(token, logprob, [(alternative, logprob), ...]), ...]
    logprobs: list[tuple[str, float, list[tuple[str, float]]]] | None = None
    raw_body: str | bytes | None = None  # sent as it is (bytes: not even UTF-8)
    finish_reason: str = "stop"  # "length": cut off at max_tokens


@dataclass
class Request:
    step: str
    body: dict
    headers: dict[str, str]
    received_at: float
    path: str = ""

    @property
    def prompt(self) -> str:
        return self.body["messages"][-1]["content"]

    def section(self, title: str) -> str:
        """The text after a "Title:" line of the prompt, up to the next blank line + title."""
        text = self.prompt
        start = text.index(f"{title}:\n") + len(title) + 2
        rest = text[start:]
        end = rest.find("\n\n")
        return (rest if end == -1 else rest[:end]).strip()


Script = Callable[[Request], Reply]


class ScriptedServer(LocalServer):
    url_path = "/v1"

    def __init__(
        self,
        script: Script | None = None,
        *,
        steps: dict[str, list[Reply | Script]] | None = None,
        latency: float = 0.0,
        json_mode: bool = True,
        logprobs: bool = True,
        json_schema: bool = True,
        json_object_schema: bool = True,
        fence: bool = False,
    ):
        self.script = script
        self.steps = {k: list(v) for k, v in (steps or {}).items()}
        self.latency = latency
        self.json_mode = json_mode
        self.logprobs = logprobs
        self.json_schema = json_schema
        self.json_object_schema = json_object_schema
        self.fence = fence
        self.requests: list[Request] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._markers = _markers()
        self._listen(self._handler())

    def steps_seen(self) -> list[str]:
        return [r.step for r in self.requests]

    def step_of(self, body: dict) -> str:
        first = body["messages"][-1]["content"].splitlines()[0].strip()
        return self._markers.get(first, "unknown")

    def choose(self, request: Request) -> Reply:
        queue = self.steps.get(request.step)
        if queue:
            item = next_in(queue)
            return item(request) if callable(item) else item
        if self.script is None:
            return Reply(status=500, content=f"no script for step {request.step}")
        return self.script(request)

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            # Keep-alive, as real OpenAI-compatible servers do (HTTP/1.0 would make the
            # client open a new connection for every call).
            protocol_version = "HTTP/1.1"
            # Headers and body go out in separate writes: without TCP_NODELAY, Nagle's
            # algorithm and the client's delayed ACK would hold the body back ~40 ms.
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                request = Request(
                    step=server.step_of(body),
                    body=body,
                    headers=dict(self.headers),
                    received_at=time.monotonic(),
                    path=self.path,
                )
                with server._lock:
                    server.requests.append(request)
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    self._answer(request, body)
                finally:
                    with server._lock:
                        server.in_flight -= 1

            def _answer(self, request: Request, body: dict) -> None:
                response_format = body.get("response_format")
                if response_format is not None and not server.json_mode:
                    return self._send(400, _error("response_format is not supported by this server"), {})
                if isinstance(response_format, dict):
                    if response_format.get("type") == "json_schema" and not server.json_schema:
                        return self._send(500, _literal_error(), {})
                    if "schema" in response_format and not server.json_object_schema:
                        message = "Unrecognized request argument supplied: response_format.schema"
                        return self._send(400, _error(message), {})
                if body.get("logprobs") and not server.logprobs:
                    return self._send(400, _error("logprobs are not supported by this server"), {})
                reply = server.choose(request)
                time.sleep(server.latency + reply.delay)
                if reply.raw_body is not None:
                    return self._send(reply.status, reply.raw_body, reply.headers)
                if reply.status != 200:
                    return self._send(reply.status, _error(reply.content or "scripted error"), reply.headers)
                if server.fence:
                    reply = replace(reply, content=f"```json\n{reply.content}\n```")
                payload = _completion(body, reply, with_logprobs=bool(body.get("logprobs")))
                return self._send(200, json.dumps(payload), reply.headers)

            def _send(self, status: int, text: str | bytes, headers: dict[str, str]) -> None:
                data = text if isinstance(text, bytes) else text.encode("utf-8")
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

        return Handler


def _literal_error() -> str:
    """llama-cpp-python's server's answer (HTTP 500) to a response_format type it does not know."""
    message = (
        "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
        "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', "
        "'ctx': {'expected': \"'text' or 'json_object'\"}}\n"
    )
    return json.dumps({"error": {"message": message, "type": "internal_server_error", "param": None, "code": None}})


def _error(message: str) -> str:
    return json.dumps({"error": {"message": message, "type": "scripted", "code": None}})


def _completion(body: dict, reply: Reply, *, with_logprobs: bool) -> dict:
    prompt_chars = sum(len(m["content"]) for m in body["messages"])
    logprobs = None
    if with_logprobs and reply.logprobs is not None:
        logprobs = {
            "content": [
                {
                    "token": token,
                    "logprob": lp,
                    "bytes": list(token.encode()),
                    "top_logprobs": [{"token": t, "logprob": a, "bytes": list(t.encode())} for t, a in alternatives],
                }
                for token, lp, alternatives in reply.logprobs
            ]
        }
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "scripted"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply.content},
                "logprobs": logprobs,
                "finish_reason": reply.finish_reason,
            }
        ],
        # A fixed rule, so tests can compute the expected cost by hand.
        "usage": {
            "prompt_tokens": prompt_chars // 4,
            "completion_tokens": len(reply.content) // 4 + 1,
            "total_tokens": prompt_chars // 4 + len(reply.content) // 4 + 1,
        },
    }


# The gateway settings every test against a ScriptedServer uses (the `serve` fixture, tests/conftest.py).
TEST_ENV = {
    "OPENAI_API_KEY": "test-key",
    "GENERATION_MODEL": "scripted-model",
    "GENERATION_BACKOFF_BASE": "0.01",
    "GENERATION_BACKOFF_MAX": "2",
    "GENERATION_TIMEOUT": "5",
}
