"""Checkpoints in a store: scan, commit (files, then the manifest last), quarantine; callbacks/retention.py deletes."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import secrets
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

from tqdm.auto import tqdm

from callbacks.errors import CheckpointError
from callbacks.manifest import (
    MANIFEST_NAME,
    checkpoint_step,
    listing_mismatches,
    listing_problems,
    manifest_bytes,
    manifest_problems,
    parse_manifest,
    same_contents,
)
from callbacks.stores import Store, open_store

logger = logging.getLogger(__name__)
QUARANTINE = "quarantine"  # beside the checkpoints: committed ones that failed verification, kept for a look
# Inside a checkpoint: the other machines' receipts for their files (callbacks/machines.py).
PARTS_DIR = ".parts"
# Inside a checkpoint while it uploads: the files the upload writes. A folder without a manifest may hold a user's
# files (a mounted folder is theirs too); only what a manifest or this marker lists is ever deleted.
UPLOAD_MARKER = ".grpo-recipes-upload.json"
_TRAINING_STATE = re.compile(
    r"^(optimizer.*|scheduler\.pt|scaler\.pt|rng_state(_\d+)?\.pth|global_step\d+/.*|latest)$"
)


def is_training_state(rel: str) -> bool:
    """Whether a checkpoint file only matters for resuming training (optimizer, scheduler, RNG), not inference."""
    return bool(_TRAINING_STATE.match(rel))


@dataclass
class RemoteCheckpoint:
    """One ``checkpoint-N`` folder in a store, with its manifest (if any) and why it is unusable (if it is)."""

    name: str
    step: int
    files: dict[str, int] = field(default_factory=dict)  # relative to the checkpoint folder -> size
    manifest: dict | None = None
    problems: list[str] = field(default_factory=list)
    manifest_sha256: str | None = None  # of the manifest's bytes as stored: names this exact commit

    @property
    def complete(self) -> bool:
        return self.manifest is not None and not self.problems

    @property
    def run_id(self) -> str | None:
        return self.manifest.get("run_id") if self.manifest else None


def scan_remote(store: Store, *, read_manifests: bool = True) -> list[RemoteCheckpoint]:
    """Every checkpoint folder in the store, newest first, judged complete or not from manifest and listing."""
    found: dict[str, RemoteCheckpoint] = {}
    for key, size in store.list().items():
        name, _, rel = key.partition("/")
        step = checkpoint_step(name)
        if step is not None and rel:
            found.setdefault(name, RemoteCheckpoint(name, step)).files[rel] = size
    for ckpt in found.values():
        if MANIFEST_NAME not in ckpt.files:
            ckpt.problems = ["no manifest (upload never finished)"]
        elif read_manifests:
            data = store.read_bytes(f"{ckpt.name}/{MANIFEST_NAME}") or b""
            ckpt.manifest_sha256 = hashlib.sha256(data).hexdigest()
            ckpt.manifest, reason = parse_manifest(data, store.child_uri(f"{ckpt.name}/{MANIFEST_NAME}"))
            ckpt.problems = (
                [reason]
                if reason
                else manifest_problems(ckpt.manifest, ckpt.step) + listing_problems(ckpt.manifest, ckpt.files)
            )
    return sorted(found.values(), key=lambda c: c.step, reverse=True)


def source_uri(uri: str) -> tuple[str, int | None]:
    """The URI of the store a checkpoint URI is in (its run's), and the step it names or None for a whole run."""
    name = urlparse(uri).path.rstrip("/").rsplit("/", 1)[-1]
    step = checkpoint_step(name)
    return (uri.rstrip("/")[: -len(name) - 1] if step is not None else uri), step


def open_source(uri: str, endpoint_url: str | None) -> tuple[Store, int | None]:
    """The store of a checkpoint URI, and the step it names (``.../checkpoint-N``) or None for a whole run."""
    base, step = source_uri(uri)
    return open_store(base, endpoint_url if uri.startswith("s3://") else None), step


def scan_readable(store: Store) -> list[RemoteCheckpoint]:
    """:func:`scan_remote`, with storage errors (credentials, missing bucket) turned into a CheckpointError."""
    try:
        return scan_remote(store)
    except CheckpointError:
        raise
    except Exception as e:
        raise CheckpointError(store.explain(e, "list checkpoints")) from e


def none_complete(
    action: str, uri: str, store: Store, found: list[RemoteCheckpoint], wanted: int | None
) -> str:
    """Why ``uri`` gave nothing to ``action`` ("fetch", "resume from"), with what its store holds instead."""
    complete = [c.name for c in sorted(found, key=lambda c: c.step) if not c.problems]
    if wanted is not None and complete:  # a step that is not there: name the ones that are
        hint = (
            f"{store.uri} holds {', '.join(complete)}: name one of those, or {store.uri} itself (its newest "
            "complete one)"
        )
    elif not found:
        hint = (
            f"{store.uri} holds no checkpoint-N folder: check the bucket and the prefix (the training run's "
            "checkpoint.uri)"
        )
    else:
        hint = ""  # each one skipped was logged with its problems
    return f"Cannot {action} {uri}: no complete checkpoint there" + (f"; {hint}" if hint else "")


def written_by_us(store: Store, ckpt: RemoteCheckpoint) -> set[str]:
    """The files of a checkpoint folder this project wrote: those its manifest or upload marker lists, the two
    themselves and the machines' receipts; anything else there is someone else's."""
    ours = {
        rel for rel in ckpt.files if rel in (MANIFEST_NAME, UPLOAD_MARKER) or rel.startswith(f"{PARTS_DIR}/")
    }
    manifest = ckpt.manifest
    if manifest is None and MANIFEST_NAME in ckpt.files:
        key = f"{ckpt.name}/{MANIFEST_NAME}"
        manifest, _ = parse_manifest(store.read_bytes(key) or b"", store.child_uri(key))
    # The other machines' files, listed by their markers and receipts in .parts/ (callbacks/machines.py).
    parts = {
        rel
        for marker in ours
        if marker.startswith(f"{PARTS_DIR}/")
        for rel in _listed(store, ckpt.name, marker)
    }
    found = ours | parts | set(manifest["files"] if manifest else ()) | _marked(store, ckpt.name, ckpt.files)
    return found & set(ckpt.files)


def _marked(store: Store, name: str, files: Collection[str]) -> set[str]:
    """The files an upload of ours into ``name`` wrote or was about to write, from its marker."""
    return _listed(store, name, UPLOAD_MARKER) if UPLOAD_MARKER in files else set()


def _listed(store: Store, name: str, marker: str) -> set[str]:
    """The files a marker or receipt (``{"files": [...]}``) in checkpoint ``name`` lists."""
    try:
        listed = json.loads(store.read_bytes(f"{name}/{marker}") or b"{}")["files"]
    except (ValueError, KeyError, TypeError):
        return set()  # damaged, or an error receipt: nothing it names is provably ours
    return {rel for rel in listed if isinstance(rel, str)}


def quarantine_checkpoint(store: Store, ckpt: RemoteCheckpoint) -> str:
    """Move a committed but unusable checkpoint aside, to ``quarantine/<name>-<time>-<4 hex>/``, keeping the evidence.

    The manifest moves first, so the folder stops looking complete before any file leaves. Returns the key.
    """
    # A random tail too: two launches within a second must not write one quarantine over the other.
    aside = (
        f"{QUARANTINE}/{ckpt.name}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{secrets.token_hex(2)}"
    )
    for rel in sorted(ckpt.files, key=lambda rel: rel != MANIFEST_NAME):
        store.move(f"{ckpt.name}/{rel}", f"{aside}/{rel}")
    return aside


def set_aside_theirs(store: Store, ckpt: RemoteCheckpoint, writes: Collection[str]) -> None:
    """Before an upload into ``ckpt`` (its current listing): move to quarantine/ the files at the names it
    ``writes`` that this project did not write, so an upload never writes over someone else's file."""
    ours = written_by_us(store, ckpt)
    if theirs := {rel: ckpt.files[rel] for rel in writes if rel in ckpt.files and rel not in ours}:
        aside = quarantine_checkpoint(store, RemoteCheckpoint(ckpt.name, ckpt.step, theirs))
        logger.warning(
            "%s holds %s, not written by this project, where this upload writes: moved aside to %s, not overwritten",
            store.child_uri(ckpt.name), ", ".join(sorted(theirs)), store.child_uri(aside),
        )  # fmt: skip


def commit_checkpoint(
    store: Store,
    folder: Path,
    manifest: dict,
    *,
    progress: bool = False,
    others: Collection[str] = (),
    wait_for_others: Callable[[], None] | None = None,
) -> bool:
    """Upload a checkpoint folder's files, then its manifest; returns False if it was already committed.

    Args:
        others: Files of the manifest that other machines upload (callbacks/machines.py), not in ``folder``.
        wait_for_others: Returns once they are in the store (raises if they will not be); called before the
            listing is checked and the manifest written.

    Raises:
        CheckpointError: The store already holds a different commit of this step, or an upload came out short.
    """
    name = f"checkpoint-{manifest['step']}"
    manifest_key = f"{name}/{MANIFEST_NAME}"
    existing = {k.partition("/")[2]: size for k, size in store.list(name).items()}
    if MANIFEST_NAME in existing:
        _require_same_commit(store, manifest_key, manifest)
        _repair(store, folder, name, manifest, existing, others)
        return False
    earlier = _marked(store, name, existing)  # what an unfinished upload of ours left here
    # The other machines' names are theirs to clear (upload_part): a listing taken here may predate their upload.
    mine = [rel for rel in manifest["files"] if rel not in others]
    set_aside_theirs(store, RemoteCheckpoint(name, manifest["step"], existing), mine)
    marker = {"run_id": manifest["run_id"], "files": sorted(earlier | set(manifest["files"]))}
    store.write_bytes(f"{name}/{UPLOAD_MARKER}", json.dumps(marker).encode())
    total = sum(entry["size"] for entry in manifest["files"].values())
    with tqdm(total=total, unit="B", unit_scale=True, desc=f"upload {name}", disable=not progress) as bar:
        for rel in manifest["files"]:
            if rel not in others:
                store.upload(folder / rel, f"{name}/{rel}", progress=bar.update)
    if wait_for_others:
        wait_for_others()
    # Objects an earlier, unfinished upload of ours left at this step are not part of this checkpoint; neither are
    # the other machines' receipts, once read. Files we did not write stay.
    stale = [f"{name}/{rel}" for rel in existing if rel in earlier and rel not in manifest["files"]]
    stale += [k for k in store.list(f"{name}/{PARTS_DIR}") if k not in stale]
    if stale:
        store.delete(stale)
    uploaded = {k.partition("/")[2]: size for k, size in store.list(name).items()}
    problems = listing_problems(manifest, uploaded)
    if problems:
        raise CheckpointError(f"Upload of {store.child_uri(name)} came out wrong: {'; '.join(problems)}")
    written = store.write_bytes(manifest_key, manifest_bytes(manifest), if_absent=True)
    if not written:  # a retried write whose first attempt landed, or another writer: only the former is fine
        _require_same_commit(store, manifest_key, manifest)
    store.delete([f"{name}/{UPLOAD_MARKER}"])  # committed: the manifest now says which files are ours
    return written


def _require_same_commit(store: Store, manifest_key: str, manifest: dict) -> None:
    current, reason = parse_manifest(store.read_bytes(manifest_key) or b"", store.child_uri(manifest_key))
    if current is not None and same_contents(current, manifest):
        return
    owner = f"run {current['run_id']!r}" if current else f"an unreadable manifest ({reason})"
    raise CheckpointError(
        f"{store.child_uri(manifest_key)} already exists, written by {owner} with different contents; "
        "refusing to overwrite a committed checkpoint. Use another checkpoint.uri, or overwrite: true."
    )


def _repair(
    store: Store, folder: Path, name: str, manifest: dict, listing: dict[str, int], others: Collection[str]
) -> None:
    """Upload again the objects of a committed checkpoint that are missing or truncated in the store. The local
    copy's manifest equals the stored one (hashes included), so its files are the committed bytes."""
    bad = listing_mismatches(manifest, listing)
    if not bad:
        return
    where = store.child_uri(name)
    logger.warning(
        "%s was committed, but %s: uploading them again from %s", where, "; ".join(bad.values()), folder
    )
    if lost := sorted(set(bad) & set(others)):
        raise CheckpointError(
            f"{where} is damaged ({', '.join(lost)}), and those are another machine's files: resume from an "
            "earlier checkpoint, or move this one aside to quarantine/."
        )
    for rel in bad:
        store.upload(folder / rel, f"{name}/{rel}")
    if problems := listing_problems(manifest, {k.partition("/")[2]: n for k, n in store.list(name).items()}):
        raise CheckpointError(f"Repair of {where} came out wrong: {'; '.join(problems)}")
