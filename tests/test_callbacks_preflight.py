"""Preflight: storage problems are found before the model loads, in seconds, with a message saying what is wrong."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager

import boto3
import pytest
from _callbacks_helpers import s3_bucket

from callbacks.checkpoint_sync import prepare_checkpointing
from callbacks.errors import CheckpointError
from callbacks.s3_store import S3Store
from callbacks.stores import FolderStore


@contextmanager
def moto_auth(endpoint):
    """Make the test server check credentials (moto accepts any by default)."""

    def set_count(value: bytes):
        url, headers = f"{endpoint}/moto-api/reset-auth", {"Content-Type": "text/plain"}
        urllib.request.urlopen(urllib.request.Request(url, data=value, headers=headers, method="POST"))

    set_count(b"0")
    try:
        yield
    finally:
        set_count(b"inf")


def _fails_fast(store, match, monkeypatch):
    """The preflight fails with ``match`` in seconds, not minutes: a client with short timeouts and one retry at most,
    and no request sent again after a refusal (counted, not timed: a busy machine slows every request)."""
    from callbacks import s3_store

    clients, sent = [], []

    def counting_client(*args, **kwargs):
        clients.append(client := make_client(*args, **kwargs))
        client.meta.events.register("before-send", lambda request, **_: sent.append(request.method))
        return client

    make_client = s3_store.make_client
    monkeypatch.setattr(s3_store, "make_client", counting_client)
    with pytest.raises(CheckpointError, match=match):
        store.preflight()
    ((client,),) = [clients]
    config = client.meta.config
    assert config.retries["total_max_attempts"] <= 2 and max(config.connect_timeout, config.read_timeout) <= 5
    assert len(sent) <= 2, sent  # HEAD then GET to learn why; one retry of an unreachable endpoint


def test_working_bucket_passes_and_leaves_nothing_behind(monkeypatch):
    s3 = s3_bucket(monkeypatch)
    S3Store(s3.bucket, "runs/a", endpoint_url=s3.endpoint).preflight()
    assert s3.client.list_objects_v2(Bucket=s3.bucket).get("KeyCount") == 0


def test_no_credentials(monkeypatch):
    s3 = s3_bucket(monkeypatch)
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    _fails_fast(
        S3Store(s3.bucket, "p", endpoint_url=s3.endpoint),
        r"No S3 credentials found for s3://ckpt-\w+/p at http://127.0.0.1:\d+\. Set AWS_ACCESS_KEY_ID and "
        r"AWS_SECRET_ACCESS_KEY",
        monkeypatch,
    )


def test_bad_credentials(monkeypatch):
    s3 = s3_bucket(monkeypatch)
    iam = boto3.client("iam", endpoint_url=s3.endpoint)
    user = f"u-{s3.bucket}"
    iam.create_user(UserName=user)
    key = iam.create_access_key(UserName=user)["AccessKey"]
    with moto_auth(s3.endpoint):
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAUNKNOWN000001234")
        _fails_fast(
            S3Store(s3.bucket, "p", endpoint_url=s3.endpoint),
            r"Bad S3 credentials: .* does not know the access key id AKIA\.\.\.1234\. Check AWS_ACCESS_KEY_ID",
            monkeypatch,
        )
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
        _fails_fast(
            S3Store(s3.bucket, "p", endpoint_url=s3.endpoint),
            r"Bad S3 credentials: the secret key does not match .* Check AWS_SECRET_ACCESS_KEY",
            monkeypatch,
        )


@contextmanager
def iam_enforcing_server(setup_actions: int):
    """A separate moto server that checks IAM policies after its first ``setup_actions`` requests.

    The shared in-process server cannot: moto reads that switch once per process.
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": str(setup_actions)}
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline and server.poll() is None, "moto server did not start"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_no_permission(monkeypatch):
    s3_bucket(monkeypatch)  # test credentials in the environment
    with iam_enforcing_server(setup_actions=4) as endpoint:
        bucket, user = "read-only-checkpoints", "reader"
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=bucket)
        iam = boto3.client("iam", endpoint_url=endpoint)
        iam.create_user(UserName=user)
        arn = f"arn:aws:s3:::{bucket}"
        # Everything on the bucket itself, only reads of its objects: the write of the probe is refused.
        bucket_level = {"Effect": "Allow", "Action": "s3:*", "Resource": arn}
        read_objects = {"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"{arn}/*"}
        policy = json.dumps({"Version": "2012-10-17", "Statement": [bucket_level, read_objects]})
        iam.put_user_policy(UserName=user, PolicyName="read-only", PolicyDocument=policy)
        # The 4th setup action; from here on the server checks IAM policies.
        key = iam.create_access_key(UserName=user)["AccessKey"]
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
        _fails_fast(
            S3Store(bucket, "p", endpoint_url=endpoint),
            r"Permission denied: cannot write in s3://read-only-checkpoints/p at .* The credentials need "
            r"s3:ListBucket, s3:GetObject, s3:PutObject and s3:DeleteObject",
            monkeypatch,
        )


def test_missing_bucket(monkeypatch):
    s3 = s3_bucket(monkeypatch)
    _fails_fast(
        S3Store("no-such-bucket-here", "p", endpoint_url=s3.endpoint),
        r"Bucket 'no-such-bucket-here' does not exist .*aws s3 mb s3://no-such-bucket-here\) or fix checkpoint.uri",
        monkeypatch,
    )


def test_unreachable_endpoint(monkeypatch):
    s3_bucket(monkeypatch)
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    _fails_fast(
        S3Store("bucket", "p", endpoint_url=f"http://127.0.0.1:{port}"),
        r"Cannot reach the S3 endpoint .* Check checkpoint.endpoint_url and network",
        monkeypatch,
    )


def test_folder_preflight(tmp_path):
    FolderStore(tmp_path / "new" / "runs").preflight()
    assert list((tmp_path / "new" / "runs").iterdir()) == []
    (tmp_path / "file").write_text("x")
    with pytest.raises(
        CheckpointError,
        match=r"checkpoint.uri: cannot write checkpoints to folder .*/file/runs \(.*/file is a file;",
    ):
        FolderStore(tmp_path / "file" / "runs").preflight()
    with pytest.raises(CheckpointError, match=r"on Google Drive, but Drive is not mounted. .*drive.mount"):
        FolderStore("/content/drive/MyDrive/runs/x").preflight()


def test_prepare_fails_before_touching_the_output_folder(monkeypatch, tmp_path):
    s3 = s3_bucket(monkeypatch)
    with pytest.raises(CheckpointError, match="Bucket 'missing-bucket' does not exist"):
        prepare_checkpointing(
            output_dir=str(tmp_path / "out"),
            recipe_name="tiny",
            recipe_yaml="",
            uri="s3://missing-bucket/run",
            endpoint_url=s3.endpoint,
        )
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"every_steps": 0}, "checkpoint.every_steps must be a positive integer, got 0"),
        ({"keep_last": 2}, "checkpoint.keep_last limits remote checkpoints and needs checkpoint.uri"),
        (
            {"uri": "s3://b/p", "keep_last": 0},
            "checkpoint.keep_last must be null or a positive integer, got 0",
        ),
        ({"run_id": "my run"}, "checkpoint.run_id must be null or letters, digits"),
        (
            {"endpoint_url": "127.0.0.1:9000", "uri": "s3://b/p"},
            "checkpoint.endpoint_url must be null or an http",
        ),
        (
            {"resume": "lastest"},
            r"checkpoint.resume='lastest' is not 'latest', 'never', .* Did you mean latest\?",
        ),
    ],
)
def test_bad_arguments_are_named(tmp_path, overrides, message):
    kwargs = {"output_dir": str(tmp_path / "out"), "recipe_name": "tiny", "recipe_yaml": "", **overrides}
    with pytest.raises(CheckpointError, match=message):
        prepare_checkpointing(**kwargs)


