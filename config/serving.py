"""Checks made only when the site is served by a WSGI/ASGI server, not by commands."""

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


def refuse_local_key_without_debug() -> None:
    """A server with DEBUG off is a deployment: it must be given its own SECRET_KEY.

    Management commands may sign with the machine's generated development key
    (var/secret_key); a served site with DEBUG off may not, so a forgotten SECRET_KEY
    stops the server instead of quietly signing sessions with a key nobody chose.
    """
    if settings.SECRET_KEY_IS_LOCAL and not settings.DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY must be set to serve the site with DEBUG off (see docs/security.md); "
            "the generated development key in var/ is for DEBUG and management commands only."
        )


def load_urlconf() -> None:
    """Import the URLconf and every view it names, and build its reverse lookups, now, not on
    each worker's first request.

    gunicorn loads the app before it forks its workers (`preload_app`), so what is
    imported here is imported once and its memory pages are shared by every worker; and
    no rater's first request waits for the imports. The statistics stack is not among
    them: the web app does not import it (tests/config/test_imports.py). A `reverse()`
    compiles the patterns and fills the lookup tables Django keeps for the process, the
    URLconf's and each namespace's (`api:`, ...), per language: one call per namespace and
    language does it here, once for every worker.
    """
    from django.conf import settings
    from django.urls import NoReverseMatch, get_resolver, reverse
    from django.utils import translation

    first_names = {}  # namespace -> the first pattern name in it

    def walk(patterns, namespace):
        for pattern in patterns:
            if hasattr(pattern, "url_patterns"):
                walk(pattern.url_patterns, ":".join(filter(None, (namespace, pattern.namespace))))
            else:
                pattern.callback  # noqa: B018 - resolving the callback imports the view
                if pattern.name:
                    first_names.setdefault(namespace, pattern.name)

    walk(get_resolver().url_patterns, "")
    for language, _ in settings.LANGUAGES:
        with translation.override(language):
            for namespace, name in first_names.items():
                try:
                    reverse(f"{namespace}:{name}" if namespace else name)
                except NoReverseMatch:
                    pass  # a name that needs arguments: the lookup tables are built all the same
