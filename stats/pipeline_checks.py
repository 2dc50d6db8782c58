"""Pass rates of the generation pipeline's own checks (LitSumm's Table 2). Pure.

Input: the summaries frame (annotate.selectors.frames.summaries_frame) with the columns the
pipeline records: pipeline, attempts, references_passed, consistency_revised, flags.
Only summaries written by a pipeline that runs the LitSumm checks count.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

STAGES = (
    ("references_first_pass", "References - first pass"),
    ("references_after_revision", "References - after revision"),
    ("consistency_clean", "Self-consistency - no problems found"),
    ("consistency_after_revision", "Self-consistency - no problems after revision"),
)


def check_pass_rates(summaries: pd.DataFrame) -> dict[str, Any] | None:
    """Share and number of summaries passing each stage, or None without pipeline data.

    - references, first pass: the first generation passed all five reference checks
      (one attempt);
    - references, after revision: the final text passes them (within the attempts);
    - self-consistency, no problems found: no statement was judged unsupported, so no
      revision was needed;
    - self-consistency, no problems after revision: no statement of the final text is
      unsupported (flag `self_consistency_failed` absent).
    """
    if "pipeline" not in summaries.columns:
        return None
    rows = summaries[summaries["pipeline"].astype(str).str.startswith("litsumm")]
    if rows.empty:
        return None
    n = len(rows)
    failed = rows["flags"].apply(lambda flags: "self_consistency_failed" in (flags or []))
    passing = {
        "references_first_pass": int((rows["attempts"] == 1).sum()),
        "references_after_revision": int(rows["references_passed"].fillna(False).astype(bool).sum()),
        "consistency_clean": int((rows["consistency_revised"] == False).sum()),  # noqa: E712 (None is not clean)
        "consistency_after_revision": int((~failed).sum()),
    }
    return {
        "n_summaries": n,
        "stages": [
            {"stage": key, "label": label, "passed": passing[key], "rate": passing[key] / n} for key, label in STAGES
        ],
    }
