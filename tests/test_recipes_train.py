"""Training end to end on the tiny model: run.py, accelerate with 2 processes, learning, 4-bit, local resume."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
import torch
import yaml
from _in_process import run_recipe
from _recipes_learning import EVEN_TOKEN_REWARD, learnable_reward_override
from conftest import REPO, accelerate_launcher
from safetensors.torch import load_file

from recipes.recipe import load_recipe
from recipes.run import build_trainer

pytestmark = pytest.mark.slow


def launch(*overrides: str) -> subprocess.CompletedProcess:
    """gsm8k_tiny in this process: about 17 s less than a launch, where the launcher is not what a test is about."""
    result = run_recipe("gsm8k_tiny", *overrides)
    assert result.returncode == 0, result.stderr[-4000:]
    return result


def state(folder):
    return json.loads((folder / "trainer_state.json").read_text())


def test_the_readmes_cpu_launch_with_two_processes_trains_end_to_end_and_says_it_started_one(tmp_path):
    """`accelerate launch --cpu --num_processes 2` starts one process: it trains, saves, and says so with the fix.
    (Two processes training together: tests/test_callbacks_e2e.py.)"""
    out = tmp_path / "run"
    overrides = [f"trainer.output_dir={out}", "trainer.max_steps=4", "checkpoint.every_steps=2"]
    command = [*accelerate_launcher(1), "recipes/run.py", "gsm8k_tiny", *overrides]
    command[command.index("--num_processes") + 1] = (
        "2"  # the literal `accelerate launch --cpu --num_processes 2`
    )
    result = subprocess.run(command, check=False, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "accelerate launch --cpu started ONE process, not 2" in result.stderr
    assert "accelerate launch --multi_gpu --num_processes 2 recipes/run.py" in result.stderr
    assert {"adapter_model.safetensors", "adapter_config.json", "tokenizer.json", "recipe.yaml"} <= {
        p.name for p in out.iterdir()
    }
    assert yaml.safe_load((out / "recipe.yaml").read_text()) == load_recipe("gsm8k_tiny", overrides).config
    logged = [e for e in state(out)["log_history"] if "loss" in e]  # the step-0 held-out entry is not one
    assert state(out)["global_step"] == 4
    assert {"rewards/correctness/mean", "rewards/format/mean"} <= set(
        logged[0]
    )  # each recipe reward is logged
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4"]


def test_reward_rises_lora_moves_and_base_stays(tmp_path, tiny_model_dir):
    recipe = load_recipe(
        "gsm8k_tiny",
        [
            f"trainer.output_dir={tmp_path}",
            "trainer.max_steps=30",
            "trainer.learning_rate=1e-2",
            learnable_reward_override(tiny_model_dir),
            "callbacks=[]",
            "checkpoint.every_steps=30",
        ],
    )
    trainer = build_trainer(recipe)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    rewards = [h["reward"] for h in trainer.state.log_history if "reward" in h]
    first, last = sum(rewards[:5]) / 5, sum(rewards[-5:]) / 5
    assert last > 0.2 and last > 5 * first, rewards
    after = dict(trainer.model.named_parameters())
    lora = [n for n in before if "lora_" in n]
    assert sum(not torch.equal(before[n], after[n]) for n in lora) >= len(lora) // 2
    assert all(torch.equal(before[n], after[n]) for n in before if "lora_" not in n)


def test_four_bit_base_builds_and_trains_a_step(tmp_path, tiny_model_dir):
    recipe = load_recipe(
        "gsm8k_tiny",
        [
            f"trainer.output_dir={tmp_path}",
            "model.quantization=4bit",
            "trainer.max_steps=1",
            "checkpoint.every_steps=1",
            "callbacks=[]",
            EVEN_TOKEN_REWARD,
            "trainer.learning_rate=1e-2",
        ],
    )
    trainer = build_trainer(recipe)
    import bitsandbytes as bnb

    assert any(isinstance(m, bnb.nn.Linear4bit) for m in trainer.model.modules())
    # TRL casts a quantized model's adapter to bfloat16, where RL's small Adam steps round away: float32 here.
    trainable = [p for p in trainer.model.parameters() if p.requires_grad]
    assert trainable and {p.dtype for p in trainable} == {torch.float32}
    lora_b = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if "lora_B" in n}
    trainer.train()
    assert trainer.state.global_step == 1
    assert any(not torch.equal(p, dict(trainer.model.named_parameters())[n]) for n, p in lora_b.items())
    state = next(iter(trainer.optimizer.state.values()))
    assert state["exp_avg"].dtype == torch.float32


@pytest.mark.parametrize(
    ("plugin", "said"),
    [
        # TRL trained on with loss 0 and grad_norm 0 at every step, and saved the adapter as if all was well.
        ("inf_in_training", "returned an infinite reward at step 1"),
        # TRL turns None into NaN and leaves NaN out of the sum: a reward's own NaN trained on as "does not apply".
        ("nan_in_training", "returned nan at step 1: TRL reads a NaN as None"),
    ],
)
def test_an_infinite_or_nan_reward_stops_the_run_naming_the_reward(tmp_path, plugin, said):
    from common.errors import UserError

    path = f"{REPO / 'tests' / '_plugins.py'}:{plugin}"
    recipe = load_recipe(
        "gsm8k_tiny",
        [f"trainer.output_dir={tmp_path}", "trainer.max_steps=2", "callbacks=[]", "heldout.enabled=false",
         f"rewards=[{{name: format, style: hash}}, {{path: '{path}', weight: 0.1}}]"],
    )  # fmt: skip
    with pytest.raises(UserError, match=rf"rewards\[1\] \({plugin}\) {said}"):
        build_trainer(recipe).train()


def test_a_reward_that_applies_to_no_completion_trains_on_and_says_so(tmp_path):
    """A reward returning None ("does not apply") for every completion of a step: TRL logs the step's reward as
    None, and the short log line died formatting it (TypeError) at step 1."""
    path = f"{REPO / 'tests' / '_plugins.py'}:none_in_training"
    out = tmp_path / "run"
    result = launch(
        f"trainer.output_dir={out}", "trainer.max_steps=4", "checkpoint.every_steps=2",
        f"rewards=[{{path: '{path}'}}]",
    )  # fmt: skip
    assert "step 1/4  reward n/a (no reward applied)" in result.stdout + result.stderr
    assert state(out)["global_step"] == 4 and (out / "adapter_model.safetensors").is_file()


def test_resume_from_local_checkpoint_keeps_optimizer_and_schedule(tmp_path):
    common = [
        "trainer.max_steps=4",
        "checkpoint.every_steps=2",
        "trainer.lr_scheduler_type=linear",
        "trainer.seed=7",
    ]
    full = tmp_path / "full"
    launch(f"trainer.output_dir={full}", *common)
    resumed = tmp_path / "resumed"
    resumed.mkdir()
    shutil.copytree(full / "checkpoint-2", resumed / "checkpoint-2")
    result = launch(f"trainer.output_dir={resumed}", *common, "checkpoint.resume=latest")
    steps = re.findall(
        r"^step (\d+)/4  reward [-0-9.]+  correct \d+%  length \d+",
        result.stdout + result.stderr,
        re.MULTILINE,
    )
    assert steps == ["3", "4"]  # only steps 3 and 4 ran again, each one short line
    learning_rates = [
        [h["learning_rate"] for h in state(run)["log_history"] if "learning_rate" in h]
        for run in (full, resumed)
    ]
    assert (
        learning_rates[0] == learning_rates[1] and len(set(learning_rates[0])) == 4
    )  # schedule restored, not restarted
    optimizer = torch.load(resumed / "checkpoint-4" / "optimizer.pt", weights_only=False)
    assert {int(s["step"]) for s in optimizer["state"].values()} == {4}  # Adam moments carried, not restarted
    a, b = load_file(full / "adapter_model.safetensors"), load_file(resumed / "adapter_model.safetensors")
    assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)


def test_a_finished_run_trained_longer_goes_on_at_the_rate_of_its_new_schedule(tmp_path):
    """Raising trainer.max_steps of a finished linear-decay run: step 5 of 6 trained at 0.0 (the 4-step schedule's
    end, restored with the optimizer), changed nothing, and the rate jumped back up at step 6."""
    out, common = tmp_path / "run", ["trainer.lr_scheduler_type=linear", "checkpoint.every_steps=2"]
    launch(f"trainer.output_dir={out}", "trainer.max_steps=4", *common)
    before = load_file(out / "adapter_model.safetensors")
    result = launch(f"trainer.output_dir={out}", "trainer.max_steps=6", *common)
    rates = {h["step"]: h["learning_rate"] for h in state(out)["log_history"] if "learning_rate" in h}
    base = rates[1]
    assert rates[4] == pytest.approx(base / 4)  # the first launch: (4 - 3) / 4
    # The second launch: 6 steps decaying linearly, from step 5 on; (6 - 4) / 6 and (6 - 5) / 6 of the base rate.
    assert (rates[5], rates[6]) == (pytest.approx(base / 3), pytest.approx(base / 6))
    assert "Learning rate at step 5: 0.000333333 on this launch's schedule" in result.stderr
    after = load_file(out / "adapter_model.safetensors")
    assert any(not torch.equal(before[k], after[k]) for k in before)


def test_a_refused_second_run_leaves_the_first_runs_folder_alone(tmp_path):
    out = tmp_path / "first"
    launch(f"trainer.output_dir={out}", "trainer.max_steps=2", "checkpoint.every_steps=2")
    recipe_before = (out / "recipe.yaml").read_text()
    result = run_recipe(
        "gsm8k_tiny", f"trainer.output_dir={out}", "checkpoint.resume=never", "trainer.learning_rate=0.5"
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert "error:" in result.stderr and "overwrite" in result.stderr
    assert (out / "recipe.yaml").read_text() == recipe_before


def test_a_run_stopped_for_a_failed_upload_fails_even_when_the_store_recovers(tmp_path, monkeypatch, caplog):
    """require_upload: checkpoint-2's upload fails once, checkpoint-4's succeeds; the run stopped at 4 of 6 must
    not end as a success."""
    import callbacks.sync_callback as sync
    from callbacks.errors import CheckpointError
    from recipes.run import train

    real, calls = sync.publish_staged, []

    def once_broken(*args, **kwargs):
        calls.append(args[2])
        if len(calls) == 1:
            raise ConnectionError("the store went away")
        return real(*args, **kwargs)

    monkeypatch.setattr(sync, "publish_staged", once_broken)
    out = tmp_path / "run"
    recipe = load_recipe(
        "gsm8k_tiny",
        [f"trainer.output_dir={out}", "trainer.max_steps=6", "checkpoint.every_steps=2",
         f"checkpoint.uri={tmp_path / 'drive'}", "checkpoint.require_upload=true"],
    )  # fmt: skip
    with pytest.raises(
        CheckpointError, match=r"checkpoint-2 did not reach .*: the run ended early; fix the store"
    ):
        train(recipe)
    assert calls == [2, 4] and state(out)["global_step"] == 4
    assert (tmp_path / "drive" / "checkpoint-4" / "manifest.json").is_file()


@pytest.mark.parametrize("required", [False, True])
def test_a_store_that_fails_mid_run_never_costs_the_local_adapter(tmp_path, monkeypatch, caplog, required):
    import callbacks.sync_callback as sync
    from callbacks.errors import CheckpointError
    from recipes.run import train

    def broken(*args, **kwargs):
        raise ConnectionError("the store went away")

    monkeypatch.setattr(sync, "publish_staged", broken)
    out = tmp_path / "run"
    recipe = load_recipe(
        "gsm8k_tiny",
        [f"trainer.output_dir={out}", "trainer.max_steps=6", "checkpoint.every_steps=2",
         f"checkpoint.uri={tmp_path / 'drive'}", f"checkpoint.require_upload={str(required).lower()}"],
    )  # fmt: skip
    if required:  # the run ends at the save after the failed upload, not at max_steps
        with pytest.raises(
            CheckpointError,
            match="FAILED for checkpoint-2, checkpoint-4: ConnectionError: the store went away",
        ):
            train(recipe)
        assert "checkpoint-2 did not reach" in caplog.text and "the run ended early" in caplog.text
    else:
        train(recipe)
        assert "FAILED for checkpoint-2, checkpoint-4, checkpoint-6: ConnectionError" in caplog.text
        assert "still ends with exit code 0" in caplog.text
        # It said all three "exist only under the local output_dir" after save_total_limit 2 had removed one.
        kept = sorted((p.name for p in out.glob("checkpoint-*")), key=lambda name: int(name.split("-")[1]))
        assert len(kept) == 2 and f"{', '.join(kept)} exist only in {out}: copy them" in caplog.text
        (gone,) = {"checkpoint-2", "checkpoint-4", "checkpoint-6"} - set(kept)
        assert (
            f"{gone} no longer exist anywhere: trainer.save_total_limit (2) removed them from" in caplog.text
        )
    steps = 4 if required else 6
    assert (out / "adapter_model.safetensors").is_file() and state(out)["global_step"] == steps  # saved first
    assert not (out / ".checkpoint_sync" / "run.lock").exists()  # the folder is free for the next launch


def test_a_bad_data_file_is_refused_before_the_output_folder_is_made(tmp_path):
    from recipes.data import DataError
    from recipes.run import train

    data = tmp_path / "train.jsonl"
    data.write_text('{"question": "q", "answer": "1"}\n{"question": "q2", "answer": "forty-two"}\n')
    out = tmp_path / "run"
    recipe = load_recipe(
        "gsm8k_tiny",
        ["data.task=jsonl", f"data.source={data}", f"trainer.output_dir={out}", "heldout.enabled=false"],
    )
    with pytest.raises(DataError, match=r"train.jsonl line 2: 'answer': gold answer 'forty-two'"):
        train(recipe)
    assert not out.exists()


def test_the_heldout_entry_carries_the_reward_of_the_step_it_evaluates(tmp_path):
    """Logging at the evaluation steps: the Trainer logs after the held-out callback runs, so the entry read no
    reward at all (and the reward-hacking alarm had nothing to compare)."""
    from recipes.run import train

    out = tmp_path / "run"
    train(
        load_recipe(
            "gsm8k_tiny", [f"trainer.output_dir={out}", "trainer.max_steps=8", "trainer.logging_steps=4"]
        )
    )
    logged = {e["step"]: e["reward"] for e in state(out)["log_history"] if "reward" in e}
    entries = json.loads((out / "heldout" / "history.json").read_text())["evaluations"]
    assert [(e["step"], e["reward"]) for e in entries] == [
        (0, None),  # the model before training: no training reward yet
        (4, pytest.approx(logged[4])),
        (8, pytest.approx(logged[8])),
    ]


def test_a_final_adapter_with_nothing_to_resume_is_not_trained_over(tmp_path, caplog):
    """A two-machine run without a store keeps half of each checkpoint on each machine: relaunched, its checkpoints
    were moved aside and it trained again from step 0, over its final adapter."""
    from recipes.recipe import RecipeError
    from recipes.run import train

    out = tmp_path / "run"
    out.mkdir()
    (out / "adapter_model.safetensors").write_bytes(b"the finished run's adapter")
    (out / "checkpoint-4").mkdir()  # half a checkpoint: unusable, moved aside
    (out / ".checkpoint_sync").mkdir()  # what every run of ours leaves: the folder is the run's, not a user's
    with pytest.raises(
        RecipeError, match=r"holds a final adapter, and no checkpoint of its run can be resumed"
    ):
        train(load_recipe("gsm8k_tiny", [f"trainer.output_dir={out}"]))
    assert (out / "adapter_model.safetensors").read_bytes() == b"the finished run's adapter"
    assert not (out / "recipe.yaml").exists() and "Moved local checkpoint-4 aside" in caplog.text


def test_the_nan_note_reads_floats_numpy_values_and_one_element_tensors():
    import numpy as np

    from recipes.trainer import NanRefused

    for nan in (float("nan"), np.float32("nan"), torch.tensor(float("nan"))):
        reward = NanRefused(lambda completions, nan=nan, **kwargs: [0.5, nan, None], "mine")
        assert reward(completions=["a", "b", "c"])[1] is nan and reward.returned_nan
    finite = NanRefused(lambda completions, **kwargs: [0.5, None, torch.tensor(1.0)], "mine")
    finite(completions=["a", "b", "c"])
    assert not finite.returned_nan
