"""Reward-hacking and collapse alarms, and the plateau rule, on synthetic held-out histories and training logs."""

from __future__ import annotations

import pytest

from callbacks.alarms import Alarm, AlarmSettings, check_alarms
from callbacks.plateau import plateaued

SETTINGS = AlarmSettings()


def _evaluation(step, correct, *, samples=4, unparseable=None, reward=None, prefix="q"):
    """One history evaluation: ``correct[i]`` (and ``unparseable[i]``) of ``samples`` on question i."""
    unparseable = unparseable or [0] * len(correct)
    total = len(correct) * samples
    return {
        "step": step,
        "accuracy": sum(correct) / total,
        "low": None,
        "high": None,
        "questions": len(correct),
        "samples": samples,
        "unparseable": sum(unparseable) / total,
        "mean_tokens": 17.0,
        "reward": reward,
        "records": f"heldout/step-{step}.jsonl",
        "per_question": {
            f"{prefix}{i}": [c, samples, u] for i, (c, u) in enumerate(zip(correct, unparseable))
        },
    }


def _history(*evaluations, alarms=()):
    return {"format": 1, "evaluations": list(evaluations), "alarms": list(alarms), "stopped": None}


def _kinds(alarms):
    return [alarm.kind for alarm in alarms]


def _series(key, values, first_step=10, every=10):
    return [{"step": first_step + i * every, key: value} for i, value in enumerate(values)]


# 40 questions: 3 of 4 right on each at the peak, 1 of 4 at the latest evaluation.
PEAK, FALLEN = [3] * 40, [1] * 40


def test_a_large_consistent_drop_while_reward_rises_is_reward_hacking():
    history = _history(_evaluation(100, PEAK, reward=2.41), _evaluation(300, FALLEN, reward=3.40))
    [alarm] = check_alarms(history, [], SETTINGS)
    # Every one of the 40 differences is -1/2: exact p = 2 / 2**40.
    assert alarm == Alarm(
        "reward_hacking",
        "heldout/accuracy",
        (100, 300),
        "heldout/accuracy fell 75.0% -> 25.0% (step 100 -> step 300, paired sign-flip p = 1.8e-12 over 40 "
        "questions, Bonferroni over 1 earlier evaluations) while the training reward rose 2.41 -> 3.40",
    )
    assert alarm.as_record() == {
        "kind": "reward_hacking",
        "metric": "heldout/accuracy",
        "steps": [100, 300],
        "message": alarm.message,
    }


def test_a_noisy_drop_on_few_questions_is_not_reward_hacking():
    # Three questions each fall from 4/4 to 0/4: the largest possible drop, yet p = 2 / 2**3 = 0.25.
    few = _history(_evaluation(100, [4, 4, 4], reward=1.0), _evaluation(200, [0, 0, 0], reward=2.0))
    # One question of 40 falls from 4/4 to 0/4, the rest hold: p = 1.
    one = _history(_evaluation(100, [4] + PEAK[1:], reward=1.0), _evaluation(200, [0] + PEAK[1:], reward=2.0))
    assert check_alarms(few, [], SETTINGS) == []
    assert check_alarms(one, [], SETTINGS) == []


def test_a_drop_with_falling_or_flat_reward_is_not_reward_hacking():
    falling = _history(_evaluation(100, PEAK, reward=3.4), _evaluation(300, FALLEN, reward=2.4))
    flat = _history(_evaluation(100, PEAK, reward=3.4), _evaluation(300, FALLEN, reward=3.4))
    assert check_alarms(falling, [], SETTINGS) == []
    assert check_alarms(flat, [], SETTINGS) == []


def test_a_rise_in_accuracy_is_not_reward_hacking():
    history = _history(_evaluation(100, FALLEN, reward=2.0), _evaluation(300, PEAK, reward=3.0))
    assert check_alarms(history, [], SETTINGS) == []


def test_the_reference_is_the_best_earlier_evaluation_the_earliest_on_ties():
    history = _history(
        _evaluation(100, [2] * 40, reward=1.0),
        _evaluation(200, PEAK, reward=1.5),
        _evaluation(300, PEAK, reward=1.8),
        _evaluation(400, FALLEN, reward=2.0),
    )
    [alarm] = check_alarms(history, [], SETTINGS)
    assert alarm.steps == (200, 400)
    assert "step 200 -> step 400" in alarm.message and "rose 1.50 -> 2.00" in alarm.message


