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
from dataclasses import dataclass, field
from pathlib import Path

from transformers import TrainerCallback

from callbacks.errors import CheckpointError
from callbacks.fetch import fetch_checkpoint
from callbacks.lease import RemoteLease
from callbacks.lock import LOCK_NAME, OutputLock
from callbacks.machines import Machine, gather_parts, join_machines, rotate_local, upload_part
from callbacks.publish import RunInfo, publish_staged, stage_checkpoint
from callbacks.resume import SYNC_DIR, Resolver
from callbacks.seal import SealCallback, partial_state
from callbacks.settings import CheckpointSettings
from callbacks.stores import Store, open_store
from callbacks.uploader import BackgroundUploader, UploadJob

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


class CheckpointSyncCallback(TrainerCallback):
    """After each save, stage the checkpoint and upload it in the background; ``finish()`` waits and reports.

    Args:
        store: Where checkpoints go (None on every process but the main one, which alone uploads).
        run: Run id, recipe and retention recorded with every checkpoint.
        staging_dir: Private folder for staged copies (same filesystem as output_dir, for hard links).
        max_pending: Checkpoints that may wait behind the one uploading before the oldest is skipped.
        lease: This launch's lease on the store, checked before each commit (None: no check).
        machine: This process's machine; on a run spread over machines without a shared disk, each machine
            uploads the files only it has, and the main process commits (callbacks/machines.py).
        stop_on_failure: ``checkpoint.require_upload``: at each save, wait for the previous upload, and end the
            run (after this save, keeping the final local adapter) once a checkpoint failed to reach the store,
            rather than train on with nothing new safe there.
    """

    def __init__(
        self,
        store: Store | None,
        run: RunInfo,
        staging_dir: Path,
        max_pending: int = 1,
        lease: RemoteLease | None = None,
        machine: Machine | None = None,
        stop_on_failure: bool = False,
    ):
        self.store, self.run, self.staging_dir, self.lease = store, run, Path(staging_dir), lease
        self.stop_on_failure = stop_on_failure
        self.stopped: str | None = None  # why the run ended early for a failed upload (main process)
        self.machine = machine = machine or Machine()
        # Another machine never skips a part: the main process's commit of that checkpoint waits for it.
        pending = max_pending if not machine.uploads_part else 1 << 20
        self.uploader = BackgroundUploader(self._upload, max_pending=pending)

    def _upload(self, job: UploadJob) -> None:
        if self.machine.uploads_part:
            upload_part(self.store, job.staged, job.step, job.part, self.machine.name)
            return
        if self.lease:  # another launch took the prefix: writing now would overwrite its checkpoints
            self.lease.check()
        publish_staged(self.store, job.staged, job.step, self.run, world_size=job.world_size, part=job.part)

    def on_save(self, args, state, control, **kwargs):
        if args.world_size > 1:  # every rank has written its RNG state before the main process stages
            partial_state().wait_for_everyone()
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        main = state.is_world_process_zero
        if self.stop_on_failure and self._failed_so_far(main, args.world_size):
            control.should_training_stop = True
        part = gather_parts(folder, self.machine, is_main=main) if self.machine.separate else None
        if not (main or self.machine.uploads_part):
            return
        if not folder.is_dir():
            raise CheckpointError(f"The trainer reported a save, but {folder} does not exist")
        if main:
            staged = stage_checkpoint(folder, self.staging_dir, self.run.recipe_yaml)
        else:
            staged = stage_checkpoint(folder, self.staging_dir, None, only=part.files)
            rotate_local(Path(args.output_dir), args.save_total_limit)
        self.uploader.submit(UploadJob(state.global_step, staged, args.world_size, part))

    def finish(self) -> str | None:
        """Wait for the uploads (on the main process) and return why the newest checkpoint is not safe, if so.

        Called after the final local save, so a failing or frozen store never costs the adapter on disk.
        """
        message = None
        if self.store is not None:
            logger.info("Waiting for checkpoint uploads to %s to finish", self.store.uri)
            self.uploader.wait()
            # A later checkpoint may have reached the store since, but the run still stopped short of its end.
            message = self._report() or self.stopped
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:
            message = _broadcast(message)
        return message

    def _failed_so_far(self, main: bool, world_size: int) -> bool:
        """Whether an upload before this save failed with nothing newer committed (the same on every process)."""
        failed = False
        if main and self.store is not None:
            self.uploader.wait()
            if unsafe := self._unsafe():
                failed = True
                self.stopped = (
                    f"checkpoint.require_upload=true and checkpoint-{max(unsafe)} did not reach {self.store.uri} "
                    f"({unsafe[max(unsafe)]}): the run ended early; fix the store and rerun the same command to "
                    "resume"
                )
                logger.error("%s (the final adapter is kept locally)", self.stopped)
        return _broadcast(failed) if world_size > 1 else failed

    def _unsafe(self) -> dict[int, str]:
        """Failed uploads with no newer checkpoint committed: step -> error."""
        newest_committed = max(self.uploader.committed, default=None)
        failed = dict(self.uploader.failed)
        return {s: e for s, e in failed.items() if newest_committed is None or s > newest_committed}

    def _report(self) -> str | None:
        """Log superseded failures; return an error message when the newest saved checkpoint is not safe."""
        up = self.uploader
        newest_committed = max(up.committed, default=None)
        for step in up.skipped:
            logger.warning("checkpoint-%d was skipped (a newer one superseded it before upload)", step)
        unsafe = self._unsafe()
        for step, error in up.failed.items():
            if step not in unsafe:
                logger.error(
                    "checkpoint-%d failed to upload (%s); the newer checkpoint-%d is safe",
                    step,
                    error,
                    newest_committed,
                )
        if not unsafe:
            return None
        safe = f"checkpoint-{newest_committed}" if newest_committed is not None else "none"
        by_error: dict[str, list[int]] = {}
        for step, error in sorted(unsafe.items()):
            by_error.setdefault(error, []).append(step)
        failures = "; ".join(
            f"{', '.join(f'checkpoint-{s}' for s in steps)}: {e}" for e, steps in by_error.items()
        )
        return (
            f"Checkpoint upload to {self.store.uri} FAILED for {failures}. The newest checkpoint safely stored "
            f"there is {safe}. The newer ones exist only under the local output_dir: copy them before this "
            "machine goes away, or rerun with checkpoint.resume=latest on this machine to upload them first."
        )


