"""Writes of rubrics: the built-in files, uploads by their owners, renames and deletes.

A rubric is versioned: an unchanged definition returns the stored version, a changed
one becomes a new version, and old versions are never edited.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import ProtectedError

from annotate.models import Rubric
from annotate.rubric_keys import key_problem
from annotate.rubric_yaml import read_uploaded_rubric
from annotate.rubrics import RubricDefinition, RubricDefinitionError
from core.exceptions import ApplicationError, InvalidStateError
from core.text_validation import check_text

# A rubric key, and a study's slug (annotate.services.studies).
SLUG_PATTERN = re.compile(r"^[-a-zA-Z0-9_]+$")


def builtin_rubric_path(key: str) -> Path:
    return Path(settings.BASE_DIR) / "fixtures" / "rubrics" / f"{key}.yaml"


def _read_yaml(path: Path):
    try:
        # libyaml's loader when PyYAML has it (ten times faster; same safe subset).
        return yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except FileNotFoundError:
        raise RubricDefinitionError(f"{path}: no such rubric file") from None
    except yaml.YAMLError as exc:
        raise RubricDefinitionError(f"{path}: not valid YAML: {exc}") from None


def read_rubric_file(path: Path) -> dict:
    """The checked definition of a rubric file, with its `translations:` taken from
    translations/<the file's name> beside it when that file exists (docs/rubric-format.md)."""
    raw = _read_yaml(path)
    companion = path.parent / "translations" / path.name
    if isinstance(raw, dict) and companion.is_file():
        if "translations" in raw:
            raise RubricDefinitionError(f"{path}: translations both in the file and in {companion}")
        raw = {**raw, "translations": _read_yaml(companion)}
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