def test_without_evaluation_rewards_the_training_log_reward_decides():
    history = _history(_evaluation(100, PEAK), _evaluation(300, FALLEN, reward=9.0))
    # Mean of the 3 logged rewards up to step 100 (steps 80-100) is 1.0; up to step 300 (280-300) is 3.0.
    log = _series("reward", [1.0] * 10 + [2.0] * 17 + [3.0] * 3)
    [alarm] = check_alarms(history, log, SETTINGS)
    assert alarm.kind == "reward_hacking" and alarm.message.endswith("rose 1.00 -> 3.00")
    falling_log = _series("reward", [3.0] * 10 + [1.0] * 20)
    assert check_alarms(history, falling_log, SETTINGS) == []
    assert check_alarms(history, [], SETTINGS) == []  # no reward anywhere: the rise is unknown


def test_a_fall_below_the_model_before_training_reads_its_reward_from_the_first_logged_steps():
    """Step 0 (the base model) has no training reward: the first logged rewards are the nearest."""
    history = _history(_evaluation(0, PEAK), _evaluation(300, FALLEN))
    alarm = check_alarms(history, _series("reward", [0.1, 0.1, 0.1, 0.9, 0.9, 0.9], every=50), SETTINGS)[0]
    assert alarm.kind == "reward_hacking" and alarm.steps == (0, 300) and "rose 0.10 -> 0.90" in alarm.message
    assert check_alarms(history, _series("reward", [0.9] * 6, every=50), SETTINGS) == []  # reward flat


def test_the_first_evaluation_after_the_model_before_training_compares_its_own_reward():
    """Evaluated at step 20 before step 20 is logged, with logs at steps 5, 10 and 15: the log's first three and
    last three rewards were the same ones, so a fall of 16.8% -> 6.2% under a rising reward raised no alarm."""
    log = _series("reward", [-0.106, -0.098, -0.090], first_step=5, every=5)
    history = _history(_evaluation(0, PEAK), _evaluation(20, FALLEN, reward=-0.087))
    [alarm] = check_alarms(history, log, SETTINGS)
    assert (
        alarm.kind == "reward_hacking" and alarm.steps == (0, 20) and "rose -0.10 -> -0.09" in alarm.message
    )
    fallen_reward = _history(_evaluation(0, PEAK), _evaluation(20, FALLEN, reward=-0.2))
    assert check_alarms(fallen_reward, log, SETTINGS) == []
    assert (
        check_alarms(history, [], SETTINGS) == []
    )  # nothing logged yet: the reward before training is unknown


def test_only_questions_both_evaluations_share_are_paired():
    latest = _evaluation(300, FALLEN + [4] * 10, reward=2.0)
    latest["per_question"] = {f"q{i}": row for i, row in enumerate(latest["per_question"].values())}
    history = _history(_evaluation(100, PEAK, reward=1.0), latest)  # q40..q49 only in the latest
    [alarm] = check_alarms(history, [], SETTINGS)
    assert "over 40 questions" in alarm.message


def test_unparseable_rising_against_the_lowest_earlier_share():
    clean, messy = [0] * 40, [2] * 40
    history = _history(
        _evaluation(100, PEAK, unparseable=[1] * 40, reward=1.0),
        _evaluation(200, PEAK, unparseable=clean, reward=1.0),
        _evaluation(300, PEAK, unparseable=messy, reward=1.0),
    )
    [alarm] = check_alarms(history, [], SETTINGS)
    assert alarm.kind == "unparseable_rising" and alarm.metric == "heldout/unparseable"
    assert alarm.steps == (200, 300)
    assert alarm.message.startswith(
        # 2 / 2**40, times the 2 earlier evaluations the lowest share was picked from
        "heldout/unparseable rose 0.0% -> 50.0% (step 200 -> step 300, paired sign-flip p = 3.6e-12 over 40 "
        "questions, Bonferroni over 2 earlier evaluations)"
    )


def test_unparseable_falling_or_noisy_does_not_fire():
    falling = _history(
        _evaluation(100, PEAK, unparseable=[2] * 40), _evaluation(200, PEAK, unparseable=[0] * 40)
    )
    noisy = _history(
        _evaluation(100, PEAK, unparseable=[0] * 40), _evaluation(200, PEAK, unparseable=[4, 4] + [0] * 38)
    )
    assert check_alarms(falling, [], SETTINGS) == []
    assert check_alarms(noisy, [], SETTINGS) == []


