"""Whether the evaluated questions are also training questions: a test split copied partly from the training file
scores recall, not what training taught, and nothing else in a run would say so.

Used by ``recipes/evaluate.py``; not a command of its own. Warns rather than refuses: a published benchmark may
overlap its training split and still be worth scoring, as long as the reader knows; the warning says how much.
"""

from __future__ import annotations

import logging
from pathlib import Path

from common.errors import UserError

logger = logging.getLogger("recipes.evaluate")


def _cheap_to_read(training: str, evaluated: str) -> bool:
    """A local training source, or the evaluated one: datasets downloads and prepares every split of a Hub
    dataset's config when it loads one, so its training split is already on disk. Another Hub dataset (MATH trains
    on EleutherAI/hendrycks_math and is evaluated on MATH-500) would be a download for a warning: not checked."""
    from recipes.tasks.sources import resolve_source

    return Path(resolve_source(training)).exists() or training == evaluated


def warn_if_trained_on(data: dict, evaluated: dict, split: str, rows: list[dict]) -> int:
    """Log a WARNING when evaluated questions are in the training split, word for word (whitespace aside).

    Args:
        data: The recipe's ``data:`` section (``source`` and ``split``: what training reads).
        evaluated: The section the evaluated rows were read with (``recipes.evaluation.questions.eval_data``).
        split: The evaluated split; ``heldout`` and the training split itself are never checked.
        rows: The evaluated rows (their ``question`` and ``id``).

    Returns:
        How many of ``rows`` are training questions (0 when not checked).
    """
    from recipes.recipe import with_defaults
    from recipes.tasks import get_task
    from recipes.tasks.heldout import HELDOUT, normalised, task_rows

    data = with_defaults({"data": {**data, "limit": None, "max_prompt_tokens": None}})["data"]
    if split in (HELDOUT, "train", data["split"]) or not _cheap_to_read(data["source"], evaluated["source"]):
        return 0
    try:  # the training split as training reads it: the carved held-out questions are not trained on
        trained = {normalised(q) for q in task_rows(get_task(data["task"]), data, data["split"])["question"]}
    except UserError as err:
        logger.info("Not checked whether the evaluated questions are training questions: %s", err)
        return 0
    shared = [row for row in rows if normalised(row["question"]) in trained]
    if shared:
        logger.warning(
            "%d of the %d evaluated questions (--split %s of %s) are also in the training split (data.split=%s of "
            "data.source %s), word for word: e.g. %s %r. The model may have trained on them, so its accuracy on "
            "them measures recall, not what training taught. Remove them from the %s data, evaluate with --split "
            "%s (carved from the training data, never trained on), or set data.eval_source to questions "
            "training never saw.",
            len(shared), len(rows), split, evaluated["source"], data["split"], data["source"],
            shared[0]["id"], normalised(shared[0]["question"])[:80], split, HELDOUT,
        )  # fmt: skip
    return len(shared)
