"""Refresh the screenshots in docs/ from the demo, in real Chromium.

    .venv/bin/python docs/screenshots.py

Builds the demo as `make run` does (migrate + load_demo --with-answers +
load_question_demo --with-answers, plus the claims example) in a throwaway SQLite
database, serves it with runserver on a free port, and captures, as rater1:
  docs/queue.png          the queue, every item's state
  docs/rating-page.png    a LitSumm item still to rate (Item k of N, previous/next, the rubric)
  docs/rating-page-800.png the same at 800x600: the context in its own scroll box
  docs/factpico-page.png  a FactPICO item after a refused submit (every problem, per result too)
  docs/question-answer.png an answer to a clinical question, a citation hovered
  docs/claims-page.png    claims judged by people (fixtures/claims-example.jsonl), two judged
and as admin:
  docs/study-page.png     a study: its batches, the report and its downloads
  docs/batch-builder.png  the batch builder with a preview of a sample of 6
  docs/batch-progress.png a batch's progress per rater
  docs/monitor.png        the batch's live quality monitor (per-rater figures and actions)
  docs/adjudication.png   one item's answers side by side, from the disagreement list
  docs/report.png         the FactPICO study's report (its header, downloads, agreement)
  docs/imports.png        the import page after an import
  docs/recruitment.png    a recruitment link made for a Prolific-style wave
  docs/admin-assignment.png an assignment in the Django admin, found by its uuid
Nothing outside docs/ and a temporary directory is written.
"""

from __future__ import annotations

