"""Text cells of the CSV files the platform serves and exports, made safe to open in a
spreadsheet.

A spreadsheet that opens a CSV file runs a cell starting with `=`, `+`, `-` or `@` as a
formula, and a leading tab or carriage return can hide such a start ("CSV injection",
OWASP). Rationales, summaries, usernames and keys are written by people and LLMs, so
every *text* cell of a CSV we write (the report downloads, the dataset's CSV tables)
goes through `csv_text`: a text starting with one of those characters gets a single
quote `'` in front, which spreadsheets show as text rather than run. A text that
already starts with `'` gets one too, so the rule is undone exactly by removing one
leading quote from any text cell that has one (`original_text`).

Numbers are not text: a numeric column is written as it is (-0.5 stays -0.5). JSON
Lines and Parquet files keep the exact text; only CSV, which is for people, changes.

`CsvRowWriter` writes the rows: csv.writer with LF line ends, except that a cell
holding a carriage return is quoted too (csv.writer quotes only the characters of its
own line terminator, so with "\n" it leaves a lone CR bare; readers and spreadsheets
take that CR as the end of the row, and the rest of the cell, which may start with
`=`, would begin a row of its own).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable, Sequence

# First characters that get the quote: OWASP's formula triggers, and the quote itself
# (so that removing one leading quote always gives the original text back).
QUOTED_FIRST = frozenset("=+-@\t\r'")
QUOTE = "'"


def csv_text(text: str) -> str:
    """The text as a CSV cell: with a leading `'` if it starts with = + - @ tab, CR or '."""
    return QUOTE + text if text and text[0] in QUOTED_FIRST else text


def original_text(cell: str) -> str:
    """The text a `csv_text` cell was made from."""
    return cell[1:] if cell.startswith(QUOTE) else cell


class _LastLine:
    """A file object that keeps only the last line written to it."""

    text = ""

    def write(self, text: str) -> None:
        self.text = text


class CsvRowWriter:
    """CSV rows with LF line ends, quoted as csv.writer quotes them, and a cell that
    holds a carriage return quoted as well (see the module's docstring)."""

    def __init__(self, handle):
        self._handle = handle
        self._last = _LastLine()
        self._lf = csv.writer(self._last, lineterminator="\n")
        # Quotes every cell with a CR or an LF, as the LF writer does for LF alone.
        self._crlf = csv.writer(self._last, lineterminator="\r\n")

    def writerow(self, row: Sequence) -> None:
        self.writerows([row])

    def writerows(self, rows: Sequence[Sequence], cells: Callable[[Sequence], Sequence] | None = None) -> None:
        """Write the rows, each turned into its cells by `cells` if given. The rows are
        written to memory first and handed to the file in one piece; only if that text
        holds a CR (rare) are they written again row by row, so the common case pays
        one scan of the text, not a check per cell."""
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerows(rows if cells is None else map(cells, rows))
        data = buffer.getvalue()
        if "\r" in data:
            data = "".join(map(self._line, rows if cells is None else map(cells, rows)))
        self._handle.write(data)

    def _line(self, row: Sequence) -> str:
        self._lf.writerow(row)
        if "\r" not in self._last.text:
            return self._last.text
        self._crlf.writerow(row)
        return self._last.text[:-2] + "\n"


def csv_document(rows: Iterable[Sequence]) -> str:
    """The rows as CSV text, written by CsvRowWriter."""
    buffer = io.StringIO()
    CsvRowWriter(buffer).writerows(list(rows))
    return buffer.getvalue()
