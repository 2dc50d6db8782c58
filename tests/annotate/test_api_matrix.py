"""The API's permission matrix: every endpoint x every persona gives the status the HTML
pages' rules call for (docs/api.md, docs/security.md), and no rater ever reads another
rater's answers.

The staff personas: `staff` is a staff account with no Django permissions and no
membership (staff alone gives nothing: an outsider); `staff_viewer` has
annotate.view_study (a viewer of every study); `staff_admin` has annotate.change_study
(an admin of every study, as in the Django admin)."""

import json

import pytest
from django.contrib.auth.models import Permission
from django.core.files.base import ContentFile
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from annotate.models import Assignment, StudyMembership
from annotate.services.batches import create_batch
from annotate.services.members import add_study_member
from annotate.services.ratings import submit_rating
from annotate.services.summaries import record_claims
from datasets import export_runs, import_runs
from datasets.models import ExportRun
from datasets.tasks import run_api_export_task, run_api_import_task
from tests.conftest import GOOD_ANSWERS, api_client_for
from tests.factories import AssignmentFactory, SummaryFactory, UserFactory

PERSONAS = (
    "anonymous",
    "rater_a",
    "rater_b",
    "study_admin",
    "viewer",
    "outsider",
    "staff",
    "staff_viewer",
    "staff_admin",
)
SECRETS = {"rater_a": "A-SECRET-NOTE", "rater_b": "B-SECRET-NOTE"}


@pytest.fixture
def world(study, rater_a, rater_b, outsider, settings, tmp_path):
    """A study with a double-rated batch both raters submitted (with their own secret
    feedback), a claim, an open item of rater_a's outside the batch, a study admin
    and a viewer."""
    for _ in range(3):
        SummaryFactory(source__study=study)
    batch = create_batch(study=study, name="double", raters=[rater_a, rater_b], design="k_raters", k=2, seed=1)
    for rater in (rater_a, rater_b):
        for a in batch.assignments.filter(rater=rater):
            answers = {**GOOD_ANSWERS, "feedback": SECRETS[rater.username]}
            submit_rating(assignment=a, rater=rater, answers=answers, version=a.version)
    summary = batch.assignments.order_by("summary__key").first().summary
    record_claims(summary=summary, claims=[{"text": "Drug A lowered blood pressure.", "verdict": "supported"}])
    study_admin = UserFactory(username="study_admin")
    add_study_member(study=study, user=study_admin, role=StudyMembership.Role.ADMIN)
    viewer = UserFactory(username="viewer")
    add_study_member(study=study, user=viewer, role=StudyMembership.Role.VIEWER)
    settings.EXPORTS_DIR = tmp_path / "exports"
    export = export_runs.start_export(
        study=study, requested_by=study_admin, formats=["jsonl"], enqueue=run_api_export_task.delay
    )
    assert export.status == "done", export.error
    settings.IMPORTS_DIR = tmp_path / "imports"
    imported = import_runs.start_import(
        study=study,
        requested_by=study_admin,
        upload=ContentFile(_import_line(study)),
        file_name="sources.jsonl",
        enqueue=run_api_import_task.delay,
    )
    assert imported.status == "done", imported.error
    open_item = AssignmentFactory(summary=SummaryFactory(source__study=study), rater=rater_a, position=99)
    # A member with no items yet, whom a study admin may move an item to.
    add_study_member(study=study, user=UserFactory(username="rater_c"), role=StudyMembership.Role.RATER)
    # A question asked on the ask page (generation.asking), its job not yet run.
    from generation.models import AnswerJob
    from literature.models import Question

    asked = AnswerJob.objects.create(
        question=Question.objects.create(study=study, key="ask-matrix", text="Q?", metadata={"asked_by": "x"}),
        engine="local",
        regime="unrestricted",
        pipeline_version="v",
        config={"ask": True},
    )
    users = {"rater_a": rater_a, "rater_b": rater_b, "study_admin": study_admin, "viewer": viewer}
    users["outsider"] = outsider
    users["staff"] = staff_user(username="staff")
    users["staff_viewer"] = staff_user(username="staff_viewer", permissions=["view_study"])
    users["staff_admin"] = staff_user(username="staff_admin", permissions=["view_study", "change_study"])
    return {
        "study": study,
        "batch": batch,
        "summary": summary,
        "a_submitted": batch.assignments.get(rater=rater_a, summary=summary),
        "b_submitted": batch.assignments.get(rater=rater_b, summary=summary),
        "a_open": open_item,
        "export": export.id,
        "import": imported.id,
        "asked": asked.uuid,
        "users": users,
    }


