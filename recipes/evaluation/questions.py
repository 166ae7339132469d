"""Which questions an evaluation reads: the split's data source, and a seeded draw of its rows.

Used by ``recipes/evaluate.py``, held-out evaluation during training (``recipes/heldout.py``) and
``benchmarks/evaluate_throughput.py``; not a command of its own.
"""

from __future__ import annotations

import hashlib
import logging
import re
from pathlib import Path

from common.wording import counted
from recipes.evaluation.generation import EvaluationError

logger = logging.getLogger("recipes.evaluate")
SPLIT_WORDS = ("train", "test", "validation", "valid", "val", "dev")


def eval_data(data: dict, split: str) -> dict:
    """The recipe's ``data:`` section for evaluating ``split``: the split's file, no training-only filters.

    ``data.eval_source``, when set, replaces ``data.source`` (MATH trains on one dataset and is evaluated on
    MATH-500); ``data.config`` names a config of the training source, so it does not follow. The ``heldout``
    split belongs to the training data: it is read from ``data.source``, and where the task carves it from the
    training split (recipes/tasks/heldout.py), from the training split's file. A single file that names no split
    is the training data: any other split of it is refused, never read from it.
    """
    from recipes.data import resolve_source
    from recipes.recipe import with_defaults
    from recipes.tasks import get_task
    from recipes.tasks.heldout import HELDOUT, source_split
    from recipes.tasks.sources import missing_path

    data = {**data, "limit": None, "max_prompt_tokens": None}
    key, read = "data.source", split
    if split == HELDOUT:
        filled = with_defaults({"data": data})["data"]
        read = source_split(get_task(filled["task"]), filled, split)
    elif data.get("eval_source"):
        key = "data.eval_source"
        # Checked here, by its own key: read as data.source below, a missing file would be named so.
        if problem := missing_path(data["eval_source"], key):
            raise EvaluationError(problem)
        data = {**data, "source": data["eval_source"], "config": None}
    path = Path(resolve_source(data["source"]))
    if not path.is_file():
        return data  # a folder or a Hub id: recipes.data picks the split
    named = [w for w in SPLIT_WORDS if re.search(rf"(?<![A-Za-z]){w}(?![A-Za-z])", path.stem)]
    trained_on = data.get("split", "train")
    if not named and key == "data.source" and read != trained_on:
        raise EvaluationError(
            f"data.source {data['source']} is a single file, the one training reads: --split {split} would score "
            f"the questions the model trained on. Pass data.eval_source=<a {split} .jsonl/.parquet file>, or "
            f"--split heldout (questions carved from it that training never sees), or --split {trained_on} to "
            "score the training questions on purpose."
        )
    if not named or read in named:
        return data
    sibling = Path(data["source"]).with_name(re.sub(rf"(?<![A-Za-z]){named[0]}(?![A-Za-z])", read, path.name))
    if not Path(resolve_source(str(sibling))).is_file():
        raise EvaluationError(
            f"{key} {data['source']} is the {named[0]} split's file and has no {read} sibling ({sibling}). "
            f"Pass {key}=<a {read} .jsonl/.parquet file, or a folder holding {read}*.jsonl>, "
            f"or --split {named[0]}."
        )
    logger.info("Evaluating split %s on %s (%s names the %s file).", split, sibling, key, named[0])
    return {**data, "source": str(sibling)}


def select_questions(ids: list[str], n: int | None, seed: int) -> list[int]:
    """Row indices of ``n`` questions drawn by ``seed``: the first ``n`` of a seeded order of all ids."""
    if n is not None and n > len(ids):
        raise EvaluationError(
            f"--questions {n} but the split has {counted(len(ids), 'question')}; use {len(ids)} or fewer."
        )
    order = sorted(range(len(ids)), key=lambda i: hashlib.sha256(f"{seed}:{ids[i]}".encode()).digest())
    return order[:n]
