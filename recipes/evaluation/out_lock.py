"""One evaluate.py run per --out file: a second one is refused, naming the first.

A run resumes its file: it reads the records, grades again the unsettled ones and those an older grader graded
(``records.regrade``, which rewrites the file, possibly minutes later) and appends the rest. Two runs on one file
lost records: the rewrite replaced the file with what the second run had read, and the first run's later appends
went to the file it replaced. The lock is ``flock`` on ``.<name>.lock`` beside the file, removed when the run ends;
the system releases it when its process ends, however it ends.
"""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path

from recipes.evaluation.generation import EvaluationError


@contextmanager
def hold(out: Path):
    """Hold ``out`` for this run. Nothing is held where nothing can be written (no folder, a folder as ``out``, a
    read-only one): the run's own checks refuse it.

    Raises:
        EvaluationError: Another run holds it.
    """
    lock = out.with_name(f".{out.name}.lock")
    try:
        fd = None if out.is_dir() else os.open(lock, os.O_CREAT | os.O_RDWR, 0o644)
    except OSError:
        fd = None
    if fd is None:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        owner = os.read(fd, 64).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise EvaluationError(
            f"{out} is being written by another evaluate.py run (pid {owner}): two runs on one file lose "
            "records. Wait for it to end, or use another --out file."
        ) from None
    except OSError:  # a filesystem without locks (some FUSE mounts): the run goes on, unguarded, as before
        os.close(fd)
        lock.unlink(missing_ok=True)
        yield
        return
    try:
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        yield
    finally:
        lock.unlink(missing_ok=True)  # while held: a run that opened it before cannot have locked it
        os.close(fd)
