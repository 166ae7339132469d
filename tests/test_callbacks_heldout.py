"""Held-out evaluation during training: the plan, the history, its summary of records, and the recipe checks."""

from __future__ import annotations

import json

import pytest
from _stats_helpers import clustered_wilson

from callbacks.errors import CheckpointError
from callbacks.heldout import summarize
from callbacks.heldout_history import empty_history, history_until, read_history
from common.ranking import best_text
from recipes.evaluation.live import share
from recipes.heldout import heldout_callback, heldout_plan
from recipes.recipe import RecipeError, load_recipe
from recipes.tasks.sources import DataError


def record(qid: str, sample: int, correct: bool, pred: str | None = "1") -> dict:
    return {"id": qid, "sample": sample, "correct": correct, "pred": pred, "n_tokens": 10 + sample}


def test_summary_counts_each_question_and_gives_a_question_clustered_interval():
    records = [
        record("a", 0, True), record("a", 1, True),
        record("b", 0, False, None), record("b", 1, True),
        record("c", 0, False), record("c", 1, False, None),
    ]  # fmt: skip
    entry = summarize(records, 40, reward=2.5)
    assert entry["accuracy"] == pytest.approx(3 / 6) and entry["unparseable"] == pytest.approx(2 / 6)
    assert (entry["questions"], entry["samples"], entry["mean_tokens"]) == (3, 2, 10.5)
    assert entry["per_question"] == {"a": [2, 2, 0, 0], "b": [1, 2, 1, 0], "c": [0, 2, 1, 0]}
    # Per-question accuracies 1, 1/2, 0: variance of the mean (1/4) / 3, so the 6 samples are worth 3 independent
    # ones (p(1-p) / that); Wilson's interval at 1.5 of 3 at t's critical value (2 df), as stats.compare gives it.
    low, high = clustered_wilson(1.5, 3, questions=3)
    assert entry["low"] == pytest.approx(low) and entry["high"] == pytest.approx(high)
    assert (entry["step"], entry["reward"], entry["records"]) == (40, 2.5, "heldout/step-40.jsonl")
    assert entry["unsettled"] == 0
    assert summarize([*records, {**record("d", 0, False), "unsettled": True}], 40, None)["unsettled"] == 1


def test_a_resumed_history_forgets_what_came_after_its_checkpoint():
    history = empty_history()
    history["evaluations"] = [{"step": s, "accuracy": 0.1} for s in (10, 20, 30)]
    history["alarms"] = [{"kind": "kl_spike", "steps": [10, 30]}]
    history["stopped"] = {"step": 30, "reason": "alarm"}
    cut = history_until(history, 20)
    assert [e["step"] for e in cut["evaluations"]] == [10, 20]
    assert cut["alarms"] == [] and cut["stopped"] is None
    assert history_until(history, 30) == history


def test_resuming_past_a_stop_keeps_the_stop_on_record(tmp_path):
    from recipes.model_card import heldout_lines
    from stats.heldout_history import heldout_table, read_heldout_history

    history = empty_history()
    history["evaluations"] = [{"step": s, "accuracy": 0.1, "questions": 50, "samples": 4} for s in (10, 20)]
    history["stopped"] = {"step": 20, "reason": "heldout/accuracy plateaued"}
    checkpoint = tmp_path / "checkpoint-20"
    checkpoint.mkdir()
    (checkpoint / "heldout.json").write_text(json.dumps(history))
    recipe = load_recipe("arith_tiny", ["heldout.enabled=true", f"trainer.output_dir={tmp_path}"])
    resumed = heldout_callback(recipe, None, str(checkpoint)).history
    # The stop no longer holds (a new alarm may stop the run again), but it is not forgotten.
    assert resumed["stopped"] is None and resumed["resumed_stops"] == [history["stopped"]]
    assert history_until(resumed, 10)["resumed_stops"] == []
    text = "\n".join(heldout_lines(resumed, str(tmp_path)))
    assert "The run was stopped at step 20 (heldout/accuracy plateaued) and then resumed past it." in text
    assert "ended early" not in text
    (tmp_path / "history.json").write_text(json.dumps(resumed))
    read = read_heldout_history(tmp_path / "history.json")
    assert read.stopped is None and read.resumed_stops == ((20, "heldout/accuracy plateaued"),)
    assert "stopped at step 20, then resumed past it: heldout/accuracy plateaued" in heldout_table(read)


def test_a_best_evaluation_without_a_checkpoint_names_the_best_checkpoint_too(tmp_path):
    from stats.heldout_history import heldout_table, read_heldout_history

    history = empty_history()
    history["evaluations"] = [
        {"step": 5, "accuracy": 0.17, "saved": False},
        {"step": 10, "accuracy": 0.13, "saved": True},
        {"step": 15, "accuracy": 0.10, "saved": False},
    ]
    assert best_text(history["evaluations"]) == (
        "best 17.0% at step 5 (not a checkpoint; the best checkpoint: step 10, 13.0%)"
    )
    assert best_text(history["evaluations"][1:]) == "best 13.0% at step 10"
    assert best_text([{"step": 5, "accuracy": 0.17}]) == "best 17.0% at step 5"  # written before "saved" was
    (tmp_path / "history.json").write_text(json.dumps(history))
    table = heldout_table(read_heldout_history(tmp_path / "history.json"))
    assert "best 17.0% at step 5 (not a checkpoint; the best checkpoint: step 10, 13.0%)" in table


