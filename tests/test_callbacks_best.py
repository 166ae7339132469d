"""The ``best`` pointer: it names the complete checkpoint with the highest held-out accuracy, on the S3 test
server and in a folder, survives a crash between a manifest and the pointer, and is kept by retention."""

from __future__ import annotations

import hashlib
import json
import logging

import pytest
from _callbacks_helpers import make_checkpoint, publish_rated, rated_checkpoint, trainer_objects

from callbacks.best import BEST_NAME, read_best_pointer, update_best_pointer
from callbacks.checkpoint_sync import SealCallback, fetch_checkpoint
from callbacks.errors import CheckpointError
from callbacks.manifest import MANIFEST_NAME, build_manifest, manifest_bytes
from callbacks.publish import RunInfo
from callbacks.remote import commit_checkpoint, scan_remote
from callbacks.resume import write_marker
from callbacks.retention import delete_checkpoint
from callbacks.stores import FolderStore

RUN = RunInfo("tiny", "r: 1\n", "r1")


def best_name(store) -> str | None:
    pointer = read_best_pointer(store)
    return pointer and pointer["checkpoint"]


def test_manifest_records_the_heldout_evaluation_at_its_step(tmp_path):
    folder = make_checkpoint(tmp_path, 200)
    manifest = build_manifest(folder, step=200, recipe_name="tiny", run_id="r1", world_size=1, rank=0)
    assert manifest["heldout"] is None  # no heldout.json
    history = {
        "format": 1,
        "evaluations": [
            {"step": 100, "accuracy": 0.2, "low": 0.1, "high": 0.3, "questions": 50, "samples": 4},
            {"step": 200, "accuracy": 0.25, "low": 0.2, "high": 0.3, "questions": 50, "samples": 4,
             "unparseable": 0.05, "per_question": {"q1": [2, 4, 0]}},
        ],
    }  # fmt: skip
    (folder / "heldout.json").write_text(json.dumps(history))
    manifest = build_manifest(folder, step=200, recipe_name="tiny", run_id="r1", world_size=1, rank=0)
    assert manifest["heldout"] == {
        "step": 200, "accuracy": 0.25, "low": 0.2, "high": 0.3, "questions": 50, "samples": 4
    }  # fmt: skip
    assert "heldout.json" in manifest["files"]
    assert (
        build_manifest(folder, step=300, recipe_name="t", run_id="r", world_size=1, rank=0)["heldout"] is None
    )
    (folder / "heldout.json").write_text('{"format": 1, "evaluations": [')
    with pytest.raises(
        CheckpointError, match=rf"{folder / 'heldout.json'} is not a held-out history \(invalid JSON"
    ):
        build_manifest(folder, step=200, recipe_name="tiny", run_id="r1", world_size=1, rank=0)
    (folder / "heldout.json").write_text(json.dumps({"evaluations": [{"step": 200}]}))
    with pytest.raises(CheckpointError, match=r"heldout\.json is not a held-out history of format 1"):
        build_manifest(folder, step=200, recipe_name="tiny", run_id="r1", world_size=1, rank=0)
    (folder / "heldout.json").write_text(json.dumps({"format": 1, "evaluations": [{"step": 200}]}))
    with pytest.raises(CheckpointError, match=r"the evaluation at step 200 needs a numeric accuracy"):
        build_manifest(folder, step=200, recipe_name="tiny", run_id="r1", world_size=1, rank=0)


def test_pointer_names_the_most_accurate_complete_checkpoint_and_is_written_on_change(
    target, tmp_path, caplog
):
    _, _, store = target
    writes = []
    real_write = store.write_bytes
    store.write_bytes = lambda key, data, **kw: writes.append(key) or real_write(key, data, **kw)
    caplog.set_level(logging.INFO, logger="callbacks.best")
    for step, accuracy in ((1, 0.2), (2, 0.5), (3, 0.4)):
        publish_rated(store, tmp_path, step, accuracy)
    publish_rated(store, tmp_path / "unrated", 4, None)  # no held-out evaluation at this step: never named
    assert read_best_pointer(store) == {
        "format": "grpo-recipes-best/1",
        "checkpoint": "checkpoint-2",
        "step": 2,
        "heldout_accuracy": 0.5,
        "run_id": "r1",
        "manifest_sha256": hashlib.sha256(store.read_bytes(f"checkpoint-2/{MANIFEST_NAME}")).hexdigest(),
    }
    assert writes.count(BEST_NAME) == 2  # checkpoint-1, then checkpoint-2; not again for 3 and 4
    assert "Best checkpoint: checkpoint-1 (held-out accuracy 20.0%)" in caplog.text
    assert "Best checkpoint: checkpoint-2 (held-out accuracy 50.0%)" in caplog.text


def test_ties_go_to_the_earliest_step(target, tmp_path):
    _, _, store = target
    for step, accuracy in ((1, 0.3), (2, 0.5), (3, 0.5)):
        publish_rated(store, tmp_path, step, accuracy)
    assert best_name(store) == "checkpoint-2"


