"""The crowd of `make bench-burst`: each locust user is one panel participant following the
study's signed link, through the real pages and the rating page's real API calls.

A participant arrives (the link, then each redirect as a browser follows it), accepts the
consent, acknowledges the instructions, answers the three qualification items (each with
its feedback page) and rates ten items, then reaches the end page. On every item it does
what rate.js does: a draft saved with PUT to the item's API address (JSON, the X-CSRFToken
header, the page's writer name and write number), then the form's POST with
action=submit, the version the draft returned and the CSRF token, answered by a redirect.

Arrivals are a Poisson process of rate N / ARRIVAL_SECONDS conditioned on N arrivals in
the window: N + 1 exponential gaps, scaled so that their sum is the window (the arrival
times are then distributed as N sorted uniform times, the Poisson process's property).
Every user is spawned at once and waits for its own arrival time.

Think times: uniform 2-10 s before each onboarding step (and on each feedback page), 20-60 s
per item (half before the draft, half before the submit), times BURST_THINK_SCALE.

Environment: BURST_LINKS (the JSON from setup_study.py make), BURST_ARRIVAL_SECONDS,
BURST_THINK_SCALE, BURST_SEED, BURST_COUNTS (where the counts of accepted submits go).
"""

from __future__ import annotations

import json
import os
import random
import re
import secrets
import time
from pathlib import Path

import gevent
from arrivals import arrival_times  # beside this file: locust puts its folder on the path
from locust import HttpUser, events, task
from locust.exception import StopUser

LINKS = json.loads(Path(os.environ["BURST_LINKS"]).read_text())
URLS = LINKS["urls"]
ARRIVAL_SECONDS = float(os.environ.get("BURST_ARRIVAL_SECONDS", "60"))
THINK_SCALE = float(os.environ.get("BURST_THINK_SCALE", "1"))
RNG = random.Random(int(os.environ.get("BURST_SEED", "55")))
ONBOARDING_THINK = (2.0, 10.0)
RATING_THINK = (20.0, 60.0)
QUALIFICATION_ITEMS = 3


ARRIVALS = arrival_times(len(URLS), ARRIVAL_SECONDS, RNG)
COUNTS = {
    "participants": len(URLS),
    "arrived": 0,
    "finished": 0,
    "aborted": 0,
    "accepted_submits": 0,
    "accepted_qualification_submits": 0,
    "accepted_drafts": 0,
    "resent_after_closed_connection": 0,
    "problems": [],
}
CLOSED = re.compile(r"RemoteDisconnected|Connection aborted|ConnectionResetError|BadStatusLine")
STATE = {"next": 0, "t0": None}

UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
STEPS = [  # (name of a GET by its path)
    (re.compile(r"^/r/s/[^/]+/next/$"), "next step"),
    (re.compile(r"^/r/s/[^/]+/consent/$"), "consent page"),
    (re.compile(r"^/r/s/[^/]+/instructions/$"), "instructions page"),
    (re.compile(rf"^/rate/{UUID}/feedback/$"), "feedback page"),
    (re.compile(rf"^/rate/{UUID}/$"), "item page"),
    (re.compile(r"^/r/done/$"), "end page"),
    (re.compile(r"^/rate/studies/[^/]+/done/$"), "study done"),
    (re.compile(r"^/studies/[^/]+/continue/$"), "continue"),
]


def step_of(path: str) -> str:
    path = path.split("?", 1)[0]
    for pattern, name in STEPS:
        if pattern.match(path):
            return name
    return "other page"


def think(low_high: tuple[float, float]) -> None:
    if THINK_SCALE > 0:
        gevent.sleep(RNG.uniform(*low_high) * THINK_SCALE)


def field(html: str, name: str) -> str:
    found = re.search(rf'name="{re.escape(name)}"[^>]*value="([^"]*)"', html)
    return found.group(1) if found else ""


class Abort(Exception):
    pass


