"""A FactPICO-rubric assignment with one finding, for tests."""

from annotate.models import Finding
from annotate.services.rubrics import load_builtin_rubric
from tests.factories import AssignmentFactory, SourceFactory, StudyFactory, SummaryFactory

SOURCE_TEXT = "Adults with asthma got drug A or placebo. Drug A reduced attacks (p < .01). Café visits were ≥ 3."


def make_factpico_assignment(rater, summary_text="Grown-ups with asthma took drug A or a dummy pill. Attacks fell."):
    study = StudyFactory(rubric=load_builtin_rubric(key="factpico"))
    source = SourceFactory(study=study, text=SOURCE_TEXT)
    finding = add_finding(
        source, "Drug A reduced attacks (p < .01).", outcome="asthma attacks", label="significantly decreased"
    )
    summary = SummaryFactory(source=source, text=summary_text)
    return AssignmentFactory(summary=summary, rater=rater, position=0), finding


def add_finding(source, evidence: str, *, outcome: str, label: str = "") -> Finding:
    """The source's next finding (drug A versus placebo), its evidence a passage of the source."""
    start = source.text.index(evidence)
    return Finding.objects.create(
        source=source,
        index=source.findings.count(),
        intervention="drug A",
        comparator="placebo",
        outcome=outcome,
        label=label,
        start=start,
        end=start + len(evidence),
        evidence=evidence,
    )


def complete_answers(assignment, finding):
    """A full, valid FactPICO submission for make_factpico_assignment's summary."""
    text = assignment.summary.text
    phrase = "a dummy pill"
    start = text.index(phrase)
    answers = {
        "added_info": [
            {
                "start": start,
                "end": start + len(phrase),
                "text": phrase,
                "answers": {"factual": "yes"},
                "rationale": "Plain words for placebo.",
            }
        ],
        "population": 4,
        "intervention": 4,
        "comparator": 3,
        "outcome": 4,
        "outcome_exhaustive": "yes",
        "evidence": {str(finding.uuid): 3},
        "comments": "Say how much attacks fell.",
    }
    rationales = {
        "population": "Adults with asthma.",
        "intervention": "Drug A.",
        "comparator": "Dummy pill is vague.",
        "outcome": "Attacks.",
        "evidence": {str(finding.uuid): "Direction right, size missing."},
    }
    return answers, rationales
