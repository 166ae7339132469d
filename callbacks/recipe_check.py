"""Whether a checkpoint may be continued with this launch's recipe: the recipe.yaml it was made with is found and
handed to the caller's ``vet_recipe`` before the checkpoint is downloaded or used.

The rule (which keys may differ) belongs to the recipes (``recipes.rerun.changed_recipe_refusal``); callbacks take
it as a plain callable, so every way of resuming, ``latest`` or an explicit checkpoint, asks the same question.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from pathlib import Path

from callbacks.errors import CheckpointError
from callbacks.publish import RECIPE_FILE
from callbacks.remote import RemoteCheckpoint
from callbacks.stores import Store

logger = logging.getLogger(__name__)


def saved_recipe_file(checkpoint: Path, run_folder: Path | None = None) -> Path | None:
    """The recipe.yaml a checkpoint (or final adapter folder) was made with: its own copy (a synced or downloaded
    checkpoint carries one), else its run folder's (``run_folder``, by default the folder above it)."""
    run_folder = checkpoint.parent if run_folder is None else run_folder
    return next((p for p in (checkpoint / RECIPE_FILE, run_folder / RECIPE_FILE) if p.is_file()), None)


class RecipeVet:
    """Raises ``vet_recipe``'s refusal as a CheckpointError; without ``vet_recipe`` every checkpoint passes."""

    def __init__(self, vet_recipe: Callable[[str], str | None] | None):
        self.vet_recipe = vet_recipe

    def check(self, saved: str | None) -> None:
        """Refuse to continue a run made with ``saved`` (its recipe.yaml; None: unknown, nothing to compare)."""
        if saved and self.vet_recipe and (refusal := self.vet_recipe(saved)):
            raise CheckpointError(refusal)

    def local(self, checkpoint: Path, run_folder: Path | None = None) -> None:
        """Vet a local checkpoint folder by its recipe.yaml (:func:`saved_recipe_file`)."""
        path = saved_recipe_file(checkpoint, run_folder)
        self.check(path.read_text(encoding="utf-8") if path else None)

    def remote(self, store: Store, c: RemoteCheckpoint, fallback: Path | None = None) -> bool:
        """Vet a store checkpoint before it is downloaded, reading its recipe.yaml alone.

        Returns False, with the reason added to ``c.problems``, when that recipe.yaml does not match its
        manifest: the download would fail verification, so the caller skips the checkpoint. A checkpoint our sync
        did not write has none: ``fallback`` (a run folder whose recipe.yaml stands for it) is vetted instead.
        """
        entry = c.manifest["files"].get(RECIPE_FILE)
        if entry is None:
            if fallback is None:
                logger.info("%s holds no %s: its recipe is not checked", store.child_uri(c.name), RECIPE_FILE)
            else:
                self.local(fallback / c.name, fallback)
            return True
        data = store.read_bytes(f"{c.name}/{RECIPE_FILE}") or b""
        if hashlib.sha256(data).hexdigest() != entry["sha256"]:
            c.problems.append(
                f"{RECIPE_FILE} does not match its SHA-256 in the manifest (altered or corrupt)"
            )
            return False
        self.check(data.decode())
        return True