def _broadcast(value):
    """``value`` from the main process, on every process."""
    from accelerate.utils import broadcast_object_list

    box = [value]
    broadcast_object_list(box, from_process=0)
    return box[0]


def prepare_checkpointing(
    *,
    output_dir: str,
    recipe_name: str,
    recipe_yaml: str,
    **settings,
) -> CheckpointPlan:
    """Check the storage, pick the checkpoint to resume from (downloading it), and build the sync callback.

    Args:
        output_dir: The trainer's output_dir, where checkpoint-N folders are written.
        recipe_name: Recorded in every manifest.
        recipe_yaml: The resolved recipe, uploaded with every checkpoint as recipe.yaml.
        **settings: The ``checkpoint:`` section's keys (``CheckpointSettings``, which holds their defaults):
            uri: None (local checkpoints only), ``s3://bucket/prefix``, ``file:///folder`` or a folder path.
            every_steps: Save interval; the caller sets the trainer's save_steps to it.
            keep_last: Remote checkpoints to keep (None keeps all); the newest complete one is never deleted.
            resume: ``latest`` (the newest complete checkpoint, remote or local), ``never``, or a checkpoint
                path/URI (a run prefix means its newest complete checkpoint).
            run_id: Recorded in manifests; None adopts the resumed run's id or makes a new one.
            overwrite: Allow deleting another run's checkpoints at ``uri`` (or the output_dir's).
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
            store = open_store(uri, endpoint_url) if uri else None
            if store:
                store.preflight()
            # Before any write: a second launch on this folder must not touch the first one's files (staging too).
            lock = OutputLock(output_dir, SYNC_DIR, recipe_name)
            lease = RemoteLease(store, recipe_name) if store else None
            shutil.rmtree(output_dir / SYNC_DIR / "staging", ignore_errors=True)
            run = RunInfo(recipe_name, recipe_yaml, run_id or "", keep_last)
            resolver = Resolver(
                store=store, output_dir=output_dir, run=run, overwrite=overwrite, endpoint_url=endpoint_url
            )
            chosen, effective_run = resolver.resolve(resume, run_id)
            outcome = (str(chosen) if chosen else None, effective_run, lock.path.read_text())
        except CheckpointError as e:
            outcome = e
        except Exception:
            _release(lease, lock)
            if distributed:  # the other processes must not wait forever for an answer
                _broadcast(
                    CheckpointError("The main process failed while preparing checkpoints; see its error.")
                )
            raise
    if distributed:
        outcome = _broadcast(outcome)
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
