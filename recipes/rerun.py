"""A launch on an output folder that already holds a run: a finished run stays finished, a changed recipe is refused.

    accelerate launch -q recipes/run.py arith_tiny    # again, once finished: "already finished at step 400"

Without this, ``resume: latest`` on a finished run trains past max_steps and writes over the final adapter, and a
run continued with another recipe mixes two experiments in one set of checkpoints.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import yaml

from callbacks.remote import is_training_state
from callbacks.saved_adapter import ADAPTER_FILE
from common.secrets import SECRET_KEY
from recipes.launcher import first_process
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
    "trainer.logging_first_step",
    "trainer.log_level",
    "trainer.log_completions",
    "trainer.num_completions_to_print",
    "trainer.disable_tqdm",
    "trainer.report_to",
    "trainer.project",  # the tracker's project, run name and Space: where the logs go
    "trainer.run_name",
    "trainer.trackio_space_id",
    "trainer.ddp_timeout",  # how long processes wait for each other (the README's fix for a 30-minute hang)
    "trainer.save_total_limit",  # local checkpoints kept, as checkpoint.keep_last is for the store's
    "trainer.output_dir",
    "checkpoint.uri",
    "checkpoint.endpoint_url",
    "checkpoint.every_steps",
    "trainer.save_steps",  # the runner's copy of checkpoint.every_steps (recipes/recipe.py), not a key of its own
    "checkpoint.resume",
    "checkpoint.overwrite",
    "checkpoint.keep_last",
    "checkpoint.run_id",
    "callbacks",
)
# What even a branch keeps: the checkpoint's adapter and Adam moments have this model's and these LoRA settings' shapes
# (another rank died loading them, in a traceback, after the branch was allowed).
BRANCH_KEEPS = ("model.name_or_path", "lora.r", "lora.target_modules")
# A checkpoint's own bookkeeping; with its training state (optimizer, RNG), not part of the final adapter folder.
BOOKKEEPING = ("manifest.json", "recipe.yaml")
# Written last by a final save (recipes/run.py): its step says the whole save is there.
STATE_NAME = "trainer_state.json"


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


def changed_recipe_refusal(recipe: Recipe, saved_yaml: str) -> str | None:
    """Why this launch may not continue a run made with ``saved_yaml`` (the recipe.yaml of the checkpoint it would
    resume): the keys this recipe changes, and what to do instead; None when it may. ``prepare_checkpointing``
    asks it (``vet_recipe``) about the checkpoint ``checkpoint.resume`` picks, ``latest`` or an explicit one,
    before downloading it. Continuing a run (``latest``), only the keys in MAY_CHANGE may differ: others would
    mix two experiments under one recipe.yaml. An explicit checkpoint is the user's choice to branch a run from it
    with other settings (a lower learning rate from step 800): allowed, with a warning naming the changed keys
    (the output folder's own recipe check still refuses a folder that holds a run of another recipe).
    """
    changed = changed_keys(yaml.safe_load(saved_yaml) or {}, yaml.safe_load(recipe.to_yaml()))
    if not changed:
        return None
    checkpoint = recipe.config["checkpoint"]
    uri, resume, output_dir = checkpoint["uri"], checkpoint["resume"], recipe.config["trainer"]["output_dir"]
    if resume != "latest":
        if kept := [c for c in changed if c.split(":")[0] in BRANCH_KEEPS]:
            return (
                f"checkpoint.resume={resume} cannot branch with another {'; '.join(kept)}: its adapter and "
                "optimizer state have the shapes its own recipe made. Branch with the same "
                f"{', '.join(BRANCH_KEEPS)}, or start a new run (checkpoint.resume=never)."
            )
        if (resume, saved_yaml) not in _branched:  # asked again for each candidate and on every process
            _branched.add((resume, saved_yaml))
            logger.warning(
                "checkpoint.resume=%s was made with a different recipe (%s): this run branches from it with this "
                "launch's settings. Its steps up to there were trained with the recipe.yaml saved in the checkpoint; "
                "%s/recipe.yaml records the new one.",
                resume, "; ".join(changed), output_dir,
            )  # fmt: skip
        return None
    fresh = f"trainer.output_dir={output_dir}-2" + (f" checkpoint.uri={uri.rstrip('/')}-2" if uri else "")
    where = uri or output_dir  # with a store, the run resumed is the store's, whatever is on this disk
    return (
        f"{where} holds a run made with a different recipe ({'; '.join(changed)}), and "
        f"checkpoint.resume=latest would continue it. Rerun with the recipe it was made with, or start a "
        f"new run elsewhere: {fresh}"
    )


_branched: set[tuple[str, str]] = set()


def finished_step(recipe: Recipe, resume_from: str | None) -> int | None:
    """The step a resumed run already finished at (None: it has training left, or nothing is resumed)."""
    if not resume_from or recipe.config["checkpoint"]["resume"] != "latest":
        return None  # an explicit checkpoint is the user's choice to train on past a stop
    checkpoint = Path(resume_from)
    state = json.loads((checkpoint / "trainer_state.json").read_text())
    # max_steps -1 trains trainer.num_train_epochs (every step is past -1): the trainer recorded how many steps
    # that takes, which a continued run keeps (it cannot change the epochs nor the data).
    last = (
        recipe.config["trainer"]["max_steps"]
        if recipe.config["trainer"]["max_steps"] > 0
        else state["max_steps"]
    )
    return state["global_step"] if state["global_step"] >= last or stopped_early(checkpoint) else None


def restart_over_final_adapter(recipe: Recipe, resume_from: str | None) -> str | None:
    """Why a launch may not start at step 0 here: the output folder holds a final adapter (and no
    ``checkpoint.overwrite``); None when it may.

    A run none of whose checkpoints can be resumed (moved aside as unusable: a two-machine run without a store
    keeps half of each checkpoint on each machine) would otherwise train again and write over that adapter. Only
    the main process's folder holds the final adapter: the caller shares its answer with every process.
    """
    output_dir = Path(recipe.config["trainer"]["output_dir"])
    if resume_from or recipe.config["checkpoint"]["overwrite"]:
        return None
    if not (output_dir / "adapter_model.safetensors").is_file():
        return None
    return (
        f"{output_dir} holds a final adapter, and no checkpoint of its run can be resumed (see the lines above): "
        "this launch would start again at step 0 and write over it. Choose a new trainer.output_dir, or set "
        "checkpoint.overwrite=true to train again from the start in this folder."
    )


# What a run writes at the top of its output folder (recipes/run.py, the trainer's final save, best/).
RUN_WRITES = (
    "README.md", "recipe.yaml", "trainer_state.json", "training_args.bin", ADAPTER_FILE, "adapter_config.json",
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja", "best",
)  # fmt: skip


def output_folder_refusal(recipe: Recipe) -> str | None:
    """Why a run may not write to ``trainer.output_dir``; None when it may.

    A folder no run of ours has used (no ``.checkpoint_sync``) that holds a file a run would write is someone
    else's: the run would write over their README.md or recipe.yaml. A checkpoint store at, inside or around the
    output folder would mix the store's copies with the trainer's own checkpoint-N folders.
    """
    from urllib.parse import urlparse

    from callbacks.local import SYNC_DIR

    output_dir = Path(recipe.config["trainer"]["output_dir"])
    theirs = [name for name in RUN_WRITES if (output_dir / name).exists()]
    if theirs and not (output_dir / SYNC_DIR).is_dir():
        return (
            f"trainer.output_dir {output_dir} holds {', '.join(theirs)}, not written by a run of this project: "
            "a run would write over them. Choose a new or empty trainer.output_dir, or move them away."
        )
    uri = recipe.config["checkpoint"]["uri"]
    parsed = urlparse(uri or "")
    if not uri or parsed.scheme == "s3":
        return None
    store = Path(parsed.path if parsed.scheme == "file" else uri).expanduser().resolve()
    here = output_dir.expanduser().resolve()
    if store == here or here in store.parents or store in here.parents:
        return (
            f"checkpoint.uri {uri} and trainer.output_dir {output_dir} are "
            f"{'the same folder' if store == here else 'one inside the other'}: the store would hold the trainer's "
            "own checkpoint-N folders. Give the store a folder of its own (e.g. a mounted drive)."
        )
    return None


def check_process_count(resume_from: str | None) -> None:
    """A resume with another number of processes than the checkpoint's: refused under DeepSpeed, whose optimizer
    shards are per rank (it would fail after the model loads); said otherwise, since the batch per step changes.

    Raises:
        RecipeError: DeepSpeed, and the checkpoint was written by a different number of processes.
    """
    from callbacks.manifest import read_local_manifest

    manifest = read_local_manifest(Path(resume_from))[0] if resume_from else None
    then, now = (manifest or {}).get("world_size"), int(os.environ.get("WORLD_SIZE", "1"))
    if then is None or then == now:
        return
    if os.environ.get("ACCELERATE_USE_DEEPSPEED", "false").lower() == "true":
        raise RecipeError(
            f"{resume_from} was written by {then} processes and this launch has {now}: DeepSpeed keeps the optimizer "
            f"in one shard per process and cannot resume it on {now}. Launch with --num_processes {then} (as the "
            "run was), or start a new run in another trainer.output_dir."
        )
    if not first_process():  # said once per run
        return
    logger.warning(
        "Resuming %s, written by %d processes, with %d: each step now takes %s as many completions (the batch is "
        "per process). Launch with --num_processes %d to continue the run as it was.",
        resume_from, then, now, f"{now}/{then}", then,
    )  # fmt: skip


def stopped_early(checkpoint: Path) -> str | None:
    """Why the run ended at this checkpoint before trainer.max_steps (an alarm or a plateau), if it did."""
    from callbacks.heldout_history import HISTORY_NAME, read_history

    history = read_history(checkpoint / HISTORY_NAME)
    return history["stopped"]["reason"] if history and history["stopped"] else None


def keep_final_adapter(recipe: Recipe, checkpoint: Path, output_dir: Path) -> bool:
    """Make ``output_dir``'s final adapter the finished checkpoint's, unless it already is; True when restored.

    The final folder is complete when its trainer_state.json, written last (recipes/run.py), has the checkpoint's
    step. Otherwise it is restored: no final save yet (a crash after the last checkpoint), a kill during the
    final save (a truncated adapter), or another step's adapter (the run went on from the store elsewhere).
    """
    from callbacks.heldout_history import HISTORY_NAME, read_history, restore_records
    from recipes.atomic import copy_file_atomically, write_text_atomically
    from recipes.model_card import model_card

    state = json.loads((checkpoint / STATE_NAME).read_text())
    if _final_step(output_dir) == state["global_step"]:
        return False
    skip = {*BOOKKEEPING, STATE_NAME, HISTORY_NAME}
    for source in sorted(checkpoint.iterdir()):
        if source.is_file() and source.name not in skip and not is_training_state(source.name):
            copy_file_atomically(source, output_dir / source.name)
    history = read_history(checkpoint / HISTORY_NAME)
    if history:  # what the held-out callback leaves in a finished run's folder: stats.compare's step-N.jsonl
        restore_records(history, checkpoint, output_dir)
        if not (output_dir / "heldout" / "history.json").exists():  # a folder made on another machine
            write_text_atomically(output_dir / "heldout" / "history.json", json.dumps(history))
    card = model_card(recipe, state.get("log_history", []), str(output_dir), history)
    write_text_atomically(output_dir / "README.md", card)  # the project's card, not peft's template
    if not (output_dir / "recipe.yaml").is_file():  # a folder made on another machine from the store
        write_text_atomically(output_dir / "recipe.yaml", recipe.to_yaml())
    copy_file_atomically(checkpoint / STATE_NAME, output_dir / STATE_NAME)  # last: the folder is complete
    logger.info(
        "Final adapter restored in %s from %s (step %d)", output_dir, checkpoint, state["global_step"]
    )
    return True


def _final_step(output_dir: Path) -> int | None:
    """The step of ``output_dir``'s final save, from its trainer_state.json; None when there is none or it is
    unreadable (a kill while it was written)."""
    try:
        step = json.loads((output_dir / STATE_NAME).read_text())["global_step"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return step if (output_dir / ADAPTER_FILE).is_file() else None
