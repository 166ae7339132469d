"""Several machines without a shared disk: the main process commits a checkpoint only once every other machine's
files and receipt are in the store; a failed or missing part stops the commit and says which machine."""

from __future__ import annotations

import json
import threading
import time

import pytest
from _callbacks_helpers import make_checkpoint

from callbacks.errors import CheckpointError
from callbacks.machines import Part, receipt_key, rotate_local, upload_part, wait_for_parts
from callbacks.manifest import MANIFEST_NAME, file_entries
from callbacks.publish import RunInfo, publish_staged, stage_checkpoint
from callbacks.remote import scan_remote
from callbacks.stores import FolderStore

RUN = RunInfo("tiny", "recipe: tiny\n", "run-1")


def split_checkpoint(tmp_path):
    """A 2-rank checkpoint as two machines hold it: rank 1's RNG state only on the second machine's disk."""
    whole = make_checkpoint(tmp_path / "whole", 4, world_size=2)
    main = stage_checkpoint(whole, tmp_path / "main", RUN.recipe_yaml)
    (main / "rng_state_1.pth").unlink()
    other = stage_checkpoint(whole, tmp_path / "other", None, only={"rng_state_1.pth"})
    assert sorted(p.name for p in other.iterdir()) == ["rng_state_1.pth"]
    return main, other, Part("save-1", file_entries(other), ["machine-1"])


def test_the_commit_waits_for_the_other_machines_part_then_lists_every_rank(tmp_path):
    store = FolderStore(tmp_path / "store")
    main, other, part = split_checkpoint(tmp_path)

    def other_machine():
        time.sleep(1.0)  # the main process is already waiting
        assert not store.read_bytes(f"checkpoint-4/{MANIFEST_NAME}")
        upload_part(store, other, 4, part, "machine-1")

    thread = threading.Thread(target=other_machine)
    thread.start()
    manifest = publish_staged(store, main, 4, RUN, world_size=2, part=part)
    thread.join()
    assert {"rng_state_0.pth", "rng_state_1.pth"} <= set(manifest["files"])
    (checkpoint,) = scan_remote(store)
    assert (
        checkpoint.complete
        and checkpoint.manifest["files"]["rng_state_1.pth"] == part.files["rng_state_1.pth"]
    )
    assert not [rel for rel in checkpoint.files if rel.startswith(".parts/")]  # receipts removed at commit


def test_a_machine_that_failed_its_upload_stops_the_commit(tmp_path):
    store = FolderStore(tmp_path / "store")
    main, other, part = split_checkpoint(tmp_path)
    (other / "rng_state_1.pth").unlink()  # its file is gone before it could be uploaded
    with pytest.raises(FileNotFoundError):
        upload_part(store, other, 4, part, "machine-1")
    assert "error" in json.loads(store.read_bytes(receipt_key("checkpoint-4", "save-1", "machine-1")))
    with pytest.raises(
        CheckpointError, match="machine-1 could not upload its files of checkpoint-4: FileNotFound"
    ):
        publish_staged(store, main, 4, RUN, world_size=2, part=part)
    assert store.read_bytes(f"checkpoint-4/{MANIFEST_NAME}") is None
    assert not scan_remote(store)[0].complete


def test_a_machine_that_never_reports_is_named_after_the_wait(tmp_path):
    store = FolderStore(tmp_path / "store")
    part = Part("save-2", {}, ["machine-1", "machine-2"])
    store.write_bytes(receipt_key("checkpoint-6", "save-2", "machine-1"), json.dumps({"files": {}}).encode())
    with pytest.raises(
        CheckpointError, match=r"machine-2 did not upload its files of checkpoint-6 within 0 s"
    ):
        wait_for_parts(store, "checkpoint-6", part, timeout=0.2)


def test_a_receipt_of_an_earlier_save_does_not_count(tmp_path):
    store = FolderStore(tmp_path / "store")
    store.write_bytes(
        receipt_key("checkpoint-6", "old-save", "machine-1"), json.dumps({"files": {}}).encode()
    )
    with pytest.raises(CheckpointError, match="machine-1 did not upload"):
        wait_for_parts(store, "checkpoint-6", Part("new-save", {}, ["machine-1"]), timeout=0.2)


def test_without_the_other_machines_files_a_checkpoint_is_refused_before_upload(tmp_path):
    store = FolderStore(tmp_path / "store")
    main, _, _ = split_checkpoint(tmp_path)
    with pytest.raises(CheckpointError, match="missing rng_state_1.pth"):
        publish_staged(store, main, 4, RUN, world_size=2)
    assert store.list() == {}


