"""The dataset folder: export of a study (a service) and its re-import into an empty
instance. The format is documented in docs/export-format.md.

Export streams every table from database iterators into all requested formats at
once (JSON Lines, CSV, Parquet in row groups), so a study with a million answers never
sits in Python objects. Everything is sorted by data, never by database ids or export
time, so exporting the same study twice gives byte-identical files.

Two choices the issue leaves open, argued in docs/export-format.md:
- raters are numbered `rater-01`, `rater-02`, ... in the order of their first submitted
  answer in the study (ties by account), which is stable across exports, survives a
  re-import, and says nothing about who they are;
- summaries written from a withheld source stay in the export, flagged
  `source_withheld`: they are the study's own output and the object that was rated.

The agreement figures of the dataset card come from `stats.agreement` (the datasets
app sits above both annotate and analysis): the card must carry the same numbers as
the analysis app's report.

The package: `folder` (the format, writers, checksums), `licences` (the licence gate),
`export` (the export service), `reading` (what it reads: pseudonyms, the revisions
that count, answers by revision), `tables` (the tables of the study's content and
people), `card` (README.md, LICENSE, study.json) and
`dataset_import` (the re-import and its readers; `answer_import` its ratings and
spans).
"""

from datasets.exporting.dataset_import import DatasetImportResult, import_dataset, read_table, verify_checksums
from datasets.exporting.export import ExportResult, export_dataset
from datasets.exporting.folder import (
    FORMAT_VERSION,
    FORMATS,
    PHASES,
    TABLES,
    DatasetImportError,
    ExportError,
    sha256sums,
)
from datasets.exporting.licences import licence_allows_text
from datasets.exporting.reading import counting_revisions, rater_pseudonyms

__all__ = [
    "FORMAT_VERSION",
    "FORMATS",
    "PHASES",
    "TABLES",
    "DatasetImportError",
    "DatasetImportResult",
    "ExportError",
    "ExportResult",
    "counting_revisions",
    "export_dataset",
    "import_dataset",
    "licence_allows_text",
    "rater_pseudonyms",
    "read_table",
    "sha256sums",
    "verify_checksums",
]
