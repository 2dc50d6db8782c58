"""Pairwise batches: comparisons built from the study admin's page and API with
annotate.designs.comparison_design, and the rest of the batch machinery on them."""

from collections import Counter

import pytest
from django.urls import reverse

from annotate.models import Assignment, Comparison, ComparisonMember, StudyMembership, Summary
from annotate.services import adjudication, batches
from annotate.services.members import add_study_member
from annotate.services.ratings import submit_rating
from annotate.services.rubrics import load_builtin_rubric
from tests.conftest import api_client_for
from tests.factories import SourceFactory, StudyFactory, SummaryFactory, UserFactory

SYSTEMS = ("alpha", "beta", "gamma")


@pytest.fixture
def pairwise_study(db, admin_user):
    study = StudyFactory(rubric=load_builtin_rubric(key="pairwise"))
    add_study_member(study=study, user=admin_user, role=StudyMembership.Role.ADMIN)
    for s in range(4):
        source = SourceFactory(study=study, key=f"SRC{s}")
        for system in SYSTEMS:
            SummaryFactory(source=source, key=f"SRC{s}-{system}", generator=system, text=f"{system} says {s}.")
    return study


@pytest.fixture
def raters(db):
    return [UserFactory(username=f"rater{i}") for i in range(3)]


def _pairs(batch):
    rows = []
    for a in batch.assignments.select_related("summary"):
        order = a.shown_order
        rows.append((a.rater_id, a.summary_id, tuple(order)))
    return rows


def test_all_pairs_k_raters_counterbalanced(pairwise_study, raters):
    batch = batches.create_batch(study=pairwise_study, name="cmp", raters=raters, design="comparisons", seed=7, k=2)
    rows = _pairs(batch)
    # 4 sources x 3 pairs of systems, 2 raters each.
    assert len({item for _r, item, _o in rows}) == 12
    assert Counter(item for _r, item, _o in rows) == {item: 2 for item in {i for _r, i, _o in rows}}
    # Never the same rater twice on a comparison.
    assert len({(r, item) for r, item, _o in rows}) == len(rows)
    # Every order holds the comparison's two members; by (rater, pair of systems) the two
    # orders are shown equally often, within one.
    generator = {str(s.uuid): s.generator for s in pairwise_study.summaries.all()}
    sides = Counter()
    for rater, item, order in rows:
        members = {
            str(u)
            for u in ComparisonMember.objects.filter(comparison__item_id=item).values_list("summary__uuid", flat=True)
        }
        assert set(order) == members and len(order) == 2
        left, right = (generator[u] for u in order)
        pair = tuple(sorted((left, right)))
        sides[(rater, pair)] += 1 if left == pair[0] else -1
    assert all(abs(v) <= 1 for v in sides.values())
    assert batch.raters_per_item == 2 and batch.design["design"] == "comparisons"


def test_balanced_incomplete_and_seeded(pairwise_study, raters):
    one = batches.preview_batch(
        study=pairwise_study, name="p", raters=raters, design="comparisons", seed=3, k=1, per_source=1
    )
    assert one["items"] == 4 and one["assignments"] == 4
    a = batches.create_batch(
        study=pairwise_study, name="a", raters=raters, design="comparisons", seed=3, k=1, per_source=1
    )
    chosen = Counter(
        tuple(
            sorted(
                ComparisonMember.objects.filter(comparison__item=x.summary).values_list("summary__generator", flat=True)
            )
        )
        for x in a.assignments.select_related("summary")
    )
    # Four comparisons over three pairs of systems: each pair used once or twice.
    assert sorted(chosen.values()) == [1, 1, 2]


def test_comparison_items_are_reused_and_live_work_skipped(pairwise_study, raters):
    first = batches.create_batch(study=pairwise_study, name="a", raters=raters, design="comparisons", seed=1, k=3)
    assert Comparison.objects.filter(study=pairwise_study).count() == 12
    with pytest.raises(Exception, match="nothing to create"):
        batches.create_batch(study=pairwise_study, name="b", raters=raters, design="comparisons", seed=2, k=3)
    assert Comparison.objects.filter(study=pairwise_study).count() == 12
    assert first.assignments.count() == 36


def test_single_summary_batches_never_take_comparison_items(pairwise_study, raters):
    batches.create_batch(study=pairwise_study, name="a", raters=raters[:1], design="comparisons", seed=1, k=1)
    single = batches.create_batch(study=pairwise_study, name="b", raters=raters[1:2], design="k_raters", seed=1, k=1)
    assert not single.assignments.filter(summary__generator=Comparison.ITEM_GENERATOR).exists()
    assert single.assignments.count() == 12


