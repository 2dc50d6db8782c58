"""Severity and drift on the live monitor, worked by hand on test_monitor's batch."""

import pytest

from annotate.selectors.monitor import batch_monitor
from tests.annotate.test_monitor import rate_everything, world  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db


def test_severity_and_drift_per_rater(world, client):  # noqa: F811
    rate_everything(world)
    study, admin, _raters, _summaries, batch = world
    rows = {row.figures.rater: row for row in batch_monitor(batch).rows}
    # overall, per item: ra 3,3,3,3  rb 3,4,2,5  rc 3,4,2,1. Each answer minus the mean of
    # the other two: ra 0,-1,+1,0; rb 0,+.5,-.5,+3; rc 0,+.5,-.5,-3.
    assert rows["ra"].severity.severity == pytest.approx(0.0)
    assert rows["rb"].severity.severity == pytest.approx(0.75)
    assert rows["rc"].severity.severity == pytest.approx(-0.75)
    assert rows["rb"].severity.n_shared == 4
    # One window of ra's eight answers (overall and failure modes on four items): overall
    # matched both others on s1 only; failure modes matched both on s1-s3 and one of two
    # on s4: (1 + 0 + 0 + 0 + 1 + 1 + 1 + 0.5) / 8. Gold: s1's 3 right, s4's check 1 wrong.
    (window,) = rows["ra"].drift
    assert (window.first, window.last) == (1, 8)
    assert window.agreement_with_others == pytest.approx(4.5 / 8)
    assert (window.n_gold, window.agreement_with_gold) == (2, 0.5)
    client.force_login(admin)
    page = client.get(f"/studies/{study.slug}/batches/{batch.uuid}/monitor/").content.decode()
    assert '<td class="severity">0.75' in page and '<td class="severity">-0.75' in page


def test_a_long_drift_shows_its_last_windows_after_the_earlier_ones_mean():
    from annotate.selectors.monitor import DRIFT_SHOWN, MonitorRow, _drift_shown
    from stats.severity import DriftWindow

    agreement = [None, 0.2, 0.4] + [1.0] * DRIFT_SHOWN
    windows = [
        DriftWindow("ra", i + 1, 10 * i + 1, 10 * i + 10, 10, value, 0, None) for i, value in enumerate(agreement)
    ]
    shown = _drift_shown(windows)
    assert [w.window for w in shown["drift"]] == list(range(4, 4 + DRIFT_SHOWN))
    assert shown["earlier_windows"] == 3
    assert shown["earlier_agreement"] == pytest.approx(0.3)  # the window without pairs left out
    row = MonitorRow(figures=None, user=None, open_items=0, paused=None, exclusion=None, **shown)
    assert row.earlier_answers == 30
    short = _drift_shown(windows[:2])
    assert (len(short["drift"]), short["earlier_windows"], short["earlier_agreement"]) == (2, 0, None)
