"""Zenodo's deposit REST API (https://developers.zenodo.org/, "Deposit"): a small client on
httpx2 (the HTTP client the openai client depends on) with the polite retry loop of
core.retry, so a 429, a 5xx or a dropped connection is tried again after a backoff, and
every call is reported to `record` (method, path, status, outcome) for the release's log.

The token goes in the Authorization header, never in a URL. `ZENODO_URL` points at the
sandbox (https://sandbox.zenodo.org) or, in tests, at a local server that speaks the same
API (tests/datasets/zenodo_server.py)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2

from core.env import env_float, env_int, env_str
from core.exceptions import ApplicationError
from core.retry import RetriesExhausted, send_politely

DEFAULT_URL = "https://zenodo.org"


class ZenodoError(ApplicationError):
    code = "zenodo_error"
    http_status = 502


@dataclass(frozen=True)
class Call:
    method: str
    path: str  # no host, no query: never a token
    status: int | None
    outcome: str
    attempts: int


def md5_of(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class ZenodoClient:
    def __init__(
        self,
        *,
        base_url: str = DEFAULT_URL,
        token: str,
        timeout: float = 60.0,
        max_retries: int = 4,
        backoff_base: float = 1.0,
        backoff_max: float = 30.0,
        record: Callable[[Call], None] = lambda call: None,
    ):
        if not token:
            raise ZenodoError("ZENODO_TOKEN is not set: a deposit needs a Zenodo access token.")
        self.base_url = base_url.rstrip("/")
        self.max_retries, self.backoff_base, self.backoff_max = max_retries, backoff_base, backoff_max
        self.record = record
        self._http = httpx2.Client(
            timeout=httpx2.Timeout(timeout), headers={"Authorization": f"Bearer {token}", "Accept": "application/json"}
        )

    @classmethod
    def from_environment(cls, *, record: Callable[[Call], None] = lambda call: None) -> ZenodoClient:
        return cls(
            base_url=env_str("ZENODO_URL", DEFAULT_URL),
            token=env_str("ZENODO_TOKEN", ""),
            timeout=env_float("ZENODO_TIMEOUT", 60.0),
            max_retries=env_int("ZENODO_MAX_RETRIES", 4, minimum=0),
            record=record,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ZenodoClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- one call ---------------------------------------------------------------------------

    def _call(self, method: str, url: str, *, expect: tuple[int, ...], what: str, **kwargs) -> dict[str, Any]:
        if not url.startswith(("http://", "https://")):
            url = self.base_url + url
        path = urlsplit(url).path
        body = kwargs.pop("file", None)

        def send() -> httpx2.Response:
            if body is not None:
                with Path(body).open("rb") as stream:
                    return self._http.request(method, url, content=stream, **kwargs)
            return self._http.request(method, url, **kwargs)

        try:
            response, attempts = send_politely(
                send,
                pace=lambda: None,
                max_retries=self.max_retries,
                backoff_base=self.backoff_base,
                backoff_max=self.backoff_max,
                label=f"Zenodo {method} {path}",
            )
        except RetriesExhausted as exc:
            self.record(Call(method, path, None, f"gave up: {exc.failure}", exc.attempts))
            raise ZenodoError(f"Zenodo did not answer {what} ({exc}); try again later.") from None
        if response.status_code not in expect:
            message = _message(response)
            self.record(Call(method, path, response.status_code, f"refused: {message}", attempts))
            hint = {401: " Check ZENODO_TOKEN.", 403: " The token lacks the deposit scopes or access."}
            raise ZenodoError(
                f"Zenodo refused {what}: HTTP {response.status_code} {message}.{hint.get(response.status_code, '')}",
                extra={"status": response.status_code},
            )
        self.record(Call(method, path, response.status_code, "ok", attempts))
        return response.json() if response.content else {}

    # --- the deposit API ----------------------------------------------------------------------

    def create(self) -> dict[str, Any]:
        return self._call("POST", "/api/deposit/depositions", json={}, expect=(201,), what="a new deposition")

    def get(self, deposition_id: int) -> dict[str, Any]:
        return self._call("GET", f"/api/deposit/depositions/{deposition_id}", expect=(200,), what="the deposition")

    def new_version(self, deposition_id: int) -> dict[str, Any]:
        """A new draft version of a published deposition; returns the draft."""
        answer = self._call(
            "POST",
            f"/api/deposit/depositions/{deposition_id}/actions/newversion",
            expect=(201,),
            what="a new version",
        )
        return self._call("GET", answer["links"]["latest_draft"], expect=(200,), what="the new version's draft")

    def delete_file(self, deposition_id: int, file_id: str) -> None:
        self._call(
            "DELETE", f"/api/deposit/depositions/{deposition_id}/files/{file_id}", expect=(204,), what="an old file"
        )

    def upload(self, bucket_url: str, filename: str, path: Path) -> dict[str, Any]:
        return self._call(
            "PUT",
            f"{bucket_url.rstrip('/')}/{filename}",
            file=path,
            headers={"Content-Type": "application/octet-stream"},
            expect=(200, 201),
            what=f"the upload of {filename}",
        )

    def set_metadata(self, deposition_id: int, metadata: dict[str, Any]) -> dict[str, Any]:
        return self._call(
            "PUT",
            f"/api/deposit/depositions/{deposition_id}",
            json={"metadata": metadata},
            expect=(200,),
            what="the metadata",
        )

    def publish(self, deposition_id: int) -> dict[str, Any]:
        return self._call(
            "POST", f"/api/deposit/depositions/{deposition_id}/actions/publish", expect=(202,), what="publishing"
        )


def _message(response: httpx2.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.reason_phrase or ""
    if isinstance(body, dict):
        errors = body.get("errors") or []
        detail = "; ".join(
            f"{e.get('field', '')}: {e.get('message', '')}".strip(": ") for e in errors if isinstance(e, dict)
        )
        return (str(body.get("message", "")) + (f" ({detail})" if detail else "")).strip()[:500]
    return ""
