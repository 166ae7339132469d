"""The ``best`` pointer: which complete checkpoint of a run has the highest held-out accuracy.

It is an object (a file in a folder store) named ``best`` beside the ``checkpoint-N`` folders:

    {"format": "grpo-recipes-best/1", "checkpoint": "checkpoint-300", "step": 300, "heldout_accuracy": 0.31,
     "run_id": "...", "manifest_sha256": "<SHA-256 of that checkpoint's manifest as stored>"}

The best checkpoint is derived from the committed manifests every time, never remembered: a crash between a
checkpoint's manifest and the pointer leaves the old pointer naming a complete checkpoint, and the next update
heals it. ``fetch_checkpoint("s3://bucket/run/best")`` (or ``file://.../best``, or ``outputs/run/best``)
resolves it.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from urllib.parse import urlparse

from callbacks.errors import CheckpointError
from callbacks.local import read_marker
from callbacks.manifest import checkpoint_step
from callbacks.remote import RemoteCheckpoint, scan_readable
from callbacks.stores import FolderStore, Store, open_store
from common.ranking import best_by_accuracy

logger = logging.getLogger(__name__)
BEST_NAME = "best"
POINTER_FORMAT = "grpo-recipes-best/1"


def heldout_accuracy(ckpt: RemoteCheckpoint) -> float | None:
    """The held-out accuracy a checkpoint's manifest records, or None (no manifest, no evaluation, or one the
    grader settled no sample of: such a checkpoint is never the best)."""
    heldout = (ckpt.manifest or {}).get("heldout")
    accuracy = heldout.get("accuracy") if isinstance(heldout, dict) else None
    return float(accuracy) if isinstance(accuracy, int | float) and not isinstance(accuracy, bool) else None


def choose_best(checkpoints: list[RemoteCheckpoint]) -> RemoteCheckpoint | None:
    """The complete checkpoint with the highest held-out accuracy (ties: the earliest step), or None."""
    rated = [c for c in checkpoints if c.complete and heldout_accuracy(c) is not None]
    return best_by_accuracy(rated, lambda c: (heldout_accuracy(c), c.step))


def parse_pointer(data: bytes, where: str) -> tuple[dict | None, str | None]:
    """Parse pointer bytes; returns ``(pointer, None)`` or ``(None, reason it is not a pointer)``."""
    try:
        pointer = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        return None, f"{where} is not valid JSON ({e})"
    if not (
        isinstance(pointer, dict)
        and pointer.get("format") == POINTER_FORMAT
        and checkpoint_step(str(pointer.get("checkpoint"))) == pointer.get("step")
        and isinstance(pointer.get("manifest_sha256"), str)
    ):
        return None, f"{where} is not a {POINTER_FORMAT} pointer written by grpo-recipes"
    return pointer, None


def read_best_pointer(store: Store) -> dict | None:
    """The store's ``best`` pointer, or None when it has none.

    Raises:
        CheckpointError: The store cannot be read, or ``best`` there is not a pointer.
    """
    data = _read(store)
    if data is None:
        return None
    pointer, reason = parse_pointer(data, store.child_uri(BEST_NAME))
    if reason:
        raise CheckpointError(f"{reason}; pass a checkpoint-N or the run prefix instead")
    return pointer


def update_best_pointer(store: Store) -> dict | None:
    """Derive the best complete checkpoint from the store's manifests and write the pointer if it changed.

    A pointer is removed once no complete checkpoint has a held-out accuracy (say, all were deleted). A ``best`` object
    that is not a pointer is never overwritten: a warning says so.

    Returns:
        The pointer now in the store, or None when no complete checkpoint has a held-out accuracy.
    """
    data = _read(store)
    current, reason = parse_pointer(data, store.child_uri(BEST_NAME)) if data is not None else (None, None)
    if reason:
        logger.warning("%s; leaving it alone, so the best checkpoint is not recorded. Move it away.", reason)
        return None
    best = choose_best(scan_readable(store))
    if best is None:
        drop_best_pointer(store, current, "no complete checkpoint there has a held-out accuracy now")
        return None
    pointer = {
        "format": POINTER_FORMAT,
        "checkpoint": best.name,
        "step": best.step,
        "heldout_accuracy": heldout_accuracy(best),
        "run_id": best.run_id,
        "manifest_sha256": best.manifest_sha256,
    }
    if pointer != current:
        store.write_bytes(BEST_NAME, json.dumps(pointer, indent=1).encode())
        logger.info(
            "Best checkpoint: %s (held-out accuracy %.1f%%), recorded in %s",
            best.name,
            100 * pointer["heldout_accuracy"],
            store.child_uri(BEST_NAME),
        )
    return pointer


def drop_best_pointer(store: Store, current: dict | None, why: str) -> None:
    """Remove the store's pointer ``current`` (as read; None: there is none), saying why."""
    if current is not None:
        logger.info("Removed %s (it named %s): %s", store.child_uri(BEST_NAME), current["checkpoint"], why)
        store.delete([BEST_NAME])


