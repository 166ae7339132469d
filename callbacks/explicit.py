"""An explicit ``checkpoint.resume``: a ``checkpoint-N`` (a URI or a folder), a run (its newest checkpoint that
verifies), or a run's ``best`` pointer. Found and its recipe vetted at once; downloaded only once the launch is
allowed (callbacks/resume.py), so a refused launch leaves the output folder as it was."""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from pathlib import Path

from callbacks.best import names_best_pointer, resolve_best
from callbacks.download import CorruptCheckpoint, download_checkpoint
from callbacks.errors import CheckpointError
from callbacks.local import LocalCheckpoint, saved_beside, scan_local
from callbacks.manifest import checkpoint_step, local_checkpoint_problems, read_local_manifest
from callbacks.recipe_check import RecipeVet
from callbacks.remote import RemoteCheckpoint, none_complete, open_source, scan_readable
from callbacks.stores import Store, is_remote
from common.suggestions import did_you_mean

logger = logging.getLogger(__name__)


def explicit_checkpoint(
    resume: str, *, endpoint_url: str | None, output_dir: Path, vet: RecipeVet
) -> tuple[Callable[[], Path], str | None]:
    """The checkpoint ``resume`` names: a callable that downloads it into ``output_dir`` (or returns a local one,
    used in place), and the run id its manifest records.

    Raises:
        CheckpointError: Nothing resumable there, or ``vet`` refuses the recipe the checkpoint was made with.
    """
    if names_best_pointer(resume):  # a run's .../best: the checkpoint its pointer names
        store, best = resolve_best(resume, endpoint_url)
        logger.info("checkpoint.resume=%s names %s", resume, store.child_uri(best.name))
        if is_remote(resume):
            return _remote(store, [best], resume, output_dir, vet)
        resume = str(Path(store.root) / best.name)  # a local run folder's checkpoint, used in place
    if is_remote(resume):
        source, wanted = open_source(resume, endpoint_url)
        usable, found = [], scan_readable(source)
        for c in found:
            if wanted is not None and c.step != wanted:
                continue
            if c.problems and wanted is not None:
                raise CheckpointError(f"Cannot resume from {resume}: {'; '.join(c.problems)}")
            if c.problems:
                logger.warning("Skipping %s: %s", source.child_uri(c.name), "; ".join(c.problems))
                continue
            usable.append(c)
        if not usable:
            raise CheckpointError(none_complete("resume from", resume, source, found, wanted))
        return _remote(source, usable, resume, output_dir, vet)
    path = Path(resume).expanduser()
    if refusal := missing_resume(resume):
        raise CheckpointError(refusal)
    step = checkpoint_step(path.name)
    candidates = (
        scan_local(path) if step is None else [LocalCheckpoint(path, step, local_checkpoint_problems(path))]
    )
    for c in candidates:
        if not c.problems:
            vet.local(c.folder)  # its own recipe.yaml, else its run folder's
            manifest, _ = read_local_manifest(c.folder)
            return partial(Path, c.folder), manifest.get("run_id") if manifest else None
        logger.warning("Skipping %s: %s", c.folder, "; ".join(c.problems))
    reasons = "; ".join(p for c in candidates for p in c.problems) or "no checkpoint-N folders in it"
    raise CheckpointError(f"Cannot resume from {path}: {reasons}")


def missing_resume(resume: str) -> str | None:
    """Why a local ``checkpoint.resume`` names nothing to resume (no such path), else None; nothing is read, so
    ``run.py --print`` asks it too."""
    path = Path(resume).expanduser()
    if path.exists():
        return None
    hint = did_you_mean(resume, ["latest", "never"]) or saved_beside(path)
    return (
        f"checkpoint.resume={resume!r} is not 'latest', 'never', an s3:// or file:// URI, an existing "
        f"checkpoint folder, or a run's best pointer (.../best).{hint}"
    )


def _remote(
    source: Store, candidates: list[RemoteCheckpoint], resume: str, output_dir: Path, vet: RecipeVet
) -> tuple[Callable[[], Path], str | None]:
    """Vet the newest candidate whose recipe.yaml is intact now, before the launch clears or writes anything (one
    that is not would fail the download's verification: skipped, or refused when it is the only one)."""
    candidates = list(candidates)
    while not vet.remote(source, candidates[0]):
        skipped = candidates.pop(0)
        if not candidates:
            raise CheckpointError(f"Cannot resume from {resume}: {'; '.join(skipped.problems)}")
        logger.warning("Skipping %s: %s", source.child_uri(skipped.name), "; ".join(skipped.problems))
    return partial(_download_first, source, candidates, resume, output_dir, vet), candidates[0].run_id


def _download_first(
    source: Store, candidates: list[RemoteCheckpoint], resume: str, output_dir: Path, vet: RecipeVet
) -> Path:
    """Download the first of ``candidates`` that verifies (newest first); a single one must."""
    for i, c in enumerate(candidates):
        # The first was vetted before the launch was allowed; an older one only if the newer ones are corrupt.
        if i and not vet.remote(source, c):
            logger.warning("Skipping %s: %s", source.child_uri(c.name), "; ".join(c.problems))
            continue
        try:
            return download_checkpoint(source, c, output_dir / c.name)
        except CorruptCheckpoint as e:
            if len(candidates) == 1:
                raise
            logger.warning("Skipping it: %s", e)
    raise CheckpointError(f"Cannot resume from {resume}: no complete checkpoint there")
