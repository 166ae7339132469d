"""The plateau rule of early stopping: ``heldout.patience`` held-out evaluations without a new best end a run.

Pure logic, like callbacks/alarms.py: the held-out callback calls ``plateaued`` after each held-out evaluation
with the history (evaluations in step order, the latest included) and does the stopping itself.
"""

from __future__ import annotations

from callbacks.heldout_history import resumed_at
from common.ranking import best_by_accuracy


def plateaued(history: dict, patience: int) -> str | None:
    """The stop reason when held-out accuracy has plateaued, else None.

    It has when none of the last ``patience`` evaluations beat (strictly higher accuracy) the best evaluation
    before them. Counted in evaluations, not steps, so the rule means the same whatever ``every_steps`` is; a run
    resumed past a stop (``resumed_at``) gets ``patience`` evaluations after it before it can stop again. An
    evaluation without an accuracy (the grader settled none of its samples) is not counted: it measured nothing, so
    it is no evaluation without improvement, and a latest one decides nothing.

    Args:
        history: The held-out history, evaluations in step order.
        patience: Evaluations without improvement to tolerate, at least 1.

    Returns:
        A one-line reason naming the metric, the best step and the steps without improvement, or None (also
        when there are no more than ``patience`` evaluations).

    Raises:
        ValueError: ``patience`` is not a positive integer.
    """
    if not isinstance(patience, int) or isinstance(patience, bool) or patience < 1:
        raise ValueError(f"patience must be a positive integer (evaluations), got {patience!r}")
    evaluations = history.get("evaluations") or []
    if evaluations and evaluations[-1]["accuracy"] is None:
        return None
    evaluations = [e for e in evaluations if e["accuracy"] is not None]
    since = resumed_at(history)
    if len(evaluations) <= patience or since is not None and evaluations[-patience]["step"] <= since:
        return None
    before, recent = evaluations[:-patience], evaluations[-patience:]
    best = best_by_accuracy(before, lambda e: (e["accuracy"], e["step"]))
    if any(e["accuracy"] > best["accuracy"] for e in recent):
        return None
    steps = ", ".join(str(e["step"]) for e in recent)
    return (
        f"heldout/accuracy plateaued: the last {patience} evaluations (steps {steps}) did not beat its best "
        f"{best['accuracy']:.1%} at step {best['step']}"
    )
