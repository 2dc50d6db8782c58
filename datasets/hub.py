"""The Hugging Face Hub through huggingface_hub's own client (HfApi): a dataset repository
made or found, one commit of a release's folder, the repository's files at a revision, its
tags, and a tag on a commit. Each call is tried again after a backoff on a busy answer
(429, honouring Retry-After), a 5xx or a dropped connection, and reported to `record`
(method, path, status, outcome, attempts) for the release's log, as datasets.zenodo does.

huggingface_hub is imported when a push starts, never when the web app starts. It reads
its own environment when first imported: `HF_ENDPOINT` (also passed here), `HF_HOME`,
`HF_HUB_DISABLE_XET` (with hf_xet installed, large files go to the Hub's Xet storage;
set it to upload them over the LFS protocol instead) and `HF_HUB_DISABLE_TELEMETRY`.
The token goes in the Authorization header, never in a URL or the log."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from core.env import env_float, env_int, env_str
from core.exceptions import ApplicationError
from core.retry import TRANSIENT_ERRORS, backoff_delay, retry_after_seconds
from datasets.zenodo import Call

DEFAULT_ENDPOINT = "https://huggingface.co"
REPO_TYPE = "dataset"
# Files the Hub writes itself into a new repository; a release leaves them alone.
HUB_OWN_FILES = frozenset({".gitattributes"})


class HubError(ApplicationError):
    code = "hub_error"
    http_status = 502


@dataclass(frozen=True)
class HubFile:
    """A file of the repository at a revision: its size and how the Hub names its content
    (the SHA-256 of an LFS file, the git blob id of a regular one)."""

    path: str
    size: int
    sha256: str | None
    blob_id: str


def git_blob_id(data: bytes) -> str:
    """The id git gives a file's content: SHA-1 of "blob <size>\\0" and the bytes."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def _judge(exc: BaseException) -> tuple[int | None, str, float | None] | None:
    """What a failed HfApi call met: (HTTP status or None, what to say, Retry-After), or
    None when it was not an answer of the Hub (nor a dropped connection) at all. An LFS
    upload that failed is a RuntimeError whose cause is the HTTP error."""
    from huggingface_hub.errors import HfHubHTTPError

    if isinstance(exc, RuntimeError) and isinstance(exc.__cause__, (HfHubHTTPError, *TRANSIENT_ERRORS)):
        exc = exc.__cause__
    if isinstance(exc, HfHubHTTPError):
        status = _status_of(exc)
        retry_after = retry_after_seconds(exc.response.headers.get("retry-after", "")) if status else None
        return status, _server_message(exc) or f"HTTP {status}", retry_after
    if isinstance(exc, TRANSIENT_ERRORS):
        return None, type(exc).__name__, None
    if isinstance(exc, ValueError):  # the Hub's answer says the card or a file is invalid
        return None, " ".join(str(exc).split())[:300], None
    return None


def _retryable(status: int | None, exc: BaseException) -> bool:
    if isinstance(exc, ValueError):
        return False
    return status is None or status == 429 or status >= 500