def test_a_checkpoint_that_is_not_there_names_those_beside_it(tmp_path):
    """checkpoint.resume=run/checkpoint-99 named no checkpoint there: retention deletes old ones, so which remain?"""
    for step in (4, 18):
        (tmp_path / "run" / f"checkpoint-{step}").mkdir(parents=True)
    run = tmp_path / "run"
    with pytest.raises(CheckpointError) as raised:
        prepare_checkpointing(
            output_dir=str(tmp_path / "out"),
            recipe_name="tiny",
            recipe_yaml="",
            resume=str(run / "checkpoint-99"),
        )
    assert str(raised.value).endswith(
        f"{run} holds checkpoint-4, checkpoint-18: name one of those, or {run} itself (its newest complete one)."
    )


def test_a_store_that_returns_other_bytes_than_it_was_given_fails_the_preflight(monkeypatch, tmp_path):
    from callbacks import s3_store

    s3 = s3_bucket(monkeypatch)
    real_client = s3_store.make_client

    def make_client(*args, **kwargs):
        client = real_client(*args, **kwargs)
        client.get_object = lambda **request: {"Body": io.BytesIO(b"garbled")}
        return client

    monkeypatch.setattr(s3_store, "make_client", make_client)
    with pytest.raises(
        CheckpointError, match=f"^s3://{s3.bucket}/run returned different bytes than were written"
    ):
        S3Store(s3.bucket, "run", endpoint_url=s3.endpoint).preflight()
    folder = FolderStore(tmp_path / "drive")
    monkeypatch.setattr(folder, "read_bytes", lambda key: b"garbled")
    with pytest.raises(CheckpointError, match="did not return what was written to it"):
        folder.preflight()
    assert os.listdir(folder.root) == []  # the probe is gone all the same


@pytest.mark.parametrize("name", ["checkpoint-16", "best"])
def test_a_checkpoint_uri_naming_another_runs_checkpoint_is_refused_before_any_write(tmp_path, name):
    """checkpoint.uri=.../k3/checkpoint-16 started a new run nested inside that checkpoint, without a word."""
    from recipes.start_checks import offline_refusals

    uri = f"file://{tmp_path}/drive/k3/{name}"
    expected = (
        f"checkpoint.uri '{uri}' names a checkpoint ({name}) of the run at file://{tmp_path}/drive/k3, not a folder "
        f"for a run's checkpoints. To train on from it, set checkpoint.resume={uri} and give checkpoint.uri a new "
        f"folder (e.g. file://{tmp_path}/drive/k3-2); to continue that run, checkpoint.uri=file://{tmp_path}/drive/k3."
    )
    with pytest.raises(CheckpointError) as raised:
        prepare_checkpointing(output_dir=str(tmp_path / "out"), recipe_name="tiny", recipe_yaml="", uri=uri)
    assert str(raised.value) == expected
    assert not (tmp_path / "out").exists() and not (tmp_path / "drive").exists()
    settings = {"uri": uri, "resume": "latest", "endpoint_url": None}
    assert offline_refusals(settings) == [expected]  # run.py --print and --plan say it too
    assert offline_refusals({**settings, "uri": f"file://{tmp_path}/drive/k3"}) == []
