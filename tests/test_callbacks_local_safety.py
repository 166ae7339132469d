"""What a launch may do to the output folder: a local checkpoint-N folder that a download or a fresh start
replaces is deleted only when every file in it is one its manifest lists (the run's own copy), and moved aside
otherwise; a verified copy is not downloaded again."""

from __future__ import annotations

import json
import logging
import shutil

import pytest
from _callbacks_helpers import commit, make_checkpoint, prepare

from callbacks.download import download_checkpoint
from callbacks.errors import CheckpointError
from callbacks.local import write_marker
from callbacks.manifest import file_entries, seal_checkpoint
from callbacks.remote import scan_remote
from callbacks.resume import SYNC_DIR
from callbacks.stores import FolderStore


def test_a_download_over_a_local_checkpoint_folder_moves_it_aside(target, tmp_path, caplog):
    uri, endpoint, store = target
    source = commit(store, tmp_path, 4)
    out = tmp_path / "out"
    mine = out / "checkpoint-4"  # no manifest: a crashed save, or a folder of the user's
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("my own notes")
    caplog.set_level(logging.INFO)

    plan = prepare(out, uri, endpoint)

    assert plan.resume_from == str(out / "checkpoint-4")
    assert (mine / "optimizer.pt").read_bytes() == (source / "optimizer.pt").read_bytes()
    [aside] = (out / SYNC_DIR / "quarantine").iterdir()
    assert aside.name.startswith("checkpoint-4-") and (aside / "notes.txt").read_text() == "my own notes"
    assert (
        f"Moved local checkpoint-4 aside to {aside}: replaced by {store.child_uri('checkpoint-4')}"
        in caplog.text
    )


def test_a_verified_local_copy_is_not_downloaded_again(target, tmp_path, caplog):
    _, _, store = target
    source = commit(store, tmp_path, 4)
    dest = tmp_path / "out" / "checkpoint-4"
    shutil.copytree(source, dest)
    (dest / "recipe.yaml").write_text("r: 1\n")  # as the commit uploaded it
    seal_checkpoint(dest, step=4, recipe_name="tiny", run_id="r1", world_size=1)
    (dest / "notes.txt").write_text("mine")  # not in the manifest: a copy that verifies may hold more
    caplog.set_level(logging.INFO)
    [ckpt] = scan_remote(store)

    assert download_checkpoint(store, ckpt, dest) == dest

    assert (dest / "notes.txt").read_text() == "mine" and not (tmp_path / "out" / SYNC_DIR).exists()
    assert (
        f"{dest} already holds {store.child_uri('checkpoint-4')}, verified: not downloaded again"
        in caplog.text
    )


def test_overwrite_moves_the_local_checkpoints_aside_never_deletes_them(tmp_path, caplog):
    out = tmp_path / "out"
    old = make_checkpoint(out, 2)
    seal_checkpoint(old, step=2, recipe_name="tiny", run_id="r0", world_size=1)
    (old / "notes.txt").write_text("my own notes")  # dropped into the old run's checkpoint

    plan = prepare(out, None, resume="never", overwrite=True)

    assert plan.resume_from is None and not old.exists()
    [aside] = (out / SYNC_DIR / "quarantine").iterdir()
    assert aside.name.startswith("checkpoint-2-") and (aside / "notes.txt").read_text() == "my own notes"
    assert (
        f"Moved local checkpoint-2 aside to {aside}: checkpoint.overwrite=true for resume: never"
        in caplog.text
    )


