"""Put the statistics together: one `Comparison` of a baseline and a tuned model on paired questions.

Accuracy is the mean of per-question accuracies (each question weighs the same; with equal samples per
question this is the pooled correct / samples). Its 95% interval is a Wilson score interval over questions
(`stats.intervals`: at the question clusters' effective sample size when there are several samples per question),
so it stays within [0, 1]. The difference is the mean of per-question differences with a paired t
interval over questions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING

from stats import independent, intervals, paired
from stats.paired import TestResult
from stats.pass_at_k import PassAtK, pass_at_k_curve
from stats.power import PowerSummary, paired_power
from stats.records import ModelRecords, Pairing
from stats.samples import describe_samples, mismatched_samples_note
from stats.unsettled import Unsettled, count_unsettled

if TYPE_CHECKING:  # stats.groups builds on compare_models below
    from stats.groups import GroupBreakdown

PRIMARY_TEST = "sign_flip"
PRIMARY_REASON = (
    "the sign-flip permutation test is primary: under 'no difference' the two models are exchangeable on each "
    "question, so every per-question difference is equally likely to be + or -; its p-value is exact "
    "(Monte Carlo only beyond the enumeration budget), and it needs no normality (per-question differences of a few "
    "samples take only a handful of values, far from normal)."
)


@dataclass(frozen=True)
class ModelSummary:
    """One model's accuracy on the paired questions."""

    path: str
    accuracy: float
    ci95: tuple[float, float] | None
    questions: int
    samples: int
    correct: int
    samples_note: str


@dataclass(frozen=True)
class Comparison:
    """Everything the report, JSON output and plot show.

    Attributes:
        baseline: Baseline accuracy summary.
        tuned: Tuned accuracy summary.
        ids: Paired question ids.
        diffs: Exact per-question differences (tuned - baseline), aligned with ``ids``.
        difference: Mean per-question difference.
        difference_ci95: Paired t interval of the mean difference, or None when undefined.
        tests: Test name -> result (None when not applicable).
        power: Effect size and power summary.
        pairing: Which questions were paired or dropped.
        unsettled: The samples the grader never settled, counted wrong, and the range they leave the difference in.
        groups: The same comparison per subject and per level, when the records carry them (`stats.groups`).
        pass_at_k: Both models' pass@k for k = 1, 2, 4, ... (`stats.pass_at_k`); empty with one sample each.
        mismatched_samples: What sample counts that differ between the files do to the comparison, or None.
    """

    baseline: ModelSummary
    tuned: ModelSummary
    ids: list[str]
    diffs: list[Fraction]
    difference: float
    difference_ci95: tuple[float, float] | None
    tests: dict[str, TestResult | None]
    power: PowerSummary
    pairing: Pairing
    unsettled: Unsettled
    groups: GroupBreakdown | None = None
    pass_at_k: list[PassAtK] = field(default_factory=list)
    mismatched_samples: str | None = None

    @property
    def improved(self) -> int:
        return sum(d > 0 for d in self.diffs)

    @property
    def regressed(self) -> int:
        return sum(d < 0 for d in self.diffs)

    @property
    def unchanged(self) -> int:
        return sum(d == 0 for d in self.diffs)


def _summarize(model: ModelRecords, ids: list[str]) -> tuple[ModelSummary, list[Fraction]]:
    acc = paired.question_accuracies(model.counts, ids)
    summary = ModelSummary(
        path=str(model.path),
        accuracy=float(sum(acc) / len(acc)),
        ci95=intervals.accuracy_interval([model.counts[q] for q in ids]),
        questions=len(ids),
        samples=sum(model.counts[q][1] for q in ids),
        correct=sum(model.counts[q][0] for q in ids),
        samples_note=describe_samples(model, ids),
    )
    return summary, acc


def compare_models(
    baseline: ModelRecords, tuned: ModelRecords, pairing: Pairing, *, seed: int = 0, resamples: int = 100_000
) -> Comparison:
    """Compare two models on their paired questions.

    Args:
        baseline: Records of the model before fine-tuning.
        tuned: Records of the fine-tuned model.
        pairing: The questions to compare (from `stats.records.pair_questions`).
        seed: Seed of the sign-flip test's Monte Carlo fallback.
        resamples: Random sign assignments for that fallback.

    Returns:
        The full comparison.
    """
    ids = pairing.ids
    base_summary, base_acc = _summarize(baseline, ids)
    tuned_summary, tuned_acc = _summarize(tuned, ids)
    diffs = [t - b for t, b in zip(tuned_acc, base_acc)]
    difference = float(sum(diffs) / len(diffs))
    mismatched = mismatched_samples_note(baseline, tuned, ids)
    tests: dict[str, TestResult | None] = {
        "paired_t": paired.paired_t(diffs),
        "wilcoxon": paired.wilcoxon(diffs) if mismatched is None else paired.not_symmetric(),
        "sign_flip": paired.sign_flip(diffs, seed=seed, resamples=resamples),
        "mcnemar": paired.mcnemar(baseline.counts, tuned.counts, ids),
        "two_proportion_z": independent.two_proportion_z(
            tuned_summary.correct, tuned_summary.samples, base_summary.correct, base_summary.samples
        ),
        "welch_t": independent.welch_t(tuned_acc, base_acc),
    }
    return Comparison(
        baseline=base_summary,
        tuned=tuned_summary,
        ids=ids,
        diffs=diffs,
        difference=difference,
        difference_ci95=paired.t_interval(diffs),
        tests=tests,
        power=paired_power(diffs),
        pairing=pairing,
        unsettled=count_unsettled(baseline, tuned, ids, difference),
        pass_at_k=pass_at_k_curve(baseline.counts, tuned.counts, ids),
        mismatched_samples=mismatched,
    )
