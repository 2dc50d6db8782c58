"""Reads, one module per topic. Every rule about who sees what is written here, once.

- `access`: who may administer or view a study;
- `queue`: a rater's queue, assignments and revisions;
- `counting`: the answer that counts (one rule for pages, analysis and exports);
- `frames`: tidy pandas frames for the analysis app;
- `contents`: a study's rubric, sources, summaries and claims;
- `batches`: batch administration (progress, answers, disagreements, gold accuracy);
- `stored_text`: stored text that cannot be read back, for `manage.py scan_text`.

Callers import the functions from their topic module; nothing is re-exported here.
"""
