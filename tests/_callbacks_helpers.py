"""Shared pieces of the callbacks tests: an in-process S3 server (moto) that logs requests, synthetic
checkpoints, and fault injection through botocore's event hooks."""

from __future__ import annotations

import atexit
import io
import json
import logging
import os
import threading
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

from botocore.awsrequest import AWSResponse
from botocore.exceptions import ConnectionClosedError
from moto.server import ThreadedMotoServer

S3_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",  # no instance-metadata lookups that wait on timeouts
    "AWS_CONFIG_FILE": "/nonexistent/aws-config",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/aws-credentials",
}


class RecordingMotoServer(ThreadedMotoServer):
    """moto's threaded S3 server on a free port of 127.0.0.1, recording (method, path, user agent) per request.

    It overrides ThreadedMotoServer._server_entry (moto 5.x) to wrap the WSGI app with the recorder.
    """

    def __init__(self):
        super().__init__(ip_address="127.0.0.1", port=0, verbose=False)
        self.requests: list[tuple[str, str, str]] = []
        # Path fragment -> seconds each matching PUT waits before storing.
        self.slow_puts: dict[str, float] = {}
        # Path fragment -> the event a matching PUT waits for (300 s at most): the test kills the uploader first.
        self.held_puts: dict[str, threading.Event] = {}
        # (method, path) of slowed or held PUTs, once their body is in.
        self.received: list[tuple[str, str]] = []
        # Requests handled to the end (a PUT stored): as many as ``requests`` once none is in flight.
        self.answered: list[str] = []
        # Path fragments whose PUTs are answered 503 and never stored: a commit that cannot happen.
        self.refused_puts: set[str] = set()
        # Paths of PUTs the server stored (answered 200).
        self.stored: list[str] = []

    def _server_entry(self) -> None:
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
        from werkzeug.serving import make_server

        app = DomainDispatcherApplication(create_backend_app)

        def recording_app(environ, start_response):
            method, path = environ["REQUEST_METHOD"], environ.get("PATH_INFO", "")
            self.requests.append((method, path, environ.get("HTTP_USER_AGENT", "")))
            delay = next(
                (s for fragment, s in self.slow_puts.items() if method == "PUT" and fragment in path), 0
            )
            gates = [
                gate
                for fragment, gate in list(self.held_puts.items())
                if method == "PUT" and fragment in path
            ]
            if delay or gates:
                # The whole request in hand first (``received``), then the delay: a test that kills the uploader
                # as soon as the headers came could kill it before it sent the body, and nothing was stored.
                length = environ.get("CONTENT_LENGTH")
                body = environ["wsgi.input"].read(int(length)) if length else environ["wsgi.input"].read()
                environ["wsgi.input"] = io.BytesIO(body)
                self.received.append((method, path))
            time.sleep(delay)  # a slow link, so a test can kill the uploader mid-checkpoint
            for gate in gates:
                gate.wait(300)

            def recording_start(status, headers, exc_info=None):
                if method == "PUT" and status.startswith("200"):
                    self.stored.append(path)
                return start_response(status, headers, exc_info)

            try:
                if method == "PUT" and any(fragment in path for fragment in list(self.refused_puts)):
                    environ["wsgi.input"].read()
                    start_response("503 Service Unavailable", [("Content-Type", "application/xml")])
                    return [b"<Error><Code>SlowDown</Code><Message>refused by the test</Message></Error>"]
                return app(environ, recording_start)
            finally:
                self.answered.append(path)  # a list: appends from the server's threads are atomic

        self._server = make_server(self._ip_address, self._port, recording_app, True)
        self._server_ready_event.set()
        self._server.serve_forever()

    def wait_idle(self, timeout: float = 60) -> None:
        """Wait until every request received so far has been handled (a killed client's last PUT stored)."""
        deadline = time.monotonic() + timeout
        while len(self.answered) < len(self.requests):
            assert time.monotonic() < deadline, "the S3 server is still handling a request"
            time.sleep(0.02)

    @property
    def endpoint(self) -> str:
        host, port = self.get_host_and_port()
        return f"http://{host}:{port}"


_SERVER: RecordingMotoServer | None = None


def moto_server() -> RecordingMotoServer:
    """The one S3 server of this test session (started on first use, stopped at exit)."""
    global _SERVER
    if _SERVER is None:
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        _SERVER = RecordingMotoServer()
        _SERVER.start()
        atexit.register(_SERVER.stop)
    return _SERVER


def s3_bucket(monkeypatch) -> SimpleNamespace:
    """Point boto3 at the test server with test credentials and create a fresh bucket.

    Returns ``endpoint``, ``bucket``, ``uri(prefix)`` and a plain boto3 ``client``.
    """
    import boto3

    for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(key, raising=False)
    for key, value in S3_ENV.items():
        monkeypatch.setenv(key, value)
    server = moto_server()
    client = boto3.client("s3", endpoint_url=server.endpoint)
    bucket = f"ckpt-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=bucket)
    return SimpleNamespace(
        endpoint=server.endpoint,
        bucket=bucket,
        client=client,
        server=server,
        uri=lambda p="run": f"s3://{bucket}/{p}",
    )


