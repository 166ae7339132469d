"""What a commit promises: another run's committed checkpoint is never overwritten, however late it appears; a
short upload is never sealed with a manifest; a finished commit leaves exactly its files and manifest; and a
quarantine moves the manifest before anything else."""

from __future__ import annotations

import pytest
from _callbacks_helpers import commit_dying_at, make_checkpoint

from callbacks.errors import CheckpointError
from callbacks.manifest import MANIFEST_NAME, build_manifest, manifest_bytes
from callbacks.remote import commit_checkpoint, quarantine_checkpoint, scan_remote


def checkpoint(tmp_path, step, run_id, seed=0):
    """A local checkpoint folder of run ``run_id`` and its manifest."""
    folder = make_checkpoint(tmp_path / run_id, step, seed=seed)
    return folder, build_manifest(folder, step=step, recipe_name="tiny", run_id=run_id, world_size=1, rank=0)


def test_a_finished_commit_leaves_its_files_and_manifest_and_nothing_else(target, tmp_path, caplog):
    _, _, store = target
    folder, manifest = checkpoint(tmp_path, 4, "r1")
    assert commit_checkpoint(store, folder, manifest) is True
    assert sorted(store.list("checkpoint-4")) == sorted(
        f"checkpoint-4/{rel}" for rel in [*manifest["files"], MANIFEST_NAME]
    )
    assert commit_checkpoint(store, folder, manifest) is False  # already committed: nothing to do
    assert "uploading them again" not in caplog.text


def test_another_runs_commit_of_the_step_is_never_overwritten(target, tmp_path):
    _, _, store = target
    folder, theirs = checkpoint(tmp_path, 4, "r0")
    commit_checkpoint(store, folder, theirs)
    stored = store.read_bytes(f"checkpoint-4/{MANIFEST_NAME}")
    folder, mine = checkpoint(tmp_path, 4, "r1", seed=1)
    with pytest.raises(CheckpointError) as raised:
        commit_checkpoint(store, folder, mine)
    assert str(raised.value) == (
        f"{store.child_uri(f'checkpoint-4/{MANIFEST_NAME}')} already exists, written by run 'r0' with different "
        "contents; refusing to overwrite a committed checkpoint. Use another checkpoint.uri, or overwrite: true."
    )
    assert store.read_bytes(f"checkpoint-4/{MANIFEST_NAME}") == stored
    for rel in theirs["files"]:  # refused before a byte of theirs was replaced
        assert (
            store.read_bytes(f"checkpoint-4/{rel}") == (tmp_path / "r0" / "checkpoint-4" / rel).read_bytes()
        )


def test_a_commit_that_lands_while_this_one_uploads_is_not_overwritten(target, tmp_path):
    _, _, store = target
    _, theirs = checkpoint(tmp_path, 4, "r0")
    folder, mine = checkpoint(tmp_path, 4, "r1", seed=1)
    real_write = store.write_bytes

    def write_bytes(key, data, *, if_absent=False):
        if key.endswith(MANIFEST_NAME):  # the other writer's manifest lands first
            real_write(key, manifest_bytes(theirs))
        return real_write(key, data, if_absent=if_absent)

    store.write_bytes = write_bytes
    with pytest.raises(CheckpointError, match="already exists, written by run 'r0' with different contents"):
        commit_checkpoint(store, folder, mine)
    assert store.read_bytes(f"checkpoint-4/{MANIFEST_NAME}") == manifest_bytes(theirs)


def test_a_retried_manifest_write_whose_first_attempt_landed_completes_the_commit(target, tmp_path):
    _, _, store = target
    folder, manifest = checkpoint(tmp_path, 4, "r1")
    real_write = store.write_bytes

    def write_bytes(key, data, *, if_absent=False):
        if key.endswith(MANIFEST_NAME):  # the first attempt landed, its answer was lost; the retry finds it
            real_write(key, data)
        return real_write(key, data, if_absent=if_absent)

    store.write_bytes = write_bytes
    assert commit_checkpoint(store, folder, manifest) is False
    [ckpt] = scan_remote(store)
    assert ckpt.complete and ckpt.run_id == "r1"
    assert sorted(ckpt.files) == sorted([*manifest["files"], MANIFEST_NAME])  # its upload marker is gone


