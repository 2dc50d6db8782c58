"""The agreement statistics as people read them, with one line on how to read each.

Keys are those of analysis.report_files' agreement rows (and report.json); the report page
shows the label and the note, the CSV files keep the keys (stable column values)."""

from __future__ import annotations

_CHANCE = "1 is perfect agreement, 0 is what chance alone gives, below 0 is worse than chance."

STATISTIC_LABELS: dict[str, tuple[str, str]] = {
    "percent_agreement": (
        "Percent agreement",
        "Share of rater pairs on an item that gave the same answer; not corrected for chance.",
    ),
    "fleiss_kappa": ("Fleiss' κ", f"Chance from the raters' overall answer shares. {_CHANCE}"),
    "randolph_kappa": ("Randolph's free-marginal κ", f"Chance as if every answer were equally likely. {_CHANCE}"),
    "gwet_ac1": ("Gwet's AC1", f"Chance-corrected; stays stable when one answer dominates. {_CHANCE}"),
    "pabak": ("PABAK (prevalence- and bias-adjusted κ)", f"Kappa with prevalence and rater bias removed. {_CHANCE}"),
    "krippendorff_alpha.nominal": (
        "Krippendorff's α (nominal)",
        f"Any two different answers disagree equally. {_CHANCE}",
    ),
    "krippendorff_alpha.ordinal": (
        "Krippendorff's α (ordinal)",
        f"Answers are ranks: a 4 against a 5 disagrees less than a 1 against a 5. {_CHANCE}",
    ),
    "krippendorff_alpha.interval": (
        "Krippendorff's α (interval)",
        f"Answers are numbers: disagreement grows with the squared difference. {_CHANCE}",
    ),
}


def statistic_label(key: str) -> str:
    """The readable name of a statistic key; an unknown key is shown as it is."""
    return STATISTIC_LABELS.get(key, (key, ""))[0]


def statistic_note(key: str) -> str:
    return STATISTIC_LABELS.get(key, (key, ""))[1]
