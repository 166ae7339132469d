"""Stores (S3 through a real S3 API served by moto, and a folder): round trips, conditional writes, retries."""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from pathlib import Path

import pytest
from _callbacks_helpers import Faults, make_checkpoint, s3_bucket, trainer_objects

from callbacks.checkpoint_sync import CheckpointPlan, CheckpointSyncCallback
from callbacks.errors import CheckpointError
from callbacks.manifest import MANIFEST_NAME, parse_manifest
from callbacks.publish import RunInfo, publish_staged, stage_checkpoint
from callbacks.remote import scan_remote
from callbacks.s3_store import S3Store, make_client
from callbacks.stores import FolderStore, open_store
from callbacks.uploader import BackgroundUploader, UploadJob


@pytest.fixture(params=["s3", "folder"])
def store(request, monkeypatch, tmp_path):
    if request.param == "folder":
        return FolderStore(tmp_path / "mounted" / "runs" / "a")
    s3 = s3_bucket(monkeypatch)
    return S3Store(s3.bucket, "runs/a", endpoint_url=s3.endpoint)


def test_round_trip_is_byte_identical(store, tmp_path):
    from boto3.s3.transfer import TransferConfig

    if isinstance(store, S3Store):  # small parts, so the 11 MB file goes up as a multipart upload
        store.transfer = TransferConfig(multipart_threshold=5 << 20, multipart_chunksize=5 << 20)
    data = {"small.bin": os.urandom(1000), "sub/big.bin": os.urandom(11 << 20), "empty.bin": b""}
    for rel, blob in data.items():
        (tmp_path / "src" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "src" / rel).write_bytes(blob)
        store.upload(tmp_path / "src" / rel, f"checkpoint-1/{rel}")
    assert store.list() == {f"checkpoint-1/{rel}": len(blob) for rel, blob in data.items()}
    assert store.list("checkpoint-1") == store.list()
    assert store.list("checkpoint-2") == {}
    for rel, blob in data.items():
        out = tmp_path / "out" / rel.replace("/", "_")
        out.parent.mkdir(exist_ok=True)
        store.download(f"checkpoint-1/{rel}", out)
        assert out.read_bytes() == blob
    store.delete(["checkpoint-1/small.bin", "checkpoint-1/missing.bin"])
    assert "checkpoint-1/small.bin" not in store.list()


def test_conditional_write_creates_once(store):
    assert store.read_bytes("checkpoint-1/manifest.json") is None
    assert store.write_bytes("checkpoint-1/manifest.json", b"first", if_absent=True) is True
    assert store.write_bytes("checkpoint-1/manifest.json", b"second", if_absent=True) is False
    assert store.read_bytes("checkpoint-1/manifest.json") == b"first"
    assert store.write_bytes("checkpoint-1/manifest.json", b"third") is True
    assert store.read_bytes("checkpoint-1/manifest.json") == b"third"


def test_stores_without_conditional_writes_check_first(monkeypatch, caplog):
    s3 = s3_bucket(monkeypatch)
    store = S3Store(s3.bucket, "run", endpoint_url=s3.endpoint)
    Faults(store.client, "PutObject", ["501"])  # the first conditional write is answered NotImplemented
    assert store.write_bytes("checkpoint-1/manifest.json", b"first", if_absent=True) is True
    assert "does not support conditional writes (If-None-Match); checking first" in caplog.text
    assert store.write_bytes("checkpoint-1/manifest.json", b"second", if_absent=True) is False
    assert store.read_bytes("checkpoint-1/manifest.json") == b"first"


