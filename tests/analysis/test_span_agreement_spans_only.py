"""Span agreement on a study answered only with spans (a Thresh import): its raters come
from who answered, not from the scale answers (of which there are none)."""

from pathlib import Path

import numpy as np
import pytest
from django.conf import settings
from django.core.management import call_command
from statsmodels.stats.inter_rater import fleiss_kappa

from analysis.services import compute_study_report
from annotate.models import Rating
from annotate.selectors.frames import raters_by_item
from tests.annotate.factpico import make_factpico_assignment
from tests.factories import UserFactory

THRESH = Path(settings.BASE_DIR) / "fixtures" / "thresh"


@pytest.mark.django_db
def test_span_agreement_of_a_spans_only_study():
    assignment, _ = make_factpico_assignment(
        UserFactory(), summary_text="Grown-ups 🫁 with asthma took drug A or a dummy pill. Attacks fell."
    )
    study = assignment.study
    call_command(
        "import_thresh",
        str(THRESH / "factpico_example.json"),
        "--study",
        study.slug,
        "--rubric-map",
        str(THRESH / "factpico_map.yaml"),
    )
    assert not Rating.objects.filter(revision__assignment__study=study).exists()  # spans only
    raters = raters_by_item(study=study)
    assert list(raters) == [str(assignment.summary.uuid)] and len(raters[str(assignment.summary.uuid)]) == 2

    section = compute_study_report(study=study, n_resamples=20)["span_agreement"][0]
    assert section["question"] == "added_info"
    assert section["errors"] == {} and section["n_sentences"] == 2
    # By hand from the fixture: sentence 1 ("…a dummy pill.") is marked by both annotators,
    # sentence 2 ("Attacks fell.") only by Bob: rows (yes, yes) and (no, yes).
    table = np.array([[0, 2], [1, 1]])  # per sentence: count of "not marked", "marked"
    sentences = section["sentences"]
    assert sentences["n_raters"] == 2 and sentences["n_items"] == 2
    assert sentences["percent_agreement"] == pytest.approx(0.5)
    assert sentences["fleiss_kappa"] == pytest.approx(fleiss_kappa(table, method="fleiss"))
    assert sentences["fleiss_kappa"] == pytest.approx(-1 / 3)
    assert sentences["randolph_kappa"] == pytest.approx(fleiss_kappa(table, method="randolph"))
