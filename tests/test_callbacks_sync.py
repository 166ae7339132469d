"""The sync callback: staging survives checkpoint rotation, uploads stay off the training path, backlog and
retention are bounded, and failures are reported at the end of training."""

from __future__ import annotations

import logging
import threading
import time

import pytest
from _callbacks_helpers import Faults, make_checkpoint, s3_bucket, trainer_objects

from callbacks.checkpoint_sync import CheckpointSyncCallback, prepare_checkpointing
from callbacks.download import download_checkpoint
from callbacks.manifest import MANIFEST_NAME
from callbacks.publish import RunInfo
from callbacks.remote import UPLOAD_MARKER, scan_remote
from callbacks.retention import apply_retention
from callbacks.s3_store import S3Store
from callbacks.stores import FolderStore


@pytest.fixture
def store(monkeypatch):
    s3 = s3_bucket(monkeypatch)
    return S3Store(s3.bucket, "run", endpoint_url=s3.endpoint, retries=1)


def _callback(store, tmp_path, keep_last=None):
    return CheckpointSyncCallback(store, RunInfo("tiny", "r: 1\n", "r1", keep_last), tmp_path / "staging")


def _save(callback, out, step, **kwargs):
    make_checkpoint(out, step, **kwargs)
    callback.on_save(*trainer_objects(out, step))


def _finish(callback, out=None, step=None):
    return callback.finish()


