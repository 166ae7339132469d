"""A JSONL data file read once before ``datasets`` reads it, so that what it would report as a traceback without
the line, or change silently (text such as "007" read as 7), is one DataError naming the file, the line and a fix.

Used by recipes/tasks/sources.py for every local .jsonl or .json source; not a command of its own.
"""

from __future__ import annotations

import json
from pathlib import Path

from recipes.tasks.sources import DataError, conversion

# Fields every task reads as text. The reader makes a column of integers int64, but one holding a float, or an
# integer beyond int64, 64-bit floats: an integer beyond 2**53 there loses digits (1180591620717411303424 would
# become 1.1805916207174113e+21).
TEXT_FIELDS = ("answer", "id")
EXACT_INTEGERS, INT64 = 2**53, 2**63 - 1


def _opens_rows_array(line: str) -> bool:
    """Whether a file's first line opens a JSON array of rows: ``[`` alone (pretty-printed), ``[{...``, or a whole
    array of objects on one line; not a line that is an array of something else (``["q", "a"]``)."""
    if not line.lstrip().startswith("["):
        return False
    try:
        value = json.loads(line)
    except json.JSONDecodeError:
        return True  # the array goes on past this line
    return bool(value) and isinstance(value[0], dict)


def _csv_hint(file: Path, line: str) -> str:
    """For a first line that reads as a CSV or TSV header (``question,answer``): the file's conversion."""
    text = line.strip()
    if text.startswith(("{", "[")) or not any(sep in text for sep in ",\t"):
        return ""
    table = file.with_suffix(".tsv" if "\t" in text else ".csv")
    return f"; it looks like {table.suffix[1:].upper()}: rename it to {table.name}, then {conversion(table)}."


def check_jsonl(file: Path) -> None:
    """A DataError naming the file and line when a JSONL file is empty, a line is not UTF-8 or not a JSON object,
    or an answer or id is a number that reading would change, or is text on some lines and not on others.

    ``datasets`` reports the first two as a traceback without the line and changes the others silently; reading
    the file once first costs little.
    """
    # Whether any row was read; the fields holding a float; field -> (line, value) of its first big integer;
    # field -> {is text: (line, value)} of its first value of each kind.
    empty, floats, large, kinds = True, set(), {}, {}
    with open(file, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8")  # datasets reads a leading BOM
            except UnicodeDecodeError as e:
                raise DataError(
                    f"{file} line {number} is not UTF-8 text ({e.reason}): save the file as UTF-8 "
                    f"(e.g. iconv -f latin1 -t utf-8 {file.name} > fixed.jsonl)."
                ) from None
            if not line.strip():
                continue
            # A row is an object: this is one JSON array of rows, not JSONL. dtype=False: pandas would read "007" as 7.
            if empty and _opens_rows_array(line):
                raise DataError(
                    f"{file} holds a JSON array ([{{...}}, ...]); data files are JSON Lines, one object per line: "
                    f"convert it, e.g. python -c \"import pandas as p; p.read_json('{file.name}', dtype=False).to_json("
                    f"'{file.stem}.jsonl', orient='records', lines=True)\""
                )
            first_row, empty = empty, False
            try:
                # Without its line end: a string cut short would report the newline as an invalid character.
                row = json.loads(line.rstrip("\r\n"))
            except json.JSONDecodeError as e:
                problem = f"{e.msg.removesuffix(' at')} at column {e.colno}"  # not "starting at at column"
                raise DataError(
                    f"{file} line {number} is not valid JSON ({problem}): {line.strip()[:80]!r}"
                    + (_csv_hint(file, line) if first_row else "")  # a header is the file's first row
                ) from None
            if not isinstance(row, dict):
                raise DataError(
                    f"{file} line {number} is not a JSON object with named fields: {line.strip()[:80]!r}"
                )
            for field in TEXT_FIELDS:
                value = row.get(field)
                if value is not None:
                    kinds.setdefault(field, {}).setdefault(isinstance(value, str), (number, value))
                if isinstance(value, float):
                    floats.add(field)
                elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > EXACT_INTEGERS:
                    large.setdefault(field, (number, value))
    if empty:
        raise DataError(f"{file} is empty: a JSONL data file holds one JSON object per line.")
    # datasets types a column of text and numbers as JSON and decodes its text: "007" -> 7, "1e3" -> 1000.0.
    for field, seen in kinds.items():
        if len(seen) == 2:
            (text_line, _), (line, value) = seen[True], seen[False]
            raise DataError(
                f"{file}: {field!r} is text on line {text_line} but {json.dumps(value)[:40]} on line {line}; read "
                'together, text such as "007" would become 7. Write every '
                f'{field!r} as text, e.g. "{field}": {json.dumps(json.dumps(value))[:60]} on line {line}.'
            )
    for field, (number, value) in large.items():
        if field in floats or abs(value) > INT64:
            raise DataError(
                f"{file} line {number}: {field!r} is the number {value}, which this file's {field!r} column "
                f'reads as a 64-bit float, changing its digits: write it as a string, "{field}": "{value}".'
            )
