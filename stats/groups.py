"""The paired difference per subject and per level, for records that carry them (MATH does; GSM8K does not).

A breakdown by a key (``subject`` or ``level``) is made only when every record of the paired questions, in
both files, carries that key: a question's subject is a property of the question, so both files must agree
on it, sample by sample. Each group is analysed by `stats.analysis.compare_models` on its own questions, so a
group gets exactly the accuracies, interval and paired tests of the overall comparison. The primary (sign-flip)
p-values of all groups, subjects and levels together, are Holm-adjusted: together they are one family of
tests a reader scans for a significant group.
"""

from __future__ import annotations

from dataclasses import dataclass

from statsmodels.stats.multitest import multipletests

from stats.analysis import PRIMARY_TEST, Comparison, compare_models
from stats.records import InputError, ModelRecords, Pairing

GROUP_KEYS = ("subject", "level")
# A paired interval or test needs at least two questions; a one-question group is shown without either.
MIN_QUESTIONS = 2


@dataclass(frozen=True)
class GroupResult:
    """One group's comparison.

    Attributes:
        key: ``"subject"`` or ``"level"``.
        value: The subject name, the level (1-5), or None for an unknown level.
        comparison: The full comparison restricted to the group's questions.
        p_holm: The primary p-value after Holm's correction, or None when there is no p-value.
        reason: Why the group has no p-value, when it has none.
    """

    key: str
    value: str | int | None
    comparison: Comparison
    p_holm: float | None
    reason: str | None

    @property
    def label(self) -> str:
        if self.key == "level":
            return "level unknown" if self.value is None else f"Level {self.value}"
        return str(self.value)

    @property
    def questions(self) -> int:
        return len(self.comparison.ids)

    @property
    def p_value(self) -> float | None:
        """The primary test's raw p-value (None for groups too small to test)."""
        return _primary_p(self.comparison)


@dataclass(frozen=True)
class GroupBreakdown:
    """The per-group comparisons.

    Attributes:
        results: Subjects (alphabetical), then levels (ascending, unknown last).
        skipped: Key -> why the breakdown by that key is not shown (some records lack it).
        corrected: How many p-values the Holm correction covered.
    """

    results: tuple[GroupResult, ...]
    skipped: dict[str, str]
    corrected: int

    def by(self, key: str) -> list[GroupResult]:
        return [g for g in self.results if g.key == key]


def _line(model: ModelRecords, index: int) -> int:
    return model.lines[index] if model.lines else index + 1


def _where(model: ModelRecords, index: int) -> str:
    return f"{model.path} line {_line(model, index)}"


def _file_labels(model: ModelRecords, key: str, wanted: set[str]) -> tuple[dict, dict, list[int]]:
    """Question id -> value and -> first record index; records of ``wanted`` questions lacking the key."""
    values: dict[str, object] = {}
    first: dict[str, int] = {}
    missing: list[int] = []
    for i, rec in enumerate(model.records):
        qid = rec["id"]
        if key not in rec:
            missing += [i] if qid in wanted else []
            continue
        if qid not in values:
            values[qid], first[qid] = rec[key], i
        elif rec[key] != values[qid]:
            raise InputError(
                f"{_where(model, i)}: question {qid!r} has {key} {rec[key]!r}, but {_where(model, first[qid])} "
                f"gives it {values[qid]!r}. A question has one {key} on every sample: fix the records (or "
                f"re-run the evaluation) so they agree."
            )
    return values, first, missing