def test_a_separate_machine_keeps_its_newest_checkpoint_folders(tmp_path):
    for step in (2, 10, 4, 8):
        (tmp_path / f"checkpoint-{step}").mkdir()
    (tmp_path / "heldout").mkdir()
    assert rotate_local(tmp_path, 2) == ["checkpoint-2", "checkpoint-4"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-10", "checkpoint-8", "heldout"]
    assert rotate_local(tmp_path, None) == []  # no limit: keep every folder


def test_a_part_whose_commit_never_came_is_deleted_as_ours_not_moved_aside(tmp_path, caplog):
    """Another machine's files in a checkpoint the main process never committed were called a user's by the
    retention that cleared the folder, and moved to quarantine/ at every such save (optimizer shards under ZeRO)."""
    from callbacks.retention import apply_retention

    store = FolderStore(tmp_path / "store")
    _, other, part = split_checkpoint(tmp_path)
    upload_part(store, other, 4, part, "machine-1")  # the main process died before its own upload of step 4
    store.delete(
        [receipt_key("checkpoint-4", "save-1", "machine-1")]
    )  # ... and a lost machine sends no receipt
    later = stage_checkpoint(make_checkpoint(tmp_path / "later", 6), tmp_path / "six", RUN.recipe_yaml)
    publish_staged(store, later, 6, RUN, world_size=1)
    apply_retention(store, keep_last=1)
    assert [c.name for c in scan_remote(store)] == ["checkpoint-6"]
    assert not store.list("quarantine") and "did not write" not in caplog.text


def test_a_users_file_where_another_machine_uploads_is_moved_aside_not_overwritten(tmp_path, caplog):
    """Another machine's upload wrote over a user's file of the same name; the main process then counted it as
    that machine's and never saw it."""
    store = FolderStore(tmp_path / "store")
    main, other, part = split_checkpoint(tmp_path)
    store.write_bytes("checkpoint-4/rng_state_1.pth", b"my notes")
    upload_part(store, other, 4, part, "machine-1")
    manifest = publish_staged(store, main, 4, RUN, world_size=2, part=part)
    assert store.read_bytes("checkpoint-4/rng_state_1.pth") == (other / "rng_state_1.pth").read_bytes()
    assert scan_remote(store)[0].complete and "rng_state_1.pth" in manifest["files"]
    [(key, data)] = [(k, store.read_bytes(k)) for k in store.list("quarantine")]
    assert key.endswith("/rng_state_1.pth") and data == b"my notes"
    assert "holds rng_state_1.pth, not written by this project" in caplog.text


def test_the_main_process_leaves_another_machines_names_to_it_even_when_it_listed_first(tmp_path):
    """The main process's listing predated the other machine's upload: it moved that machine's freshly uploaded
    file to quarantine/ as a user's, and the commit failed with the file missing."""
    store = FolderStore(tmp_path / "store")
    main, other, part = split_checkpoint(tmp_path)
    store.write_bytes("checkpoint-4/rng_state_1.pth", b"my notes")
    real_list, raced = store.list, []

    def other_machine_uploads_right_after_the_main_lists(prefix=""):
        listing = real_list(prefix)
        if prefix == "checkpoint-4" and not raced:
            raced.append("machine-1")  # before its upload, which lists the folder too
            upload_part(store, other, 4, part, "machine-1")
        return listing

    store.list = other_machine_uploads_right_after_the_main_lists
    publish_staged(store, main, 4, RUN, world_size=2, part=part)
    assert raced and scan_remote(store)[0].complete
    assert [store.read_bytes(k) for k in real_list("quarantine")] == [b"my notes"]


def test_a_machine_whose_store_fails_before_its_upload_says_so_in_its_receipt(tmp_path, monkeypatch):
    """A failed write of its upload marker left no receipt: the main process waited out the part timeout."""
    store = FolderStore(tmp_path / "store")
    _, other, part = split_checkpoint(tmp_path)
    write_bytes = store.write_bytes

    def no_marker(key, data, **kwargs):
        if key.endswith(".uploading.json"):
            raise ConnectionError("store unreachable")
        return write_bytes(key, data, **kwargs)

    monkeypatch.setattr(store, "write_bytes", no_marker)
    with pytest.raises(ConnectionError):
        upload_part(store, other, 4, part, "machine-1")
    receipt = json.loads(store.read_bytes(receipt_key("checkpoint-4", "save-1", "machine-1")))
    assert receipt == {"error": "ConnectionError: store unreachable"}
    with pytest.raises(
        CheckpointError, match="machine-1 could not upload its files of checkpoint-4: Connection"
    ):
        wait_for_parts(store, "checkpoint-4", part, timeout=0.2)
