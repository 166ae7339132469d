"""Deleting a store's checkpoints: one at a time (only the files this project wrote), and retention's keep-last-N."""

from __future__ import annotations

import logging
from collections.abc import Collection

from callbacks.manifest import MANIFEST_NAME
from callbacks.remote import RemoteCheckpoint, quarantine_checkpoint, scan_remote, written_by_us
from callbacks.stores import Store
from common.wording import counted

logger = logging.getLogger(__name__)


def delete_checkpoint(store: Store, ckpt: RemoteCheckpoint) -> tuple[list[str], str | None]:
    """Delete the files this project wrote in a checkpoint folder, the manifest first so it is never seen
    half-deleted as complete. Anything else there (a user's file, or a partial upload of a version without upload
    markers) is moved aside to quarantine/, never deleted.

    Returns:
        (the files deleted, the quarantine key of what was moved aside, or None).
    """
    ours = sorted(written_by_us(store, ckpt), key=lambda rel: rel != MANIFEST_NAME)
    for batch in (ours[:1], ours[1:]):
        store.delete([f"{ckpt.name}/{rel}" for rel in batch])
    foreign = {rel: size for rel, size in ckpt.files.items() if rel not in ours}
    if not foreign:
        return ours, None
    aside = quarantine_checkpoint(store, RemoteCheckpoint(ckpt.name, ckpt.step, foreign))
    logger.warning(
        "%s holds %s that no manifest or upload marker shows this project wrote (%s): moved aside to %s, not "
        "deleted",
        store.child_uri(ckpt.name), counted(len(foreign), "file"), ", ".join(sorted(foreign)[:5]), store.child_uri(aside),
    )  # fmt: skip
    return ours, aside


def apply_retention(store: Store, keep_last: int, *, protect: Collection[str] = ()) -> list[str]:
    """Delete all but the newest ``keep_last`` complete checkpoints, and unfinished uploads older than the newest.

    The newest complete checkpoint, and the ones named in ``protect`` (the run's best), are never deleted, nor is
    a file this project did not write (:func:`delete_checkpoint`). Returns the names deleted.
    """
    checkpoints = scan_remote(store, read_manifests=False)
    complete = [c for c in checkpoints if MANIFEST_NAME in c.files]
    if not complete:
        return []
    newest = complete[0].step
    doomed = [c for c in complete[max(keep_last, 1) :] if c.name not in protect] + [
        c for c in checkpoints if MANIFEST_NAME not in c.files and c.step < newest
    ]
    for ckpt in doomed:
        delete_checkpoint(store, ckpt)
    if doomed:
        logger.info(
            "Retention (keep_last=%d) deleted %s from %s",
            keep_last,
            ", ".join(c.name for c in doomed),
            store.uri,
        )
    return [c.name for c in doomed]
