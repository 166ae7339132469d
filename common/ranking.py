"""The one rule for a run's best held-out result: the highest accuracy, the earliest step on ties.

The ``best`` checkpoint pointer (callbacks/best.py), the reward-hacking alarm and the plateau stop
(callbacks/alarms.py, callbacks/plateau.py), the held-out log line (callbacks/heldout.py) and the curves
(stats/heldout_history.py) all pick through it, so they never name different steps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")


def best_by_accuracy(
    items: Iterable[T], accuracy_and_step: Callable[[T], tuple[float | None, int]]
) -> T | None:
    """The item with the highest accuracy, the earliest step on ties; None when there is none.

    An item whose accuracy is None (an evaluation the grader settled none of the samples of: callbacks/heldout.py's
    ``summarize``) is never the best: nothing was measured there, and 0% would be a collapse that did not happen.

    Args:
        items: Held-out evaluations or checkpoints, in any order.
        accuracy_and_step: An item's ``(accuracy, step)``.

    >>> best_by_accuracy([(300, 0.5), (100, 0.4), (200, 0.5), (400, None)], lambda e: (e[1], e[0]))
    (200, 0.5)
    """

    def rank(item: T) -> tuple[float, int]:
        accuracy, step = accuracy_and_step(item)
        return accuracy, -step

    return max((item for item in items if accuracy_and_step(item)[0] is not None), key=rank, default=None)


def accuracy_text(accuracy: float | None) -> str:
    """An accuracy as logs, tables and cards show it; ``n/a`` for an evaluation that has none (nothing graded).

    >>> accuracy_text(0.235), accuracy_text(None)
    ('23.5%', 'n/a')
    """
    return "n/a" if accuracy is None else f"{accuracy:.1%}"


def _rank(evaluation: dict) -> tuple[float, int]:
    return evaluation["accuracy"], evaluation["step"]


def best_saved(evaluations: list[dict]) -> dict | None:
    """The best held-out evaluation that has a checkpoint (``saved``; histories written before it was recorded:
    every one): the one ``OUTPUT_DIR/best`` can name."""
    return best_by_accuracy([e for e in evaluations if e.get("saved", True)], _rank)


def best_text(evaluations: list[dict]) -> str:
    """``best 30.0% at step 20``, and the best checkpoint when the best evaluation has none (step 0, the model
    before training, or an evaluation between checkpoints).

    >>> best_text([{"step": 0, "accuracy": 0.2, "saved": False}, {"step": 10, "accuracy": 0.1}])
    'best 20.0% at step 0 (before training; the best checkpoint: step 10, 10.0%)'
    """
    best = best_by_accuracy(evaluations, _rank)
    if best is None:
        return "no best yet: the grader settled no sample of any evaluation"
    text = f"best {best['accuracy']:.1%} at step {best['step']}"
    if best.get("saved", True):
        return text
    saved = best_saved(evaluations)
    what = "before training" if best["step"] == 0 else "not a checkpoint"
    if saved is None:
        return f"{text} ({what}; no checkpoint evaluated yet)"
    return f"{text} ({what}; the best checkpoint: step {saved['step']}, {saved['accuracy']:.1%})"
