"""The one rule for a run's best held-out result: the highest accuracy, the earliest step on ties.

The ``best`` checkpoint pointer (callbacks/best.py), the reward-hacking alarm and the plateau stop
(callbacks/alarms.py, callbacks/plateau.py), the held-out log line (callbacks/heldout.py) and the curves
(stats/heldout_history.py) all pick through it, so they never name different steps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")


def best_by_accuracy(items: Iterable[T], accuracy_and_step: Callable[[T], tuple[float, int]]) -> T | None:
    """The item with the highest accuracy, the earliest step on ties; None when there is none.

    Args:
        items: Held-out evaluations or checkpoints, in any order.
        accuracy_and_step: An item's ``(accuracy, step)``.

    >>> best_by_accuracy([(300, 0.5), (100, 0.4), (200, 0.5)], lambda e: (e[1], e[0]))
    (200, 0.5)
    """

    def rank(item: T) -> tuple[float, int]:
        accuracy, step = accuracy_and_step(item)
        return accuracy, -step

    return max(items, key=rank, default=None)
