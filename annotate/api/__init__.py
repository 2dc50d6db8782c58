"""The REST API under /api/ (docs/api.md).

Every view starts with an access helper: annotate.selectors.queue.get_assignment_for_rater
for a rater's own items, annotate.permissions for the study endpoints (the same rules
as the HTML pages; anyone else gets 404). Reads come from annotate.selectors and
its selectors; writes go through annotate.services.
"""

from annotate.api.adjudication import BatchConsensusList, BatchDisagreementList, BatchNoteList
from annotate.api.raters import (
    AssignmentDetail,
    AssignmentFlagList,
    AssignmentList,
    AssignmentRating,
    AssignmentReopen,
    AssignmentSkip,
    AssignmentSubmit,
)
from annotate.api.studies import (
    ClaimList,
    SourceDetail,
    SourceList,
    StudyDetail,
    StudyList,
    SummaryDetail,
    SummaryList,
)
from annotate.api.study_batches import (
    AssignmentMove,
    AssignmentWithdraw,
    BatchAnswerList,
    BatchAnswerStream,
    BatchAssignmentList,
    BatchDetail,
    BatchList,
    BatchRerating,
)
from annotate.api.tokens import AuthToken

__all__ = [
    "AssignmentDetail",
    "AssignmentList",
    "AssignmentMove",
    "AssignmentRating",
    "AssignmentFlagList",
    "AssignmentReopen",
    "AssignmentSkip",
    "AssignmentSubmit",
    "AssignmentWithdraw",
    "AuthToken",
    "BatchAnswerList",
    "BatchAnswerStream",
    "BatchAssignmentList",
    "BatchConsensusList",
    "BatchDetail",
    "BatchDisagreementList",
    "BatchList",
    "BatchNoteList",
    "BatchRerating",
    "ClaimList",
    "SourceDetail",
    "SourceList",
    "StudyDetail",
    "StudyList",
    "SummaryDetail",
    "SummaryList",
]
