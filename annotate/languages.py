"""The language of a rater's page (docs/languages.md).

Precedence, first that applies: the rater's own pick (the switcher's cookie, set by Django's
set_language view), the study's `language`, the browser's Accept-Language, LANGUAGE_CODE.
LocaleMiddleware applies all but the study's, which only a page of that study knows: its
views call `activate_study_language` before building the page."""

from __future__ import annotations

from django.conf import settings
from django.utils import translation


def activate_study_language(request, study) -> None:
    """Show this request's page in the study's language, unless the rater picked one."""
    if not study.language or _picked_language(request):
        return
    translation.activate(study.language)
    request.LANGUAGE_CODE = translation.get_language()


def _picked_language(request) -> bool:
    """Whether the rater's cookie names a language of settings.LANGUAGES (set_language
    stores any language Django knows; LocaleMiddleware ignores the others, and so do we)."""
    try:
        translation.get_supported_language_variant(request.COOKIES.get(settings.LANGUAGE_COOKIE_NAME) or "")
    except LookupError:
        return False
    return True
