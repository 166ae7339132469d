"""GSM8K: grade-school word problems whose worked solutions end in ``#### <number>``.

From the Hub (``openai/gsm8k``, config ``main``) or local JSONL/Parquet files with ``question`` and ``answer``
fields in the same shape. Row ids are ``gsm8k-<split>-<index>``: stable as long as the source is.
"""

from __future__ import annotations

from recipes.tasks.sources import DataError, read_raw, require_columns


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
        if not isinstance(row["answer"], str) or not row["answer"].strip():
            raise DataError(f"{source} ({split} row {index + 1}): empty answer.")
        gold = gold_number(row["answer"])
        if gold is None:
            raise DataError(f"{source} ({split} row {index + 1}): answer has no '#### <number>' final line.")
        return {"id": f"gsm8k-{split}-{index:05d}", "solution": row["answer"], "gold": gold}

    return raw.map(convert, with_indices=True, remove_columns=["answer"])