def test_rotation_cannot_break_an_upload(store, tmp_path, caplog):
    """A real Trainer with save_total_limit=1 deletes each checkpoint folder while its (slowed) upload runs."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

    from recipes.builtin import resolve_builtin

    upload = store.upload

    def slow_upload(*args, **kwargs):
        time.sleep(0.05)
        upload(*args, **kwargs)

    store.upload = slow_upload
    torch.manual_seed(0)
    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(resolve_builtin("builtin:tiny-llama")), LoraConfig(r=4)
    )
    rows = [{"input_ids": [5 + i, 6, 7, 8, 9, 10], "labels": [5 + i, 6, 7, 8, 9, 10]} for i in range(32)]
    out = tmp_path / "out"
    args = TrainingArguments(
        output_dir=str(out), max_steps=6, per_device_train_batch_size=2, save_strategy="steps", save_steps=1,
        save_total_limit=1, report_to=[], use_cpu=True, logging_steps=1, disable_tqdm=True,
    )  # fmt: skip
    callback = _callback(store, tmp_path)
    caplog.set_level(logging.INFO)
    Trainer(model=model, args=args, train_dataset=rows, callbacks=[callback]).train()
    assert callback.finish() is None  # waits for the last upload; nothing failed

    uploader = callback.uploader
    assert [p.name for p in out.glob("checkpoint-*")] == ["checkpoint-6"]  # the others were rotated away
    assert uploader.failed == {} and uploader.committed[-1] == 6
    assert sorted(uploader.committed + uploader.skipped) == [1, 2, 3, 4, 5, 6]
    remote = {c.step: c for c in scan_remote(store)}
    assert sorted(remote) == sorted(uploader.committed)
    for step in uploader.committed:  # every checkpoint it reports is complete and verifies byte for byte
        assert remote[step].complete
        download_checkpoint(store, remote[step], tmp_path / "verify" / f"checkpoint-{step}")
    assert {"adapter_model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth"} <= set(
        remote[6].files
    )
    for step in uploader.skipped:
        assert f"Upload of checkpoint-{step} skipped" in caplog.text


def test_backlog_is_bounded_and_the_newest_wins(store, tmp_path, caplog):
    entered, gate = threading.Event(), threading.Event()
    upload = store.upload

    def gated_upload(*args, **kwargs):
        entered.set()
        gate.wait(300)
        upload(*args, **kwargs)

    store.upload = gated_upload
    callback, out = _callback(store, tmp_path), tmp_path / "out"
    _save(callback, out, 1)
    assert entered.wait(60)  # checkpoint-1 is uploading, held at the gate
    saved = threading.Event()

    def save_the_rest():
        for step in (2, 3, 4):
            _save(callback, out, step)
        saved.set()

    threading.Thread(target=save_the_rest, daemon=True).start()
    assert saved.wait(120)  # saving never waits for the network: the upload stays held until the gate opens
    gate.set()
    _finish(callback, out)
    assert callback.uploader.committed == [1, 4] and callback.uploader.skipped == [2, 3]
    assert "Upload of checkpoint-2 skipped: checkpoint-3 arrived while it was still waiting" in caplog.text
    assert [c.step for c in scan_remote(store) if c.complete] == [4, 1]
    assert list((tmp_path / "staging").iterdir()) == []  # staged copies are cleaned up


def test_train_end_waits_for_pending_uploads(store, tmp_path):
    # Held until the test has looked: 0.1 s a file alone let a busy machine finish the upload before the look.
    upload, looked = store.upload, threading.Event()
    store.upload = lambda *a, **k: (looked.wait(60), time.sleep(0.1), upload(*a, **k))
    callback, out = _callback(store, tmp_path), tmp_path / "out"
    _save(callback, out, 3)
    assert scan_remote(store) == [] or not scan_remote(store)[0].complete  # still uploading
    looked.set()  # the upload goes on, 0.1 s a file: the end of training must wait for it
    _finish(callback, out)
    assert [c.step for c in scan_remote(store) if c.complete] == [3]


def test_failure_superseded_by_a_newer_commit_is_logged_not_raised(store, tmp_path, caplog):
    Faults(store.client, "PutObject", ["503", "503"])  # two attempts of its first write: checkpoint-1 fails
    callback, out = _callback(store, tmp_path), tmp_path / "out"
    _save(callback, out, 1)
    callback.uploader.wait()
    _save(callback, out, 2)
    _finish(callback, out)
    assert callback.uploader.committed == [2] and list(callback.uploader.failed) == [1]
    assert "checkpoint-1 failed to upload" in caplog.text and "the newer checkpoint-2 is safe" in caplog.text


def test_killed_mid_upload_resumes_from_the_previous_checkpoint(store, tmp_path, caplog):
    callback, out = _callback(store, tmp_path), tmp_path / "out"
    _save(callback, out, 2)
    callback.uploader.wait()
    upload, uploaded = store.upload, []
    killed, frozen = threading.Event(), threading.Event()

    def dying_upload(local, key, progress=None):  # the machine dies after two files of checkpoint-4
        if len(uploaded) == 2:
            killed.set()
            frozen.wait(10)
            raise ConnectionError("this machine is gone")
        uploaded.append(key)
        upload(local, key, progress)

    store.upload = dying_upload
    _save(callback, out, 4)
    assert killed.wait(10)
    # half uploaded, no manifest
    assert sorted(store.list("checkpoint-4")) == sorted([*uploaded, f"checkpoint-4/{UPLOAD_MARKER}"])
    plan = prepare_checkpointing(
        output_dir=str(tmp_path / "new-machine"), recipe_name="tiny", recipe_yaml="", uri=store.uri,
        endpoint_url=store.endpoint_url,
    )  # fmt: skip
    assert plan.resume_from == str(tmp_path / "new-machine" / "checkpoint-2") and plan.run_id == "r1"
    assert "checkpoint-4: no manifest (upload never finished)" in caplog.text
    frozen.set()
    callback.uploader.wait()


def test_retention_keeps_the_newest_complete_checkpoints(tmp_path):
    store = FolderStore(tmp_path / "drive")
    callback, out = _callback(store, tmp_path, keep_last=2), tmp_path / "out"
    for step in (1, 2, 3, 4):
        _save(callback, out, step)
        callback.uploader.wait()
    assert [c.step for c in scan_remote(store)] == [4, 3]
    (tmp_path / "drive" / "checkpoint-5").mkdir()  # an upload in flight: newer than the newest complete
    (tmp_path / "drive" / "checkpoint-5" / "optimizer.pt").write_bytes(b"x")
    (tmp_path / "drive" / "checkpoint-2").mkdir()  # a dead partial upload: older
    (tmp_path / "drive" / "checkpoint-2" / "optimizer.pt").write_bytes(b"x")
    assert apply_retention(store, 1) == ["checkpoint-3", "checkpoint-2"]
    assert [(c.step, MANIFEST_NAME in c.files) for c in scan_remote(store)] == [(5, False), (4, True)]
