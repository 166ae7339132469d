"""Held-out accuracy in the training curves (stats.heldout_history, stats.heldout_curves, `python -m stats.curves`)."""

from __future__ import annotations

import json

import pytest
from _stats_helpers import write_trainer_state

from stats.curves import draw_curves, main
from stats.heldout_history import Evaluation, best_evaluation, load_heldout, read_heldout_history
from stats.records import InputError
from stats.trainer_state import load_trainer_state

ALARM_MESSAGE = "training reward rose 1.3 -> 2.0 while held-out accuracy fell 40.0% -> 20.0%"


def history(evaluations: list[dict], **extra) -> dict:
    return {"format": 1, "evaluations": evaluations, "alarms": [], "stopped": None, **extra}


def evaluation(step: int, accuracy: float, low=None, high=None, unparseable=0.0, reward=None) -> dict:
    return {
        "step": step,
        "accuracy": accuracy,
        "low": low,
        "high": high,
        "questions": 10,
        "samples": 4,
        "unparseable": unparseable,
        "mean_tokens": 17.0,
        "reward": reward,
        "records": f"heldout/step-{step}.jsonl",
        "per_question": {},
    }


def write_json(path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")


@pytest.fixture
def run_dir(tmp_path):
    """Ten logged steps, held-out evaluations at 4, 8 and 10 (the best at 4 and 8: 8 ties, 4 is earlier), and
    a reward-hacking alarm at 10 that stopped the run."""
    write_trainer_state(tmp_path / "checkpoint-10" / "trainer_state.json", list(range(1, 11)))
    alarm = {
        "kind": "reward_hacking",
        "metric": "heldout/accuracy",
        "steps": [8, 10],
        "message": ALARM_MESSAGE,
    }
    write_json(
        tmp_path / "heldout" / "history.json",
        history(
            [
                evaluation(8, 0.4, 0.3, 0.5, 0.05, 1.8),
                evaluation(4, 0.4, 0.25, 0.55, 0.1, 1.325),
                evaluation(10, 0.2, None, None, 0.5, None),
            ],
            alarms=[alarm],
            stopped={"step": 10, "reason": "alarm reward_hacking"},
        ),
    )
    return tmp_path


def test_best_is_the_highest_accuracy_and_the_earliest_step_on_ties():
    evaluations = [Evaluation(100, 0.2), Evaluation(300, 0.35), Evaluation(200, 0.35), Evaluation(400, 0.1)]
    assert best_evaluation(evaluations) == Evaluation(200, 0.35)
    assert best_evaluation([]) is None


def test_cli_draws_and_prints_the_history_file(capsys, run_dir, tmp_path):
    out = tmp_path / "curves.png"
    assert main([str(run_dir), "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    lines = capsys.readouterr().out.splitlines()
    history = run_dir / "heldout" / "history.json"
    start = lines.index(
        f"held-out accuracy ({history}; train reward: the mean logged since the previous evaluation):"
    )  # not the reward logged at that step, which a reader checking the log would expect
    header = lines[start + 1].split()
    assert header == ["step", "accuracy", "95%", "interval", "unparseable", "train", "reward"]
    assert [row.split() for row in lines[start + 2 : start + 5]] == [
        ["4", "40.0%", "25.0%-55.0%", "10.0%", "1.325"],
        ["8", "40.0%", "30.0%-50.0%", "5.0%", "1.800"],
        ["10", "20.0%", "-", "50.0%", "-"],
    ]
    assert lines[start + 5 :] == [
        "best 40.0% at step 4",
        f"alarm reward_hacking at step 10: {ALARM_MESSAGE}",
        "stopped at step 10: alarm reward_hacking",
        f"wrote {out}",
    ]


def test_panel_shows_accuracy_interval_reward_best_and_alarm(run_dir):
    source, state = load_trainer_state(run_dir)
    heldout = load_heldout(run_dir, state["log_history"], str(source))
    fig, missing = draw_curves(state["log_history"], [10], "run", heldout)
    assert "heldout/accuracy" not in missing
    titled = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in titled[:2]] == ["Reward", "Held-out accuracy"]  # beside the reward
    panel = titled[1]
    accuracy = next(line for line in panel.lines if line.get_label() == "held-out accuracy")
    assert list(accuracy.get_xdata()) == [4, 8, 10] and list(accuracy.get_ydata()) == [0.4, 0.4, 0.2]
    band = panel.collections[0].get_paths()[0].vertices
    assert band[:, 0].min() == 4 and band[:, 0].max() == 8  # step 10 has no interval
    assert band[:, 1].min() == pytest.approx(0.25) and band[:, 1].max() == pytest.approx(0.55)
    labels = [t.get_text() for t in panel.get_legend().get_texts()]
    assert {"best: step 4, 40.0%", "training reward (right axis)", "95% interval over questions"} <= set(
        labels
    )
    dashed = [line for line in panel.lines if line.get_linestyle() == "--"]
    assert [line.get_xdata()[0] for line in dashed] == [10, 10] and {line.get_color() for line in dashed} == {
        "red"
    }
    texts = [t.get_text() for t in panel.texts]
    assert texts == ["best 40.0%", " alarm: reward_hacking", " stopped: alarm reward_hacking"]
    # The alarm and the stop of step 10 stand side by side: they were written over each other.
    renderer = fig.canvas.get_renderer()
    alarm, stop = (t.get_window_extent(renderer) for t in panel.texts[1:])
    assert not alarm.overlaps(stop) and stop.x1 <= alarm.x0
    (twin,) = [ax for ax in fig.axes if ax.get_ylabel() == "training reward"]
    assert twin.get_position().bounds == panel.get_position().bounds
    assert len(twin.lines[0].get_xdata()) == 9  # every logged reward but step 2's NaN


def test_a_long_stop_reason_is_cut_to_fit_and_accuracy_stays_within_0_to_100(run_dir):
    """Accuracy 0% drew an axis down to -4%; a patience stop's reason overflowed its panel and squeezed the row."""
    reason = "no new best held-out accuracy in 3 evaluations (patience 3): best 0.0% at step 4"
    write_json(
        run_dir / "heldout" / "history.json",
        history(
            [evaluation(4, 0.0), evaluation(8, 0.0)],
            stopped={"step": 8, "reason": reason},
            resumed_stops=[
                {"step": 4, "reason": "alarm kl_spike"}
            ],  # an earlier stop the run was resumed past
        ),
    )
    source, state = load_trainer_state(run_dir)
    fig, _ = draw_curves(
        state["log_history"], [10], "run", load_heldout(run_dir, state["log_history"], str(source))
    )
    panel = next(ax for ax in fig.axes if ax.get_title() == "Held-out accuracy")
    (stop,) = [t for t in panel.texts if t.get_text().startswith(" stopped:")]
    assert [t.get_text() for t in panel.texts if "resumed" in t.get_text()] == [
        " stopped, resumed: alarm kl_spike"
    ]
    assert len(stop.get_text()) <= 41 and stop.get_text().endswith("...") and not stop.get_in_layout()
    low, high = panel.get_ylim()
    assert low >= 0 and high <= 1


def test_without_a_history_file_the_logged_metrics_are_used(capsys, tmp_path):
    path = write_trainer_state(tmp_path / "trainer_state.json", list(range(1, 11)))
    state = json.loads(path.read_text())
    state["log_history"] += [
        {"step": 5, "heldout/accuracy": 0.25, "heldout/accuracy_low": 0.1, "heldout/accuracy_high": 0.4},
        {"step": 10, "heldout/accuracy": 0.5, "heldout/unparseable": 0.125},
    ]
    path.write_text(json.dumps(state))
    assert main([str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    start = lines.index(
        f"held-out accuracy ({path} (heldout/* metrics); train reward: the mean logged since the previous evaluation):"
    )
    # reward: the mean logged since the previous evaluation (steps 1, 3, 4, 5: step 2 was NaN; then 6-10)
    assert [row.split() for row in lines[start + 2 : start + 4]] == [
        ["5", "25.0%", "10.0%-40.0%", "-", "1.325"],
        ["10", "50.0%", "-", "12.5%", "1.800"],
    ]
    assert lines[start + 4] == "best 50.0% at step 10"


def test_the_copy_in_a_newer_checkpoint_wins_over_an_older_history_file(run_dir):
    write_json(run_dir / "checkpoint-12" / "heldout.json", history([evaluation(12, 0.6)]))
    assert load_heldout(run_dir, [], "t").source == str(run_dir / "checkpoint-12" / "heldout.json")
    write_json(run_dir / "heldout" / "history.json", history([evaluation(12, 0.6)]))
    assert load_heldout(run_dir, [], "t").source == str(run_dir / "heldout" / "history.json")  # tie
    checkpoint = run_dir / "checkpoint-12"  # notebook 4 plots a fetched checkpoint folder
    assert load_heldout(checkpoint, [], "t").source == str(checkpoint / "heldout.json")


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json", "cannot read it as JSON"),
        (json.dumps({"format": 2, "evaluations": []}), 'expected a held-out history object with "format": 1'),
        (json.dumps(history({})), "'evaluations' and 'alarms' must be lists"),
        (json.dumps(history([{"step": 4, "accuracy": "high"}])), "evaluations[0].accuracy is 'high'"),
        (json.dumps(history([evaluation(4, 0.5, low=float("nan"))])), "evaluations[0].low is nan"),
        (json.dumps(history([{"step": "4", "accuracy": 0.5}])), "evaluations[0].step is '4'"),
        (json.dumps(history([], alarms=[{"kind": "x", "steps": [4]}])), "alarms[0] needs a 'kind' string"),
        (json.dumps(history([], stopped="yes")), "'stopped' must be null or"),
        (json.dumps(history([], resumed_stops=[{"step": 3}])), "'resumed_stops[0]' must be"),
    ],
    ids=["not-json", "format", "no-list", "accuracy", "nan", "step", "alarm", "stopped", "resumed"],
)
def test_a_bad_history_file_is_an_input_error_naming_it(capsys, run_dir, content, expected):
    path = run_dir / "heldout" / "history.json"
    path.write_text(content)
    with pytest.raises(InputError, match="delete it and the curves fall back") as err:
        read_heldout_history(path)
    assert str(err.value).startswith(f"{path}: ") and expected in str(err.value)
    assert main([str(run_dir)]) == 2
    assert capsys.readouterr().err == f"error: {err.value}\n"


def test_the_legend_keeps_clear_of_the_training_reward_and_the_best_label_of_the_axis(tmp_path):
    """The legend was placed from the panel's own lines alone and sat on the training reward (the twin axis's); a
    best at the last step was labelled across the right axis's tick labels ("best 28.5%3.0")."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from stats.heldout_curves import draw_heldout

    evaluations = [evaluation(s, 0.32 - s / 1000, 0.28, 0.33) for s in (2, 4, 6, 8, 10)]
    write_json(tmp_path / "heldout" / "history.json", history(evaluations))
    heldout = load_heldout(tmp_path, [{"step": s} for s in range(1, 11)], "run")
    fig = Figure(figsize=(5, 2))
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    draw_heldout(
        ax, heldout, {s: 1.0 + s / 10 for s in range(1, 11)}
    )  # rises from the panel's empty lower left
    ax.legend(fontsize=7)
    fig.canvas.draw()
    (twin,) = [a for a in fig.axes if a is not ax]
    reward = twin.lines[0].get_transform().transform_path(twin.lines[0].get_path())
    assert not reward.intersects_bbox(ax.get_legend().get_window_extent(), filled=False)
    (best,) = [t for t in ax.texts if t.get_text().startswith("best")]
    assert (
        best.get_text() == "best 31.8%" and best.get_ha() == "left"
    )  # the first step: clear of the left axis
