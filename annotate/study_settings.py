"""A study's settings after it was created: title, guidelines, licence, description, the
quality monitor's floor (docs/monitoring.md) and the language of its rater pages
(docs/languages.md). They change on the study's settings page or
through an import's `study` line (docs/import-format.md), and every change is a record
(StudySettingChange: who, when, which field, before and after), listed on the settings
page and exported with the dataset (docs/export-format.md, `settings_changes`).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db import transaction

from annotate.models import Study, StudySettingChange
from core.exceptions import ApplicationError
from core.text_validation import MAX_ADMIN_TEXT_CHARS, check_text

# Field -> (label, longest text); the order is the settings page's.
TEXT_SETTINGS = {
    "title": ("Title", 300),
    "guidelines": ("Guidelines", MAX_ADMIN_TEXT_CHARS),
    "licence": ("Licence of the ratings", 100),
    "description": ("Description", MAX_ADMIN_TEXT_CHARS),
}
# The quality monitor's absolute floor, in whole seconds of active time per item.
FLOOR_SETTING = "min_seconds_per_item"
MAX_FLOOR_SECONDS = 3600
# Whether raters see the pipeline's verification: set by an import's study line only.
ASSISTED_SETTING = "assisted"
# The language of the study's rater pages: a code of settings.LANGUAGES, or "" for each
# rater's own (docs/languages.md).
LANGUAGE_SETTING = "language"
SETTINGS = (*TEXT_SETTINGS, FLOOR_SETTING, ASSISTED_SETTING, LANGUAGE_SETTING)


@dataclass(frozen=True)
class SettingChange:
    """One setting a write changed: the field, its value before and after (as text)."""

    field: str
    before: str
    after: str

    def __str__(self) -> str:
        return f"{self.field}: {_shown(self.before)} → {_shown(self.after)}"


def _shown(value: str, limit: int = 60) -> str:
    return repr(value if len(value) <= limit else value[: limit - 1] + "…")


def _invalid(field: str, message: str) -> ApplicationError:
    return ApplicationError(f"{field}: {message}", extra={"fields": {field: message}})


def _clean(field: str, value) -> str | int:
    if field == FLOOR_SETTING:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_FLOOR_SECONDS:
            raise _invalid(field, f"a whole number of seconds from 0 to {MAX_FLOOR_SECONDS}")
        return value
    if field == ASSISTED_SETTING:
        if not isinstance(value, bool):
            raise _invalid(field, "must be true or false")
        return value
    if field == LANGUAGE_SETTING:
        codes = [code for code, _ in settings.LANGUAGES]
        if value != "" and value not in codes:
            raise _invalid(field, f"one of {', '.join(codes)}, or empty for each rater's own language")
        return value
    if field not in TEXT_SETTINGS:
        raise _invalid(field, "is not a setting of a study")
    if not isinstance(value, str):
        raise _invalid(field, "must be text")
    check_text(value, field)
    limit = TEXT_SETTINGS[field][1]
    if len(value) > limit:
        raise _invalid(field, f"at most {limit:,} characters")
    if field == "title":
        value = value.strip()
        if not value:
            raise _invalid(field, "is required")
    if field == "licence":
        value = value.strip()
    return value


def update_study_settings(*, study: Study, values: dict, changed_by=None, via: str) -> list[SettingChange]:
    """Set the settings named in `values` (and only those) on `study`, recording each one
    that changes (StudySettingChange, `via` the settings page, the admin or an import; `changed_by` None when
    nobody signed in made it, as `manage.py import_jsonl`). Returns the changes, in the
    order of SETTINGS; an unchanged value is no change. A bad value is an ApplicationError
    naming its field, and nothing is changed."""
    clean = {field: _clean(field, value) for field, value in values.items()}
    if not clean:
        return []
    with transaction.atomic():
        locked = Study.objects.select_for_update().get(pk=study.pk)
        changes = []
        for field in SETTINGS:
            if field not in clean or getattr(locked, field) == clean[field]:
                continue
            changes.append(SettingChange(field=field, before=str(getattr(locked, field)), after=str(clean[field])))
            setattr(locked, field, clean[field])
            setattr(study, field, clean[field])
        if changes:
            locked.save(update_fields=[c.field for c in changes] + ["updated_at"])
            StudySettingChange.objects.bulk_create(
                StudySettingChange(
                    study=locked, field=c.field, before=c.before, after=c.after, changed_by=changed_by, via=via
                )
                for c in changes
            )
        return changes
