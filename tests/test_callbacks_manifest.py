"""Manifests and completeness: what proves a checkpoint whole, and what makes one unresumable."""

from __future__ import annotations

import json

import pytest
from _callbacks_helpers import make_checkpoint

from callbacks.manifest import (
    MANIFEST_NAME,
    build_manifest,
    local_checkpoint_problems,
    manifest_bytes,
    parse_manifest,
    training_state_problems,
    verify_folder,
)


def _manifest(folder, step=3, world_size=1):
    return build_manifest(folder, step=step, recipe_name="tiny", run_id="r1", world_size=world_size, rank=0)


def test_verify_accepts_an_intact_copy_and_names_each_problem(tmp_path):
    folder = make_checkpoint(tmp_path, 3)
    manifest = _manifest(folder)
    assert verify_folder(folder, manifest) == []
    (folder / "scheduler.pt").unlink()
    data = bytearray((folder / "optimizer.pt").read_bytes())
    data[100] ^= 0xFF  # same size, different bytes: only the hash can tell
    (folder / "optimizer.pt").write_bytes(bytes(data))
    (folder / "adapter_model.safetensors").write_bytes(b"short")
    assert verify_folder(folder, manifest) == [
        "adapter_model.safetensors has 5 bytes, the manifest says 4096",
        "scheduler.pt is listed in the manifest but missing",
        "optimizer.pt does not match its SHA-256 in the manifest (altered or corrupt)",
    ]


def test_a_checkpoint_without_optimizer_or_scheduler_is_never_resumable(tmp_path):
    assert training_state_problems(_names(make_checkpoint(tmp_path / "ok", 1)), world_size=1) == []
    folder = make_checkpoint(tmp_path, 4, omit=("optimizer.pt", "scheduler.pt"))
    assert local_checkpoint_problems(folder) == [
        "optimizer.pt is missing (resuming would restart Adam's moments)",
        "scheduler.pt is missing (resuming would restart the learning-rate schedule)",
    ]


def _names(folder):
    return [p.name for p in folder.iterdir()]


def test_every_rank_must_have_left_its_rng_state(tmp_path):
    folder = make_checkpoint(tmp_path, 2, world_size=3, omit=("rng_state_2.pth",))
    assert training_state_problems(_names(folder), world_size=3) == [
        "RNG state of 3 processes expected, missing rng_state_2.pth"
    ]
    assert training_state_problems(_names(folder)) == []  # without a manifest the world size is unknown
    assert training_state_problems(
        ["adapter_model.safetensors", "optimizer.pt", "scheduler.pt", "trainer_state.json"]
    ) == [
        "adapter_config.json is missing",
        "no RNG state (rng_state*.pth)",
    ]


def test_deepspeed_layout_counts_as_optimizer_and_scheduler_state():
    files = [
        "adapter_config.json",
        "adapter_model.safetensors",
        "latest",
        "trainer_state.json",
        "rng_state.pth",
    ]
    files.append("global_step8/bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt")
    assert training_state_problems(files, world_size=1) == []


def test_local_checkpoint_must_match_its_step_and_its_manifest(tmp_path):
    folder = make_checkpoint(tmp_path, 6)
    assert local_checkpoint_problems(folder) == []
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": 5}))
    assert local_checkpoint_problems(folder) == ["trainer_state.json is at step 5, not 6"]
    (folder / "trainer_state.json").write_text('{"global_st')
    assert local_checkpoint_problems(folder) == ["trainer_state.json is not valid JSON (interrupted write?)"]
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": 6}))
    (folder / MANIFEST_NAME).write_bytes(manifest_bytes(_manifest(folder, step=6)))
    (folder / "rng_state.pth").write_bytes(b"changed")
    assert local_checkpoint_problems(folder) == ["rng_state.pth has 7 bytes, the manifest says 128"]


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"{not json", "m.json is not valid JSON"),
        (b'{"format": "other"}', "m.json is not a grpo-recipes-checkpoint/1 manifest"),
        (
            b'{"format": "grpo-recipes-checkpoint/1", "files": {"a": {"size": "1"}}}',
            "m.json has no valid file list",
        ),
    ],
)
def test_parse_manifest_rejects_unusable_manifests(data, reason):
    manifest, problem = parse_manifest(data, "m.json")
    assert manifest is None and problem.startswith(reason)


def test_a_zero_checkpoint_needs_every_ranks_optimizer_shard():
    files = ["adapter_config.json", "adapter_model.safetensors", "latest", "trainer_state.json"]
    files += [
        "rng_state_0.pth",
        "rng_state_1.pth",
        "global_step4/bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt",
    ]
    assert training_state_problems(files, world_size=2) == [
        "ZeRO optimizer shards of 2 ranks expected, missing rank 1"
    ]
    files.append("global_step4/bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt")
    assert training_state_problems(files, world_size=2) == []