def _import_line(study) -> bytes:
    return (json.dumps({"type": "source", "study": study.slug, "key": "matrix-source", "text": "One."}) + "\n").encode()


def staff_user(*, username: str, permissions: tuple[str, ...] | list[str] = ()):
    user = UserFactory(username=username, is_staff=True)
    for codename in permissions:
        user.user_permissions.add(Permission.objects.get(codename=codename, content_type__app_label="annotate"))
    return user


def _urls(w) -> dict[str, str]:
    study = f"/api/studies/{w['study'].slug}/"
    batch = f"{study}batches/{w['batch'].uuid}/"
    return {
        "study": study,
        "batch": batch,
        "summary": f"{study}summaries/{w['summary'].uuid}/",
        "source": f"{study}sources/{w['summary'].source.uuid}/",
        "a_open": f"/api/assignments/{w['a_open'].uuid}/",
        "a_submitted": f"/api/assignments/{w['a_submitted'].uuid}/",
        "b_submitted": f"/api/assignments/{w['b_submitted'].uuid}/",
        "b_in_batch": f"{batch}assignments/{w['b_submitted'].uuid}/",
        "export": f"{study}exports/{w['export']}/",
        "import": f"{study}imports/{w['import']}/",
        "asked": f"{study}ask/{w['asked']}/",
    }


def _body(w, name: str) -> dict:
    """Valid bodies, so a 2xx shows the caller was allowed and the write worked."""
    return {
        "create_batch": {"name": "single", "raters": ["rater_c"], "design": "k_raters", "k": 1, "seed": 3},
        "move": {"to": "rater_c"},
        "consensus": {"summary": str(w["summary"].uuid), "question": "overall", "value": 3},
        "note": {"summary": str(w["summary"].uuid), "text": "Raters read the trial differently."},
        "draft": {"version": 1, "answers": {"overall": 3}},
        "submit": {"version": 1, "answers": GOOD_ANSWERS},
        "skip": {"version": 1, "reason": "Outside my field."},
        "reopen": {"version": w["a_submitted"].version},
        "export": {"formats": ["csv"], "phase": "initial"},
        "flag": {"kind": "guideline", "note": "Does a table count as context?"},
    }.get(name, {})


NOBODY = {"rater_a": 404, "rater_b": 404, "study_admin": 404, "viewer": 404, "outsider": 404}
NOBODY |= {"staff": 404, "staff_viewer": 404, "staff_admin": 404}
ANY = dict.fromkeys(NOBODY, 200)
READERS = {**NOBODY, "study_admin": 200, "viewer": 200, "staff_viewer": 200, "staff_admin": 200}
# A report is never computed in the request: its first GET queues it and answers 202.
READERS_ACCEPTED = {**NOBODY, "study_admin": 202, "viewer": 202, "staff_viewer": 202, "staff_admin": 202}
ADMINS = {**NOBODY, "study_admin": 200, "staff_admin": 200}
ADMINS_CREATE = {**ADMINS, "study_admin": 201, "staff_admin": 201}
ADMINS_ACCEPTED = {**ADMINS, "study_admin": 202, "staff_admin": 202}
# Retrying an export or import that did not fail: the admins reach it and are told why not.
ADMINS_CONFLICT = {**ADMINS, "study_admin": 409, "staff_admin": 409}
OWNER_A = {**NOBODY, "rater_a": 200}
OWNER_B = {**NOBODY, "rater_b": 200}

