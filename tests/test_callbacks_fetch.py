"""fetch_checkpoint: a checkpoint path or URI in, a local folder with a verified adapter out."""

from __future__ import annotations

import logging

import pytest
from _callbacks_helpers import make_checkpoint, s3_bucket

from callbacks.checkpoint_sync import fetch_checkpoint
from callbacks.errors import CheckpointError
from callbacks.manifest import MANIFEST_NAME
from callbacks.publish import RunInfo, publish_staged, stage_checkpoint
from callbacks.s3_store import S3Store


@pytest.fixture
def run(monkeypatch, tmp_path):
    """An S3 prefix holding checkpoints 2 and 4 of run r1, and the local folders they came from."""
    s3 = s3_bucket(monkeypatch)
    monkeypatch.setenv("GRPO_RECIPES_CACHE", str(tmp_path / "cache"))
    store = S3Store(s3.bucket, "run", endpoint_url=s3.endpoint)
    sources = {}
    for step in (2, 4):
        sources[step] = make_checkpoint(tmp_path / "src", step)
        staged = stage_checkpoint(sources[step], tmp_path / "staging", "r: 1\n")
        publish_staged(store, staged, step, RunInfo("tiny", "", "r1"))
    return s3, store, sources


def test_run_prefix_gives_its_newest_checkpoint_without_training_state(run):
    s3, _, sources = run
    folder = fetch_checkpoint(s3.uri("run"), endpoint_url=s3.endpoint)
    assert folder.name == "checkpoint-4"
    names = {p.name for p in folder.iterdir()}
    assert names == {
        "adapter_config.json",
        "adapter_model.safetensors",
        "trainer_state.json",
        "recipe.yaml",
        MANIFEST_NAME,
    }
    assert (folder / "adapter_model.safetensors").read_bytes() == (
        sources[4] / "adapter_model.safetensors"
    ).read_bytes()
    requests = len(s3.server.requests)
    assert fetch_checkpoint(s3.uri("run"), endpoint_url=s3.endpoint) == folder  # verified copy reused
    assert not any(
        method == "GET" and "adapter_model" in path for method, path, _ in s3.server.requests[requests:]
    )


def test_specific_checkpoint_into_dest(run, tmp_path):
    s3, store, sources = run
    dest = fetch_checkpoint(
        f"{s3.uri('run')}/checkpoint-2", endpoint_url=s3.endpoint, dest=tmp_path / "adapter"
    )
    assert dest == tmp_path / "adapter"
    assert (dest / "adapter_model.safetensors").read_bytes() == (
        sources[2] / "adapter_model.safetensors"
    ).read_bytes()
    key = f"{store.prefix}/checkpoint-2/adapter_model.safetensors"
    store.client.put_object(Bucket=store.bucket, Key=key, Body=b"x" * 4096)  # corrupt, same size
    with pytest.raises(
        CheckpointError, match=r"checkpoint-2 is corrupt: adapter_model.safetensors does not match"
    ):
        fetch_checkpoint(f"{s3.uri('run')}/checkpoint-2", endpoint_url=s3.endpoint, dest=tmp_path / "again")
    with pytest.raises(CheckpointError, match=r"Cannot fetch .*checkpoint-6: no complete checkpoint there"):
        fetch_checkpoint(f"{s3.uri('run')}/checkpoint-6", endpoint_url=s3.endpoint)


def test_local_paths(tmp_path, caplog):
    out = tmp_path / "out"
    make_checkpoint(out, 2)
    make_checkpoint(out, 4, omit=("adapter_model.safetensors",))
    with caplog.at_level(logging.INFO, logger="callbacks"):
        assert fetch_checkpoint(out) == out / "checkpoint-2"  # the newest folder with weights: a store's
        (out / "recipe.yaml").write_text("name: gsm8k_tiny\n")  # what a run writes into its output_dir
        assert fetch_checkpoint(out) == out / "checkpoint-2"
    assert (
        f"{out} holds checkpoints: using its newest usable checkpoint-2" in caplog.text
    )  # every finished store's
    assert (
        f"{out} holds no final adapter (unfinished run?): using its newest usable checkpoint-2" in caplog.text
    )
    assert fetch_checkpoint(out / "checkpoint-2") == out / "checkpoint-2"
    with pytest.raises(CheckpointError, match=r"checkpoint-4 has no usable weights: no model weights"):
        fetch_checkpoint(out / "checkpoint-4")
    with pytest.raises(CheckpointError, match="is not a folder"):
        fetch_checkpoint(tmp_path / "missing")


def test_an_adapter_checkpoint_that_is_not_there_names_those_beside_it(tmp_path):
    """evaluate.py --adapter run/checkpoint-9 said only "is not a folder": which checkpoints does the run hold?"""
    (tmp_path / "run" / "checkpoint-4").mkdir(parents=True)
    run = tmp_path / "run"
    with pytest.raises(CheckpointError) as raised:
        fetch_checkpoint(str(run / "checkpoint-9"))
    assert str(raised.value) == (
        f"{run / 'checkpoint-9'} is not a folder (expected a checkpoint or run folder, or an s3:// or file:// URI). "
        f"{run} holds checkpoint-4: name one of those, or {run} itself (its newest complete one)."
    )


def test_a_checkpoint_or_run_not_in_the_store_is_refused_naming_what_the_store_holds(run, tmp_path):
    from _callbacks_helpers import prepare

    s3, _, _ = run
    run_uri, empty_uri = s3.uri("run"), s3.uri("nothing")
    with pytest.raises(CheckpointError) as raised:
        fetch_checkpoint(f"{run_uri}/checkpoint-6", endpoint_url=s3.endpoint)
    assert str(raised.value) == (
        f"Cannot fetch {run_uri}/checkpoint-6: no complete checkpoint there; {run_uri} holds checkpoint-2, "
        f"checkpoint-4: name one of those, or {run_uri} itself (its newest complete one)"
    )
    with pytest.raises(CheckpointError) as raised:
        prepare(tmp_path / "out", None, s3.endpoint, resume=f"{run_uri}/checkpoint-6")
    assert str(raised.value) == (
        f"Cannot resume from {run_uri}/checkpoint-6: no complete checkpoint there; {run_uri} holds checkpoint-2, "
        f"checkpoint-4: name one of those, or {run_uri} itself (its newest complete one)"
    )
    with pytest.raises(CheckpointError) as raised:
        fetch_checkpoint(empty_uri, endpoint_url=s3.endpoint)
    assert str(raised.value) == (
        f"Cannot fetch {empty_uri}: no complete checkpoint there; {empty_uri} holds no checkpoint-N folder: "
        "check the bucket and the prefix (the training run's checkpoint.uri)"
    )
