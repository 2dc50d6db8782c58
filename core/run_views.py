"""One way for the API to answer a background run's status, for every kind of run: the
study report (analysis.api) and dataset exports and imports (datasets.api).

A view says which kind of run it answers for (:class:`RunKind`: its serializer, whether a
run still waiting answers 202, the URL name of its status); :class:`RunViews` writes the
response the same way for each kind. Access and the run's lookup stay in each view, which
its app decides.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from django.urls import reverse
from rest_framework import serializers
from rest_framework.response import Response


def never(status: Any) -> bool:
    return False


@dataclass(frozen=True)
class RunKind:
    """A kind of background run as its status views answer it.

    ``serializer``: the run's status as JSON (given the request in its context);
    ``waiting``: whether a status answers 202 (still queued or running) rather than 200;
    ``location``: the URL name of the run's status, sent as Location when a run starts,
    with the view's slug and ``id_kwarg`` (the run's id in that URL)."""

    serializer: type[serializers.BaseSerializer]
    waiting: Callable[[Any], bool] = never
    location: str = ""
    id_kwarg: str = ""


class RunViews:
    """Mixin of the API views of one kind of run (``run_kind``)."""

    run_kind: ClassVar[RunKind]

    def run_data(self, request, status) -> Any:
        return self.run_kind.serializer(status, context={"request": request}).data

    def run_status(self, request, status) -> Response:
        """The run's status: 202 while it waits or runs where the kind says so, else 200."""
        return Response(self.run_data(request, status), status=202 if self.run_kind.waiting(status) else 200)

    def run_started(self, request, status, *, slug: str) -> Response:
        """A run just started (or started again): 202 with a Location to poll."""
        url = reverse(self.run_kind.location, kwargs={"slug": slug, self.run_kind.id_kwarg: status.id})
        return Response(
            self.run_data(request, status), status=202, headers={"Location": request.build_absolute_uri(url)}
        )