# (name, method, url template over _urls, body name, expected status per persona).
# Anonymous callers are refused before any view runs: 403 with code not_authenticated.
MATRIX = [
    # Revoking your own token (obtaining one is open to all: test_security_login.py).
    ("auth-token revoke", "delete", "/api/auth/token/", None, dict.fromkeys(NOBODY, 204)),
    ("assignment-list", "get", "/api/assignments/", None, ANY),
    ("assignment-detail own", "get", "{a_open}", None, OWNER_A),
    ("assignment-detail other", "get", "{b_submitted}", None, OWNER_B),
    ("assignment-rating read own", "get", "{a_submitted}rating/", None, OWNER_A),
    ("assignment-rating read other", "get", "{b_submitted}rating/", None, OWNER_B),
    ("assignment-rating draft", "put", "{a_open}rating/", "draft", OWNER_A),
    ("assignment-submit", "post", "{a_open}submit/", "submit", OWNER_A),
    ("assignment-skip", "post", "{a_open}skip/", "skip", OWNER_A),
    ("assignment-reopen", "post", "{a_submitted}reopen/", "reopen", OWNER_A),
    ("assignment-flags read own", "get", "{a_open}flags/", None, OWNER_A),
    ("assignment-flags read other", "get", "{b_submitted}flags/", None, OWNER_B),
    ("assignment-flags raise", "post", "{a_open}flags/", "flag", {**OWNER_A, "rater_a": 201}),
    ("study-list", "get", "/api/studies/", None, ANY),
    ("study-detail", "get", "{study}", None, READERS),
    ("source-list", "get", "{study}sources/", None, READERS),
    ("source-detail", "get", "{source}", None, READERS),
    ("summary-list", "get", "{study}summaries/", None, READERS),
    ("summary-detail", "get", "{summary}", None, READERS),
    ("claim-list", "get", "{summary}claims/", None, READERS),
    ("study-analysis", "get", "{study}analysis/?phase=initial", None, READERS_ACCEPTED),
    ("batch-list", "get", "{study}batches/", None, READERS),
    ("batch-create", "post", "{study}batches/", "create_batch", ADMINS_CREATE),
    ("batch-detail", "get", "{batch}", None, READERS),
    ("batch-rerating", "post", "{batch}rerating/", None, ADMINS),
    ("batch-assignment-list", "get", "{batch}assignments/?rater=rater_b", None, ADMINS),
    ("batch-assignment-withdraw", "post", "{b_in_batch}withdraw/", None, ADMINS),
    ("batch-assignment-move", "post", "{b_in_batch}move/", "move", ADMINS_CREATE),
    ("batch-answer-list", "get", "{batch}answers/", None, ADMINS),
    ("batch-answer-stream", "get", "{batch}answers.jsonl", None, ADMINS),
    ("batch-disagreement-list", "get", "{batch}disagreements/?question=overall", None, ADMINS),
    ("batch-consensus-list", "get", "{batch}consensus/", None, ADMINS),
    ("batch-consensus-create", "post", "{batch}consensus/", "consensus", ADMINS_CREATE),
    ("batch-note-list", "get", "{batch}notes/", None, ADMINS),
    ("batch-note-create", "post", "{batch}notes/", "note", ADMINS_CREATE),
    ("export-list", "get", "{study}exports/", None, ADMINS),
    ("export-list start", "post", "{study}exports/", "export", ADMINS_ACCEPTED),
    ("export-detail", "get", "{export}", None, ADMINS),
    ("export-download", "get", "{export}download/", None, ADMINS),
    ("export-retry", "post", "{export}retry/", None, ADMINS_CONFLICT),
    ("import-list", "get", "{study}imports/", None, ADMINS),
    ("import-list upload", "post", "{study}imports/", "import_upload", ADMINS_ACCEPTED),
    ("import-detail", "get", "{import}", None, ADMINS),
    ("import-retry", "post", "{import}retry/", None, ADMINS_CONFLICT),
    ("ask-status", "get", "{asked}", None, ADMINS),
]


def _call(w, who: str, method: str, url: str, body_name: str | None):
    client = api_client_for(None if who == "anonymous" else w["users"][who])
    url = url.format(**_urls(w))
    if method == "get":
        return client.get(url)
    if body_name == "import_upload":
        upload = SimpleUploadedFile("sources.jsonl", _import_line(w["study"]), content_type="application/jsonl")
        return client.post(url, {"file": upload}, format="multipart")
    return getattr(client, method)(url, _body(w, body_name), format="json")


