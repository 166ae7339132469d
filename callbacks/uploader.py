"""Uploads off the training path: one background thread, a bounded backlog, the newest checkpoint first.

When checkpoints arrive faster than the network takes them, the oldest waiting one is dropped (logged) and the
newest always wins; the one uploading is never interrupted.
"""

from __future__ import annotations

import concurrent.futures.thread  # noqa: F401 - its exit hook first, so that ours runs before it
import contextlib
import logging
import shutil
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from callbacks.machines import Part

logger = logging.getLogger(__name__)


@dataclass
class UploadJob:
    step: int
    staged: Path
    world_size: int = 1
    part: Part | None = None  # on a run spread over machines without a shared disk


class BackgroundUploader:
    """Runs ``work(job)`` for submitted jobs on one background thread, newest first when it falls behind.

    Args:
        work: Uploads one staged checkpoint; raises on failure.
        max_pending: Jobs that may wait behind the one uploading; older waiting jobs are dropped beyond this.
    """

    def __init__(self, work: Callable[[UploadJob], None], max_pending: int = 1):
        self._work = work
        self._max_pending = max_pending
        self._pending: deque[UploadJob] = deque()
        self._busy, self._current = False, None
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self.committed: list[int] = []
        self.failed: dict[int, str] = {}
        self.skipped: list[int] = []
        self._finish_at_exit_registered = False

    def submit(self, job: UploadJob) -> None:
        with self._cond:
            while len(self._pending) >= self._max_pending:
                dropped = self._pending.popleft()
                self.skipped.append(dropped.step)
                shutil.rmtree(dropped.staged, ignore_errors=True)
                logger.warning(
                    "Upload of checkpoint-%d skipped: checkpoint-%d arrived while it was still waiting "
                    "(uploads are slower than saves; the newest checkpoint wins)",
                    dropped.step,
                    job.step,
                )
            self._pending.append(job)
            self._cond.notify_all()
            if self._thread is None or not self._thread.is_alive():
                # Not a daemon: after a crash in training, the interpreter still finishes the queued uploads.
                self._thread = threading.Thread(target=self._run, name="checkpoint-upload")
                self._thread.start()
                if not self._finish_at_exit_registered:
                    # Before the interpreter stops the thread pools (its hooks run last registered first): boto3
                    # transfers on one, and an upload cut off there fails ("cannot schedule new futures").
                    with contextlib.suppress(RuntimeError):  # the interpreter is ending already
                        threading._register_atexit(self._finish_at_exit)
                    self._finish_at_exit_registered = True

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending:
                    if not threading.main_thread().is_alive():
                        return
                    self._cond.wait(timeout=1.0)
                job = self._pending.popleft()
                self._busy, self._current = True, job.step
            try:
                self._work(job)
                self.committed.append(job.step)
            except Exception as e:  # noqa: BLE001 - any failure is recorded and reported; training goes on
                self.failed[job.step] = f"{type(e).__name__}: {e}"
                logger.error("Upload of checkpoint-%d failed: %s", job.step, self.failed[job.step])
            finally:
                shutil.rmtree(job.staged, ignore_errors=True)
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _finish_at_exit(self) -> None:
        with self._cond:
            steps = ([self._current] if self._busy else []) + [job.step for job in self._pending]
        if steps:
            logger.warning(
                "The process is ending with %s still uploading: waiting for it to finish (stopped, it is uploaded "
                "again by the next launch in this output folder)",
                ", ".join(f"checkpoint-{step}" for step in steps),
            )
            self.wait()

    def wait(self, warn_every: float = 60.0) -> None:
        """Block until every submitted job has finished (committed, failed or skipped), saying so while slow.

        The wait is bounded by the store's own request timeouts and retries, which end every upload.
        """
        start = time.monotonic()
        with self._cond:
            while self._pending or self._busy:
                if not self._cond.wait(timeout=warn_every):
                    logger.warning(
                        "Still uploading checkpoint-%s after %.0f s: the store is slow or not answering (each "
                        "request gives up after its timeout and retries)",
                        self._current,
                        time.monotonic() - start,
                    )