def _status_of(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def _server_message(exc: BaseException) -> str:
    message = getattr(exc, "server_message", None) or ""
    return " ".join(str(message).split())[:300]


HINTS = {
    401: " Check HF_TOKEN.",
    403: " The token cannot write to this repository (a read token, or another owner's namespace).",
    404: " No such repository for this token (check the name, or the token's access).",
}


class HubClient:
    def __init__(
        self,
        *,
        endpoint: str = DEFAULT_ENDPOINT,
        token: str,
        max_retries: int = 4,
        backoff_base: float = 1.0,
        backoff_max: float = 30.0,
        record: Callable[[Call], None] = lambda call: None,
    ):
        if not token:
            raise HubError("HF_TOKEN is not set: a push needs a Hugging Face access token with write access.")
        from huggingface_hub import HfApi

        self.endpoint = endpoint.rstrip("/")
        self.max_retries, self.backoff_base, self.backoff_max = max_retries, backoff_base, backoff_max
        self.record = record
        self.api = HfApi(endpoint=self.endpoint, token=token, library_name="ratings-platform")

    @classmethod
    def from_environment(cls, *, record: Callable[[Call], None] = lambda call: None) -> HubClient:
        return cls(
            endpoint=env_str("HF_ENDPOINT", DEFAULT_ENDPOINT),
            token=env_str("HF_TOKEN", ""),
            max_retries=env_int("HF_MAX_RETRIES", 4, minimum=0),
            backoff_max=env_float("HF_BACKOFF_MAX", 30.0, positive=True),
            record=record,
        )

    def __enter__(self) -> HubClient:
        return self

    def __exit__(self, *exc: object) -> None:
        pass  # huggingface_hub keeps one shared HTTP session for the process

    def repo_url(self, repo_id: str) -> str:
        return f"{self.endpoint}/datasets/{repo_id}"

    # --- one call ---------------------------------------------------------------------------

    def _call(
        self, method: str, path: str, what: str, send: Callable[[], Any], ok: tuple[int | None, str] = (200, "ok")
    ) -> Any:
        """Run `send()` (one HfApi call) until it answers or a refusal, recording the outcome
        (`ok`: the status and outcome recorded for an answer the call accepts)."""
        attempts = 0
        while True:
            attempts += 1
            try:
                result = send()
            except Exception as exc:
                failure = _judge(exc)
                if failure is None:
                    raise  # not the Hub's answer: a bug, seen as such
                status, text, retry_after = failure
                if not _retryable(status, exc):
                    self._refused(method, path, what, status, text, attempts)
            else:
                self.record(Call(method, path, ok[0], ok[1], attempts))
                return result
            if attempts > self.max_retries:
                self.record(Call(method, path, status, f"gave up: {text}", attempts))
                raise HubError(f"The Hub did not answer {what} ({text} after {attempts} attempts); try again later.")
            time.sleep(backoff_delay(attempts, self.backoff_base, self.backoff_max, retry_after))

    def _refused(self, method: str, path: str, what: str, status: int | None, message: str, attempts: int):
        self.record(Call(method, path, status, f"refused: {message}", attempts))
        shown = f"HTTP {status} " if status else ""
        raise HubError(
            f"The Hub refused {what}: {shown}{message}.{HINTS.get(status, '')}", extra={"status": status}
        ) from None

    def _path(self, repo_id: str, tail: str) -> str:
        return f"/api/{REPO_TYPE}s/{repo_id}/{tail}"

    # --- the calls a push makes -------------------------------------------------------------------

    def create_repo(self, repo_id: str, *, private: bool) -> None:
        """Make the dataset repository, or find it (409: it exists); an existing one is set
        to the visibility chosen."""
        self._call(
            "POST",
            "/api/repos/create",
            f"making the repository {repo_id}",
            lambda: self.api.create_repo(repo_id, repo_type=REPO_TYPE, private=private, exist_ok=True),
            ok=(None, "ok: made, or there already (409)"),
        )
        info = self._call(
            "GET",
            f"/api/{REPO_TYPE}s/{repo_id}",
            f"the repository {repo_id}",
            lambda: self.api.repo_info(repo_id, repo_type=REPO_TYPE),
        )
        if bool(info.private) != private:
            self._call(
                "PUT",
                self._path(repo_id, "settings"),
                "the repository's visibility",
                lambda: self.api.update_repo_settings(repo_id, repo_type=REPO_TYPE, private=private),
            )

    def files(self, repo_id: str, revision: str) -> dict[str, HubFile]:
        """Every file of the repository at `revision` (a branch, tag or commit)."""
        from huggingface_hub.hf_api import RepoFile

        def listing() -> dict[str, HubFile]:
            found = {}
            for entry in self.api.list_repo_tree(repo_id, repo_type=REPO_TYPE, revision=revision, recursive=True):
                if isinstance(entry, RepoFile):
                    sha = entry.lfs.sha256 if entry.lfs else None
                    found[entry.path] = HubFile(entry.path, entry.size, sha, entry.blob_id)
            return found

        tail = f"tree/{quote(revision, safe='')}"
        return self._call("GET", self._path(repo_id, tail), f"the files at {revision}", listing)

    def commit(
        self, repo_id: str, *, files: Sequence[tuple[str, Path]], delete: Sequence[str], message: str, description: str
    ) -> str:
        """One commit on main adding `files` (path in the repository, local file) and
        deleting `delete`; returns the commit's id. Files the Hub holds already with the same
        content are not sent again, and a commit that changes nothing answers main's head."""
        from huggingface_hub import CommitOperationAdd, CommitOperationDelete

        def send() -> str:
            # Operations are made anew for every attempt: huggingface_hub marks them as used.
            operations = [CommitOperationAdd(path_in_repo=name, path_or_fileobj=str(path)) for name, path in files]
            operations += [CommitOperationDelete(path_in_repo=name) for name in delete]
            info = self.api.create_commit(
                repo_id,
                operations,
                repo_type=REPO_TYPE,
                commit_message=message,
                commit_description=description,
                num_threads=2,
            )
            return info.oid

        return self._call("POST", self._path(repo_id, "commit/main"), "the commit", send)

    def tags(self, repo_id: str) -> dict[str, str]:
        """The repository's tags: name -> commit id."""
        refs = self._call(
            "GET",
            self._path(repo_id, "refs"),
            "the tags",
            lambda: self.api.list_repo_refs(repo_id, repo_type=REPO_TYPE),
        )
        return {tag.name: tag.target_commit for tag in refs.tags}

    def tag(self, repo_id: str, *, tag: str, revision: str, message: str) -> None:
        self._call(
            "POST",
            self._path(repo_id, f"tag/{revision}"),
            f"the tag {tag}",
            lambda: self.api.create_tag(
                repo_id, tag=tag, revision=revision, tag_message=message, repo_type=REPO_TYPE, exist_ok=True
            ),
        )
