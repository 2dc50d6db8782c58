"""Reads of the literature app."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet

from annotate.models import Study
from literature.identifiers import source_identifiers
from literature.models import Question, Retrieval
from stats.retrieval import RetrievalScores, retrieval_scores


@dataclass(frozen=True)
class QuestionScores:
    question: Question
    retrieval: Retrieval
    scores: RetrievalScores


def latest_retrievals(study: Study, *, engine: str, regime: str) -> list[Retrieval]:
    """The newest retrieval of each of the study's questions by one engine under one regime,
    with its articles (and their sources' identifiers) loaded: three queries in all."""
    newest: dict[int, Retrieval] = {}
    for retrieval in (
        Retrieval.objects.filter(question__study=study, engine=engine, regime=regime)
        .select_related("question")
        .order_by("question__key", "-created_at", "-pk")
        .prefetch_related("articles__source")
    ):
        newest.setdefault(retrieval.question_id, retrieval)
    return list(newest.values())


def retrieval_scores_of(study: Study, *, engine: str, regime: str) -> list[QuestionScores]:
    """Scores of each question's newest retrieval (stats.retrieval)."""
    rows = []
    for retrieval in latest_retrievals(study, engine=engine, regime=regime):
        articles = list(retrieval.articles.all())
        names = [
            source_identifiers(a.source.key, a.source.external_ids) if a.source else frozenset({a.identifier})
            for a in articles
        ]
        scores = retrieval_scores(
            retrieved=names,
            relevant=[a.relevant for a in articles],
            references=retrieval.question.reference_ids,
            excluded_hits=retrieval.excluded_hits,
            exclude=retrieval.question.exclude_ids,
        )
        rows.append(QuestionScores(retrieval.question, retrieval, scores))
    return rows


PARTS = (("tldr", "TL;DR"), ("synthesis", "Synthesis"), ("combined", "Both"))


@dataclass(frozen=True)
class QuestionOverview:
    question: Question
    retrievals: list[tuple[Retrieval, RetrievalScores, list[tuple]]]  # (retrieval, scores, article rows)
    answers: list  # [(summary, [(part label, AnswerScores | None), ...] or [] without a gold answer)]


def questions_overview(study: Study) -> tuple[list[QuestionOverview], list[tuple[str, str, dict]]]:
    """Every question of the study with its newest retrieval per engine and regime (the
    articles, whether each is a reference, the scores) and its answers; and the study's
    figures per engine and regime. A fixed number of queries."""
    from annotate.models import Summary
    from stats.retrieval import study_scores

    # answer_jobs: the generation app's jobs for the question (a reverse relation, so this
    # app does not import the app above it).
    questions = list(Question.objects.filter(study=study).order_by("key").prefetch_related("answer_jobs"))
    newest: dict[tuple[int, str, str], Retrieval] = {}
    for retrieval in (
        Retrieval.objects.filter(question__study=study)
        .order_by("question_id", "engine", "regime", "-created_at", "-pk")
        .prefetch_related("articles__source")
    ):
        newest.setdefault((retrieval.question_id, retrieval.engine, retrieval.regime), retrieval)
    from stats.answer_metrics import scores_by_part  # rouge_score and sacrebleu: only when asked

    gold = {str(q.uuid): q.gold_answer for q in questions}
    answers: dict[str, list] = {}
    for summary in Summary.objects.filter(study=study, source__metadata__kind="evidence").order_by("key"):
        question = summary.metadata.get("question", "")
        parts = scores_by_part(summary.text, gold.get(question, ""))
        rows = [(label, parts[part]) for part, label in PARTS] if parts["combined"] else []
        answers.setdefault(question, []).append((summary, rows))
    overview, by_setting = [], {}
    for question in questions:
        rows = []
        for (question_id, engine, regime), retrieval in sorted(newest.items(), key=lambda kv: kv[0][1:]):
            if question_id != question.pk:
                continue
            articles = list(retrieval.articles.all())
            names = [
                source_identifiers(a.source.key, a.source.external_ids) if a.source else frozenset({a.identifier})
                for a in articles
            ]
            scores = retrieval_scores(
                retrieved=names,
                relevant=[a.relevant for a in articles],
                references=question.reference_ids,
                excluded_hits=retrieval.excluded_hits,
                exclude=question.exclude_ids,
            )
            refs = set(question.reference_ids)
            rows.append((retrieval, scores, [(a, bool(n & refs)) for a, n in zip(articles, names, strict=True)]))
            by_setting.setdefault((engine, regime), []).append(scores)
        overview.append(QuestionOverview(question, rows, answers.get(str(question.uuid), [])))
    figures = [(engine, regime, study_scores(scores)) for (engine, regime), scores in sorted(by_setting.items())]
    return overview, figures


RETRIEVAL_FIGURES = ("precision", "recall", "f1", "retrieved_recall", "source_included")


def retrieval_rows(*, study: Study) -> QuerySet[Retrieval]:
    """The study's retrievals: a new retrieval or relevance decision changes the study
    report (its cache key counts these rows and their newest change)."""
    return Retrieval.objects.filter(question__study=study)


def retrieval_figures(study: Study) -> list[dict]:
    """The study report's retrieval section: per engine and regime, each figure's mean,
    sample SD and number of questions over the newest retrieval of each question
    (stats.retrieval; Clinfo.ai Table 3), and the relevance rule the retrievals were
    judged under. Questions without references are left out: with nothing to score
    against, their precision would read 0 (an asked question has none). Three queries."""
    from stats.retrieval import study_scores

    newest: dict[tuple[int, str, str], Retrieval] = {}
    for retrieval in (
        Retrieval.objects.filter(question__study=study)
        .select_related("question")
        .order_by("question_id", "engine", "regime", "-created_at", "-pk")
        .prefetch_related("articles__source")
    ):
        newest.setdefault((retrieval.question_id, retrieval.engine, retrieval.regime), retrieval)
    by_setting: dict[tuple[str, str], list] = {}
    reranked: dict[tuple[str, str], int] = {}
    for (_, engine, regime), retrieval in newest.items():
        if not retrieval.question.reference_ids:
            continue
        articles = list(retrieval.articles.all())
        names = [
            source_identifiers(a.source.key, a.source.external_ids) if a.source else frozenset({a.identifier})
            for a in articles
        ]
        scores = retrieval_scores(
            retrieved=names,
            relevant=[a.relevant for a in articles],
            references=retrieval.question.reference_ids,
            excluded_hits=retrieval.excluded_hits,
            exclude=retrieval.question.exclude_ids,
        )
        by_setting.setdefault((engine, regime), []).append(scores)
        reranked[(engine, regime)] = reranked.get((engine, regime), 0) + ("rerank" in retrieval.settings)
    rows = []
    for (engine, regime), scores in sorted(by_setting.items()):
        figures = study_scores(scores)
        row = {"engine": engine, "regime": regime, "n_questions": len(scores), "n_reranked": reranked[(engine, regime)]}
        for name in RETRIEVAL_FIGURES:
            row[name] = figures[name].mean
            row[f"{name}_sd"] = figures[name].sd
            row[f"{name}_n"] = figures[name].n
        rows.append(row)
    return rows


def question_rows(*, study: Study) -> QuerySet[Question]:
    """The study's questions: a changed gold answer changes the study report (its cache key,
    analysis.selectors.report_inputs, counts these rows)."""
    return Question.objects.filter(study=study)


def gold_answers(study: Study) -> dict[str, str]:
    """{answer's summary uuid: its question's gold answer} for the study's answers (the
    study report's and the reference evaluator's reference texts). Two queries."""
    from annotate.models import Summary

    gold = dict(Question.objects.filter(study=study).exclude(gold_answer="").values_list("uuid", "gold_answer"))
    gold = {str(k): v for k, v in gold.items()}
    if not gold:
        return {}
    answers = Summary.objects.filter(study=study, source__metadata__kind="evidence").values_list("uuid", "metadata")
    return {str(uuid): gold[meta.get("question")] for uuid, meta in answers if meta.get("question") in gold}
