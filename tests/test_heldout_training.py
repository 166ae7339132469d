"""Held-out evaluation in real training runs of the tiny arithmetic model: a planted hack trips the alarm and
ends the run; records per evaluation in evaluate.py's schema; a resumed run keeps the history and the best."""

from __future__ import annotations

import json
import logging
import re
import subprocess

import pytest
from _in_process import run_recipe

from callbacks.fetch import fetch_checkpoint
from common.ranking import best_text
from recipes.recipe import load_recipe
from recipes.run import train
from stats.compare import compare
from stats.records import load_records

pytestmark = pytest.mark.slow
# 50 questions x 4 samples every 10 steps: about a second per evaluation on a CPU.
HELDOUT = ["heldout.enabled=true", "heldout.questions=50", "heldout.samples=4", "checkpoint.every_steps=10"]


def arith_tiny(out, *overrides: str) -> list[str]:
    return [f"trainer.output_dir={out}", *HELDOUT, "trainer.logging_steps=5", *overrides]


def launch(out, *overrides: str) -> subprocess.CompletedProcess:
    # In this process (tests/test_recipes_train.py launches runs): about 15 s less per run.
    result = run_recipe("arith_tiny", *arith_tiny(out, *overrides))
    assert result.returncode == 0, result.stderr[-4000:]
    return result


def on_lines_of_their_own(stderr: str, text: str) -> list[str]:
    """The log lines holding ``text``, each as a terminal shows the start of its line: what follows the last carriage
    return before it (a line written onto a running progress bar keeps the bar's text in front)."""
    lines = [line for line in stderr.split("\n") if text in line]
    return [line[line.rfind("\r", 0, line.find(text)) + 1 :] for line in lines]


LOG_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (INFO|WARNING) callbacks\.heldout: ")


def history(out) -> dict:
    return json.loads((out / "heldout" / "history.json").read_text())


def test_a_planted_hack_trips_the_alarm_and_the_switch_ends_the_run(tmp_path, caplog):
    out = tmp_path / "hack"
    hack = ["rewards=[{path: '_plugins:planted_hack'}]", "trainer.learning_rate=1e-3", "callbacks=[]"]
    # 100 questions: at 50 the fall to step 70 (11.0% -> 2.0%) tested at p = 0.002 against alpha 0.01; at 100,
    # 10.2% -> 1.2% at p = 1e-5, room for a machine whose run takes another path
    hack.append("heldout.questions=100")
    result = launch(out, *hack, "trainer.max_steps=100", "heldout.stop_on_alarm=true")
    alarms = history(out)["alarms"]
    assert [a["kind"] for a in alarms] == ["reward_hacking"], result.stderr[-3000:]
    stopped = history(out)["stopped"]
    first, last = alarms[0]["steps"]
    assert stopped["step"] == last < 100 and "reward_hacking" in stopped["reason"]
    assert "ALARM reward_hacking (heldout/accuracy): heldout/accuracy fell" in result.stderr
    assert f"Ending the run at step {last}, saving checkpoint-{last} first" in result.stderr
    # Each held-out result and alarm starts a line of its own, not the progress bar's line.
    for text in ("held-out step", "ALARM reward_hacking"):
        lines = on_lines_of_their_own(result.stderr, text)
        assert lines and all(LOG_LINE.match(line) for line in lines), lines
    # The checkpoint at the stop was saved and carries the history (with the stop) that its manifest covers.
    saved = json.loads((out / f"checkpoint-{last}" / "heldout.json").read_text())
    assert saved["stopped"] == stopped
    manifest = json.loads((out / f"checkpoint-{last}" / "manifest.json").read_text())
    assert "heldout.json" in manifest["files"]
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == last
    # Held-out accuracy fell while the planted reward rose: what the alarm saw, in the logs.
    held = {e["step"]: e["accuracy"] for e in history(out)["evaluations"]}
    assert held[last] < held[first]
    logged = [e for e in state["log_history"] if "heldout/accuracy" in e]
    assert [e["step"] for e in logged] == sorted(held) and all(
        e["heldout/accuracy_low"] < e["heldout/accuracy"] < e["heldout/accuracy_high"] for e in logged
    )
    # Started again (here, in this process: nothing trains), the stopped run stays stopped.
    with caplog.at_level(logging.INFO, logger="recipes.run"):
        train(
            load_recipe(
                "arith_tiny", arith_tiny(out, *hack, "trainer.max_steps=100", "heldout.stop_on_alarm=true")
            )
        )
    assert f"already finished at step {last} (ended early: alarm reward_hacking" in caplog.text
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == last


