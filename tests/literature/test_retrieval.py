"""The local BM25 engine, the regimes, and retrieval scores worked by hand."""

import json
import math
from datetime import date
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

from annotate.models import Source
from annotate.services.rubrics import load_builtin_rubric
from datasets.importing import import_evidence_inference
from literature.engines import Hit, LocalEngine
from literature.models import Question, Retrieval
from literature.selectors import retrieval_scores_of
from literature.services import retrieve_for_question, union_hits
from stats.retrieval import mean_sd, retrieval_scores, study_scores
from tests.factories import StudyFactory

EI = Path(settings.BASE_DIR) / "fixtures" / "evidence_inference" / "abstracts.jsonl"


def add_source(study, key, text, **extra):
    return Source.objects.create(study=study, key=key, text=text, **extra)


# --- scores by hand -----------------------------------------------------------------------


def test_retrieval_scores_worked_by_hand():
    # References A, B, C, D. Five articles kept, in rank order; s1 is A, s3 is B, s5 is C.
    # Judged relevant: s1, s2, s5 -> 3 relevant, 2 of them references (A, C).
    #   precision = 2/3, recall = 2/4, F1 = 2 * (2/3 * 1/2) / (2/3 + 1/2) = 4/7,
    #   retrieved recall = 3/4 (A, B, C anywhere), the review R was retrieved then removed.
    scores = retrieval_scores(
        retrieved=[
            frozenset({"s1", "A"}),
            frozenset({"s2"}),
            frozenset({"s3", "B"}),
            frozenset({"s4"}),
            frozenset({"s5", "C"}),
        ],
        relevant=[True, True, False, False, True],
        references=["A", "B", "C", "D"],
        excluded_hits=["R"],
        exclude=["R"],
    )
    assert scores.precision == pytest.approx(2 / 3)
    assert scores.recall == pytest.approx(0.5)
    assert scores.f1 == pytest.approx(4 / 7)
    assert scores.retrieved_recall == pytest.approx(0.75)
    assert (scores.retrieved, scores.judged_relevant, scores.references_retrieved) == (5, 3, 3)
    assert scores.source_included is True


def test_undefined_scores_are_none_not_zero():
    nothing_judged = retrieval_scores(retrieved=[frozenset({"A"})], relevant=[None], references=["A"])
    assert nothing_judged.precision is None and nothing_judged.recall is None
    assert nothing_judged.retrieved_recall == 1.0 and nothing_judged.source_included is False
    none_kept = retrieval_scores(retrieved=[frozenset({"x"})], relevant=[False], references=["A"])
    assert none_kept.precision is None and none_kept.recall == 0.0 and none_kept.f1 is None
    no_refs = retrieval_scores(retrieved=[frozenset({"x"})], relevant=[True], references=[])
    assert no_refs.recall is None and no_refs.retrieved_recall is None and no_refs.precision == 0.0
    # Two articles answering to the same reference count it once for recall.
    twice = retrieval_scores(
        retrieved=[frozenset({"k1", "A"}), frozenset({"k2", "A"})], relevant=[True, True], references=["A", "B"]
    )
    assert twice.recall == 0.5 and twice.precision == 1.0


def test_study_figures_are_mean_and_sample_sd_of_the_existing_values():
    figure = mean_sd([0.2, None, 0.4, 0.6])
    assert figure.mean == pytest.approx(0.4) and figure.n == 3
    assert figure.sd == pytest.approx(0.2)  # sqrt(((-.2)^2 + 0 + .2^2) / 2)
    assert mean_sd([None]).mean is None and mean_sd([0.5]).sd is None
    a = retrieval_scores(retrieved=[frozenset({"A"})], relevant=[None], references=["A"])
    b = retrieval_scores(retrieved=[frozenset({"x"})], relevant=[None], references=["A", "B"])
    assert study_scores([a, b])["retrieved_recall"].mean == pytest.approx(0.5)


# --- the engine -----------------------------------------------------------------------------