def make_checkpoint(
    parent: Path,
    step: int,
    *,
    world_size: int = 1,
    omit: tuple[str, ...] = (),
    seed: int = 0,
    size: int = 4096,
) -> Path:
    """A synthetic ``checkpoint-<step>`` folder with the files the Trainer writes (random bytes for tensors:
    their content is irrelevant here, their sizes and hashes matter)."""
    folder = Path(parent) / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    files = {
        "adapter_config.json": json.dumps({"r": 8, "seed": seed}).encode(),
        "adapter_model.safetensors": os.urandom(size),
        "optimizer.pt": os.urandom(2 * size),
        "scheduler.pt": os.urandom(64),
        "trainer_state.json": json.dumps({"global_step": step, "log_history": []}).encode(),
    }
    if world_size == 1:
        files["rng_state.pth"] = os.urandom(128)
    else:
        files.update({f"rng_state_{i}.pth": os.urandom(128) for i in range(world_size)})
    for name, data in files.items():
        if name not in omit:
            (folder / name).write_bytes(data)
    return folder


def rated_checkpoint(parent, step, accuracy):
    """A synthetic checkpoint whose heldout.json (as callbacks/heldout.py writes it) records ``accuracy`` at
    its step (None: a history without an evaluation at this step)."""
    folder = make_checkpoint(parent, step)
    evaluation = {
        "step": step,
        "accuracy": accuracy,
        "questions": 10,
        "samples": 4,
        "low": None,
        "high": None,
    }
    history = {"format": 1, "evaluations": [] if accuracy is None else [evaluation], "stopped": None}
    (folder / "heldout.json").write_text(json.dumps(history))
    return folder


def publish_rated(store, tmp_path, step, accuracy, run=None):
    """Commit a rated checkpoint (``rated_checkpoint``) to ``store`` as ``run`` (default: run r1 of recipe tiny)."""
    from callbacks.publish import RunInfo, publish_staged, stage_checkpoint

    run = run or RunInfo("tiny", "r: 1\n", "r1")
    folder = rated_checkpoint(tmp_path / "src", step, accuracy)
    return publish_staged(store, stage_checkpoint(folder, tmp_path / "staging", run.recipe_yaml), step, run)


def commit(store, tmp_path, step, run_id="r1", **kwargs):
    """Commit a synthetic checkpoint as run ``run_id`` would have; returns its local source folder."""
    from callbacks.publish import RunInfo, publish_staged, stage_checkpoint

    folder = make_checkpoint(tmp_path / f"src-{run_id}", step, **kwargs)
    publish_staged(
        store, stage_checkpoint(folder, tmp_path / "staging", "r: 1\n"), step, RunInfo("tiny", "", run_id)
    )
    return folder


def commit_dying_at(store, folder, manifest, die_at="optimizer.pt") -> None:
    """A commit of ``folder`` that dies on its way, as its upload of the file ending in ``die_at`` fails: the files
    before it are in the store, no manifest."""
    import pytest

    from callbacks.remote import commit_checkpoint

    real_upload = store.upload

    def upload(local, key, progress=None):
        if key.endswith(die_at):
            raise ConnectionError("killed")
        real_upload(local, key, progress)

    store.upload = upload
    try:
        with pytest.raises(ConnectionError):
            commit_checkpoint(store, folder, manifest)
    finally:
        store.upload = real_upload


def prepare(output_dir, uri, endpoint_url=None, **kwargs):
    """prepare_checkpointing for recipe ``tiny`` with ``output_dir`` and ``uri``; keywords as the checkpoint: section."""
    from callbacks.checkpoint_sync import prepare_checkpointing

    return prepare_checkpointing(
        output_dir=str(output_dir),
        recipe_name="tiny",
        recipe_yaml="r: 1\n",
        uri=uri,
        endpoint_url=endpoint_url,
        **kwargs,
    )


def trainer_objects(output_dir: Path, step: int, *, world_size: int = 1, main: bool = True):
    """(args, state, control) as a Trainer passes them to callbacks, for driving a callback by hand."""
    from transformers import TrainerControl, TrainerState

    args = SimpleNamespace(output_dir=str(output_dir), world_size=world_size, save_total_limit=None)
    state = TrainerState(global_step=step, max_steps=100, is_world_process_zero=main)
    return args, state, TrainerControl()


class _Body:
    def __init__(self, data: bytes):
        self.data = data

    def stream(self, **kwargs):
        yield self.data


class Faults:
    """Fail requests of one S3 operation before they leave the client, through ``before-send`` hooks.

    Args:
        client: The boto3 client to hook.
        operation: e.g. "PutObject".
        plan: Failures to inject, in order: "503" (an HTTP 503 SlowDown answer), "501" (NotImplemented, as
            S3-compatible stores answer conditional writes they lack) or "reset" (connection closed).
            ``always=True`` repeats the plan forever (a persistent outage).
    """

    def __init__(self, client, operation: str, plan: list[str], *, always: bool = False):
        self.plan, self.always, self.calls, self.injected = list(plan), always, 0, 0
        client.meta.events.register(f"before-send.s3.{operation}", self._hook)

    def _hook(self, request, **kwargs):
        self.calls += 1
        if not self.plan:
            return None
        kind = self.plan[0] if self.always else self.plan.pop(0)
        self.injected += 1
        if kind == "reset":
            raise ConnectionClosedError(endpoint_url=request.url)
        code = {"503": "SlowDown", "501": "NotImplemented"}[kind]
        body = f"<Error><Code>{code}</Code><Message>Injected by the test.</Message></Error>".encode()
        return AWSResponse(request.url, int(kind), {"Content-Type": "application/xml"}, _Body(body))
