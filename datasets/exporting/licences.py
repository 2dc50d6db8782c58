"""Which source licences allow a source's text into a CC BY 4.0 dataset.

A strict allow-list: a licence statement passes only when its normalised form matches
one of the forms below in full. Substring or keyword search is not used on purpose:
"Not public domain", "CC BY 4.0 (non-commercial use only)" or "Creative Commons
Attribution Non-Commercial 4.0" contain an allowed phrase and must still be refused.
Anything not recognised is restricted. The grammar is documented in
docs/export-format.md ("Licences")."""

from __future__ import annotations

import re
import unicodedata

# The versions Creative Commons published for BY (1.0 to 4.0) and CC0 (1.0 only).
_BY_VERSION = r"(?:1\.0|2\.0|2\.5|3\.0|4\.0)"
# What may follow a BY version: the international or unported wording, or a port's
# jurisdiction code (2.0 UK, 3.0 IGO, ...). NC, ND and SA are the restriction
# elements, never jurisdictions: "CC BY 4.0 NC" is not CC BY.
_BY_SUFFIX = r"(?: (?:international|unported|generic|igo|(?!nc|nd|sa)[a-z]{2}))?"
_LICENCE_WORD = r"(?: licen[cs]e)?"

_ALLOWED = re.compile(
    "|".join(
        [
            # CC BY: "CC BY", "CC-BY-4.0", "CC BY 2.0 UK", "CC BY (version not stated)"
            rf"cc by(?: {_BY_VERSION}{_BY_SUFFIX})?{_LICENCE_WORD}",
            r"cc by \(version not stated\)",
            # "Creative Commons Attribution 4.0 International (License)"
            rf"creative commons attribution(?: {_BY_VERSION}{_BY_SUFFIX})?{_LICENCE_WORD}",
            # the deed or legal code URL of CC BY
            rf"creativecommons\.org/licenses/by/{_BY_VERSION}(?:/[a-z]{{2,3}})?(?:/|/legalcode(?:\.[a-z]{{2}})?|/deed\.[a-z]{{2}})?",
            # CC0: "CC0", "CC0 1.0", "CC0-1.0", "CC0 1.0 Universal", its URL
            r"cc0(?: 1\.0)?(?: universal)?",
            r"creativecommons\.org/publicdomain/zero/1\.0(?:/|/legalcode(?:\.[a-z]{2})?|/deed\.[a-z]{2})?",
            # public domain: "Public Domain", "Public Domain Mark (1.0)", its URL
            r"public domain(?: mark(?: 1\.0)?)?",
            r"creativecommons\.org/publicdomain/mark/1\.0(?:/|/deed\.[a-z]{2})?",
        ]
    )
)
_URL_PREFIX = re.compile(r"^https?://(?:www\.)?")


def normalise_licence(licence: str) -> str:
    """The form the allow-list is matched against: Unicode-normalised, lower case,
    whitespace collapsed; in a statement (not a URL) hyphens and underscores are spaces;
    a URL loses its scheme and `www.`."""
    text = " ".join(unicodedata.normalize("NFKC", licence).casefold().split())
    if _URL_PREFIX.match(text):
        return _URL_PREFIX.sub("", text)
    return " ".join(text.replace("-", " ").replace("_", " ").split())


def licence_allows_text(licence: str | None) -> bool:
    """Whether a source's text may go into a CC BY 4.0 dataset: CC BY of any version,
    CC0 or public domain, written in one of the recognised forms. A restriction (NC,
    SA, ND), a negation, extra conditions, anything unrecognised and a missing licence
    do not."""
    if not licence:
        return False
    return _ALLOWED.fullmatch(normalise_licence(licence)) is not None
