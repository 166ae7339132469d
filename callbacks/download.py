"""Downloading a committed checkpoint: into a temporary folder, verified against its manifest, then renamed."""

from __future__ import annotations

import logging
import re
import shutil
import uuid
from pathlib import Path

from tqdm.auto import tqdm

from callbacks.errors import CheckpointError
from callbacks.local import set_aside
from callbacks.manifest import (
    MANIFEST_NAME,
    manifest_bytes,
    read_local_manifest,
    same_contents,
    verify_folder,
)
from callbacks.remote import RemoteCheckpoint, is_training_state
from callbacks.stores import Store

logger = logging.getLogger(__name__)
# download_checkpoint's temporaries beside ``dest``, and the folders local.set_aside renames to delete, by their
# exact names: what a kill mid-download or mid-delete leaves.
_DOWNLOAD_TEMPORARY = re.compile(r"^\.checkpoint-\d+\.(download|replaced)-[0-9a-f]{8}$")


def clear_download_leftovers(folder: Path) -> list[str]:
    """Remove the temporary folders a killed :func:`download_checkpoint` left in ``folder``; returns their names.

    Call it only while no download into ``folder`` can run (the output folder's lock is held).
    """
    found = [p for p in (folder.iterdir() if folder.is_dir() else []) if _DOWNLOAD_TEMPORARY.match(p.name)]
    for path in found:
        shutil.rmtree(path, ignore_errors=True)
    if found:
        logger.info(
            "Removed %s in %s, left by a download that was killed", ", ".join(p.name for p in found), folder
        )
    return [p.name for p in found]


class CorruptCheckpoint(CheckpointError):
    """A downloaded checkpoint does not match its manifest."""


def download_checkpoint(
    store: Store, ckpt: RemoteCheckpoint, dest: Path, *, training_state: bool = True
) -> Path:
    """Download a complete checkpoint to ``dest`` atomically: into a temporary folder, verify, then rename.

    Args:
        store: Where the checkpoint is.
        ckpt: A complete checkpoint from :func:`scan_remote`.
        dest: Final local folder. One already there is used as it is when it verifies against this manifest,
            and otherwise cleared (:func:`set_aside`) once the download has verified.
        training_state: Also download optimizer, scheduler and RNG state (needed to resume, not to evaluate).

    Raises:
        CorruptCheckpoint: A file's size or SHA-256 differs from the manifest.
        CheckpointError: A transfer failed (network, permissions); nothing is left at ``dest``.
    """
    files = {
        rel: e for rel, e in ckpt.manifest["files"].items() if training_state or not is_training_state(rel)
    }
    manifest = {**ckpt.manifest, "files": files}
    if dest.exists() and _holds(dest, manifest):
        logger.info("%s already holds %s, verified: not downloaded again", dest, store.child_uri(ckpt.name))
        return dest
    tmp = dest.parent / f".{dest.name}.download-{uuid.uuid4().hex[:8]}"
    try:
        with tqdm(
            total=sum(e["size"] for e in files.values()),
            unit="B",
            unit_scale=True,
            desc=f"download {ckpt.name}",
        ) as bar:
            for rel in files:
                (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
                try:
                    store.download(f"{ckpt.name}/{rel}", tmp / rel, progress=bar.update)
                except CheckpointError:
                    raise
                except Exception as e:
                    raise CheckpointError(
                        f"Could not download {store.child_uri(f'{ckpt.name}/{rel}')}: {e}"
                    ) from e
        problems = verify_folder(tmp, manifest)
        if problems:
            raise CorruptCheckpoint(f"{store.child_uri(ckpt.name)} is corrupt: {'; '.join(problems)}")
        (tmp / MANIFEST_NAME).write_bytes(manifest_bytes(manifest))
        if dest.exists():
            set_aside(dest, f"replaced by {store.child_uri(ckpt.name)}, downloaded and verified")
        tmp.rename(dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def _holds(folder: Path, manifest: dict) -> bool:
    """Whether a local folder is a verified copy of the checkpoint this manifest describes."""
    held, _ = read_local_manifest(folder)
    return held is not None and same_contents(held, manifest) and not verify_folder(folder, manifest)
