"""A checkpoint still uploading when the process ends (Ctrl-C, a crash in training) is finished before the
interpreter stops the thread pools boto3's transfers run on, not cut off by them."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from _callbacks_helpers import s3_bucket
from conftest import REPO

SCRIPT = textwrap.dedent(
    """
    import logging, sys, time
    from pathlib import Path
    from callbacks.s3_store import S3Store
    from callbacks.uploader import BackgroundUploader, UploadJob

    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("botocore").setLevel(logging.WARNING)
    store = S3Store(sys.argv[2], "run", endpoint_url=sys.argv[1])
    staged = Path(sys.argv[3])

    def work(job):
        time.sleep(0.5)  # the upload is still going when the main thread ends
        store.upload(job.staged / "adapter_model.safetensors", f"checkpoint-{job.step}/adapter_model.safetensors")

    BackgroundUploader(work).submit(UploadJob(step=12, staged=staged))
    sys.exit(130)  # as run.py after Ctrl-C in training, with checkpoint-12 just handed to the uploader
    """
)


def test_an_upload_going_on_when_the_process_ends_is_finished_not_cut_off(monkeypatch, tmp_path):
    s3 = s3_bucket(monkeypatch)
    staged = tmp_path / "staged"
    staged.mkdir()
    (staged / "adapter_model.safetensors").write_bytes(b"w" * 1000)
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, s3.endpoint, s3.bucket, str(staged)],
        check=False,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 130
    log = [line for line in result.stderr.splitlines() if line.startswith(("INFO", "WARNING", "ERROR"))]
    warning = (
        "WARNING callbacks.uploader: The process is ending with checkpoint-12 still uploading: waiting for it to "
        "finish (stopped, it is uploaded again by the next launch in this output folder)"
    )
    assert log == [warning]
    stored = s3.client.get_object(Bucket=s3.bucket, Key="run/checkpoint-12/adapter_model.safetensors")
    assert stored["Body"].read() == b"w" * 1000
    assert not staged.exists()  # the staged copy is removed once uploaded, as after any upload
