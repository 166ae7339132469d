"""Which checkpoint to resume from, and which run owns the checkpoint prefix (runs on the main process).

``resume: latest`` continues the run found at the prefix (adopting its run id): the newest checkpoint whose
manifest is present and whose files verify. Incomplete or corrupt checkpoints are skipped with the reason
logged. A local checkpoint newer than anything remote is uploaded first. ``resume: never`` on a prefix that
already holds checkpoints is refused unless ``overwrite: true``. An explicit checkpoint (callbacks/explicit.py)
is resumed as named. Either way the recipe the checkpoint was made with is vetted (callbacks/recipe_check.py)
before it is downloaded or used.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from callbacks.download import CorruptCheckpoint, clear_download_leftovers, download_checkpoint
from callbacks.errors import CheckpointError
from callbacks.explicit import explicit_checkpoint
from callbacks.local import (
    SYNC_DIR,
    LocalCheckpoint,
    read_marker,
    scan_local,
    set_aside,
    write_marker,
)
from callbacks.manifest import MANIFEST_NAME, checkpoint_step, read_local_manifest
from callbacks.publish import RunInfo, publish_local
from callbacks.recipe_check import RecipeVet
from callbacks.remote import QUARANTINE, RemoteCheckpoint, quarantine_checkpoint, scan_readable
from callbacks.retention import delete_checkpoint
from callbacks.stores import Store

logger = logging.getLogger(__name__)


def new_run_id(recipe_name: str) -> str:
    return f"{recipe_name}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(2)}"


def _names(checkpoints) -> str:
    names = [c.name if isinstance(c, RemoteCheckpoint) else c.folder.name for c in checkpoints]
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


class Resolver:
    """Decides ``(resume_from, run_id)`` for one launch; see the module docstring for the rules."""

    def __init__(
        self,
        *,
        store: Store | None,
        output_dir: Path,
        run: RunInfo,
        overwrite: bool,
        endpoint_url: str | None,
        vet_recipe: Callable[[str], str | None] | None = None,
    ):
        self.store, self.output_dir, self.run = store, output_dir, run
        self.overwrite, self.endpoint_url, self.vet = overwrite, endpoint_url, RecipeVet(vet_recipe)
        # What a killed launch left half-written; this launch holds the output folder's lock and the store's lease.
        clear_download_leftovers(output_dir)
        if store:
            store.clear_temporaries()
        self.local = scan_local(output_dir)
        self.remote = scan_readable(store) if store else []

    def resolve(self, resume: str, run_id: str | None) -> tuple[Path | None, str]:
        if resume == "never":
            chosen, source_run = None, None
            self._refuse_or_clear(self.local + [c for c in self.remote if c.manifest], "resume: never")
        elif resume == "latest":
            committed = [c for c in self.remote if c.manifest]
            run_id = run_id or (committed[0].run_id if committed else None) or read_marker(self.output_dir)
            chosen, source_run = None, run_id
        else:
            fetch, source_run = explicit_checkpoint(
                resume, endpoint_url=self.endpoint_url, output_dir=self.output_dir, vet=self.vet
            )
        self.run.run_id = run_id or source_run or new_run_id(self.run.recipe_name)
        foreign = [c for c in self.remote if c.manifest and c.run_id != self.run.run_id]
        self._refuse_or_clear(foreign, f"run id {self.run.run_id!r}")
        marker = read_marker(self.output_dir)
        if marker not in (None, self.run.run_id) and self.local:
            synced = read_marker(self.output_dir, "uri")
            self._refuse_or_clear(
                self.local,
                f"run id {self.run.run_id!r} (output_dir belongs to run {marker!r})",
                # Not "use resume=latest": latest chose the store's run, and the folder holds another.
                fix=(
                    f"They are two runs. To continue run {marker}, set checkpoint.uri to the store it synced to"
                    f"{f' ({synced})' if synced else ' (none: checkpoint.uri=null)'}; to continue run "
                    f"{self.run.run_id} (the store's), choose another trainer.output_dir"
                    if resume == "latest" and self.store
                    else None
                ),
            )
        if resume == "latest":
            chosen = self._latest()
        elif resume != "never":  # downloaded only now: a refused launch leaves the output folder as it was
            chosen = fetch()
            self._commit_start(chosen)
        self._clear_newer(
            checkpoint_step(chosen.name) if chosen else 0, rewind=resume not in ("latest", "never")
        )
        write_marker(self.output_dir, self.run.run_id, self.store.uri if self.store else None)
        return chosen, self.run.run_id

    def _refuse_or_clear(self, taken: list, why: str, fix: str | None = None) -> None:
        """Refuse to write over another run's checkpoints unless ``overwrite: true``, which clears them: from the
        store only what the project wrote is deleted; a local folder goes through ``set_aside``. ``fix``: how to
        continue the run those checkpoints belong to, when it is not ``resume=latest``."""
        if not taken:
            return
        runs = {c.run_id for c in taken if isinstance(c, RemoteCheckpoint)}
        if any(isinstance(c, LocalCheckpoint) for c in taken):
            runs.add(read_marker(self.output_dir) or "unknown")
        runs = sorted(runs)
        remote = [c for c in taken if isinstance(c, RemoteCheckpoint)]
        local = [c for c in taken if isinstance(c, LocalCheckpoint)]
        if remote and local:  # name each place's own: a step in both would otherwise read as listed twice
            places, have = f"{self.store.uri} and output_dir {self.output_dir}", "have"
            listed = f"{_names(remote)} in the store; {_names(local)} in output_dir"
        else:
            places, have = self.store.uri if remote else f"output_dir {self.output_dir}", "has"
            listed = _names(taken)
        where = f"{places} already {have} checkpoints of run {', '.join(runs)} ({listed})"
        if not self.overwrite:
            fix = fix or "To continue that run, use checkpoint.resume=latest (and no other run_id)"
            raise CheckpointError(
                f"{why}, but {where}. "
                f"{fix}; to clear them (deleted; "
                f"a local folder holding files its manifest does not list is moved to {SYNC_DIR}/{QUARANTINE}/) and "
                f"{'go on from there' if why.startswith('resuming at') else 'start over'}, set "
                "checkpoint.overwrite=true; or choose another checkpoint.uri or trainer.output_dir."
            )
        logger.warning("checkpoint.overwrite=true: clearing %s (run %s) for %s", listed, ", ".join(runs), why)
        for c in taken:
            if isinstance(c, RemoteCheckpoint):
                delete_checkpoint(self.store, c)
                self.remote.remove(c)
            else:
                set_aside(c.folder, f"checkpoint.overwrite=true for {why}")
                self.local.remove(c)

    def _latest(self) -> Path | None:
        for c in self.local:
            if c.problems:
                logger.warning("Skipping local %s: %s", c.folder, "; ".join(c.problems))
        best_local = next((c for c in self.local if not c.problems), None)
        floor = best_local.step if best_local else -1
        for c in self.remote:
            if c.step <= floor:
                break
            if c.problems or not self.vet.remote(self.store, c, fallback=self.output_dir):
                logger.warning("Skipping %s: %s", self.store.child_uri(c.name), "; ".join(c.problems))
                continue
            try:
                folder = download_checkpoint(self.store, c, self.output_dir / c.name)
            except CorruptCheckpoint as e:
                logger.warning("Skipping it: %s", e)
                c.problems.append(str(e))  # committed but corrupt: moved aside below, not deleted
                continue
            skipped = [lc.folder.name for lc in self.local if lc.problems and lc.step >= c.step]
            if skipped:
                logger.info(
                    "Resuming from %s, the newest good copy (local %s unusable)", c.name, ", ".join(skipped)
                )
            return folder
        if best_local is None:
            return None
        self.vet.local(best_local.folder, self.output_dir)
        same = next((c for c in self.remote if c.step == best_local.step), None)
        # A copy missing a file may hold altered ones too (a half-synced drive): the commit's repair would upload only
        # what is missing or short, so the bytes are checked whenever its manifest can be read.
        damaged = bool(same and same.manifest is not None and self._damaged_in_store(same, best_local.folder))
        if self.store and same is None:
            logger.info(
                "Local %s is newer than anything at %s: uploading it first", best_local.folder, self.store.uri
            )
        elif self.store and same.problems:  # the commit uploads again what is missing or truncated there
            logger.warning(
                "Local %s is good, but %s is not (%s): uploading it again",
                best_local.folder, self.store.child_uri(same.name), "; ".join(same.problems),
            )  # fmt: skip
            # Unreadable, no commit can match it; altered bytes of the right size, the commit's size check passes.
            if damaged or (MANIFEST_NAME in same.files and same.manifest is None):
                aside = quarantine_checkpoint(self.store, same)
                logger.warning("Moved %s aside to %s", same.name, self.store.child_uri(aside))
        if self.store and (same is None or same.problems):
            publish_local(self.store, best_local.folder, self.output_dir / SYNC_DIR / "staging", self.run)
        return best_local.folder

    def _commit_start(self, folder: Path) -> None:
        """An explicit checkpoint of another store is committed to this run's store before training, as it is (its
        own recipe.yaml and held-out result). The store then holds the whole branch: its best pointer can name the
        start while the branch has not beaten it (it named a worse checkpoint than the run's log), and a new
        machine resumes from this store alone."""
        step = checkpoint_step(folder.name)
        if not self.store or step is None or any(c.step == step and not c.problems for c in self.remote):
            return
        logger.info("Committing %s, the checkpoint this run starts from, to %s", folder, self.store.uri)
        # recipe_yaml None: the checkpoint keeps the recipe it was trained with, never this launch's.
        publish_local(
            self.store, folder, self.output_dir / SYNC_DIR / "staging", replace(self.run, recipe_yaml=None)
        )

    def _damaged_in_store(self, same: RemoteCheckpoint, local: Path) -> bool:
        """Whether the store's copy of the step resumed from ``local`` holds bytes its manifest does not describe,
        its sizes agreeing (a half-synced mounted drive, a file replaced): trusted, it would fail a new machine's
        download, which falls back to an older checkpoint. Checked with the checksums S3 keeps (a HEAD per file)
        or by reading a folder's files back; never downloaded."""
        held = (read_local_manifest(local)[0] or {}).get("files", {})
        # What is missing or of another size is the listing's problem (repaired by the commit), not checked here.
        files = {rel: e for rel, e in same.manifest["files"].items() if same.files.get(rel) == e["size"]}
        copies = {
            rel: local / rel for rel, e in files.items() if held.get(rel, {}).get("sha256") == e["sha256"]
        }
        logger.info("Checking the bytes of %s against its manifest", self.store.child_uri(same.name))
        try:
            found = self.store.mismatches(same.name, files, copies)
        except Exception as e:
            raise CheckpointError(self.store.explain(e, f"check {same.name}")) from e
        same.problems += [f"{rel} {why}" for rel, why in found.items()]
        return bool(found)

    def _clear_newer(self, step: int, *, rewind: bool) -> None:
        """Checkpoints of this run newer than the resume point would be written again: clear them first.

        Committed ones (a manifest there, readable or not) that failed verification are moved aside to the store's
        ``quarantine/`` folder (the evidence of what went wrong); an unusable local folder goes through
        ``set_aside`` (a ``checkpoint-N`` folder without a manifest may be a crashed save or the user's).
        Partial uploads (no manifest) are cleared from the store, also below the resume point, where no upload
        can still be running: the files our upload wrote are deleted, anything else there is moved aside.
        Complete newer ones exist only when an explicit resume rewinds the run, which needs ``overwrite: true``.
        """
        newer = [c for c in self.remote if c.step > step] + [c for c in self.local if c.step > step]
        if rewind:
            self._refuse_or_clear([c for c in newer if not c.problems], f"resuming at step {step}")
            newer = [c for c in newer if c.problems]
        partial_below = [c for c in self.remote if c.step < step and MANIFEST_NAME not in c.files]
        for c in newer + partial_below:
            if isinstance(c, RemoteCheckpoint) and MANIFEST_NAME in c.files:
                aside = quarantine_checkpoint(self.store, c)
                logger.warning(
                    "Moved %s aside to %s: %s", c.name, self.store.child_uri(aside), "; ".join(c.problems)
                )
            elif isinstance(c, LocalCheckpoint):
                set_aside(c.folder, "; ".join(c.problems))
            elif delete_checkpoint(self.store, c)[0]:  # what our upload wrote; anything else is moved aside
                logger.warning(
                    "Deleted %s (an incomplete upload, never resumable)", self.store.child_uri(c.name)
                )
            (self.remote if isinstance(c, RemoteCheckpoint) else self.local).remove(c)
