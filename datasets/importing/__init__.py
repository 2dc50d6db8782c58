"""Import of studies, sources, summaries, claims and findings from JSON Lines (a service).

Format: docs/import-format.md. The package: `records` (reading and cleaning records, no
database), `writing` (their rows, written by the pipeline's writer; `import_records`) and
`evidence_inference` (Evidence Inference abstracts). The file goes through the import pipeline
(datasets/pipeline.py): `parse_lines` reads it, the cleaners and `RecordWriter` check each
record and build its rows, and the pipeline's one writer stores them in batches. The file
is read, checked and written one chunk of records at a time, all inside one transaction:
a bad line, however late in the file, rolls back everything written before it, so a bad
line changes nothing (and memory holds a chunk, not the file).
Records are matched by their keys, so importing the same file twice changes nothing.
Every error names the line and the field: `line 7: field "text": must be a non-empty string`;
text that cannot be stored (a lone surrogate, a NUL: core/text_validation.py) is one.
"""

from datasets.importing.evidence_inference import import_evidence_inference
from datasets.importing.records import parse_lines
from datasets.importing.writing import import_records
from datasets.pipeline import ImportLineError, ImportResult

__all__ = ["ImportLineError", "ImportResult", "import_evidence_inference", "import_records", "parse_lines"]