def lucene_bm25(tf: int, df: int, n_docs: int, dl: int, avgdl: float, k1=1.5, b=0.75) -> float:
    """Lucene's BM25 term score, written out here from its definition (not from bm25s):
    Kamphuis, de Vries, Boytsov and Lin, "Which BM25 do you mean?" (ECIR 2020), Table 1,
    "Lucene (accurate)": idf = log(1 + (N - df + 0.5) / (df + 0.5)) and a tf part without
    the (k1 + 1) factor, which Lucene 8 dropped (it does not change any ranking)."""
    idf = math.log(1 + (n_docs - df + 0.5) / (df + 0.5))
    return idf * tf / (tf + k1 * (1 - b + b * dl / avgdl))


@pytest.mark.django_db
def test_local_engine_scores_are_bm25_and_ties_go_by_key():
    study = StudyFactory(slug="bm25")
    # Words the stemmer leaves whole or shortens alike, no stop words: lengths 3, 2, 3.
    add_source(study, "c", "aspirin stroke stroke")
    add_source(study, "b", "metformin diabetes")
    add_source(study, "a", "aspirin diabetes trial")
    engine = LocalEngine(study)
    hits = engine.search("aspirin")
    avgdl = 8 / 3
    expected = lucene_bm25(tf=1, df=2, n_docs=3, dl=3, avgdl=avgdl)
    assert [h.identifier for h in hits] == ["a", "c"]  # equal scores: by key
    assert [h.rank for h in hits] == [1, 2]
    assert hits[0].score == pytest.approx(expected, rel=1e-5) and hits[1].score == pytest.approx(expected, rel=1e-5)
    stroke = engine.search("stroke")
    assert [h.identifier for h in stroke] == ["c"]
    assert stroke[0].score == pytest.approx(lucene_bm25(tf=2, df=1, n_docs=3, dl=3, avgdl=avgdl), rel=1e-5)
    assert engine.search("unrelated words") == []  # no term in common: no hits


@pytest.mark.django_db
@pytest.mark.parametrize("query", ["", "   ", "the of and", "?!", "...", "the? of!", "\x00", "a"])
def test_a_query_without_a_searchable_word_finds_nothing(query):
    # What weak models write; bm25s raised IndexError on these (its tokenizer returns no
    # list at all when every text is empty).
    study = StudyFactory(slug="bm25-empty")
    add_source(study, "a", "aspirin stroke trial")
    engine = LocalEngine(study)
    assert not engine.searchable(query)
    assert engine.search(query) == []
    assert engine.searchable("the aspirin") and [h.identifier for h in engine.search("the aspirin?")] == ["a"]


@pytest.mark.django_db
def test_sources_of_only_stop_words_make_an_engine_that_finds_nothing():
    study = StudyFactory(slug="bm25-stop")
    add_source(study, "a", "The of and.")
    add_source(study, "b", "?!")
    assert LocalEngine(study).search("aspirin") == []


@pytest.mark.django_db
def test_local_engine_applies_dates_and_exclusions():
    study = StudyFactory(slug="dates")
    add_source(study, "old", "aspirin stroke", metadata={"year": 2015})
    add_source(study, "day", "aspirin stroke trial", metadata={"published": "2020-03-01"})
    add_source(study, "same-year", "aspirin stroke risk", metadata={"year": 2020})
    add_source(study, "undated", "aspirin stroke prevention")
    add_source(study, "review", "aspirin stroke review", external_ids={"pmid": "999"})
    engine = LocalEngine(study)
    found = {h.identifier for h in engine.search("aspirin", published_before=date(2020, 6, 1))}
    # the same year cannot be shown to come first; undated sources are left out
    assert found == {"old", "day"}
    assert {h.identifier for h in engine.search("aspirin", published_before=date(2020, 3, 1))} == {"old"}
    assert "review" not in {h.identifier for h in engine.search("aspirin", exclude=["999"])}  # by its PMID
    assert len(engine.search("aspirin", limit=2)) == 2


@pytest.mark.django_db
def test_the_local_engine_ranks_an_abstract_first_for_its_own_question():
    """Questions built from Evidence Inference prompts (the demo's way); each prompt's own
    abstract is the one reference. Checked on the first 30 abstracts of the fixture."""
    study = StudyFactory(slug="ei-q", rubric=load_builtin_rubric(key="factpico"))
    with EI.open(encoding="utf-8") as handle:
        lines = [line for _, line in zip(range(30), handle, strict=False)]
    import_evidence_inference(study=study, lines=lines)
    engine = LocalEngine(study)
    firsts = 0
    for line in lines:
        record = json.loads(line)
        prompt = record["prompts"][0]
        query = f"{prompt['intervention']} versus {prompt['comparator']}: {prompt['outcome']}"
        hits = engine.search(query, limit=5)
        firsts += bool(hits) and hits[0].identifier == record["pmcid"]
    # A prompt names the trial's own intervention and outcome: BM25 should find its
    # abstract first for most of them (the rest are generic, e.g. "placebo").
    assert firsts >= 20, firsts


