"""A local server that speaks the Hugging Face Hub's HTTP API as huggingface_hub's own
client calls it for a dataset repository (huggingface_hub/hf_api.py, _commit_api.py,
lfs.py): create_repo (POST /api/repos/create, 409 when it exists), repo_info, the
settings, validate-yaml, preupload (/api/datasets/{repo}/preupload/{rev}: which files go
as LFS, and the oid of those the revision holds), the LFS batch endpoint
({repo}.git/info/lfs/objects/batch) with its basic upload and verify actions, commit
(/api/datasets/{repo}/commit/{rev}, an NDJSON body), list_repo_tree, refs and create_tag.

In memory, with faults to inject: an answer of a given status (429 with Retry-After), a
connection dropped after reading part of a request ("drop"), a request carried out whose
answer is then lost ("lost"), or a commit that keeps all but the last file sent ("partial")."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

from tests.local_server import LocalServer

TOKEN = "hf_write_token"
READ_TOKEN = "hf_read_token"
GITATTRIBUTES = b"*.parquet filter=lfs diff=lfs merge=lfs -text\n*.zip filter=lfs diff=lfs merge=lfs -text\n"
REPO = r"(?P<repo>[\w.-]+/[\w.-]+)"


def blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


@dataclass
class Repo:
    private: bool
    commits: dict[str, dict] = field(default_factory=dict)  # oid -> {"parent", "files", "summary"}
    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)

    def resolve(self, revision: str) -> str | None:
        if revision in self.branches:
            return self.branches[revision]
        if revision in self.tags:
            return self.tags[revision]
        return revision if revision in self.commits else None


class HubServer(LocalServer):
    def __init__(self, *, lfs_threshold: int = 1 << 20):
        self.repos: dict[str, Repo] = {}
        self.lfs: dict[str, bytes] = {}  # sha256 -> content, uploaded through the LFS batch's action
        self.lfs_uploads = 0
        self.commits_made = 0
        self.lfs_threshold = lfs_threshold
        self.faults: list[tuple[str, str, str]] = []  # (method, path regex, "429" | "503" | "drop" | "lost" ...)
        self.requests: list[tuple[str, str, str]] = []  # (method, path, authorization)
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                server.handle(self)

            def do_POST(self):
                server.handle(self)

            def do_PUT(self):
                server.handle(self)

        self._listen(Handler)
        self.url = self.base_url.rstrip("/")

    # --- what the tests look at -------------------------------------------------------------

    def files_at(self, repo_id: str, revision: str = "main") -> dict[str, bytes]:
        repo = self.repos[repo_id]
        files = repo.commits[repo.resolve(revision)]["files"]
        return {
            path: entry["content"] if entry["sha256"] is None else self.lfs[entry["sha256"]]
            for path, entry in files.items()
        }

    # --- the HTTP side ----------------------------------------------------------------------

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
        if fault and fault[2] not in ("lost", "partial"):
            status = int(fault[2])
            headers = {"Retry-After": "0"} if status == 429 else {}
            return self.answer(h, status, {"error": "Scripted fault."}, headers)
        if fault and fault[2] == "partial":  # the Hub keeps all but the last file it was sent
            body = b"\n".join(body.splitlines()[:-1]) + b"\n"
        status, answer = self.authorised(h, method, path, body)
        if fault and fault[2] == "lost":  # carried out, and its answer lost on the way back
            h.close_connection = True
            h.connection.shutdown(2)
            return
        self.answer(h, status, answer)

    def authorised(self, h, method: str, path: str, body: bytes) -> tuple[int, object]:
        if path.startswith("/lfs-upload/") or path.startswith("/lfs-verify/"):
            pass  # a presigned storage URL: no Authorization header, as with S3
        else:
            auth = h.headers.get("Authorization")
            if auth not in (f"Bearer {TOKEN}", f"Bearer {READ_TOKEN}"):
                return 401, {"error": "Invalid credentials in Authorization header"}
            if method != "GET" and auth == f"Bearer {READ_TOKEN}" and path != "/api/validate-yaml":
                return 403, {"error": "You don't have the rights to write to this repository (read token)."}
        with self._lock:
            return self.route(method, path, body, h.headers.get("Content-Type", ""))

    def route(self, method, path, body, content_type) -> tuple[int, object]:  # noqa: C901 - one branch per endpoint
        if method == "POST" and path == "/api/repos/create":
            return self.create_repo(json.loads(body))
        if method == "POST" and path == "/api/validate-yaml":
            return self.validate_yaml(json.loads(body))
        if m := re.fullmatch(r"/datasets/" + REPO + r"\.git/info/lfs/objects/batch", path):
            return self.lfs_batch(m["repo"], json.loads(body))
        if m := re.fullmatch(r"/lfs-upload/(?P<oid>[0-9a-f]{64})", path):
            return self.lfs_upload(m["oid"], body)
        if re.fullmatch(r"/lfs-verify/[0-9a-f]{64}", path):
            oid = json.loads(body)["oid"]
            return (200, {}) if oid in self.lfs else (404, {"error": "Object not found"})
        m = re.fullmatch(r"/api/datasets/" + REPO + r"(?:/(?P<rest>.*))?", path)
        if not m or m["repo"] not in self.repos:
            return 404, {"error": "Repository not found"}
        repo, rest = self.repos[m["repo"]], m["rest"] or ""
        if method == "GET" and (not rest or rest.startswith("revision/")):
            return self.repo_info(m["repo"], repo, rest.removeprefix("revision/") or "main")
        if method == "PUT" and rest == "settings":
            settings = json.loads(body)
            repo.private = settings.get("visibility", "private" if settings.get("private") else "public") == "private"
            return 200, {}
        if method == "POST" and (r := re.fullmatch(r"preupload/(.+)", rest)):
            return self.preupload(repo, r[1], json.loads(body))
        if method == "POST" and (r := re.fullmatch(r"commit/(.+)", rest)):
            if "application/x-ndjson" not in content_type:
                return 400, {"error": "Expected an NDJSON body"}
            return self.commit(m["repo"], repo, r[1], body)
        if method == "GET" and (r := re.fullmatch(r"tree/([^/]+)(?:/.*)?", rest)):
            return self.tree(repo, r[1])
        if method == "GET" and rest == "refs":
            return 200, {
                "branches": [
                    {"name": b, "ref": f"refs/heads/{b}", "targetCommit": c} for b, c in repo.branches.items()
                ],
                "converts": [],
                "tags": [{"name": t, "ref": f"refs/tags/{t}", "targetCommit": c} for t, c in repo.tags.items()],
            }
        if method == "POST" and (r := re.fullmatch(r"tag/(.+)", rest)):
            return self.create_tag(repo, r[1], json.loads(body))
        return 405, {"error": "Method not allowed"}

    # --- the endpoints ----------------------------------------------------------------------

    def _new_commit(self, repo: Repo, parent: str | None, files: dict, summary: str) -> str:
        self.commits_made += 1
        listing = json.dumps(sorted((p, e["blob_id"]) for p, e in files.items()))
        oid = hashlib.sha1(f"{parent}|{summary}|{self.commits_made}|{listing}".encode()).hexdigest()
        repo.commits[oid] = {"parent": parent, "files": files, "summary": summary}
        repo.branches["main"] = oid
        return oid

    def create_repo(self, payload: dict) -> tuple[int, object]:
        if payload.get("type") != "dataset":
            return 400, {"error": "This server holds dataset repositories only"}
        repo_id = f"{payload.get('organization')}/{payload['name']}"
        if repo_id in self.repos:
            return 409, {"error": "You already created this dataset repo", "url": f"{self.url}/datasets/{repo_id}"}
        repo = self.repos[repo_id] = Repo(private=payload.get("visibility") == "private")
        gitattributes = {
            "size": len(GITATTRIBUTES),
            "blob_id": blob_id(GITATTRIBUTES),
            "sha256": None,
            "content": GITATTRIBUTES,
        }
        self._new_commit(repo, None, {".gitattributes": gitattributes}, "initial commit")
        return 200, {"url": f"{self.url}/datasets/{repo_id}", "name": repo_id, "id": repo_id}

    def repo_info(self, repo_id: str, repo: Repo, revision: str) -> tuple[int, object]:
        sha = repo.resolve(revision)
        if sha is None:
            return 404, {"error": f"Invalid rev id: {revision}"}
        siblings = [{"rfilename": p} for p in sorted(repo.commits[sha]["files"])]
        return 200, {"id": repo_id, "sha": sha, "private": repo.private, "siblings": siblings}

    @staticmethod
    def validate_yaml(payload: dict) -> tuple[int, object]:
        import yaml

        match = re.match(r"^---\n(.*?)\n---\n", payload.get("content", ""), re.S)
        errors = []
        try:
            header = yaml.safe_load(match[1]) if match else {}
        except yaml.YAMLError as exc:
            return 400, {"errors": [{"message": f"Invalid YAML: {exc}"}]}
        for config in (header or {}).get("configs", []):
            if not config.get("config_name") or not config.get("data_files"):
                errors.append({"message": f"configs: each needs config_name and data_files: {config}"})
        return (400, {"errors": errors}) if errors else (200, {"errors": [], "warnings": []})

    def _is_lfs(self, path: str, size: int, sample: bytes) -> bool:
        return path.endswith((".parquet", ".zip")) or size >= self.lfs_threshold or b"\0" in sample

    def preupload(self, repo: Repo, revision: str, payload: dict) -> tuple[int, object]:
        sha = repo.resolve(revision)
        present = repo.commits[sha]["files"] if sha else {}
        answer = []
        for f in payload["files"]:
            lfs = self._is_lfs(f["path"], f["size"], base64.b64decode(f["sample"]))
            there = present.get(f["path"])
            oid = None if there is None else (there["sha256"] if lfs else there["blob_id"])
            answer.append(
                {"path": f["path"], "uploadMode": "lfs" if lfs else "regular", "shouldIgnore": False, "oid": oid}
            )
        return 200, {"files": answer}

    def lfs_batch(self, repo_id: str, payload: dict) -> tuple[int, object]:
        if repo_id not in self.repos:
            return 404, {"message": "Repository not found"}
        objects = []
        for obj in payload["objects"]:
            entry = {"oid": obj["oid"], "size": obj["size"], "authenticated": True}
            if obj["oid"] not in self.lfs:  # the storage has it already: no action, nothing sent
                entry["actions"] = {
                    "upload": {"href": f"{self.url}/lfs-upload/{obj['oid']}"},
                    "verify": {"href": f"{self.url}/lfs-verify/{obj['oid']}"},
                }
            objects.append(entry)
        return 200, {"transfer": "basic", "objects": objects}

    def lfs_upload(self, oid: str, body: bytes) -> tuple[int, object]:
        if hashlib.sha256(body).hexdigest() != oid:
            return 400, {"error": "The content does not match its oid"}
        self.lfs[oid] = body
        self.lfs_uploads += 1
        return 200, {}

    def commit(self, repo_id: str, repo: Repo, revision: str, body: bytes) -> tuple[int, object]:
        parent = repo.resolve(revision)
        if parent is None:
            return 404, {"error": f"Invalid rev id: {revision}"}
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        header = next((x["value"] for x in lines if x["key"] == "header"), None)
        if not header or not header.get("summary"):
            return 400, {"error": "A commit needs a header with a summary"}
        files = dict(repo.commits[parent]["files"])
        for line in lines:
            value = line["value"]
            if line["key"] == "file":
                content = base64.b64decode(value["content"])
                files[value["path"]] = {
                    "size": len(content),
                    "blob_id": blob_id(content),
                    "sha256": None,
                    "content": content,
                }
            elif line["key"] == "lfsFile":
                if value["oid"] not in self.lfs:
                    return 422, {
                        "error": f"Your push was rejected: {value['path']} points to an LFS object never uploaded"
                    }
                content = self.lfs[value["oid"]]
                pointer = (
                    f"version https://git-lfs.github.com/spec/v1\noid sha256:{value['oid']}\nsize {len(content)}\n"
                )
                files[value["path"]] = {
                    "size": len(content),
                    "blob_id": blob_id(pointer.encode()),
                    "sha256": value["oid"],
                    "content": None,
                }
            elif line["key"] == "deletedFile":
                if files.pop(value["path"], None) is None:
                    return 404, {"error": f"A file with this name doesn't exist: {value['path']}"}
        oid = self._new_commit(repo, parent, files, header["summary"])
        return 200, {"commitUrl": f"{self.url}/datasets/{repo_id}/commit/{oid}", "commitOid": oid, "success": True}

    def tree(self, repo: Repo, revision: str) -> tuple[int, object]:
        sha = repo.resolve(revision)
        if sha is None:
            return 404, {"error": f"Invalid rev id: {revision}"}
        entries, folders = [], set()
        for path, e in sorted(repo.commits[sha]["files"].items()):
            parts = path.split("/")
            folders |= {"/".join(parts[:i]) for i in range(1, len(parts))}
            entry = {"type": "file", "path": path, "size": e["size"], "oid": e["blob_id"]}
            if e["sha256"]:
                entry["lfs"] = {"oid": e["sha256"], "size": e["size"], "pointerSize": 130}
            entries.append(entry)
        entries += [{"type": "directory", "path": f, "oid": blob_id(f.encode())} for f in sorted(folders)]
        return 200, entries

    @staticmethod
    def create_tag(repo: Repo, revision: str, payload: dict) -> tuple[int, object]:
        sha = repo.resolve(revision)
        if sha is None:
            return 404, {"error": f"Invalid rev id: {revision}"}
        if payload["tag"] in repo.tags:
            return 409, {"error": f"Tag {payload['tag']} already exists"}
        repo.tags[payload["tag"]] = sha
        return 200, {}

    @staticmethod
    def answer(h, status: int, body, headers: dict | None = None) -> None:
        data = json.dumps(body).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        if status >= 400 and isinstance(body, dict) and body.get("error"):
            h.send_header("X-Error-Message", body["error"])
        for name, value in (headers or {}).items():
            h.send_header(name, value)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)
