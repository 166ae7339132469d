"""GSM8K: grade-school word problems whose worked solutions end in ``#### <number>``.

From the Hub (``openai/gsm8k``, config ``main``) or local JSONL/Parquet files with ``question`` and ``answer``
fields in the same shape. Row ids are ``gsm8k-<split>-<index>``: stable as long as the source is.
"""

from __future__ import annotations

from recipes.tasks.sources import (
    DataError,
    checked_gold,
    checked_question,
    read_raw,
    require_columns,
    row_place,
)


def gold_number(solution: str) -> str | None:
    """The gold answer of a GSM8K solution: the text after the last ``####``, without thousands separators.

    >>> gold_number("Janet sells 9 eggs.\\n#### 1,080")
    '1080'
    """
    _, sep, tail = solution.rpartition("####")
    return tail.strip().replace(",", "") or None if sep else None


def rows(data: dict, split: str):
    """GSM8K rows of ``split`` with ``id``, ``question``, ``solution`` and ``gold``."""
    raw = read_raw(data["source"], split, data.get("config"))
    source = data["source"]
    require_columns(raw, ("question", "answer"), source)

    def convert(row, index):
        solution = row["answer"]
        if solution is not None and str(solution).strip() and gold_number(str(solution)) is None:
            raise DataError(
                f"{row_place(source, split, index)}: the answer has no '#### <number>' final line, as GSM8K "
                "solutions end; for files whose answer is the final answer alone, use data.task: jsonl."
            )
        gold = gold_number(checked_gold(solution, "answer", source, split, index))
        question = checked_question(row["question"], "question", source, split, index)
        return {
            "id": f"gsm8k-{split}-{index:05d}",
            "question": question,
            "solution": str(solution),
            "gold": gold,
        }

    return raw.map(convert, with_indices=True, remove_columns=["answer"])
