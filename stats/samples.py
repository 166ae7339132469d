"""How many samples each file holds on the paired questions: the report's note, and warnings for a file an
interrupted evaluation left short (stats.compare logs them)."""

from __future__ import annotations

from stats.records import ModelRecords


def describe_samples(model: ModelRecords, ids: list[str]) -> str:
    """Say how many samples per question a model has on the paired questions, naming uneven ones.

    Args:
        model: One model's records.
        ids: The paired question ids.

    Returns:
        E.g. ``"5 samples per question"`` or ``"3 to 5 samples per question (2 questions have fewer than
        5: 'a' (3), 'b' (4))"``.
    """
    sizes = {qid: model.counts[qid][1] for qid in ids}
    most = max(sizes.values())
    fewer = sorted((qid for qid, n in sizes.items() if n < most), key=lambda q: (sizes[q], q))
    if not fewer:
        return f"{most} sample{'s' if most != 1 else ''} per question"
    named = ", ".join(f"{qid!r} ({sizes[qid]})" for qid in fewer[:3]) + (", ..." if len(fewer) > 3 else "")
    return (
        f"{min(sizes.values())} to {most} samples per question ({len(fewer)} question"
        f"{'s have' if len(fewer) != 1 else ' has'} fewer than {most}: {named})"
    )


def unfinished_warning(model: ModelRecords) -> str | None:
    """A warning when a file holds fewer questions or samples than the evaluate.py run that wrote it planned
    (``planned_questions``, ``planned_samples``; the largest, after a rerun with more): an interrupted evaluation
    whose finished batches pair up evenly otherwise passes for a whole, smaller one."""
    planned = [(r.get("planned_questions"), r.get("planned_samples")) for r in model.records]
    questions = max((q for q, _ in planned if isinstance(q, int)), default=0)
    samples = max((k for _, k in planned if isinstance(k, int)), default=0)
    held_samples = max((n for _, n in model.counts.values()), default=0)
    if len(model.counts) >= questions and held_samples >= samples:
        return None
    return (
        f"{model.path} holds {len(model.counts)} of the {questions} questions (up to {held_samples} of "
        f"{samples} samples each) its recipes/evaluate.py run planned: was it interrupted? Re-running it with the "
        "same arguments completes it."
    )


def uneven_samples_warning(model: ModelRecords, ids: list[str]) -> str | None:
    """A warning when the paired questions of one file do not all have the same number of samples.

    Uneven counts usually mean an evaluation stopped part-way (``recipes/evaluate.py`` finishes it when re-run
    with the same arguments). The comparison still weighs every question the same, but a question with fewer
    samples has a noisier accuracy, and the sign-flip test's exchangeability is exact only with equal counts.

    Args:
        model: One model's records.
        ids: The paired question ids.

    Returns:
        The warning text, or None when every question has the same number of samples.
    """
    sizes = {qid: model.counts[qid][1] for qid in ids}
    most = max(sizes.values())
    fewer = sorted((qid for qid, n in sizes.items() if n < most), key=lambda q: (sizes[q], q))
    if not fewer:
        return None
    return (
        f"{model.path}: {len(fewer)} of {len(ids)} questions {'has' if len(fewer) == 1 else 'have'} fewer "
        "samples than the others "
        f"({min(sizes.values())} to {most} per question; e.g. {fewer[0]!r} has {sizes[fewer[0]]} of {most}). "
        "Was the evaluation interrupted? Re-running recipes/evaluate.py with the same arguments completes it. "
        "Each question still weighs the same in the comparison."
    )


# The share of questions with other sample counts in the two files from which the note is given and Wilcoxon left out.
MISMATCHED_SHARE = 0.05


def mismatched_samples(baseline: ModelRecords, tuned: ModelRecords, ids: list[str]) -> list[str]:
    """The paired questions the two files hold different numbers of samples of."""
    return [q for q in ids if baseline.counts[q][1] != tuned.counts[q][1]]


def mismatched_samples_note(baseline: ModelRecords, tuned: ModelRecords, ids: list[str]) -> str | None:
    """What samples counts that differ between the files do to the comparison, or None when they agree.

    With 1 sample a question's accuracy is 0% or 100%, with 16 it is near the true rate: under "no difference" the
    per-question differences then still average 0 but are not symmetric, which Wilcoxon's ranks need (measured: 11-20%
    false positives at alpha 0.05, 1 vs 16 samples, 50-200 questions) and the sign-flip test's exactness assumes;
    and most questions read as changed (47 "improved", 16 "regressed" of 100 with no true difference).
    """
    differ = mismatched_samples(baseline, tuned, ids)
    if len(differ) < MISMATCHED_SHARE * len(
        ids
    ):  # a few (an interrupted file: warned of as uneven) barely matter
        return None
    q = differ[0]
    return (
        f"the files hold different numbers of samples on {len(differ)} of {len(ids)} questions (e.g. {q!r}: "
        f"{baseline.counts[q][1]} in the baseline, {tuned.counts[q][1]} in the tuned file), so one file's per-question "
        "accuracies are noisier: Wilcoxon is left out, the sign-flip p-value is approximate (computed over every "
        "sign assignment, but the differences are not symmetric under no difference as it assumes), and the "
        "improved/regressed counts mislead. Evaluate both with the same --samples."
    )
