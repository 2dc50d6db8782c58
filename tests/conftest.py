import os
import tempfile

import pytest
from rest_framework.test import APIClient

from tests.factories import AssignmentFactory, StudyFactory, SummaryFactory, UserFactory
from tests.generation.scripted_server import TEST_ENV, ScriptedServer


def pytest_configure(config):
    """huggingface_hub reads its settings once, when a test first imports it (a Hub push, or
    sentence-transformers with the ML extra), so they are set for the whole run: its home in
    a temporary folder (no ~/.cache, no saved token), no telemetry, and files uploaded over
    LFS, which tests/datasets/hub_server.py speaks (not the Xet storage protocol)."""
    os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="tests-hf-home-")
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    os.environ["HF_HUB_DISABLE_XET"] = "1"
    os.environ.pop("HF_HUB_OFFLINE", None)
    os.environ.pop("HF_TOKEN", None)


# pytest-django's ways for a test to reach the database: the marker, these fixtures, or a
# Django TransactionTestCase (TestCase and LiveServerTestCase are ones).
DATABASE_FIXTURES = {
    "db",
    "transactional_db",
    "django_db_reset_sequences",
    "django_db_serialized_rollback",
    "live_server",
}


def uses_database(item) -> bool:
    if item.get_closest_marker("django_db") is not None or DATABASE_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    from django.test import TransactionTestCase

    cls = getattr(item, "cls", None)
    return cls is not None and issubclass(cls, TransactionTestCase)


def pytest_collection_modifyitems(config, items):
    """Mark the tests that reach the database `database`: CI runs the suite on SQLite, then
    only these on PostgreSQL (`-m database`), since the others cannot tell the two apart."""
    for item in items:
        if uses_database(item):
            item.add_marker(pytest.mark.database)


@pytest.fixture
def admin_user(db):
    return UserFactory(username="admin", is_staff=True, is_superuser=True)


@pytest.fixture
def rater_a(db):
    return UserFactory(username="rater_a")


@pytest.fixture
def rater_b(db):
    return UserFactory(username="rater_b")


@pytest.fixture
def outsider(db):
    return UserFactory(username="outsider")


@pytest.fixture
def study(db):
    return StudyFactory()


@pytest.fixture
def summary(study):
    return SummaryFactory(source__study=study)


@pytest.fixture
def assignment_a(summary, rater_a):
    """rater_a's assignment to the shared summary."""
    return AssignmentFactory(summary=summary, rater=rater_a, position=0)


@pytest.fixture
def assignment_b(summary, rater_b):
    """rater_b's assignment to the same summary."""
    return AssignmentFactory(summary=summary, rater=rater_b, position=0)


def api_client_for(user) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


GOOD_ANSWERS = {"overall": 4, "failure_modes": ["misattribution"], "feedback": "Cite the second trial."}


@pytest.fixture
def serve(monkeypatch):
    """Start a ScriptedServer (same arguments) and point the gateway at it."""
    for name in list(os.environ):
        if name.startswith(("GENERATION_", "OPENAI_", "QUESTIONS_", "NCBI_")):
            monkeypatch.delenv(name)
    for name, value in TEST_ENV.items():
        monkeypatch.setenv(name, value)
    servers = []

    def start(script=None, **options) -> ScriptedServer:
        server = ScriptedServer(script, **options).__enter__()
        servers.append(server)
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        return server

    yield start
    for server in servers:
        server.__exit__(None, None, None)
