"""The Prolific actions as management commands: a one-line summary, CommandError on failure."""

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from recruit.models import BonusPayment
from tests.recruit.helpers import make_link
from tests.recruit.test_prolific_api import MESSAGE, _arrive, prolific  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db


def _run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue().strip()


def test_the_commands_sync_approve_reject_and_pay_once(study, prolific):  # noqa: F811
    link = make_link(study, items=1, k=3)
    for pid in ("P1", "P2", "P3"):
        _arrive(link, pid, prolific)
    assert _run("prolific_sync", "--study", study.slug) == (
        "3 submissions read, 3 matched to participants, 0 participants' items freed."
    )
    assert _run("prolific_approve", "--study", study.slug, "--participant", "P1", "--participant", "P2") == (
        "2 submissions approved on Prolific."
    )
    assert "rejected" in _run(
        "prolific_reject",
        "--study",
        study.slug,
        "--participant",
        "P3",
        "--category",
        "LOW_EFFORT",
        "--message",
        MESSAGE,
    )
    args = ("prolific_bonus", "--study", study.slug, "--participant", "P1", "--amount", "0.75", "--reason", "extra")
    assert _run(*args) == "Bonus 0.75 (Paid): Bonus paid."
    assert _run(*args) == "Bonus 0.75 (Paid): This bonus was paid already."
    assert prolific.paid_cents("P1") == [75]
    assert BonusPayment.objects.get().status == "paid"


def test_failures_are_command_errors(study, prolific, settings):  # noqa: F811
    link = make_link(study, items=1)
    _arrive(link, "P1", prolific)
    with pytest.raises(CommandError, match="No Prolific participant"):
        _run("prolific_approve", "--study", study.slug, "--participant", "NOPE")
    with pytest.raises(CommandError, match="No study"):
        _run("prolific_sync", "--study", "nope")
    with pytest.raises(CommandError, match="two decimals"):
        _run("prolific_bonus", "--study", study.slug, "--participant", "P1", "--amount", "0.755", "--reason", "x")
    settings.PROLIFIC_API_TOKEN = "wrong"
    with pytest.raises(CommandError, match="401"):
        _run("prolific_sync", "--study", study.slug)
