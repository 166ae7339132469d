"""A held-out evaluation the grader settled no sample of has a null accuracy in the history: the readers of the
history (stats.heldout_history, the curves, the model card, the merged model's card) show it as not measured instead
of refusing the file or drawing it as 0%. Histories without one read as before (tests/test_stats_heldout_curves.py).
"""

from __future__ import annotations

import json
import math

import pytest
from _stats_helpers import write_trainer_state
from test_stats_heldout_curves import evaluation, history, write_json

from recipes.export import merged_card
from recipes.model_card import heldout_lines
from stats.curves import draw_curves, main
from stats.heldout_history import load_heldout, read_heldout_history
from stats.trainer_state import load_trainer_state

NOTE = (
    "n/a: the grader settled none of that step's samples (a busy machine?), so it has no accuracy; python "
    "recipes/regrade.py OUTPUT_DIR/heldout/step-N.jsonl grades them again for python -m stats.compare"
)


@pytest.fixture
def run_dir(tmp_path):
    """Evaluations at 4 (40%), 8 (nothing graded) and 10 (30%)."""
    write_trainer_state(tmp_path / "checkpoint-10" / "trainer_state.json", list(range(1, 11)))
    evaluations = [evaluation(4, 0.4, 0.3, 0.5), evaluation(8, None, unparseable=0.25), evaluation(10, 0.3)]
    write_json(tmp_path / "heldout" / "history.json", history(evaluations))
    return tmp_path


def test_the_table_shows_the_step_as_not_measured(capsys, run_dir):
    assert read_heldout_history(run_dir / "heldout" / "history.json").evaluations[1].accuracy is None
    assert main([str(run_dir), "--out", str(run_dir / "curves.png")]) == 0
    lines = capsys.readouterr().out.splitlines()
    start = lines.index(
        f"held-out accuracy ({run_dir / 'heldout' / 'history.json'}; train reward: the mean logged since the previous evaluation):"
    )
    assert [row.split() for row in lines[start + 2 : start + 5]] == [
        ["4", "40.0%", "30.0%-50.0%", "0.0%", "-"],
        ["8", "n/a", "-", "25.0%", "-"],
        ["10", "30.0%", "-", "0.0%", "-"],
    ]
    assert lines[start + 5 : start + 7] == ["best 40.0% at step 4", NOTE]


def test_the_curve_has_a_gap_at_the_step(run_dir):
    source, state = load_trainer_state(run_dir)
    heldout = load_heldout(run_dir, state["log_history"], str(source))
    fig, _ = draw_curves(state["log_history"], [10], "run", heldout)
    panel = next(ax for ax in fig.axes if ax.get_title() == "Held-out accuracy")
    accuracy = next(line for line in panel.lines if line.get_label() == "held-out accuracy")
    assert list(accuracy.get_xdata()) == [4, 8, 10]
    ys = list(accuracy.get_ydata())
    assert ys[0] == 0.4 and math.isnan(ys[1]) and ys[2] == 0.3  # matplotlib leaves NaN out: a gap
    assert "best: step 4, 40.0%" in [t.get_text() for t in panel.get_legend().get_texts()]


def test_a_run_with_no_accuracy_at_all_still_draws_and_prints(capsys, tmp_path):
    write_trainer_state(tmp_path / "trainer_state.json", list(range(1, 11)))
    write_json(tmp_path / "heldout" / "history.json", history([evaluation(5, None), evaluation(10, None)]))
    assert main([str(tmp_path), "--out", str(tmp_path / "curves.png")]) == 0
    lines = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("held-out accuracy ("))
    assert [row.split()[:2] for row in lines[start + 2 : start + 4]] == [["5", "n/a"], ["10", "n/a"]]
    assert lines[start + 4 : start + 6] == [
        "no best yet: the grader settled no sample of any evaluation",
        NOTE,
    ]


def test_without_a_history_file_a_step_logged_without_accuracy_is_not_measured(capsys, tmp_path):
    path = write_trainer_state(tmp_path / "trainer_state.json", list(range(1, 11)))
    state = json.loads(path.read_text())
    state["log_history"] += [
        {"step": 5, "heldout/accuracy": 0.25, "heldout/unparseable": 0.0},
        {"step": 10, "heldout/unparseable": 0.125},  # what the callback logs for a step it graded nothing of
    ]
    path.write_text(json.dumps(state))
    assert main([str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    start = lines.index(
        f"held-out accuracy ({path} (heldout/* metrics); train reward: the mean logged since the previous evaluation):"
    )
    assert [row.split()[:2] for row in lines[start + 2 : start + 4]] == [["5", "25.0%"], ["10", "n/a"]]
    assert lines[start + 4] == "best 25.0% at step 5"


def test_the_model_card_says_the_last_step_has_no_accuracy():
    entry = {"questions": 50, "samples": 4}
    evaluations = [{**entry, "step": 20, "accuracy": 0.3}, {**entry, "step": 40, "accuracy": None}]
    text = "\n".join(heldout_lines({"evaluations": evaluations}, "outputs/run"))
    assert (
        "Held-out accuracy (50 questions x 4 samples, never trained on): n/a at step 40 (the grader settled none "
        "of its samples); best 30.0% at step 20." in text
    )
    assert "This adapter is the final one (step 40), not the best: `outputs/run/best` names the best" in text


def test_the_merged_models_card_says_the_step_has_no_accuracy(tmp_path):
    entry = {"questions": 50, "samples": 4}
    evaluations = [{**entry, "step": 0, "accuracy": None}, {**entry, "step": 20, "accuracy": None}]
    (tmp_path / "heldout.json").write_text(json.dumps({"format": 1, "evaluations": evaluations}))
    (tmp_path / "trainer_state.json").write_text(json.dumps({"global_step": 20}))
    card = merged_card("merged", "`run/checkpoint-20`", "gpt2", tmp_path)
    assert (
        "Held-out accuracy at step 20 (50 questions x 4 samples, never trained on): n/a (the grader settled none "
        "of its samples); the model before training: n/a (the grader settled none of its samples)." in card
    )
