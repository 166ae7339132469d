"""One call from a checkpoint path or URI to a local folder with a verified adapter (evaluation, notebooks).

from callbacks.checkpoint_sync import fetch_checkpoint
adapter = fetch_checkpoint("s3://bucket/runs/llama")              # the run's newest complete checkpoint
adapter = fetch_checkpoint("s3://bucket/runs/llama/checkpoint-800")
adapter = fetch_checkpoint("s3://bucket/runs/llama/best")         # the highest held-out accuracy
adapter = fetch_checkpoint("outputs/gsm8k_llama")                 # a local run folder or checkpoint
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from callbacks.best import names_best_pointer, resolve_best
from callbacks.download import CorruptCheckpoint, download_checkpoint
from callbacks.errors import CheckpointError
from callbacks.local import saved_beside
from callbacks.manifest import (
    checkpoint_step,
    list_files,
    read_local_manifest,
    verify_folder,
    weight_problems,
)
from callbacks.remote import RemoteCheckpoint, none_complete, open_source, scan_readable
from callbacks.stores import Store, is_remote

logger = logging.getLogger(__name__)


def cache_root() -> Path:
    """Where fetched checkpoints are kept: ``$GRPO_RECIPES_CACHE/checkpoints`` (default ~/.cache/grpo-recipes)."""
    return Path(os.environ.get("GRPO_RECIPES_CACHE", Path.home() / ".cache" / "grpo-recipes")) / "checkpoints"


def adapter_problems(folder: Path) -> list[str]:
    """Why a local folder holds no usable weights: missing files, or files that differ from its manifest."""
    manifest, reason = read_local_manifest(folder)
    if reason:
        return [reason]
    problems = verify_folder(folder, manifest) if manifest else []
    return problems + weight_problems(list_files(folder))


def fetch_checkpoint(
    path_or_uri: str | os.PathLike, *, endpoint_url: str | None = None, dest: str | os.PathLike | None = None
) -> Path:
    """A local folder holding a verified adapter (or full model) from a checkpoint path or URI.

    Args:
        path_or_uri: A local folder (a final output_dir, a checkpoint-N, or a run folder holding checkpoint-N
            folders: its newest usable one), or ``s3://``/``file://`` URI of a checkpoint-N or a run prefix
            (its newest complete checkpoint). A path or URI ending in ``/best`` is the checkpoint the run's
            ``best`` pointer names (the highest held-out accuracy).
        endpoint_url: S3-compatible endpoint for ``s3://`` URIs (MinIO, R2).
        dest: Folder to download into (default: a cache folder under ~/.cache/grpo-recipes/checkpoints).
            Reused when it already holds a verified copy of the same checkpoint.

    Returns:
        The local folder. Remote downloads skip optimizer, scheduler and RNG state.

    Raises:
        CheckpointError: Nothing usable there, or the download failed; the message says why.
    """
    if names_best_pointer(str(path_or_uri)):
        return _fetch_best(str(path_or_uri), endpoint_url, Path(dest) if dest else None)
    if is_remote(str(path_or_uri)):
        return _fetch_remote(str(path_or_uri), endpoint_url, Path(dest) if dest else None)
    path = Path(path_or_uri).expanduser()
    if not path.is_dir():
        raise CheckpointError(
            f"{path} is not a folder (expected a checkpoint or run folder, or an s3:// or file:// URI).{saved_beside(path)}"
        )
    if (path / "adapter_config.json").is_file() or checkpoint_step(path.name) is not None:
        problems = adapter_problems(path)
        if problems:
            raise CheckpointError(f"{path} has no usable weights: {'; '.join(problems)}")
        return path
    checkpoints = sorted(
        (p for p in path.iterdir() if checkpoint_step(p.name) is not None),
        key=lambda p: checkpoint_step(p.name),
        reverse=True,
    )
    for folder in checkpoints:
        problems = adapter_problems(folder)
        if not problems:  # say which step: a run's output_dir without its final adapter is an unfinished run
            # A run writes recipe.yaml into its output_dir first; a store's folder holds checkpoints alone.
            what = (
                "holds no final adapter (unfinished run?)"
                if (path / "recipe.yaml").is_file()
                else "holds checkpoints"
            )
            logger.info("%s %s: using its newest usable %s", path, what, folder.name)
            return folder
        logger.warning("Skipping %s: %s", folder, "; ".join(problems))
    # What recipes/export.py writes (and any downloaded model): a whole model, which is loaded as the base instead.
    whole = (path / "config.json").is_file() and not checkpoints
    raise CheckpointError(
        f"{path} holds no adapter and no usable checkpoint-N folder"
        + (
            f"; it holds a whole model (config.json), a merged export say: use it as model.name_or_path={path}"
            if whole
            else ""
        )
    )


def _fetch_best(location: str, endpoint_url: str | None, dest: Path | None) -> Path:
    store, ckpt = resolve_best(location, endpoint_url)
    if is_remote(location):
        return _local_copy(store, ckpt, dest)
    folder = Path(store.root) / ckpt.name  # a local run folder: its checkpoint is used in place
    problems = adapter_problems(folder)
    if problems:
        raise CheckpointError(
            f"{location} names {folder}, which has no usable weights: {'; '.join(problems)}"
        )
    return folder


def _local_copy(store: Store, ckpt: RemoteCheckpoint, dest: Path | None) -> Path:
    """A verified local copy of a complete checkpoint at ``dest`` (or in the cache): the one already there, or a
    download.

    Raises:
        CorruptCheckpoint: The download does not match the manifest.
    """
    target = dest or cache_root() / re.sub(r"[^A-Za-z0-9._-]+", "_", store.uri) / ckpt.name
    if target.exists() and read_local_manifest(target)[0] is None:
        raise CheckpointError(f"{target} exists and is not a fetched checkpoint; choose another dest")
    return download_checkpoint(store, ckpt, target, training_state=False)  # reuses a verified copy there


def _fetch_remote(uri: str, endpoint_url: str | None, dest: Path | None) -> Path:
    store, wanted = open_source(uri, endpoint_url)
    found = scan_readable(store)
    for ckpt in found:
        if wanted is not None and ckpt.step != wanted:
            continue
        if ckpt.problems:
            if wanted is not None:
                raise CheckpointError(f"Cannot fetch {uri}: {'; '.join(ckpt.problems)}")
            logger.warning("Skipping %s: %s", store.child_uri(ckpt.name), "; ".join(ckpt.problems))
            continue
        try:
            return _local_copy(store, ckpt, dest)
        except CorruptCheckpoint as e:
            if wanted is not None:
                raise
            logger.warning("Skipping it: %s", e)
    raise CheckpointError(none_complete("fetch", uri, store, found, wanted))
