"""Whether a demo is already loaded: a cheap check before any heavy import.

`make run` loads the demos on every start (`manage.py prepare --demo`). Once
they are in the database, the loaders (`load_demo`, `load_question_demo`) ask this
module first and stop: two queries, and nothing imported beyond the models. Loading
the demo builds a BM25 index and imports numpy, scipy, bm25s and PyStemmer, and every
worker gunicorn forks would inherit them.

"Loaded" means: each of the demo's studies has its batches, and the demo accounts are
members of each in their demo roles. A demo missing any of that is loaded again (the
loaders are idempotent: what exists stays, what is missing is made); `--reload` loads
again regardless (a newer fixture, say).
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db.models import Q

from annotate.models import Batch, StudyMembership

DEFAULT_DEMO_PASSWORD = "rate-summaries-2026"
DEMO_STUDY = "demo-litsumm"
FACTPICO_STUDY = "demo-factpico"
PAIRWISE_STUDY = "demo-pairwise"
QUESTION_STUDY = "demo-questions"
DEMO_ADMIN = "admin"
DEMO_RATERS = ("rater1", "rater2")


def demo_loaded(slugs: Sequence[str]) -> bool:
    """Whether every study in `slugs` has batches and the demo accounts in their roles."""
    with_batches = Batch.objects.filter(study__slug__in=slugs).values("study_id").distinct().count()
    if with_batches != len(slugs):
        return False
    members = StudyMembership.objects.filter(study__slug__in=slugs).filter(
        Q(user__username=DEMO_ADMIN, role=StudyMembership.Role.ADMIN)
        | Q(user__username__in=DEMO_RATERS, role=StudyMembership.Role.RATER)
    )
    return members.count() == len(slugs) * (1 + len(DEMO_RATERS))
