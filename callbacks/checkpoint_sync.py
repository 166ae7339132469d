"""Checkpoints that survive a lost machine: sync every save to S3 or a mounted folder, resume from the newest
verified one.

    plan = prepare_checkpointing(output_dir="outputs/run", recipe_name="gsm8k_llama", recipe_yaml=text,
                                 uri="s3://bucket/runs/llama", every_steps=25, keep_last=None, resume="latest",
                                 run_id=None, overwrite=False, endpoint_url=None)
    trainer = GRPOTrainer(..., callbacks=plan.callbacks)
    trainer.train(resume_from_checkpoint=plan.resume_from)
    trainer.save_model()
    plan.finish_uploads()  # waits for the last upload, after the local save
    plan.release()

Call it on every rank before the model loads (fail fast: the storage preflight runs first).
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from callbacks.errors import CheckpointError
from callbacks.fetch import fetch_checkpoint
from callbacks.lease import RemoteLease
from callbacks.local import SYNC_DIR
from callbacks.lock import LOCK_NAME, OutputLock
from callbacks.machines import Machine, join_machines
from callbacks.publish import RunInfo
from callbacks.resume import Resolver
from callbacks.seal import SealCallback, partial_state
from callbacks.settings import CheckpointSettings
from callbacks.stores import open_store, run_prefix_problem
from callbacks.sync_callback import CheckpointSyncCallback
from common.processes import broadcast_from_main

__all__ = [
    "CheckpointError",
    "CheckpointPlan",
    "CheckpointSyncCallback",
    "SealCallback",
    "fetch_checkpoint",
    "prepare_checkpointing",
]
logger = logging.getLogger(__name__)


@dataclass
class CheckpointPlan:
    """What the trainer needs: callbacks to add, and the local checkpoint folder to resume from (or None)."""

    callbacks: list = field(default_factory=list)
    resume_from: str | None = None
    run_id: str = ""
    uri: str | None = None
    lock: OutputLock | None = None  # the main process's lock on output_dir, held until release()
    lease: RemoteLease | None = None  # the main process's lease on uri, held until release()
    require_upload: bool = False

    def finish_uploads(self) -> None:
        """After the final local save: wait for uploads; a failed one is an error only with require_upload.

        Raises:
            CheckpointError: The newest checkpoint did not reach the store and ``require_upload`` is set.
        """
        for callback in self.callbacks:
            if isinstance(callback, CheckpointSyncCallback) and (failure := callback.finish()):
                if self.require_upload:
                    raise CheckpointError(failure)
                logger.error(
                    "%s (checkpoint.require_upload=false: the run still ends with exit code 0)", failure
                )

    def release(self) -> None:
        """Free the output folder and the prefix for the next launch (call when the run ends, however it ends)."""
        _release(self.lease, self.lock)


def _release(*held) -> None:
    for claim in held:
        if claim is not None:
            claim.release()


def prepare_checkpointing(
    *,
    output_dir: str,
    recipe_name: str,
    recipe_yaml: str,
    vet_recipe: Callable[[str], str | None] | None = None,
    **settings,
) -> CheckpointPlan:
    """Check the storage, pick the checkpoint to resume from (downloading it), and build the sync callback.

    Args:
        output_dir: The trainer's output_dir, where checkpoint-N folders are written.
        recipe_name: Recorded in every manifest.
        recipe_yaml: The resolved recipe, uploaded with every checkpoint as recipe.yaml.
        vet_recipe: Given the recipe.yaml of the checkpoint this launch would continue (``resume: latest`` or an
            explicit one); returns why it may not be continued with this recipe (None: it may). Asked about the
            checkpoint to be resumed before it is downloaded (a local one before it is used), and for an explicit
            one before anything is cleared; its answer is raised as a CheckpointError.
        **settings: The ``checkpoint:`` section's keys (``CheckpointSettings``, which holds their defaults):
            uri: None (local checkpoints only), ``s3://bucket/prefix``, ``file:///folder`` or a folder path.
            every_steps: Save interval; the caller sets the trainer's save_steps to it.
            keep_last: Remote checkpoints to keep (None keeps all); the newest complete one is never deleted.
            resume: ``latest`` (the newest complete checkpoint, remote or local), ``never``, or a checkpoint
                path/URI (a run prefix means its newest complete checkpoint).
            run_id: Recorded in manifests; None adopts the resumed run's id or makes a new one.
            overwrite: Allow clearing another run's checkpoints at ``uri`` and in output_dir (``set_aside``).
            endpoint_url: S3-compatible endpoint (MinIO, R2).

    The main process resolves and commits. On several machines without a shared output_dir, every other
    machine also uploads its ranks' files and downloads the checkpoint to resume from (callbacks/machines.py).

    Raises:
        CheckpointError: Bad arguments, storage that cannot be used (said precisely), or a run conflict.
    """
    try:
        checkpoint = CheckpointSettings(**settings)
    except TypeError as e:  # an unknown keyword
        raise CheckpointError(f"prepare_checkpointing: {e}") from None
    uri, every_steps, keep_last = checkpoint.uri, checkpoint.every_steps, checkpoint.keep_last
    resume, run_id, overwrite, endpoint_url = (
        checkpoint.resume,
        checkpoint.run_id,
        checkpoint.overwrite,
        checkpoint.endpoint_url,
    )
    output_dir = Path(output_dir)
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    is_main = partial_state().is_main_process if distributed else True
    store, outcome, lock, lease = None, None, None, None
    if is_main:
        try:
            if uri and (problem := run_prefix_problem(uri)):
                raise CheckpointError(problem)
            store = open_store(uri, endpoint_url) if uri else None
            if store:
                store.preflight()
            # Before any write: a second launch on this folder must not touch the first one's files (staging too).
            lock = OutputLock(output_dir, SYNC_DIR, recipe_name)
            lease = RemoteLease(store, recipe_name) if store else None
            shutil.rmtree(output_dir / SYNC_DIR / "staging", ignore_errors=True)
            run = RunInfo(recipe_name, recipe_yaml, run_id or "", keep_last)
            resolver = Resolver(
                store=store,
                output_dir=output_dir,
                run=run,
                overwrite=overwrite,
                endpoint_url=endpoint_url,
                vet_recipe=vet_recipe,
            )
            chosen, effective_run = resolver.resolve(resume, run_id)
            outcome = (str(chosen) if chosen else None, effective_run, lock.path.read_text())
        except CheckpointError as e:
            outcome = e
        except Exception:
            _release(lease, lock)
            if distributed:  # the other processes must not wait forever for an answer
                broadcast_from_main(
                    CheckpointError("The main process failed while preparing checkpoints; see its error.")
                )
            raise
    if distributed:
        outcome = broadcast_from_main(outcome)
    if isinstance(outcome, CheckpointError):
        _release(lease, lock)
        raise outcome
    resume_from, effective_run, main_lock = outcome
    machine = Machine()
    if distributed:
        try:
            lock_path = output_dir / SYNC_DIR / LOCK_NAME
            machine, machine_store, resume_from = join_machines(
                output_dir,
                lock_path,
                main_lock,
                resume_from,
                effective_run,
                uri=uri,
                endpoint_url=endpoint_url,
            )
        except CheckpointError:
            _release(lease, lock)
            raise
        store = store if is_main else machine_store
        if machine.uploads_part:  # this machine's staged copies of a crashed launch
            shutil.rmtree(output_dir / SYNC_DIR / "staging", ignore_errors=True)
    if is_main:
        where = f"syncing to {store.uri} every {every_steps} steps" if store else "local checkpoints only"
        start = f"resuming from {resume_from}" if resume_from else "starting from step 0"
        logger.info("Checkpoints: run %s, %s, %s", effective_run, where, start)
    run = RunInfo(recipe_name, recipe_yaml, effective_run, keep_last)
    callbacks = [SealCallback(run, store.uri if store else None)]
    if uri:
        staging = output_dir / SYNC_DIR / "staging"
        callbacks.append(
            CheckpointSyncCallback(
                store, run, staging, lease=lease, machine=machine, stop_on_failure=checkpoint.require_upload
            )
        )
    return CheckpointPlan(
        callbacks=callbacks,
        resume_from=resume_from,
        run_id=effective_run,
        uri=store.uri if store else uri,
        lock=lock,
        lease=lease,
        require_upload=checkpoint.require_upload,
    )