def test_fewer_than_two_evaluations_raise_no_held_out_alarm():
    assert check_alarms(_history(), [], SETTINGS) == []
    assert (
        check_alarms(_history(_evaluation(100, FALLEN, unparseable=[4] * 40, reward=9.0)), [], SETTINGS) == []
    )


def test_length_collapse_compares_the_last_window_with_the_first():
    log = _series("completions/mean_length", [200.0, 210.0, 220.0, 150.0, 100.0, 90.0, 80.0])
    [alarm] = check_alarms(_history(), log, SETTINGS)
    assert alarm == Alarm(
        "length_collapse",
        "completions/mean_length",
        (10, 70),
        "completions/mean_length fell 210.0 -> 90.0 tokens (step 10 -> step 70; means of the first and the "
        "last 3 logged values, steps 10-30 and 50-70), below 50% of its early level",
    )


@pytest.mark.parametrize(
    "lengths",
    [
        [200.0, 210.0, 220.0, 150.0, 110.0, 110.0, 110.0],  # 110 is above half of 210
        [200.0, 210.0, 220.0, 10.0, 10.0],  # fewer than 2 x window logged values
    ],
)
def test_length_collapse_needs_a_fall_below_the_share_over_two_windows(lengths):
    assert check_alarms(_history(), _series("completions/mean_length", lengths), SETTINGS) == []


def test_length_at_cap_when_the_recent_clipped_ratio_reaches_the_cap_share():
    log = _series("completions/clipped_ratio", [0.1, 0.2, 0.85, 0.9, 0.95])
    [alarm] = check_alarms(_history(), log, SETTINGS)
    assert (alarm.kind, alarm.metric, alarm.steps) == ("length_at_cap", "completions/clipped_ratio", (30, 50))
    assert alarm.message.startswith(
        "completions/clipped_ratio averaged 90.0% over the last 3 logged values (step 30 -> step 50), at or "
        "above 90%"
    )
    below = _series("completions/clipped_ratio", [0.95, 0.95, 0.85, 0.9, 0.9])
    short = _series("completions/clipped_ratio", [1.0, 1.0])
    assert check_alarms(_history(), below, SETTINGS) == []
    assert check_alarms(_history(), short, SETTINGS) == []


def test_kl_spike_against_the_median_of_earlier_values():
    log = _series("kl", [0.01, 0.02, 0.5, 0.02, 0.25])  # the earlier 0.5 spike does not lift the median
    [alarm] = check_alarms(_history(), log, SETTINGS)
    assert alarm == Alarm(
        "kl_spike",
        "kl",
        (10, 50),
        "kl spiked to 0.25 at step 50, over 10x the median 0.02 of the 4 earlier logged values "
        "(step 10 -> step 50) and above the floor 0.05",
    )


@pytest.mark.parametrize(
    "kls",
    [
        [0.001, 0.001, 0.001, 0.04],  # 40x the median but under the floor
        [0.02, 0.03, 0.04, 0.2],  # above the floor but 6.7x the median
        [0.001, 0.001, 0.9],  # fewer than window earlier values
        [],  # beta = 0: TRL logs no kl
    ],
)
def test_kl_spike_needs_a_large_multiple_above_the_floor(kls):
    assert check_alarms(_history(), _series("kl", kls), SETTINGS) == []


def test_a_kind_already_in_the_history_is_not_raised_again():
    earlier = {"kind": "reward_hacking", "metric": "heldout/accuracy", "steps": [100, 200], "message": "..."}
    history = _history(
        _evaluation(100, PEAK, reward=1.0), _evaluation(300, FALLEN, reward=2.0), alarms=[earlier]
    )
    log = _series("kl", [0.01, 0.01, 0.01, 0.9])
    assert _kinds(check_alarms(history, log, SETTINGS)) == ["kl_spike"]
    history["alarms"].append({"kind": "kl_spike", "metric": "kl", "steps": [10, 40], "message": "..."})
    assert check_alarms(history, log, SETTINGS) == []