# --- regimes, union, storage ------------------------------------------------------------------


class FixedEngine:
    """A stand-in for an outside engine (PubMed): answers from a table. The local engine is
    tested above against the database; this one isolates the regime rules."""

    name = "pubmed"

    def __init__(self, table):
        self.table = table
        self.calls = []

    def search(self, query, *, limit=20, published_before=None, exclude=()):
        self.calls.append((query, published_before, tuple(exclude)))
        ids = [i for i in self.table[query] if i not in set(exclude)][:limit]
        return [Hit(i, n, None) for n, i in enumerate(ids, start=1)]


def test_union_of_queries_is_ranked_by_first_finding_query_then_rank():
    first = [Hit("x", 1, 3.0), Hit("y", 2, 2.0)]
    second = [Hit("z", 1, 9.0), Hit("x", 2, 5.0)]
    assert [(h.identifier, h.rank) for h in union_hits([first, second], 10)] == [("x", 1), ("y", 2), ("z", 3)]
    assert [h.identifier for h in union_hits([second, first], 10)] == ["z", "x", "y"]


@pytest.mark.django_db
def test_regimes_restrict_drop_or_keep_the_source_review():
    study = StudyFactory(slug="regimes")
    question = Question.objects.create(
        study=study,
        key="q",
        text="q",
        reference_ids=["1", "2"],
        exclude_ids=["99"],
        published_on=date(2021, 5, 1),
    )
    engine = FixedEngine({"q": ["99", "1", "5"]})
    restricted = retrieve_for_question(question=question, engine=engine, regime="restricted")
    assert engine.calls[-1] == ("q", date(2021, 5, 1), ("99",))
    assert [a.identifier for a in restricted.articles.all()] == ["1", "5"]
    dropped = retrieve_for_question(question=question, engine=engine, regime="exclude-source")
    assert engine.calls[-1] == ("q", None, ())
    assert [(a.rank, a.identifier) for a in dropped.articles.all()] == [(1, "1"), (2, "5")]
    assert dropped.excluded_hits == ["99"]
    unrestricted = retrieve_for_question(question=question, engine=engine, regime="unrestricted")
    assert [a.identifier for a in unrestricted.articles.all()] == ["99", "1", "5"]
    by_regime = {
        regime: retrieval_scores_of(study, engine="pubmed", regime=regime)[0].scores
        for regime in Retrieval.Regime.values
    }
    assert by_regime["restricted"].retrieved_recall == 0.5 and not by_regime["restricted"].source_included
    assert by_regime["exclude-source"].source_included and by_regime["unrestricted"].source_included


@pytest.mark.django_db
def test_retrieve_questions_command_on_evidence_inference_questions():
    study = StudyFactory(slug="cmd", rubric=load_builtin_rubric(key="factpico"))
    with EI.open(encoding="utf-8") as handle:
        lines = [line for _, line in zip(range(10), handle, strict=False)]
    import_evidence_inference(study=study, lines=lines)
    for line in lines:
        record = json.loads(line)
        prompt = record["prompts"][0]
        Question.objects.create(
            study=study,
            key=record["pmcid"],
            text=f"{prompt['intervention']} versus {prompt['comparator']}: {prompt['outcome']}",
            reference_ids=[record["pmcid"]],
        )
    out = StringIO()
    call_command("retrieve_questions", "--study", "cmd", "--regime", "unrestricted", "--limit", "3", stdout=out)
    assert "unrestricted: 10 questions, top 3 of 10 sources" in out.getvalue()
    rows = retrieval_scores_of(study, engine="local", regime="unrestricted")
    assert len(rows) == 10
    expected = sum(r.scores.retrieved_recall for r in rows) / 10
    assert f"recall of references retrieved {expected:.3f}" in out.getvalue()
    assert Retrieval.objects.filter(question__study=study).count() == 10
