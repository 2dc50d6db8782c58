"""`finding` records in the JSON Lines import: a lab's own abstracts get
FactPICO's evidence question, end to end from the file to the rating page, the submitted
answers and the report; bad findings are refused naming line and field, changing nothing."""

import json

import pytest

from analysis.services import compute_study_report
from annotate.models import Finding, Source, Summary
from annotate.rubrics import RubricDefinition
from annotate.services.rubrics import builtin_rubric_path, read_rubric_file
from datasets.importing import ImportLineError, import_records
from tests.annotate.test_per_finding_without_findings import form_post
from tests.factories import AssignmentFactory

ABSTRACT = (
    "Adults with mild asthma were randomised to drug A or placebo for 12 weeks. "
    "Drug A reduced asthma attacks compared with placebo (p < 0.01). "
    "Drug A did not change lung function. Headache was reported by 4% in both groups."
)
REDUCED = "Drug A reduced asthma attacks compared with placebo (p < 0.01)."
NO_CHANGE = "Drug A did not change lung function."


def lab_file(overrides: dict | None = None) -> list[str]:
    start = ABSTRACT.index(REDUCED)
    records = [
        {"type": "study", "slug": "lab-pls", "title": "Our plain-language summaries", "rubric": "factpico"},
        {"type": "source", "study": "lab-pls", "key": "trial-01", "title": "Drug A in asthma", "text": ABSTRACT},
        {
            "type": "summary",
            "study": "lab-pls",
            "source": "trial-01",
            "key": "trial-01-sysA",
            "text": "Grown-ups with asthma took drug A or a dummy pill. Attacks fell.",
            "generator": "sysA",
        },
        {
            "type": "finding",
            "study": "lab-pls",
            "source": "trial-01",
            "index": 0,
            "intervention": "drug A",
            "comparator": "placebo",
            "outcome": "asthma attacks",
            "label": "significantly decreased",
            "evidence": REDUCED,
            "start": start,
            "end": start + len(REDUCED),
            "external_id": "lab-f1",
        },
        {
            "type": "finding",
            "study": "lab-pls",
            "source": "trial-01",
            "index": 1,
            "intervention": "drug A",
            "comparator": "placebo",
            "outcome": "lung function",
            "label": "no significant difference",
            "evidence": NO_CHANGE,  # no offsets: found in the text
        },
    ]
    for (line, field), value in (overrides or {}).items():
        if value is None:
            records[line - 1].pop(field, None)
        else:
            records[line - 1][field] = value
    return [json.dumps(r) for r in records]


@pytest.mark.django_db
def test_imported_findings_get_factpicos_evidence_question_end_to_end(client, rater_a, admin_user):
    result = import_records(lines=lab_file())
    assert result.created["finding"] == 2 and "finding: 2 created" in result.summary_line()
    source = Source.objects.get(key="trial-01")
    first, second = Finding.objects.filter(source=source).order_by("index")
    assert (first.outcome, first.label, first.external_id) == ("asthma attacks", "significantly decreased", "lab-f1")
    assert ABSTRACT[first.start : first.end] == REDUCED
    assert (second.start, second.end) == (ABSTRACT.index(NO_CHANGE), ABSTRACT.index(NO_CHANGE) + len(NO_CHANGE))
    assert second.comparator == "placebo" and second.label == "no significant difference"

    # The rating page asks the evidence question once per finding, its evidence shown.
    summary = Summary.objects.get(key="trial-01-sysA")
    assignment = AssignmentFactory(summary=summary, rater=rater_a, position=0)
    client.force_login(rater_a)
    html = client.get(f"/rate/{assignment.uuid}/").content.decode()
    assert 'id="question-evidence"' in html and "VI. Evidence inference" in html
    assert "asthma attacks" in html and "lung function" in html
    assert f'data-finding="{first.uuid}"' in html and f'data-finding="{second.uuid}"' in html

    # A rater answers both findings through the page; the answers reach the report.
    text = summary.text
    answers = {
        "added_info": [
            {
                "start": text.index("a dummy pill"),
                "end": text.index("a dummy pill") + len("a dummy pill"),
                "text": "a dummy pill",
                "answers": {"factual": "yes"},
                "rationale": "Plain words for placebo.",
            }
        ],
        "population": 4,
        "intervention": 4,
        "comparator": 3,
        "outcome": 4,
        "outcome_exhaustive": "no",
        "evidence": {str(first.uuid): 4, str(second.uuid): 1},
        "comments": "",
    }
    rationales = {
        "population": "Adults with asthma.",
        "intervention": "Drug A.",
        "comparator": "Dummy pill is vague.",
        "outcome": "Attacks.",
        "evidence": {str(first.uuid): "Attacks fell: right.", str(second.uuid): "Lung function not mentioned."},
    }
    response = client.post(f"/rate/{assignment.uuid}/", form_post(answers, rationales, version=1))
    assert response.status_code == 302, response.content.decode()[:2000]
    report = compute_study_report(study=summary.study, n_resamples=5)
    (system,) = report["by_system"]["rows"]
    assert system["scores"]["evidence"] == pytest.approx(2.5)  # FactPICO's column: the mean over findings

    # Importing the same file again changes nothing; a rated finding cannot change.
    again = import_records(lines=lab_file())
    assert again.unchanged["finding"] == 2 and not again.created["finding"] and not again.updated["finding"]
    with pytest.raises(ImportLineError) as error:
        import_records(lines=lab_file({(5, "label"): "significantly increased"}))
    assert (error.value.line, error.value.field) == (5, "index")
    assert Finding.objects.get(pk=second.pk).label == "no significant difference"


@pytest.mark.django_db
def test_a_finding_can_be_added_to_an_existing_source_over_the_study_import():
    import_records(lines=lab_file()[:3])
    import_records(lines=lab_file()[3:], only_study="lab-pls")
    assert Finding.objects.filter(source__key="trial-01").count() == 2


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("overrides", "line", "field", "message"),
    [
        ({(4, "start"): 0}, 4, "start", "do not give the evidence"),
        ({(4, "end"): None}, 4, "end", "start and end go together"),
        ({(5, "evidence"): "Drug A cured asthma."}, 5, "evidence", "is not in the source's text"),
        ({(5, "evidence"): "Drug A"}, 5, "evidence", "occurs 2 times in the source's text; give start and end"),
        ({(5, "outcome"): None}, 5, "outcome", "is required"),
        ({(5, "source"): "trial-99"}, 5, "source", "no source 'trial-99'"),
        ({(5, "index"): 0}, 5, "index", "duplicates line 4"),
        ({(5, "label"): "x" * 101}, 5, "label", "longer than 100"),
        ({(5, "colour"): "red"}, 5, "colour", "not a known field"),
    ],
)
def test_a_bad_finding_names_line_and_field_and_imports_nothing(overrides, line, field, message):
    with pytest.raises(ImportLineError) as error:
        import_records(lines=lab_file(overrides))
    assert (error.value.line, error.value.field) == (line, field)
    assert message in error.value.message
    assert not Source.objects.exists() and not Finding.objects.exists()


def test_factpicos_missing_option_names_each_element():
    definition = RubricDefinition.from_dict(read_rubric_file(builtin_rubric_path("factpico")))
    for key in ("population", "intervention", "comparator", "outcome"):
        missing = next(o for o in definition.question(key).options if o.value == 1)
        assert missing.label == "Missing"
        assert missing.description == f"The {key} is missing from the summary."
        # The other options stay the shared ones.
        assert [o.label for o in definition.question(key).options] == [
            "Missing",
            "Severe inaccuracies",
            "Somewhat inaccurate or vague",
            "Accurate",
        ]
