"""Paired per-question comparison of two held-out evaluations, for the alarms: the sign-flip test of the change in
each question's share of correct (or unparseable) samples, over the questions both evaluated."""

from __future__ import annotations

from fractions import Fraction

from stats.paired import sign_flip

# Columns of history["evaluations"][i]["per_question"][id] = [correct, samples, unparseable, unsettled]; histories
# written before unsettled samples were counted have the first three.
CORRECT, _SAMPLES, UNPARSEABLE, _UNSETTLED = 0, 1, 2, 3


def _over(row: list[int], column: int) -> int:
    """The samples a question's share is over: the correct share over the graded ones (an unsettled sample is no
    wrong answer), the unparseable share over all (an unsettled sample has an answer)."""
    return row[_SAMPLES] - (row[_UNSETTLED] if column == CORRECT and len(row) > _UNSETTLED else 0)


def _shares(evaluation: dict, ids: list[str], column: int) -> list[Fraction]:
    """Exact per-question share (correct over graded samples, or unparseable over samples) for the given ids."""
    table = evaluation["per_question"]
    return [Fraction(table[qid][column], _over(table[qid], column)) for qid in ids]


def paired_change(
    earlier: dict, latest: dict, column: int, *, references: int
) -> tuple[float, float, int] | None:
    """Sign-flip test of latest - earlier per-question shares over the questions both evaluated.

    ``earlier`` was picked as the most extreme of ``references`` evaluations, which makes a change against it
    look larger than it is; the p-value is Bonferroni-corrected for that choice (times ``references``).

    Returns:
        ``(mean difference, corrected p-value, questions)``, or None when no question is shared or no
        difference is nonzero (the test is undefined and nothing changed).
    """
    ids = sorted(
        qid
        for qid, row in latest["per_question"].items()
        if _over(row, column) > 0 and _over(earlier["per_question"].get(qid, (0, 0, 0)), column) > 0
    )
    if not ids:
        return None
    diffs = [new - old for new, old in zip(_shares(latest, ids, column), _shares(earlier, ids, column))]
    result = sign_flip(diffs)
    if result.p_value is None:
        return None
    return result.statistic, min(1.0, result.p_value * references), len(ids)
