"""Refresh the rater-page screenshots in docs/ from the demo, in real Chromium.

    .venv/bin/python docs/screenshots.py

Builds the demo in a throwaway SQLite database (migrate + load_demo + load_question_demo), serves it with
runserver on a free port, logs in as rater1 and captures:
  docs/rating-page.png   a LitSumm item (Item k of N, previous/next, the rubric)
  docs/factpico-page.png a FactPICO item after a refused submit (the error summary)
  docs/question-answer.png an answer to a clinical question, a citation hovered
  docs/claims-page.png   claims judged by people (fixtures/claims-example.jsonl), two judged
Nothing outside docs/ and a temporary directory is written.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PYTHON = sys.executable
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=2)  # noqa: S310 - our own local server
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp}/demo.sqlite3", "DEBUG": "1"}
        for command in (
            ["migrate", "-v0"],
            ["load_demo"],
            ["load_question_demo"],
            ["import_jsonl", "fixtures/claims-example.jsonl"],
            ["assign", "--study", "claims-example", "--raters", "rater1,rater2", "--per-item", "2"],
        ):
            subprocess.run([PYTHON, "manage.py", *command], cwd=ROOT, env=env, check=True)
        port = free_port()
        server = subprocess.Popen(
            [PYTHON, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            wait_for(base + "/accounts/login/")
            capture(base)
        finally:
            server.terminate()
            server.wait(timeout=30)


def capture(base: str) -> None:
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1280, "height": 900}, base_url=base)
        page.goto("/accounts/login/")
        page.get_by_label("Username").fill("rater1")
        page.get_by_label("Password").fill("rate-summaries-2026")
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url("**/rate/")
        items = page.locator("a[href^='/rate/']").filter(has_text="Item")
        hrefs = [items.nth(i).get_attribute("href") for i in range(items.count())]
        for href in hrefs:
            page.goto(href)
            page.wait_for_load_state("load")
            if page.locator("fieldset[data-question='overall']").count():  # a LitSumm item
                page.screenshot(path=str(DOCS / "rating-page.png"))
                break
        for href in hrefs:
            page.goto(href)
            page.wait_for_load_state("load")
            if page.locator("fieldset[data-question='population']").count():
                page.locator("fieldset[data-question='population'] input[type=radio]").nth(3).check()
                page.get_by_role("button", name="Submit").click()
                page.locator("#error-summary").wait_for(timeout=30000)
                page.screenshot(path=str(DOCS / "factpico-page.png"))
                break
        for href in hrefs:
            page.goto(href)
            page.wait_for_load_state("load")
            cites = page.locator("#summary-text .cite")
            if page.locator("#question-heading").count() and cites.count() and cites.first.inner_text() == "[1]":
                cites.first.hover()  # article [1] comes first in the context, so it is in view
                page.locator(".sentences li.ref-linked").first.wait_for(timeout=30000)
                page.evaluate("window.scrollTo(0, 0)")
                page.screenshot(path=str(DOCS / "question-answer.png"))
                break
        for href in hrefs:
            page.goto(href)
            page.wait_for_load_state("load")
            items = page.locator("fieldset[data-question='claims_supported'] .claim-item")
            if items.count() == 3:
                judged = [
                    ("supported", "Attacks fell from 4.1 to 2.0 a month."),
                    ("not_supported", "Only adults took part."),
                ]
                for i, (value, reason) in enumerate(judged):
                    items.nth(i).locator(f"input[value='{value}']").check()
                    items.nth(i).locator("textarea").fill(reason)
                items.nth(2).scroll_into_view_if_needed()
                page.screenshot(path=str(DOCS / "claims-page.png"))
                break
        browser.close()


if __name__ == "__main__":
    main()
