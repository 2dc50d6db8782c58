"""The crowd study of `make bench-burst`, made through the project's own services, and the
checks on what the crowd left in the database.

    setup_study.py make  --slug S --participants N --k 3 --items 10 --out links.json
    setup_study.py check --slug S  (prints a JSON object: items over k, answers stored)

`make` imports the demo's LitSumm sources and summaries (fixtures/demo/litsumm_demo.jsonl)
through the importer (`datasets.importing.import_records`, what `manage.py import_jsonl`
runs), copied under new keys until there are enough items for N participants x `items`
ratings at k raters per item, plus three gold items; then an onboarding with a consent
text and instructions, a qualification batch of the three gold items with a pass rule
(overall within 1 of gold, one attempt), and a recruitment link (k, `items` per
participant, N participants at most). It writes the link's signed URL for each of the N
participants (Prolific's three ids each) to --out.

Runs with the server's environment (DATABASE_URL, DEBUG, ...), from the project root.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
GOLD_KEYS = ("gold-1", "gold-2", "gold-3")
GOLD_OVERALL = 4  # what the participants answer on every item: they pass
CONSENT = "You are asked to rate summaries of trial abstracts. Your answers are stored with a pseudonym."
INSTRUCTIONS = "Read the context first, then the summary. Give the overall score as the guidelines say."


def _django():
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()


def records(slug: str, summaries: int) -> list[dict]:
    """The demo's study line under `slug`, then its sources and summaries copied (new keys)
    until there are `summaries` summaries; the last three are the gold items."""
    with (ROOT / "fixtures" / "demo" / "litsumm_demo.jsonl").open(encoding="utf-8") as handle:
        demo = [json.loads(line) for line in handle if line.strip()]
    study = next(r for r in demo if r["type"] == "study")
    sources = [r for r in demo if r["type"] == "source"]
    by_source: dict[str, list[dict]] = {}
    for r in demo:
        if r["type"] == "summary":
            by_source.setdefault(r["source"], []).append(r)
    out = [{**study, "slug": slug, "title": f"Crowd benchmark {slug}"}]
    made, copy = 0, 0
    while made < summaries:
        for source in sources:
            if made >= summaries:
                break
            key = f"{source['key']}-c{copy}"
            out.append({**source, "study": slug, "key": key})
            for summary in by_source.get(source["key"], []):
                if made >= summaries:
                    break
                left = summaries - made
                name = GOLD_KEYS[3 - left] if left <= len(GOLD_KEYS) else f"{summary['key']}-c{copy}"
                out.append({**summary, "study": slug, "source": key, "key": name})
                made += 1
        copy += 1
    return out


def make(args) -> dict:
    _django()
    from annotate.models import Study, Summary
    from annotate.services.adjudication import record_expected_answer
    from annotate.services.batches import create_batch
    from annotate.services.qualification import set_qualification_rule
    from datasets.importing import import_records
    from recruit.services import links, onboarding

    items = math.ceil(args.participants * args.items / args.k)
    import_records(lines=(json.dumps(r) + "\n" for r in records(args.slug, items + len(GOLD_KEYS))))
    study = Study.objects.get(slug=args.slug)
    gold = list(Summary.objects.filter(study=study, key__in=GOLD_KEYS).order_by("key"))
    for summary in gold:
        record_expected_answer(study=study, summary=summary, purpose="gold", answers={"overall": GOLD_OVERALL})
    # A qualification batch needs no rater: participants get its gold items on arrival.
    create_batch(study=study, name="Screening", kind="qualification", raters=[], design="k_raters", seed=1, gold=gold)
    set_qualification_rule(
        study=study, threshold=1.0, questions=["overall"], tolerances={"overall": 1}, attempts_allowed=1
    )
    onboarding.save_onboarding(study=study, consent_text=CONSENT, instructions=INSTRUCTIONS)
    link = links.create_link(
        study=study,
        name="burst",
        raters_per_item=args.k,
        items_per_participant=args.items,
        max_participants=args.participants,
        time_budget_minutes=240,
        lease_minutes=120,
        completion_url="http://127.0.0.1:9/complete",
        completion_code="BURSTDONE",
        screenout_code="BURSTOUT",
    )
    token = links.link_token(link)
    urls = [
        f"/r/{token}/?PROLIFIC_PID={args.slug}-p{i:05d}&STUDY_ID={args.slug}&SESSION_ID=s{i:05d}"
        for i in range(args.participants)
    ]
    doc = {"study": args.slug, "k": args.k, "items_per_participant": args.items, "link_items": items, "urls": urls}
    Path(args.out).write_text(json.dumps(doc))
    return {k: v for k, v in doc.items() if k != "urls"}


def check(args) -> dict:
    """What the crowd left: items over k on the link's batch (must be 0), the submitted
    answers stored on the link's items and on the qualification items, and the items
    whose answer is stored more than once (must be 0)."""
    _django()
    from django.db.models import Count

    from annotate.models import Assignment, Revision
    from recruit.models import Participant, RecruitmentLink

    link = RecruitmentLink.objects.select_related("batch").get(study__slug=args.slug)
    live = Assignment.objects.filter(batch=link.batch).exclude(state=Assignment.State.WITHDRAWN)
    over_k = live.values("summary_id").annotate(n=Count("pk")).filter(n__gt=link.batch.raters_per_item).count()
    submitted = Revision.objects.filter(status=Revision.Status.SUBMITTED, assignment__study__slug=args.slug)
    main = submitted.filter(assignment__batch=link.batch)
    qualification = submitted.filter(assignment__batch__kind="qualification")
    twice = submitted.values("assignment_id").annotate(n=Count("pk")).filter(n__gt=1).count()
    return {
        "items_over_k": over_k,
        "answers_stored": main.count(),
        "qualification_answers_stored": qualification.count(),
        "items_stored_more_than_once": twice,
        "assignments_submitted": Assignment.objects.filter(batch=link.batch, state=Assignment.State.SUBMITTED).count(),
        "participants": dict(
            Participant.objects.filter(link=link)
            .values_list("outcome")
            .annotate(n=Count("pk"))
            .values_list("outcome", "n")
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["make", "check"])
    parser.add_argument("--slug", required=True)
    parser.add_argument("--participants", type=int, default=5)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--items", type=int, default=10)
    parser.add_argument("--out", default="links.json")
    args = parser.parse_args()
    result = make(args) if args.action == "make" else check(args)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