def test_gold_comparison_and_its_accuracy(pairwise_study, raters, admin_user):
    warmup = batches.create_batch(
        study=pairwise_study, name="w", raters=raters[:1], design="comparisons", seed=1, k=1, per_source=1
    )
    gold_item = warmup.assignments.first().summary
    comparison = gold_item.comparison
    better = comparison.member_rows.order_by("index").first().summary
    adjudication.record_expected_answer(
        study=pairwise_study, summary=gold_item, purpose="gold", answers={"overall": {"preferred": str(better.uuid)}}
    )
    batch = batches.create_batch(
        study=pairwise_study,
        name="g",
        raters=raters[1:],
        design="comparisons",
        seed=4,
        k=1,
        per_source=1,
        gold=[gold_item],
    )
    gold_rows = batch.assignments.filter(summary=gold_item)
    assert gold_rows.count() == 2
    assert all(len(a.shown_order) == 2 for a in gold_rows)


def test_batch_from_the_page(client, pairwise_study, raters, admin_user):
    for r in raters:
        add_study_member(study=pairwise_study, user=r, role=StudyMembership.Role.RATER)
    client.force_login(admin_user)
    url = reverse("studies:batch-create", kwargs={"slug": pairwise_study.slug})
    page = client.get(url)
    assert b"Comparisons per source" in page.content
    response = client.post(
        url,
        {
            "name": "three systems",
            "kind": "main",
            "raters": [r.pk for r in raters[:2]],
            "design": "comparisons",
            "k": 2,
            "share": 0.2,
            "m": 1,
            "seed": 5,
            "blinded": "on",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    batch = pairwise_study.batches.get(name="three systems")
    assert batch.assignments.count() == 24
    assert all(len(a.shown_order) == 2 for a in batch.assignments.all())


def test_batch_from_the_api(pairwise_study, raters, admin_user):
    for r in raters:
        add_study_member(study=pairwise_study, user=r, role=StudyMembership.Role.RATER)
    api = api_client_for(admin_user)
    url = f"/api/studies/{pairwise_study.slug}/batches/"
    bad = api.post(url, {"name": "x", "raters": ["rater0"], "design": "comparisons", "k": 5}, format="json")
    assert bad.status_code == 400 and "5 raters" in bad.content.decode()
    ok = api.post(
        url,
        {"name": "x", "raters": ["rater0", "rater1"], "design": "comparisons", "k": 1, "per_source": 2},
        format="json",
    )
    assert ok.status_code == 201, ok.content
    assert Assignment.objects.filter(batch__name="x").count() == 8


def test_rerating_keeps_each_raters_order(pairwise_study, raters):
    batch = batches.create_batch(
        study=pairwise_study, name="r", raters=raters[:2], design="comparisons", seed=1, k=2, per_source=1
    )
    for a in batch.assignments.all():
        left, right = a.shown_order
        submit_rating(
            assignment=a,
            rater=a.rater,
            answers={k: {"preferred": left} for k in ("overall", "faithfulness", "completeness")},
            version=a.version,
        )
    assert adjudication.open_rerating(batch=batch) == 8
    for a in batch.assignments.all():
        latest = a.revisions.order_by("-number").first()
        assert latest.phase == "post_discussion" and latest.shown_order == a.shown_order


def _submit(a, choice, strength=None):
    left, right = a.shown_order
    preferred = {"left": left, "right": right, "tie": "tie"}[choice]
    value = {"preferred": preferred} | ({"strength": strength} if strength else {})
    submit_rating(
        assignment=a,
        rater=a.rater,
        answers={k: value for k in ("overall", "faithfulness", "completeness")},
        version=a.version,
    )


def test_disagreement_consensus_and_gold_on_comparisons(pairwise_study, raters, admin_user):
    from annotate.selectors.batches import quality_report
    from annotate.selectors.disagreements import batch_disagreements

    batch = batches.create_batch(
        study=pairwise_study, name="d", raters=raters[:2], design="comparisons", seed=9, k=2, per_source=1
    )
    items = sorted({a.summary_id for a in batch.assignments.all()})
    agree_item, disagree_item = items[0], items[1]
    for a in batch.assignments.filter(summary_id=agree_item):
        # Both prefer the same summary, whatever side each saw it on; strengths differ.
        winner = min(a.shown_order)
        _submit(a, "left" if a.shown_order[0] == winner else "right", "much" if a.rater == raters[0] else "slightly")
    for a in batch.assignments.filter(summary_id=disagree_item):
        _submit(a, "left" if a.rater == raters[0] else "tie")
    flagged = {d.summary.pk for d in batch_disagreements(batch, question="overall")}
    assert flagged == {disagree_item}
    item = batch.assignments.filter(summary_id=disagree_item).first().summary
    consensus = adjudication.record_consensus(
        batch=batch, summary=item, question="overall", value={"preferred": "tie"}, rationale="", decided_by=admin_user
    )
    assert consensus.value == {"preferred": "tie"}
    # Gold: an expected preference, matched whatever the side and strength.
    winner = min(batch.assignments.filter(summary_id=agree_item).first().shown_order)
    adjudication.record_expected_answer(
        study=pairwise_study,
        summary=batch.assignments.filter(summary_id=agree_item).first().summary,
        purpose="gold",
        answers={"overall": {"preferred": winner}},
    )
    accuracy = {r.rater.username: (r.compared, r.correct) for r in quality_report(batch)}
    assert accuracy == {"rater0": (1, 1), "rater1": (1, 1)}


def test_attention_checks_that_are_comparisons_get_an_order(pairwise_study, raters):
    warmup = batches.create_batch(
        study=pairwise_study, name="w", raters=raters[2:], design="comparisons", seed=1, k=1, per_source=1
    )
    check = warmup.assignments.first().summary
    left = check.comparison.member_rows.order_by("index").first().summary
    adjudication.record_expected_answer(
        study=pairwise_study, summary=check, purpose="attention", answers={"overall": {"preferred": str(left.uuid)}}
    )
    batch = batches.create_batch(
        study=pairwise_study, name="a", raters=raters[:2], design="comparisons", seed=2, k=1, attention_every=2
    )
    checks = batch.assignments.filter(summary=check)
    assert checks.count() == 2
    assert all(len(a.shown_order) == 2 for a in checks)


def test_adjudication_page_of_a_comparison(client, pairwise_study, raters, admin_user):
    batch = batches.create_batch(
        study=pairwise_study, name="adj", raters=raters[:2], design="comparisons", seed=3, k=2, per_source=1
    )
    item = batch.assignments.first().summary
    members = [m.summary for m in item.comparison.member_rows.order_by("index")]
    client.force_login(admin_user)
    url = reverse(
        "studies:batch-item", kwargs={"slug": pairwise_study.slug, "batch_uuid": batch.uuid, "summary_uuid": item.uuid}
    )
    html = client.get(url).content.decode()
    assert all(m.key in html for m in members) and f'value="{members[1].uuid}"' in html
    response = client.post(url, {"action": "consensus", "question": "overall", "value": str(members[1].uuid)})
    assert response.status_code == 302
    assert item.consensus_answers.get().value == {"preferred": str(members[1].uuid)}


def test_the_preview_counts_comparisons_per_pair_of_systems_and_per_side(pairwise_study, raters):
    options = dict(study=pairwise_study, raters=raters, design="comparisons", seed=5, k=3)
    preview = batches.preview_batch(name="p", **options)
    # No pseudo-system: the comparison items are counted by the systems they show.
    assert Comparison.ITEM_GENERATOR not in preview["per_system"]
    made = batches.create_batch(name="a", **options)
    generator = {str(s.uuid): s.generator for s in Summary.objects.filter(source__study=pairwise_study)}
    pairs, sides = Counter(), Counter()
    items = {}
    for a in made.assignments.all():
        shown = [generator[u] for u in a.shown_order]
        pair = " vs ".join(sorted(shown))
        pairs[pair] += 1
        items.setdefault(pair, set()).add(a.summary_id)
        for side, system in enumerate(shown):
            sides[(system, side)] += 1
    assert preview["per_system_pair"] == {p: (len(items[p]), pairs[p]) for p in sorted(pairs)}
    assert preview["per_side"] == {s: (sides[(s, 0)], sides[(s, 1)]) for s in sorted(SYSTEMS)}
    # Three systems, every pair of them on every source, each asked of all three raters.
    assert set(preview["per_system_pair"].values()) == {(4, 12)}
    assert all(abs(a - b) <= 3 for a, b in preview["per_side"].values())


def test_the_batch_page_previews_pairs_of_systems_and_sides(client, pairwise_study, raters, admin_user):
    for r in raters:
        add_study_member(study=pairwise_study, user=r, role=StudyMembership.Role.RATER)
    client.force_login(admin_user)
    url = reverse("studies:batch-create", kwargs={"slug": pairwise_study.slug})
    form = {"name": "p", "kind": "main", "raters": [r.pk for r in raters[:2]], "design": "comparisons"}
    page = client.post(url, {**form, "k": 2, "share": 0.2, "m": 1, "seed": 5, "action": "preview"})
    html = page.content.decode()
    assert page.status_code == 200 and 'id="preview-system-pairs"' in html and 'id="preview-sides"' in html
    assert "alpha vs beta" in html and Comparison.ITEM_GENERATOR not in html
    # Four sources, three pairs of systems each: the items are counted as comparisons.
    assert "on <strong>12 comparisons</strong>" in html
    assert not pairwise_study.batches.exists()
