"""End to end through ``recipes/run.py``: a lost machine resumes from S3 or a mounted folder exactly where the
uninterrupted run was, a half-uploaded checkpoint is passed over, and only the main process of two writes."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch
from _callbacks_helpers import S3_ENV, moto_server
from _in_process import run_recipe
from conftest import REPO, accelerate_launcher, plugin_env
from safetensors.torch import load_file

from callbacks.manifest import MANIFEST_NAME, parse_manifest
from callbacks.s3_store import S3Store
from callbacks.stores import FolderStore

pytestmark = pytest.mark.slow
COMMON = [
    "trainer.max_steps=4",
    "checkpoint.every_steps=2",
    "trainer.lr_scheduler_type=linear",  # a learning rate that changes every step, to compare
    "rewards=[{path: '_plugins:distinct_share'}]",  # varied rewards, so the adapter moves
]
# The short line each logged training step prints (callbacks/progress.py).
STEP_LINE = re.compile(r"^step \d+/\d+  reward ", re.MULTILINE)


def training_env() -> dict[str, str]:
    return plugin_env(**S3_ENV, CUDA_VISIBLE_DEVICES="")


def run(*overrides: str, two_processes: bool = False) -> subprocess.CompletedProcess:
    """Train gsm8k_tiny as a new Colab session would: from nothing but the store (and this process's imports, 15 s
    less per run), or launched in two new processes."""
    if two_processes:
        command = [*accelerate_launcher(2), "recipes/run.py", "gsm8k_tiny", *COMMON, *overrides]
        result = subprocess.run(
            command, check=False, cwd=REPO, env=training_env(), capture_output=True, text=True, timeout=600
        )
    else:
        result = run_recipe("gsm8k_tiny", *COMMON, *overrides, **S3_ENV)
    assert result.returncode == 0, result.stderr[-4000:]
    return result


def history(folder):
    return json.loads((folder / "trainer_state.json").read_text())["log_history"]


def learning_rates(folder) -> dict[int, float]:
    return {h["step"]: h["learning_rate"] for h in history(folder) if "learning_rate" in h}


@pytest.fixture(scope="module")
def s3_env():
    with pytest.MonkeyPatch.context() as patch:
        for key, value in S3_ENV.items():
            patch.setenv(key, value)
        server = moto_server()
        store = S3Store("e2e-checkpoints", "a", endpoint_url=server.endpoint)
        store.client.create_bucket(Bucket="e2e-checkpoints")
        yield server, store


@pytest.fixture(scope="module")
def uninterrupted(s3_env, tmp_path_factory):
    """Four steps with checkpoints synced to S3 every two; its final adapter and state are the reference."""
    server, store = s3_env
    out = tmp_path_factory.mktemp("uninterrupted") / "out"
    run(
        f"trainer.output_dir={out}",
        f"checkpoint.uri={store.uri}",
        f"checkpoint.endpoint_url={server.endpoint}",
    )
    reference = tmp_path_factory.mktemp("reference")
    for name in ("adapter_model.safetensors", "trainer_state.json"):
        shutil.copy(out / name, reference / name)
    shutil.rmtree(out)  # the machine is lost
    return reference


def assert_same_as_reference(result, resumed, reference):
    output = result.stdout + result.stderr
    assert len(STEP_LINE.findall(output)) == 2  # this process trained steps 3 and 4 only
    assert learning_rates(resumed) == learning_rates(reference)  # the schedule continued where it was
    assert len(set(learning_rates(reference).values())) == 4
    a, b = (
        load_file(reference / "adapter_model.safetensors"),
        load_file(resumed / "adapter_model.safetensors"),
    )
    assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    optimizer = torch.load(resumed / "checkpoint-4" / "optimizer.pt", weights_only=False)
    assert {int(s["step"]) for s in optimizer["state"].values()} == {
        4
    }  # Adam moments carried over, not restarted


def test_lost_machine_resumes_from_s3_past_a_half_uploaded_checkpoint(s3_env, uninterrupted, tmp_path):
    server, store = s3_env
    # The machine died while checkpoint-4 was going up: its manifest and one file never arrived.
    store.delete(["checkpoint-4/manifest.json", "checkpoint-4/optimizer.pt"])
    out = tmp_path / "out"
    result = run(
        f"trainer.output_dir={out}",
        f"checkpoint.uri={store.uri}",
        f"checkpoint.endpoint_url={server.endpoint}",
    )
    assert f"Skipping {store.uri}/checkpoint-4: no manifest (upload never finished)" in result.stderr
    assert f"resuming from {out / 'checkpoint-2'}" in result.stderr
    assert_same_as_reference(result, out, uninterrupted)
    manifest, _ = parse_manifest(store.read_bytes(f"checkpoint-4/{MANIFEST_NAME}"), "manifest")
    assert manifest["step"] == 4 and "optimizer.pt" in manifest["files"]  # step 4 committed again, whole


def test_lost_machine_resumes_from_a_mounted_folder(s3_env, uninterrupted, tmp_path):
    _, store = s3_env
    drive = FolderStore(tmp_path / "drive" / "run")
    for key in store.list("checkpoint-2"):  # the folder holds what the first session synced, up to step 2
        (tmp_path / "blob").unlink(missing_ok=True)
        store.download(key, tmp_path / "blob")
        drive.upload(tmp_path / "blob", key)
    out = tmp_path / "out"
    result = run(f"trainer.output_dir={out}", f"checkpoint.uri={drive.uri}")
    assert f"resuming from {out / 'checkpoint-2'}" in result.stderr
    assert_same_as_reference(result, out, uninterrupted)
    assert sorted(drive.list("checkpoint-4")) == sorted(
        store.list("checkpoint-4")
    )  # step 4 synced to the folder


def test_two_processes_only_the_main_one_writes(s3_env, tmp_path):
    """Two CPU processes train together (gloo): both ranks' states are saved, and only rank 0 uploads and speaks."""
    server, store = s3_env
    first = len(server.requests)
    uri = store.uri.replace("/a", "/ddp")
    out = tmp_path / "out"
    result = run(f"trainer.output_dir={out}", "trainer.max_steps=2", f"checkpoint.uri={uri}",
                 f"checkpoint.endpoint_url={server.endpoint}", two_processes=True)  # fmt: skip
    assert history(out) and json.loads((out / "trainer_state.json").read_text())["global_step"] == 2
    assert (out / "adapter_model.safetensors").is_file()
    assert {"rng_state_0.pth", "rng_state_1.pth"} <= {p.name for p in (out / "checkpoint-2").iterdir()}
    assert result.stderr.count("Final adapter saved") == 1
    ours = [r for r in server.requests[first:] if "grpo-recipes" in r[2]]
    assert ours and all("rank/0" in agent for _, _, agent in ours)  # rank 1 never talked to S3
    assert any(
        method == "PUT" and path.endswith("ddp/checkpoint-2/manifest.json") for method, path, _ in ours
    )
    manifest, _ = parse_manifest(S3Store("e2e-checkpoints", "ddp", endpoint_url=server.endpoint).read_bytes(
        f"checkpoint-2/{MANIFEST_NAME}"), "manifest")  # fmt: skip
    assert manifest["world_size"] == 2 and manifest["uploader"]["rank"] == 0
    assert {"rng_state_0.pth", "rng_state_1.pth"} <= set(manifest["files"])