@pytest.mark.django_db
@pytest.mark.parametrize("who", PERSONAS)
@pytest.mark.parametrize("name,method,url,body,expected", MATRIX, ids=[row[0] for row in MATRIX])
def test_permission_matrix(world, who, name, method, url, body, expected):
    response = _call(world, who, method, url, body)
    wanted = 403 if who == "anonymous" else expected[who]
    assert response.status_code == wanted, (who, name, response.content[:300])
    if response.status_code >= 400:
        assert set(response.json()) == {"error"}
    if who == "anonymous":
        assert response.json()["error"]["code"] == "not_authenticated"


def test_every_api_route_is_in_the_matrix():
    """A new endpoint without a row here fails this test."""
    from django.urls import URLPattern, URLResolver, get_resolver

    def names(patterns):
        for p in patterns:
            if isinstance(p, URLResolver):
                yield from names(p.url_patterns)
            elif isinstance(p, URLPattern) and p.name:
                yield p.name

    api = next(r for r in get_resolver().url_patterns if str(r.pattern) == "api/")
    routes = set(names(api.url_patterns))
    assert len(routes) > 20
    assert routes - {row[0].split(" ")[0] for row in MATRIX} == set()


@pytest.mark.django_db
@pytest.mark.parametrize("who", ["rater_a", "rater_b", "viewer"])
def test_no_rater_or_viewer_reads_someone_elses_answers(world, who):
    """Every GET of the matrix the persona may make: the bodies never hold another
    rater's answers (nor, for viewers, anyone's)."""
    forbidden = {s for rater, s in SECRETS.items() if rater != who}
    reached = 0
    for name, method, url, body, expected in MATRIX:
        if method != "get" or expected[who] != 200:
            continue
        response = _call(world, who, method, url, body)
        assert response.status_code == 200, name
        reached += 1
        raw = response.content.decode()
        for secret in forbidden:
            assert secret not in raw, (who, name)
        if who.startswith("rater"):
            assert "secret-model-x" not in raw and "secret-flag" not in raw, (who, name)
    assert reached >= 2


@pytest.mark.django_db
def test_rater_reads_their_own_answers_and_admin_reads_both(world):
    own = api_client_for(world["users"]["rater_a"]).get(_urls(world)["a_submitted"] + "rating/")
    assert own.json()["answers"]["feedback"] == SECRETS["rater_a"]
    answers = api_client_for(world["users"]["study_admin"]).get(_urls(world)["batch"] + "answers/").json()
    feedback = {(row["summary"]["key"], row["rater"]): row["answers"]["feedback"] for row in answers["results"]}
    assert feedback[(world["summary"].key, "rater_a")] == SECRETS["rater_a"]
    assert feedback[(world["summary"].key, "rater_b")] == SECRETS["rater_b"]
    assert answers["count"] == 2 * world["batch"].assignments.values("summary").distinct().count()


@pytest.mark.django_db
def test_viewer_writes_change_nothing(world):
    client = api_client_for(world["users"]["viewer"])
    url = _urls(world)["b_in_batch"] + "withdraw/"
    assert client.post(url).status_code == 404
    assert Assignment.objects.get(pk=world["b_submitted"].pk).state == "submitted"


@pytest.mark.django_db
def test_admin_starts_polls_and_downloads_an_export(world):
    import io
    import zipfile

    client = api_client_for(world["users"]["study_admin"])
    started = client.post(_urls(world)["study"] + "exports/", {"formats": ["jsonl"]}, format="json")
    assert started.status_code == 202, started.json()
    polled = client.get(started["Location"])
    assert polled.json()["status"] == "done" and polled.json()["counts"]["ratings"] > 0
    download = client.get(polled.json()["download"])
    assert download.status_code == 200 and download["Content-Type"] == "application/zip"
    names = zipfile.ZipFile(io.BytesIO(b"".join(download.streaming_content))).namelist()
    assert "dataset/README.md" in names and "dataset/SHA256SUMS" in names
    listed = client.get(_urls(world)["study"] + "exports/").json()
    assert [row["id"] for row in listed["results"]][:1] == [started.json()["id"]]


@pytest.mark.django_db
def test_an_unfinished_export_cannot_be_downloaded(world):
    ExportRun.objects.filter(uuid=world["export"]).update(status="running", heartbeat_at=timezone.now())
    response = api_client_for(world["users"]["study_admin"]).get(_urls(world)["export"] + "download/")
    assert response.status_code == 409 and response.json()["error"]["code"] == "invalid_state"
