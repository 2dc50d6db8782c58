"""One message style for every import command.

A refused import always reads `<file>: <where>: <what is wrong>. Nothing was imported.`,
where `<where>` is `line N: field "X"` when a line is at fault (the services' own
messages, see core.exceptions), and a successful one says what it created. Files
may start with a UTF-8 byte-order mark (spreadsheets and Windows editors write one).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml
from django.core.management.base import CommandError

from core.exceptions import ApplicationError
from core.text_validation import InvalidTextError

# "utf-8-sig" reads UTF-8 and drops a leading byte-order mark if there is one.
TEXT_ENCODING = "utf-8-sig"


def refusal(file: Path | str, problem: str) -> CommandError:
    problem = problem.rstrip(".")
    return CommandError(f"{file}: {problem}. Nothing was imported.")


@contextmanager
def importing(file: Path | str) -> Iterator[None]:
    """Turn every expected failure of reading and importing `file` into one refusal."""
    try:
        yield
    except FileNotFoundError as exc:
        raise refusal(exc.filename or file, "no such file") from None
    except IsADirectoryError as exc:
        raise refusal(exc.filename or file, "a folder, not a file") from None
    except UnicodeDecodeError as exc:
        raise refusal(file, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise refusal(file, f"line {exc.lineno}: not valid JSON ({exc.msg})") from None
    except yaml.YAMLError as exc:
        raise refusal(file, f"not valid YAML ({exc})") from None
    except (ApplicationError, InvalidTextError) as exc:
        raise refusal(file, exc.message) from None


def read_text(file: Path) -> str:
    return file.read_text(encoding=TEXT_ENCODING)


def open_text(file: Path):
    return file.open(encoding=TEXT_ENCODING)
