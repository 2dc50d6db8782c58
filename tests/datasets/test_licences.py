"""The licence gate (docs/export-format.md, "Licences"): a strict allow-list of CC BY,
CC0 and public-domain statements; everything else, including any restriction, any
negation and anything unrecognised, keeps a source's text out of a CC BY dataset.

The expected values are the Creative Commons licence family itself: BY alone allows a
CC BY 4.0 release; NC, SA and ND add terms a CC BY dataset cannot carry."""

import json

import pytest
from django.core.management import call_command

from annotate.models import Source
from annotate.services.rubrics import load_builtin_rubric
from datasets.exporting import licence_allows_text
from tests.datasets.test_import_evidence_inference import DATA, write
from tests.factories import StudyFactory

ACCEPTED = [
    # CC BY, any version, as the corpus and other tools write it
    "CC BY",
    "CC-BY",
    "CC BY 2.0",
    "CC BY 2.5",
    "CC BY 3.0",
    "CC BY 4.0",
    "CC-BY-4.0",
    "cc-by 4.0",
    "  CC  BY\t4.0 ",
    "CC BY (version not stated)",
    "CC BY 3.0 Unported",
    "CC BY 2.0 UK",
    "Creative Commons Attribution 4.0 International",
    "Creative Commons Attribution 4.0 International License",
    "Creative Commons Attribution License",
    "https://creativecommons.org/licenses/by/4.0/",
    "http://creativecommons.org/licenses/by/2.0",
    "https://creativecommons.org/licenses/by/4.0/legalcode",
    # CC0
    "CC0",
    "CC0 1.0",
    "CC0-1.0",
    "CC0 1.0 Universal",
    "https://creativecommons.org/publicdomain/zero/1.0/",
    # public domain
    "public domain",
    "Public Domain",
    "Public Domain Mark",
    "Public Domain Mark 1.0",
    "https://creativecommons.org/publicdomain/mark/1.0/",
]

REFUSED = [
    # a restriction element written where a port's jurisdiction code would go
    "CC BY 4.0 NC",
    "CC BY 4.0 SA",
    "CC-BY-4.0-ND",
    "CC BY 3.0 nd",
    "Creative Commons Attribution 4.0 NC",
    # what an audit found passing the substring gate
    "Creative Commons Attribution Non-Commercial 4.0",
    "CC BY Share Alike",
    "Creative Commons Attribution No Derivatives 4.0",
    "CC BY 4.0 (non-commercial use only)",
    "Not public domain",
    "CC BY-NC-SA 4.0",
    "CC BY-SA 4.0",
    "CC BY-ND",
    # other restrictions, negations and unknowns
    "CC BY-NC 4.0",
    "CC BY-NC-ND 3.0",
    "Creative Commons Attribution-NonCommercial 4.0",
    "Creative Commons Attribution-ShareAlike 4.0 International",
    "CC BY 4.0; not for commercial use",
    "Not CC BY",
    "not CC0",
    "CC BY 4.0 except figures",
    "CC BY 5.0",
    "CC BY-NC 2.5 (the article's statement forbids commercial use)",
    "Public Domain (the article's statement forbids commercial use)",
    "https://creativecommons.org/licenses/by-nc/4.0/",
    "https://creativecommons.org/licenses/by-sa/4.0/",
    "https://example.org/creativecommons.org/licenses/by/4.0/",
    "https://creativecommons.org/licenses/by/4.0/ and https://creativecommons.org/licenses/by-nc/4.0/",
    "All rights reserved",
    "MIT",
    "unknown",
    "",
    "   ",
]


@pytest.mark.parametrize("licence", ACCEPTED)
def test_cc_by_cc0_and_public_domain_pass_the_gate(licence):
    assert licence_allows_text(licence) is True


@pytest.mark.parametrize("licence", REFUSED)
def test_restricted_negated_and_unknown_licences_are_withheld(licence):
    assert licence_allows_text(licence) is False


def test_a_missing_licence_is_withheld():
    assert licence_allows_text(None) is False


@pytest.mark.parametrize(
    "licence",
    [
        "CC BY 2.5",
        "CC BY (version not stated)",
        "Public Domain",
        "CC0 1.0",
        "Creative Commons Attribution 4.0 International",
        "https://creativecommons.org/licenses/by/4.0/",
    ],
)
def test_evidence_inference_import_of_a_non_commercial_statement_is_withheld_whatever_the_licence(
    db, tmp_path, licence
):
    StudyFactory(slug="fp", rubric=load_builtin_rubric(key="factpico"))
    with DATA.open(encoding="utf-8") as handle:
        record = next(json.loads(line) for line in handle if '"PMC3664406"' in line)
    assert "commercial" in record["license_statement"]
    record["license"] = licence
    call_command("import_evidence_inference", str(write(tmp_path, [record])), "--study", "fp")
    stored = Source.objects.get(key="PMC3664406").licence
    assert licence_allows_text(stored) is False, stored
