"""Staff see a generated summary's whole trace in the admin."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from generation.models import GenerationRun, LLMCall
from tests.generation.conftest import honest_model
from tests.generation.scripted_server import Reply
from tests.generation.test_litsumm_pipeline import run_job

pytestmark = pytest.mark.django_db

BAD = "Drug A was compared with placebo in 120 adults [PMC100]. It cured everyone [PMC999999]."


def test_the_job_page_shows_calls_checks_and_claims(client, admin_user, serve, trial_source):
    serve(
        honest_model,
        steps={
            "generate": [Reply(content=BAD)],
            "rescue_real": [Reply(content="Drug A was compared with placebo in 120 adults [PMC100].")],
        },
    )
    job = run_job(trial_source)
    client.force_login(admin_user)
    page = client.get(reverse("admin:generation_generationjob_change", args=[job.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    for step in ("generate", "rescue:real", "self_consistency"):
        assert f">{step}<" in html
    assert "PMC999999" in html  # the failed first draft's problem is in the trace
    assert "Drug A was compared with placebo in 120 adults [PMC100]." in html
    assert "The context says so." in html  # the claim's explanation
    assert job.summary.claims.get().verdict == "supported"


def test_the_run_list_shows_progress(client, admin_user, serve, trial_source):
    serve(honest_model)
    job = run_job(trial_source)
    run = GenerationRun.objects.create(study=trial_source.study, pipeline="litsumm", pipeline_version="v")
    run.jobs.add(job)
    client.force_login(admin_user)
    html = client.get(reverse("admin:generation_generationrun_changelist")).content.decode()
    assert "1 ok" in html
    call = LLMCall.objects.first()
    assert client.get(reverse("admin:generation_llmcall_change", args=[call.pk])).status_code == 200


def test_the_summary_page_shows_its_generation_trace(client, admin_user, serve, trial_source):
    serve(
        honest_model,
        steps={
            "generate": [Reply(content=BAD)],
            "rescue_real": [Reply(content="Drug A was compared with placebo in 120 adults [PMC100].")],
        },
    )
    job = run_job(trial_source)
    client.force_login(admin_user)
    html = client.get(reverse("admin:annotate_summary_change", args=[job.summary.pk])).content.decode()
    assert "generation trace" in html.lower()
    assert reverse("admin:generation_generationjob_change", args=[job.pk]) in html
    assert f">{job.llm_calls.count()}<" in html


def test_the_run_list_costs_the_same_queries_for_many_runs(client, admin_user, django_assert_max_num_queries):
    from tests.factories import StudyFactory

    study = StudyFactory()
    client.force_login(admin_user)
    url = reverse("admin:generation_generationrun_changelist")
    GenerationRun.objects.create(study=study, pipeline="litsumm", pipeline_version="v")
    with CaptureQueriesContext(connection) as one:
        assert client.get(url).status_code == 200
    for _ in range(9):
        GenerationRun.objects.create(study=study, pipeline="litsumm", pipeline_version="v")
    with django_assert_max_num_queries(len(one)):
        assert client.get(url).status_code == 200


def test_llm_written_text_is_escaped_in_the_trace(client, admin_user, serve, trial_source):
    hostile = 'Drug A <script>alert("x")</script><img src=x onerror=alert(1)> was compared with placebo [PMC100].'
    serve(honest_model, steps={"generate": [Reply(content=hostile)]})
    job = run_job(trial_source)
    client.force_login(admin_user)
    for url in (
        reverse("admin:generation_generationjob_change", args=[job.pk]),
        reverse("admin:annotate_summary_change", args=[job.summary.pk]),
        reverse("admin:generation_llmcall_change", args=[job.llm_calls.first().pk]),
    ):
        html = client.get(url).content.decode()
        assert "<script>alert" not in html and "<img src=x" not in html
    assert (
        "&lt;script&gt;alert"
        in client.get(reverse("admin:generation_generationjob_change", args=[job.pk])).content.decode()
    )
