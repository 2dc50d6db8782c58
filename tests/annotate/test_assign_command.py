import pytest
from django.core.management import CommandError, call_command

from annotate.models import Assignment, StudyMembership
from tests.factories import SummaryFactory, UserFactory


@pytest.mark.django_db
def test_assign_gives_every_summary_two_raters_in_seeded_random_orders(study, capsys):
    for _ in range(12):
        SummaryFactory(source__study=study)
    UserFactory(username="rater1")
    UserFactory(username="rater2")
    call_command("assign", "--study", study.slug, "--raters", "rater1,rater2", "--per-item", "2")
    out = capsys.readouterr().out
    assert "Assigned 12 summaries of" in out and "24 new assignments (rater1: 12, rater2: 12)" in out
    queues = {
        name: list(
            Assignment.objects.filter(rater__username=name).order_by("position").values_list("summary", flat=True)
        )
        for name in ("rater1", "rater2")
    }
    assert sorted(queues["rater1"]) == sorted(queues["rater2"]) and len(queues["rater1"]) == 12
    assert queues["rater1"] != queues["rater2"]  # each rater has an own order
    assert StudyMembership.objects.filter(study=study, role="rater").count() == 2
    # Running it again adds nothing.
    call_command("assign", "--study", study.slug, "--raters", "rater1,rater2", "--per-item", "2")
    assert Assignment.objects.count() == 24
    assert "Nothing to assign: every summary of" in capsys.readouterr().out


@pytest.mark.django_db
@pytest.mark.parametrize(
    "args,message",
    [
        (["--study", "nope", "--raters", "rater1"], "no study 'nope'"),
        (["--raters", "ghost"], "no such user(s): ghost"),
        (["--raters", "rater1", "--per-item", "2"], "cannot give each item 2 raters with only 1 raters"),
    ],
)
def test_assign_errors(study, args, message):
    SummaryFactory(source__study=study)
    UserFactory(username="rater1")
    full = args if "--study" in args else ["--study", study.slug, *args]
    with pytest.raises(CommandError) as excinfo:
        call_command("assign", *full)
    assert message in str(excinfo.value)
    assert not Assignment.objects.exists()
