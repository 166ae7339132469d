"""One run per output folder: a lock file naming the run that holds it, taken before anything is written.

Two launches on one ``output_dir`` would share a run id and overwrite each other's checkpoints. The lock is a
file created with O_EXCL (atomic on local filesystems) holding the owner's host, pid and process start time,
so a lock left by a dead process on this host is recognised as stale and taken over (with a warning). The
process holding it may take it again (a notebook that trains twice).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from pathlib import Path

import psutil

from callbacks.errors import CheckpointError

logger = logging.getLogger(__name__)
LOCK_NAME = "run.lock"


def this_process() -> dict:
    """Host, pid and process start time: who holds a lock or a lease, recognisable once that process is gone."""
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "process_started": psutil.Process(pid).create_time()}


def _me(recipe: str) -> dict:
    locked_at = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    return {"recipe": recipe, **this_process(), "locked_at": locked_at}


def process_alive(owner: dict) -> bool:
    """Whether the owner may still run: always on another host (unknowable), else its exact process exists."""
    if owner.get("host") != socket.gethostname():
        return True
    try:
        return psutil.Process(owner["pid"]).create_time() == owner.get("process_started")
    except (psutil.NoSuchProcess, KeyError, TypeError):
        return False


class OutputLock:
    """The lock on one output folder, at ``output_dir/<lock_dir>/run.lock``; ``release()`` (idempotent) frees it."""

    def __init__(self, output_dir: Path, lock_dir: str, recipe: str):
        self.output_dir, self.held = Path(output_dir), False
        self.path = self.output_dir / lock_dir / LOCK_NAME
        # Folders made for the lock alone are removed with it, so a refused run leaves no trace.
        self.created = [p for p in (self.path.parent, *self.path.parent.parents) if not p.exists()]
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._take(_me(recipe))
        except OSError as e:  # a file where the folder should be, a read-only disk
            raise CheckpointError(
                f"trainer.output_dir {self.output_dir} cannot be written ({e.strerror}: {e.filename}). "
                "Set trainer.output_dir to a writable folder."
            ) from None

    def _take(self, me: dict) -> None:
        for _ in range(2):  # a second try after removing a stale lock
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                owner = self._owner()
                mine = owner is not None and all(
                    owner.get(k) == me[k] for k in ("host", "pid", "process_started")
                )
                if owner is not None and not mine and process_alive(owner):
                    raise CheckpointError(self._refusal(owner)) from None
                if not mine:  # this process's own lock (a notebook training twice) is simply taken again
                    logger.warning(
                        "Taking over %s: the run that took it (%s) is no longer running", self.path, owner
                    )
                self.path.unlink(missing_ok=True)
                continue
            with os.fdopen(fd, "w") as handle:
                json.dump(me, handle)
            self.held = True
            return
        raise CheckpointError(
            f"Could not take the lock {self.path}: another launch took it at the same moment."
        )

    def _owner(self) -> dict | None:
        try:
            return json.loads(self.path.read_text())
        except (OSError, json.JSONDecodeError):  # half written by a launch that died at once: stale
            return None

    def _refusal(self, owner: dict) -> str:
        where = "this machine" if owner.get("host") == socket.gethostname() else f"host {owner.get('host')}"
        return (
            f"{self.output_dir} is in use by another run of recipe {owner.get('recipe')!r} (pid {owner.get('pid')} on {where}, "
            f"since {owner.get('locked_at')}): two runs on one output folder overwrite each other's checkpoints. "
            f"Wait for it to end, or set trainer.output_dir to another folder. If that run is gone (a lost "
            f"machine), delete {self.path}."
        )

    def release(self) -> None:
        if self.held:
            self.path.unlink(missing_ok=True)
            self.held = False
            for folder in self.created:  # deepest first; kept when the run wrote anything there
                if folder.is_dir() and not any(folder.iterdir()):
                    folder.rmdir()
