"""Reads of the study report (the ORM is allowed here, never in stats/).

The report sits at the top of the stack: it reads ratings and summaries through annotate,
the automatic evaluators' and judges' scores through generation.selectors and the questions'
gold answers through literature.selectors, each imported directly. What it reads is also
what its cache key covers (report_inputs): a report is never served for data that changed.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from django.contrib.auth import get_user_model

from analysis.models import AnalysisResult, ReportPlot
from analysis.versions import REPORT_VERSION
from annotate.models import Batch, Claim, ConsensusAnswer, RaterExclusion, Revision, Source, Study, Summary
from core.models import change_states
from generation import selectors as generation_selectors
from literature import selectors as literature_selectors
from planning.models import Protocol

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class ReportInputs:
    """Everything a study report is computed from, as (number of rows, newest change) per
    kind: the submitted ratings of the phase, the study's summaries, sources, claims (and
    their verdicts), consensus answers recorded after adjudication, batches (a batch turned
    into calibration leaves the analysis), the raters' answers excluded by an admin (per
    batch, docs/monitoring.md), the evaluators' runs and scores, the rubric
    judge's runs and answers, the questions (and their gold answers), the retrievals (and
    their relevance decisions), the frozen protocols (planning); and the rubric version.
    Its fingerprint, with the report version, is the cache key of the report: change any
    of them and the report is computed anew."""

    rubric: int
    ratings: tuple[int, str]
    summaries: tuple[int, str]
    sources: tuple[int, str]
    claims: tuple[int, str]
    consensus: tuple[int, str]
    batches: tuple[int, str]
    exclusions: tuple[int, str]
    evaluator_runs: tuple[int, str]
    evaluator_scores: tuple[int, str]
    judge_runs: tuple[int, str]
    judge_answers: tuple[int, str]
    questions: tuple[int, str]
    retrievals: tuple[int, str]
    protocols: tuple[int, str]

    @property
    def fingerprint(self) -> str:
        digest = hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()
        return f"v{REPORT_VERSION}:{digest[:40]}"

    @property
    def counts(self) -> dict[str, int]:
        """What the report page says it was computed from: how many of each."""
        return {name: value[0] for name, value in asdict(self).items() if isinstance(value, list | tuple)}


def submitted_revisions(*, study: Study, phase: str):
    revisions = Revision.objects.filter(assignment__study=study, status=Revision.Status.SUBMITTED)
    return revisions if phase == "all" else revisions.filter(phase=phase)


def report_inputs(*, study: Study, phase: str) -> ReportInputs:
    """What the report of `study` and `phase` would be computed from now, in one query (an
    aggregate per kind of row, each on an indexed foreign key). A submitted revision is
    never edited, so a new answer adds a row and changes the count."""
    states = change_states(
        {
            "ratings": submitted_revisions(study=study, phase=phase),
            "summaries": Summary.objects.filter(study=study),
            "sources": Source.objects.filter(study=study),
            "claims": Claim.objects.filter(summary__study=study),
            "consensus": ConsensusAnswer.objects.filter(batch__study=study),
            "batches": Batch.objects.filter(study=study),
            "exclusions": RaterExclusion.objects.filter(batch__study=study),
            "protocols": Protocol.objects.filter(study=study),
            **generation_selectors.evaluation_rows(study=study),
            "questions": literature_selectors.question_rows(study=study),
            "retrievals": literature_selectors.retrieval_rows(study=study),
        }
    )
    return ReportInputs(rubric=study.rubric_id, **states)


def retrieval_figures(*, study: Study) -> list[dict]:
    """Retrieval precision, recall and F1 per engine and regime (literature.selectors)."""
    return literature_selectors.retrieval_figures(study)


def reference_texts(*, study: Study) -> dict[str, str]:
    """{summary uuid: reference text}: each answer's question's gold answer."""
    return literature_selectors.gold_answers(study)


def summary_texts_frame(*, study: Study) -> pd.DataFrame:
    """item (summary uuid), summary_text, source_text: the inputs of the text metrics; and
    gold_text when some summary has a reference text (an answer's gold answer)."""
    rows = (
        Summary.objects.filter(study=study, comparison__isnull=True)
        .order_by("key")
        .values_list("uuid", "text", "source__text")
    )
    import pandas as pd  # only where a frame is built: the web app starts without pandas

    frame = pd.DataFrame(
        [(str(uuid), text, source) for uuid, text, source in rows], columns=["item", "summary_text", "source_text"]
    )
    gold = reference_texts(study=study)
    if any(gold.values()):
        frame["gold_text"] = [gold.get(item, "") for item in frame["item"]]
    return frame


def stored_reference_metrics(*, study: Study) -> pd.DataFrame | None:
    """The `reference` evaluator's stored scores of today's version (None when it has none):
    the report reads them instead of computing the text metrics again."""
    frame = generation_selectors.stored_reference_metrics(study)
    return frame if len(frame) else None


def with_evaluator_metrics(*, study: Study, metrics: pd.DataFrame) -> pd.DataFrame:
    """`metrics` with the `eval.<evaluator>.<name>` columns of every evaluator's newest run
    and the rubric judge's scale answers joined on item (NaN where a summary has no score)."""
    for extra in (generation_selectors.evaluator_metrics(study), generation_selectors.judge_metrics(study)):
        if len(extra):
            metrics = metrics.merge(extra, on="item", how="left")
    return metrics


def judge_scores(*, study: Study) -> list[tuple[str, pd.DataFrame]]:
    """(judge name, its answers as generation.selectors.judge_answer_frame) of the newest
    rubric judge run, when it gave any valid answer; the report compares it with people and
    never mixes it into the human-only agreement."""
    found = generation_selectors.judge_scores(study)
    return [found] if found is not None and len(found[1]) else []


def judge_preferences(*, study: Study) -> list[tuple[str, pd.DataFrame]]:
    """(judge name, its preferences on comparison items) of the newest rubric judge run
    (generation.selectors.judge_preferences), when it gave any."""
    found = generation_selectors.judge_preferences(study)
    return [found] if found is not None else []


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
    """The report row; its payload (megabytes for a large study) is read when first used."""
    return AnalysisResult.objects.filter(study=study, phase=phase, fingerprint=fingerprint).defer("result").first()


def stored_plots(*, result: AnalysisResult) -> set[tuple[str, str]]:
    """(kind, subject) of the plots of a finished report that are stored (drawn) so far."""
    return set(ReportPlot.objects.filter(result=result).values_list("kind", "subject").distinct())


def report_plot(*, result: AnalysisResult, kind: str, subject: str, fmt: str) -> ReportPlot | None:
    """The stored image of one plot of a finished report (drawn by the worker with it)."""
    return ReportPlot.objects.filter(result=result, kind=kind, subject=subject, format=fmt).first()


def gold_answers(*, study: Study) -> dict[str, dict]:
    """{summary uuid: expected answers} of the study's gold items and attention checks
    (training items are feedback, never a test)."""
    from annotate.models import ExpectedAnswer

    rows = ExpectedAnswer.objects.filter(
        study=study, purpose__in=[ExpectedAnswer.Purpose.GOLD, ExpectedAnswer.Purpose.ATTENTION]
    ).values_list("summary__uuid", "answers")
    return {str(uuid): answers for uuid, answers in rows}