def test_the_runs_own_copies_are_deleted_not_kept_at_every_relaunch(target, tmp_path, caplog):
    """Moved aside too, they filled quarantine/ with a full checkpoint at every relaunch of a run on two machines
    (each machine's own copy lacks the other's RNG state) and at every re-fetch into the same cache folder."""
    uri, endpoint, store = target
    source = commit(store, tmp_path, 4)
    out = tmp_path / "out"
    own = out / "checkpoint-4"
    shutil.copytree(source, own)
    seal_checkpoint(own, step=4, recipe_name="tiny", run_id="r1", world_size=1)
    (own / "rng_state.pth").unlink()  # unusable, but every file left is one its manifest lists
    (out / ".checkpoint-2.replaced-0123abcd").mkdir()  # what a kill mid-delete leaves
    caplog.set_level(logging.INFO)

    plan = prepare(out, uri, endpoint)

    assert plan.resume_from == str(own) and (own / "rng_state.pth").is_file()
    assert sorted(p.name for p in out.iterdir()) == [SYNC_DIR, "checkpoint-4"]
    assert not (out / SYNC_DIR / "quarantine").exists()
    assert f"Deleted local {own} (replaced by {store.child_uri('checkpoint-4')}" in caplog.text


def _run_a_in(out, source, store_uri=None):
    """``out`` holding run rA's sealed checkpoint-4, as a launch of rA left it."""
    seal_checkpoint(
        shutil.copytree(source, out / "checkpoint-4"), step=4, recipe_name="tiny", run_id="rA", world_size=1
    )
    write_marker(out, "rA", store_uri)


def test_a_refused_explicit_resume_leaves_the_output_folder_as_it_was(tmp_path):
    """The other run's checkpoint was downloaded over out/checkpoint-4 before the refusal, and the next plain
    relaunch of run A resumed from run B's files."""
    a, b, out = tmp_path / "A", tmp_path / "B", tmp_path / "out"
    _run_a_in(out, commit(FolderStore(a), tmp_path, 4, run_id="rA"), str(a))
    commit(FolderStore(b), tmp_path, 4, run_id="rB")
    before = file_entries(out / "checkpoint-4")

    with pytest.raises(CheckpointError, match=r"run id 'rB', but .* already has checkpoints of run rA"):
        prepare(out, str(a), resume=f"file://{b}/checkpoint-4")

    assert file_entries(out / "checkpoint-4") == before
    plan = prepare(out, str(a))
    assert plan.resume_from == str(out / "checkpoint-4") and plan.run_id == "rA"
    plan.release()


def test_an_explicit_resume_with_overwrite_resumes_the_checkpoint_it_downloaded(tmp_path):
    """Clearing the output folder's run after the download moved the new download aside too: resume_from named a
    folder that no longer existed, and training failed after the model loaded."""
    out = tmp_path / "out"
    _run_a_in(out, commit(FolderStore(tmp_path / "A"), tmp_path, 4, run_id="rA"))
    commit(FolderStore(tmp_path / "B"), tmp_path, 4, run_id="rB")

    plan = prepare(out, None, resume=f"file://{tmp_path / 'B'}/checkpoint-4", overwrite=True)

    assert plan.resume_from == str(out / "checkpoint-4") and plan.run_id == "rB"
    assert json.loads((out / "checkpoint-4" / "manifest.json").read_text())["run_id"] == "rB"
    plan.release()


def test_the_recipe_of_the_checkpoint_resumed_is_vetted_when_a_newer_one_is_damaged(tmp_path):
    """With checkpoint-4's recipe.yaml damaged, the check read nothing, and checkpoint-2, made with another
    recipe, was resumed unchecked."""
    store = FolderStore(tmp_path / "drive" / "run")
    commit(store, tmp_path, 2)
    commit(store, tmp_path, 4)  # both made with recipe "r: 1\n"
    store.write_bytes("checkpoint-4/recipe.yaml", b"r: 9\n")  # bit rot, the same size

    def vet(saved):
        return None if saved == "r: 2\n" else f"made with {saved!r}"

    with pytest.raises(CheckpointError, match=r"made with 'r: 1\\n'"):
        prepare(tmp_path / "out", str(store.root), vet_recipe=vet)
    assert not (tmp_path / "out" / "checkpoint-2").exists()  # refused before its download
