"""What resuming and retention may do to a store: damaged commits are moved aside, files the project did not write
are never deleted, a truncated object is uploaded again, and temporaries a kill left behind are cleared."""

from __future__ import annotations

import logging
import shutil

from _callbacks_helpers import commit, commit_dying_at, make_checkpoint, prepare

from callbacks.manifest import MANIFEST_NAME, build_manifest, seal_checkpoint
from callbacks.remote import quarantine_checkpoint, scan_remote
from callbacks.resume import write_marker
from callbacks.retention import apply_retention
from callbacks.stores import FolderStore


def test_a_committed_checkpoint_with_a_damaged_manifest_is_quarantined_never_deleted(
    target, tmp_path, caplog
):
    uri, endpoint, store = target
    commit(store, tmp_path, 4)
    commit(store, tmp_path, 6)
    files = store.list("checkpoint-6")
    manifest = store.read_bytes(f"checkpoint-6/{MANIFEST_NAME}")
    store.write_bytes(f"checkpoint-6/{MANIFEST_NAME}", manifest[: len(manifest) // 2])  # not valid JSON

    plan = prepare(tmp_path / "out", uri, endpoint)

    assert plan.resume_from == str(tmp_path / "out" / "checkpoint-4")
    assert "Deleting" not in caplog.text and "Moved checkpoint-6 aside to" in caplog.text
    quarantined = store.list("quarantine")
    [folder] = {k.split("/")[1] for k in quarantined}
    assert folder.startswith("checkpoint-6-") and not store.list("checkpoint-6")
    assert sorted(k.split("/", 2)[2] for k in quarantined) == sorted(k.split("/", 1)[1] for k in files)


def interrupted_upload(store, tmp_path, step, *, die_at="optimizer.pt"):
    """A commit of ours that died on its way (at ``die_at``): some files are in, no manifest."""
    folder = make_checkpoint(tmp_path / "interrupted", step)
    manifest = build_manifest(folder, step=step, recipe_name="tiny", run_id="r1", world_size=1, rank=0)
    commit_dying_at(store, folder, manifest, die_at)
    assert store.list(f"checkpoint-{step}") and MANIFEST_NAME not in str(store.list(f"checkpoint-{step}"))


def put(store, tmp_path, key, text):
    """A file of the user's in the store (a mounted folder is theirs too)."""
    source = tmp_path / "user" / key.replace("/", "_")
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text(text)
    store.upload(source, key)


def test_files_the_project_did_not_write_are_moved_aside_never_deleted(target, tmp_path, caplog):
    uri, endpoint, store = target
    put(store, tmp_path, "checkpoint-1/thesis.tex", "my thesis")  # a folder of the user's, named like ours
    interrupted_upload(store, tmp_path, 3)  # and a partial upload of ours with a file of the user's in it
    put(store, tmp_path, "checkpoint-3/notes.txt", "my notes")

    plan = prepare(tmp_path / "out", uri, endpoint)

    assert plan.resume_from is None and scan_remote(store) == []
    aside = {k.split("/", 2)[2]: store.read_bytes(k) for k in store.list("quarantine")}
    assert aside == {"thesis.tex": b"my thesis", "notes.txt": b"my notes"}  # the rest of checkpoint-3 deleted
    assert (
        "checkpoint-1 holds 1 file that no manifest or upload marker shows this project wrote (thesis.tex): moved "
        "aside" in caplog.text
    )
    assert f"Deleted {store.child_uri('checkpoint-1')}" not in caplog.text
    assert f"Deleted {store.child_uri('checkpoint-3')} (an incomplete upload, never resumable)" in caplog.text


def test_retention_and_recommits_delete_only_what_the_project_wrote(target, tmp_path, caplog):
    _, _, store = target
    commit(store, tmp_path, 2)
    put(store, tmp_path, "checkpoint-2/results.csv", "mine")  # dropped into a committed checkpoint
    put(store, tmp_path, "checkpoint-3/thesis.tex", "my thesis")  # a user's folder below the newest
    put(store, tmp_path, "checkpoint-4/draft.txt", "my draft")  # where the run commits next
    commit(store, tmp_path, 4)
    assert store.read_bytes("checkpoint-4/draft.txt") == b"my draft"  # the commit left it alone

    assert apply_retention(store, 1) == ["checkpoint-2", "checkpoint-3"]

    assert [c.name for c in scan_remote(store)] == ["checkpoint-4"]
    aside = {k.split("/", 2)[2]: store.read_bytes(k) for k in store.list("quarantine")}
    assert aside == {"results.csv": b"mine", "thesis.tex": b"my thesis"}
    assert "shows this project wrote (results.csv): moved aside" in caplog.text


def test_a_truncated_object_is_uploaded_again_from_the_good_local_copy(target, tmp_path, caplog):
    uri, endpoint, store = target
    commit(store, tmp_path, 4)
    source = commit(store, tmp_path, 6)
    out = tmp_path / "out"
    write_marker(out, "r1", uri)
    seal_checkpoint(
        shutil.copytree(source, out / "checkpoint-6"), step=6, recipe_name="tiny", run_id="r1", world_size=1
    )
    put(store, tmp_path, "checkpoint-6/optimizer.pt", "x" * 1000)  # the object came out short

    plan = prepare(out, uri, endpoint)

    assert plan.resume_from == str(out / "checkpoint-6")
    assert store.read_bytes("checkpoint-6/optimizer.pt") == (source / "optimizer.pt").read_bytes()
    assert "optimizer.pt has 1000 bytes, the manifest says 8192: uploading them again" in caplog.text
    assert [c.name for c in scan_remote(store) if c.complete] == ["checkpoint-6", "checkpoint-4"]
    plan.release()

    put(store, tmp_path, "checkpoint-6/optimizer.pt", "x" * 1000)  # again, and now no local copy
    plan = prepare(tmp_path / "fresh", uri, endpoint)
    assert plan.resume_from == str(tmp_path / "fresh" / "checkpoint-4")
    assert [c.name for c in scan_remote(store)] == ["checkpoint-4"]
    assert (
        store.read_bytes(next(k for k in store.list("quarantine") if k.endswith("optimizer.pt")))
        == b"x" * 1000
    )


def test_temporaries_a_kill_left_are_cleared_at_the_next_launch_and_nothing_else(tmp_path):
    out, drive = tmp_path / "out", FolderStore(tmp_path / "drive")
    commit(drive, tmp_path, 2)
    interrupted_upload(drive, tmp_path, 4)
    killed_copy = drive.root / "checkpoint-4" / ".tmp-optimizer.pt-1a2b3c4d"  # a copy killed halfway
    killed_copy.write_bytes(b"half")
    download = out / ".checkpoint-2.download-0f0f0f0f"  # a download killed halfway
    (download / "sub").mkdir(parents=True)
    (download / "sub" / "optimizer.pt").write_bytes(b"half")
    theirs = [drive.root / ".tmp-notes.txt", drive.root / "checkpoint-2" / ".tmp-draft-v2", out / "keep.txt"]
    for path in theirs:  # named like temporaries, but not exactly as ours are
        path.write_text("not ours")
    (out / ".checkpoint-2.download-mine").mkdir()

    plan = prepare(out, drive.uri)

    assert plan.resume_from == str(out / "checkpoint-2")
    assert not download.exists() and not killed_copy.exists() and not (drive.root / "checkpoint-4").exists()
    assert all(path.read_text() == "not ours" for path in theirs)
    assert list(out.glob(".checkpoint-*.download-*")) == [out / ".checkpoint-2.download-mine"]


def test_a_file_of_the_users_where_an_upload_writes_is_moved_aside_not_overwritten(target, tmp_path, caplog):
    _, _, store = target
    put(
        store, tmp_path, "checkpoint-4/adapter_config.json", "my config"
    )  # named like a file the commit writes

    source = commit(store, tmp_path, 4)

    [ckpt] = scan_remote(store)
    assert (
        ckpt.complete
        and store.read_bytes("checkpoint-4/adapter_config.json")
        == (source / "adapter_config.json").read_bytes()
    )
    [(key, data)] = [(k, store.read_bytes(k)) for k in store.list("quarantine")]
    assert key.endswith("/adapter_config.json") and data == b"my config"
    assert (
        f"{store.child_uri('checkpoint-4')} holds adapter_config.json, not written by this project, where this "
        f"upload writes: moved aside to {store.child_uri(key.rsplit('/', 1)[0])}" in caplog.text
    )


def test_a_damaged_manifest_over_a_good_local_copy_is_moved_aside_and_committed_again(
    target, tmp_path, caplog
):
    """Before, the relaunch was refused: the commit would not write over a manifest it could not read."""
    uri, endpoint, store = target
    source = commit(store, tmp_path, 6)
    out = tmp_path / "out"
    write_marker(out, "r1", uri)
    seal_checkpoint(
        shutil.copytree(source, out / "checkpoint-6"), step=6, recipe_name="tiny", run_id="r1", world_size=1
    )
    manifest = store.read_bytes(f"checkpoint-6/{MANIFEST_NAME}")
    store.write_bytes(f"checkpoint-6/{MANIFEST_NAME}", manifest[:100])  # not valid JSON

    plan = prepare(out, uri, endpoint)

    assert plan.resume_from == str(out / "checkpoint-6")
    [ckpt] = scan_remote(store)
    assert ckpt.complete and ckpt.run_id == "r1"
    aside = next(k for k in store.list("quarantine") if k.endswith(MANIFEST_NAME))
    assert store.read_bytes(aside) == manifest[:100]  # the evidence
    assert f"Moved checkpoint-6 aside to {store.child_uri(aside.rsplit('/', 1)[0])}" in caplog.text


def test_two_quarantines_of_one_checkpoint_within_a_second_keep_both(tmp_path):
    """Named by the second alone, the second move wrote over the first one's evidence."""
    store = FolderStore(tmp_path / "drive")
    asides = []
    for content in (b"first", b"second"):
        commit(store, tmp_path / content.decode(), 4)
        store.write_bytes("checkpoint-4/notes.txt", content)
        [ckpt] = scan_remote(store)
        asides.append(quarantine_checkpoint(store, ckpt))
    assert asides[0] != asides[1]
    assert [store.read_bytes(f"{a}/notes.txt") for a in asides] == [b"first", b"second"]


def test_a_checkpoint_is_deleted_manifest_first_so_it_never_looks_complete_half_deleted(target, tmp_path):
    _, _, store = target
    assert apply_retention(store, 1) == []  # nothing committed yet
    commit(store, tmp_path, 2)
    commit(store, tmp_path, 4)
    files = sorted(store.list("checkpoint-2"))
    deleted, real_delete = [], store.delete
    store.delete = lambda keys: deleted.append(sorted(keys)) or real_delete(keys)

    assert apply_retention(store, 1) == ["checkpoint-2"]

    assert deleted == [[f"checkpoint-2/{MANIFEST_NAME}"], [k for k in files if not k.endswith(MANIFEST_NAME)]]
    assert store.list("checkpoint-2") == {} and [c.name for c in scan_remote(store)] == ["checkpoint-4"]


def test_retention_never_deletes_the_newest_commit_and_says_nothing_when_it_deletes_nothing(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    store = FolderStore(tmp_path / "drive")
    commit(store, tmp_path, 2)
    assert apply_retention(store, 1) == [] and "Retention" not in caplog.text
    commit(store, tmp_path, 4)
    assert apply_retention(store, 0) == ["checkpoint-2"]  # keep_last 0 still keeps the newest
    assert [c.name for c in scan_remote(store) if c.complete] == ["checkpoint-4"]
    assert f"Retention (keep_last=0) deleted checkpoint-2 from {store.uri}" in caplog.text