def test_open_store_parses_uris(tmp_path, monkeypatch):
    s3_bucket(monkeypatch)
    s3 = open_store("s3://bucket/runs/llama/", "http://127.0.0.1:9")
    assert (s3.bucket, s3.prefix, s3.uri) == ("bucket", "runs/llama", "s3://bucket/runs/llama")
    assert open_store(f"file://{tmp_path}/x").root == tmp_path / "x"
    assert open_store(str(tmp_path / "y")).root == tmp_path / "y"
    with pytest.raises(
        CheckpointError, match=r"Unsupported checkpoint URI 'gs://b/p': use s3://bucket/prefix"
    ):
        open_store("gs://b/p")
    with pytest.raises(
        CheckpointError, match=r"names a host \('tmp'\).* file:///tmp/runs/a \(three slashes\)"
    ):
        open_store("file://tmp/runs/a")  # two slashes: not the folder /runs/a
    for home in ("file://~/runs/a", "file:///~/runs/a"):  # not /runs/a, nor a folder named "~" at the root
        with pytest.raises(
            CheckpointError, match=r"cannot name a home folder; write the plain path ~/runs/a,"
        ):
            open_store(home)
    assert open_store(f"file://localhost{tmp_path}/z").root == tmp_path / "z"
    with pytest.raises(CheckpointError, match="names no bucket"):
        open_store("s3:///prefix")
    with pytest.raises(CheckpointError, match="endpoint_url is set .* not an s3:// URI"):
        open_store(str(tmp_path), "http://127.0.0.1:9000")


def _run() -> RunInfo:
    return RunInfo(recipe_name="tiny", recipe_yaml="model: {}\n", run_id="run-a")


def test_transient_failures_are_retried_and_committed(monkeypatch, tmp_path):
    s3 = s3_bucket(monkeypatch)
    store = S3Store(s3.bucket, "run", endpoint_url=s3.endpoint, retries=4)
    puts = Faults(store.client, "PutObject", ["503", "reset", "503"])
    staged = stage_checkpoint(make_checkpoint(tmp_path / "out", 3), tmp_path / "staging", "recipe: x\n")
    manifest = publish_staged(store, staged, 3, _run())
    assert (
        puts.injected == 3 and puts.calls == 1 + len(manifest["files"]) + 1 + 3
    )  # marker, files, manifest, retries
    [ckpt] = scan_remote(store)
    assert ckpt.complete and ckpt.run_id == "run-a" and ckpt.manifest["files"] == manifest["files"]
    assert "recipe.yaml" in manifest["files"]


def test_persistent_outage_is_reported_and_does_not_hang(monkeypatch, tmp_path):
    s3 = s3_bucket(monkeypatch)
    store = S3Store(s3.bucket, "run", endpoint_url=s3.endpoint, retries=2)
    puts = Faults(store.client, "PutObject", ["503"], always=True)
    callback = CheckpointSyncCallback(store, _run(), tmp_path / "staging")
    make_checkpoint(tmp_path / "out", 5)
    start = time.monotonic()
    callback.on_save(*trainer_objects(tmp_path / "out", 5))
    message = callback.finish()
    assert re.search(
        r"FAILED for checkpoint-5: .*SlowDown.*newest checkpoint safely stored there is none", message
    )
    assert time.monotonic() - start < 30
    assert puts.calls == 3  # the upload marker's three attempts, then the commit stops
    assert not any(k.endswith(MANIFEST_NAME) for k in store.list())
    assert not (tmp_path / "staging").exists() or not any((tmp_path / "staging").iterdir())


@pytest.mark.parametrize("required", [False, True])
def test_a_frozen_store_fails_the_upload_in_bounded_time_and_only_a_required_one_fails_the_run(
    monkeypatch, tmp_path, caplog, required
):
    s3 = s3_bucket(monkeypatch)
    store = S3Store(s3.bucket, "run", endpoint_url=s3.endpoint, retries=1, read_timeout=1)
    # The endpoint takes the request and never answers in time. Only during this test: the server is the worker's
    # for the whole session, and a later test's checkpoint-5 took 6 s a request (a minute, test_callbacks_best).
    monkeypatch.setitem(s3.server.slow_puts, "checkpoint-5", 6)
    plan = CheckpointPlan(
        callbacks=[CheckpointSyncCallback(store, _run(), tmp_path / "staging")], require_upload=required
    )
    make_checkpoint(tmp_path / "out", 5)
    start = time.monotonic()
    plan.callbacks[0].on_save(*trainer_objects(tmp_path / "out", 5))
    if required:
        with pytest.raises(
            CheckpointError, match=r"Checkpoint upload to \S+ FAILED for checkpoint-5: .*timeout"
        ):
            plan.finish_uploads()
    else:
        plan.finish_uploads()
        assert (
            "FAILED for checkpoint-5" in caplog.text and "the run still ends with exit code 0" in caplog.text
        )
    assert time.monotonic() - start < 20  # two attempts of one second each, not minutes


