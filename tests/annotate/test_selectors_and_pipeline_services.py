import math

import pytest

from annotate.models import Claim
from annotate.selectors.frames import ratings_frame, summaries_frame
from annotate.services.ratings import reopen_rating, save_draft, submit_rating
from annotate.services.summaries import create_summary, record_claims
from core.exceptions import ApplicationError
from tests.factories import SourceFactory


@pytest.mark.django_db
def test_ratings_frame_holds_only_the_answers_that_count(assignment_a, assignment_b, rater_a, rater_b):
    submit_rating(assignment=assignment_a, rater=rater_a, answers={"overall": 5}, version=1)
    reopen_rating(assignment=assignment_a, rater=rater_a, version=2)
    submit_rating(assignment=assignment_a, rater=rater_a, answers={"overall": 2, "feedback": "x"}, version=3)
    # rater_b only has a draft: drafts never count.
    save_draft(assignment=assignment_b, rater=rater_b, answers={"overall": 4}, version=1)
    frame = ratings_frame(study=assignment_a.study)
    assert sorted(frame["question"]) == ["feedback", "overall"]
    overall = frame[frame["question"] == "overall"].iloc[0]
    assert overall["score"] == 2.0 and overall["rater"] == str(rater_a.pk)
    assert overall["item"] == str(assignment_a.summary.uuid) and overall["phase"] == "initial"
    feedback = frame[frame["question"] == "feedback"].iloc[0]
    assert math.isnan(feedback["score"]) and feedback["answer"] == "x"


@pytest.mark.django_db
def test_summaries_frame_flattens_source_metadata(study):
    source = SourceFactory(study=study, metadata={"rna_type": "lncRNA"})
    create_summary(study=study, source=source, key="s1", text="One two three.", generator="model-a")
    frame = summaries_frame(study=study)
    row = frame.iloc[0]
    assert (row["key"], row["generator"], row["source.rna_type"], row["n_words"]) == ("s1", "model-a", "lncRNA", 3)
    assert row["context_sentences"] == 2


@pytest.mark.django_db
def test_create_summary_is_idempotent_by_key_and_refuses_a_changed_text(study):
    source = SourceFactory(study=study)
    first = create_summary(study=study, source=source, key="k", text="A.", generator="g")
    assert create_summary(study=study, source=source, key="k", text="A.", generator="g") == first
    with pytest.raises(ApplicationError, match="already exists"):
        create_summary(study=study, source=source, key="k", text="B.", generator="g")


@pytest.mark.django_db
def test_record_claims_checks_spans_and_updates_by_index(summary):
    text = summary.text
    record_claims(summary=summary, claims=[{"text": "c0", "start": 0, "end": 5, "verdict": "supported"}])
    record_claims(summary=summary, claims=[{"text": "c0 again", "start": 0, "end": 5, "probability": 0.4}])
    claim = Claim.objects.get()
    assert (claim.text, claim.probability) == ("c0 again", 0.4)
    with pytest.raises(ApplicationError, match="not inside the summary text"):
        record_claims(summary=summary, claims=[{"text": "x", "start": 0, "end": len(text) + 1}])