def test_a_history_file_that_is_not_one_is_refused_naming_it(tmp_path):
    assert read_history(tmp_path / "heldout.json") is None
    bad = tmp_path / "heldout.json"
    bad.write_text("{not json")
    with pytest.raises(CheckpointError, match=r"heldout\.json is not a held-out history \(invalid JSON"):
        read_history(bad)
    bad.write_text(json.dumps({"evaluations": []}))
    with pytest.raises(CheckpointError, match="not a held-out history of format 1"):
        read_history(bad)


def test_every_process_makes_the_same_number_of_generate_calls():
    batches = [[i] for i in range(5)]
    shares = [share(batches, rank, 3) for rank in range(3)]
    assert [len(calls) for calls, _ in shares] == [2, 2, 2]
    assert [real for _, real in shares] == [2, 2, 1]
    assert sorted(b[0] for calls, real in shares for b in calls[:real]) == list(range(5))
    assert share([[0]], 1, 2) == ([[0]], 0)  # more processes than batches: a repeated, discarded call


def test_the_plan_draws_held_out_questions_never_trained_on_nor_tested():
    from recipes.data import load_split

    recipe = load_recipe("arith_tiny", ["heldout.enabled=true", "heldout.questions=60", "heldout.samples=3"])
    plan = heldout_plan(recipe)
    ids = [row["id"] for row in plan.rows]
    assert len(ids) == len(set(ids)) == 60 and sum(map(len, plan.batches())) == 180
    assert [len(b) for b in plan.batches()] == [128, 52]  # heldout.batch_size 128 from _base
    data = {**recipe.config["data"], "max_prompt_tokens": None}
    for split in ("train", "test"):
        assert not set(ids) & set(load_split(data, split=split)["id"])
    # A larger draw keeps the smaller one's questions, as evaluate.py's does.
    bigger = heldout_plan(load_recipe("arith_tiny", ["heldout.enabled=true", "heldout.questions=80"]))
    assert set(ids) <= {row["id"] for row in bigger.rows}
    assert plan.settings["split"] == "heldout" and plan.decoding.temperature == 1.0
    with pytest.raises(DataError, match=r"heldout\.questions is 500 but the heldout split .* has 200"):
        heldout_plan(load_recipe("arith_tiny", ["heldout.enabled=true", "heldout.questions=500"]))


def test_evaluations_must_fall_on_every_checkpoint():
    with pytest.raises(
        RecipeError, match=r"heldout\.every_steps \(30\) .* does not divide checkpoint\.every_steps"
    ):
        load_recipe("arith_tiny", ["heldout.enabled=true", "heldout.every_steps=30"])
    assert load_recipe("arith_tiny", ["heldout.enabled=true", "heldout.every_steps=50"])
    with pytest.raises(RecipeError, match=r"heldout\.alarm_alpha"):
        load_recipe("arith_tiny", ["heldout.alarm_alpha=2"])
    # Early stopping without evaluations to stop on: silently ignored before.
    with pytest.raises(
        RecipeError, match=r"heldout\.patience=2 stops the run .* heldout\.enabled=false \(in override"
    ):
        load_recipe("arith_tiny", ["heldout.enabled=false", "heldout.patience=2"])
    assert load_recipe("arith_tiny", ["heldout.enabled=false"])


def test_resume_puts_back_the_checkpoints_records_and_keeps_the_local_ones(tmp_path):
    """A new runtime gets every evaluated step's records from the checkpoint; a local file (graded again by
    recipes/regrade.py, say) is not replaced by the checkpoint's older copy."""
    from types import SimpleNamespace

    from callbacks.heldout import HeldoutCallback

    checkpoint, out = tmp_path / "checkpoint-4", tmp_path / "out"
    (checkpoint / "heldout").mkdir(parents=True)
    for step in (0, 2, 4):
        (checkpoint / "heldout" / f"step-{step}.jsonl").write_text(f'{{"step": {step}}}\n')
    (out / "heldout").mkdir(parents=True)
    (out / "heldout" / "step-2.jsonl").write_text('{"step": 2, "regraded": true}\n')
    history = {
        **empty_history(),
        "evaluations": [{"step": s, "records": f"heldout/step-{s}.jsonl"} for s in (0, 2, 4)],
    }
    callback = HeldoutCallback(None, out, 2, None, history=history, records_from=checkpoint)
    callback._restore_records(SimpleNamespace(is_world_process_zero=True))
    assert {f.name: f.read_text() for f in (out / "heldout").iterdir()} == {
        "step-0.jsonl": '{"step": 0}\n',
        "step-2.jsonl": '{"step": 2, "regraded": true}\n',
        "step-4.jsonl": '{"step": 4}\n',
    }