def test_records_per_evaluation_and_a_resumed_run_keeps_the_history(tmp_path):
    out = tmp_path / "run"
    small = "trainer.per_device_train_batch_size=16"  # 2 prompts a step, not 8: what is tested is the records
    launch(out, "trainer.max_steps=20", small)
    first = history(out)
    assert [e["step"] for e in first["evaluations"]] == [0, 10, 20]  # 0: the model before training
    for step in (0, 10, 20):
        records = load_records(
            out / "heldout" / f"step-{step}.jsonl"
        )  # evaluate.py's schema, as stats reads it
        assert len(records.counts) == 50 and {samples for _, samples in records.counts.values()} == {4}
    compare(out / "heldout" / "step-10.jsonl", out / "heldout" / "step-20.jsonl")  # any two steps compare
    # A launch that crashed after evaluating past its last checkpoint left records this run will not make again.
    stale = (out / "heldout" / "step-20.jsonl").read_text()
    (out / "heldout" / "step-25.jsonl").write_text(stale)
    result = launch(out, "trainer.max_steps=30", small)
    resumed = history(out)
    assert [e["step"] for e in resumed["evaluations"]] == [0, 10, 20, 30]
    assert not (out / "heldout" / "step-25.jsonl").exists() and "held-out records file(s)" in result.stderr
    (moved,) = (out / "heldout" / "superseded").glob("*/step-25.jsonl")
    assert moved.read_text() == stale and (out / "heldout" / "step-20.jsonl").read_text() == stale
    assert resumed["evaluations"][:3] == first["evaluations"]
    state = json.loads((out / "trainer_state.json").read_text())
    best = max((e for e in resumed["evaluations"] if e["saved"]), key=lambda e: (e["accuracy"], -e["step"]))
    assert state["best_model_checkpoint"] == str(out / f"checkpoint-{best['step']}")
    assert state["best_metric"] == best["accuracy"]
    assert (out / f"checkpoint-{best['step']}").is_dir()  # local rotation keeps the best
    # Each checkpoint's manifest records its held-out accuracy, and OUTPUT_DIR/best names the best one.
    manifest = json.loads((out / "checkpoint-30" / "manifest.json").read_text())
    assert manifest["heldout"]["accuracy"] == resumed["evaluations"][3]["accuracy"]
    assert json.loads((out / "best").read_text())["checkpoint"] == f"checkpoint-{best['step']}"
    assert fetch_checkpoint(out / "best") == out / f"checkpoint-{best['step']}"


def test_evaluations_between_checkpoints_are_marked_and_best_names_a_saved_one(tmp_path):
    """The log, card and curves called an evaluation with no checkpoint "best", while OUTPUT_DIR/best could only
    name a saved one."""
    out = tmp_path / "between"
    overrides = [
        "trainer.max_steps=4",
        "checkpoint.every_steps=4",
        "heldout.every_steps=2",
    ]
    train(load_recipe("gsm8k_tiny", [f"trainer.output_dir={out}", *overrides]))
    evaluations = history(out)["evaluations"]
    assert [(e["step"], e["saved"]) for e in evaluations] == [(0, False), (2, False), (4, True)]
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["best_model_checkpoint"] == str(out / "checkpoint-4")
    assert f"; {best_text(evaluations)}." in (out / "README.md").read_text()


def test_a_held_out_plateau_ends_the_run_after_patience_evaluations(tmp_path):
    # The random tiny model never answers right: no evaluation after the first beats it.
    out = tmp_path / "plateau"
    result = run_recipe(
        "gsm8k_tiny", f"trainer.output_dir={out}", "trainer.max_steps=16", "checkpoint.every_steps=4",
        "heldout.patience=2",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    stopped = history(out)["stopped"]
    # Nothing beats the model before training (step 0): two evaluations later, the run ends.
    assert stopped["step"] == 8 and stopped["reason"].startswith("heldout/accuracy plateaued")
    assert "did not beat its best 0.0% at step 0" in stopped["reason"]
    assert [e["step"] for e in history(out)["evaluations"]] == [0, 4, 8]
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 8
    assert "Ending the run at step 8, saving checkpoint-8 first" in result.stderr
    assert "held-out step 0: accuracy 0.0%" in result.stderr and "the model before training" in result.stderr


def test_a_run_resumed_from_the_store_elsewhere_still_has_every_steps_records(tmp_path):
    """Before, the records stayed on the machine that evaluated: after a lost runtime, the new folder had no
    step-0.jsonl, and `stats.compare step-0.jsonl step-N.jsonl` (the README's question) could not be asked."""
    out, store = tmp_path / "run", tmp_path / "store"
    overrides = [f"trainer.output_dir={out}", f"checkpoint.uri={store}", "checkpoint.every_steps=2"]
    train(load_recipe("gsm8k_tiny", [*overrides, "trainer.max_steps=4"]))
    made = {step: (out / "heldout" / f"step-{step}.jsonl").read_bytes() for step in (0, 2, 4)}
    assert (store / "checkpoint-4" / "heldout" / "step-0.jsonl").read_bytes() == made[0]
    subprocess.run(["rm", "-r", str(out)], check=True)  # the lost runtime's disk
    train(load_recipe("gsm8k_tiny", [*overrides, "trainer.max_steps=6"]))
    assert {step: (out / "heldout" / f"step-{step}.jsonl").read_bytes() for step in (0, 2, 4)} == made
    compare(out / "heldout" / "step-0.jsonl", out / "heldout" / "step-6.jsonl")
