"""prepare_checkpointing: which checkpoint a run resumes from, and which run owns a checkpoint prefix."""

from __future__ import annotations

import json
import logging
import os
import shutil

import pytest
from _callbacks_helpers import commit, make_checkpoint, prepare, publish_rated, s3_bucket, trainer_objects

from callbacks.best import update_best_pointer
from callbacks.checkpoint_sync import CheckpointSyncCallback, SealCallback
from callbacks.errors import CheckpointError
from callbacks.manifest import (
    MANIFEST_NAME,
    build_manifest,
    local_checkpoint_problems,
    read_local_manifest,
    seal_checkpoint,
)
from callbacks.publish import RunInfo
from callbacks.remote import UPLOAD_MARKER, commit_checkpoint, scan_remote
from callbacks.resume import SYNC_DIR, read_marker, write_marker
from callbacks.s3_store import S3Store
from callbacks.stores import FolderStore


@pytest.fixture
def s3_target(monkeypatch):
    s3 = s3_bucket(monkeypatch)
    return s3.uri("run"), s3.endpoint, S3Store(s3.bucket, "run", endpoint_url=s3.endpoint)


def test_latest_resumes_the_newest_complete_checkpoint(target, tmp_path, caplog):
    uri, endpoint, store = target
    commit(store, tmp_path, 2)
    source = commit(store, tmp_path, 4)
    half = make_checkpoint(tmp_path / "half", 6)  # an upload that never reached its manifest
    store.upload(half / "adapter_model.safetensors", "checkpoint-6/adapter_model.safetensors")
    no_optimizer = make_checkpoint(tmp_path / "noopt", 8, omit=("optimizer.pt", "scheduler.pt"))
    manifest = build_manifest(no_optimizer, step=8, recipe_name="tiny", run_id="r1", world_size=1, rank=0)
    commit_checkpoint(store, no_optimizer, manifest)  # a manifest that proves an unresumable checkpoint
    caplog.set_level(logging.INFO)

    plan = prepare(tmp_path / "out", uri, endpoint)

    resumed = tmp_path / "out" / "checkpoint-4"
    assert plan.resume_from == str(resumed) and plan.run_id == "r1"
    for f in source.iterdir():
        assert (resumed / f.name).read_bytes() == f.read_bytes()
    assert (resumed / MANIFEST_NAME).is_file() and (resumed / "recipe.yaml").is_file()
    assert "checkpoint-8: optimizer.pt is missing (resuming would restart Adam's moments)" in caplog.text
    assert "checkpoint-6: no manifest (upload never finished)" in caplog.text
    assert [c.name for c in scan_remote(store)] == [
        "checkpoint-4",
        "checkpoint-2",
    ]  # 6 and 8 are written again
    assert [type(c) for c in plan.callbacks] == [SealCallback, CheckpointSyncCallback]
    assert read_marker(tmp_path / "out") == "r1"
    assert not list((tmp_path / "out").glob(".checkpoint-*"))  # no temporary download folders left


def test_corrupt_checkpoint_is_skipped_for_the_previous_one(s3_target, tmp_path, caplog):
    uri, endpoint, store = s3_target
    commit(store, tmp_path, 2)
    commit(store, tmp_path, 4)
    key = f"{store.prefix}/checkpoint-4/optimizer.pt"
    data = bytearray(store.client.get_object(Bucket=store.bucket, Key=key)["Body"].read())
    data[0] ^= 0xFF
    store.client.put_object(Bucket=store.bucket, Key=key, Body=bytes(data))

    plan = prepare(tmp_path / "out", uri, endpoint)

    assert plan.resume_from == str(tmp_path / "out" / "checkpoint-2")
    assert "checkpoint-4 is corrupt: optimizer.pt does not match its SHA-256" in caplog.text
    assert not (tmp_path / "out" / "checkpoint-4").exists()


def test_local_checkpoint_without_optimizer_is_never_resumed(tmp_path, caplog):
    out = tmp_path / "out"
    make_checkpoint(out, 2)
    make_checkpoint(out, 4, omit=("optimizer.pt",))
    plan = prepare(out, None)
    assert plan.resume_from == str(out / "checkpoint-2")
    assert [type(c) for c in plan.callbacks] == [SealCallback]  # local checkpoints only: no sync
    assert "checkpoint-4: optimizer.pt is missing" in caplog.text
    assert not (out / "checkpoint-4").exists()  # the trainer would otherwise write step 4 into it
    with pytest.raises(CheckpointError, match=r"Cannot resume from .*checkpoint-3: scheduler.pt is missing"):
        prepare(
            tmp_path / "other", None, resume=str(make_checkpoint(tmp_path / "x", 3, omit=("scheduler.pt",)))
        )


