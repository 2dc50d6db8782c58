"""Claims judged by people (a rubric's per-claim question) against each other and against
Factored Verification's verdicts. Pure code: frames in, numbers out.

``judgements``: one row per (item, claim, rater) with ``label`` (the option chosen, e.g.
"supported", "not_supported", "cannot_tell"). ``verdicts``: one row per (item, claim) with
the detector's ``verdict`` ("supported" or "not_supported"; claims it did not verify are
left out by the caller).

The detector's positive call is "not supported" (a hallucination), as in the Factored
Verification paper (seed 004, section 3.4):

- precision: of the claims it called unsupported, the share people judged unsupported (the
  paper's authors agreed with 66% of GPT-4's unsupported calls);
- negative predictive value: of the claims it called supported, the share people judged
  supported (the paper: 100%);
- recall: of the claims people judged unsupported, the share it called unsupported;
- the **adjusted hallucination rate**: the share of *all* the claims it verified that it
  called unsupported, corrected by what people found on the claims they judged,
  ``reported × precision + (1 − reported) × (1 − NPV)``. With an NPV of 1 this is the
  paper's rule ("our best guess for the true hallucination rate is 2/3 of the reported
  hallucination rate", i.e. reported × precision). Per summary likewise: its unsupported
  calls × precision + its supported calls × (1 − NPV), averaged over summaries. (On the
  judged claims alone the adjusted rate is people's rate by construction; the adjustment
  is for the claims nobody checked.)

People's judgement of a claim is the majority of its raters' "supported"/"not_supported"
labels; a tie, or a claim no rater labelled either way, is left out and counted. Every
proportion comes with a Wilson 95% interval (statsmodels).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import pandas as pd
from statsmodels.stats.proportion import proportion_confint

SUPPORTED, NOT_SUPPORTED = "supported", "not_supported"


@dataclass(frozen=True)
class Proportion:
    k: int
    n: int
    value: float
    low: float
    high: float


def proportion(k: int, n: int) -> Proportion:
    if n == 0:
        return Proportion(k, n, math.nan, math.nan, math.nan)
    low, high = proportion_confint(k, n, alpha=0.05, method="wilson")
    return Proportion(k, n, k / n, float(low), float(high))


def people_labels(judgements: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """(item, claim, people) by majority of "supported"/"not_supported" labels, and the
    number of claims left out (a tie, or no label either way)."""
    decided = judgements[judgements["label"].isin([SUPPORTED, NOT_SUPPORTED])]
    all_claims = judgements[["item", "claim"]].drop_duplicates()
    rows = []
    for (item, claim), part in decided.groupby(["item", "claim"], sort=True):
        counts = part["label"].value_counts()
        yes, no = int(counts.get(SUPPORTED, 0)), int(counts.get(NOT_SUPPORTED, 0))
        if yes != no:
            rows.append((item, claim, SUPPORTED if yes > no else NOT_SUPPORTED))
    frame = pd.DataFrame(rows, columns=["item", "claim", "people"])
    return frame, len(all_claims) - len(frame)


def detector_against_people(verdicts: pd.DataFrame, judgements: pd.DataFrame) -> dict:
    """The detector's unsupported calls against people's majority judgement, on the
    claims people judged; then the rates over every claim the detector verified,
    adjusted by what people found (the paper's extrapolation from a checked sample)."""
    people, undecided = people_labels(judgements)
    both = verdicts.merge(people, on=["item", "claim"], how="inner")
    called = both["verdict"] == NOT_SUPPORTED
    real = both["people"] == NOT_SUPPORTED
    tp, fp = int((called & real).sum()), int((called & ~real).sum())
    fn, tn = int((~called & real).sum()), int((~called & ~real).sum())
    precision, recall, npv = proportion(tp, tp + fp), proportion(tp, tp + fn), proportion(tn, tn + fn)
    flagged = verdicts["verdict"] == NOT_SUPPORTED
    reported = proportion(int(flagged.sum()), len(verdicts))
    per_summary = verdicts.assign(unsupported=flagged, supported=~flagged).groupby("item")[["unsupported", "supported"]]
    counts = per_summary.sum()
    adjusted_counts = counts["unsupported"] * precision.value + counts["supported"] * (1 - npv.value)
    return {
        "n_claims": int(len(both)),
        "n_undecided": int(undecided),
        "n_summaries": int(both["item"].nunique()),
        "confusion": {"tp": tp, "fp": fp, "fn": fn, "tn": tn},
        "precision": asdict(precision),
        "recall": asdict(recall),
        "negative_predictive_value": asdict(npv),
        "people_rate": asdict(proportion(tp + fn, len(both))),
        "n_verified_claims": int(len(verdicts)),
        "n_verified_summaries": int(len(counts)),
        "reported_rate": asdict(reported),
        "adjusted_rate": _adjusted(reported.value, precision.value, npv.value),
        "reported_per_summary": float(counts["unsupported"].mean()) if len(counts) else math.nan,
        "adjusted_per_summary": float(adjusted_counts.mean()) if len(counts) else math.nan,
    }


def _adjusted(reported: float, precision: float, npv: float) -> float:
    """reported × precision + (1 − reported) × (1 − NPV); a term whose share is zero
    needs no estimate (no unsupported call needs a precision)."""
    if math.isnan(reported):
        return math.nan
    total = 0.0
    for share, rate in ((reported, precision), (1 - reported, 1 - npv)):
        if share:
            if math.isnan(rate):
                return math.nan
            total += share * rate
    return total


def claim_agreement(judgements: pd.DataFrame, options: tuple[str, ...]) -> dict:
    """Claim-level agreement between raters: each (item, claim) is an item of the
    agreement statistics (stats.agreement) with the options as nominal categories;
    Cohen's κ (unweighted) per pair, Fleiss' and Krippendorff's α (nominal)."""
    from stats.agreement import agreement_report

    codes = {value: float(i) for i, value in enumerate(options)}
    frame = pd.DataFrame(
        {
            "item": judgements["item"].astype(str) + ":" + judgements["claim"].astype(str),
            "rater": judgements["rater"].astype(str),
            "value": judgements["label"].map(codes),
        }
    )
    if frame["rater"].nunique() < 2 or frame.empty:
        return {"n_claims": int(frame["item"].nunique()), "n_raters": int(frame["rater"].nunique())}
    report = agreement_report(frame, list(codes.values()))
    return {
        "n_claims": report.n_items,
        "n_raters": report.n_raters,
        "percent_agreement": report.percent_agreement,
        "fleiss_kappa": report.fleiss_kappa.value,
        "krippendorff_alpha_nominal": report.krippendorff_alpha.nominal,
        "cohen_kappa": [
            {"rater_a": k.rater_a, "rater_b": k.rater_b, "n": k.n, "kappa": k.unweighted} for k in report.cohen_kappa
        ],
    }


def people_unsupported_by_summary(judgements: pd.DataFrame) -> pd.Series:
    """Per item, the number of its claims people judged unsupported (majority)."""
    people, _ = people_labels(judgements)
    counted = people.assign(unsupported=people["people"] == NOT_SUPPORTED).groupby("item")["unsupported"].sum()
    return counted.astype(float)


def before_after_revision(judgements: pd.DataFrame, pairs: pd.DataFrame) -> dict:
    """Factored Verification Table 2 by people: for each (draft, revision) pair of items
    that people judged both of, the claims people judged unsupported in each; the means
    and the mean change (revision − draft)."""
    counts = people_unsupported_by_summary(judgements)
    rated = pairs[pairs["draft"].isin(counts.index) & pairs["revision"].isin(counts.index)]
    if rated.empty:
        return {"n_pairs": 0}
    drafts = counts.loc[rated["draft"]].to_numpy()
    revisions = counts.loc[rated["revision"]].to_numpy()
    return {
        "n_pairs": int(len(rated)),
        "draft_mean": float(drafts.mean()),
        "revision_mean": float(revisions.mean()),
        "mean_change": float((revisions - drafts).mean()),
        "fewer": int((revisions < drafts).sum()),
        "more": int((revisions > drafts).sum()),
    }


def detector_against_each_rater(verdicts: pd.DataFrame, judgements: pd.DataFrame) -> list[dict]:
    """The detector against each rater's own calls (one rater's label is their "majority"):
    rater, claims compared, precision, recall and NPV of the "not supported" calls."""
    rows = []
    for rater, own in judgements.groupby("rater", sort=True):
        result = detector_against_people(verdicts, own)
        rows.append(
            {
                "rater": str(rater),
                "n_claims": result["n_claims"],
                "precision": result["precision"],
                "recall": result["recall"],
                "negative_predictive_value": result["negative_predictive_value"],
            }
        )
    return rows


def judge_on_claims(judge: str, labels: pd.DataFrame, judgements: pd.DataFrame, options: tuple[str, ...]) -> dict:
    """An automatic judge that answered the per-claim question (`labels`: item, claim,
    label) against people (`judgements`): its "not supported" calls against people's
    majority, as for a detector (precision, recall, NPV with Wilson intervals), and its
    Cohen's κ with each rater claim by claim beside the raters' κ with each other
    (the mean over the pairs with a defined κ)."""
    from stats.judges import mean_defined

    verdicts = labels[labels["label"].isin([SUPPORTED, NOT_SUPPORTED])].rename(columns={"label": "verdict"})
    against = detector_against_people(verdicts[["item", "claim", "verdict"]], judgements)
    combined = pd.concat(
        [
            judgements[["item", "claim", "rater", "label"]],
            labels.assign(rater=judge)[["item", "claim", "rater", "label"]],
        ],
        ignore_index=True,
    )
    pairs = claim_agreement(combined, options).get("cohen_kappa", [])

    with_judge = [p for p in pairs if judge in (p["rater_a"], p["rater_b"])]
    return {
        "judge": judge,
        "n_claims": against["n_claims"],
        "n_judged": int(len(labels)),
        "confusion": against["confusion"],
        "precision": against["precision"],
        "recall": against["recall"],
        "negative_predictive_value": against["negative_predictive_value"],
        "pairs": [{**p, "with_judge": p in with_judge} for p in pairs],
        "judge_mean_kappa": mean_defined([p["kappa"] for p in with_judge]),
        "human_mean_kappa": mean_defined([p["kappa"] for p in pairs if p not in with_judge]),
    }
