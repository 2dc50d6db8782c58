"""Writes: rubrics, memberships, assignments and the rater's answers.

Every change to an assignment goes through `_claim_version`, a compare-and-set on
`Assignment.version`: the writer says which version it read, and a write based on
an older version is refused with StaleWriteError (HTTP 409) instead of overwriting.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import F, Max, ProtectedError, Q
from django.utils import timezone

from annotate import qualification
from annotate.designs import shuffled_order, top_up_assignments
from annotate.models import (
    Assignment,
    Comparison,
    ComparisonMember,
    Finding,
    RaterPause,
    Rating,
    Rationale,
    Revision,
    Rubric,
    Span,
    Study,
    StudyMembership,
    Summary,
)
from annotate.rubric_keys import key_problem
from annotate.rubric_yaml import read_uploaded_rubric
from annotate.rubrics import (
    NA,
    AnswerContext,
    AnswerValidationError,
    CleanAnswers,
    RubricDefinition,
    RubricDefinitionError,
)
from annotate.selectors.access import may_take_part_in
from annotate.selectors.claims import claim_ids, stored_per_claim
from annotate.selectors.contents import rubric_definition
from annotate.selectors.queue import latest_revision, revision_answers
from core.exceptions import ApplicationError, InvalidStateError, StaleWriteError
from core.text_validation import MAX_SKIP_REASON_CHARS, check_length, check_limit, check_text

SLUG_RE = re.compile(r"[-a-zA-Z0-9_]+")
SLUG_PATTERN = re.compile(r"^[-a-zA-Z0-9_]+$")
# Pages under /studies/ that a study's slug would hide (annotate/study_urls.py).
RESERVED_SLUGS = frozenset({"new", "rubrics"})

# One write may add at most this much active time; the browser reports increments.
MAX_ACTIVE_SECONDS_PER_WRITE = 3600

# --- rubrics -------------------------------------------------------------------


def builtin_rubric_path(key: str) -> Path:
    return Path(settings.BASE_DIR) / "fixtures" / "rubrics" / f"{key}.yaml"


def read_rubric_file(path: Path) -> dict:
    try:
        # libyaml's loader when PyYAML has it (ten times faster; same safe subset).
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except FileNotFoundError:
        raise RubricDefinitionError(f"{path}: no such rubric file") from None
    except yaml.YAMLError as exc:
        raise RubricDefinitionError(f"{path}: not valid YAML: {exc}") from None
    RubricDefinition.from_dict(raw, known_keys_only=True)
    return raw


@transaction.atomic
def load_rubric(*, definition: dict) -> Rubric:
    """Store a rubric definition; an unchanged one returns the stored version, a
    changed one becomes a new version (old versions are never edited). Owners are not
    checked: this is for the built-in files and `manage.py load_rubric`, whoever runs
    the server; a new key stored here has no owner."""
    parsed = RubricDefinition.from_dict(definition, known_keys_only=True)
    latest = Rubric.objects.select_for_update().filter(key=parsed.key).order_by("-version").first()
    return _store_rubric_version(parsed=parsed, latest=latest, owner=None)


def _store_rubric_version(*, parsed: RubricDefinition, latest: Rubric | None, owner) -> Rubric:
    """The stored version of `parsed`: `latest` (locked) when unchanged, else a new
    version. A key keeps the owner of its first version; `owner` owns a new key."""
    if latest is not None and latest.content_hash == parsed.content_hash:
        return latest
    return Rubric.objects.create(
        key=parsed.key,
        version=(latest.version + 1) if latest else 1,
        title=parsed.title,
        definition=parsed.raw,
        content_hash=parsed.content_hash,
        owner=latest.owner if latest else owner,
    )


def load_builtin_rubric(*, key: str) -> Rubric:
    """The newest stored version of a built-in rubric, loading the file if needed."""
    return load_rubric(definition=read_rubric_file(builtin_rubric_path(key)))


# --- studies ---------------------------------------------------------------------


@transaction.atomic
def ensure_study(*, slug: str, title: str, rubric_key: str) -> tuple[Study, bool]:
    """The study with this slug, created with a built-in rubric when there is none; an
    existing study must already use that rubric. Returns (study, created)."""
    rubric = load_builtin_rubric(key=rubric_key)
    study = Study.objects.select_related("rubric").filter(slug=slug).first()
    if study is not None:
        if study.rubric.key != rubric.key:
            raise InvalidStateError(f"study {slug!r} already uses rubric {study.rubric.key!r}, not {rubric.key!r}")
        return study, False
    title = title.strip()
    if not title:
        raise ApplicationError(f'field "title": a new study {slug!r} needs a title')
    if len(title) > 300:
        raise ApplicationError('field "title": at most 300 characters')
    if not SLUG_RE.fullmatch(slug) or len(slug) > 100:
        raise ApplicationError(f'field "slug": {slug!r} is not a slug (letters, digits, "-" and "_", at most 100)')
    return Study.objects.create(slug=slug, title=title, rubric=rubric), True


def builtin_rubric_keys() -> list[str]:
    return sorted(path.stem for path in builtin_rubric_path("x").parent.glob("*.yaml"))


def rubric_by_key(*, key: str) -> Rubric:
    """The rubric a study names by key (import files, the new-study page, the API): a
    built-in one is loaded from fixtures/rubrics/ (so a changed file becomes a new
    version, as before); any other key is the newest stored version of that key (one
    uploaded on the rubric page or with `load_rubric`)."""
    if not isinstance(key, str) or not SLUG_PATTERN.match(key) or len(key) > 64:
        # Never a path: a key names a file of fixtures/rubrics/ or a stored rubric, nothing else.
        raise RubricDefinitionError("a rubric key is 1-64 letters, digits, '-' and '_'")
    if builtin_rubric_path(key).exists():
        return load_builtin_rubric(key=key)
    latest = Rubric.objects.filter(key=key).order_by("-version").first()
    if latest is None:
        raise RubricDefinitionError(
            f"unknown rubric {key!r}: no rubric of that key is stored (upload it on the rubric page or with "
            f"`manage.py load_rubric`) and no built-in fixtures/rubrics/{key}.yaml"
        )
    return latest


class RubricOwnershipError(ApplicationError):
    """A new version of a key that belongs to another account (docs/rubric-format.md)."""

    code = "permission_denied"
    http_status = 403


def _check_may_publish(*, key: str, latest: Rubric | None, user) -> None:
    if latest is None or user.is_superuser:
        return
    owner = latest.owner
    if owner is None:
        raise RubricOwnershipError(
            f"Rubric {key!r} has no owner (it was stored by the server, or before rubric keys had owners): "
            "only a superuser may publish a new version of it. Give your rubric its own key."
        )
    if owner.pk != user.pk:
        raise RubricOwnershipError(
            f"Rubric {key!r} belongs to {owner.get_username()}: only {owner.get_username()} or a superuser "
            "may publish a new version of it. Give your rubric its own key."
        )


def read_rubric_upload(*, text: str, user) -> RubricDefinition:
    """An uploaded rubric file checked as upload_rubric checks it (the file, its key, the
    definition), without storing anything: what the Rubrics page previews before Save."""
    raw = read_uploaded_rubric(text)
    key = raw.get("key") if isinstance(raw, dict) else None
    if key is not None:  # before the definition's own checks, whose rule for keys is looser
        others = Rubric.objects.exclude(owner=user).values_list("key", flat=True).distinct()
        problem = key_problem(key, builtin=builtin_rubric_keys(), others=others)
        if problem is not None:
            raise RubricDefinitionError(problem)
    return RubricDefinition.from_dict(raw, known_keys_only=True)


def _check_may_change(*, rubric: Rubric, user) -> None:
    """A stored rubric version is renamed or deleted by the key's owner or a superuser, and
    only while no study uses it (a study's answers are read through its version)."""
    if not (user.is_superuser or (rubric.owner_id is not None and rubric.owner_id == user.pk)):
        raise RubricOwnershipError(
            f"Rubric {rubric.key} v{rubric.version} belongs to "
            f"{rubric.owner.get_username() if rubric.owner else 'nobody (superusers only)'}: only its owner or a "
            "superuser may rename or delete it."
        )
    used = list(rubric.studies.values_list("slug", flat=True)[:3])
    if used:
        raise InvalidStateError(
            f"Rubric {rubric.key} v{rubric.version} is used by the study {', '.join(used)}: a rubric a study uses "
            "is kept as it is (upload a changed file to make a new version)."
        )


@transaction.atomic
def rename_rubric(*, rubric: Rubric, title: str, user) -> Rubric:
    """A new title for a stored version no study uses (its owner or a superuser): the
    definition's `title` changes with it, so the stored file and its hash stay one."""
    rubric = Rubric.objects.select_for_update(of=("self",)).select_related("owner").get(pk=rubric.pk)
    _check_may_change(rubric=rubric, user=user)
    check_text(title, "title")
    title = title.strip()
    if not title or len(title) > 200:
        raise ApplicationError("title: required, at most 200 characters", extra={"fields": {"title": "required"}})
    parsed = RubricDefinition.from_dict({**rubric.definition, "title": title})
    rubric.title, rubric.definition, rubric.content_hash = title, parsed.raw, parsed.content_hash
    rubric.save(update_fields=["title", "definition", "content_hash", "updated_at"])
    return rubric


@transaction.atomic
def delete_rubric(*, rubric: Rubric, user) -> None:
    """Delete a stored version no study uses (its owner or a superuser)."""
    rubric = Rubric.objects.select_for_update(of=("self",)).select_related("owner").get(pk=rubric.pk)
    _check_may_change(rubric=rubric, user=user)
    try:
        with transaction.atomic():
            rubric.delete()
    except ProtectedError:  # answers or expected answers recorded against it
        raise InvalidStateError(
            f"Rubric {rubric.key} v{rubric.version} has answers recorded against it: it is kept."
        ) from None


def upload_rubric(*, text: str, user) -> tuple[Rubric, bool]:
    """A rubric YAML from the rubric page, uploaded by `user`: read strictly
    (annotate.rubric_yaml), its key checked (annotate.rubric_keys: no built-in key nor a
    look-alike of one or of another account's key), and stored as load_rubric stores it:
    a changed definition of a key is a new version, an unchanged one is the stored
    version. A new key belongs to `user`; a new version of a stored key is for its owner
    or a superuser (RubricOwnershipError, 403). Every other refusal is a
    RubricDefinitionError naming the problem. Returns the rubric and whether a new
    version was stored."""
    parsed = read_rubric_upload(text=text, user=user)
    try:
        with transaction.atomic():
            # The owner comes along unlocked (PostgreSQL locks no nullable side of a join).
            latest = (
                Rubric.objects.select_for_update(of=("self",))
                .select_related("owner")
                .filter(key=parsed.key)
                .order_by("-version")
                .first()
            )
            _check_may_publish(key=parsed.key, latest=latest, user=user)
            rubric = _store_rubric_version(parsed=parsed, latest=latest, owner=user)
    except IntegrityError:  # the same key's first version stored by another upload meanwhile
        raise ApplicationError(f"Rubric {parsed.key!r} was being stored by someone else: upload it again.") from None
    return rubric, rubric is not latest


# --- studies -------------------------------------------------------------------


@transaction.atomic
def create_study(
    *,
    slug: str,
    title: str,
    rubric_key: str,
    created_by,
    licence: str = "",
    guidelines: str = "",
    description: str = "",
    assisted: bool = False,
) -> Study:
    """A new study pinned to the newest version of its rubric, with its creator as study
    admin (the new-study page and POST /api/studies/). A taken slug is refused (409)."""
    for name, value in (("slug", slug), ("title", title), ("licence", licence), ("guidelines", guidelines)):
        check_text(value, name)
    check_text(description, "description")
    if not slug or not SLUG_PATTERN.match(slug) or len(slug) > 100:
        raise ApplicationError(
            "slug: 1-100 letters, digits, '-' and '_'", extra={"fields": {"slug": "1-100 letters, digits, - and _"}}
        )
    if not title.strip() or len(title) > 300:
        raise ApplicationError("title: required, at most 300 characters", extra={"fields": {"title": "required"}})
    if len(licence) > 100:
        raise ApplicationError("licence: at most 100 characters", extra={"fields": {"licence": "too long"}})
    if slug in RESERVED_SLUGS:
        raise ApplicationError(
            f"slug: {slug!r} is the name of a page; choose another", extra={"fields": {"slug": "reserved"}}
        )
    if Study.objects.filter(slug=slug).exists():
        raise SlugTakenError(f"A study {slug!r} exists already.", extra={"fields": {"slug": "taken"}})
    try:
        rubric = rubric_by_key(key=rubric_key)
    except RubricDefinitionError as exc:
        raise ApplicationError(exc.message, extra={"fields": {"rubric": exc.message}}) from None
    try:
        with transaction.atomic():  # a savepoint: the slug may be taken meanwhile by another request
            study = Study.objects.create(
                slug=slug,
                title=title.strip(),
                rubric=rubric,
                licence=licence.strip(),
                guidelines=guidelines,
                description=description,
                assisted=assisted,
            )
    except IntegrityError:
        raise SlugTakenError(f"A study {slug!r} exists already.", extra={"fields": {"slug": "taken"}}) from None
    add_study_member(study=study, user=created_by, role=StudyMembership.Role.ADMIN)
    return study


class SlugTakenError(ApplicationError):
    http_status = 409
    code = "conflict"


# --- memberships and assignments -------------------------------------------------


@transaction.atomic
def add_study_member(*, study: Study, user, role: str, seed: int | None = None) -> StudyMembership:
    """Give `user` `role` in the study (kept if they have it). Another study's participant
    account is refused (annotate.selectors.access.may_take_part_in): it belongs to its study."""
    if not get_user_model().objects.filter(pk=user.pk).filter(may_take_part_in(study)).exists():
        raise ApplicationError(
            f"{user.get_username()} is a participant account of another study and cannot take part in this one.",
            extra={"fields": {"raters": "a participant account of another study"}},
        )
    membership, _ = StudyMembership.objects.get_or_create(
        study=study,
        user=user,
        role=role,
        defaults={"order_seed": seed if seed is not None else secrets.randbelow(2**31)},
    )
    return membership


@transaction.atomic
def assign_summaries(
    *,
    study: Study,
    raters: Sequence,
    per_item: int,
    seed: int,
    summaries: Sequence[Summary] | None = None,
) -> list[Assignment]:
    """Give each summary `per_item` raters (counting existing assignments), with
    balanced workloads, and append the new ones to each rater's queue in that rater's
    own seeded random order. Running it again with the same inputs adds nothing."""
    if summaries is None:
        summaries = list(study.summaries.order_by("key"))
    if any(s.study_id != study.pk for s in summaries):
        raise ApplicationError("Every summary must belong to the study.")
    rater_ids = [r.pk for r in raters]
    existing: dict[int, set[int]] = {s.pk: set() for s in summaries}
    for summary_id, rater_id in Assignment.objects.filter(summary__in=summaries).values_list("summary", "rater"):
        existing[summary_id].add(rater_id)
    try:
        pairs = top_up_assignments(
            items=[s.pk for s in summaries], raters=rater_ids, per_item=per_item, existing=existing, seed=seed
        )
    except ValueError as exc:
        raise ApplicationError(str(exc)) from None

    created: list[Assignment] = []
    by_rater: dict[int, list[int]] = {}
    for summary_id, rater_id in pairs:
        by_rater.setdefault(rater_id, []).append(summary_id)
    users = {u.pk: u for u in raters}
    for rater_id, summary_ids in by_rater.items():
        membership = add_study_member(study=study, user=users[rater_id], role=StudyMembership.Role.RATER)
        last = Assignment.objects.filter(study=study, rater_id=rater_id).aggregate(m=Max("position"))["m"]
        start = 0 if last is None else last + 1
        order = shuffled_order(summary_ids, seed=f"{membership.order_seed}:{start}")
        created += Assignment.objects.bulk_create(
            Assignment(study=study, summary_id=sid, rater_id=rater_id, position=start + i)
            for i, sid in enumerate(order)
        )
    return created


# --- the rater's answers ----------------------------------------------------------


def _check_rater(assignment: Assignment, rater) -> None:
    if assignment.rater_id != rater.pk:
        # Views look assignments up through the rater already; this guards services
        # called from elsewhere.
        raise ApplicationError("This assignment belongs to another rater.")


class PausedError(ApplicationError):
    """The study admin paused this rater (docs/monitoring.md): no answers until resumed."""

    http_status = 403


def _check_not_paused(assignment: Assignment) -> None:
    """Refuse a paused rater's write. get_assignment_for_rater read the pause with the
    assignment (`rater_paused`); an assignment from elsewhere costs one query."""
    paused = getattr(assignment, "rater_paused", None)
    if paused is not None:
        if paused:
            raise PausedError(PAUSED_MESSAGE)
        return
    if RaterPause.objects.filter(study_id=assignment.study_id, rater_id=assignment.rater_id, resumed_at=None).exists():
        raise PausedError(PAUSED_MESSAGE)


PAUSED_MESSAGE = (
    "The study admin has paused your work on this study: your answers so far are kept, "
    "and you can go on when they resume you."
)


def _check_editable(assignment: Assignment, rater) -> None:
    _check_rater(assignment, rater)
    _check_not_paused(assignment)
    if assignment.state == Assignment.State.WITHDRAWN:
        raise InvalidStateError("This item was withdrawn from your queue.")
    if assignment.state in (Assignment.State.SUBMITTED, Assignment.State.SKIPPED):
        raise InvalidStateError("This item is finished; reopen it before changing your answers.")


def _clamp_active(assignment: Assignment, seconds: Any) -> int:
    """The active seconds one write may add: what the client reports, but never more
    than the wall-clock time since the assignment was last written (or first opened,
    whichever is later), so two tabs, a replayed request or a tampered counter cannot
    make the time on task grow faster than time itself; and at most
    MAX_ACTIVE_SECONDS_PER_WRITE. Whole seconds, rounded down, so that frequent
    autosaves cannot add a rounded-up second each."""
    try:
        value = int(seconds or 0)
    except (TypeError, ValueError, OverflowError):
        raise ApplicationError(
            "active_seconds must be a whole number of seconds.",
            extra={"fields": {"active_seconds": "must be a whole number of seconds"}},
        ) from None
    # Read now, not from `assignment`: the caller may hold an older copy. A write between
    # this read and the compare-and-set changes the version, so that write would fail.
    stamps = Assignment.objects.values_list("updated_at", "first_opened_at").get(pk=assignment.pk)
    since = max(t for t in stamps if t is not None)
    elapsed = int((timezone.now() - since).total_seconds())
    return max(0, min(value, elapsed, MAX_ACTIVE_SECONDS_PER_WRITE))


def _claim_version(
    assignment: Assignment, expected_version: Any, *, writer: tuple[str, int] | None = None, **changes: Any
) -> None:
    """Compare-and-set the assignment's version, applying `changes` in the same UPDATE.

    `writer` (a draft from the rating page: the page's id and the number of this write
    among its writes) also lets a write through when the current version is the same
    page's earlier write: a page may send a second write before the first one's answer
    (the save sent on leaving, then the reloaded page's resend of it), and its newer
    state replaces its own older one. A write from anyone else in between (another tab
    or device, a submit) still makes it stale; an older write of the page arriving last
    is stale too, so it never overwrites a newer one."""
    try:
        expected = int(expected_version)
    except (TypeError, ValueError):
        raise ApplicationError("version is required: send the version you last read.") from None
    writer_id, seq = writer or ("", 0)
    claimable = Q(version=expected)
    if writer_id:
        claimable |= Q(draft_writer=writer_id, draft_seq__lt=seq, version=F("draft_version"))
    updated = Assignment.objects.filter(claimable, pk=assignment.pk).update(
        version=F("version") + 1,
        updated_at=timezone.now(),
        draft_writer=writer_id,
        draft_seq=seq,
        draft_version=F("version") + 1,
        **changes,
    )
    if updated != 1:
        current = Assignment.objects.values_list("version", flat=True).get(pk=assignment.pk)
        raise StaleWriteError(
            "This rating was changed elsewhere (another tab or device) since you opened it. "
            "Reload the page to see the stored answers.",
            extra={"current_version": current},
        )
    # Only what the UPDATE changed: a full refresh would also drop the study, rubric,
    # summary and findings the caller fetched with the assignment.
    assignment.refresh_from_db(
        fields=sorted({"version", "updated_at", "draft_writer", "draft_seq", "draft_version", *changes})
    )


def _findings(summary: Summary) -> list[Finding]:
    """The source's findings in order: the prefetched ones when the caller has them
    (get_assignment_for_rater does), else one query."""
    return sorted(summary.source.findings.all(), key=lambda finding: finding.index)


def answer_context(
    summary: Summary, findings: Sequence[Finding] | None = None, definition: RubricDefinition | None = None
) -> AnswerContext:
    """The texts, findings and (when `definition` asks per-claim questions) claims that
    answers about a summary are validated against. Claims cost a query, so only a rubric
    that asks about them reads them."""
    source = summary.source
    findings = _findings(summary) if findings is None else findings
    asks_claims = definition is not None and definition.asks_claims
    return AnswerContext(
        summary_text=summary.text,
        source_text=source.text,
        finding_ids=tuple(str(f.uuid) for f in findings),
        claim_ids=claim_ids(summary) if asks_claims else (),
        compared=compared_texts(summary),
    )


def compared_texts(summary: Summary) -> tuple[tuple[str, str], ...]:
    """A comparison item's summaries as (uuid, text), in the comparison's order; () for a
    summary rated alone. Only an item summary (its generator says so, read without a
    query) costs a query: the submit path of single summaries stays as it was."""
    if summary.generator != Comparison.ITEM_GENERATOR:
        return ()
    rows = ComparisonMember.objects.filter(comparison__item=summary).order_by("index")
    return tuple((str(u), t) for u, t in rows.values_list("summary__uuid", "summary__text"))


def _rating_fields(q, value) -> dict[str, Any]:
    fields: dict[str, Any] = {"score": None, "scale_min": None, "scale_max": None, "value": None}
    if q.is_scale and value != NA:
        low, high = q.scale_bounds
        fields.update(score=value, scale_min=low, scale_max=high)
    else:
        fields["value"] = value
    return fields


_RATING_VALUE_FIELDS = ("score", "scale_min", "scale_max", "value")


def write_draft_answers(
    revision: Revision,
    clean: CleanAnswers,
    definition: RubricDefinition,
    *,
    findings: dict[str, int] | None = None,
    new: bool = False,
) -> None:
    """Make a draft revision's ratings, rationales and spans equal `clean` (drafts only).

    In a fixed number of queries, whatever the number of answers (the submit
    path does the minimum): the revision's ratings are read once (or not at all for a
    `new` revision; a revision from latest_revision has them prefetched), then each
    kind of change is one bulk statement. `findings` maps a finding's uuid to its id
    (read here when not given)."""
    if findings is None:
        rows = Finding.objects.filter(source__summaries__assignments__revisions=revision)
        findings = {str(f.uuid): f.pk for f in rows}
    wanted: dict[tuple[str, int | None], tuple[Any, Any, str]] = {}
    for q in definition.questions:
        # A draft's rationale may come before its answer: it is stored on a rating
        # with no value (a submit never gets here with one, see _clean_rationale).
        if q.highlights or (q.key not in clean.values and q.key not in clean.rationales):
            continue
        if q.per_finding:
            values = clean.values.get(q.key) or {}
            texts = clean.rationales.get(q.key) or {}
            for finding_id in sorted(set(values) | set(texts)):
                wanted[(q.key, findings[finding_id])] = (q, values.get(finding_id), texts.get(finding_id, ""))
        elif q.per_claim:
            wanted[(q.key, None)] = (q, stored_per_claim(clean.values.get(q.key), clean.rationales.get(q.key)), "")
        else:
            wanted[(q.key, None)] = (q, clean.values.get(q.key), clean.rationales.get(q.key, ""))

    if new:
        stored: list[Rating] = []
    elif "ratings" in getattr(revision, "_prefetched_objects_cache", {}):
        stored = list(revision.ratings.all())
    else:
        stored = list(Rating.objects.filter(revision=revision).select_related("rationale"))
    existing = {(r.question, r.finding_id): r for r in stored}

    stale = [r.pk for key, r in existing.items() if key not in wanted]
    if stale:
        Rationale.objects.filter(rating_id__in=stale).delete()
        Rating.objects.filter(pk__in=stale).delete()

    now = timezone.now()
    created: list[Rating] = []
    changed: list[Rating] = []
    ratings: dict[tuple[str, int | None], Rating] = {}
    for (key, finding_id), (q, value, _text) in wanted.items():
        fields = _rating_fields(q, value)
        rating = existing.get((key, finding_id))
        if rating is None:
            rating = Rating(revision=revision, question=key, finding_id=finding_id, **fields)
            created.append(rating)
        elif any(getattr(rating, name) != v for name, v in fields.items()):
            for name, v in fields.items():
                setattr(rating, name, v)
            rating.updated_at = now
            changed.append(rating)
        ratings[(key, finding_id)] = rating
    # The new rows get their ids back (PostgreSQL, and SQLite from 3.35), which the
    # rationales below point at.
    Rating.objects.bulk_create(created)
    if changed:
        Rating.objects.bulk_update(changed, [*_RATING_VALUE_FIELDS, "updated_at"])

    add: list[Rationale] = []
    edit: list[Rationale] = []
    drop: list[int] = []
    for key, (_q, _value, text) in wanted.items():
        rating = ratings[key]
        current = getattr(rating, "rationale", None) if key in existing else None
        if text and current is None:
            add.append(Rationale(rating=rating, text=text))
        elif text and current.text != text:
            current.text = text
            current.updated_at = now
            edit.append(current)
        elif not text and current is not None:
            drop.append(current.pk)
    if drop:
        Rationale.objects.filter(pk__in=drop).delete()
    Rationale.objects.bulk_create(add)
    if edit:
        Rationale.objects.bulk_update(edit, ["text", "updated_at"])

    # Spans of a draft are rewritten as a whole; submitted revisions are never touched.
    if not new:
        Span.objects.filter(revision=revision).delete()
    spans = []
    for q in definition.questions:
        if not q.highlights:
            continue
        for index, span in enumerate(clean.values.get(q.key) or []):
            spans.append(build_span(revision=revision, question=q.key, index=index, answer=span))
    Span.objects.bulk_create(spans)


def build_span(*, revision: Revision, question: str, index: int, answer: dict) -> Span:
    """An unsaved Span row from a clean span answer (see RubricDefinition.validate)."""
    link = answer.get("link") or {}
    return Span(
        revision=revision,
        question=question,
        index=index,
        target=answer["target"],
        start=answer["start"],
        end=answer["end"],
        text=answer["text"],
        link_start=link.get("start"),
        link_end=link.get("end"),
        link_text=link.get("text", ""),
        answers=answer["answers"],
        rationale=answer["rationale"],
        summary_uuid=answer.get("summary"),
    )


def _draft_revision(assignment: Assignment) -> tuple[Revision, bool]:
    """The assignment's draft revision (with its answers prefetched), or a new one after
    the newest; and whether it is new."""
    revision = latest_revision(assignment)
    if revision is not None and revision.status == Revision.Status.DRAFT:
        return revision, False
    number = 1 if revision is None else revision.number + 1
    phase = revision.phase if revision is not None else Revision.Phase.INITIAL
    created = Revision.objects.create(
        assignment=assignment,
        number=number,
        rubric=assignment.study.rubric,
        phase=phase,
        assisted=assignment.study.assisted,
        shown_order=assignment.shown_order,
    )
    return created, True


def _write_answers(assignment: Assignment, clean: CleanAnswers, definition, findings: list[Finding]) -> Revision:
    revision, new = _draft_revision(assignment)
    write_draft_answers(revision, clean, definition, findings={str(f.uuid): f.pk for f in findings}, new=new)
    return revision


def open_assignment(*, assignment: Assignment) -> Assignment:
    """Record the first time the rater opened the item (not a change of answers, so
    the version stays). Opening is not starting: the item stays "Not started" until its
    first saved answer (save_draft), so paging through a queue with ] changes no state
    and no progress count."""
    if assignment.first_opened_at is None:
        now = timezone.now()
        Assignment.objects.filter(pk=assignment.pk, first_opened_at__isnull=True).update(first_opened_at=now)
        assignment.refresh_from_db(fields=["first_opened_at"])
    return assignment


def save_draft(
    *,
    assignment: Assignment,
    rater,
    answers: Any,
    rationales: Any = None,
    version: Any,
    active_seconds: Any = 0,
    writer: tuple[str, int] | None = None,
) -> Revision:
    """Store answers in progress, in any partial state: a rationale before its answer,
    a highlight without its sub-answers, unanswered questions. Each given value must
    still be one the rubric allows; completeness and the rubric's rules wait for submit
    (their problems are shown as hints, see draft_hints). `writer` is the rating page's
    (id, write number), see _claim_version.

    The answers are checked before the transaction opens (see submit_rating)."""
    _check_editable(assignment, rater)
    definition = rubric_definition(assignment.study.rubric)
    findings = _findings(assignment.summary)
    clean = definition.validate(
        answers, rationales, final=False, context=answer_context(assignment.summary, findings, definition)
    )
    active = _clamp_active(assignment, active_seconds)
    with transaction.atomic():
        _claim_version(
            assignment,
            version,
            writer=writer,
            state=Assignment.State.IN_PROGRESS,
            active_seconds=F("active_seconds") + active,
        )
        revision = _write_answers(assignment, clean, definition, findings)
        revision.save(update_fields=["updated_at"])
    return revision


def draft_hints(*, assignment: Assignment, answers: Any, rationales: Any = None) -> dict[str, str]:
    """The rubric rules a draft breaks, shown as hints while drafting (never a refusal)."""
    definition = rubric_definition(assignment.study.rubric)
    try:
        clean = definition.validate(
            answers, rationales, final=False, context=answer_context(assignment.summary, definition=definition)
        )
    except AnswerValidationError:
        return {}
    return definition.draft_hints(clean)


def submit_rating(
    *, assignment: Assignment, rater, answers: Any, rationales: Any = None, version: Any, active_seconds: Any = 0
) -> Revision:
    """Submit the answers: they must satisfy the rubric in full. The submitted
    revision is never changed afterwards.

    The answers are validated, and the active time read, before the transaction opens:
    on SQLite a transaction holds the one write lock from its start, so only the version
    claim and the writes run under it. Nothing checked outside can go stale unseen: the
    claim is a compare-and-set on the version the rater read, so a write in between makes
    this one fail with StaleWriteError."""
    _check_editable(assignment, rater)
    definition = rubric_definition(assignment.study.rubric)
    findings = _findings(assignment.summary)
    clean = definition.validate(
        answers, rationales, final=True, context=answer_context(assignment.summary, findings, definition)
    )
    active = _clamp_active(assignment, active_seconds)
    now = timezone.now()
    with transaction.atomic():
        _claim_version(
            assignment,
            version,
            state=Assignment.State.SUBMITTED,
            submitted_at=now,
            active_seconds=F("active_seconds") + active,
        )
        revision = _write_answers(assignment, clean, definition, findings)
        revision.status = Revision.Status.SUBMITTED
        revision.submitted_at = now
        revision.save(update_fields=["status", "submitted_at", "updated_at"])
    _after_qualification_item(assignment, rater)
    return revision


def _after_qualification_item(assignment: Assignment, rater) -> None:
    """A finished qualification item may finish the rater's attempt: score it then."""
    if qualification.is_qualification_item(assignment):
        qualification.score_attempt_if_complete(study=assignment.study, rater=rater)


@transaction.atomic
def skip_assignment(*, assignment: Assignment, rater, reason: Any, version: Any) -> Assignment:
    _check_rater(assignment, rater)
    _check_not_paused(assignment)
    reason = reason.strip() if isinstance(reason, str) else ""
    check_text(reason, "reason")
    check_limit(reason, "reason", MAX_SKIP_REASON_CHARS)
    if not reason:
        raise ApplicationError("Say why you are skipping this item.", extra={"fields": {"reason": "required"}})
    if assignment.state in (Assignment.State.SUBMITTED, Assignment.State.SKIPPED, Assignment.State.WITHDRAWN):
        raise InvalidStateError("This item is already finished or withdrawn.")
    _claim_version(assignment, version, state=Assignment.State.SKIPPED, skip_reason=reason)
    _after_qualification_item(assignment, rater)
    return assignment


@transaction.atomic
def reopen_rating(*, assignment: Assignment, rater, version: Any) -> Revision | None:
    """Reopen a submitted or skipped item. A submitted rating is copied into a new
    draft revision, so the submitted one stays in the history unchanged."""
    _check_rater(assignment, rater)
    _check_not_paused(assignment)
    if assignment.state not in (Assignment.State.SUBMITTED, Assignment.State.SKIPPED):
        raise InvalidStateError("Only a submitted or skipped item can be reopened.")
    if qualification.is_qualification_item(assignment):
        # Scored when finished; a new attempt reopens the items itself (qualification.py).
        raise InvalidStateError("A qualification answer cannot be changed once it is finished.")
    was_submitted = assignment.state == Assignment.State.SUBMITTED
    _claim_version(assignment, version, state=Assignment.State.IN_PROGRESS)
    if not was_submitted:
        return None
    previous = latest_revision(assignment)
    draft = Revision.objects.create(
        assignment=assignment,
        number=previous.number + 1,
        rubric=assignment.study.rubric,
        phase=previous.phase,
        assisted=assignment.study.assisted,
        shown_order=assignment.shown_order,
    )
    answers, rationales = revision_answers(previous)
    definition = rubric_definition(assignment.study.rubric)
    try:
        clean = definition.validate(
            answers, rationales, final=False, context=answer_context(assignment.summary, definition=definition)
        )
    except ApplicationError:
        # The study's rubric changed since the earlier answer; start the draft empty
        # rather than carry over answers the new version would refuse.
        clean = CleanAnswers()
    write_draft_answers(draft, clean, definition, new=True)
    return draft


# --- accounts ------------------------------------------------------------------------


def ensure_user(*, username: str, password: str, is_staff: bool = False, is_superuser: bool = False):
    """Create the account if it does not exist; an existing account is left as it is."""
    user_model = get_user_model()
    user, created = user_model.objects.get_or_create(
        username=username, defaults={"is_staff": is_staff, "is_superuser": is_superuser}
    )
    if created:
        user.set_password(password)
        user.save(update_fields=["password"])
    return user, created


# --- summaries and claims from pipelines ----------------------------------------------


@transaction.atomic
def create_summary(
    *,
    study: Study,
    source,
    key: str,
    text: str,
    generator: str,
    metadata: dict | None = None,
    flags: Sequence[str] | None = None,
    parent: Summary | None = None,
) -> Summary:
    """Add a summary to a study, idempotent by key: the same key and text return the
    stored summary; the same key with another text is refused (use a new key)."""
    if source.study_id != study.pk or (parent is not None and parent.study_id != study.pk):
        raise ApplicationError("The source and parent must belong to the study.")
    check_length(text, "summary")
    existing = Summary.objects.filter(study=study, key=key).first()
    if existing is not None:
        if existing.text != text or existing.source_id != source.pk:
            raise ApplicationError(f"Summary {key!r} already exists with another text or source.")
        return existing
    return Summary.objects.create(
        study=study,
        source=source,
        key=key,
        text=text,
        generator=generator,
        metadata=metadata or {},
        flags=list(flags or []),
        parent=parent,
    )


@transaction.atomic
def record_claims(*, summary: Summary, claims: Sequence[dict]) -> list:
    """Store a summary's claims (index, text, start, end, refs, verdict, explanation,
    probability), updating any stored claim with the same index. Writers of the same
    summary's claims take turns (a lock on the summary row); new claims are inserted
    in one statement."""
    from annotate.models import Claim

    fields = ["text", "start", "end", "refs", "verdict", "explanation", "probability"]
    wanted: dict[int, dict] = {}
    for index, raw in enumerate(claims):
        start, end = raw.get("start"), raw.get("end")
        if (start is None) != (end is None) or (start is not None and not 0 <= start < end <= len(summary.text)):
            raise ApplicationError(f"claim {index}: span {start}-{end} is not inside the summary text")
        wanted[raw.get("index", index)] = {
            "text": raw["text"],
            "start": start,
            "end": end,
            "refs": list(raw.get("refs", [])),
            "verdict": raw.get("verdict", Claim.Verdict.UNVERIFIED),
            "explanation": raw.get("explanation", ""),
            "probability": raw.get("probability"),
        }
    list(Summary.objects.select_for_update().filter(pk=summary.pk).values_list("pk"))
    stored = {c.index: c for c in Claim.objects.filter(summary=summary, index__in=list(wanted))}
    new = []
    for index, values in wanted.items():
        claim = stored.get(index)
        if claim is None:
            new.append(Claim(summary=summary, index=index, **values))
        elif any(getattr(claim, name) != value for name, value in values.items()):
            for name, value in values.items():
                setattr(claim, name, value)
            claim.save(update_fields=[*fields, "updated_at"])
    for claim in Claim.objects.bulk_create(new):
        stored[claim.index] = claim
    return [stored[index] for index in wanted]


# --- comparisons ------------------------------------------------------------------------


def comparison_item_text(count: int) -> str:
    return f"Comparison of {count} summaries of the same source."


@transaction.atomic
def create_comparison(*, study: Study, key: str, summaries: Sequence[Summary]) -> Comparison:
    """A comparison item of `summaries` (two or more, of one source of the study, from
    different generators), with the Summary row that stands for it in assignments (see
    Comparison). Its key shares the summaries' key space, so it must not name a summary."""
    check_text(key, "key")
    key = (key or "").strip()
    if not key:
        raise ApplicationError("key: a comparison needs a key", extra={"fields": {"key": "required"}})
    summaries = list(summaries)
    if len(summaries) < 2:
        raise ApplicationError("summaries: a comparison needs at least two summaries")
    if len({s.pk for s in summaries}) != len(summaries):
        raise ApplicationError("summaries: a summary appears twice in the comparison")
    sources = {s.source_id for s in summaries}
    if len(sources) != 1:
        raise ApplicationError("summaries: the summaries compared must be of one source")
    if any(s.study_id != study.pk for s in summaries):
        raise ApplicationError("summaries: every summary must be in the study")
    if any(s.generator == Comparison.ITEM_GENERATOR for s in summaries):
        raise ApplicationError("summaries: a comparison cannot compare comparisons")
    generators = [s.generator for s in summaries]
    if len(set(generators)) != len(generators):
        raise ApplicationError("summaries: the summaries compared must come from different generators")
    if Summary.objects.filter(study=study, key=key).exists():
        raise ApplicationError(
            f"key: {key!r} is already a summary or comparison of the study", extra={"fields": {"key": "taken"}}
        )
    source = summaries[0].source
    item = Summary.objects.create(
        study=study,
        source=source,
        key=key,
        text=comparison_item_text(len(summaries)),
        generator=Comparison.ITEM_GENERATOR,
        metadata={"comparison": True},
    )
    comparison = Comparison.objects.create(study=study, source=source, key=key, item=item)
    ComparisonMember.objects.bulk_create(
        ComparisonMember(comparison=comparison, summary=s, index=i) for i, s in enumerate(summaries)
    )
    return comparison