def update_local_best_pointer(output_dir: str, best_step: int | None, uri: str | None) -> dict | None:
    """``update_best_pointer`` for the local checkpoint folders, when the run's best checkpoint is among them.

    ``best_step`` is the run's best evaluated checkpoint over its whole history (the Trainer's
    ``best_global_step``, which a resume restores). After a resume on a new machine it may exist only in the
    store (``uri``): a pointer over the local folders alone would then name a worse checkpoint, so there is none.
    """
    store = FolderStore(output_dir)
    if best_step is None or (Path(output_dir) / f"checkpoint-{best_step}").is_dir():
        return update_best_pointer(store)
    data = _read(store)
    current = parse_pointer(data, store.child_uri(BEST_NAME))[0] if data is not None else None  # ours only
    elsewhere = f"{uri.rstrip('/')}/{BEST_NAME}" if uri else "no store holds it"
    drop_best_pointer(
        store, current, f"the run's best, checkpoint-{best_step}, is not on this machine ({elsewhere})"
    )
    return None


def names_best_pointer(location: str) -> bool:
    """Whether a checkpoint path or URI names a run's ``best`` pointer (``.../best``, not a folder so named)."""
    if urlparse(location).scheme in ("s3", "file"):
        return urlparse(location).path.rstrip("/").rsplit("/", 1)[-1] == BEST_NAME
    path = Path(location).expanduser()
    return path.name == BEST_NAME and not path.is_dir()


def best_run(location: str) -> str:
    """The run folder or URI whose ``best`` pointer ``location`` names."""
    return location.rstrip("/")[: -len(BEST_NAME)].rstrip("/") or "."


def resolve_best(location: str, endpoint_url: str | None = None) -> tuple[Store, RemoteCheckpoint]:
    """The store of a ``.../best`` path or URI and the complete checkpoint its pointer names.

    Raises:
        CheckpointError: No pointer there, or it names a checkpoint that is gone, incomplete or recommitted.
    """
    run = best_run(location)
    store = open_store(run, endpoint_url if run.startswith("s3://") else None)
    pointer = read_best_pointer(store)
    if pointer is None:
        synced = read_marker(Path(run), "uri") if isinstance(store, FolderStore) else None
        raise CheckpointError(
            f"{store.uri} has no best pointer: "
            + (
                f"this run syncs its checkpoints to {synced}, whose pointer names the best one wherever it was "
                f"saved: use {synced.rstrip('/')}/{BEST_NAME}"
                if synced
                else "the run has not evaluated held-out accuracy yet (recipe section heldout) or no checkpoint "
                "with one is complete; pass a checkpoint-N or the run prefix instead"
            )
        )
    named = store.child_uri(pointer["checkpoint"])
    ckpt = next((c for c in scan_readable(store) if c.name == pointer["checkpoint"]), None)
    if ckpt is None:
        problem = "which is gone (deleted since the pointer was written)"
    elif ckpt.problems:
        problem = f"which is incomplete ({'; '.join(ckpt.problems)})"
    elif ckpt.manifest_sha256 != pointer["manifest_sha256"]:
        problem = "whose manifest changed since the pointer was written (committed again by another run?)"
    else:
        return store, ckpt
    raise CheckpointError(
        f"{location} names {named}, {problem}. The run's next checkpoint save rewrites the pointer; "
        "meanwhile pass a checkpoint-N or the run prefix instead"
    )


def _read(store: Store) -> bytes | None:
    try:
        return store.read_bytes(BEST_NAME)
    except CheckpointError:
        raise
    except Exception as e:
        raise CheckpointError(store.explain(e, "read the best pointer")) from e
