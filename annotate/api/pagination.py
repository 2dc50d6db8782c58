"""Pagination of the API's lists: page numbers by default, keyset cursors on request.

`?page=N` (the default, DRF's PageNumberPagination) answers `{count, next, previous,
results}`; the database counts the list and skips to the page, so the cost of a page grows
with the list's size and the page number.

`?cursor=` (empty for the first page, then the `next` link) answers `{next, results}`: the
next link carries the ordering key of the page's last row, and the next page is "the rows
after that key" read along the list's index. No count and no offset: a page costs the same
at any depth of any list. The list's order must be unique: a view names it in
`cursor_ordering` (fields of its queryset's model, ascending). Rows inserted before the
cursor's position after the first page are not seen by the pages that follow; the cursor
never repeats or skips a row that existed throughout.
"""

from __future__ import annotations

import base64
import binascii
import json
from functools import reduce

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import F, Q
from rest_framework import serializers
from rest_framework.pagination import PageNumberPagination
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param, replace_query_param

CURSOR_PARAM = "cursor"
# The most rows a client may ask for in one page (`?page_size=`).
MAX_PAGE_SIZE = 1000


def encode_cursor(position: list) -> str:
    return base64.urlsafe_b64encode(json.dumps(position, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_cursor(text: str, width: int) -> list | None:
    """The position a cursor names, None for the first page; 400 for anything else."""
    if text == "":
        return None
    try:
        position = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (ValueError, binascii.Error):
        position = None
    if not isinstance(position, list) or len(position) != width or not all(_plain(v) for v in position):
        raise serializers.ValidationError(
            {CURSOR_PARAM: "not a cursor of this list: start with cursor= and follow next"}
        )
    return position


def _plain(value) -> bool:
    """A key value any database compares without an error: text, or a 64-bit integer."""
    if isinstance(value, str):
        return "\x00" not in value
    return isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63


def after(keys: tuple[str, ...], position: list) -> Q:
    """Rows whose (keys) come after position, ascending: k1 > v1, or k1 = v1 and k2 > v2, ...
    with k1 >= v1 in front so the database reads its index from the position on."""
    branches = [
        Q(**{f"{key}__gt": value}, **{k: v for k, v in zip(keys[:i], position[:i], strict=True)})
        for i, (key, value) in enumerate(zip(keys, position, strict=True))
    ]
    return Q(**{f"{keys[0]}__gte": position[0]}) & reduce(lambda a, b: a | b, branches)


class PageOrCursorPagination(PageNumberPagination):
    """Page numbers, or keyset pages when the request has `cursor` (module docstring).
    `page_size` sets the rows per page (default PAGE_SIZE, 50; at most MAX_PAGE_SIZE)."""

    page_size_query_param = "page_size"
    max_page_size = MAX_PAGE_SIZE

    def paginate_queryset(self, queryset, request, view=None):
        self.cursor_mode = CURSOR_PARAM in request.query_params
        if not self.cursor_mode:
            return super().paginate_queryset(queryset, request, view)
        keys = tuple(getattr(view, "cursor_ordering", ()) or ())
        if not keys:
            raise serializers.ValidationError({CURSOR_PARAM: "this list has page numbers only"})
        self.request = request
        position = decode_cursor(request.query_params[CURSOR_PARAM], len(keys))
        names = [f"cursor_key_{i}" for i in range(len(keys))]
        rows = queryset.annotate(**{name: F(key) for name, key in zip(names, keys, strict=True)})
        size = self.get_page_size(request)
        try:
            if position is not None:
                rows = rows.filter(after(keys, position))
            page = list(rows.order_by(*keys)[: size + 1])
        except (ValueError, TypeError, DjangoValidationError) as error:
            raise serializers.ValidationError({CURSOR_PARAM: "not a cursor of this list"}) from error
        self.next_position = None
        if len(page) > size:
            page = page[:size]
            last = page[-1]
            self.next_position = [getattr(last, name) for name in names]
        return page

    def get_next_link(self):
        if not getattr(self, "cursor_mode", False):
            return super().get_next_link()
        if self.next_position is None:
            return None
        url = remove_query_param(self.request.build_absolute_uri(), self.page_query_param)
        return replace_query_param(url, CURSOR_PARAM, encode_cursor(self.next_position))

    def get_paginated_response(self, data):
        if not getattr(self, "cursor_mode", False):
            return super().get_paginated_response(data)
        return Response({"next": self.get_next_link(), "results": data})

    def get_paginated_response_schema(self, schema):
        described = super().get_paginated_response_schema(schema)
        described["required"] = ["results"]
        described["properties"]["count"]["description"] = "Page-number pages only (absent with ?cursor=)."
        return described

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        if getattr(view, "cursor_ordering", None):
            parameters.append(
                {
                    "name": CURSOR_PARAM,
                    "required": False,
                    "in": "query",
                    "description": "Keyset pages in constant time: empty for the first page, then follow `next` "
                    "(no count). Leave out for page numbers.",
                    "schema": {"type": "string"},
                }
            )
        return parameters