class _SetOnRecord(logging.Handler):
    def __init__(self, event: threading.Event):
        super().__init__()
        self.event = event

    def emit(self, record: logging.LogRecord) -> None:
        self.event.set()


def test_a_slow_upload_is_announced_while_the_run_waits(caplog):
    # The upload ends once the wait has announced it, not after a fixed 0.5 s: a busy machine could start the wait
    # later than that, or run its first 0.1 s timeout later, and the upload was over before anything was said.
    release, said = threading.Event(), logging.getLogger("callbacks.uploader")
    uploader = BackgroundUploader(lambda job: release.wait(60))
    uploader.submit(UploadJob(7, Path("/nonexistent/staged")))
    said.addHandler(handler := _SetOnRecord(release))
    try:
        uploader.wait(warn_every=0.1)
    finally:
        said.removeHandler(handler)
    # The seconds are the machine's: 0 when the first 0.1 s timeout came in time.
    assert re.search(
        r"Still uploading checkpoint-7 after \d+ s: the store is slow or not answering", caplog.text
    )
    assert uploader.committed == [7]


def test_manifest_is_last_and_records_run(monkeypatch, tmp_path):
    s3 = s3_bucket(monkeypatch)
    store = S3Store(s3.bucket, "run", endpoint_url=s3.endpoint)
    order = []
    store.client.meta.events.register(
        "before-send.s3.PutObject", lambda request, **kw: order.append(request.url)
    )
    staged = stage_checkpoint(
        make_checkpoint(tmp_path / "out", 7, world_size=2), tmp_path / "staging", "r: 1\n"
    )
    publish_staged(store, staged, 7, _run(), world_size=2)
    assert (
        order[-1].endswith(f"checkpoint-7/{MANIFEST_NAME}") and len(order) == 10
    )  # marker, 8 files, manifest
    manifest, reason = parse_manifest(store.read_bytes(f"checkpoint-7/{MANIFEST_NAME}"), "m")
    assert reason is None
    assert manifest["step"] == 7 and manifest["recipe_name"] == "tiny" and manifest["run_id"] == "run-a"
    assert manifest["world_size"] == 2 and manifest["uploader"]["rank"] == 0
    assert {"rng_state_0.pth", "rng_state_1.pth"} <= set(manifest["files"])
    assert {"torch", "transformers", "trl", "peft"} <= set(manifest["versions"])
    assert all(len(e["sha256"]) == 64 for e in manifest["files"].values())


def test_a_home_folder_in_a_file_uri_is_refused_in_every_form_and_only_the_home_folder():
    """file://localhost/~/runs wrote to a folder named "~" at the root; file:///~scratch/runs (a folder of that name
    at the root) was refused with the plain path ~scratch/runs as the fix, which expands to user scratch's home."""
    with pytest.raises(CheckpointError, match=r"cannot name a home folder; write the plain path ~/runs/a,"):
        open_store("file://localhost/~/runs/a")
    assert open_store("file:///~scratch/runs").root == Path("/~scratch/runs")  # not a home folder: as written


