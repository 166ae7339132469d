"""Whether an adapter is evaluated on the data it was trained for: its run's recipe.yaml against this recipe.

Used by ``recipes/evaluate.py``; not a command of its own.
"""

from __future__ import annotations

import logging
from pathlib import Path

import yaml

logger = logging.getLogger("recipes.evaluate")
# What decides the questions and how they are asked; another split or eval_source is how evaluation differs.
QUESTION_KEYS = ("task", "source", "config", "system_prompt")


def trained_data(adapter: Path) -> tuple[Path, dict] | None:
    """The ``data:`` section the adapter's run trained on, and the file it was read from: the checkpoint's own
    recipe.yaml, or its run's beside the final adapter or above a checkpoint-N; None where there is none."""
    from callbacks.recipe_check import saved_recipe_file

    path = saved_recipe_file(adapter)
    return (
        (path, (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("data") or {}) if path else None
    )


def warn_if_other_data(adapter: Path, data: dict) -> list[str]:
    """Warn when this evaluation asks other questions, or asks them otherwise, than the adapter's run trained on
    (a forgotten ``data.*`` override); returns the keys that differ. A deliberate transfer test may ignore it."""
    found = trained_data(adapter)
    if found is None:
        return []
    path, trained = found
    differ = [key for key in QUESTION_KEYS if key in trained and trained[key] != data.get(key)]
    if differ:
        logger.warning(
            "The adapter was trained with %s (%s), but this evaluation has %s: pass the run's data.* overrides to "
            "measure what it learned (ignore this for a deliberate test on other data).",
            ", ".join(f"data.{k}={trained[k]!r}" for k in differ), path,
            ", ".join(f"data.{k}={data.get(k)!r}" for k in differ),
        )  # fmt: skip
    return differ
