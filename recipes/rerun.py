"""A launch on an output folder that already holds a run: a finished run stays finished, a changed recipe is refused.

    accelerate launch recipes/run.py arith_tiny    # again, once finished: "already finished at step 400"

Without this, ``resume: latest`` on a finished run trains past max_steps and writes over the final adapter, and a
run continued with another recipe mixes two experiments in one set of checkpoints.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import yaml

from callbacks.remote import is_training_state
from common.secrets import SECRET_KEY
from recipes.recipe import Recipe, RecipeError
from recipes.trainer_section import fold_renamed

logger = logging.getLogger(__name__)
# What a continued run may change: how long it trains (raise max_steps to extend a finished run; whether alarms or
# a held-out plateau end it), how it logs, and where and how its checkpoints are kept (a lost machine's run
# continues in another folder or from a copy on a mounted drive). Any other change alters what the run computes.
MAY_CHANGE = (
    "trainer.max_steps",
    "heldout.stop_on_alarm",
    "heldout.patience",
    "trainer.logging_steps",
    "trainer.report_to",
    "trainer.output_dir",
    "checkpoint.uri",
    "checkpoint.endpoint_url",
    "checkpoint.every_steps",
    "checkpoint.resume",
    "checkpoint.overwrite",
    "checkpoint.keep_last",
    "checkpoint.run_id",
    "callbacks",
)
# A checkpoint's own bookkeeping; with its training state (optimizer, RNG), not part of the final adapter folder.
BOOKKEEPING = ("manifest.json", "recipe.yaml")


def flatten(config: dict, prefix: str = "") -> dict[str, Any]:
    """``{"trainer": {"beta": 0}}`` -> ``{"trainer.beta": 0}``; lists stay whole values."""
    flat = {}
    for key, value in config.items():
        if isinstance(value, dict):
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def changed_keys(before: dict, after: dict) -> list[str]:
    """``key: old -> new`` for each key whose value differs, leaving out those in MAY_CHANGE and credential keys
    (refused in a recipe now, and never printed).

    A recipe.yaml written before renamed trainer keys were left out has their old names folded in first, as
    GRPOConfig would, so a run made then continues after an upgrade.
    """
    before = {**before, "trainer": fold_renamed(before.get("trainer") or {})}
    old, new = flatten(before), flatten(after)
    return [
        f"{key}: {old.get(key)!r} -> {new.get(key)!r}"
        for key in dict.fromkeys([*old, *new])
        if old.get(key) != new.get(key) and key not in MAY_CHANGE and not SECRET_KEY.search(key)
    ]


def saved_recipe_file(checkpoint: Path, output_dir: Path) -> Path | None:
    """The recipe.yaml a run was made with: the checkpoint's own copy (synced runs), else the output folder's."""
    return next((p for p in (checkpoint / "recipe.yaml", output_dir / "recipe.yaml") if p.is_file()), None)


def _saved_recipe(checkpoint: Path, output_dir: Path) -> dict | None:
    path = saved_recipe_file(checkpoint, output_dir)
    return yaml.safe_load(path.read_text(encoding="utf-8")) if path else None


def finished_step(recipe: Recipe, resume_from: str | None) -> int | None:
    """The step a resumed run already finished at (None: it has training left, or nothing is resumed).

    Raises:
        RecipeError: ``resume: latest`` found a run made with a different recipe; names the changed keys.
    """
    if not resume_from or recipe.config["checkpoint"]["resume"] != "latest":
        return None  # an explicit checkpoint is the user's deliberate choice, whatever recipe made it
    checkpoint, output_dir = Path(resume_from), Path(recipe.config["trainer"]["output_dir"])
    before = _saved_recipe(checkpoint, output_dir)
    changed = changed_keys(before, yaml.safe_load(recipe.to_yaml())) if before else []
    if changed:
        uri = recipe.config["checkpoint"]["uri"]
        fresh = f"trainer.output_dir={output_dir}-2" + (f" checkpoint.uri={uri.rstrip('/')}-2" if uri else "")
        where = uri or output_dir  # with a store, the run resumed is the store's, whatever is on this disk
        raise RecipeError(
            f"{where} holds a run made with a different recipe ({'; '.join(changed)}), and "
            f"checkpoint.resume=latest would continue it. Rerun with the recipe it was made with, or start a "
            f"new run elsewhere: {fresh}"
        )
    step = json.loads((checkpoint / "trainer_state.json").read_text())["global_step"]
    return step if step >= recipe.config["trainer"]["max_steps"] or stopped_early(checkpoint) else None


def stopped_early(checkpoint: Path) -> str | None:
    """Why the run ended at this checkpoint before trainer.max_steps (an alarm or a plateau), if it did."""
    from callbacks.heldout_history import HISTORY_NAME, read_history

    history = read_history(checkpoint / HISTORY_NAME)
    return history["stopped"]["reason"] if history and history["stopped"] else None


def keep_final_adapter(checkpoint: Path, output_dir: Path) -> None:
    """Put the last checkpoint's adapter in ``output_dir`` if a crash came between that save and the final one."""
    if (output_dir / "adapter_model.safetensors").is_file():
        return
    for source in sorted(checkpoint.iterdir()):
        if source.is_file() and source.name not in BOOKKEEPING and not is_training_state(source.name):
            tmp = output_dir / f".{source.name}.tmp"
            shutil.copy2(source, tmp)
            os.replace(tmp, output_dir / source.name)
    logger.info("Final adapter restored in %s from %s", output_dir, checkpoint)