def test_nothing_to_resume_starts_a_new_run(target, tmp_path):
    uri, endpoint, _ = target
    plan = prepare(tmp_path / "out", uri, endpoint)
    assert plan.resume_from is None and plan.run_id.startswith("tiny-")
    assert read_marker(tmp_path / "out") == plan.run_id


def test_local_checkpoint_newer_than_remote_is_uploaded_first(target, tmp_path):
    uri, endpoint, store = target
    commit(store, tmp_path, 2)
    out = tmp_path / "out"
    write_marker(out, "r1", uri)
    make_checkpoint(out, 2)
    make_checkpoint(out, 4)
    plan = prepare(out, uri, endpoint)
    assert plan.resume_from == str(out / "checkpoint-4") and plan.run_id == "r1"
    [newest, _] = scan_remote(store)
    assert newest.name == "checkpoint-4" and newest.complete and newest.run_id == "r1"


def test_second_run_on_the_same_prefix_is_refused(target, tmp_path):
    uri, endpoint, store = target
    commit(store, tmp_path, 2)
    with pytest.raises(
        CheckpointError,
        match=r"resume: never, but .*run already has checkpoints of run r1 \(checkpoint-2\)\. To continue that "
        r"run, use checkpoint.resume=latest .* set checkpoint.overwrite=true",
    ):
        prepare(tmp_path / "a", uri, endpoint, resume="never")
    with pytest.raises(CheckpointError, match=r"run id 'r2', but .* checkpoints of run r1 "):
        prepare(tmp_path / "b", uri, endpoint, run_id="r2")
    assert [c.name for c in scan_remote(store)] == ["checkpoint-2"]
    plan = prepare(tmp_path / "c", uri, endpoint, resume="never", overwrite=True)
    assert plan.resume_from is None and plan.run_id != "r1"
    assert scan_remote(store) == []


def test_output_dir_of_another_run_is_refused(s3_target, tmp_path):
    uri, endpoint, store = s3_target
    commit(store, tmp_path, 2)
    out = tmp_path / "out"
    write_marker(out, "r0", None)
    make_checkpoint(out, 6)
    with pytest.raises(
        CheckpointError,
        match=r"output_dir belongs to run 'r0'\), but output_dir \S+ already has checkpoints of run r0 "
        r"\(checkpoint-6\)\. They are two runs\. To continue run r0, set checkpoint.uri to the store it synced to "
        r"\(none: checkpoint.uri=null\); to continue run r1 \(the store's\), choose another trainer.output_dir;",
    ):
        prepare(out, uri, endpoint)  # before, it advised checkpoint.resume=latest: what this launch used
    write_marker(out, "r0", "s3://elsewhere/r0")
    with pytest.raises(CheckpointError, match=r"To continue run r0, set checkpoint.uri to the store it synced to "
                       r"\(s3://elsewhere/r0\);"):  # fmt: skip
        prepare(out, uri, endpoint)


def test_explicit_uri_resumes_that_checkpoint_and_rewinding_needs_overwrite(s3_target, tmp_path):
    uri, endpoint, store = s3_target
    commit(store, tmp_path, 2)
    commit(store, tmp_path, 4)
    fork = uri.replace("/run", "/fork")
    plan = prepare(tmp_path / "fork", fork, endpoint, resume=f"{uri}/checkpoint-2")
    assert plan.resume_from == str(tmp_path / "fork" / "checkpoint-2") and plan.run_id == "r1"
    with pytest.raises(
        CheckpointError,
        match=r"resuming at step 2, but s3://\S+/run already has checkpoints of run r1 \(checkpoint-4\)\. .*"
        r"to clear them \(.*\) and go on from there, set checkpoint.overwrite=true",  # a rewind, not a fresh start
    ):
        prepare(tmp_path / "rewind", uri, endpoint, resume=f"{uri}/checkpoint-2")
    prepare(tmp_path / "rewind", uri, endpoint, resume=f"{uri}/checkpoint-2", overwrite=True)
    assert [c.name for c in scan_remote(store)] == ["checkpoint-2"]
    with pytest.raises(
        CheckpointError, match=r"Cannot resume from .*checkpoint-9: no complete checkpoint there"
    ):
        prepare(tmp_path / "x", None, endpoint, resume=f"{uri}/checkpoint-9")