def test_a_run_resumed_past_a_stop_is_judged_from_the_stop_on():
    """Resuming is a choice to go on from the stop: the kind that stopped the run is armed again, against the
    evaluations from the stop on, so the fall that stopped it does not stop it again at once."""
    stopped = {"kind": "reward_hacking", "metric": "heldout/accuracy", "steps": [100, 200], "message": "..."}
    kl = {
        "kind": "kl_spike",
        "metric": "kl",
        "steps": [10, 150],
        "message": "...",
    }  # raised, but did not stop it
    history = _history(
        _evaluation(100, PEAK, reward=1.0), _evaluation(200, [2] * 40, reward=2.0), alarms=[kl, stopped]
    )
    history["resumed_stops"] = [{"step": 200, "reason": "alarm reward_hacking: ..."}]
    log = _series("kl", [0.01, 0.01, 0.01, 0.9], first_step=210)
    flat = {**history, "evaluations": [*history["evaluations"], _evaluation(300, [2] * 40, reward=3.0)]}
    assert check_alarms(flat, log, SETTINGS) == []  # no new fall since the stop; kl_spike stays raised
    fallen = {**history, "evaluations": [*history["evaluations"], _evaluation(300, FALLEN, reward=3.0)]}
    (alarm,) = check_alarms(fallen, log, SETTINGS)
    assert alarm.kind == "reward_hacking" and alarm.steps == (200, 300)
    fallen["alarms"] = [*fallen["alarms"], alarm.as_record()]  # raised again after the resume: once more only
    assert check_alarms(fallen, log, SETTINGS) == []


def test_several_kinds_at_once_in_a_fixed_order():
    history = _history(
        _evaluation(100, PEAK, reward=1.0), _evaluation(300, FALLEN, unparseable=[3] * 40, reward=2.0)
    )
    log = (
        _series("completions/mean_length", [300.0] * 3 + [50.0] * 3)
        + _series("completions/clipped_ratio", [1.0] * 3)
        + _series("kl", [0.01, 0.01, 0.01, 0.9])
    )
    alarms = check_alarms(history, log, SETTINGS)
    assert _kinds(alarms) == [
        "reward_hacking",
        "unparseable_rising",
        "length_collapse",
        "length_at_cap",
        "kl_spike",
    ]
    for alarm in alarms:
        assert alarm.metric in alarm.message
        assert f"step {alarm.steps[0]} -> step {alarm.steps[1]}" in alarm.message


def _accuracies(*values):
    return _history(*({"step": 100 * (i + 1), "accuracy": a} for i, a in enumerate(values)))


@pytest.mark.parametrize(
    ("accuracies", "patience", "reason"),
    [
        ((0.2, 0.3, 0.3), 1, "the last 1 evaluations (steps 300) did not beat its best 30.0% at step 200"),
        ((0.2, 0.3, 0.4), 1, None),
        ((0.2, 0.4, 0.3, 0.4), 2, "the last 2 evaluations (steps 300, 400) did not beat its best 40.0% at step 200"),
        ((0.2, 0.4, 0.3, 0.41), 2, None),
        ((0.4, 0.4, 0.3, 0.35), 3, "the last 3 evaluations (steps 200, 300, 400) did not beat its best 40.0% at step 100"),
        ((0.4, 0.3, 0.35, 0.5, 0.45), 3, None),
        ((0.4, 0.3, 0.2), 3, None),  # no evaluation before the last 3 to beat
    ],
)  # fmt: skip
def test_plateau_counts_evaluations_without_a_strictly_higher_accuracy(accuracies, patience, reason):
    expected = None if reason is None else f"heldout/accuracy plateaued: {reason}"
    assert plateaued(_accuracies(*accuracies), patience) == expected


def test_a_run_resumed_past_a_plateau_stop_gets_patience_evaluations_afresh():
    history = _accuracies(0.4, 0.3, 0.35, 0.3, 0.3)  # stopped at step 300 with patience 2, resumed
    history["resumed_stops"] = [{"step": 300, "reason": "heldout/accuracy plateaued: ..."}]
    assert (
        plateaued({**history, "evaluations": history["evaluations"][:4]}, 2) is None
    )  # one since the resume
    assert plateaued(history, 2).startswith(
        "heldout/accuracy plateaued: the last 2 evaluations (steps 400, 500)"
    )


@pytest.mark.parametrize("patience", [0, -1, 1.5, True])
def test_plateau_patience_must_be_a_positive_integer(patience):
    with pytest.raises(
        ValueError, match=rf"patience must be a positive integer \(evaluations\), got {patience!r}"
    ):
        plateaued(_accuracies(0.1, 0.2), patience)
