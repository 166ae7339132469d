"""pass@k of both models on the paired questions: the chance that at least one of k samples of a question is right.

With n samples per question of which c are right, the unbiased estimator (Chen et al. 2021, "Evaluating Large
Language Models Trained on Code") is 1 - C(n - c, k) / C(n, k): the share of the k-subsets of the n samples that
hold a right one. pass@1 is the accuracy. Reinforcement learning on verifiable rewards often raises pass@1 while
pass@k at large k gains less or falls: it makes answers the model could already find more likely more than it makes
new questions solvable. Reading pass@1 alone, a user cannot tell the two apart, so the comparison shows the curve.

k runs over the powers of two below the fewest samples any paired question has in either file, then that number. Each row's
difference is the mean of per-question differences, with a paired t interval over questions, as the accuracy's;
the rows are not corrected for being several, and the accuracy's test stays the primary answer. At large k most
per-question differences are 0, and with under 100 questions the t interval runs narrow there (simulated: 74-86%
coverage at k = 8 of 16 samples with 5-10 questions, 87-91% with 20, 90-96% with 50, 94-96% with 200): the table
says so.

The sentence that reads a shrinking gain needs evidence: the accuracy gain significant by the primary test and the
paired interval of the per-question drop (gain at k = 1 minus gain at the largest k) above 0. With no true
difference a bare "shrinks by half" rule fired in 10-36% of simulated comparisons; and pass@k nearing 100% for both
models narrows any gain, which the sentence names when it applies.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from math import comb

from stats.paired import t_interval
from stats.power import ALPHA

NARROW_BELOW = 100  # questions: fewer, and the intervals at large k run narrow (see the module)


@dataclass(frozen=True)
class PassAtK:
    """One k: both models' pass@k, their difference (tuned - baseline) and its paired 95% interval."""

    k: int
    baseline: float
    tuned: float
    difference: float
    ci95: tuple[float, float] | None
    drop_ci95: tuple[float, float] | None = None  # of the per-question gain at k = 1 minus the gain at this k


def pass_at_k(samples: int, correct: int, k: int) -> Fraction:
    """The unbiased pass@k of one question with ``correct`` of ``samples`` right, exactly.

    >>> pass_at_k(4, 1, 1), pass_at_k(4, 1, 2), pass_at_k(4, 0, 4), pass_at_k(4, 1, 4)
    (Fraction(1, 4), Fraction(1, 2), Fraction(0, 1), Fraction(1, 1))
    """
    if not 1 <= k <= samples:
        raise ValueError(f"pass@k needs 1 <= k <= samples; got k = {k} with {samples} samples.")
    return 1 - Fraction(comb(samples - correct, k), comb(samples, k))


def pass_at_k_curve(
    baseline: dict[str, tuple[int, int]], tuned: dict[str, tuple[int, int]], ids: list[str]
) -> list[PassAtK]:
    """pass@k for k = 1, 2, 4, ... and the fewest samples of a paired question (all of them); empty with one sample.

    Args:
        baseline, tuned: Question id -> (correct samples, total samples), as ``ModelRecords.counts``.
        ids: The paired question ids.
    """
    fewest = min(counts[q][1] for counts in (baseline, tuned) for q in ids)
    if fewest < 2:
        return []
    rows, first = [], None
    for k in [2**i for i in range(fewest.bit_length()) if 2**i < fewest] + [fewest]:
        before = [pass_at_k(baseline[q][1], baseline[q][0], k) for q in ids]
        after = [pass_at_k(tuned[q][1], tuned[q][0], k) for q in ids]
        diffs = [a - b for a, b in zip(after, before)]
        first = first or diffs
        rows.append(
            PassAtK(
                k=k,
                baseline=float(sum(before) / len(ids)),
                tuned=float(sum(after) / len(ids)),
                difference=float(sum(diffs) / len(ids)),
                ci95=t_interval(diffs),
                drop_ci95=t_interval([one - d for one, d in zip(first, diffs)]) if k > 1 else None,
            )
        )
    return rows


def pass_at_k_lines(rows: list[PassAtK], questions: int, primary_p: float | None) -> list[str]:
    """The report's pass@k table; nothing when each question has one sample.

    Args:
        rows: From `pass_at_k_curve`.
        questions: How many paired questions the rows are over.
        primary_p: The accuracy difference's primary p-value (None when undefined).
    """
    if not rows:
        return []
    lines = [
        (
            "pass@k (the chance that at least one of k samples is right; unbiased estimator; 95% CI: paired t over "
            "questions, not corrected across k)"
        ),
        f"  {'k':>4}  {'baseline':>8}  {'tuned':>8}  {'difference':>11}  95% CI",
    ]
    for r in rows:
        ci = f"[{100 * r.ci95[0]:+.1f}, {100 * r.ci95[1]:+.1f}]" if r.ci95 else "undefined"
        lines.append(
            f"  {r.k:>4}  {100 * r.baseline:>7.1f}%  {100 * r.tuned:>7.1f}%  {100 * r.difference:>+10.1f}   {ci}"
        )
    if questions < NARROW_BELOW and len(rows) > 2:
        lines.append(
            f"  With {questions} questions (under {NARROW_BELOW}) the intervals at large k may run narrow (per-question "
            "pass@k differences cluster at 0 or 1 there): read them as rough."
        )
    first, last = rows[0], rows[-1]
    shrinks = primary_p is not None and primary_p < ALPHA and first.difference > 0 and last.k > 1
    if shrinks and last.drop_ci95 is not None and last.drop_ci95[0] > 0:
        full = max(last.baseline, last.tuned) >= 0.9
        lines.append(
            f"  The gain at k = 1 ({100 * first.difference:+.1f} points) shrinks to {100 * last.difference:+.1f} at "
            f"k = {last.k} (the drop's 95% CI [{100 * last.drop_ci95[0]:+.1f}, {100 * last.drop_ci95[1]:+.1f}]): the "
            f"tuned model gains most on questions the baseline also solves within {last.k} samples, less on new ones"
            + (
                f"; with {last.k} samples the baseline solves more questions"
                if last.ci95 is not None and last.ci95[1] < 0
                else ""
            )
            + (f" (and pass@{last.k} near 100% leaves little room for any gain)." if full else ".")
        )
    return lines


def pass_at_k_json(rows: list[PassAtK]) -> list[dict]:
    """The ``pass_at_k`` rows of ``--json``."""
    return [
        {
            "k": r.k,
            "baseline": r.baseline,
            "tuned": r.tuned,
            "difference": r.difference,
            "ci95": list(r.ci95) if r.ci95 else None,
            "drop_ci95": list(r.drop_ci95) if r.drop_ci95 else None,
        }
        for r in rows
    ]
