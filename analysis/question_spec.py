"""What the study report needs to know about a rubric question (analysis.services builds
these from the rubric; analysis.report and analysis.report_compare read them). Pure: the
statistics stay free of Django."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class QuestionSpec:
    """What the report needs to know about a rubric question."""

    key: str
    kind: str  # scale, choice, checkboxes or text; written into the report as it is
    prompt: str
    required: bool = False
    values: tuple[Any, ...] = ()
    labels: tuple[str, ...] = ()

    # The same names as annotate.rubrics.Question's predicates (this module cannot import
    # annotate: the statistics stay free of Django).
    @property
    def plain_scale(self) -> bool:
        """One score on the scale per item: what agreement, histograms and the
        meta-evaluation use. (A per-finding question reaches the report as a scale,
        each finding an item of its own.)"""
        return self.kind == "scale"

    @property
    def counts_options(self) -> bool:
        """Answered with options whose counts summarise it (one choice or tickboxes)."""
        return self.kind in ("choice", "checkboxes")

    @property
    def one_option(self) -> bool:
        """Answered by picking one option: a nominal item per summary."""
        return self.kind == "choice"

    @property
    def several_options(self) -> bool:
        """Answered by ticking any number of options: a binary item per option."""
        return self.kind == "checkboxes"

    @property
    def measured(self) -> str | None:
        """The level its agreement is read at: "ordinal" for a scale, "nominal" for
        options (a choice, or each option of a tickbox question), None where no
        agreement is computed (free text, highlights, preferences, per-claim answers,
        which have sections of their own)."""
        if self.plain_scale:
            return "ordinal"
        if self.counts_options:
            return "nominal"
        return None
