"""Reads for the analysis app (the ORM is allowed here, never in the statistics modules).

Ratings and summaries come through annotate.selectors; this module adds what only the
analysis needs: texts and claims for the automatic metrics, the fingerprint of the
ratings a cached report depends on, and the cached reports themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from django.contrib.auth import get_user_model
from django.db.models import Count, Max

from analysis.models import AnalysisResult
from analysis.versions import REPORT_VERSION
from annotate.models import Claim, Revision, Study, Summary

if TYPE_CHECKING:
    import pandas as pd


def submitted_revisions(*, study: Study, phase: str):
    revisions = Revision.objects.filter(assignment__study=study, status=Revision.Status.SUBMITTED)
    return revisions if phase == "all" else revisions.filter(phase=phase)


def ratings_fingerprint(*, study: Study, phase: str) -> tuple[str, int]:
    """(fingerprint, number of submitted revisions) of the ratings a report depends on.

    Count and newest ``updated_at`` of the study's submitted revisions in the phase, the
    study's rubric version and the report version: one aggregate query. A submitted
    revision is never edited, so a new answer always adds a row and changes the count.
    """
    stats = submitted_revisions(study=study, phase=phase).aggregate(n=Count("id"), newest=Max("updated_at"))
    newest = stats["newest"].isoformat() if stats["newest"] else "-"
    return f"v{REPORT_VERSION}:r{study.rubric_id}:{stats['n']}:{newest}", stats["n"]


# Apps that hold a reference text for some summaries register a function here (study ->
# {summary uuid: reference text}), e.g. literature: an answer's question's gold answer.
# analysis reads them without importing those apps, which sit above it.
REFERENCE_TEXTS: list[Callable[[Study], dict[str, str]]] = []


def register_reference_texts(provider: Callable[[Study], dict[str, str]]) -> None:
    if provider not in REFERENCE_TEXTS:
        REFERENCE_TEXTS.append(provider)


# Apps that store automatic evaluators' scores register a function here (study -> frame of
# item and `eval.<evaluator>.<name>` columns), e.g. generation.evaluators.evaluator_metrics.
METRIC_PROVIDERS: list[Callable[[Study], pd.DataFrame]] = []


def register_metric_provider(provider: Callable[[Study], pd.DataFrame]) -> None:
    if provider not in METRIC_PROVIDERS:
        METRIC_PROVIDERS.append(provider)


# The app that stores the `reference` evaluator's scores registers a function here (study ->
# frame of item and reference-score columns of today's version, generation.selectors).
STORED_METRICS: list[Callable[[Study], pd.DataFrame]] = []


def register_stored_reference_metrics(provider: Callable[[Study], pd.DataFrame]) -> None:
    if provider not in STORED_METRICS:
        STORED_METRICS.append(provider)


def stored_reference_metrics(*, study: Study) -> pd.DataFrame | None:
    """The stored reference scores of today's version (None when no app stores them)."""
    frames = [provider(study) for provider in STORED_METRICS]
    frames = [f for f in frames if len(f)]
    return frames[0] if frames else None


# Apps with automatic judges that answer the rubric like a rater register a function here
# (study -> (judge name, frame of item, question, part, value, label) or None; part: the
# finding or claim id, "" for the whole summary; value: a scale answer, label: a claim's
# option), e.g. generation's rubric judge (generation.selectors.judge_answer_frame). The
# report compares them with people; they never enter the human-only agreement.
JUDGE_PROVIDERS: list[Callable[[Study], tuple[str, pd.DataFrame] | None]] = []


def register_judge_provider(provider: Callable[[Study], tuple[str, pd.DataFrame] | None]) -> None:
    if provider not in JUDGE_PROVIDERS:
        JUDGE_PROVIDERS.append(provider)


def judge_scores(*, study: Study) -> list[tuple[str, pd.DataFrame]]:
    found = [provider(study) for provider in JUDGE_PROVIDERS]
    return [f for f in found if f is not None and len(f[1])]


def with_provided_metrics(*, study: Study, metrics: pd.DataFrame) -> pd.DataFrame:
    """`metrics` with every registered provider's columns joined on item (NaN where a
    provider has no score for a summary)."""
    for provider in METRIC_PROVIDERS:
        extra = provider(study)
        if len(extra):
            metrics = metrics.merge(extra, on="item", how="left")
    return metrics


def reference_texts(*, study: Study) -> dict[str, str]:
    """{summary uuid: reference text} from every registered provider (REFERENCE_TEXTS)."""
    gold: dict[str, str] = {}
    for provider in REFERENCE_TEXTS:
        gold.update(provider(study))
    return gold


def summary_texts_frame(*, study: Study) -> pd.DataFrame:
    """item (summary uuid), summary_text, source_text: the inputs of the text metrics; and
    gold_text when a registered provider gives a reference text for some summary."""
    rows = Summary.objects.filter(study=study).order_by("key").values_list("uuid", "text", "source__text")
    import pandas as pd  # only where a frame is built: the web app starts without pandas

    frame = pd.DataFrame(
        [(str(uuid), text, source) for uuid, text, source in rows], columns=["item", "summary_text", "source_text"]
    )
    gold = reference_texts(study=study)
    if any(gold.values()):
        frame["gold_text"] = [gold.get(item, "") for item in frame["item"]]
    return frame


def claims_frame(*, study: Study) -> pd.DataFrame:
    """item, verdict, probability of every claim of the study's summaries."""
    rows = Claim.objects.filter(summary__study=study).values_list("summary__uuid", "verdict", "probability")
    import pandas as pd  # only where a frame is built: the web app starts without pandas

    return pd.DataFrame(
        [(str(uuid), verdict, probability) for uuid, verdict, probability in rows],
        columns=["item", "verdict", "probability"],
    )


def claim_verdicts_frame(*, study: Study) -> pd.DataFrame:
    """item, claim (uuid), verdict of every recorded claim a detector verified
    (supported or not supported) in the study."""
    rows = (
        Claim.objects.filter(summary__study=study, verdict__in=["supported", "not_supported"])
        .order_by("summary__key", "index")
        .values_list("summary__uuid", "uuid", "verdict")
    )
    import pandas as pd  # only where a frame is built: the web app starts without pandas

    return pd.DataFrame(
        [(str(item), str(claim), verdict) for item, claim, verdict in rows], columns=["item", "claim", "verdict"]
    )


def revision_pairs_frame(*, study: Study) -> pd.DataFrame:
    """draft, revision: the items of every summary of the study that revises another
    (Factored Verification keeps the draft before revision as the revision's parent)."""
    rows = Summary.objects.filter(study=study, parent__isnull=False).values_list("parent__uuid", "uuid")
    import pandas as pd  # only where a frame is built: the web app starts without pandas

    return pd.DataFrame([(str(a), str(b)) for a, b in rows], columns=["draft", "revision"])


def rater_names(*, rater_ids) -> dict[str, str]:
    """Rater id (as ratings_frame writes it) -> username."""
    users = get_user_model().objects.filter(pk__in=[int(r) for r in rater_ids])
    return {str(pk): name for pk, name in users.values_list("pk", "username")}


def analysis_result(*, study: Study, phase: str, fingerprint: str) -> AnalysisResult | None:
    return AnalysisResult.objects.filter(study=study, phase=phase, fingerprint=fingerprint).first()
