"""The four notebooks run top to bottom on a CPU with the tiny recipe and an S3 server (moto), in order, and the
training notebook resumes from the remote checkpoint after its runtime is lost mid-run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
import uuid

import boto3
import psutil
import pytest
from _callbacks_helpers import RecordingMotoServer
from _notebooks_helpers import displayed, execute, install_kernelspec, papermill_command, text_of
from conftest import REPO

pytestmark = pytest.mark.slow
SECRET = f"nb-secret-{uuid.uuid4().hex}"  # must never appear in a notebook's output
BUCKET = "notebook-checkpoints"
EVAL = {"recipe": "gsm8k_tiny", "questions": 4, "samples": 2, "max_new_tokens": 16}
TRAIN_OVERRIDES = ["trainer.max_steps=4", "checkpoint.every_steps=2"]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A workspace, an S3 server with a bucket, and the environment a Colab user's secrets would give the kernel."""
    root = tmp_path_factory.mktemp("notebooks")
    server = RecordingMotoServer()
    server.start()
    endpoint = server.endpoint
    env = {
        "AWS_ACCESS_KEY_ID": "notebook-tests",
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_DEFAULT_REGION": "us-east-1",
        "S3_ENDPOINT_URL": endpoint,  # a secret, not a parameter: the notebooks must pick it up
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": "/nonexistent/aws-config",
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/aws-credentials",
        "CUDA_VISIBLE_DEVICES": "",  # a CPU runtime, even on a machine with a GPU
        "JUPYTER_PATH": str(install_kernelspec(root / "jupyter")),
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    with pytest.MonkeyPatch.context() as patch:
        for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
            patch.delenv(key, raising=False)
        for key, value in env.items():
            patch.setenv(key, value)
        s3 = boto3.client("s3", endpoint_url=endpoint)
        s3.create_bucket(Bucket=BUCKET)
        yield {
            "root": root, "s3": s3, "uri": f"s3://{BUCKET}/runs/tiny", "results": root / "results", "server": server,
        }  # fmt: skip
    server.stop()


def remote_steps(lab) -> set[int]:
    """Steps of the checkpoints whose upload finished (their manifest is written last)."""
    listing = lab["s3"].list_objects_v2(Bucket=BUCKET, Prefix="runs/tiny/").get("Contents", [])
    names = [obj["Key"].split("/")[-2] for obj in listing if obj["Key"].endswith("/manifest.json")]
    return {int(name.removeprefix("checkpoint-")) for name in names}


def read_records(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def assert_secret_hidden(nb) -> None:
    assert SECRET not in json.dumps(nb)


@pytest.fixture(scope="module")
def baseline(lab):
    params = {**EVAL, "results_dir": str(lab["results"]), "baseline_file": "baseline.jsonl"}
    nb = execute("1_baseline", lab["root"] / "1.ipynb", params, lab["root"])
    return nb, lab["results"] / "baseline.jsonl"


@pytest.fixture(scope="module")
def training(lab):
    """Notebook 2 killed after its first synced checkpoint, then run again as is on a fresh disk."""
    out = lab["root"] / "train-out"
    params = {
        "recipe": "gsm8k_tiny",
        "overrides": TRAIN_OVERRIDES,
        "checkpoint_uri": lab["uri"],
        "output_dir": str(out),
    }
    command = papermill_command("2_train", lab["root"] / "2-lost.ipynb", params, lab["root"])
    # checkpoint-4's upload is held at the server until the runtime is lost. Polled for checkpoint-2 alone, a busy
    # machine let checkpoint-4 (its files go up in a fraction of a second) be committed before the kill.
    lost = lab["server"].held_puts["/runs/tiny/checkpoint-4/"] = threading.Event()
    try:
        first = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 300
        while not remote_steps(lab) and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        steps_at_loss = remote_steps(lab)
        if first.poll() is None:  # the runtime goes away mid-training
            for kernel in psutil.Process(first.pid).children(recursive=True):
                kernel.kill()
        _, stderr = first.communicate(timeout=60)
    finally:
        lost.set()
        del lab["server"].held_puts["/runs/tiny/checkpoint-4/"]
    assert steps_at_loss == {2}, (
        f"expected only checkpoint-2 synced when the runtime was lost:\n{stderr[-3000:]}"
    )
    # The notebook never finished. On a loaded machine its training may have (checkpoint-2's upload is in the
    # background, and steps 3-4 can outrun it), and the runtime is lost during the final (held) upload: a lost
    # runtime all the same, as no later checkpoint was committed, so the run resumes from checkpoint-2.
    assert first.returncode != 0 and remote_steps(lab) == {2}, stderr[-3000:]
    shutil.rmtree(out)  # a new runtime has an empty disk
    nb = execute("2_train", lab["root"] / "2.ipynb", params, lab["root"])
    return nb, out


@pytest.fixture(scope="module")
def tuned(lab, training):
    params = {
        **EVAL,
        "checkpoint": lab["uri"],
        "results_dir": str(lab["results"]),
        "tuned_file": "tuned.jsonl",
    }
    nb = execute("3_evaluate_checkpoint", lab["root"] / "3.ipynb", params, lab["root"])
    return nb, lab["results"] / "tuned.jsonl"


@pytest.fixture(scope="module")
def comparison(lab, baseline, tuned):
    params = {"results_dir": str(lab["results"]), "training_run": lab["uri"]}
    return execute("4_compare", lab["root"] / "4.ipynb", params, lab["root"])


def test_1_baseline_evaluates_the_base_model_on_cpu(baseline):
    nb, path = baseline
    records = read_records(path)
    assert len(records) == 8 and len({r["id"] for r in records}) == 4
    assert {r["sample"] for r in records} == {0, 1} and all(r["adapter_path"] is None for r in records)
    text = text_of(nb)
    assert "No GPU in this runtime: gsm8k_tiny runs on the CPU" in text
    assert "4 questions x 2 samples = 8 records" in text
    assert "AWS_SECRET_ACCESS_KEY  set (environment)" in text
    assert_secret_hidden(nb)


def test_2_training_resumes_from_the_remote_checkpoint_after_a_lost_runtime(lab, training):
    nb, out = training
    text = text_of(nb)
    assert f"Resuming from {out / 'checkpoint-2'}" in text  # downloaded from S3: the local disk was empty
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == 4
    logged = [h for h in state["log_history"] if "loss" in h]
    assert [h["step"] for h in logged] == [1, 2, 3, 4]
    saved = lab["s3"].get_object(Bucket=BUCKET, Key="runs/tiny/checkpoint-2/trainer_state.json")["Body"]
    # Steps 1-2 (their wall-clock step_time too) came from S3; the held-out evaluations at steps 0 and 2 too.
    remote = json.load(saved)["log_history"]
    assert logged[:2] == [h for h in remote if "loss" in h]
    assert [h["step"] for h in remote if "heldout/accuracy" in h] == [0, 2]  # 0: before training
    assert remote_steps(lab) == {2, 4}
    assert (out / "curves.png").read_bytes().startswith(b"\x89PNG")
    assert "held-out accuracy" in text  # the held-out table (or its "not logged" line) is printed
    assert len(displayed(nb, "image/png")) == 1
    assert_secret_hidden(nb)


def test_3_checkpoint_notebook_evaluates_the_newest_remote_checkpoint(baseline, tuned):
    nb, path = tuned
    records = read_records(path)
    assert len(records) == 8
    assert {r["id"] for r in records} == {r["id"] for r in read_records(baseline[1])}  # the same questions
    assert {os.path.basename(r["adapter_path"]) for r in records} == {"checkpoint-4"}
    assert "Adapter: " in text_of(nb)
    assert_secret_hidden(nb)


def test_4_comparison_shows_report_plot_swaps_and_curves(lab, comparison):
    results = lab["results"]
    report = (results / "comparison.txt").read_text()
    assert report.startswith("Paired comparison by question") and "4 questions" in report
    shown, mark = report.split("\n\n(grpo-recipes stats")  # saved with the mark that lets a rerun replace it
    assert shown in text_of(comparison) and mark  # shown inline, and saved
    for image in ("comparison.png", "curves.png"):
        assert (results / image).read_bytes().startswith(b"\x89PNG")
    assert len(displayed(comparison, "image/png")) == 2
    swaps = displayed(comparison, "text/markdown")
    assert swaps == [(results / "swaps.md").read_text()] and swaps[0].startswith("# Swap report")
    assert_secret_hidden(comparison)
