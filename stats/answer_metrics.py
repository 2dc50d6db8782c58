"""Reference-based scores of an answer against a question's gold answer (Clinfo.ai, Table
1): ROUGE-L (Google's rouge_score, Porter stemming, F-measure), BLEU and chrF (sacrebleu's
sentence-level scores, 0-100; BLEU with effective order, so short answers are not zero for
lack of 4-grams). Pure functions: no ORM.

Citations (`[1]`, `[1, 2]`) are removed before scoring: a gold answer has none, and they
would count as unmatched tokens. The TL;DR and the synthesis are scored apart, as the
paper reports them, and together.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

CITATION = re.compile(r"\s*\[\d+(?:\s*[,;]\s*\d+)*\]")
TLDR = "TL;DR:"


@dataclass(frozen=True)
class AnswerScores:
    rougeL: float  # 0-1
    bleu: float  # 0-100
    chrf: float  # 0-100


@cache
def _scorers():
    from rouge_score import rouge_scorer
    from sacrebleu.metrics import BLEU, CHRF

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True), BLEU(effective_order=True), CHRF()


def without_citations(text: str) -> str:
    return CITATION.sub("", text).strip()


def answer_scores(answer: str, gold: str) -> AnswerScores | None:
    """Scores of one text against the gold answer; None when there is no gold answer."""
    answer, gold = without_citations(answer), gold.strip()
    if not gold:
        return None
    rouge, bleu, chrf = _scorers()
    return AnswerScores(
        rougeL=rouge.score(gold, answer)["rougeL"].fmeasure,
        bleu=bleu.sentence_score(answer, [gold]).score,
        chrf=chrf.sentence_score(answer, [gold]).score,
    )


def split_answer(text: str) -> tuple[str, str]:
    """(synthesis, TL;DR) of a stored answer (literature.answers writes "...\\n\\nTL;DR: ...")."""
    head, sep, tldr = text.rpartition(TLDR)
    return (head.strip(), tldr.strip()) if sep else (text.strip(), "")


def scores_by_part(text: str, gold: str) -> dict[str, AnswerScores | None]:
    synthesis, tldr = split_answer(text)
    return {
        "tldr": answer_scores(tldr, gold) if tldr else None,
        "synthesis": answer_scores(synthesis, gold),
        "combined": answer_scores(f"{synthesis} {tldr}".strip(), gold),
    }
