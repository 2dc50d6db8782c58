"""Cited answers: numbering by retrieval rank, every [n] resolves, citations from the
article's own record, and the reference checks see the evidence."""

from itertools import permutations

import pytest

from annotate.models import Source
from generation.reference_checks import check_references
from literature.answers import AnswerError, citation_line, cited_numbers, number_citations, store_answer
from literature.models import Question, Retrieval, RetrievedArticle
from tests.factories import StudyFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def retrieval():
    study = StudyFactory(slug="answers")
    question = Question.objects.create(study=study, key="q1", text="Does drug A reduce attacks?")
    retrieval = Retrieval.objects.create(question=question, engine="local", regime="unrestricted")
    for rank, key in enumerate(["PMC30", "PMC10", "PMC20"], start=1):
        source = Source.objects.create(
            study=study,
            key=key,
            title=f"Trial {key}",
            text=f"Drug A was tested in {key}. Attacks fell.",
            licence="CC BY 4.0",
            external_ids={"pmid": f"9{rank}", "doi": f"10.1/{key}"},
            metadata={"journal": "Trials J", "year": 2000 + rank, "authors": ["Smith J", "Doe A", "Roe B", "Poe C"]},
        )
        RetrievedArticle.objects.create(retrieval=retrieval, rank=rank, identifier=key, source=source, score=3 - rank)
    return retrieval


def test_citation_numbers_follow_retrieval_rank_whatever_the_arrival_order(retrieval):
    articles = list(retrieval.articles.select_related("source"))
    # Every order in which per-article answers could arrive.
    numbered = {tuple((c.number, c.identifier) for c in number_citations(order)) for order in permutations(articles)}
    assert numbered == {((1, "PMC30"), (2, "PMC10"), (3, "PMC20"))}


def test_a_citation_line_is_built_from_the_article_itself(retrieval):
    source = Source.objects.get(key="PMC10")
    line = citation_line(source)
    assert line == "Smith J, Doe A, Roe B, et al. Trial PMC10. Trials J. 2002. doi:10.1/PMC10. PMID: 92."


def test_every_citation_resolves_to_its_article(retrieval):
    summary = store_answer(
        question=retrieval.question,
        retrieval=retrieval,
        synthesis="Drug A was tested [1]. Attacks fell in a second trial [2, 3].",
        tldr="Drug A reduced attacks [1].",
        generator="test",
        key="q1:answer",
    )
    assert cited_numbers(summary.text) == [1, 2, 3, 1]
    assert summary.text.endswith("TL;DR: Drug A reduced attacks [1].")
    evidence = summary.source
    assert evidence.metadata == {"kind": "evidence", "question": "Does drug A reduce attacks?"}
    assert evidence.licence == "CC BY 4.0"  # all three articles share it
    refs = {}
    for sentence in evidence.sentences:
        refs.setdefault(sentence.ref, []).append(sentence.text)
    # [n] points at article n: its citation line and its own sentences.
    assert set(refs) == {"1", "2", "3"}
    assert any("Drug A was tested in PMC30." in t for t in refs["1"])
    # An article's citation line is one sentence, the first of its article.
    assert refs["1"][0] == "[1] " + citation_line(Source.objects.get(key="PMC30"))
    assert any("Drug A was tested in PMC10." in t for t in refs["2"])
    # LitSumm's reference checks take [n] as a reference the context uses.
    report = check_references(summary.text, set(refs))
    assert report.checks["format"] and report.checks["real"], report.problems
    assert summary.metadata["citations"][0]["identifier"] == "PMC30"


@pytest.mark.parametrize(
    ("synthesis", "tldr", "message"),
    [
        ("A claim [4].", "Yes [1].", r"citation \[4\] does not resolve"),
        ("A claim [0].", "Yes [1].", r"citation \[0\] does not resolve"),
        ("A claim [1].", "  ", "needs a synthesis and a TL;DR"),
    ],
)
def test_an_answer_whose_citations_do_not_resolve_is_refused(retrieval, synthesis, tldr, message):
    with pytest.raises(AnswerError, match=message):
        store_answer(
            question=retrieval.question, retrieval=retrieval, synthesis=synthesis, tldr=tldr, generator="t", key="k"
        )
    assert not Source.objects.filter(key="k:evidence").exists()


def test_only_articles_judged_relevant_are_evidence(retrieval):
    RetrievedArticle.objects.filter(retrieval=retrieval, identifier="PMC10").update(relevant=False, reason="other")
    RetrievedArticle.objects.filter(retrieval=retrieval).exclude(identifier="PMC10").update(relevant=True)
    summary = store_answer(
        question=retrieval.question,
        retrieval=retrieval,
        synthesis="One [1]. Two [2].",
        tldr="Yes [2].",
        generator="t",
        key="k2",
    )
    assert [c["identifier"] for c in summary.metadata["citations"]] == ["PMC30", "PMC20"]
    with pytest.raises(AnswerError, match=r"\[3\]"):
        store_answer(
            question=retrieval.question, retrieval=retrieval, synthesis="[3].", tldr="x [1].", generator="t", key="k3"
        )
