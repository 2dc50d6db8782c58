"""The study report's sections as frozen dataclasses: what analysis.report and
analysis.services build, what the report page's model (analysis.pages), the CSV files
(analysis.report_files) and the JSON (analysis.report_json) read.

Each field is named as its key in the report's JSON (docs/analysis.md), in the JSON's
order. A field marked ``OPTIONAL`` is left out of the JSON when it is None (the report
never wrote it then); every other field is always written, None as null. Rows whose
columns depend on the study (one column per option, per scale point, per metric) stay
mappings: their keys are data, not names of the format.

Pure: no Django, no pandas (the web app reads these without the statistics' libraries).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

Row = Mapping[str, Any]
# Left out of the JSON when None (see the module docstring).
OPTIONAL = {"optional": True}


def optional() -> Any:
    return dataclasses.field(default=None, metadata=OPTIONAL)


@dataclass(frozen=True)
class RaterCount:
    rater: str
    n_rated: int


@dataclass(frozen=True)
class QuestionInfo:
    key: str
    kind: str
    prompt: str


@dataclass(frozen=True)
class Interval:
    """A bootstrap percentile interval and how many resamples left the statistic undefined."""

    low: float | None
    high: float | None
    n_undefined: int | None


@dataclass(frozen=True)
class AgreementSection:
    """Agreement on one question, or one option of a tickbox question (analysis.report).
    ``report`` is stats.agreement's report as JSON; ``ci`` maps a statistic's flat name
    (``krippendorff_alpha.ordinal``, ``cohen_kappa.<a>|<b>.linear``) to its interval."""

    question: str
    kind: str
    level: str | None
    option: Any
    option_label: str
    scale: tuple[Any, ...]
    n_resamples: int
    seed: int
    confidence_level: float
    report: Row | None
    ci: Mapping[str, Interval]
    error: str | None

    @property
    def nominal(self) -> bool:
        """Answers without an order (a choice, a tickbox option): no ordinal or interval figure."""
        return self.level == "nominal"


@dataclass(frozen=True)
class RaterHistogram:
    rater: str
    counts: tuple[int, ...]


@dataclass(frozen=True)
class Histogram:
    question: str
    scale: tuple[Any, ...]
    raters: tuple[RaterHistogram, ...]


@dataclass(frozen=True)
class ItemMean:
    item: str
    key: str
    n_ratings: int
    mean: float | None
    min: float | None
    max: float | None


@dataclass(frozen=True)
class ItemMeans:
    question: str
    rows: tuple[ItemMean, ...]


@dataclass(frozen=True)
class GroupTable:
    """Scores of one question split by a field's values (stats.distributions.scores_by_group:
    a column ``n_<point>`` per point of the scale)."""

    field: str
    question: str
    rows: tuple[Row, ...]


@dataclass(frozen=True)
class OptionInfo:
    value: Any
    label: str


@dataclass(frozen=True)
class OptionCounts:
    """How often each rater picked each option (a column per option value)."""

    question: str
    options: tuple[OptionInfo, ...]
    rows: tuple[Row, ...]


@dataclass(frozen=True)
class CompareTable:
    field: str
    question: str
    rows: tuple[Row, ...]


@dataclass(frozen=True)
class CompareSection:
    """Systems compared pointwise (stats.compare): groups and paired differences."""

    n_resamples: int
    seed: int
    confidence_level: float
    groups: tuple[CompareTable, ...] = ()
    pairs: tuple[CompareTable, ...] = ()


@dataclass(frozen=True)
class AdjudicatedItem:
    item: str
    key: str
    generator: str
    question: str
    raters: str
    raters_mean: float | None
    consensus: str
    batch: Any


@dataclass(frozen=True)
class AdjudicatedSystem:
    question: str
    generator: str
    n_decided: int
    raters_n: int
    raters_mean: float | None
    raters_ci_low: float | None
    raters_ci_high: float | None
    adjudicated_n: int
    adjudicated_mean: float | None
    adjudicated_ci_low: float | None
    adjudicated_ci_high: float | None


@dataclass(frozen=True)
class AfterAdjudication:
    n_decisions: int = 0
    items: tuple[AdjudicatedItem, ...] = ()
    by_system: tuple[AdjudicatedSystem, ...] = ()


@dataclass(frozen=True)
class Correlation:
    """Every metric against the human question: for the mean human score (``mean``) and
    for each rater's own (``per_rater``); both absent without a human question."""

    human_question: str | None
    metric_columns: tuple[str, ...]
    mean: Mapping[str, Row] | None = optional()
    per_rater: Mapping[str, Mapping[str, Row]] | None = optional()


@dataclass(frozen=True)
class MetaEvaluation:
    """Every metric against every scale question and their average (stats.metaeval_questions):
    ``summary_level`` and ``system_level`` map metric -> question -> correlation."""

    questions: tuple[str, ...] = ()
    human_scores: tuple[Row, ...] | None = optional()
    summary_level: Mapping[str, Mapping[str, Row]] = dataclasses.field(default_factory=dict)
    system_level: Mapping[str, Mapping[str, Row]] = dataclasses.field(default_factory=dict)
    generators: int = 0
    comparisons: Mapping[str, tuple[Row, ...]] | None = optional()
    n_resamples: int | None = optional()


