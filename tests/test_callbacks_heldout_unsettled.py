"""Held-out samples the grader never settled (a timeout on a busy machine) are left out of a step's accuracy, so they
can neither cost a checkpoint the best pointer nor raise the reward-hacking alarm, and the log line counts them."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from callbacks import heldout
from callbacks.alarms import AlarmSettings, check_alarms
from callbacks.heldout import HeldoutCallback, summarize
from callbacks.plateau import plateaued
from common.ranking import best_saved, best_text
from stats.intervals import accuracy_interval


def _records(answers: dict[str, str]) -> list[dict]:
    """Each question's samples: R right, W wrong, N no answer, U unsettled (graded wrong, and marked)."""
    return [
        {"id": qid, "sample": i, "correct": kind == "R", "pred": None if kind == "N" else "1", "n_tokens": 10}
        | ({"unsettled": True} if kind == "U" else {})
        for qid, kinds in answers.items()
        for i, kind in enumerate(kinds)
    ]


def test_unsettled_samples_are_left_out_of_the_accuracy_and_its_interval():
    entry = summarize(_records({"a": "RU", "b": "RW", "c": "UU"}), 40, None)
    # a: 1 of 1 graded, b: 1 of 2, c: none graded (out); counted wrong, it was 2 of 6 = 33.3%.
    assert entry["accuracy"] == pytest.approx(0.75) and entry["unsettled"] == 3
    assert entry["per_question"] == {"a": [1, 2, 0, 1], "b": [1, 2, 0, 0], "c": [0, 2, 0, 2]}
    assert (entry["low"], entry["high"]) == pytest.approx(accuracy_interval([(1, 1), (1, 2)]))
    assert (entry["questions"], entry["samples"]) == (3, 2)
    # None graded: no accuracy at all (tests/test_callbacks_heldout_ungraded.py).
    nothing = summarize(_records({"a": "UU"}), 40, None)
    assert (nothing["accuracy"], nothing["low"], nothing["high"], nothing["unsettled"]) == (
        None,
        None,
        None,
        2,
    )


def test_a_checkpoint_whose_samples_timed_out_keeps_the_best_and_stops_no_plateau():
    # Step 200 answers as step 100 does, but for two samples the grader ran out of time on (wrong answers, say).
    before = summarize(_records({f"q{i}": "RR" if i % 2 else "RW" for i in range(10)}), 100, None)
    busy = summarize(
        _records({f"q{i}": "RU" if i < 2 else "RR" if i % 2 else "RW" for i in range(10)}), 200, None
    )
    for entry in (before, busy):
        entry["saved"] = True
    assert before["accuracy"] == pytest.approx(0.75) and busy["accuracy"] == pytest.approx(0.8)
    assert best_saved([before, busy])["step"] == 200  # counted wrong (70%), step 100 was named instead
    assert best_text([before, busy]) == "best 80.0% at step 200"
    assert plateaued({"evaluations": [before, busy]}, 1) is None


def _evaluation(step: int, kinds: str, reward: float) -> dict:
    """40 questions answered alike."""
    return summarize(_records({f"q{i}": kinds for i in range(40)}), step, reward)


def test_timeouts_do_not_raise_the_reward_hacking_alarm_and_a_real_fall_still_does():
    peak = _evaluation(100, "RRRW", reward=2.0)
    # The same policy on a busy machine: two samples of each question unsettled. Counted wrong, every question fell
    # from 3/4 to 2/4 (p = 2 / 2**40) while the reward rose: an alarm raised by the grader's timeouts.
    busy = _evaluation(200, "RRUU", reward=3.0)
    assert check_alarms({"evaluations": [peak, busy], "alarms": []}, [], AlarmSettings()) == []
    fallen = _evaluation(300, "WWUU", reward=3.0)
    [alarm] = check_alarms({"evaluations": [peak, fallen], "alarms": []}, [], AlarmSettings())
    assert (alarm.kind, alarm.steps) == ("reward_hacking", (100, 300))
    assert "fell 75.0% -> 0.0%" in alarm.message


def test_unsettled_samples_have_answers_so_they_do_not_raise_the_unparseable_alarm():
    # One answer in four unreadable at both steps; over the graded samples alone, 1 in 2 at the busy one.
    peak = _evaluation(100, "NRRR", reward=1.0)
    busy = _evaluation(200, "NRUU", reward=1.0)
    assert busy["unparseable"] == peak["unparseable"] == 0.25
    assert check_alarms({"evaluations": [peak, busy], "alarms": []}, [], AlarmSettings()) == []


def test_the_log_line_counts_the_unsettled_samples(monkeypatch, caplog):
    monkeypatch.setattr(heldout, "Trainer", SimpleNamespace(log=lambda trainer, metrics: None))
    callback = HeldoutCallback.__new__(HeldoutCallback)
    entry = {**summarize(_records({"a": "RU", "b": "RW"}), 0, None), "seconds": 1.5}
    callback.history, callback.trainer = {"evaluations": [entry]}, None
    with caplog.at_level(logging.INFO, logger="callbacks.heldout"):
        callback._log(entry, SimpleNamespace(should_log=False), main=True)
    assert "accuracy 75.0% [" in caplog.text
    assert "(2 questions x 2 samples, 1 unsettled (left out), 1.5 s), no answer 0.0%" in caplog.text
