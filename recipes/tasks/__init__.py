"""Tasks: where questions come from, what a row's gold answer and id are. A recipe names one as ``data.task``.

    gsm8k        grade-school math word problems (Hub openai/gsm8k, or local JSONL/Parquet in its shape)
    arithmetic   short generated arithmetic word problems: the offline default a tiny model can learn
    jsonl        your own JSONL/Parquet files with ``question`` and ``answer`` columns
    math         MATH competition problems with LaTeX answers (Hub EleutherAI/hendrycks_math, MATH-500)

Every task turns a split (``train``, ``test``, or the source's own names) into rows with the columns
``id`` (stable, unique), ``question``, ``gold`` (the final answer the grader compares with) and ``solution``
(a worked solution, or the answer); a task may keep more (MATH keeps ``subject`` and ``level``, which evaluation
records carry). ``recipes.data`` adds the chat prompt and applies the length filter; run,
evaluate and held-out evaluation take the task from the recipe and never name one. The ``heldout`` split is the
task's own where it has one (``native_heldout``); otherwise ``recipes.tasks.heldout`` carves it from the training
split, which then leaves those rows out.

A new task is one module here (a ``rows(data, split)`` function) plus one entry in ``TASKS`` and one recipe.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from common.suggestions import did_you_mean
from recipes.tasks.sources import DataError


@dataclass(frozen=True)
class Task:
    """One kind of question.

    Attributes:
        name: The name recipes use (``data.task``).
        module: The module of ``recipes.tasks`` that holds its ``rows`` (see :attr:`rows`).
        description: One line for ``--list``-style listings.
        native_heldout: True when ``rows(data, "heldout")`` serves the task's own held-out split; False when
            ``recipes.tasks.heldout`` carves it from the training split.
    """

    name: str
    module: str
    description: str
    native_heldout: bool = False

    @property
    def rows(self) -> Callable:
        """``rows(data, split)`` -> a ``datasets.Dataset`` with ``id``, ``question``, ``gold``, ``solution``;
        ``data`` is the recipe's ``data:`` section. Raises DataError naming the file and row.

        Imported on first use, not with this package: ``python -m recipes.tasks.arithmetic`` would otherwise
        find its module already imported by the package and run it twice (runpy's RuntimeWarning).
        """
        return importlib.import_module(f"recipes.tasks.{self.module}").rows


TASKS = {
    "gsm8k": Task("gsm8k", "gsm8k", "GSM8K word problems; gold = the number after '####'"),
    "arithmetic": Task(
        "arithmetic", "arithmetic", "generated add/subtract word problems (offline)", native_heldout=True
    ),
    "jsonl": Task("jsonl", "user_jsonl", "your JSONL/Parquet files with question and answer columns"),
    "math": Task("math", "math", "MATH problems; gold = the answer field or the last \\boxed{} (LaTeX)"),
}


def get_task(name: str) -> Task:
    """The registered task ``name``; a DataError listing the tasks (and the closest one) otherwise."""
    if name not in TASKS:
        raise DataError(
            f"Unknown data.task {name!r}.{did_you_mean(name, TASKS)} Available: {', '.join(TASKS)}."
        )
    return TASKS[name]