import json
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
PASSWORD = "rate-summaries-2026"


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
        env = {
            **os.environ,
            "DATABASE_URL": f"sqlite:///{tmp}/demo.sqlite3",
            "DEBUG": "1",
            "DEMO_PASSWORD": PASSWORD,
            "IMPORTS_DIR": f"{tmp}/imports",
        }
        for command in (
            ["migrate", "-v0"],
            ["load_demo", "--with-answers"],
            ["load_question_demo", "--with-answers"],
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
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
                capture_rater(browser, base)
                capture_admin(browser, base, Path(tmp))
                browser.close()
        finally:
            server.terminate()
            server.wait(timeout=30)


def log_in(browser, base: str, username: str):
    page = browser.new_page(viewport={"width": 1280, "height": 900}, base_url=base)
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
    return page


def shoot(page, name: str, **options) -> None:
    page.screenshot(path=str(DOCS / name), **options)
    print("docs/" + name)


def capture_rater(browser, base: str) -> None:
    page = log_in(browser, base, "rater1")
    page.goto("/rate/")
    shoot(page, "queue.png", full_page=True)
    # Items still to rate (the demo leaves the last three of each main queue open).
    items = page.locator("li.state-pending a, li.state-in_progress a")
    hrefs = [items.nth(i).get_attribute("href") for i in range(items.count())]

    def first(test) -> str | None:
        for href in hrefs:
            page.goto(href)
            page.wait_for_load_state("load")
            if test():
                return href
        return None

    litsumm = first(lambda: page.locator("fieldset[data-question='failure_modes']").count() > 0)
    shoot(page, "rating-page.png")
    page.set_viewport_size({"width": 800, "height": 600})
    page.goto(litsumm)
    page.evaluate("window.scrollTo(0, document.querySelector('.source').getBoundingClientRect().top + scrollY - 8)")
    shoot(page, "rating-page-800.png")
    page.set_viewport_size({"width": 1280, "height": 900})

    if first(lambda: page.locator("fieldset[data-question='population']").count() > 0):
        page.locator(".finding").first.locator("input[type=radio]").nth(3).check()  # a score, no rationale
        page.get_by_role("button", name="Submit").click()
        page.locator("#error-summary").wait_for(timeout=30000)
        page.evaluate("window.scrollTo(0, 0)")
        shoot(page, "factpico-page.png")

    def cited_answer() -> bool:
        cites = page.locator("#summary-text .cite")
        return bool(page.locator("#question-heading").count() and cites.count() and cites.first.inner_text() == "[1]")

    if first(cited_answer):
        page.locator("#summary-text .cite").first.hover()  # article [1] comes first in the context
        page.locator(".sentences li.ref-linked").first.wait_for(timeout=30000)
        page.evaluate("window.scrollTo(0, 0)")
        shoot(page, "question-answer.png")

    if first(lambda: page.locator("fieldset[data-question='claims_supported'] .claim-item").count() == 3):
        claims = page.locator("fieldset[data-question='claims_supported'] .claim-item")
        judged = [("supported", "Attacks fell from 4.1 to 2.0 a month."), ("not_supported", "Only adults took part.")]
        for i, (value, reason) in enumerate(judged):
            claims.nth(i).locator(f"input[value='{value}']").check()
            claims.nth(i).locator("textarea").fill(reason)
        claims.nth(2).scroll_into_view_if_needed()
        shoot(page, "claims-page.png")
    page.close()


def capture_admin(browser, base: str, tmp: Path) -> None:
    page = log_in(browser, base, "admin")
    page.goto("/studies/demo-factpico/")
    shoot(page, "study-page.png")

    page.goto("/studies/demo-factpico/batches/new/")
    page.get_by_label("Name").fill("second-round")
    page.get_by_label("rater1").check()
    page.get_by_label("rater2").check()
    page.get_by_label("Sample size").fill("6")
    page.get_by_role("button", name="Preview").click()
    page.locator("#preview").wait_for()
    shoot(page, "batch-builder.png", full_page=True)

    page.goto("/studies/demo-litsumm/")
    page.get_by_role("link", name="main", exact=True).click()
    page.wait_for_load_state("load")
    shoot(page, "batch-progress.png")
    page.get_by_role("link", name="Live quality monitor").click()
    page.locator("#monitor-table").wait_for()
    shoot(page, "monitor.png", full_page=True)
    page.go_back()
    page.get_by_role("link", name="Disagreements").click()
    page.locator("table a").first.click()
    page.wait_for_load_state("load")
    shoot(page, "adjudication.png")

    page.set_default_timeout(600_000)  # the report is computed in the background
    page.goto("/analysis/demo-factpico/")
    page.get_by_role("heading", name="Agreement", exact=True).wait_for()
    shoot(page, "report.png")

    upload = tmp / "new-summaries.jsonl"
    records = [
        {"type": "source", "study": "demo-litsumm", "key": "screenshot-source", "text": "Adults took part. It ended."},
        {
            "type": "summary",
            "study": "demo-litsumm",
            "source": "screenshot-source",
            "key": "screenshot-summary",
            "text": "Adults took part.",
            "generator": "demo-handwritten",
        },
    ]
    upload.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    page.goto("/studies/demo-litsumm/imports/")
    page.get_by_label("JSON Lines file").set_input_files(str(upload))
    page.get_by_role("button", name="Import").click()
    page.locator("table.data time").first.wait_for()
    shoot(page, "imports.png")

    # A recruitment link for a Prolific-style wave (docs/recruitment.md).
    page.goto("/studies/demo-factpico/recruitment/")
    page.locator("#id_name").fill("Prolific wave 1")
    page.locator("#id_completion_url").fill("https://app.prolific.com/submissions/complete")
    page.locator("#id_completion_code").fill("C1A2B3C4")
    page.locator("#id_screenout_code").fill("SCREEN01")
    page.locator("#create-link").click()
    page.wait_for_load_state("load")
    shoot(page, "recruitment.png", full_page=True)

    # An assignment's uuid, as the batch page shows it, searched for in the admin.
    page.goto("/studies/demo-litsumm/")
    page.get_by_role("link", name="main", exact=True).click()
    page.wait_for_load_state("load")
    uuid = page.locator("input[name='assignment']").first.get_attribute("value")
    page.goto(f"/admin/annotate/assignment/?q={uuid}")
    page.locator("#result_list tbody a").first.click()
    page.wait_for_load_state("load")
    shoot(page, "admin-assignment.png")
    page.close()


if __name__ == "__main__":
    main()
