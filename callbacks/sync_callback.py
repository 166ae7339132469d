"""The callback that copies each saved checkpoint to the store: staged, then uploaded off the training path.

``callbacks/checkpoint_sync.py`` builds it (``prepare_checkpointing``) with the store, the run and its lease.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from transformers import TrainerCallback

from callbacks.errors import CheckpointError
from callbacks.lease import RemoteLease
from callbacks.machines import Machine, gather_parts, rotate_local, upload_part
from callbacks.publish import RunInfo, publish_staged, stage_checkpoint
from callbacks.seal import partial_state
from callbacks.stores import Store
from callbacks.uploader import BackgroundUploader, UploadJob
from common.processes import broadcast_from_main

logger = logging.getLogger("callbacks.checkpoint_sync")


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
        self.local: tuple[Path, int | None] | None = (
            None  # output_dir and save_total_limit, from the first save
        )
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
        self.local = (Path(args.output_dir), args.save_total_limit)  # where _report looks for the unsafe ones
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
            message = broadcast_from_main(message)
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
        return broadcast_from_main(failed) if world_size > 1 else failed

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
        output_dir, limit = self.local
        kept = [f"checkpoint-{s}" for s in sorted(unsafe) if (output_dir / f"checkpoint-{s}").is_dir()]
        gone = [f"checkpoint-{s}" for s in sorted(unsafe) if f"checkpoint-{s}" not in kept]
        # The Trainer's rotation deletes the older local folders whether or not their upload went through.
        lost = (
            f" {', '.join(gone)} no longer exist anywhere: trainer.save_total_limit ({limit}) removed them from "
            f"{output_dir} before they could be uploaded (raise it to keep more while a store is down)."
            if gone
            else ""
        )
        local = (
            f" {', '.join(kept)} exist only in {output_dir}: copy them before this machine goes away, or rerun "
            "with checkpoint.resume=latest on this machine to upload them first."
            if kept
            else ""
        )
        return (
            f"Checkpoint upload to {self.store.uri} FAILED for {failures}. The newest checkpoint safely stored "
            f"there is {safe}.{local}{lost}"
        )
