"""The version of the report format, kept apart from the statistics so that the pages
and the cache check can read it without importing them (the web app starts
without pandas, scipy, statsmodels or matplotlib).

A change in what a report holds or how a figure in it is computed raises the version;
cached reports of an older version are then computed again.
"""

REPORT_VERSION = 17  # 17: rater severity and drift; the frozen protocol and its deviations
# 16: FactPICO Table 4's pairing (each attribute against the overall average)
# 15: agreement by question kind (choices, tickbox options, span sub-questions)
# 14: a rater's answers excluded by an admin leave the report
# 13: Bradley–Terry fitted by Newton to 1e-10 (was choix, 1e-5), all resamples at once
# 12: qualification batches stay out of the analysis, as calibration does.
# 11: comparisons: preferences, Bradley–Terry rankings, position bias
# 10: retrieval precision, recall and F1 per engine and regime (retrieval.csv)
# 9: systems compared (stats.compare), after adjudication, summary.<field> groups,
# agreement's items rated by two or more raters
# 8: FactPICO's signs and tables: delta_fk, acc_eq and KL against every question, by_system
# 7: summaries rated (overall and per rater) count summaries, not findings
# 6: the rubric judge on per-finding and per-claim questions (stats.judges, claims)
# 5: claims judged by people (stats.claims); 4: gold-answer metrics (stats.metrics)
# 3: intervals from stats.agreement_bootstrap (same values; reports are recomputed once)
# 2: a rater's several assignments to one summary count once (newest_rater_answers)
