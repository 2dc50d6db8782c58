"""The one module that talks to Prolific's API (docs/recruitment.md, "Prolific's API"),
written from Prolific's published API reference:

- `GET  /api/v1/submissions/?study=<id>`: the study's submissions (paged: `_links.next`);
- `GET  /api/v1/submissions/<id>/`: one submission, with the bonuses paid on it;
- `POST /api/v1/submissions/<id>/transition/`: `{"action": "APPROVE"}` or `{"action":
  "REJECT", "rejection_category": ..., "message": ...}` (the message at least 100
  characters); Prolific ignores a repeated transition;
- `POST /api/v1/submissions/bulk-approve/`: `{"study_id", "submission_ids"}`;
- `POST /api/v1/submissions/bonus-payments/`: `{"study_id", "csv_bonuses":
  "<participant id>,<amount>\\n"}` sets up a bulk bonus payment (nothing is paid);
- `POST /api/v1/bulk-bonus-payments/<id>/pay/`: pays it. **Not idempotent**: every request
  pays again, so recruit.panel records the intent first and claims the payment once.

Every call has a timeout. A 429 is retried after its Retry-After (at most
MAX_RATE_LIMIT_WAIT seconds, MAX_RETRIES times) on the calls Prolific documents as safe to
repeat; the pay call is never retried here. Errors say whether the request may have been
acted on (`PanelError.ambiguous`): a timeout after sending, a dropped connection or a 5xx
may have been; a refused connection, a 4xx or a 429 was not."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx2
from django.conf import settings

from core.exceptions import ApplicationError

MAX_RETRIES = 2
MAX_RATE_LIMIT_WAIT = 30.0
TIMEOUT_SECONDS = 20.0

# Prolific's rejection categories (the transition's `rejection_category`), as its reference
# lists them, with the labels its own site shows.
REJECTION_CATEGORIES = (
    ("TOO_QUICKLY", "Too quick"),
    ("TOO_SLOWLY", "Too slow"),
    ("FAILED_INSTRUCTIONS", "Did not follow the instructions"),
    ("INCOMP_LONGITUDINAL", "Did not complete a longitudinal study"),
    ("FAILED_CHECK", "Failed an attention check"),
    ("LOW_EFFORT", "Low effort"),
    ("MALINGERING", "Malingering"),
    ("NO_CODE", "No completion code"),
    ("BAD_CODE", "Wrong completion code"),
    ("NO_DATA", "No data"),
    ("UNSUPP_DEVICE", "Unsupported device"),
    ("OTHER", "Other"),
)
MIN_REJECTION_MESSAGE = 100

# Submission statuses that give the place back: the participant will not finish.
RETURNED, TIMED_OUT = "RETURNED", "TIMED-OUT"


class PanelError(ApplicationError):
    """A call to the panel failed. `ambiguous`: the panel may have acted on it anyway."""

    code = "panel_error"
    http_status = 502

    def __init__(self, message: str, *, status: int | None = None, ambiguous: bool = False):
        super().__init__(message, extra={"status": status, "ambiguous": ambiguous})
        self.status = status
        self.ambiguous = ambiguous


class PanelNotConfigured(ApplicationError):
    code = "panel_not_configured"
    http_status = 409


@dataclass(frozen=True)
class Submission:
    id: str
    participant_id: str
    status: str
    bonus_payments: tuple[int, ...]  # cents, as Prolific lists them on the submission


@dataclass(frozen=True)
class CallRecord:
    """What recruit.panel logs of each HTTP exchange (a PanelCall row)."""

    method: str
    path: str
    status: int | None
    ok: bool
    message: str


def _submission(data: dict[str, Any]) -> Submission:
    return Submission(
        id=str(data.get("id", "")),
        participant_id=str(data.get("participant_id") or data.get("participant") or ""),
        status=str(data.get("status", "")),
        bonus_payments=tuple(int(round(float(b))) for b in data.get("bonus_payments") or ()),
    )


def _detail(response: httpx2.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:300]
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return str(error.get("detail") or error)[:300]
    return str(body)[:300]


class ProlificClient:
    """Prolific's API with the token from PROLIFIC_API_TOKEN at PROLIFIC_API_URL. Every HTTP
    exchange is appended to `calls` (recruit.panel stores them as PanelCall rows)."""

    def __init__(
        self,
        *,
        token: str,
        base_url: str,
        timeout: float = TIMEOUT_SECONDS,
        sleep: Callable[[float], None] = time.sleep,
    ):
        if not token:
            raise PanelNotConfigured("Set PROLIFIC_API_TOKEN to use Prolific's API from here.")
        self.base_url = base_url.rstrip("/") + "/"
        self.calls: list[CallRecord] = []
        self._sleep = sleep
        self._http = httpx2.Client(
            timeout=httpx2.Timeout(timeout),
            headers={"Authorization": f"Token {token}", "Accept": "application/json"},
        )

    @classmethod
    def from_settings(cls) -> ProlificClient:
        return cls(token=settings.PROLIFIC_API_TOKEN, base_url=settings.PROLIFIC_API_URL)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ProlificClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the calls ----------------------------------------------------------------------

    def list_submissions(self, study_id: str) -> list[Submission]:
        found: list[Submission] = []
        url: str | None = self._url("api/v1/submissions/")
        params: dict[str, str] | None = {"study": study_id}
        while url:
            body = self._call("GET", url, params=params, repeatable=True)
            found += [_submission(s) for s in body.get("results") or ()]
            following = (body.get("_links") or {}).get("next") or {}
            url = following.get("href") if isinstance(following, dict) else None
            params = None  # the next page's address carries them
        return found

    def get_submission(self, submission_id: str) -> Submission:
        return _submission(self._call("GET", self._url(f"api/v1/submissions/{submission_id}/"), repeatable=True))

    def approve(self, submission_id: str) -> Submission:
        url = self._url(f"api/v1/submissions/{submission_id}/transition/")
        return _submission(self._call("POST", url, json={"action": "APPROVE"}, repeatable=True))

    def reject(self, submission_id: str, *, category: str, message: str) -> Submission:
        url = self._url(f"api/v1/submissions/{submission_id}/transition/")
        body = {"action": "REJECT", "rejection_category": category, "message": message}
        return _submission(self._call("POST", url, json=body, repeatable=True))

    def bulk_approve(self, study_id: str, submission_ids: list[str]) -> None:
        body = {"study_id": study_id, "submission_ids": submission_ids}
        self._call("POST", self._url("api/v1/submissions/bulk-approve/"), json=body, repeatable=True)

    def create_bonus(self, study_id: str, rows: list[tuple[str, int]]) -> str:
        """Set up a bulk bonus payment ((participant id, cents) per row); its id."""
        csv = "".join(f"{pid},{cents // 100}.{cents % 100:02d}\n" for pid, cents in rows)
        body = self._call(
            "POST",
            self._url("api/v1/submissions/bonus-payments/"),
            json={"study_id": study_id, "csv_bonuses": csv},
            repeatable=False,  # each request sets up another payment
        )
        bonus_id = str(body.get("id") or "")
        if not bonus_id:
            raise PanelError("Prolific set up the bonus but answered no id.", ambiguous=True)
        return bonus_id

    def pay_bonus(self, bonus_id: str) -> None:
        self._call("POST", self._url(f"api/v1/bulk-bonus-payments/{bonus_id}/pay/"), json={}, repeatable=False)

    # --- HTTP ----------------------------------------------------------------------------

    def _url(self, path: str) -> str:
        return self.base_url + path

    def _call(self, method: str, url: str, *, params=None, json=None, repeatable: bool) -> dict[str, Any]:
        path = httpx2.URL(url).path
        for attempt in range(MAX_RETRIES + 1):
            try:
                response = self._http.request(method, url, params=params, json=json)
            except httpx2.ConnectError as exc:
                self._log(method, path, None, False, f"could not connect: {exc}")
                raise PanelError(f"Could not reach Prolific ({exc}).") from None
            except httpx2.TimeoutException as exc:
                # A connect timeout sent nothing; any later one may have been acted on.
                sent = not isinstance(exc, httpx2.ConnectTimeout)
                self._log(method, path, None, False, f"timed out ({type(exc).__name__})")
                raise PanelError("Prolific did not answer in time.", ambiguous=sent) from None
            except httpx2.TransportError as exc:
                self._log(method, path, None, False, f"connection lost: {type(exc).__name__}")
                raise PanelError("The connection to Prolific was lost before it answered.", ambiguous=True) from None
            status = response.status_code
            if status == 429 and repeatable and attempt < MAX_RETRIES:
                wait = _retry_after(response)
                self._log(method, path, status, False, f"rate limited: retrying after {wait:g} s")
                self._sleep(wait)
                continue
            if status >= 400:
                detail = _detail(response)
                self._log(method, path, status, False, detail)
                raise PanelError(_message(status, detail), status=status, ambiguous=status >= 500)
            self._log(method, path, status, True, "")
            if not response.content:
                return {}
            try:
                body = response.json()
            except ValueError:
                raise PanelError("Prolific answered something that is not JSON.", status=status) from None
            return body if isinstance(body, dict) else {"results": body}
        raise AssertionError("unreachable")  # the loop returns or raises

    def _log(self, method: str, path: str, status: int | None, ok: bool, message: str) -> None:
        self.calls.append(CallRecord(method=method, path=path, status=status, ok=ok, message=message))


def _retry_after(response: httpx2.Response) -> float:
    try:
        wait = float(response.headers.get("retry-after", "1"))
    except ValueError:
        wait = 1.0
    return min(max(wait, 0.0), MAX_RATE_LIMIT_WAIT)


def _message(status: int, detail: str) -> str:
    if status == 401:
        return "Prolific refused the API token (401): check PROLIFIC_API_TOKEN."
    if status == 404:
        return f"Prolific does not know this submission, study or payment (404): {detail}"
    if status == 429:
        return "Prolific is rate-limiting these calls (429): try again in a minute."
    if status >= 500:
        return f"Prolific failed ({status}); the call may or may not have been carried out."
    return f"Prolific refused the call ({status}): {detail}"