@events.test_start.add_listener
def _started(environment, **kwargs):
    STATE["t0"] = time.monotonic()


def step_figures(entry) -> dict:
    """One step from locust's own statistics: requests, errors, percentiles in ms."""
    known = entry.num_requests > 0

    def pct(q):
        return entry.get_response_time_percentile(q) if known else None

    return {
        "requests": entry.num_requests,
        "errors": entry.num_failures,
        "p50_ms": pct(0.5),
        "p95_ms": pct(0.95),
        "p99_ms": pct(0.99),
        "max_ms": entry.max_response_time if known else None,
    }


@events.quitting.add_listener
def _write_counts(environment, **kwargs):
    # At quitting every request is recorded (locust's periodic CSV can miss the last second).
    path = os.environ.get("BURST_COUNTS")
    if path:
        steps = {name: step_figures(entry) for (name, _method), entry in sorted(environment.stats.entries.items())}
        steps["all"] = step_figures(environment.stats.total)
        Path(path).write_text(json.dumps({**COUNTS, "steps": steps}, indent=2))


def _done_one(environment, ok: bool) -> None:
    COUNTS["finished" if ok else "aborted"] += 1
    if COUNTS["finished"] + COUNTS["aborted"] == COUNTS["participants"] and environment.runner is not None:
        gevent.spawn_later(0.5, environment.runner.quit)


