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
    """The ``data:`` section the adapter's run trained on, and the file it was read from: OUTPUT_DIR/recipe.yaml
    beside the final adapter, or above a checkpoint-N; None where no run wrote one (a downloaded checkpoint)."""
    for folder in (adapter, adapter.parent):
        path = folder / "recipe.yaml"
        if path.is_file():
            return path, (yaml.safe_load(path.read_text()) or {}).get("data") or {}
    return None


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
