"""A held-out evaluation the grader settled no sample of (every one timed out: a very busy machine) has no accuracy.

It was summarised as accuracy 0.0, which passed for a measured collapse: logged to the trainer, made best when
nothing else was, counted as "no improvement" by the early stop and as a fall by the alarm. Now it is null, logged
with a warning saying why and what to do, left out of the trainer's log, the best choice, the plateau and the alarms.
"""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import pytest
from _callbacks_helpers import make_checkpoint, rated_checkpoint, trainer_objects
from test_callbacks_heldout_unsettled import _evaluation, _records

from callbacks import heldout
from callbacks.alarms import AlarmSettings, check_alarms
from callbacks.best import BEST_NAME
from callbacks.checkpoint_sync import SealCallback
from callbacks.errors import CheckpointError
from callbacks.heldout import HeldoutCallback, summarize
from callbacks.heldout_history import empty_history
from callbacks.manifest import heldout_at
from callbacks.plateau import plateaued
from callbacks.publish import RunInfo
from common.ranking import best_saved, best_text


def _entry(step: int, accuracy: float | None, saved: bool = True) -> dict:
    return {"step": step, "accuracy": accuracy, "saved": saved}


def test_an_evaluation_with_no_graded_sample_has_no_accuracy():
    entry = summarize(_records({"a": "UU", "b": "UU"}), 40, None)
    assert (entry["accuracy"], entry["low"], entry["high"], entry["unsettled"]) == (None, None, None, 4)
    assert entry["per_question"] == {"a": [0, 2, 0, 2], "b": [0, 2, 0, 2]}
    assert (entry["questions"], entry["samples"], entry["unparseable"]) == (2, 2, 0.0)


@pytest.fixture
def callback(tmp_path, monkeypatch):
    """A callback whose run has evaluated step 0 (50%, no checkpoint) and whose next evaluation grades nothing."""
    logged = []
    monkeypatch.setattr(
        heldout, "Trainer", SimpleNamespace(log=lambda trainer, metrics: logged.append(metrics))
    )
    monkeypatch.setattr(
        heldout, "evaluate_live", lambda trainer, plan, step: _records({"a": "UU", "b": "UU"})
    )
    history = empty_history()
    history["evaluations"] = [{**summarize(_records({"a": "RW", "b": "RW"}), 0, None), "saved": False}]
    made = HeldoutCallback(None, tmp_path, 10, AlarmSettings(), patience=1, history=history)
    made.attach(SimpleNamespace())
    made.logged = logged
    return made


def test_the_step_is_logged_as_having_no_accuracy_and_decides_nothing(callback, tmp_path, caplog):
    args, state, control = trainer_objects(tmp_path, 10)
    control.should_save = True
    with caplog.at_level(logging.INFO, logger="callbacks.heldout"):
        callback.on_step_end(args, state, control)
    # No heldout/accuracy 0.0 in the trainer's log (trainer_state.json, trackers): the step is a gap there.
    assert callback.logged == [{"heldout/unparseable": 0.0}]
    path = tmp_path / "heldout" / "step-10.jsonl"
    assert (
        "held-out step 10 has no accuracy: the grader settled none of its 4 samples, patient second grade "
        "included (a busy machine?). It is left out of the trainer's log, the best checkpoint's choice, the early "
        "stop and the alarms. Grade its records again once the machine is less busy: python recipes/regrade.py "
        f"{path}"
    ) in caplog.text
    assert (
        "held-out step 10: accuracy n/a (2 questions x 2 samples, 4 unsettled (left out), "
    ) in caplog.text
    assert (
        "accuracy 0.0%" not in caplog.text
        and "; best 50.0% at step 0 (before training; no checkpoint" in caplog.text
    )
    written = json.loads((tmp_path / "heldout" / "history.json").read_text())
    assert written["evaluations"][-1]["accuracy"] is None
    # Never the best checkpoint, and no plateau stop at patience 1 (0.0 after 50% stopped the run).
    assert (state.best_metric, state.best_global_step, state.best_model_checkpoint) == (None, None, None)
    assert written["stopped"] is None and not control.should_training_stop


