"""A scripted Prolific API on 127.0.0.1, written from Prolific's published API reference
(the endpoints recruit/prolific.py uses), for the tests: it keeps submissions and bulk bonus
payments as Prolific does, and any endpoint can be scripted to answer otherwise (401, 404,
429 with Retry-After, 5xx, a slow answer, a connection dropped after the request was read),
with or without carrying the request out first.

Endpoints (paths under /api/v1/):
- GET submissions/?study=<id>: `{"results": [...], "_links": {"next": {"href": ...}}}`,
  PAGE_SIZE submissions a page;
- GET submissions/<id>/: one submission, with `bonus_payments` (cents);
- POST submissions/<id>/transition/: APPROVE, or REJECT with a known `rejection_category`
  and a `message` of at least 100 characters (else 400); a repeated transition is ignored;
- POST submissions/bulk-approve/: `{"study_id", "submission_ids"}`;
- POST submissions/bonus-payments/: `{"study_id", "csv_bonuses"}`, each line
  `<participant id>,<amount>`; a participant not in the study is a 400;
- POST bulk-bonus-payments/<id>/pay/: pays every row again on each request (Prolific's
  warning: not idempotent), and counts the requests in `pays[<id>]`."""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qs, urlsplit

from recruit.prolific import REJECTION_CATEGORIES
from tests.local_server import Reply, ScriptedServer

TOKEN = "test-token"
PAGE_SIZE = 2


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    body: dict[str, Any]
    authorization: str
    received_at: float = 0.0


@dataclass
class Act(Reply):
    """A scripted reply; with `process`, the request is carried out first (a payment made
    whose answer is then slow, fails or never comes)."""

    process: bool = False


@dataclass
class ProlificState:
    submissions: dict[str, dict[str, Any]] = field(default_factory=dict)
    bonuses: dict[str, dict[str, Any]] = field(default_factory=dict)
    pays: dict[str, int] = field(default_factory=dict)


def endpoint(method: str, path: str) -> str:
    """The endpoint's name, for scripting: list, get, transition, bulk_approve, bonus_setup, pay."""
    rest = path.removeprefix("/api/v1/")
    if rest == "submissions/":
        return "list"
    if rest == "submissions/bulk-approve/":
        return "bulk_approve"
    if rest == "submissions/bonus-payments/":
        return "bonus_setup"
    if re.fullmatch(r"submissions/[^/]+/transition/", rest):
        return "transition"
    if re.fullmatch(r"submissions/[^/]+/", rest):
        return "get"
    if re.fullmatch(r"bulk-bonus-payments/[^/]+/pay/", rest):
        return "pay"
    return "unknown"


