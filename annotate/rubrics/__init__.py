"""Rubric definitions: parsing a definition and validating answers against it.

Pure code (no ORM): a definition is a dict read from YAML/JSON (see
docs/rubric-format.md); `RubricDefinition.validate` turns raw answers into clean ones
or raises `AnswerValidationError` with one message per question key. Text that cannot
be stored (core.text_validation) is refused anywhere in the answers, keys included.

One module per topic: `questions` (what a rubric is made of), `parsing` (reading a
definition), `answers` (cleaning one question's answer; how a per-claim answer is
stored), `definition` (`RubricDefinition`).
The names other apps use are imported from here, the package's one public face.
"""

from annotate.rubrics.answers import per_claim_parts, stored_per_claim
from annotate.rubrics.definition import RubricDefinition
from annotate.rubrics.questions import (
    NA,
    TIE,
    AnswerContext,
    AnswerValidationError,
    CleanAnswers,
    Question,
    RubricDefinitionError,
)

__all__ = [
    "NA",
    "TIE",
    "AnswerContext",
    "AnswerValidationError",
    "CleanAnswers",
    "Question",
    "RubricDefinition",
    "RubricDefinitionError",
    "per_claim_parts",
    "stored_per_claim",
]
