"""Retrieval precision, recall and F1 per engine and regime in the study report and
retrieval.csv (Clinfo.ai Table 3), worked by hand on a small study."""

import csv
import io

import pytest
from django.urls import reverse

from analysis import services
from annotate.models import Source, StudyMembership
from annotate.services.members import add_study_member
from literature.models import Question, Retrieval, RetrievedArticle
from literature.services import record_relevance
from tests.analysis.reports import open_computed
from tests.factories import StudyFactory, UserFactory

pytestmark = pytest.mark.django_db


def retrieval(question, regime, judged):
    """A stored retrieval: [(source, relevant), ...] in rank order."""
    r = Retrieval.objects.create(question=question, engine="local", regime=regime)
    for rank, (source, relevant) in enumerate(judged, start=1):
        RetrievedArticle.objects.create(
            retrieval=r, rank=rank, identifier=source.key, source=source, relevant=relevant, reason="r"
        )
    return r


def test_retrieval_figures_per_regime_by_hand(client, monkeypatch):
    monkeypatch.setattr(services, "BOOTSTRAP_RESAMPLES", 10)
    study = StudyFactory()
    admin = UserFactory(username="pi")
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    s1, s2, s3, s4 = (Source.objects.create(study=study, key=f"S{i}", title="t", text="x.") for i in range(1, 5))
    q1 = Question.objects.create(study=study, key="q1", text="Q1?", reference_ids=["S1", "S2"])
    q2 = Question.objects.create(study=study, key="q2", text="Q2?", reference_ids=["S3"])
    # An older retrieval of q1: only the newest per question, engine and regime counts.
    retrieval(q1, "unrestricted", [(s1, True), (s2, True)])
    # q1: S1 and S3 relevant, S4 not: precision 1/2, recall 1/2 (S2 missed), F1 1/2;
    #     references anywhere in what was retrieved: 1 of 2.
    retrieval(q1, "unrestricted", [(s1, True), (s3, True), (s4, False)])
    # q2: S3 and S1 relevant: precision 1/2, recall 1/1, F1 2·(1/2)·1/(3/2) = 2/3; retrieved 1/1.
    later = retrieval(q2, "unrestricted", [(s3, True), (s1, True)])
    # A question without references (an asked one) is left out: its precision would read 0.
    asked = Question.objects.create(study=study, key="ask-1", text="Asked?")
    retrieval(asked, "unrestricted", [(s4, True)])
    # Restricted: only q1, S2 relevant: precision 1, recall 1/2, F1 2/3.
    retrieval(q1, "restricted", [(s2, True)])
    client.force_login(admin)
    url = reverse("analysis:report", args=[study.slug])
    page = open_computed(client, url).content.decode()
    assert "Retrieval against the questions" in page
    rows = {
        r["regime"]: r
        for r in csv.DictReader(
            io.StringIO(client.get(reverse("analysis:download", args=[study.slug, "retrieval.csv"])).content.decode())
        )
    }
    unrestricted, restricted = rows["unrestricted"], rows["restricted"]
    assert unrestricted["n_questions"] == "2" and unrestricted["engine"] == "local"
    assert float(unrestricted["precision"]) == pytest.approx(0.5) and float(unrestricted["precision_sd"]) == 0
    assert float(unrestricted["recall"]) == pytest.approx(0.75)
    assert float(unrestricted["recall_sd"]) == pytest.approx(0.353553, rel=1e-5)  # sqrt((.25² + .25²) / 1)
    assert float(unrestricted["f1"]) == pytest.approx((0.5 + 2 / 3) / 2)
    assert float(unrestricted["retrieved_recall"]) == pytest.approx(0.75)
    assert (float(restricted["precision"]), float(restricted["recall"])) == (1.0, 0.5)
    assert float(restricted["f1"]) == pytest.approx(2 / 3) and restricted["f1_sd"] == "" and restricted["f1_n"] == "1"
    assert "0.583" in page  # the mean F1 on the page
    # A changed relevance decision changes the report: S1 is no longer relevant for q2,
    # whose precision becomes 1/1 and F1 1: mean precision 3/4.
    record_relevance(retrieval=later, decisions={"S1": (False, "not about it")})
    open_computed(client, url)
    rows = list(
        csv.DictReader(
            io.StringIO(client.get(reverse("analysis:download", args=[study.slug, "retrieval.csv"])).content.decode())
        )
    )
    assert float(next(r for r in rows if r["regime"] == "unrestricted")["precision"]) == pytest.approx(0.75)


def test_a_study_without_retrievals_has_an_empty_table(client, monkeypatch):
    monkeypatch.setattr(services, "BOOTSTRAP_RESAMPLES", 10)
    study = StudyFactory()
    admin = UserFactory(username="pi")
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    client.force_login(admin)
    page = open_computed(client, reverse("analysis:report", args=[study.slug])).content.decode()
    assert "Retrieval against the questions" not in page
    text = client.get(reverse("analysis:download", args=[study.slug, "retrieval.csv"])).content.decode()
    assert text.splitlines()[0].startswith("engine,regime,n_questions,n_reranked,precision,precision_sd")