class ProlificServer(ScriptedServer):
    url_path = "/"

    def __init__(self, replies: dict[str, list] | None = None):
        self.state = ProlificState()
        self._state_lock = threading.Lock()
        self._local = threading.local()  # the request's Authorization header, per server thread
        self._script(replies)
        self._listen(self._handler())

    # --- test set-up -------------------------------------------------------------------

    def add_submission(self, *, submission_id: str, participant_id: str, study_id: str, status: str = "ACTIVE"):
        self.state.submissions[submission_id] = {
            "id": submission_id,
            "participant_id": participant_id,
            "study_id": study_id,
            "status": status,
            "started_at": "2026-01-01T10:00:00Z",
            "bonus_payments": [],
        }

    def script(self, name: str, *replies) -> None:
        with self._lock:
            self.replies[name] = list(replies)

    def calls_to(self, name: str) -> list[Request]:
        return [r for r in self.requests if endpoint(r.method, r.path) == name]

    # --- the server ----------------------------------------------------------------------

    def parse(self, method: str, path: str, body: bytes) -> Request:
        parts = urlsplit(path)
        try:
            data = json.loads(body) if body else {}
        except ValueError:
            data = {"__invalid__": True}
        request = Request(method, parts.path, parse_qs(parts.query), data if isinstance(data, dict) else {}, "")
        request.received_at = time.monotonic()
        return request

    def _serve(self, handler, body: bytes) -> None:
        self._local.authorization = handler.headers.get("authorization", "")
        super()._serve(handler, body)

    def choose(self, request: Request) -> Reply:
        request.authorization = self._local.authorization
        name = endpoint(request.method, request.path)
        scripted = self.scripted(name, request)
        if scripted is not None:
            if isinstance(scripted, Act) and scripted.process:
                self._carry_out(name, request)
            return scripted
        if request.authorization != f"Token {TOKEN}":
            return _json(401, {"error": {"error_code": 140100, "title": "Not authorised", "detail": "Invalid token."}})
        return self._carry_out(name, request)

    def _carry_out(self, name: str, request: Request) -> Reply:
        with self._state_lock:
            handler = getattr(self, f"_{name}", None)
            if handler is None:
                return _json(404, {"error": {"detail": "Not found."}})
            return handler(request)

    def _list(self, request: Request) -> Reply:
        study = (request.query.get("study") or [""])[0]
        page = int((request.query.get("page") or ["1"])[0])
        rows = [s for s in self.state.submissions.values() if s["study_id"] == study]
        chunk = rows[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
        following = None
        if page * PAGE_SIZE < len(rows):
            following = {"href": f"{self.base_url}api/v1/submissions/?study={study}&page={page + 1}"}
        return _json(200, {"results": chunk, "_links": {"next": following}, "meta": {"count": len(rows)}})

    def _submission(self, request: Request) -> dict[str, Any] | None:
        submission_id = request.path.removeprefix("/api/v1/submissions/").split("/")[0]
        return self.state.submissions.get(submission_id)

    def _get(self, request: Request) -> Reply:
        found = self._submission(request)
        return _json(200, found) if found else _json(404, {"error": {"detail": "Submission not found."}})

    def _transition(self, request: Request) -> Reply:
        found = self._submission(request)
        if found is None:
            return _json(404, {"error": {"detail": "Submission not found."}})
        action = request.body.get("action")
        if action == "REJECT":
            if request.body.get("rejection_category") not in dict(REJECTION_CATEGORIES):
                return _json(400, {"error": {"detail": {"rejection_category": ["Not a valid choice."]}}})
            if len(request.body.get("message") or "") < 100:
                return _json(400, {"error": {"detail": {"message": ["At least 100 characters."]}}})
        elif action != "APPROVE":
            return _json(400, {"error": {"detail": {"action": ["Not a valid choice."]}}})
        if found["status"] == "AWAITING REVIEW":
            found["status"] = "APPROVED" if action == "APPROVE" else "REJECTED"
        return _json(200, found)

    def _bulk_approve(self, request: Request) -> Reply:
        ids = request.body.get("submission_ids") or []
        for submission_id in ids:
            found = self.state.submissions.get(submission_id)
            if found is None or found["study_id"] != request.body.get("study_id"):
                return _json(400, {"error": {"detail": f"Unknown submission {submission_id}."}})
        for submission_id in ids:
            if self.state.submissions[submission_id]["status"] == "AWAITING REVIEW":
                self.state.submissions[submission_id]["status"] = "APPROVED"
        return _json(200, {"message": "The request to bulk approve has been made successfully."})

    def _bonus_setup(self, request: Request) -> Reply:
        study = request.body.get("study_id")
        rows = []
        for line in (request.body.get("csv_bonuses") or "").splitlines():
            participant_id, amount = line.split(",")
            cents = int(Decimal(amount) * 100)
            if not any(
                s["participant_id"] == participant_id and s["study_id"] == study
                for s in self.state.submissions.values()
            ):
                return _json(400, {"error": {"detail": f"Invalid participant ids: {participant_id}"}})
            rows.append((participant_id, cents))
        bonus_id = f"bonus{len(self.state.bonuses) + 1:04d}"
        self.state.bonuses[bonus_id] = {"study": study, "rows": rows}
        total = sum(c for _, c in rows)
        return _json(201, {"id": bonus_id, "study": study, "amount": total, "fees": 0, "total_amount": total})

    def _pay(self, request: Request) -> Reply:
        bonus_id = request.path.removeprefix("/api/v1/bulk-bonus-payments/").split("/")[0]
        bonus = self.state.bonuses.get(bonus_id)
        if bonus is None:
            return _json(404, {"error": {"detail": "Bulk bonus payment not found."}})
        self.state.pays[bonus_id] = self.state.pays.get(bonus_id, 0) + 1
        for participant_id, cents in bonus["rows"]:
            for s in self.state.submissions.values():
                if s["participant_id"] == participant_id and s["study_id"] == bonus["study"]:
                    s["bonus_payments"].append(cents)
        return _json(202, {})

    def _unknown(self, request: Request) -> Reply:
        return _json(404, {"error": {"detail": "Not found."}})

    def paid_cents(self, participant_id: str) -> list[int]:
        return [
            c
            for s in self.state.submissions.values()
            if s["participant_id"] == participant_id
            for c in s["bonus_payments"]
        ]


def _json(status: int, body: Any) -> Reply:
    return Reply(body=json.dumps(body), status=status, content_type="application/json")


def act(
    status: int = 200, body: Any = None, *, process: bool = False, delay: float = 0.0, drop: bool = False, headers=None
) -> Act:
    return Act(
        body=json.dumps(body if body is not None else {}),
        status=status,
        content_type="application/json",
        process=process,
        delay=delay,
        drop=drop,
        headers=headers or {},
    )
