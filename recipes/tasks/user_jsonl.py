"""Your own questions: JSONL or Parquet files with a ``question`` and an ``answer`` (the final answer) per row.

    data: {task: jsonl, source: /data/my_task}     # a folder with train.jsonl and test.jsonl (or one file)

An optional ``id`` column is kept (it must be unique); otherwise ids are ``<file stem>-<split>-<index>``. An
optional ``solution`` column (a worked solution) is kept for reference. The grader compares the model's final
answer with ``answer``.
"""

from __future__ import annotations

from pathlib import Path

from recipes.tasks.sources import DataError, checked_gold, read_raw, require_columns


def rows(data: dict, split: str):
    """Rows of ``split`` with ``id``, ``question``, ``solution`` and ``gold`` (the ``answer`` column)."""
    source = data["source"]
    raw = read_raw(source, split, data.get("config"))
    require_columns(raw, ("question", "answer"), source)
    stem = Path(source).stem or "jsonl"
    has_id, has_solution = "id" in raw.column_names, "solution" in raw.column_names

    def convert(row, index):
        gold = checked_gold(row["answer"], "answer", source, split, index)
        return {
            "id": str(row["id"]) if has_id else f"{stem}-{split}-{index:05d}",
            "gold": gold,
            "solution": row["solution"] if has_solution else gold,
        }

    out = raw.map(convert, with_indices=True, remove_columns=["answer"] + (["id"] if has_id else []))
    if has_id and len(set(out["id"])) < len(out):
        raise DataError(f"{source} ({split}): the id column repeats ids; ids must be unique.")
    return out
