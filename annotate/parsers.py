"""The API's JSON parser: DRF's, plus the input checks of core.text_validation.

Every JSON body passes here before any serializer sees it, so one place refuses what
no endpoint can store or read back: text with a lone surrogate or a NUL (in values and
in object keys), and nesting deep enough to overflow Python's recursion limit (which
DRF's parser turned into a 500). The errors are 400s in the one error shape, naming
the field.

DRF imports this module while it loads rest_framework.views, which annotate.api and
core.exceptions import: so it lives outside annotate.api, and it imports
core.text_validation (which needs core.exceptions) when it first parses.
"""

from __future__ import annotations

from rest_framework import parsers
from rest_framework.exceptions import ParseError
from rest_framework.utils import json as drf_json


class JSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        from core.text_validation import loads

        encoding = parsers.get_encoding(parser_context or {})
        parse_constant = drf_json.strict_constant if self.strict else None
        try:
            return loads(stream.read().decode(encoding), parse_constant=parse_constant)
        except ValueError as exc:  # malformed JSON, or bytes that are not `encoding`
            raise ParseError(f"JSON parse error - {exc}") from None