def test_s3_deletes_go_in_batches_of_1000_and_a_key_the_store_kept_fails_loudly(monkeypatch):
    s3 = s3_bucket(monkeypatch)
    store = S3Store(s3.bucket, "run", endpoint_url=s3.endpoint)
    batches = []

    def delete_objects(Bucket, Delete):
        assert Bucket == s3.bucket and Delete["Quiet"] is True
        batches.append([o["Key"] for o in Delete["Objects"]])
        return {}

    store.client.delete_objects = delete_objects
    store.delete([f"checkpoint-1/f{i}" for i in range(2001)])  # S3 takes at most 1000 keys per request
    assert [len(b) for b in batches] == [1000, 1000, 1]
    assert batches[0][0] == "run/checkpoint-1/f0" and batches[2] == ["run/checkpoint-1/f2000"]
    refused = {"Key": "run/checkpoint-1/manifest.json", "Code": "AccessDenied", "Message": "Access Denied"}
    store.client.delete_objects = lambda **request: {"Errors": [refused]}
    with pytest.raises(
        CheckpointError
    ) as raised:  # a manifest left behind would keep a checkpoint "complete"
        store.delete(["checkpoint-1/manifest.json"])
    assert str(raised.value) == f"Could not delete from s3://{s3.bucket}/run: [{refused!r}]"


def test_an_s3_compatible_endpoint_gets_path_addressing_and_checksums_only_where_required(monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("RANK", "3")
    other = make_client("http://127.0.0.1:9", retries=4, connect_timeout=10, read_timeout=30).meta.config
    assert other.s3 == {"addressing_style": "path"}
    assert other.request_checksum_calculation == other.response_checksum_validation == "when_required"
    assert other.retries == {"mode": "standard", "total_max_attempts": 5}  # 4 retries after the first attempt
    assert (other.connect_timeout, other.read_timeout, other.user_agent_extra) == (
        10,
        30,
        "grpo-recipes rank/3",
    )
    aws = make_client(None, retries=1, connect_timeout=3, read_timeout=5).meta.config
    assert aws.s3 is None and aws.request_checksum_calculation == "when_supported"


def test_an_s3_error_is_never_taken_for_a_missing_object_or_a_refused_condition(monkeypatch):
    from botocore.exceptions import ClientError

    s3 = s3_bucket(monkeypatch)
    store = S3Store(s3.bucket, "run", endpoint_url=s3.endpoint, retries=0)
    store.write_bytes("run.lease.json", b"theirs")
    Faults(store.client, "GetObject", ["501"])
    with pytest.raises(ClientError, match="NotImplemented"):  # not None: the lease would look free
        store.read_bytes("run.lease.json")
    assert store.read_bytes("run.lease.json") == b"theirs" and store.read_bytes("gone.json") is None
    Faults(store.client, "PutObject", ["503"])
    with pytest.raises(ClientError, match="SlowDown"):  # an outage, not a store without conditional writes
        store.write_bytes("checkpoint-1/manifest.json", b"mine", if_absent=True)
    assert store._conditional_writes and store.read_bytes("checkpoint-1/manifest.json") is None


def test_a_drive_letter_is_a_folder_path_and_another_scheme_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert isinstance(open_store("C:/runs"), FolderStore)  # one letter: a Windows drive, not a URI scheme
    with pytest.raises(CheckpointError, match="Unsupported checkpoint URI 'gs://bucket/runs'"):
        open_store("gs://bucket/runs")


def test_only_a_refused_checksum_turns_checksums_off_and_only_once(monkeypatch, tmp_path, caplog):
    from boto3.exceptions import S3UploadFailedError

    s3 = s3_bucket(monkeypatch)
    store = S3Store(s3.bucket, "run", endpoint_url=s3.endpoint, retries=0)
    (tmp_path / "a.bin").write_bytes(b"a" * 100)
    outage = Faults(store.client, "PutObject", ["503"])
    with pytest.raises(S3UploadFailedError, match="SlowDown"):  # an outage says nothing about checksums
        store.upload(tmp_path / "a.bin", "checkpoint-1/a.bin")
    assert store._checksums and outage.injected == 1 and "refused a SHA-256" not in caplog.text
    refusals = Faults(store.client, "PutObject", ["501"], always=True)
    with pytest.raises(S3UploadFailedError, match="NotImplemented"):  # refused with and without: an error
        store.upload(tmp_path / "a.bin", "checkpoint-1/a.bin")
    assert not store._checksums and refusals.injected == 2