def test_the_plateau_counts_only_evaluations_with_an_accuracy():
    assert plateaued({"evaluations": [_entry(10, 0.5), _entry(20, None)]}, 1) is None
    # Two evaluations since the best, one of them graded: patience 2 is not spent.
    assert plateaued({"evaluations": [_entry(10, 0.5), _entry(20, None), _entry(30, 0.4)]}, 2) is None
    assert plateaued({"evaluations": [_entry(10, None), _entry(20, 0.1)]}, 1) is None
    assert plateaued({"evaluations": [_entry(10, 0.5), _entry(20, None), _entry(30, 0.4)]}, 1) == (
        "heldout/accuracy plateaued: the last 1 evaluations (steps 30) did not beat its best 50.0% at step 10"
    )


def test_the_alarm_neither_fires_on_nor_compares_against_an_evaluation_without_accuracy():
    peak, nothing = _evaluation(100, "RRRW", reward=2.0), _evaluation(200, "UUUU", reward=3.0)
    assert check_alarms({"evaluations": [peak, nothing], "alarms": []}, [], AlarmSettings()) == []
    assert check_alarms({"evaluations": [nothing, peak], "alarms": []}, [], AlarmSettings()) == []
    fallen = _evaluation(300, "RWWW", reward=3.0)
    [alarm] = check_alarms({"evaluations": [peak, nothing, fallen], "alarms": []}, [], AlarmSettings())
    assert (alarm.kind, alarm.steps) == ("reward_hacking", (100, 300))
    # Step 200 is no reference the fall could be measured from, so it does not weigh on the correction.
    assert "fell 75.0% -> 25.0% (step 100 -> step 300" in alarm.message
    assert "over 40 questions, Bonferroni over 1 earlier evaluations)" in alarm.message


def test_the_best_is_chosen_among_evaluations_with_an_accuracy():
    evaluations = [_entry(0, 0.2, saved=False), _entry(10, None), _entry(20, 0.1)]
    assert best_saved(evaluations)["step"] == 20
    assert (
        best_text(evaluations)
        == "best 20.0% at step 0 (before training; the best checkpoint: step 20, 10.0%)"
    )
    assert best_text([_entry(0, 0.2, saved=False), _entry(10, None)]) == (
        "best 20.0% at step 0 (before training; no checkpoint evaluated yet)"
    )
    assert best_saved([_entry(10, None)]) is None
    assert best_text([_entry(0, None, saved=False), _entry(10, None)]) == (
        "no best yet: the grader settled no sample of any evaluation"
    )


def _ungraded_checkpoint(parent, step):
    folder = make_checkpoint(parent, step)
    entry = {"step": step, "accuracy": None, "low": None, "high": None, "questions": 10, "samples": 4}
    (folder / "heldout.json").write_text(json.dumps({"format": 1, "evaluations": [entry], "stopped": None}))
    return folder


def test_a_checkpoint_without_accuracy_has_a_null_one_in_its_manifest_and_is_never_best(tmp_path):
    out, seal = tmp_path / "out", SealCallback(RunInfo("tiny", "r: 1\n", "r1"))
    _ungraded_checkpoint(out, 1)
    assert heldout_at(out / "checkpoint-1", 1) == {
        "step": 1, "accuracy": None, "low": None, "high": None, "questions": 10, "samples": 4
    }  # fmt: skip
    seal.on_save(*trainer_objects(out, 1))
    assert not (out / BEST_NAME).exists()  # was: checkpoint-1, at 0.0%
    rated_checkpoint(out, 2, 0.3)
    seal.on_save(*trainer_objects(out, 2))
    _ungraded_checkpoint(out, 3)
    seal.on_save(*trainer_objects(out, 3))
    assert json.loads((out / BEST_NAME).read_text())["checkpoint"] == "checkpoint-2"


def test_a_manifest_still_refuses_an_evaluation_that_has_no_accuracy_field(tmp_path):
    folder = make_checkpoint(tmp_path, 4)
    (folder / "heldout.json").write_text(json.dumps({"format": 1, "evaluations": [{"step": 4}]}))
    with pytest.raises(
        CheckpointError, match=r"step 4 needs a numeric accuracy \(null when the grader settled"
    ):
        heldout_at(folder, 4)