def test_an_incomplete_checkpoint_is_never_named(target, tmp_path):
    _, _, store = target
    publish_rated(store, tmp_path, 1, 0.3)
    publish_rated(store, tmp_path, 2, 0.6)
    store.delete(["checkpoint-2/adapter_model.safetensors"])
    assert update_best_pointer(store)["checkpoint"] == "checkpoint-1"
    publish_rated(store, tmp_path, 3, 0.7)
    store.write_bytes("checkpoint-3/optimizer.pt", b"short")
    assert update_best_pointer(store)["checkpoint"] == "checkpoint-1"
    folder = rated_checkpoint(tmp_path / "src", 4, 0.9)
    for path in folder.iterdir():  # an upload that died before its manifest
        store.upload(path, f"checkpoint-4/{path.name}")
    assert update_best_pointer(store)["checkpoint"] == "checkpoint-1"
    assert [c.step for c in scan_remote(store) if c.complete] == [1]


def test_a_crash_between_manifest_and_pointer_is_healed_by_the_next_commit(target, tmp_path, monkeypatch):
    uri, endpoint, store = target
    monkeypatch.setenv("GRPO_RECIPES_CACHE", str(tmp_path / "cache"))
    publish_rated(store, tmp_path, 1, 0.3)
    better = rated_checkpoint(tmp_path / "src", 2, 0.8)
    manifest = build_manifest(better, step=2, recipe_name="tiny", run_id="r1", world_size=1, rank=0)
    assert commit_checkpoint(store, better, manifest)  # committed; the process dies before the pointer
    assert best_name(store) == "checkpoint-1"
    assert fetch_checkpoint(f"{uri}/best", endpoint_url=endpoint).name == "checkpoint-1"  # still complete
    publish_rated(store, tmp_path, 3, 0.1)
    assert best_name(store) == "checkpoint-2"
    assert fetch_checkpoint(f"{uri}/best", endpoint_url=endpoint).name == "checkpoint-2"


def test_retention_keeps_the_best_beside_the_newest(target, tmp_path):
    _, _, store = target
    run = RunInfo("tiny", "r: 1\n", "r1", keep_last=1)
    for step, accuracy in ((1, 0.2), (2, 0.9), (3, 0.1), (4, 0.3)):
        publish_rated(store, tmp_path, step, accuracy, run)
    assert [c.name for c in scan_remote(store)] == ["checkpoint-4", "checkpoint-2"]
    assert best_name(store) == "checkpoint-2"
    publish_rated(store, tmp_path, 5, 0.95, run)
    assert [c.name for c in scan_remote(store)] == ["checkpoint-5"]
    assert best_name(store) == "checkpoint-5"


def test_fetch_best_gives_the_named_checkpoint(target, tmp_path, monkeypatch):
    uri, endpoint, store = target
    monkeypatch.setenv("GRPO_RECIPES_CACHE", str(tmp_path / "cache"))
    publish_rated(store, tmp_path, 2, 0.6)
    publish_rated(store, tmp_path, 4, 0.4)
    source = tmp_path / "src" / "checkpoint-2" / "adapter_model.safetensors"
    uris = [uri] if uri.startswith("s3://") else [uri, f"file://{uri}"]  # a local run folder, or its URI
    for run_uri in uris:
        folder = fetch_checkpoint(f"{run_uri}/best", endpoint_url=endpoint)
        assert folder.name == "checkpoint-2"
        assert (folder / "adapter_model.safetensors").read_bytes() == source.read_bytes()
    if not uri.startswith("s3://"):
        assert fetch_checkpoint(f"{uri}/best") == store.root / "checkpoint-2"  # used in place, verified
        assert fetch_checkpoint(f"file://{uri}/best").is_relative_to(tmp_path / "cache")


def test_a_missing_or_stale_pointer_is_refused_naming_both(target, tmp_path):
    uri, endpoint, store = target
    with pytest.raises(CheckpointError, match=r"has no best pointer: the run has not evaluated held-out"):
        fetch_checkpoint(f"{uri}/best", endpoint_url=endpoint)
    publish_rated(store, tmp_path, 1, 0.5)
    publish_rated(store, tmp_path, 2, 0.4)
    manifest = json.loads(store.read_bytes(f"checkpoint-1/{MANIFEST_NAME}"))
    store.write_bytes(f"checkpoint-1/{MANIFEST_NAME}", manifest_bytes({**manifest, "created": "then"}))
    with pytest.raises(CheckpointError, match=r"checkpoint-1, whose manifest changed since the pointer"):
        fetch_checkpoint(f"{uri}/best", endpoint_url=endpoint)
    store.delete(["checkpoint-1/scheduler.pt"])
    with pytest.raises(
        CheckpointError, match=r"/best names .*checkpoint-1, which is incomplete \(scheduler.pt is listed"
    ):
        fetch_checkpoint(f"{uri}/best", endpoint_url=endpoint)
    [_, first] = scan_remote(store)
    delete_checkpoint(store, first)
    with pytest.raises(CheckpointError, match=r"checkpoint-1, which is gone .* pass a checkpoint-N"):
        fetch_checkpoint(f"{uri}/best", endpoint_url=endpoint)
    assert update_best_pointer(store)["checkpoint"] == "checkpoint-2"  # the next update heals it
    delete_checkpoint(store, scan_remote(store)[0])
    assert update_best_pointer(store) is None and store.read_bytes(BEST_NAME) is None


