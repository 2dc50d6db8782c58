"""A local server that speaks Zenodo's deposit REST API as its documentation describes it
(https://developers.zenodo.org/: depositions, the bucket upload, new versions, publish,
and the error answers), in memory, with faults to inject: an answer of a given status, or
a connection dropped after reading part of an upload."""

from __future__ import annotations

import hashlib
import json
import re
import threading
import uuid
from http.server import BaseHTTPRequestHandler

from tests.local_server import LocalServer

TOKEN = "good-token"


class ZenodoServer(LocalServer):
    def __init__(self):
        self.depositions: dict[int, dict] = {}
        self.buckets: dict[str, int] = {}
        self.faults: list[tuple[str, str, str]] = []  # (method, path regex, "429" | "503" | "403" | "drop")
        self.uploads = 0
        self.requests: list[tuple[str, str, str]] = []  # (method, path, authorization)
        self._next = 1000
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                server.handle(self)

            def do_POST(self):
                server.handle(self)

            def do_PUT(self):
                server.handle(self)

            def do_DELETE(self):
                server.handle(self)

        self._listen(Handler)
        self.url = self.base_url.rstrip("/")

    # --- the API ------------------------------------------------------------------------------

    def _deposition(self, concept: str | None = None, files: list | None = None) -> dict:
        self._next += 1
        bucket = str(uuid.uuid4())
        self.buckets[bucket] = self._next
        d = {
            "id": self._next,
            "conceptrecid": concept or str(self._next - 1),
            "submitted": False,
            "state": "unsubmitted",
            "files": list(files or []),
            "metadata": {},
            "links": {
                "bucket": f"{self.url}/api/files/{bucket}",
                "self": f"{self.url}/api/deposit/depositions/{self._next}",
                "latest_draft": f"{self.url}/api/deposit/depositions/{self._next}",
            },
        }
        self.depositions[d["id"]] = d
        return d

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        method, path = h.command, h.path.split("?")[0]
        with self._lock:
            self.requests.append((method, path, h.headers.get("Authorization", "")))
            fault = next((f for f in self.faults if f[0] == method and re.fullmatch(f[1], path)), None)
            if fault:
                self.faults.remove(fault)
        length = int(h.headers.get("Content-Length") or 0)
        if fault and fault[2] == "drop":
            h.rfile.read(min(length, 10))
            h.close_connection = True
            h.connection.shutdown(2)
            return
        body = h.rfile.read(length) if length else b""
        if fault:
            return self.answer(h, int(fault[2]), {"status": int(fault[2]), "message": "Scripted fault."})
        if h.headers.get("Authorization") != f"Bearer {TOKEN}":
            return self.answer(
                h, 401, {"status": 401, "message": "The server could not verify that you are authorized."}
            )
        with self._lock:
            return self.route(h, method, path, body)

    def route(self, h, method, path, body):
        m = re.fullmatch(r"/api/deposit/depositions(?:/(\d+))?(?:/(actions/\w+|files/[\w-]+))?", path)
        f = re.fullmatch(r"/api/files/([\w-]+)/(.+)", path)
        if m and method == "POST" and m.group(1) is None:
            return self.answer(h, 201, self._deposition())
        if f and method == "PUT":
            deposition = self.depositions[self.buckets[f.group(1)]]
            if deposition["submitted"]:
                return self.answer(h, 403, {"status": 403, "message": "Published: the bucket is locked."})
            self.uploads += 1
            checksum = hashlib.md5(body, usedforsecurity=False).hexdigest()
            deposition["files"] = [x for x in deposition["files"] if x["filename"] != f.group(2)]
            deposition["files"].append(
                {"id": str(uuid.uuid4()), "filename": f.group(2), "filesize": len(body), "checksum": checksum}
            )
            return self.answer(h, 201, {"key": f.group(2), "size": len(body), "checksum": f"md5:{checksum}"})
        if not m or int(m.group(1) or 0) not in self.depositions:
            return self.answer(h, 404, {"status": 404, "message": "PID does not exist."})
        d = self.depositions[int(m.group(1))]
        action = m.group(2) or ""
        if method == "GET" and not action:
            return self.answer(h, 200, d)
        if method == "PUT" and not action:
            metadata = json.loads(body or b"{}").get("metadata", {})
            missing = [k for k in ("upload_type", "title", "creators", "description") if not metadata.get(k)]
            if missing:
                errors = [{"field": f"metadata.{k}", "message": "Field is required."} for k in missing]
                return self.answer(h, 400, {"status": 400, "message": "Validation error.", "errors": errors})
            d["metadata"] = metadata
            return self.answer(h, 200, d)
        if method == "DELETE" and action.startswith("files/"):
            d["files"] = [x for x in d["files"] if x["id"] != action[6:]]
            return self.answer(h, 204, None)
        if method == "POST" and action == "actions/publish":
            if d["submitted"]:
                return self.answer(h, 400, {"status": 400, "message": "Deposition is already published."})
            if not d["files"] or not d["metadata"]:
                return self.answer(h, 400, {"status": 400, "message": "Validation error: files and metadata needed."})
            d.update(submitted=True, state="done", doi=f"10.5072/zenodo.{d['id']}", record_id=d["id"])
            return self.answer(h, 202, d)
        if method == "POST" and action == "actions/newversion":
            if not d["submitted"]:
                return self.answer(h, 400, {"status": 400, "message": "Only a published deposition has versions."})
            draft = self._deposition(concept=d["conceptrecid"], files=d["files"])
            answer = dict(d, links=dict(d["links"], latest_draft=draft["links"]["self"]))
            return self.answer(h, 201, answer)
        return self.answer(h, 405, {"status": 405, "message": "Method not allowed."})

    @staticmethod
    def answer(h, status: int, body) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        h.send_response(status)
        if body is not None:
            h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)
