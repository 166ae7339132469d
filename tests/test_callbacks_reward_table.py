"""The callbacks registry and the reward table printed during training."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
from _callbacks_helpers import trainer_objects

from callbacks import CallbackSpecError, RewardTable, build_callbacks, check_callbacks, registered
from callbacks.reward_table import RewardTableCallback


def test_build_callbacks_from_recipe_specs():
    [table] = build_callbacks([{"name": "reward_table", "every_steps": 3}])
    assert isinstance(table, RewardTableCallback) and table.every_steps == 3
    assert build_callbacks([]) == []
    assert registered()["reward_table"] is RewardTable


def test_checking_a_recipe_builds_plugins_but_only_the_settings_of_registered_callbacks():
    specs = [{"name": "reward_table", "every_steps": 3}, {"path": "_plugins:StepCounter", "start": 2}]
    assert check_callbacks(specs) is None
    with pytest.raises(CallbackSpecError, match=r"callbacks\[1\] \(_plugins:StepCounter\): start must be"):
        check_callbacks([specs[0], {"path": "_plugins:StepCounter", "start": -1}])


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        ([{"name": "reward_tabel"}],
         r"callbacks\[0\] \(reward_tabel\): unknown callback 'reward_tabel'\. Did you mean 'reward_table'\? Available: reward_table"),
        ([{"name": "reward_table"}, {"name": "reward_table", "every_step": 5}],
         r"callbacks\[1\] \(reward_table\): unknown parameter 'every_step'\. Did you mean 'every_steps'\?"),
        ([{"name": "reward_table", "every_steps": 0}],
         r"callbacks\[0\] \(reward_table\): every_steps must be a positive integer, got 0"),
        ([{"every_steps": 5}], r"callbacks\[0\]: give exactly one of `name` .* or `path`"),
        ({"name": "reward_table"}, "callbacks must be a list"),
    ],
)  # fmt: skip
def test_bad_specs_say_what_is_wrong(specs, message):
    with pytest.raises(CallbackSpecError, match=message):
        build_callbacks(specs)


def _logs(step):
    return {
        "loss": 0.1,
        "reward": 1.0 + step,
        "rewards/correctness/mean": 0.5 * step,
        "rewards/format/mean": 0.25,
        "kl": 0.001 * step,
        "completions/mean_length": 100.0 + step,
        "completions/clipped_ratio": 0.5,
    }


def _log(callback, step, logs, main=True):
    args, state, control = trainer_objects("/unused", step, main=main)
    state.max_steps = 8
    callback.on_log(args, state, control, logs=logs)


def test_table_every_n_steps_with_means_and_latest(capsys):
    table = RewardTableCallback(every_steps=4)
    for step in (1, 2, 3):
        _log(table, step, _logs(step))
    _log(table, 3, {"train_runtime": 12.0})  # an end-of-training summary is no row
    assert capsys.readouterr().out == ""
    _log(table, 4, _logs(4))
    lines = capsys.readouterr().out.splitlines()[1:]
    assert lines[0] == "GRPO step 4/8: mean of 4 logged steps, and the latest"
    rows = {line[:28].strip(): line[28:].split() for line in lines[2:]}
    assert rows == {
        "rewards/correctness": ["1.250", "2.000"],
        "rewards/format": ["0.250", "0.250"],
        "reward (weighted sum)": ["3.500", "5.000"],
        "KL to reference": ["0.0025", "0.004"],
        "completion length (tokens)": ["102.5", "104.0"],
        "clipped at max length": ["50.0%", "50.0%"],
    }
    _log(table, 5, _logs(5))
    assert capsys.readouterr().out == ""
    table.on_train_end(*trainer_objects("/unused", 5))
    assert "GRPO step 5/100: mean of 1 logged steps" in capsys.readouterr().out


def test_only_the_main_process_prints(capsys):
    table = RewardTableCallback(every_steps=1)
    _log(table, 1, _logs(1), main=False)
    table.on_train_end(*trainer_objects("/unused", 1, main=False))
    assert capsys.readouterr().out == ""


def test_a_logged_step_is_one_short_line_not_the_metrics_dict():
    from callbacks.progress import short_line

    logs = {
        "reward": 1.84,
        "answers/correct": 0.3125,
        "completions/mean_length": 21.6,
        "kl": 0.01,
        "loss": 0.2,
    }
    assert short_line(logs, 12, 400, 3725) == "step 12/400  reward 1.840  correct 31%  length 22  left 1h02m"
    assert short_line({"reward": -0.5}, 1, 8, None) == "step 1/8  reward -0.500"
    assert (
        short_line({"train_runtime": 12.0}, 8, 8, 0) is None
    )  # the final summary stays in trainer_state.json


def test_time_left_after_a_resume_counts_only_this_launchs_steps(capsys):
    """Resumed at step 36 of 60: two steps in 10 s leave 22 steps, 110 s (it said "left 0s")."""
    from transformers import TrainerControl, TrainerState

    from callbacks.progress import ShortProgress

    progress, args = ShortProgress(), SimpleNamespace(disable_tqdm=False)
    state = TrainerState(global_step=36, max_steps=60, is_world_process_zero=True)
    progress.on_train_begin(args, state, TrainerControl())
    progress.training_bar.start_t -= 10  # ten seconds into this launch
    state.global_step = 38
    progress.on_step_end(args, state, TrainerControl())
    progress.on_log(args, state, TrainerControl(), logs={"reward": 1.0})
    progress.on_train_end(args, state, TrainerControl())
    assert re.search(r"step 38/60  reward 1.000  left 1m5\ds", capsys.readouterr().out)


def test_a_resumed_run_prints_at_the_next_multiple_of_every_steps(capsys):
    """Resumed at step 8 with every_steps 4: the table comes at step 12 over steps 9-12 (it came at step 9, over
    that step alone, and step 12's table left step 9 out)."""
    table = RewardTableCallback(every_steps=4)
    table.on_train_begin(*trainer_objects("/unused", 8))
    for step in (9, 10, 11):
        _log(table, step, _logs(step))
    assert capsys.readouterr().out == ""
    _log(table, 12, _logs(12))
    assert re.search(r"GRPO step 12/\d+: mean of 4 logged steps", capsys.readouterr().out)
