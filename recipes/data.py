"""A task's rows as chat prompts with gold answers: the task from ``data.task``, the prompt from the recipe.

Rows come out with the columns listed in docs/CONTRACTS.md: ``prompt`` (system + user messages), ``question``,
``solution``, ``gold`` and a stable ``id``, plus any extra columns the task keeps. The ``heldout`` split of a task
without its own is carved from the training split, which leaves it out (recipes/tasks/heldout.py).
"""

from __future__ import annotations

import logging
from pathlib import Path

from datasets import Dataset

from recipes.launcher import first_process
from recipes.tasks import get_task
from recipes.tasks.gsm8k import gold_number
from recipes.tasks.heldout import HELDOUT, TEST, task_rows
from recipes.tasks.sources import (
    SUFFIXES,
    DataError,
    hub_layout,
    missing_path,
    read_raw,
    resolve_source,
    split_word,
)

__all__ = ["DataError", "gold_number", "load_split", "read_raw", "resolve_source"]
logger = logging.getLogger(__name__)


def load_split(data: dict, split: str | None = None, tokenizer=None) -> Dataset:
    """The recipe's task as chat prompts, for training or evaluation.

    Args:
        data: The recipe's ``data:`` section (``task``, ``source``, ``system_prompt``, filters).
        split: Split to load; defaults to ``data["split"]``, the training split (without the held-out rows).
        tokenizer: Needed when ``data["max_prompt_tokens"]`` is set, to measure prompts with the chat template.

    Returns:
        A dataset with the columns of docs/CONTRACTS.md. The training split is limited to ``data["limit"]`` rows
        (the limit applies after the held-out carve and the length filter, so a run gets the number of rows it
        asked for where the data allows); other splits are not.
    """
    from recipes.recipe import with_defaults

    data = with_defaults({"data": data})["data"]  # hand-made sections (tests, notebooks) get the defaults too
    split = split or data["split"]
    if split == data["split"]:
        _say_unread_files(data)
        # Only evaluate.py reads it: without this, a typo there is found after the training, not before.
        if data.get("eval_source") and (problem := missing_path(data["eval_source"], "data.eval_source")):
            raise DataError(
                f"{problem} (evaluate.py reads its questions there; null: data.source's test split)"
            )
    rows = task_rows(get_task(data["task"]), data, split)
    if len(rows) == 0:
        raise DataError(f"data.source {data['source']} has no rows in its {split} split.")
    system = data["system_prompt"]
    rows = rows.map(
        lambda row: {
            "prompt": [{"role": "system", "content": system}, {"role": "user", "content": row["question"]}]
        }
    )
    budget = data.get("max_prompt_tokens")
    if budget:
        if tokenizer is None:
            raise DataError(
                f"data.max_prompt_tokens={budget} needs the tokenizer to measure prompts: pass "
                "load_split(..., tokenizer=recipes.model.load_tokenizer(recipe.config['model'])), or set "
                "data.max_prompt_tokens to null."
            )
        lengths = prompt_lengths(tokenizer, rows["prompt"])
        keep = [i for i, n in enumerate(lengths) if n <= budget]
        if not keep:  # else the trainer stops at step 0 and saves an untrained adapter
            raise DataError(
                f"Every prompt of data.source {data['source']} ({split} split, {len(rows)} rows) is longer than "
                f"data.max_prompt_tokens={budget}; the shortest has {min(lengths)} tokens. Raise "
                f"data.max_prompt_tokens to at least {min(lengths)}, or shorten data.system_prompt."
            )
        if len(keep) < len(rows):
            logger.warning(
                "Dropped %d of %d prompts longer than data.max_prompt_tokens=%d (longest: %d tokens).",
                len(rows) - len(keep),
                len(rows),
                budget,
                max(lengths),
            )
        rows = rows.select(keep)
    if data.get("limit") and split == data["split"]:
        rows = rows.select(range(min(data["limit"], len(rows))))
    return rows


def prompt_lengths(tokenizer, prompts) -> list[int]:
    """Each prompt's length in tokens as the model reads it: through the chat template, with the generation prompt."""
    ids = tokenizer.apply_chat_template(
        list(prompts), add_generation_prompt=True, tokenize=True, return_dict=False
    )
    return list(map(len, ids))


_warned: set[str] = set()


def _say_unread_files(data: dict) -> None:
    """Warn, once per run, of data files in a local source folder that no split names: ``train2.jsonl`` beside
    ``train.jsonl`` is otherwise left out of training without a word."""
    folder = Path(resolve_source(data["source"]))
    if data["source"] in _warned or not folder.is_dir() or hub_layout(folder) or not first_process():
        return
    _warned.add(data["source"])
    splits = (data["split"], HELDOUT, TEST)
    unread = [
        str(f.relative_to(folder))
        for f in sorted(folder.rglob("*"))
        if f.suffix in SUFFIXES and not any(split_word(split).search(f.stem) for split in splits)
    ]
    if unread:
        logger.warning(
            "data.source %s: %s left out: its name holds none of the splits %s as a word, so training does "
            "not read it. To train on it, name it after its split "
            "(e.g. %s.jsonl, or shards %s-00000-of-00002.jsonl); "
            "evaluate.py --split NAME reads a file named after another split.",
            folder, ", ".join(unread[:5]) + (" ..." if len(unread) > 5 else ""), "/".join(splits),
            data["split"], data["split"],
        )  # fmt: skip
