"""The study report's sections that read the database beside the statistics: comparisons,
people's scores per system, span agreement, claims judged by people and by automatic
judges (analysis.services.compute_study_report assembles them with analysis.report's).

The statistics (stats/, analysis.report) are imported inside the functions, as in
analysis.services: the web app starts without them.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from analysis import selectors
from analysis.report_json import from_payload, to_payload
from analysis.sections import ClaimJudgements, ComparisonSection, JudgeSection, SpanAgreementSection, SystemSection
from annotate.models import Study
from annotate.selectors.contents import rubric_definition
from annotate.selectors.frames import comparisons_frame

if TYPE_CHECKING:
    import pandas as pd

    from analysis.report import QuestionSpec


def comparison_sections(
    *,
    study: Study,
    phase: str,
    ratings: pd.DataFrame,
    specs: Sequence[QuestionSpec],
    names: dict[str, str],
    n_resamples: int,
    seed: int,
) -> tuple[ComparisonSection, ...]:
    """The report's comparisons (analysis.report.comparisons_section) from the answers
    that count on comparison items, with the summaries' mean pointwise score on the
    report's human question where the same summaries were also rated one at a time."""
    from analysis.report import comparisons_section, human_question, latest_answers

    definition = rubric_definition(study.rubric)
    questions = [(q.key, q.prompt) for q in definition.questions if q.preference]
    if not questions:
        return ()
    frame = comparisons_frame(study=study, phase=phase)
    if not len(frame):
        return ()
    pointwise: dict[str, float] = {}
    human = human_question(specs)
    answers = latest_answers(ratings) if len(ratings) else ratings
    if human is not None and len(answers):
        scored = answers[(answers["question"] == human.key) & answers["score"].notna()]
        pointwise = {str(k): float(v) for k, v in scored.groupby("item")["score"].mean().items()}
    return comparisons_section(
        frame,
        questions=questions,
        pointwise=pointwise or None,
        pointwise_question=human.key if human is not None and pointwise else "",
        rater_names=names,
        judges=selectors.judge_preferences(study=study),
        n_resamples=n_resamples,
        seed=seed,
    )


def system_section(
    *, study: Study, ratings: pd.DataFrame, spans: pd.DataFrame, summaries: pd.DataFrame, metrics: pd.DataFrame
) -> SystemSection:
    """People's scores per generator (FactPICO Tables 3 and 12: stats.systems): each scale
    question (per-finding ones over their findings), their average, words, ΔFK, ROUGE-L, and
    every span question's highlights (and those not factual). N/A answers are left out even
    where the rubric counts N/A as a category for agreement: a mean has no place for them.
    `ratings`: the prepared ratings of the phase."""
    from analysis.report import latest_answers
    from stats.systems import system_table

    definition = rubric_definition(study.rubric)
    scales = {q.key: (float(min(q.values)), float(max(q.values))) for q in definition.questions if q.is_scale}
    answers = latest_answers(ratings)
    answers = answers[answers["answer"] != "na"] if len(answers) else answers
    items = set(summaries["item"]) if len(summaries) else set()
    rated = answers["item"].astype(str).str.split(":", n=1).str[0].isin(items).any() if len(answers) else False
    if not items or not (rated or spans["item"].isin(items).any()):
        # No summary rated one at a time (a study of comparisons only): no row would say
        # anything but "rated 0".
        return SystemSection(questions=tuple(scales), average_scale="question scale")
    table = system_table(
        answers=answers,
        spans=spans,
        generators=summaries.set_index("item")["generator"],
        metrics=metrics,
        scales=scales,
        span_questions=[q.key for q in definition.questions if q.highlights],
    )
    return from_payload(SystemSection, to_payload(table))


def span_agreement_sections(
    *, study: Study, spans: pd.DataFrame, raters: dict[str, list[str]]
) -> tuple[SpanAgreementSection, ...]:
    """Span agreement (stats.spans) for every span question on the summary: marking per
    summary sentence, and each of its choice sub-questions on the spans two raters both
    marked. `spans`: spans_frame; `raters`: raters_by_item."""
    from core.sentences import split_spans
    from stats.spans import span_agreement

    definition = rubric_definition(study.rubric)
    questions = [q for q in definition.questions if q.highlights and q.target == "summary"]
    if not questions:
        return ()
    texts = dict(study.summaries.values_list("uuid", "text"))
    sentences = {item: split_spans(texts[uuid.UUID(item)]) for item in raters}
    sections = []
    for q in questions:
        sub_questions = {sq.key: sq.values for sq in q.span_questions if sq.choice}
        result = span_agreement(
            spans[spans["question"] == q.key],
            sentences,
            {i: r for i, r in raters.items() if i in sentences},
            sub_questions,
        )
        prompts = {sq.key: sq.prompt for sq in q.span_questions}
        section = {"question": q.key, "prompt": q.prompt, **dataclasses.asdict(result)}
        for sub in section["sub_questions"]:
            sub["prompt"] = prompts[sub["key"]]
        sections.append(from_payload(SpanAgreementSection, to_payload(section)))
    return tuple(sections)