def group_labels(
    baseline: ModelRecords, tuned: ModelRecords, ids: list[str]
) -> tuple[dict[str, dict[str, str | int | None]], dict[str, str]]:
    """Read each paired question's subject and level, checking that samples and files agree.

    Args:
        baseline: Baseline records.
        tuned: Tuned records.
        ids: The paired question ids.

    Returns:
        ``(labels, skipped)``: key -> {question id -> value} for each key every paired record carries, and
        key -> a note for each key some records carry and others lack. Keys no record carries are in neither.

    Raises:
        InputError: A question's subject or level differs between its samples or between the two files.
    """
    wanted = set(ids)
    labels: dict[str, dict[str, str | int | None]] = {}
    skipped: dict[str, str] = {}
    for key in GROUP_KEYS:
        (base, base_first, base_missing), (tuned_vals, tuned_first, tuned_missing) = (
            _file_labels(model, key, wanted) for model in (baseline, tuned)
        )
        for qid in sorted(wanted & base.keys() & tuned_vals.keys()):
            if base[qid] != tuned_vals[qid]:
                raise InputError(
                    f"Question {qid!r} has {key} {base[qid]!r} in {_where(baseline, base_first[qid])} but "
                    f"{tuned_vals[qid]!r} in {_where(tuned, tuned_first[qid])}: the two files disagree on the "
                    "question. Evaluate both models on the same dataset version."
                )
        if not base_missing and not tuned_missing:
            labels[key] = {qid: base[qid] for qid in ids}
        elif wanted & (base.keys() | tuned_vals.keys()):
            lacking = [
                f"{len(missing)} records of {model.path} (e.g. question {model.records[missing[0]]['id']!r}, "
                f"line {_line(model, missing[0])})"
                for model, missing in ((baseline, base_missing), (tuned, tuned_missing))
                if missing
            ]
            skipped[key] = (
                f"no per-{key} breakdown: '{key}' is missing from {' and '.join(lacking)}; the breakdown "
                f"needs it on every record of both files."
            )
    return labels, skipped


def _order(value: str | int | None) -> tuple:
    return (value is None, value if value is not None else 0)


def _primary_p(c: Comparison) -> float | None:
    # With one question the sign-flip "p = 1" only restates that two signs are possible: not a test.
    result = c.tests[PRIMARY_TEST]
    return result.p_value if result and len(c.ids) >= MIN_QUESTIONS else None


def _no_p_reason(c: Comparison) -> str | None:
    if len(c.ids) < MIN_QUESTIONS:
        return f"{len(c.ids)} question: too few for an interval or a test (needs at least {MIN_QUESTIONS})"
    result = c.tests[PRIMARY_TEST]
    return result.reason if result and result.p_value is None else None


def compare_groups(
    baseline: ModelRecords,
    tuned: ModelRecords,
    labels: dict[str, dict[str, str | int | None]],
    skipped: dict[str, str],
    *,
    seed: int = 0,
    resamples: int = 100_000,
) -> GroupBreakdown:
    """Compare the two models within each subject and each level.

    Args:
        baseline: Baseline records.
        tuned: Tuned records.
        labels: Key -> {question id -> value}, from `group_labels`.
        skipped: Key -> note, from `group_labels` (carried into the result for the report).
        seed: Seed of the sign-flip Monte Carlo fallback.
        resamples: Random sign assignments for that fallback.

    Returns:
        The per-group comparisons with Holm-adjusted primary p-values.
    """
    found: list[tuple[str, str | int | None, Comparison]] = []
    for key in GROUP_KEYS:
        members: dict[str | int | None, list[str]] = {}
        for qid, value in labels.get(key, {}).items():
            members.setdefault(value, []).append(qid)
        for value in sorted(members, key=_order):
            pairing = Pairing(ids=sorted(members[value]), baseline_only=[], tuned_only=[])
            found.append(
                (key, value, compare_models(baseline, tuned, pairing, seed=seed, resamples=resamples))
            )
    pvalues = [_primary_p(c) for _, _, c in found]
    tested = [i for i, p in enumerate(pvalues) if p is not None]
    adjusted = multipletests([pvalues[i] for i in tested], method="holm")[1] if tested else []
    holm = dict(zip(tested, (float(p) for p in adjusted)))
    results = tuple(
        GroupResult(key, value, c, holm.get(i), _no_p_reason(c)) for i, (key, value, c) in enumerate(found)
    )
    return GroupBreakdown(results=results, skipped=dict(skipped), corrected=len(tested))
