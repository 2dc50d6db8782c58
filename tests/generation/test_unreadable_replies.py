"""A reply whose body cannot be read (not UTF-8, not JSON) is a failed call recorded with
its reason in words, through the gateway and from the evaluators page; the commands are
covered by the junk catalogue (tests/generation/test_junk_answers.py)."""

import logging

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from annotate.models import Study, Summary
from generation.llm import LLMError
from generation.models import EvaluationScore, JudgeAnswer, LLMCall
from tests.generation.test_junk_answers import CATALOGUE
from tests.generation.test_llm_gateway import complete

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_body_that_is_not_utf8_is_a_failed_call_with_its_reason(serve):
    server = serve(CATALOGUE["not_utf8"])
    with pytest.raises(LLMError) as caught:
        complete()
    call = LLMCall.objects.get()
    assert len(server.requests) == 1  # junk on the wire is not retried
    assert call.status_code == 200 and call.usable is False and call.well_formed is False
    assert call.problem.startswith("the server's answer was not valid UTF-8 text (byte 0xe9 at position")
    assert call.error == call.problem
    assert caught.value.message == f"generate: {call.problem}"


def test_a_body_that_is_not_json_is_a_failed_call_with_its_reason(serve):
    serve(CATALOGUE["body_not_json"])
    with pytest.raises(LLMError):
        complete()
    call = LLMCall.objects.get()
    assert call.problem == "the server's answer was not JSON ('<html><body>Bad gateway</body></html>')"


@pytest.mark.parametrize("evaluator", ["factpico_fulltext", "rubric_judge"])
def test_the_evaluators_page_records_an_unreadable_reply_without_a_traceback(
    serve, client, settings, caplog, evaluator
):
    from core.background import wait_for_pool
    from generation import tasks

    settings.DEBUG, settings.DEMO_PASSWORD = True, ""
    call_command("load_demo", "--with-answers")
    study = Study.objects.get(slug="demo-factpico")
    serve(CATALOGUE["not_utf8"])
    client.force_login(get_user_model().objects.get(username="admin"))
    url = f"/studies/{study.slug}/evaluators/"
    with caplog.at_level(logging.ERROR):
        assert client.post(url, {"evaluator": evaluator}, follow=True).status_code == 200
        wait_for_pool(tasks.POOL, timeout=300)
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []
    assert LLMCall.objects.exists()
    assert set(LLMCall.objects.values_list("usable", flat=True)) == {False}
    if evaluator == "rubric_judge":
        answers = JudgeAnswer.objects.all()
        assert answers.count() == Summary.objects.filter(study=study).count()
        assert all("not valid UTF-8" in a.error for a in answers)
    else:
        scores = EvaluationScore.objects.all()
        assert scores.exists() and {s.status for s in scores} == {EvaluationScore.Status.FAILED}
        # `evidence`, the mean over findings, says that a finding could not be rated.
        assert all("not valid UTF-8" in s.error for s in scores if s.name != "evidence")
    assert client.get(url).status_code == 200