class Participant(HttpUser):
    """One participant: the whole path once, then stops."""

    def on_start(self):
        self.index = STATE["next"]
        STATE["next"] += 1
        t0 = STATE["t0"] if STATE["t0"] is not None else time.monotonic()
        gevent.sleep(max(0.0, t0 + ARRIVALS[self.index] - time.monotonic()))
        # Each participant comes from an address of its own, as a crowd does (the server
        # trusts one proxy, TRUSTED_PROXY_COUNT=1): the per-address limit is not the crowd's.
        i = self.index + 1
        self.client.headers["X-Forwarded-For"] = f"127.{1 + i // 65536}.{(i // 256) % 256}.{i % 256}"
        self.writer = secrets.token_hex(12)

    # --- requests ------------------------------------------------------------------------

    def send(self, method: str, path: str, name: str, **kw):
        """One request (locust's catch_response context). Like a browser, a request whose
        reused keep-alive connection the server closed before answering (gunicorn closes
        its idle connections when it replaces a worker after max_requests) is sent once
        more, on a new connection; each such resend is counted in the report."""
        r = self.client.request(method, path, name=name, allow_redirects=False, catch_response=True, **kw)
        if r.status_code == 0 and CLOSED.search(str(r.error)):
            # Not answered at all: not entered, so not recorded; resent as Chromium does.
            COUNTS["resent_after_closed_connection"] += 1
            r = self.client.request(method, path, name=name, allow_redirects=False, catch_response=True, **kw)
        return r

    def get(self, path: str) -> tuple[str, str]:
        """GET `path` and the redirects after it, each request named by its step; the
        final page's path and text."""
        for _hop in range(10):
            name = step_of(path)
            with self.send("GET", path, name) as r:
                if r.status_code in (301, 302):
                    r.success()
                    path = r.headers["Location"]
                    continue
                if r.status_code != 200:
                    r.failure(f"{r.status_code} {r.error or ''}"[:200])
                    raise Abort(f"GET {name}: {r.status_code} {r.error or ''}"[:300])
                return path, r.text
        raise Abort(f"too many redirects after {path}")

    def post(self, path: str, data: dict, name: str) -> str:
        """A form post answered by a redirect; where it leads."""
        data = {"csrfmiddlewaretoken": self.client.cookies.get("csrftoken", ""), **data}
        with self.send("POST", path, name, data=data) as r:
            if r.status_code != 302:
                r.failure(f"{r.status_code} {r.error or ''}"[:200])
                raise Abort(f"POST {name}: {r.status_code} {r.error or ''}"[:300])
            r.success()
            return r.headers["Location"]

    # --- the path ------------------------------------------------------------------------

    @task
    def take_part(self):
        ok = False
        try:
            self.path()
            ok = True
        except Abort as exc:
            if len(COUNTS["problems"]) < 20:
                COUNTS["problems"].append(f"participant {self.index}: {exc}")
        finally:
            _done_one(self.environment, ok)
        raise StopUser()

    def path(self):
        COUNTS["arrived"] += 1
        with self.send("GET", URLS[self.index], "arrive") as r:
            if r.status_code != 302:
                r.failure(f"{r.status_code} {r.error or ''}"[:200])
                raise Abort(f"arrive: {r.status_code} {r.error or ''}"[:300])
            r.success()
            where = r.headers["Location"]
        where, html = self.get(where)
        if step_of(where) != "consent page":
            raise Abort(f"arrived at {where}, not the consent")
        think(ONBOARDING_THINK)
        where = self.post(where, {"decision": "accept", "version": field(html, "version"), "next": ""}, "consent")
        where, html = self.get(where)
        if step_of(where) != "instructions page":
            raise Abort(f"after consent at {where}, not the instructions")
        think(ONBOARDING_THINK)
        where = self.post(where, {"acknowledge": "yes", "next": ""}, "instructions")
        where, html = self.get(where)
        for _ in range(QUALIFICATION_ITEMS):
            where = self.rate(where, html, "qualification")
            if step_of(where) != "feedback page":
                raise Abort(f"after a qualification item at {where}, not its feedback")
            where, html = self.get(where)
            think(ONBOARDING_THINK)
            found = re.search(r'id="continue" href="([^"]+)"', html)
            if not found:
                raise Abort("feedback page without its continue link")
            where, html = self.get(found.group(1))
        rated = 0
        while step_of(where) == "item page":
            where = self.rate(where, html, "rating")
            rated += 1
            where, html = self.get(where)
        if step_of(where) != "end page" or rated != LINKS["items_per_participant"]:
            raise Abort(f"ended at {where} after {rated} items")

    def rate(self, where: str, html: str, kind: str) -> str:
        """One item as the rating page does it: a draft (PUT, JSON, X-CSRFToken), then the
        form's submit; the address the submit redirects to."""
        if step_of(where) != "item page":
            raise Abort(f"expected an item page, got {where}")
        api = re.search(r'data-api-url="([^"]+)"', html)
        csrf = field(html, "csrfmiddlewaretoken")
        if not api or not csrf:
            raise Abort("item page without its API address or CSRF token")
        think((RATING_THINK[0] / 2, RATING_THINK[1] / 2))
        body = {
            "answers": {"overall": 4, "failure_modes": []},
            "rationales": {},
            "version": int(field(html, "version") or 0),
            "active_seconds": 10,
            "writer": self.writer,
            "seq": 1,
        }
        headers = {"X-CSRFToken": csrf, "Accept": "application/json", "Referer": self.host + where}
        with self.send("PUT", api.group(1), f"{kind}: draft", json=body, headers=headers) as r:
            if r.status_code != 200:
                r.failure(f"{r.status_code} {r.error or ''}"[:200])
                raise Abort(f"draft: {r.status_code} {r.error or r.text[:200]}"[:300])
            version = r.json()["version"]
            COUNTS["accepted_drafts"] += 1
        think((RATING_THINK[0] / 2, RATING_THINK[1] / 2))
        data = {"csrfmiddlewaretoken": csrf, "version": str(version), "active_seconds": "10", "overall": "4"}
        data["action"] = "submit"
        with self.send("POST", where, f"{kind}: submit", data=data) as r:
            if r.status_code != 302:
                r.failure(f"{r.status_code} {r.error or ''}"[:200])
                raise Abort(f"submit: {r.status_code} {r.error or ''}"[:300])
            r.success()
            COUNTS["accepted_submits" if kind == "rating" else "accepted_qualification_submits"] += 1
            return r.headers["Location"]
