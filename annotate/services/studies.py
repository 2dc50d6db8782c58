"""Writes of studies: a new study from its page or API, and one ensured by a command."""

from __future__ import annotations

import re

from django.db import IntegrityError, transaction

from annotate.models import Study, StudyMembership
from annotate.rubrics import RubricDefinitionError
from annotate.services.members import add_study_member
from annotate.services.rubrics import SLUG_PATTERN, load_builtin_rubric, rubric_by_key
from core.exceptions import ApplicationError, InvalidStateError
from core.text_validation import check_text

SLUG_RE = re.compile(r"[-a-zA-Z0-9_]+")
# Pages under /studies/ that a study's slug would hide (annotate/study_urls.py).
RESERVED_SLUGS = frozenset({"new", "rubrics"})


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
