"""Memory of the gunicorn processes (config/gunicorn.conf.py's hooks; issue 30).

Measured in docs/performance.md (the harness's `make run` after its submit load: 218 -> 167
MiB of PSS, medians of four alternated pairs, every run in
docs/performance-notes/issue-30-memory.md; then warm_up and the trim before the fork, "Issue
30, fifth round: memory"):

- `warm_up()`, in the master before the workers fork: what every worker would otherwise
  build privately on its first requests is built once and shared.
- `freeze_heap()`, in the master just before the workers fork: `malloc_trim(0)`, then
  `gc.freeze()`, so the workers' garbage collections never write into the inherited objects'
  headers (which copies the pages they sit on into each worker).
- `IdleTrimmer`, in each worker: when the worker has had no request in flight for a moment,
  hand the memory that glibc's allocator kept after the requests freed it (SQLite's page
  caches of closed connections, request bodies, query results) back to the system with
  `malloc_trim(0)`. It never runs while a request is in flight, so it costs requests nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import threading
import time

# Idle this long (no request in flight) before a trim: a busy worker is never trimmed, and a
# burst of requests is trimmed once, after it. At 0.5 s one rater's requests a few tenths of a
# second apart found their worker just trimmed and paid for faulting its pages back in (the
# harness's one-client p95 +2-33 % in four alternated pairs); at 2 s they did not, and the
# memory after the load was the same (docs/performance-notes/issue-30-memory.md).
IDLE_S = 2.0


def warm_up() -> None:
    """In the master, before the workers fork: build what each worker would otherwise build
    privately on its first requests, so that it is built once and shared (issue 30, fifth round).

    - every model's `_meta` caches (fields maps, related objects, the concrete and returning
      fields), which the ORM fills on first use of each model;
    - the template engine's loaders and context processors, the message storage, the session
      serializer and the site language's date formats, which Django imports on the first page;
    - the Celery app, finalized (its task registry, routes, amqp and result backend), with the
      tracer an in-process (`ALWAYS_EAGER`) task runs through and the broker's transport
      class: the first import or export request did this in each worker;
    - the JSON Lines importer (datasets.importing and the exporting package it shares code
      with: our own modules and orjson), which the first import request of each worker
      imported (about 38 ms of it, issue 30's seventh round);
    - the URL resolver's reverse lookups, which the first `reverse()` or `{% url %}` of each
      worker built for every pattern (30-60 ms: it parses each pattern's regular expression),
      and those of the resolvers made for a namespace ("api:", "admin:"), which the first
      reverse() into each namespace built.

    Nothing here touches the database or the network (a kombu Connection connects on first
    use; this one is made to resolve its transport and released unused)."""
    from django.apps import apps
    from django.conf import settings
    from django.template import engines
    from django.urls import get_resolver
    from django.utils import formats, translation
    from django.utils.module_loading import import_string

    for model in apps.get_models(include_auto_created=True):
        opts = model._meta
        for name in (
            "fields_map",
            "_forward_fields_map",
            "related_objects",
            "concrete_fields",
            "local_concrete_fields",
            "db_returning_fields",
            "_property_names",
            "_non_pk_concrete_field_names",
            "managers",
        ):
            getattr(opts, name)
        opts.get_fields()
    for engine in engines.all():
        template_engine = getattr(engine, "engine", None)
        if template_engine is not None:
            template_engine.template_loaders  # noqa: B018 - a cached property that imports them
            template_engine.template_context_processors  # noqa: B018 - likewise
    import_string(settings.MESSAGE_STORAGE)
    import_string(settings.SESSION_SERIALIZER)
    with translation.override(settings.LANGUAGE_CODE):
        formats.get_format("DATE_FORMAT")
        _build_reverse_lookups(get_resolver())
        _build_namespace_lookups(get_resolver())

    import celery.app.trace  # noqa: F401 - what an in-process task runs through

    from config.celery import app

    app.finalize(auto=True)
    app.amqp  # noqa: B018 - cached properties an in-process .delay() builds
    app.backend  # noqa: B018
    app.connection_for_write().release()

    import datasets.importing  # noqa: F401 - imported by the first import request otherwise


def _build_reverse_lookups(resolver) -> None:
    """Build the reverse lookups of `resolver` and of every resolver under it (a namespace's
    `include` builds its own on the first reverse() into it), for the active language."""
    from django.urls import URLResolver

    resolver.reverse_dict  # noqa: B018 - a property that builds them
    for pattern in resolver.url_patterns:
        if isinstance(pattern, URLResolver):
            _build_reverse_lookups(pattern)


def _build_namespace_lookups(resolver, prefix: str = "", converters: dict | None = None) -> None:
    """reverse() of a namespaced name under a URL prefix goes through a resolver of its own,
    made (and cached) by `get_ns_resolver` from the prefix and the namespace's patterns, which
    builds its reverse lookups on that first reverse(): 8 ms of each worker's first import
    request, for "api:" (issue 30, eighth round). The same walk as django.urls.reverse, for
    every namespace and namespace within one."""
    from django.urls.resolvers import get_ns_resolver

    for extra, sub in resolver.namespace_dict.values():
        ns_prefix, ns_converters = prefix + extra, {**(converters or {}), **sub.pattern.converters}
        if ns_prefix:
            get_ns_resolver(ns_prefix, sub, tuple(ns_converters.items())).reverse_dict  # noqa: B018
        _build_namespace_lookups(sub, ns_prefix, ns_converters)


def freeze_heap() -> None:
    """In the master, just before the workers fork: hand glibc's free heap pages back to the
    system, then move every object it holds to the collector's permanent generation.

    A worker's collections then never visit (and write into the header of) an object it
    inherited, so those pages stay shared with the master instead of being copied into each
    worker. The trim first: pages the master's start-up (migrations, the demo's check) freed
    but glibc kept would otherwise be inherited, and every worker that allocates into them
    copies them, while the master keeps its own copy, counted in full once no worker shares it."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
    gc.freeze()


def _malloc_trim():
    """glibc's malloc_trim, or None where the C library has none (musl, macOS)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


class IdleTrimmer:
    """Counts a worker's requests in flight; a daemon thread trims once after each busy spell."""

    def __init__(self, idle_s: float = IDLE_S, trim=None, log=None):
        self.idle_s = idle_s
        self.log = log
        self.trim = trim if trim is not None else _malloc_trim()
        self.in_flight = 0
        self.trims = 0
        self._last_end = 0.0
        self._dirty = False
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def start(self) -> IdleTrimmer:
        if self.trim is not None and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="idle-trim", daemon=True)
            self._thread.start()
        return self

    def request_started(self) -> None:
        with self._cond:
            self.in_flight += 1

    def request_finished(self) -> None:
        with self._cond:
            self.in_flight = max(0, self.in_flight - 1)
            self._dirty = True
            if self.in_flight == 0:
                self._last_end = time.monotonic()
                self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not (self._dirty and self.in_flight == 0):
                    self._cond.wait()
                wait = self._last_end + self.idle_s - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue  # look again: a request may have come in meanwhile
                self._dirty = False
            released = self.trim(0)
            self.trims += 1
            if self.log is not None:
                self.log("idle: freed memory returned to the system (malloc_trim: %s)", released)