def test_a_branch_commits_its_start_to_its_own_store_so_its_best_pointer_can_name_it(s3_target, tmp_path):
    """The branch's store held only its own checkpoints: its best pointer named a worse one than the run's log (the
    start, never beaten, was not there), and a lost branch machine had nothing of the start to resume."""
    from _callbacks_helpers import publish_rated

    from callbacks.best import read_best_pointer

    uri, endpoint, store = s3_target
    publish_rated(store, tmp_path, 2, 0.4, run=RunInfo("tiny", "lr: 1\n", "r1"))
    fork = uri.replace("/run", "/fork")
    prepare(tmp_path / "fork", fork, endpoint, resume=f"{uri}/checkpoint-2")
    fork_store = S3Store(store.bucket, "fork", endpoint_url=endpoint)
    (committed,) = scan_remote(fork_store)
    source = next(c for c in scan_remote(store) if c.name == "checkpoint-2")
    assert committed.name == "checkpoint-2" and committed.run_id == "r1" and not committed.problems
    assert committed.manifest["files"] == source.manifest["files"]  # the same bytes: its recipe.yaml too
    assert fork_store.read_bytes("checkpoint-2/recipe.yaml") == b"lr: 1\n"
    assert read_best_pointer(fork_store)["checkpoint"] == "checkpoint-2"


def seal(folder, step, run_id="r1"):
    seal_checkpoint(folder, step=step, recipe_name="tiny", run_id=run_id, world_size=1)
    return folder


def test_a_refused_rewind_names_the_checkpoints_of_the_store_and_of_output_dir_apart(
    s3_target, tmp_path, caplog
):
    uri, endpoint, store = s3_target
    commit(store, tmp_path, 2)
    commit(store, tmp_path, 4)
    out = tmp_path / "out"
    write_marker(out, "r1", uri)
    make_checkpoint(out, 4)  # the run's own copy of the store's checkpoint-4: one step, two places
    with pytest.raises(
        CheckpointError,
        match=r"resuming at step 2, but s3://\S+/run and output_dir \S+ already have checkpoints of run r1 "
        r"\(checkpoint-4 in the store; checkpoint-4 in output_dir\)\. ",
    ):
        prepare(out, uri, endpoint, resume=f"{uri}/checkpoint-2")
    prepare(out, uri, endpoint, resume=f"{uri}/checkpoint-2", overwrite=True)  # the overwrite's log, alike
    assert (
        "clearing checkpoint-4 in the store; checkpoint-4 in output_dir (run r1) for resuming at step 2"
        in (caplog.text)
    )


def test_the_seal_callback_writes_a_manifest_that_verifies_the_local_copy(tmp_path):
    folder = make_checkpoint(tmp_path, 2)
    args, state, control = trainer_objects(tmp_path, 2)
    SealCallback(RunInfo("tiny", "", "r1")).on_save(args, state, control)
    manifest, _ = read_local_manifest(folder)
    assert manifest["run_id"] == "r1" and set(manifest["files"]) == {p.name for p in folder.iterdir()} - {
        MANIFEST_NAME
    }
    assert local_checkpoint_problems(folder) == []
    (folder / "adapter_model.safetensors").write_bytes(os.urandom(4096))  # same size, other bytes
    assert local_checkpoint_problems(folder) == [
        "adapter_model.safetensors does not match its SHA-256 in the manifest (altered or corrupt)"
    ]


def test_a_corrupt_local_checkpoint_falls_back_to_the_good_remote_copy(target, tmp_path, caplog):
    uri, endpoint, store = target
    out = tmp_path / "out"
    write_marker(out, "r1", uri)
    source = commit(store, tmp_path, 4)
    local = shutil.copytree(source, out / "checkpoint-4")
    seal(local, 4)
    with open(local / "optimizer.pt", "r+b") as f:
        f.truncate(100)  # a disk that filled up mid-save
    caplog.set_level(logging.INFO)
    plan = prepare(out, uri, endpoint)
    assert plan.resume_from == str(out / "checkpoint-4")
    assert "Skipping local" in caplog.text and "optimizer.pt" in caplog.text
    assert "Resuming from checkpoint-4, the newest good copy (local checkpoint-4 unusable)" in caplog.text
    assert (out / "checkpoint-4" / "optimizer.pt").read_bytes() == (source / "optimizer.pt").read_bytes()