def claim_judgements_frame(ratings: pd.DataFrame, question: str) -> pd.DataFrame:
    """item, claim, rater, label, rationale of one per-claim question, from the answers
    that count (ratings_frame: one rating holds every claim's answer)."""
    import pandas as pd

    rows = []
    for item, rater, answer in ratings.loc[ratings["question"] == question, ["item", "rater", "answer"]].itertuples(
        index=False
    ):
        for claim, part in (answer or {}).items():
            if part.get("answer") is not None:
                rows.append((item, claim, rater, part["answer"], part.get("rationale", "")))
    return pd.DataFrame(rows, columns=["item", "claim", "rater", "label", "rationale"])


def claim_judgement_sections(
    *, study: Study, ratings: pd.DataFrame, judges: Sequence[tuple[str, pd.DataFrame]] = ()
) -> tuple[ClaimJudgements, ...]:
    """For every per-claim question: claim-level agreement between raters, Factored
    Verification's unsupported calls against people (on the recorded claims it verified),
    each automatic judge's calls against people (`judges`: analysis.selectors.judge_scores)
    and, where drafts before revision were rated too, people's count of unsupported
    claims before and after revision (stats.claims). `ratings`: the answers that count,
    raters by name."""
    from stats.claims import (
        before_after_revision,
        claim_agreement,
        detector_against_each_rater,
        detector_against_people,
        judge_on_claims,
    )

    questions = [q for q in rubric_definition(study.rubric).questions if q.per_claim]
    if not questions:
        return ()
    verdicts = selectors.claim_verdicts_frame(study=study)
    pairs = selectors.revision_pairs_frame(study=study)
    sections = []
    for q in questions:
        judgements = claim_judgements_frame(ratings, q.key)
        section: dict[str, Any] = {
            "question": q.key,
            "prompt": q.prompt,
            "n_judgements": int(len(judgements)),
            "labels": {str(k): int(v) for k, v in judgements["label"].value_counts().items()},
            "agreement": claim_agreement(judgements, q.values),
            "detector": None,
            "judges": [],
            "before_after_revision": None,
        }
        for name, answers in judges:
            labels = answers[(answers["question"] == q.key) & (answers["label"] != "")]
            if len(labels) and len(judgements):
                labels = labels.rename(columns={"part": "claim"})[["item", "claim", "label"]]
                section["judges"].append(judge_on_claims(name, labels, judgements, q.values))
        if len(judgements) and len(verdicts):
            section["detector"] = detector_against_people(verdicts, judgements)
            section["detector"]["per_rater"] = detector_against_each_rater(verdicts, judgements)
        if len(judgements) and len(pairs):
            section["before_after_revision"] = before_after_revision(judgements, pairs)
        sections.append(from_payload(ClaimJudgements, to_payload(section)))
    return tuple(sections)


def judge_sections(
    *, named_ratings: pd.DataFrame, specs: Sequence[QuestionSpec], judges: Sequence[tuple[str, pd.DataFrame]]
) -> tuple[JudgeSection, ...]:
    """For every automatic judge that answered the rubric (`judges`:
    analysis.selectors.judge_scores) and every scale question (per-finding ones finding by
    finding): Cohen's kappa of the judge with each rater beside the raters' with each other
    (stats.judges). The human-only agreement above never includes it.
    `named_ratings`: the answers that count, raters by name."""
    from stats.judges import judge_agreement_on

    sections = []
    for name, scores in judges:
        for spec in specs:
            if spec.kind != "scale":
                continue
            result = judge_agreement_on(named_ratings, scores, spec.key, [float(v) for v in spec.values], name)
            if result is not None:
                sections.append(JudgeSection(question=spec.key, **to_payload(dataclasses.asdict(result))))
    return tuple(sections)
