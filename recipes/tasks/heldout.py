"""The held-out split of tasks without one of their own: a fixed share of the training split, chosen by question.

Held-out evaluation during training must not see training questions, and must not see the final evaluation's
questions either (choosing a checkpoint on the test set biases the final comparison). A task that generates its
own held-out split (arithmetic, ``Task.native_heldout``) serves it; for every other task the ``heldout`` split is
the rows of the training split (``data.split``, read from ``data.source``, never ``data.eval_source``) whose
question text hashes into ``HELDOUT_PERCENT`` of 100 buckets (sha256 of the text with runs of whitespace made
one space), and the training split is the rest, whether or not held-out evaluation is on. So:

- no question text is in both (a repeated question hashes the same way), and the test split is never read;
- membership depends on the question alone: not on row order, ``data.limit``, the length filter, other rows,
  or which copy of the data is read (the bundled GSM8K sample's questions fall as they do in the full set);
- rows keep the source's ids (a held-out GSM8K row is ``gsm8k-train-00015``).

A local folder with its own ``heldout*.jsonl`` (or ``.parquet``) files is the exception: those files are the
held-out split and the training split is read whole, once no question is in both (``_own_heldout``).

5 percent: GSM8K's 7,473 training questions give 365 held-out ones (MATH's 7,500 about as many), enough for a
95% interval on accuracy at most about 5 points either side, at a cost of 5% of the training data.
"""

from __future__ import annotations

import hashlib
import logging

from recipes.launcher import first_process
from recipes.tasks.sources import DataError, has_split_files

logger = logging.getLogger(__name__)
HELDOUT = "heldout"
TEST = "test"  # evaluate.py's default split: the final comparison's questions
HELDOUT_PERCENT = 5


def trained_split_refusals(config: dict, origins: dict) -> list[str]:
    """Why a recipe's ``heldout.split`` cannot serve held-out evaluation: it is the split the run trains on (its
    accuracy would reward repeating the training questions, and the card calls them never trained on), or the test
    split (the best checkpoint would be picked on the final comparison's questions)."""
    heldout, data = config["heldout"], config["data"]
    where = origins.get("heldout.split", "the recipe")
    fix = f"Use heldout.split={HELDOUT} (carved from the training split, never trained on)."
    if not heldout["enabled"] or heldout["split"] not in (data["split"], TEST):
        return []
    if heldout["split"] == TEST:  # the best checkpoint chosen on the final comparison's own questions
        return [
            f"heldout.split={TEST} in {where} is the split evaluate.py compares models on: the best checkpoint would "
            + "be chosen by its test accuracy, and the final comparison would then overstate the gain (a selection "
            + f"made on the same questions). {fix}"
        ]
    return [
        f"heldout.split={heldout['split']} in {where} is the training split (data.split): held-out accuracy would be "
        + f"measured on questions the run trains on, and the best checkpoint chosen by how well it repeats them. {fix}"
    ]


def normalised(question: str) -> str:
    """A question's text with runs of whitespace made one space: what held-out membership compares."""
    return " ".join(question.split())


def in_heldout(question: str) -> bool:
    """Whether a question belongs to the carved held-out split, from a hash of its whitespace-normalised text."""
    digest = hashlib.sha256(normalised(question).encode("utf-8")).hexdigest()
    return int(digest, 16) % 100 < HELDOUT_PERCENT


def source_split(task, data: dict, split: str) -> str:
    """The split of ``task``'s source whose rows hold ``split``: ``data.split`` for a carved held-out split."""
    return data["split"] if split == HELDOUT and not task.native_heldout else split


def task_rows(task, data: dict, split: str):
    """The rows of ``split`` of ``task``: the carved held-out split, or the training split without it.

    Args:
        task: A ``recipes.tasks.Task``.
        data: The recipe's ``data:`` section with its defaults (``split`` names the training split).
        split: The split to load; splits other than ``heldout`` and ``data.split`` are the source's, as read.

    Returns:
        A ``datasets.Dataset`` with the task's columns, in the source's order.

    Raises:
        DataError: ``data.split`` is ``heldout`` for a task that carves it, or no training question falls into
            the held-out split.
    """
    if task.native_heldout or split not in (HELDOUT, data["split"]):
        return task.rows(data, split)
    if data["split"] == HELDOUT:
        raise DataError(
            f"data.split is {HELDOUT!r}, but the {task.name} task carves its held-out split from the training "
            "split: set data.split to the split to train on (e.g. train)."
        )
    if has_split_files(data["source"], HELDOUT):
        return _own_heldout(task, data, split)
    rows = task.rows(data, data["split"])
    held = [in_heldout(question) for question in rows["question"]]
    if split == HELDOUT and not any(held):
        raise DataError(
            f"data.source {data['source']} has no held-out questions: the held-out split is the "
            f"{HELDOUT_PERCENT}% of the {data['split']} split's questions that hash into it, and none of its "
            f"{len(rows)} do. Add training rows, or turn held-out evaluation off (heldout.enabled=false)."
        )
    _say_once(
        "The %s split of %s: %d of %d rows held out (each question with a %d%% chance, by a hash of its text), "
        "the other %d for training.",
        data["split"], data["source"], sum(held), len(rows), HELDOUT_PERCENT, len(rows) - sum(held),
    )  # fmt: skip
    return rows.select([i for i, is_held in enumerate(held) if is_held == (split == HELDOUT)])


_said: set[tuple] = set()


def _say_once(message: str, *args) -> None:
    """Log how a split is carved once per run: both splits are read, in every process of a launch."""
    if args not in _said and first_process():
        _said.add(args)
        logger.info(message, *args)


def _own_heldout(task, data: dict, split: str):
    """A local folder's own ``heldout*`` files are the held-out split, and the training split is read whole; a
    question in both is refused (it would be trained on and then judged as unseen)."""
    held, train = task.rows(data, HELDOUT), task.rows(data, data["split"])
    shared = {normalised(q) for q in held["question"]} & {normalised(q) for q in train["question"]}
    if shared:
        raise DataError(
            f"data.source {data['source']}: {len(shared)} of the {len(held)} questions of its {HELDOUT} files are "
            f"also in its {data['split']} split (e.g. {min(shared)[:80]!r}); a held-out question must never be "
            f"trained on. Remove them from one of the files, or remove the {HELDOUT} files to carve the held-out "
            f"split from {data['split']} by hash."
        )
    _say_once(
        "%s: the held-out split is its own %s files (%d questions); training on all %d rows of its %s split.",
        data["source"], HELDOUT, len(held), len(train), data["split"],
    )  # fmt: skip
    return held if split == HELDOUT else train