def test_a_corrupt_local_checkpoint_is_moved_aside_for_the_previous_good_one(tmp_path, caplog):
    out = tmp_path / "out"
    seal(make_checkpoint(out, 2), 2)
    bad = seal(make_checkpoint(out, 4), 4)
    (bad / "adapter_model.safetensors").write_bytes(b"x" * 4096)
    plan = prepare(out, None)
    assert plan.resume_from == str(out / "checkpoint-2") and not bad.exists()
    [aside] = (out / SYNC_DIR / "quarantine").iterdir()
    assert (
        aside.name.startswith("checkpoint-4-")
        and (aside / "adapter_model.safetensors").read_bytes() == b"x" * 4096
    )
    assert f"Moved local checkpoint-4 aside to {aside}" in caplog.text


def test_a_checkpoint_folder_the_run_did_not_write_is_moved_aside_never_deleted(tmp_path, caplog):
    """A folder named like a checkpoint, without a manifest: a crashed save, or the user's own; never deleted."""
    out = tmp_path / "out"
    seal(make_checkpoint(out, 2), 2)
    mine = out / "checkpoint-3"
    mine.mkdir()
    (mine / "notes.txt").write_text("my own notes")
    caplog.set_level(logging.INFO)
    plan = prepare(out, None)
    assert plan.resume_from == str(out / "checkpoint-2") and not mine.exists()
    [aside] = (out / SYNC_DIR / "quarantine").iterdir()
    assert aside.name.startswith("checkpoint-3-") and (aside / "notes.txt").read_text() == "my own notes"
    assert f"Moved local checkpoint-3 aside to {aside}" in caplog.text and "Deleting" not in caplog.text
    assert f"{aside.parent} holds 1 folders (0.00 GB): delete them once looked at" in caplog.text


def test_a_corrupt_remote_checkpoint_is_quarantined_and_partials_below_are_cleaned(
    s3_target, tmp_path, caplog
):
    uri, endpoint, store = s3_target
    half = make_checkpoint(tmp_path / "half", 2)  # an upload of ours abandoned long ago
    store.write_bytes(
        f"checkpoint-2/{UPLOAD_MARKER}", json.dumps({"files": ["adapter_model.safetensors"]}).encode()
    )
    store.upload(half / "adapter_model.safetensors", "checkpoint-2/adapter_model.safetensors")
    commit(store, tmp_path, 4)
    commit(store, tmp_path, 6)
    key = f"{store.prefix}/checkpoint-6/adapter_model.safetensors"
    store.client.put_object(Bucket=store.bucket, Key=key, Body=b"y" * 4096)  # same size, other bytes

    plan = prepare(tmp_path / "out", uri, endpoint)

    assert plan.resume_from == str(tmp_path / "out" / "checkpoint-4")
    assert [c.name for c in scan_remote(store)] == ["checkpoint-4"]  # 6 moved aside, partial 2 deleted
    quarantined = store.list("quarantine")
    [folder] = {k.split("/")[1] for k in quarantined}
    assert folder.startswith("checkpoint-6-") and f"quarantine/{folder}/{MANIFEST_NAME}" in quarantined
    assert store.read_bytes(f"quarantine/{folder}/adapter_model.safetensors") == b"y" * 4096  # the evidence
    assert "Moved checkpoint-6 aside to" in caplog.text
    assert "checkpoint-2 (an incomplete upload, never resumable)" in caplog.text


def rated_run(store, tmp_path, accuracies: dict[int, float]):
    """Commit rated checkpoints (step -> held-out accuracy) as run r1 and write its best pointer."""
    for step, accuracy in accuracies.items():
        publish_rated(store, tmp_path, step, accuracy)
    update_best_pointer(store)


def test_a_runs_best_pointer_resumes_the_checkpoint_it_names(s3_target, tmp_path):
    uri, endpoint, store = s3_target
    rated_run(store, tmp_path, {2: 0.3, 4: 0.5, 6: 0.4})
    fork = uri.replace("/run", "/fork")
    plan = prepare(tmp_path / "fork", fork, endpoint, resume=f"{uri}/best")
    assert plan.resume_from == str(tmp_path / "fork" / "checkpoint-4") and plan.run_id == "r1"
    assert local_checkpoint_problems(tmp_path / "fork" / "checkpoint-4") == []  # downloaded and verified


