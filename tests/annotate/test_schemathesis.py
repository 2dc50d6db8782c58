"""Property-based: requests generated from /api/schema/ (valid and invalid ones) never get
a 5xx. Runs in-process against the WSGI app, as a staff admin with a token, against a
study with a batch, answers and a claim, so generated requests reach real objects."""

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings

from annotate.services.accounts import create_token
from annotate.services.batches import create_batch
from annotate.services.ratings import submit_rating
from annotate.services.summaries import record_claims
from datasets import export_runs
from datasets.tasks import run_api_export_task
from tests.conftest import GOOD_ANSWERS
from tests.factories import SummaryFactory

# Per API operation: examples per generation phase, no deadline (the analysis endpoint
# computes a report on its first call), no example database written to the checkout.
SETTINGS = settings(
    max_examples=10,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)


# Loaded when the module is collected: schemathesis' lazy loader (from_fixture) does
# not work with pytest 9 (it sets Function._nodeid, which no longer exists).
schema = schemathesis.openapi.from_wsgi("/api/schema/", get_wsgi_application())


@pytest.fixture(autouse=True)
def keep_the_test_connection():
    """As Django's test client does: a request must not close the test's connection
    (its transaction holds the fixtures and is rolled back after the test)."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.fixture
def world(study, admin_user, rater_a, rater_b, settings, tmp_path):
    for _ in range(3):
        SummaryFactory(source__study=study)
    batch = create_batch(
        study=study, name="double", raters=[rater_a, rater_b, admin_user], design="k_raters", k=2, seed=1
    )
    for a in batch.assignments.exclude(rater=admin_user):
        submit_rating(assignment=a, rater=a.rater, answers=GOOD_ANSWERS, version=a.version)
    summary = batch.assignments.order_by("summary__key").first().summary
    record_claims(summary=summary, claims=[{"text": "Drug A lowered blood pressure.", "verdict": "supported"}])
    own = batch.assignments.filter(rater=admin_user).first()
    settings.EXPORTS_DIR = tmp_path / "exports"
    export = export_runs.start_export(
        study=study, requested_by=admin_user, formats=["csv"], enqueue=run_api_export_task.delay
    )
    return {
        "slug": study.slug,
        "batch_uuid": str(batch.uuid),
        "summary_uuid": str(summary.uuid),
        "source_uuid": str(summary.source.uuid),
        # The rater endpoints need the caller's own assignment; the batch endpoints one of the batch.
        "own_assignment_uuid": str(own.uuid),
        "batch_assignment_uuid": str(batch.assignments.exclude(rater=admin_user).first().uuid),
        "export_id": export.id,
        "token": create_token(user=admin_user).secret,
    }


@schema.parametrize()
@SETTINGS
@pytest.mark.django_db
def test_no_generated_request_gets_a_server_error(case, world):
    # Point path parameters at real objects, so the views behind the 404s are exercised too.
    for name in list(case.path_parameters or {}):
        if name == "assignment_uuid":
            key = "batch_assignment_uuid" if "/batches/" in case.operation.path else "own_assignment_uuid"
            case.path_parameters[name] = world[key]
        elif name in world:
            case.path_parameters[name] = world[name]
    # And body fields naming things at real ones (the rest stays generated), so that
    # batch designs, moves, consensus and notes run with generated options.
    if isinstance(case.body, dict):
        real = {"raters": ["rater_a", "rater_b"], "to": "rater_b", "summary": world["summary_uuid"]}
        case.body.update({key: value for key, value in real.items() if key in case.body})
    response = case.call(headers={"Authorization": f"Token {world['token']}"})
    assert response.status_code < 500, f"{case.method} {case.formatted_path} -> {response.status_code}"
