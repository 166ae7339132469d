"""Sealing a just-saved local checkpoint: its adapter checked against the model, the recipe that trained it and its
manifest written, the local ``best`` pointer updated (every process calls it; the main one writes)."""

from __future__ import annotations

from pathlib import Path

from transformers import TrainerCallback

from callbacks.best import update_local_best_pointer
from callbacks.errors import CheckpointError
from callbacks.manifest import seal_checkpoint
from callbacks.publish import RECIPE_FILE, RunInfo
from callbacks.saved_adapter import saved_adapter_problems
from recipes.atomic import write_text_atomically


def partial_state():
    """accelerate's process state, imported when first used so that importing this module stays light."""
    from accelerate import PartialState

    return PartialState()


class SealCallback(TrainerCallback):
    """After each save, check the checkpoint's adapter against the model (a sharded engine may have saved none),
    write its manifest (every file's size and SHA-256) into its folder, then update the ``OUTPUT_DIR/best``
    pointer over the local checkpoint folders (none while the run's best is only in the store).

    A later launch then verifies the local copy like a download, and falls back to the newest good copy.
    """

    def __init__(self, run: RunInfo, uri: str | None = None):
        self.run, self.uri = run, uri  # uri: the run's store, where its best may be when not on this machine

    def on_save(self, args, state, control, **kwargs):
        if args.world_size > 1:  # every rank has written its files before the main process hashes them
            partial_state().wait_for_everyone()
        if state.is_world_process_zero:
            folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if kwargs.get("model") is not None and (
                problems := saved_adapter_problems(folder, kwargs["model"])
            ):
                raise CheckpointError(f"{folder} is not a usable checkpoint: {'; '.join(problems)}")
            if self.run.recipe_yaml is not None:  # a checkpoint says what trained it, copied alone too
                write_text_atomically(folder / RECIPE_FILE, self.run.recipe_yaml)
            seal_checkpoint(
                folder,
                step=state.global_step,
                recipe_name=self.run.recipe_name,
                run_id=self.run.run_id,
                world_size=args.world_size,
            )
            update_local_best_pointer(args.output_dir, state.best_global_step, self.uri)