def test_an_upload_that_came_out_short_is_never_sealed(target, tmp_path):
    _, _, store = target
    folder, manifest = checkpoint(tmp_path, 4, "r1")
    real_upload = store.upload

    def upload(local, key, progress=None):
        if key.endswith("optimizer.pt"):
            (tmp_path / "short.pt").write_bytes(local.read_bytes()[:100])
            local = tmp_path / "short.pt"
        real_upload(local, key, progress)

    store.upload = upload
    with pytest.raises(CheckpointError) as raised:
        commit_checkpoint(store, folder, manifest)
    assert str(raised.value) == (
        f"Upload of {store.child_uri('checkpoint-4')} came out wrong: optimizer.pt has 100 bytes, the manifest "
        f"says {manifest['files']['optimizer.pt']['size']}"
    )
    assert f"checkpoint-4/{MANIFEST_NAME}" not in store.list("checkpoint-4")
    assert not scan_remote(store)[0].complete


def test_a_quarantine_moves_the_manifest_first(target, tmp_path):
    _, _, store = target
    folder, manifest = checkpoint(tmp_path, 4, "r1")
    commit_checkpoint(store, folder, manifest)
    [ckpt] = scan_remote(store)
    moved, real_move = [], store.move
    store.move = lambda key, new_key: moved.append(key) or real_move(key, new_key)

    aside = quarantine_checkpoint(store, ckpt)

    assert moved[0] == f"checkpoint-4/{MANIFEST_NAME}" and len(moved) == len(ckpt.files)
    assert sorted(store.list(aside)) == sorted(f"{aside}/{rel}" for rel in ckpt.files)
    assert scan_remote(store) == []


def test_a_damaged_file_of_another_machine_is_not_repaired_from_this_one(target, tmp_path):
    _, _, store = target
    folder, manifest = checkpoint(tmp_path, 4, "r1")
    commit_checkpoint(store, folder, manifest)
    store.write_bytes("checkpoint-4/rng_state.pth", b"short")
    with pytest.raises(CheckpointError) as raised:
        commit_checkpoint(store, folder, manifest, others=("rng_state.pth",))
    assert str(raised.value) == (
        f"{store.child_uri('checkpoint-4')} is damaged (rng_state.pth), and those are another machine's files: "
        "resume from an earlier checkpoint, or move this one aside to quarantine/."
    )
    assert store.read_bytes("checkpoint-4/rng_state.pth") == b"short"


def test_a_repair_that_comes_out_short_again_fails(target, tmp_path):
    _, _, store = target
    folder, manifest = checkpoint(tmp_path, 4, "r1")
    commit_checkpoint(store, folder, manifest)
    store.write_bytes("checkpoint-4/optimizer.pt", b"short")
    store.upload = lambda local, key, progress=None: None  # the store drops the repair
    with pytest.raises(CheckpointError) as raised:
        commit_checkpoint(store, folder, manifest)
    size = manifest["files"]["optimizer.pt"]["size"]
    assert str(raised.value) == (
        f"Repair of {store.child_uri('checkpoint-4')} came out wrong: optimizer.pt has 5 bytes, the manifest says {size}"
    )


def test_a_commit_over_an_unfinished_upload_of_ours_deletes_its_leftovers_only(target, tmp_path):
    _, _, store = target
    folder, manifest = checkpoint(tmp_path, 4, "r1")
    (folder / "old.bin").write_bytes(b"old")
    earlier = {**manifest, "files": {"old.bin": {"size": 3, "sha256": "00"}, **manifest["files"]}}
    commit_dying_at(store, folder, earlier)
    assert "checkpoint-4/old.bin" in store.list("checkpoint-4")

    assert commit_checkpoint(store, folder, manifest) is True
    [ckpt] = scan_remote(store)
    assert ckpt.complete and sorted(ckpt.files) == sorted([*manifest["files"], MANIFEST_NAME])
