"""Publishing a local checkpoint: stage a private copy, describe it in a manifest, commit it, apply retention.

Staging (hard links where the filesystem allows, copies otherwise) is fast, so it runs synchronously in
``on_save``. It matters because the Trainer's ``save_total_limit`` rotation deletes older checkpoint folders
(in ``_save_checkpoint``, before ``on_save``), possibly while their upload is still running in the background.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import time
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from callbacks.best import update_best_pointer
from callbacks.errors import CheckpointError
from callbacks.machines import Part, wait_for_parts
from callbacks.manifest import build_manifest, checkpoint_step, training_state_problems
from callbacks.remote import commit_checkpoint
from callbacks.retention import apply_retention
from callbacks.stores import Store

logger = logging.getLogger(__name__)
RECIPE_FILE = "recipe.yaml"


@dataclass
class RunInfo:
    """What every manifest of a run records, and the run's remote retention."""

    recipe_name: str
    recipe_yaml: str | None  # None: a checkpoint's own recipe.yaml only (one this launch did not train)
    run_id: str
    keep_last: int | None = None


def stage_checkpoint(
    folder: Path, staging_root: Path, recipe_yaml: str | None, only: Collection[str] | None = None
) -> Path:
    """Mirror a checkpoint folder into a private staging folder (plus the resolved recipe) and return it.

    The Trainer writes new files for every checkpoint, so hard-linked files never change under the upload.
    ``only`` stages just those relative paths (another machine's share), and ``recipe_yaml=None`` no recipe.
    """
    staged = staging_root / f"{folder.name}-{uuid.uuid4().hex[:8]}"
    staged.mkdir(parents=True)
    for path in sorted(folder.rglob("*")):
        target = staged / path.relative_to(folder)
        if path.is_dir() or (only is not None and path.relative_to(folder).as_posix() not in only):
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(path, target)
        except OSError:
            shutil.copy2(path, target)
    if recipe_yaml is not None and not (staged / RECIPE_FILE).exists():
        (staged / RECIPE_FILE).write_text(recipe_yaml)
    return staged


def rng_world_size(files: list[str]) -> int:
    """How many processes wrote a checkpoint, judged from its RNG state files."""
    ranks = [int(m.group(1)) for f in files if (m := re.fullmatch(r"rng_state_(\d+)\.pth", f))]
    return max(ranks) + 1 if ranks else 1


def publish_staged(
    store: Store,
    staged: Path,
    step: int,
    run: RunInfo,
    *,
    world_size: int | None = None,
    progress: bool = False,
    part: Part | None = None,
) -> dict:
    """Commit a staged checkpoint to the store (files, then manifest), update the ``best`` pointer, then apply
    retention (which keeps the best); returns the manifest.

    ``part``: the files other machines upload (callbacks/machines.py); the manifest lists them, and is written
    only once every machine's receipt is in.

    Raises:
        CheckpointError: The checkpoint is not resumable (it is then not uploaded), or the commit failed.
    """
    start = time.monotonic()
    if world_size is None:
        world_size = rng_world_size([p.name for p in staged.iterdir()])
    manifest = build_manifest(
        staged, step=step, recipe_name=run.recipe_name, run_id=run.run_id, world_size=world_size, rank=0
    )
    if part:
        manifest["files"] = dict(sorted({**part.files, **manifest["files"]}.items()))
    problems = training_state_problems(manifest["files"], world_size=world_size)
    if problems:
        raise CheckpointError(
            f"checkpoint-{step} cannot be resumed ({'; '.join(problems)}), so it was not uploaded. "
            "Is trainer.save_only_model set?"
        )
    wait = (lambda: wait_for_parts(store, f"checkpoint-{step}", part)) if part and part.machines else None
    written = commit_checkpoint(
        store, staged, manifest, progress=progress, others=part.files if part else (), wait_for_others=wait
    )
    size_mb = sum(e["size"] for e in manifest["files"].values()) / 1e6
    logger.info(
        "checkpoint-%d %s %s (%d files, %.1f MB, %.1f s)",
        step,
        "committed to" if written else "was already committed to",
        store.child_uri(f"checkpoint-{step}"),
        len(manifest["files"]),
        size_mb,
        time.monotonic() - start,
    )
    try:
        best = update_best_pointer(store)
    except Exception as e:  # noqa: BLE001 - the checkpoint is committed; the next commit rewrites the pointer
        logger.warning(
            "Could not update the best pointer in %s (%s); retention waits for the next commit", store.uri, e
        )
        return manifest
    if run.keep_last:
        apply_retention(store, run.keep_last, protect=[best["checkpoint"]] if best else [])
    return manifest


def publish_local(store: Store, folder: Path, staging_root: Path, run: RunInfo) -> dict:
    """Stage and commit a local checkpoint folder synchronously, with a progress bar (used before training)."""
    staged = stage_checkpoint(folder, staging_root, run.recipe_yaml)
    try:
        return publish_staged(store, staged, checkpoint_step(folder.name), run, progress=True)
    finally:
        shutil.rmtree(staged, ignore_errors=True)
