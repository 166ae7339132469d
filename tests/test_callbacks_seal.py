"""SealCallback (callbacks.seal): who waits, who writes the manifest, and what stops a checkpoint from being sealed."""

from __future__ import annotations

import socket

import pytest
from _callbacks_helpers import make_checkpoint, trainer_objects

from callbacks import seal
from callbacks.best import BEST_NAME
from callbacks.errors import CheckpointError
from callbacks.manifest import MANIFEST_NAME, read_local_manifest
from callbacks.publish import RunInfo

RUN = RunInfo("tiny", "", "r1")


class _Barrier:
    def __init__(self):
        self.waits = 0

    def wait_for_everyone(self):
        self.waits += 1


@pytest.fixture
def barrier(monkeypatch):
    state = _Barrier()
    monkeypatch.setattr(seal, "partial_state", lambda: state)
    return state


def test_every_rank_waits_and_only_the_main_one_writes_the_manifest(tmp_path, barrier):
    folder = make_checkpoint(tmp_path, 3, world_size=2)
    seal.SealCallback(RUN).on_save(*trainer_objects(tmp_path, 3, world_size=2, main=False))
    assert barrier.waits == 1 and not (folder / MANIFEST_NAME).exists()
    assert not (tmp_path / BEST_NAME).exists()
    seal.SealCallback(RUN).on_save(*trainer_objects(tmp_path, 3, world_size=2))
    assert barrier.waits == 2
    manifest, reason = read_local_manifest(folder)
    assert reason is None and (manifest["step"], manifest["world_size"], manifest["run_id"]) == (3, 2, "r1")
    assert manifest["recipe_name"] == "tiny" and manifest["uploader"] == {
        "rank": 0,
        "host": socket.gethostname(),
    }


def test_a_single_process_has_no_barrier_to_wait_at(tmp_path, barrier):
    make_checkpoint(tmp_path, 1)
    seal.SealCallback(RUN).on_save(*trainer_objects(tmp_path, 1))
    assert barrier.waits == 0 and (tmp_path / "checkpoint-1" / MANIFEST_NAME).is_file()


def test_an_adapter_that_is_not_the_trained_one_is_never_sealed(tmp_path, monkeypatch):
    folder = make_checkpoint(tmp_path, 2)
    model = object()
    seen = []

    def problems(where, checked):
        seen.append((where, checked))
        return ["no lora_B of layer 0", "wrong shape"]

    monkeypatch.setattr(seal, "saved_adapter_problems", problems)
    with pytest.raises(
        CheckpointError, match=r"checkpoint-2 is not a usable checkpoint: no lora_B .*; wrong shape"
    ):
        seal.SealCallback(RUN).on_save(*trainer_objects(tmp_path, 2), model=model)
    assert seen == [(folder, model)] and not (folder / MANIFEST_NAME).exists()
    monkeypatch.setattr(seal, "saved_adapter_problems", lambda where, checked: [])
    seal.SealCallback(RUN).on_save(*trainer_objects(tmp_path, 2), model=model)
    assert (folder / MANIFEST_NAME).is_file()


def test_the_barrier_is_accelerates_process_state():
    from accelerate import PartialState

    state = seal.partial_state()
    assert isinstance(state, PartialState) and state.num_processes == 1
    state.wait_for_everyone()  # a no-op in one process
