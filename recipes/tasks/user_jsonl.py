"""Your own questions: JSONL or Parquet files with a ``question`` and an ``answer`` (the final answer) per row.

    data: {task: jsonl, source: /data/my_task}     # a folder with train.jsonl and test.jsonl (or one file)

An optional ``id`` column is kept (it must be unique); otherwise ids are ``<file stem>-<split>-<index>``. An
optional ``solution`` column (a worked solution) is kept for reference. The grader compares the model's final
answer with ``answer``.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from recipes.tasks.heldout import normalised
from recipes.tasks.sources import (
    DataError,
    checked_gold,
    checked_question,
    no_value,
    read_raw,
    require_columns,
    row_place,
)

logger = logging.getLogger(__name__)
# "12,5": the grader reads a list of two answers, 12 and 5 (MATH writes several answers so), where data written with
# a decimal comma means 12.5. Three digits after the comma are a thousands separator, which it reads as one number.
_DECIMAL_COMMA = re.compile(r"-?\d+,(?:\d{1,2}|\d{4,})")
_warned: set[tuple[str, str]] = set()


def warn_decimal_commas(golds: list[str], source: str, split: str) -> None:
    """Warn, naming the first file and line, when answers read as lists may be decimals written with a comma."""
    found = [index for index, gold in enumerate(golds) if _DECIMAL_COMMA.fullmatch(gold)]
    if not found or (source, split) in _warned:  # a run reads its training split twice (training, held-out)
        return
    _warned.add((source, split))
    first = golds[found[0]]
    logger.warning(
        "%s: answer %r is read as a list of two answers (%s and %s), as MATH writes several answers; if it is the "
        "decimal %s, write it with a point. %d of %d answers of this split look like this.",
        row_place(source, split, found[0]), first, *first.split(","), first.replace(",", "."), len(found), len(golds),
    )  # fmt: skip


def rows(data: dict, split: str):
    """Rows of ``split`` with ``id``, ``question``, ``solution`` and ``gold`` (the ``answer`` column)."""
    from datasets import Value

    source = data["source"]
    raw = read_raw(source, split, data.get("config"))
    require_columns(raw, ("question", "answer"), source)
    stem = Path(source).stem or "jsonl"
    has_id, has_solution = "id" in raw.column_names, "solution" in raw.column_names
    if has_id:  # ids are text: integer ids would stay integers, which evaluation records refuse
        if None in raw["id"]:
            index = raw["id"].index(None)
            raise DataError(
                f"{row_place(source, split, index)}: {no_value(source, split, index, 'id')}, though other rows have "
                "an id; give every row an id, or none (ids are then made from the file and row)."
            )
        raw = raw.cast_column("id", Value("string"))

    def convert(row, index):
        gold = checked_gold(row["answer"], "answer", source, split, index)
        return {
            "id": row["id"] if has_id else f"{stem}-{split}-{index:05d}",
            "question": checked_question(row["question"], "question", source, split, index),
            "gold": gold,
            "solution": row["solution"] if has_solution else gold,
        }

    out = raw.map(convert, with_indices=True, remove_columns=["answer"])
    first_with_id: dict[str, int] = {}
    for index, row_id in enumerate(out["id"] if has_id else ()):
        if (seen := first_with_id.setdefault(row_id, index)) != index:
            raise DataError(
                f"{row_place(source, split, index)}: id {row_id!r} again, first at {row_place(source, split, seen)}; "
                "ids must be unique (renumber the rows, or drop the id column: ids are then made from file and row)."
            )
    warn_decimal_commas(out["gold"], source, split)
    first: dict[str, int] = {}
    for index, question in enumerate(out["question"]):
        # A question twice counts twice in every accuracy, and twice with two golds grades one of them wrong.
        if (seen := first.setdefault(normalised(question), index)) != index:
            raise DataError(
                f"{row_place(source, split, index)}: the same question as {row_place(source, split, seen)}; "
                "each question once, please (remove the copy, or the file that repeats the split)."
            )
    return out