def test_killed_mid_upload_resumes_from_the_previous_complete_checkpoint(s3_env, tmp_path):
    server, _ = s3_env
    store = S3Store("e2e-checkpoints", "killed", endpoint_url=server.endpoint)
    out = tmp_path / "out"
    target = [
        f"trainer.output_dir={out}",
        f"checkpoint.uri={store.uri}",
        f"checkpoint.endpoint_url={server.endpoint}",
    ]
    fragment = "/e2e-checkpoints/killed/checkpoint-4/"
    # Its commit is refused, so checkpoint-4 stays half there however far the upload gets before the kill.
    server.refused_puts.add(fragment + MANIFEST_NAME)
    try:
        process = subprocess.Popen(
            [sys.executable, "recipes/run.py", "gsm8k_tiny", *COMMON, *target],
            cwd=REPO,
            env=training_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 300
        # Killed once the server has stored a file of checkpoint-4: killed when a PUT was merely received, a
        # busy machine's server could still lose it with its client, and nothing of checkpoint-4 was stored.
        while not any(fragment in path for path in list(server.stored)):
            assert process.poll() is None and time.monotonic() < deadline, "checkpoint-4 upload never started"
            time.sleep(0.02)
        process.send_signal(signal.SIGKILL)  # the machine dies while checkpoint-4 is going up
        process.wait()
        server.wait_idle()  # the uploads in flight end before the store is read
    finally:
        server.refused_puts.clear()
    uploaded = store.list("checkpoint-4")
    assert uploaded and not any(
        key.endswith(MANIFEST_NAME) for key in uploaded
    )  # half there, never committed
    shutil.rmtree(out)  # and its disk is gone
    result = run(*target)
    assert f"Skipping {store.uri}/checkpoint-4: no manifest (upload never finished)" in result.stderr
    assert f"resuming from {out / 'checkpoint-2'}" in result.stderr
    assert len(STEP_LINE.findall(result.stdout + result.stderr)) == 2  # steps 3 and 4, not the broken one
    manifest, _ = parse_manifest(store.read_bytes(f"checkpoint-4/{MANIFEST_NAME}"), "manifest")
    assert manifest["step"] == 4
