"""The held-out panel of the training curves: accuracy with its 95% interval, the training reward beside it,
the best step, and the steps where an alarm fired or the run was stopped."""

from __future__ import annotations

import math
from collections import Counter

from matplotlib.lines import Line2D
from matplotlib.ticker import PercentFormatter
from matplotlib.transforms import offset_copy

from stats.heldout_history import Evaluation, HeldoutHistory, best_evaluation

NOT_LOGGED = "held-out accuracy\nnot logged (recipe section heldout)"
_ACCURACY, _REWARD, _ALARM = "tab:green", "tab:blue", "red"


# A label along a vertical line fits the panel's height; the full reason is in the run's log and history.json.
_MARK_CHARS = 40
_MARK_WIDTH = 9  # points between the labels of one step: a line of 7-point text and a gap


def _mark_step(ax, step: int, text: str, nth: int = 0) -> None:
    """A dashed red vertical line with its label written along it, cut to fit inside the panel; the ``nth`` label
    of one step goes beside the ones before it (three alarms at one step were written over each other)."""
    ax.axvline(step, color=_ALARM, linestyle="--", linewidth=1)
    label = ax.text(
        step,
        0.98,
        f" {text if len(text) <= _MARK_CHARS else text[: _MARK_CHARS - 3] + '...'}",
        transform=offset_copy(ax.get_xaxis_transform(), fig=ax.figure, x=-_MARK_WIDTH * nth, units="points"),
        color=_ALARM,
        rotation=90,
        ha="right",
        va="top",
        fontsize=7,
        clip_on=True,
    )
    label.set_in_layout(False)  # a long label must not squeeze the other panels


def _mark_best(ax, best: Evaluation, steps: list[int]) -> None:
    """A gold star at the best evaluation, named in the legend and labelled above it."""
    ha = "center"  # at the first or last step, centred, it ran into the axis's tick labels
    if len(set(steps)) > 1 and best.step in (min(steps), max(steps)):
        ha = "left" if best.step == min(steps) else "right"
    ax.plot(
        [best.step],
        [best.accuracy],
        marker="*",
        markersize=14,
        color="gold",
        markeredgecolor="black",
        linestyle="none",
        label=f"best: step {best.step}, {best.accuracy:.1%}" + ("" if best.saved else " (not a checkpoint)"),
    )
    ax.annotate(
        f"best {best.accuracy:.1%}",
        (best.step, best.accuracy),
        textcoords="offset points",
        xytext=(0, 9),
        ha=ha,
        fontsize=7,
    )


def draw_heldout(ax, heldout: HeldoutHistory | None, reward: dict[int, float]) -> list[str]:
    """Draw the held-out panel on ``ax``; the training reward goes on a twin y-axis so both read together.

    Args:
        ax: The panel.
        heldout: The run's held-out history, or None.
        reward: The training reward by step (``metric_series(log_history, "reward")``).

    Returns:
        ``["heldout/accuracy"]`` when there was nothing to draw (the panel then says how to turn it on),
        else [].
    """
    if heldout is None or not heldout.evaluations:
        ax.text(0.5, 0.5, NOT_LOGGED, ha="center", va="center", transform=ax.transAxes, color="gray")
        return ["heldout/accuracy"]
    evaluations = heldout.evaluations
    steps = [e.step for e in evaluations]
    # NaN for a step without an accuracy (nothing graded): matplotlib leaves a gap there, not a fall to 0%.
    accuracy = [math.nan if e.accuracy is None else e.accuracy for e in evaluations]
    ax.plot(steps, accuracy, marker="o", color=_ACCURACY, label="held-out accuracy")
    banded = [e for e in evaluations if e.low is not None and e.high is not None]
    if banded:
        ax.fill_between(
            [e.step for e in banded],
            [e.low for e in banded],
            [e.high for e in banded],
            color=_ACCURACY,
            alpha=0.2,
            label="95% interval over questions",
        )
    best = best_evaluation(evaluations)
    if best is not None:  # None: no evaluation has an accuracy (the grader settled none of their samples)
        _mark_best(ax, best, steps)
    marks = [(alarm.steps[1], f"alarm: {alarm.kind}") for alarm in heldout.alarms]
    marks += [(step, f"stopped, resumed: {reason}") for step, reason in heldout.resumed_stops]
    marks += [(heldout.stopped[0], f"stopped: {heldout.stopped[1]}")] if heldout.stopped else []
    at_step: Counter[int] = Counter()
    for step, text in marks:
        _mark_step(ax, step, text, at_step[step])
        at_step[step] += 1
    low, high = ax.get_ylim()  # an accuracy is never below 0% or above 100%, whatever the margins say
    ax.set_ylim(max(low, 0.0), min(high, 1.0))
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_ylabel("held-out accuracy", color=_ACCURACY)
    if reward:
        twin = ax.twinx()
        reward_steps = sorted(reward)
        twin.plot(reward_steps, [reward[s] for s in reward_steps], color=_REWARD, alpha=0.5, linewidth=1)
        twin.set_ylabel("training reward", color=_REWARD)
        # Draw the accuracy and its legend over the twin's reward, not under it.
        ax.set_zorder(twin.get_zorder() + 1)
        ax.patch.set_visible(False)
        # The caller builds the legend from ax alone: an empty line there names the twin's curve, and a copy of it
        # in the twin's coordinates, never drawn, is what the legend's "best" place then keeps clear of.
        ax.plot([], [], color=_REWARD, alpha=0.5, label="training reward (right axis)")
        ax.add_artist(Line2D(*twin.lines[0].get_data(), transform=twin.transData, visible=False))
    return []