def test_a_local_runs_best_rewinds_its_own_folder_only_with_overwrite(tmp_path):
    out = tmp_path / "out"
    rated_run(FolderStore(out), tmp_path, {2: 0.5, 4: 0.2})
    with pytest.raises(CheckpointError, match=r"resuming at step 2, but output_dir .* \(checkpoint-4\)"):
        prepare(out, None, resume=str(out / "best"))
    plan = prepare(out, None, resume=str(out / "best"), overwrite=True)
    assert plan.resume_from == str(out / "checkpoint-2") and not (out / "checkpoint-4").exists()
    assert local_checkpoint_problems(out / "checkpoint-2") == []  # used in place, intact


def test_a_best_pointer_that_is_missing_says_what_to_pass_instead(s3_target, tmp_path):
    uri, endpoint, store = s3_target
    commit(store, tmp_path, 2)  # no held-out accuracy, so no pointer
    with pytest.raises(
        CheckpointError, match=r"has no best pointer: .* pass a checkpoint-N or the run prefix"
    ):
        prepare(tmp_path / "fork", None, endpoint, resume=f"{uri}/best")


def test_latest_without_a_store_continues_the_run_the_output_folder_belongs_to(tmp_path):
    out = tmp_path / "out"
    write_marker(out, "r7", None)
    seal(make_checkpoint(out, 2), 2, run_id="r7")
    seal(make_checkpoint(out, 4), 4, run_id="r7")
    plan = prepare(out, None)
    assert plan.resume_from == str(out / "checkpoint-4") and plan.run_id == "r7"
    assert read_marker(out) == "r7"


def test_a_good_local_checkpoint_as_new_as_the_stores_is_resumed_in_place(target, tmp_path):
    """The store's copy of the same step is not downloaded over it, nor uploaded again."""
    uri, endpoint, store = target
    source = commit(store, tmp_path, 4)
    out = tmp_path / "out"
    write_marker(out, "r1", uri)
    local = seal(shutil.copytree(source, out / "checkpoint-4"), 4)
    before = {p.name: p.stat().st_ino for p in local.iterdir()}
    plan = prepare(out, uri, endpoint)
    assert plan.resume_from == str(local) and plan.run_id == "r1"
    assert {p.name: p.stat().st_ino for p in local.iterdir()} == before
    [remote] = scan_remote(store)
    assert remote.name == "checkpoint-4" and remote.complete


def test_an_explicit_run_prefix_resumes_its_newest_checkpoint_that_verifies(tmp_path, caplog):
    """Another run's prefix (not one checkpoint-N): broken newer checkpoints are skipped, named ones refused."""
    other = FolderStore(tmp_path / "other")
    commit(other, tmp_path, 2, run_id="r0")
    commit(other, tmp_path, 4, run_id="r0")
    commit(other, tmp_path, 6, run_id="r0")
    (other.root / "checkpoint-6" / "optimizer.pt").write_bytes(b"x" * 8192)  # same size, other bytes
    half = make_checkpoint(tmp_path / "half", 8)  # an upload that never reached its manifest
    other.upload(half / "adapter_model.safetensors", "checkpoint-8/adapter_model.safetensors")

    plan = prepare(tmp_path / "out", None, resume=f"file://{other.root}")

    assert plan.resume_from == str(tmp_path / "out" / "checkpoint-4") and plan.run_id == "r0"
    assert "checkpoint-8: no manifest (upload never finished)" in caplog.text
    assert "checkpoint-6 is corrupt: optimizer.pt does not match its SHA-256" in caplog.text
    with pytest.raises(
        CheckpointError,
        match=r"Cannot resume from file://\S+/checkpoint-8: no manifest \(upload never finished\)",
    ):
        prepare(tmp_path / "named", None, resume=f"file://{other.root}/checkpoint-8")


def test_an_explicit_local_run_folder_resumes_its_newest_good_checkpoint_in_place(tmp_path):
    run = tmp_path / "run"
    seal(make_checkpoint(run, 2), 2, run_id="r3")
    make_checkpoint(run, 4, omit=("optimizer.pt",))
    plan = prepare(tmp_path / "out", None, resume=str(run))
    assert plan.resume_from == str(run / "checkpoint-2") and plan.run_id == "r3"
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match=r"Cannot resume from \S+empty: no checkpoint-N folders in it$"):
        prepare(tmp_path / "out2", None, resume=str(tmp_path / "empty"))