@dataclass(frozen=True)
class SubQuestionAgreement:
    """stats.spans.SubQuestionAgreement with the sub-question's prompt."""

    key: str
    options: tuple[str, ...]
    n_pairs: int
    report: Row | None
    error: str | None
    prompt: str = ""


@dataclass(frozen=True)
class SpanAgreementSection:
    """stats.spans.SpanAgreement of one span question, with its key and prompt."""

    question: str
    prompt: str
    sentences: Row | None
    sub_questions: tuple[SubQuestionAgreement, ...]
    n_sentences: int
    n_overlapping_pairs: int
    errors: Mapping[str, str]


@dataclass(frozen=True)
class SystemRow:
    generator: str
    n_summaries: int
    n_rated: int
    scores: Mapping[str, float | None]
    average: float | None
    n_words: float | None
    delta_fk: float | None
    rougeL: float | None  # noqa: N815 (the report's key)
    spans: Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True)
class SystemSection:
    """People's scores per generator (stats.systems, FactPICO Tables 3 and 12)."""

    questions: tuple[str, ...] = ()
    average_scale: str | None = None
    span_questions: tuple[str, ...] = ()
    rows: tuple[SystemRow, ...] = ()


@dataclass(frozen=True)
class ClaimJudgements:
    """People's judgements of claims on one per-claim question (stats.claims)."""

    question: str
    prompt: str
    n_judgements: int
    labels: Mapping[str, int]
    agreement: Row
    detector: Row | None
    judges: tuple[Row, ...]
    before_after_revision: Row | None


@dataclass(frozen=True)
class JudgeSection:
    """stats.judges.JudgeAgreement of one judge on one scale question."""

    question: str
    judge: str
    pairs: tuple[Row, ...]
    judge_mean_quadratic: float | None
    human_mean_quadratic: float | None


@dataclass(frozen=True)
class ReferenceMetrics:
    stored: int
    computed: int


@dataclass(frozen=True)
class ComparisonSection:
    """Preferences on one comparison question (stats.pairwise). ``ranking`` is a
    Bradley–Terry ranking, or ``{"error": ...}`` where none could be fitted."""

    question: str
    prompt: str
    n_judgements: int
    n_comparisons: int
    n_raters: int
    choices: Mapping[str, int]
    win_tie_loss: tuple[Row, ...]
    position_bias: tuple[Row, ...]
    intransitive_triads: Row
    agreement: Row
    ranking: Row
    pointwise: Row | None = optional()
    judges: tuple[Row, ...] = ()


@dataclass(frozen=True)
class RubricInfo:
    key: str
    version: int
    title: str


@dataclass(frozen=True)
class RaterSeverity:
    rater: str
    n_shared: int
    severity: float
    ci_low: float | None
    ci_high: float | None


@dataclass(frozen=True)
class SeveritySection:
    """One scale question's rater severity (stats.severity)."""

    question: str
    raters: tuple[RaterSeverity, ...]


@dataclass(frozen=True)
class DriftWindow:
    rater: str
    window: int
    first: int
    last: int
    n_shared: int
    agreement_with_others: float | None
    n_gold: int
    agreement_with_gold: float | None


@dataclass(frozen=True)
class DriftSection:
    """Each rater's answers in the order submitted, in windows of `window` (stats.severity)."""

    window: int
    windows: tuple[DriftWindow, ...]


@dataclass(frozen=True)
class Deviation:
    code: str
    message: str


@dataclass(frozen=True)
class ProtocolSection:
    """The study's latest frozen protocol (planning) and every deviation from it."""

    version: int
    sha256: str
    frozen_at: str
    kind: str
    planned_n: int
    n_rated: int
    deviations: tuple[Deviation, ...]


@dataclass(frozen=True)
class StudyReport:
    """Every statistic of one study and phase. analysis.report builds the fields up to
    ``meta_evaluation``; analysis.services adds the rest, which need the database."""

    report_version: int
    n_answers: int
    n_items_rated: int
    n_summaries: int
    raters: tuple[RaterCount, ...]
    questions: tuple[QuestionInfo, ...]
    group_fields: tuple[str, ...]
    n_resamples: int
    agreement: tuple[AgreementSection, ...]
    histograms: tuple[Histogram, ...]
    item_means: tuple[ItemMeans, ...]
    by_group: tuple[GroupTable, ...]
    option_counts: tuple[OptionCounts, ...]
    compare: CompareSection
    after_adjudication: AfterAdjudication
    metrics: tuple[Row, ...]
    correlation: Correlation
    meta_evaluation: MetaEvaluation
    span_agreement: tuple[SpanAgreementSection, ...] = ()
    by_system: SystemSection | None = None
    claim_judgements: tuple[ClaimJudgements, ...] = ()
    judges: tuple[JudgeSection, ...] = ()
    reference_metrics: ReferenceMetrics | None = None
    pipeline_checks: Row | None = None
    retrieval: tuple[Row, ...] = ()
    comparisons: tuple[ComparisonSection, ...] = ()
    study: str = ""
    phase: str = ""
    rubric: RubricInfo | None = None
    severity: tuple[SeveritySection, ...] = ()
    drift: DriftSection | None = None
    protocol: ProtocolSection | None = None
