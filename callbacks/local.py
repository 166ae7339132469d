"""The output folder's side of checkpointing: its ``checkpoint-N`` folders, the run marker, and clearing a folder a
launch will not use (the run's own copy is deleted; one that may hold the user's files is moved to quarantine)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from callbacks.manifest import checkpoint_step, file_entries, local_checkpoint_problems, read_local_manifest
from callbacks.remote import QUARANTINE

logger = logging.getLogger(__name__)
SYNC_DIR = ".checkpoint_sync"  # inside output_dir: run marker, staging copies, quarantine


@dataclass
class LocalCheckpoint:
    folder: Path
    step: int
    problems: list[str] = field(default_factory=list)


def scan_local(folder: Path) -> list[LocalCheckpoint]:
    """The ``checkpoint-N`` folders directly under ``folder``, newest first, with why each cannot be resumed."""
    found = [
        LocalCheckpoint(p, step, local_checkpoint_problems(p))
        for p in (folder.iterdir() if folder.is_dir() else [])
        if (step := checkpoint_step(p.name)) is not None and p.is_dir()
    ]
    return sorted(found, key=lambda c: c.step, reverse=True)


def read_marker(output_dir: Path, field: str = "run_id") -> str | None:
    """The run id that wrote the checkpoints in ``output_dir`` (or the ``uri`` of its store), if recorded."""
    path = output_dir / SYNC_DIR / "run.json"
    return json.loads(path.read_text()).get(field) if path.is_file() else None


def write_marker(output_dir: Path, run_id: str, uri: str | None) -> None:
    path = output_dir / SYNC_DIR / "run.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(".run.json.tmp")
    tmp.write_text(json.dumps({"run_id": run_id, "uri": uri}))
    os.replace(tmp, path)


def set_aside(folder: Path, why: str) -> Path | None:
    """Clear a local folder this launch will not use; returns where it was moved, or None when deleted.

    Deleted when every file in it is one its manifest lists, as the manifest describes it (the run's own copy,
    perhaps missing files: keeping such copies would fill the disk at every relaunch); otherwise moved to
    ``.checkpoint_sync/quarantine/`` beside it, never deleted, since a folder without a manifest or with files it
    does not list may hold the user's, and an altered file is the evidence of what went wrong.
    """
    if _the_runs_own(folder):
        # Renamed first: a kill mid-delete leaves a name the next launch clears (download.clear_download_leftovers).
        doomed = folder.with_name(f".{folder.name}.replaced-{uuid.uuid4().hex[:8]}")
        folder.rename(doomed)
        shutil.rmtree(doomed)
        logger.info(
            "Deleted local %s (%s): every file in it was the run's, listed by its manifest", folder, why
        )
        return None
    stamp = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{uuid.uuid4().hex[:4]}"
    aside = folder.parent / SYNC_DIR / QUARANTINE / f"{folder.name}-{stamp}"
    aside.parent.mkdir(parents=True, exist_ok=True)
    folder.rename(aside)
    held = [p for p in aside.parent.rglob("*") if p.is_file()]
    logger.warning(
        "Moved local %s aside to %s: %s. It holds files no manifest of the run lists (perhaps yours). %s holds "
        "%d folders (%.2f GB): delete them once looked at.",
        folder.name, aside, why, aside.parent,
        sum(1 for p in aside.parent.iterdir() if p.is_dir()), sum(p.stat().st_size for p in held) / 2**30,
    )  # fmt: skip
    return aside


def _the_runs_own(folder: Path) -> bool:
    manifest, _ = read_local_manifest(folder)
    return manifest is not None and all(
        manifest["files"].get(rel) == entry for rel, entry in file_entries(folder).items()
    )


def saved_beside(path: Path) -> str:
    """' RUN holds checkpoint-4, checkpoint-18: ...' for a checkpoint-N that is not there (a step never saved,
    or one retention deleted) beside others; else ''."""
    if checkpoint_step(path.name) is None or not path.parent.is_dir():
        return ""
    steps = sorted(
        s for p in path.parent.iterdir() if p.is_dir() and (s := checkpoint_step(p.name)) is not None
    )
    if not steps:
        return ""
    shown = ", ".join(f"checkpoint-{s}" for s in steps)
    return (
        f" {path.parent} holds {shown}: name one of those, or {path.parent} itself (its newest complete one)."
    )
