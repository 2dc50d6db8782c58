"""Frozen protocols: the hash, the freeze, and every deviation the report can show."""

from __future__ import annotations

import copy
import hashlib

import pytest

from annotate.models import Batch, RaterExclusion
from planning.protocol import Look, canonical_json, deviations, protocol_hash
from planning.selectors import study_state
from planning.services import InvalidPlan, freeze_protocol
from tests.analysis.reports import rated_study
from tests.planning.plans import pointwise_plan

PLAN = pointwise_plan(exclusion_rules=["Attention check"])
DOCUMENT = {
    "study": "s",
    "plan": PLAN,
    "rubric": {"key": "litsumm", "version": 1, "content_hash": "ab" * 32},
    "batches": [{"name": "main", "kind": "main", "design": {"name": "balanced"}, "seed": 7, "raters_per_item": 2}],
}


def test_the_hash_is_the_sha256_of_the_canonical_text_whatever_the_key_order():
    reordered = {key: DOCUMENT[key] for key in reversed(list(DOCUMENT))}
    assert protocol_hash(reordered) == protocol_hash(DOCUMENT)
    assert protocol_hash(DOCUMENT) == hashlib.sha256(canonical_json(DOCUMENT).encode()).hexdigest()


def _paths(value, prefix=()):
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            yield from _paths(inner, (*prefix, i))
    else:
        yield prefix


@pytest.mark.parametrize("path", list(_paths(DOCUMENT)), ids=lambda p: ".".join(map(str, p)))
def test_every_field_changes_the_hash(path):
    changed = copy.deepcopy(DOCUMENT)
    target = changed
    for key in path[:-1]:
        target = target[key]
    old = target[path[-1]]
    target[path[-1]] = old + 1 if isinstance(old, int | float) else f"{old}!"
    assert protocol_hash(changed) != protocol_hash(DOCUMENT)


@pytest.fixture
def frozen(db):
    study, admin = rated_study(n_summaries=12, raters=("ra", "rb"))
    Batch.objects.create(study=study, name="main", design={"name": "balanced"}, seed=7, raters_per_item=2)
    protocol = freeze_protocol(study=study, by=admin, plan=dict(PLAN))
    return study, admin, protocol


def state(study, document, looks=()):
    return study_state(study=study, plan=document["plan"], rater_labels={}, looks=looks)


def codes(found):
    return sorted(d.code for d in found)


def test_a_study_that_kept_to_its_plan_has_no_deviation(frozen):
    study, _admin, protocol = frozen
    assert protocol.version == 1 and protocol.sha256 == protocol_hash(protocol.document)
    assert protocol.document["rubric"]["content_hash"] == study.rubric.content_hash
    assert deviations(protocol.document, state(study, protocol.document)) == []


def test_each_deviation_is_detected(frozen):
    study, admin, protocol = frozen
    document = protocol.document
    # n other than planned
    fewer = copy.deepcopy(document)
    fewer["plan"]["planned_n"] = 10
    assert codes(deviations(fewer, state(study, fewer))) == ["n"]
    # a primary test and a correction other than the report's
    t_test = copy.deepcopy(document)
    t_test["plan"].update(test="paired_t", correction="bonferroni")
    assert codes(deviations(t_test, state(study, t_test))) == ["correction", "test"]
    # looks at the data before the stopping rule; an adaptive plan looks by design
    looks = (Look("2026-11-01T10:00:00+00:00", 5), Look("2026-11-02T10:00:00+00:00", 12))
    assert codes(deviations(document, state(study, document, looks))) == ["look"]
    adaptive = copy.deepcopy(document)
    adaptive["plan"]["stopping_rule"] = "intervals_separated"
    assert deviations(adaptive, state(study, adaptive, looks)) == []
    # an exclusion the plan lists, then one it does not
    batch = Batch.objects.get(study=study, name="main")
    rater = study.assignments.first().rater
    RaterExclusion.objects.create(batch=batch, rater=rater, reason="attention check failed twice", excluded_by=admin)
    assert deviations(document, state(study, document)) == []
    other = study.assignments.exclude(rater=rater).first().rater
    RaterExclusion.objects.create(batch=batch, rater=other, reason="Too fast", excluded_by=admin)
    found = deviations(document, study_state(study=study, plan=document["plan"], rater_labels={other.pk: "rater-02"}))
    assert codes(found) == ["exclusion"] and "rater-02" in found[0].message and other.username not in found[0].message
    RaterExclusion.objects.filter(rater=other).delete()
    # a batch added after the freeze, a batch's seed changed
    Batch.objects.create(study=study, name="extra", design={"name": "balanced"}, seed=8)
    assert codes(deviations(document, state(study, document))) == ["design"]
    Batch.objects.filter(name="extra").delete()
    Batch.objects.filter(pk=batch.pk).update(seed=9)
    assert codes(deviations(document, state(study, document))) == ["design"]
    Batch.objects.filter(pk=batch.pk).update(seed=7)
    # the rubric changed
    from annotate.services.rubrics import load_builtin_rubric

    study.rubric = load_builtin_rubric(key="factpico")
    study.save(update_fields=["rubric"])
    assert "rubric" in codes(deviations(document, state(study, document)))


def test_an_amendment_is_a_new_version_with_a_note_and_bad_plans_change_nothing(frozen):
    study, admin, protocol = frozen
    with pytest.raises(InvalidPlan) as refused:
        freeze_protocol(study=study, by=admin, plan=dict(PLAN, planned_n=20))
    assert refused.value.extra["field"] == "note"
    for field, value in [("alpha", 2), ("primary_question", "nope"), ("planned_n", 1), ("stopping_rule", "whenever")]:
        with pytest.raises(InvalidPlan) as refused:
            freeze_protocol(study=study, by=admin, plan=dict(PLAN, **{field: value}), note="More items.")
        assert refused.value.extra["field"] == field
    assert study.protocols.count() == 1
    amended = freeze_protocol(study=study, by=admin, plan=dict(PLAN, planned_n=20), note="More items.")
    assert amended.version == 2 and amended.sha256 != protocol.sha256
    protocol.refresh_from_db()
    assert protocol.document["plan"]["planned_n"] == 12