def test_a_best_object_the_project_did_not_write_is_left_alone(target, tmp_path, caplog):
    uri, endpoint, store = target
    store.write_bytes(BEST_NAME, b"my notes")
    publish_rated(store, tmp_path, 1, 0.5)
    assert store.read_bytes(BEST_NAME) == b"my notes"
    assert "is not valid JSON" in caplog.text and "leaving it alone" in caplog.text
    with pytest.raises(CheckpointError, match=r"best is not valid JSON .* pass a checkpoint-N"):
        fetch_checkpoint(f"{uri}/best", endpoint_url=endpoint)


def test_the_local_pointer_names_the_best_sealed_checkpoint_folder(tmp_path):
    out = tmp_path / "out"
    seal = SealCallback(RUN)
    (out / ".checkpoint_sync" / "staging" / "checkpoint-9-abcd").mkdir(parents=True)
    (out / ".checkpoint_sync" / "staging" / "checkpoint-9-abcd" / "optimizer.pt").write_bytes(b"x")
    (out / "heldout").mkdir()
    (out / "heldout" / "step-1.jsonl").write_text("{}\n")
    for step, accuracy in ((1, 0.4), (2, 0.6), (3, 0.5)):
        rated_checkpoint(out, step, accuracy)
        seal.on_save(*trainer_objects(out, step))
    assert [c.name for c in scan_remote(FolderStore(out))] == ["checkpoint-3", "checkpoint-2", "checkpoint-1"]
    assert json.loads((out / BEST_NAME).read_text())["checkpoint"] == "checkpoint-2"
    assert fetch_checkpoint(out / BEST_NAME) == out.absolute() / "checkpoint-2"
    (out / "checkpoint-2" / "adapter_model.safetensors").write_bytes(b"altered")
    with pytest.raises(CheckpointError, match=r"checkpoint-2, which is incomplete \(adapter_model"):
        fetch_checkpoint(out / BEST_NAME)


def test_after_a_resume_elsewhere_the_local_pointer_never_names_a_worse_checkpoint(tmp_path, caplog):
    """The run's best (step 2) stayed in the store when a new machine resumed: no local pointer until a better one."""
    out = tmp_path / "out"
    seal = SealCallback(RUN, "s3://bucket/runs/a")
    caplog.set_level(logging.INFO)
    for step, accuracy, best_step in ((5, 0.3, None), (6, 0.2, 2), (7, 0.9, 7)):
        rated_checkpoint(out, step, accuracy)
        args, state, control = trainer_objects(out, step)
        state.best_global_step = best_step  # what the resumed trainer_state.json says
        seal.on_save(args, state, control)
        pointer = json.loads((out / BEST_NAME).read_text()) if (out / BEST_NAME).exists() else None
        if step == 5:  # a run without held-out best so far: the local folders decide
            assert pointer["checkpoint"] == "checkpoint-5"
        if step == 6:
            assert pointer is None
            write_marker(out, "r1", "s3://bucket/runs/a")
            with pytest.raises(
                CheckpointError,
                match=r"syncs its checkpoints to s3://bucket/runs/a, .* use s3://bucket/runs/a/best",
            ):
                fetch_checkpoint(out / BEST_NAME)
            assert (
                "(it named checkpoint-5): the run's best, checkpoint-2, is not on this machine "
                "(s3://bucket/runs/a/best)" in caplog.text
            )
        if step == 7:
            assert pointer["checkpoint"] == "checkpoint-7"


def test_a_failed_pointer_update_keeps_the_commit_and_skips_retention(tmp_path, caplog):
    store = FolderStore(tmp_path / "drive")
    run = RunInfo("tiny", "r: 1\n", "r1", keep_last=1)
    publish_rated(store, tmp_path, 1, 0.5, run)
    real_read = store.read_bytes

    def failing_read(key):
        if key == BEST_NAME:
            raise OSError("disk gone")
        return real_read(key)

    store.read_bytes = failing_read
    publish_rated(store, tmp_path, 2, 0.1, run)
    assert "Could not update the best pointer" in caplog.text and "disk gone" in caplog.text
    assert [c.name for c in scan_remote(store) if c.complete] == ["checkpoint-2", "checkpoint-1"]
