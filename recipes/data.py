"""GSM8K as chat prompts with gold answers, from the Hub or from local JSONL/Parquet files.

Rows come out with the columns listed in docs/CONTRACTS.md: ``prompt`` (system + user messages), ``question``,
``solution``, ``gold`` (the number after ``####``, commas removed) and a stable ``id``.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from datasets import Dataset, load_dataset

from common.errors import UserError

logger = logging.getLogger(__name__)
SAMPLES = Path(__file__).parent / "samples"
SUFFIXES = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}


class DataError(UserError):
    """A dataset that does not have GSM8K's shape; the message names the file and row."""


def _local_files(source: Path, split: str) -> tuple[str, list[str]]:
    """(datasets builder name, files) for a local file, or a folder holding ``<split>*.jsonl|parquet``."""
    if source.is_file():
        files = [source]
    else:
        # The split is a whole word of the file name: test.jsonl, test-00000-of-00001.parquet, gsm8k_test_sample.jsonl.
        word = re.compile(rf"(^|[-_.]){re.escape(split)}([-_.]|$)")
        files = sorted(f for f in source.rglob("*") if f.suffix in SUFFIXES and word.search(f.stem))
        if not files:
            raise DataError(
                f"No {split} split in {source}: expected .jsonl or .parquet files with '{split}' as a word of their "
                f"name (e.g. {split}.jsonl, {split}-00000-of-00001.parquet)."
            )
    kinds = {SUFFIXES.get(f.suffix) for f in files}
    if None in kinds or len(kinds) > 1:
        raise DataError(
            f"{source}: expected .jsonl or .parquet files (one kind), got {[f.name for f in files]}."
        )
    return kinds.pop(), [str(f) for f in files]


def resolve_source(source: str) -> str:
    """``samples/...`` names a file bundled with the package; anything else is a path or a Hub id."""
    return str(SAMPLES / source.removeprefix("samples/")) if source.startswith("samples/") else source


def read_raw(source: str, split: str, config: str | None = None) -> Dataset:
    """Raw GSM8K rows (``question``, ``answer``) from a Hub id or a local path."""
    path = Path(resolve_source(source))
    if path.exists():
        builder, files = _local_files(path, split)
        return load_dataset(builder, data_files={split: files}, split=split)
    if path.suffix in SUFFIXES or source.startswith((".", "/")):
        raise DataError(f"data.source {source!r}: no such file or folder.")
    return load_dataset(source, config, split=split)


def gold_number(solution: str) -> str | None:
    """The gold answer of a GSM8K solution: the text after the last ``####``, without thousands separators.

    >>> gold_number("Janet sells 9 eggs.\\n#### 1,080")
    '1080'
    """
    _, sep, tail = solution.rpartition("####")
    return tail.strip().replace(",", "") or None if sep else None


def to_rows(raw: Dataset, *, split: str, system_prompt: str, source: str) -> Dataset:
    """Add ``prompt``, ``gold``, ``id`` and ``solution`` columns; a malformed row is an error naming it."""
    missing = {"question", "answer"} - set(raw.column_names)
    if missing:
        raise DataError(f"{source}: rows need question and answer fields; missing {sorted(missing)}.")

    def convert(row, index):
        gold = gold_number(row["answer"])
        if gold is None:
            raise DataError(f"{source} ({split} row {index + 1}): answer has no '#### <number>' final line.")
        return {
            "id": f"gsm8k-{split}-{index:05d}",
            "prompt": [
                {"role": "system", "content": system_prompt},
                {"role": "user", "content": row["question"]},
            ],
            "solution": row["answer"],
            "gold": gold,
        }

    return raw.map(convert, with_indices=True, remove_columns=["answer"])


def load_gsm8k(data: dict, split: str | None = None, tokenizer=None) -> Dataset:
    """GSM8K prompts for training or evaluation.

    Args:
        data: The recipe's ``data:`` section.
        split: Split to load; defaults to ``data["split"]``.
        tokenizer: Needed when ``data["max_prompt_tokens"]`` is set, to measure prompts with the chat template.

    Returns:
        A dataset with the columns of docs/CONTRACTS.md, limited to ``data["limit"]`` rows (the limit applies
        after the length filter, so a run gets the number of rows it asked for where the data allows).
    """
    split = split or data["split"]
    raw = read_raw(data["source"], split, data.get("config"))
    rows = to_rows(raw, split=split, system_prompt=data["system_prompt"], source=data["source"])
    budget = data.get("max_prompt_tokens")
    if budget:
        if tokenizer is None:
            raise ValueError("load_gsm8k needs a tokenizer to apply data.max_prompt_tokens")
        lengths = [
            len(ids)
            for ids in tokenizer.apply_chat_template(
                list(rows["prompt"]), add_generation_prompt=True, tokenize=True, return_dict=False
            )
        ]
        keep = [i for i, n in enumerate(lengths) if n <= budget]
        if len(keep) < len(rows):
            logger.warning(
                "Dropped %d of %d prompts longer than data.max_prompt_tokens=%d (longest: %d tokens).",
                len(rows) - len(keep),
                len(rows),
                budget,
                max(lengths),
            )
        rows = rows.select(keep)
    if data.get("limit"):
        rows = rows.select(range(min(data["limit"], len(rows))))
    return rows
