"""Manifests and completeness: what proves a checkpoint whole, and what makes one unresumable."""

from __future__ import annotations

import json

import pytest
from _callbacks_helpers import make_checkpoint

from callbacks.errors import CheckpointError
from callbacks.manifest import (
    FORMAT,
    MANIFEST_NAME,
    build_manifest,
    heldout_at,
    local_checkpoint_problems,
    manifest_bytes,
    manifest_problems,
    parse_manifest,
    same_contents,
    training_state_problems,
    verify_folder,
    weight_problems,
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
        (  # one good entry does not vouch for the others
            b'{"format": "grpo-recipes-checkpoint/1", "files": {"a": {"size": 1, "sha256": "00"}, "b": {"size": 1}}}',
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


STATE = ["optimizer.pt", "scheduler.pt", "trainer_state.json", "rng_state.pth"]


def test_weights_are_an_adapter_with_its_config_or_a_full_model():
    assert weight_problems(["adapter_model.bin", "adapter_config.json"]) == []
    assert weight_problems(["adapter_model.bin"]) == ["adapter_config.json is missing"]
    assert weight_problems(["model.safetensors.index.json"]) == weight_problems(["pytorch_model.bin"]) == []
    assert weight_problems(["adapter_config.json", "optimizer.pt"]) == [
        "no model weights (adapter_model.safetensors or adapter_model.bin)"
    ]


def test_each_missing_piece_of_training_state_is_named():
    full = ["model.safetensors", *STATE]
    assert training_state_problems(full, world_size=1) == []
    assert training_state_problems([n for n in full if n != "trainer_state.json"], world_size=1) == [
        "trainer_state.json is missing"
    ]
    assert training_state_problems([n for n in full if n != "rng_state.pth"], world_size=1) == [
        "rng_state.pth is missing"
    ]
    # Without a known world size, any rank's RNG state will do; with one process, rng_state.pth itself.
    ranked = [n for n in full if n != "rng_state.pth"] + ["rng_state_0.pth"]
    assert training_state_problems(ranked) == []
    assert training_state_problems(ranked, world_size=1) == ["rng_state.pth is missing"]
    assert training_state_problems(full, world_size=2) == [
        "RNG state of 2 processes expected, missing rng_state_0.pth, rng_state_1.pth"
    ]


@pytest.mark.parametrize("optimizer", ["optimizer.bin", "optimizer_0/__0_0.distcp"])
def test_an_fsdp_optimizer_counts_but_its_scheduler_is_still_needed(optimizer):
    files = ["model.safetensors", optimizer, "trainer_state.json", "rng_state.pth"]
    assert training_state_problems([*files, "scheduler.pt"], world_size=1) == []
    assert training_state_problems(files, world_size=1) == [
        "scheduler.pt is missing (resuming would restart the learning-rate schedule)"
    ]


def test_a_deepspeed_folder_needs_its_latest_file_and_optimizer_states():
    files = ["model.safetensors", "trainer_state.json", "rng_state.pth"]
    shard = "global_step8/bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt"
    assert training_state_problems([*files, shard], world_size=1)[:2] == [
        "optimizer.pt is missing (resuming would restart Adam's moments)",
        "scheduler.pt is missing (resuming would restart the learning-rate schedule)",
    ]  # no "latest": not a DeepSpeed checkpoint
    assert "optimizer.pt is missing (resuming would restart Adam's moments)" in training_state_problems(
        [*files, "latest"], world_size=1
    )  # "latest" without optimizer states: not one either
    assert training_state_problems([*files, "latest", shard], world_size=1) == []


def test_a_manifest_of_another_step_or_an_unreadable_one_is_not_resumable(tmp_path):
    folder = make_checkpoint(tmp_path, 6)
    manifest = _manifest(folder, step=5)
    assert manifest_problems(manifest, 6) == ["manifest says step 5, not 6"]
    assert manifest_problems({**manifest, "step": 6}, 6) == []
    (folder / MANIFEST_NAME).write_bytes(manifest_bytes(manifest))
    assert local_checkpoint_problems(folder) == ["manifest says step 5, not 6"]
    (folder / MANIFEST_NAME).write_bytes(b'{"format": "other"}')
    assert local_checkpoint_problems(folder) == [f"{folder / MANIFEST_NAME} is not a {FORMAT} manifest"]
    assert local_checkpoint_problems(tmp_path / "checkpoint-9") == [
        f"{tmp_path / 'checkpoint-9'} is not a folder"
    ]
    other = tmp_path / "checkpoint-last"
    other.mkdir()
    assert local_checkpoint_problems(other) == ["checkpoint-last is not named checkpoint-<step>"]


def test_a_manifest_is_usable_only_with_sizes_and_hashes_of_every_file(tmp_path):
    manifest = _manifest(make_checkpoint(tmp_path, 3))
    assert parse_manifest(manifest_bytes(manifest), "m.json") == (manifest, None)
    for files in ([], {"a": {"size": 1}}, {"a": {"size": 1, "sha256": 7}}, {"a": {"sha256": "x"}}):
        data = json.dumps({**manifest, "files": files}).encode()
        assert parse_manifest(data, "m.json") == (None, "m.json has no valid file list")
    assert parse_manifest(b"[1]", "m.json") == (None, f"m.json is not a {FORMAT} manifest")
    later = {**manifest, "created": "2099-01-01T00:00:00Z", "uploader": {"rank": 1, "host": "h"}}
    assert same_contents(manifest, later)
    for key, value in (("step", 4), ("run_id", "r2"), ("files", {})):
        assert not same_contents(manifest, {**manifest, key: value})


def _history(folder, *evaluations):
    (folder / "heldout.json").write_text(json.dumps({"format": 1, "evaluations": list(evaluations)}))


def test_the_manifest_carries_the_heldout_evaluation_of_its_own_step(tmp_path):
    folder = make_checkpoint(tmp_path, 4)
    assert heldout_at(folder, 4) is None
    at_4 = {"step": 4, "accuracy": 0.5, "low": None, "high": 0.7, "questions": 20, "samples": 2, "x": 1}
    _history(folder, {**at_4, "step": 2, "accuracy": 0.1}, at_4)
    expected = {k: at_4[k] for k in ("step", "accuracy", "low", "high", "questions", "samples")}
    assert heldout_at(folder, 4) == expected == _manifest(folder, step=4)["heldout"]
    assert heldout_at(folder, 3) is None
    for bad in ({"accuracy": True}, {"accuracy": float("nan")}, {"high": "0.7"}, {"questions": 20.0}):
        _history(folder, {**at_4, **bad})
        with pytest.raises(CheckpointError, match="needs a numeric accuracy"):
            heldout_at(folder, 4)
