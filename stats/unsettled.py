"""Samples whose grade was never settled: how many each file holds, and how far they could move the difference.

recipes/evaluate.py marks a sample ``"unsettled": true`` when the grader ran out of time comparing its answer with
the gold, even when asked again (a busy machine, or an answer too costly to compare): its ``correct`` is false for
want of a verdict. stats.compare counts it as wrong, as the file does, and warns: a busy machine during one
model's evaluation lowers that model's accuracy alone. Whatever the true grades, each unsettled sample can only
raise its model's accuracy, so the difference (tuned - baseline) lies between two bounds: every baseline
unsettled sample correct, and every tuned one correct.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

from stats.records import ModelRecords

if TYPE_CHECKING:  # stats.analysis builds its Comparison with count_unsettled below
    from stats.analysis import Comparison


@dataclass(frozen=True)
class Unsettled:
    """The unsettled samples of both files on the paired questions.

    Attributes:
        baseline: Unsettled samples in the baseline file.
        tuned: Unsettled samples in the tuned file.
        difference_range: The difference (tuned - baseline) were every baseline unsettled sample correct, and were
            every tuned one correct: the true difference lies between, whatever their grades.
    """

    baseline: int
    tuned: int
    difference_range: tuple[float, float]
    # Training steps of held-out files holding some: evaluate.py refuses those files, so they get another fix.
    heldout_steps: tuple[int, ...] = ()

    def fix(self) -> str:
        """How to grade them again: re-run evaluate.py, which held-out files (written by training) do not allow."""
        if not self.heldout_steps:
            return (
                "re-run the recipes/evaluate.py command that wrote each such file when the machine is less busy: it "
                "grades them again from their saved completions, generating nothing"
            )
        steps = ", ".join(map(str, self.heldout_steps))
        return (
            f"held-out records (training step {steps}) are not graded again (evaluate.py refuses their files): "
            f"evaluate the checkpoint into a new file, recipes/evaluate.py --split heldout --adapter "
            f"OUTPUT_DIR/checkpoint-{self.heldout_steps[-1]}, and compare those"
        )


def headroom(model: ModelRecords, ids: list[str]) -> tuple[int, Fraction]:
    """Unsettled samples on ``ids``, and the accuracy (mean of per-question accuracies) they would add if correct.

    >>> from pathlib import Path
    >>> records = [{"id": "a", "sample": 0, "correct": False, "unsettled": True}]
    >>> headroom(ModelRecords(Path("f.jsonl"), records, {"a": (1, 2), "b": (0, 1)}), ["a", "b"])
    (1, Fraction(1, 4))
    """
    wanted = set(ids)
    per_question: dict[str, int] = {}
    for record in model.records:
        if record.get("unsettled") and record["id"] in wanted:
            per_question[record["id"]] = per_question.get(record["id"], 0) + 1
    gain = sum((Fraction(n, model.counts[qid][1]) for qid, n in per_question.items()), Fraction(0))
    return sum(per_question.values()), gain / len(ids)


def count_unsettled(
    baseline: ModelRecords, tuned: ModelRecords, ids: list[str], difference: float
) -> Unsettled:
    """Both files' unsettled samples on the paired questions, and the range they leave the difference in."""
    base_n, base_gain = headroom(baseline, ids)
    tuned_n, tuned_gain = headroom(tuned, ids)
    steps = sorted(
        {
            r["step"]
            for m in (baseline, tuned)
            for r in m.records
            if r.get("unsettled") and r.get("step") is not None
        }
    )
    return Unsettled(
        base_n, tuned_n, (difference - float(base_gain), difference + float(tuned_gain)), tuple(steps)
    )


def unsettled_warning(comparison: Comparison) -> str | None:
    """The warning stats.compare logs when either file holds unsettled samples on the paired questions; None when
    neither does."""
    unsettled = comparison.unsettled
    if not unsettled.baseline and not unsettled.tuned:
        return None
    files = "; ".join(
        f"{model.path}: {n} of {model.samples} samples"
        for model, n in ((comparison.baseline, unsettled.baseline), (comparison.tuned, unsettled.tuned))
    )
    low, high = (100 * x for x in unsettled.difference_range)
    return (
        f'Some samples were never graded: the grader ran out of time on them ("unsettled": true; {files}). They '
        f"count as wrong, so the comparison may be biased against the model evaluated on a busier machine: "
        f"whatever their grades, the difference lies between {low:+.1f} and {high:+.1f} points. To settle them, "
        f"{unsettled.fix()}."
    )
