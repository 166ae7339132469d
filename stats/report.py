"""Render a `Comparison` as a plain-text report or a JSON-ready dict."""

from __future__ import annotations

from stats import intervals
from stats.analysis import PRIMARY_REASON, PRIMARY_TEST, Comparison, ModelSummary
from stats.groups import GroupBreakdown, GroupResult
from stats.paired import TestResult, p_floor
from stats.pass_at_k import pass_at_k_json, pass_at_k_lines
from stats.power import ALPHA, POWER
from stats.verdict import ci_points, format_p, points, verdict, verdict_kind

PAIRED_TESTS = ("sign_flip", "paired_t", "wilcoxon", "mcnemar")
INDEPENDENCE_TESTS = ("two_proportion_z", "welch_t")


def _model_line(label: str, m: ModelSummary) -> str:
    ci = "undefined (no spread)" if m.ci95 is None else f"[{100 * m.ci95[0]:.1f}%, {100 * m.ci95[1]:.1f}%]"
    return (
        f"  {label:<9} {100 * m.accuracy:5.1f}%  95% CI {ci}  "
        f"({m.correct}/{m.samples} samples, {m.questions} questions, {m.samples_note})"
    )


def _test_line(name: str, result: TestResult | None, primary: bool) -> str:
    if result is None:
        return f"  {name:<17} not applicable (needs exactly one sample per question in both files)"
    head = f"  {name:<17} "
    if result.p_value is None:
        return f"{head}undefined: {result.reason}. [{result.method}]"
    mark = "  <- PRIMARY" if primary else ""
    return (
        f"{head}statistic = {result.statistic:.4g}, p = {format_p(result.p_value)}{mark}  [{result.method}]"
    )


def _smallest_p_note(g: GroupResult) -> str:
    # Exact sign-flip: the two all-same-sign assignments always count, so p >= 2 / 2^k for k nonzero differences.
    k = sum(d != 0 for d in g.comparison.diffs)
    differences = "difference" if k == 1 else "differences"
    return f"  ({k} nonzero {differences}: p cannot go below {p_floor(k):.4g})" if 0 < k <= 5 else ""


def _group_row(g: GroupResult, width: int) -> str:
    c = g.comparison
    ci = c.difference_ci95
    ci_text = f"[{points(ci[0])}, {points(ci[1])}]" if ci else "undefined"
    head = (
        f"  {g.label:<{width}} {g.questions:>4}  {100 * c.baseline.accuracy:6.1f}%  {100 * c.tuned.accuracy:6.1f}%"
        f"  {points(c.difference):>6}  {ci_text:<16}"
    )
    if g.p_value is None:
        return f"{head}  no p-value: {g.reason}"
    return f"{head}  {format_p(g.p_value):<8}  {format_p(g.p_holm):<8}{_smallest_p_note(g)}".rstrip()


def _holm_line(corrected: int) -> str:
    """What p_holm adjusts for: "over the 0 per-group p-values" when no group had one read as an adjustment."""
    if corrected == 0:
        return "  p_holm: no group has a p-value, so there is nothing to adjust."
    if corrected == 1:
        return "  p_holm: one group has a p-value; adjusted over one test, it stays as it is."
    return (
        f"  p_holm: Holm-adjusted for multiple comparisons over the {corrected} per-group p-values "
        "(subjects and levels together); the intervals are not adjusted."
    )


def _group_lines(b: GroupBreakdown) -> list[str]:
    """The per-subject and per-level table (only for records that carry those keys)."""
    notes = [f"  Note: {note}" for note in b.skipped.values()]
    if not b.results:
        return notes
    lines = [
        (
            "Per group (tuned - baseline in points; 95% CI: paired t interval over the group's questions; "
            f"p: {PRIMARY_TEST})"
        ),
        _holm_line(b.corrected),
    ]
    width = max([len(g.label) for g in b.results] + [len("subject")])
    for key in ("subject", "level"):
        groups = b.by(key)
        if groups:
            lines.append(
                f"  {key:<{width}} {'n':>4}  {'baseline':>7}  {'tuned':>7}  {'diff':>6}  {'95% CI':<16}  "
                f"{'p':<8}  p_holm"
            )
            lines += [_group_row(g, width) for g in groups]
    return lines + notes


def _unsettled_lines(c: Comparison) -> list[str]:
    u = c.unsettled
    if not (u.baseline or u.tuned):
        return []
    low, high = u.difference_range
    return [
        (
            f"  UNSETTLED: {u.baseline} baseline and {u.tuned} tuned samples were never graded (the grader ran out "
            "of time) and count as wrong:"
        ),
        f"    whatever their grades, the difference lies between {points(low)} and {points(high)} points;",
        f"    to settle them, {u.fix()}.",
    ]


def _pass_at_k_section(c: Comparison) -> list[str]:
    if c.pass_at_k:
        return pass_at_k_lines(
            c.pass_at_k, len(c.ids), c.tests[PRIMARY_TEST] and c.tests[PRIMARY_TEST].p_value
        )
    if c.baseline.samples == c.baseline.questions and c.tuned.samples == c.tuned.questions:
        return []  # one sample each: pass@1 is the accuracy
    return [
        "pass@k: not shown: some paired question has a single sample in one file (k = 2 needs 2 in both)."
    ]


def format_text(c: Comparison) -> str:
    """The full human-readable report."""
    lines = [f"Paired comparison by question: {c.baseline.path} (baseline) vs {c.tuned.path} (tuned)"]
    dropped = c.pairing.baseline_only + c.pairing.tuned_only
    if dropped:
        lines.append(
            f"  --intersect dropped {len(dropped)} questions: {len(c.pairing.baseline_only)} only in the "
            f"baseline file, {len(c.pairing.tuned_only)} only in the tuned file "
            f"(e.g. {', '.join(repr(q) for q in dropped[:3])})."
        )
    lines += [
        "",
        f"Accuracy (mean of per-question accuracies; 95% CI: {intervals.METHOD})",
        _model_line("baseline", c.baseline),
        _model_line("tuned", c.tuned),
        (
            f"  difference {points(c.difference)} points, 95% CI {ci_points(c.difference_ci95)} "
            f"(paired t interval on {len(c.ids)} per-question differences)"
        ),
        *_unsettled_lines(c),
        "",
        (
            f"Questions: {c.improved} improved, {c.regressed} regressed, {c.unchanged} unchanged "
            "(per-question accuracy change)"
        ),
        *([f"  Note: {c.mismatched_samples}"] if c.mismatched_samples else []),
    ]
    p = c.power
    if p.cohens_dz is None:
        lines.append(f"Effect size and power: undefined ({p.reason}).")
    else:
        undefined = f"undefined ({p.reason or 'no finite solution'})"
        detect = (
            undefined if p.detectable_difference is None else f"{100 * p.detectable_difference:.1f} points"
        )
        need = p.questions_needed if p.questions_needed is not None else undefined
        lines += [
            f"Effect size: Cohen's d_z = {p.cohens_dz:.3f} (mean / SD of per-question differences)",
            (
                f"Power (paired t approximation of the primary test, alpha {ALPHA}, two-sided, {POWER:.0%} power): "
                "smallest detectable difference "
                f"with {len(c.ids)} questions = {detect}; questions needed to detect the observed "
                f"{points(c.difference)} points = {need}"
            ),
        ]
    lines += ["", "Paired tests (the question is the unit)"]
    lines += [_test_line(name, c.tests[name], name == PRIMARY_TEST) for name in PAIRED_TESTS]
    lines += [
        "Independence tests (ASSUME INDEPENDENT SAMPLES; shown only to compare with reports that used them)"
    ]
    lines += [_test_line(name, c.tests[name], False) for name in INDEPENDENCE_TESTS]
    section = _pass_at_k_section(c)
    lines += ["", *section] if section else []
    if c.groups is not None:
        lines += ["", *_group_lines(c.groups)]
    lines += ["", f"Why: {PRIMARY_REASON}", verdict(c)]
    return "\n".join(lines)


def _test_json(result: TestResult | None) -> dict | None:
    if result is None:
        return None
    out = {"statistic": result.statistic, "p_value": result.p_value, "method": result.method}
    if result.reason is not None:
        out["undefined"] = result.reason
    return out


def _model_json(m: ModelSummary) -> dict:
    return {
        "file": m.path,
        "accuracy": m.accuracy,
        "ci95": list(m.ci95) if m.ci95 else None,
        "ci95_method": intervals.METHOD,
        "questions": m.questions,
        "samples": m.samples,
        "correct": m.correct,
        "samples_per_question": m.samples_note,
    }


def _group_json(g: GroupResult) -> dict:
    c = g.comparison
    out = {
        "value": g.value,
        "questions": g.questions,
        "baseline_accuracy": c.baseline.accuracy,
        "tuned_accuracy": c.tuned.accuracy,
        "difference": {
            "estimate": c.difference,
            "ci95": list(c.difference_ci95) if c.difference_ci95 else None,
        },
        "p_value": g.p_value,
        "p_holm": g.p_holm,
        "tests": {name: _test_json(c.tests[name]) for name in PAIRED_TESTS},
        "changes": {"improved": c.improved, "regressed": c.regressed, "unchanged": c.unchanged},
    }
    if g.reason is not None:
        out["undefined"] = g.reason
    return out


def _groups_json(b: GroupBreakdown) -> dict:
    out: dict = {"primary_test": PRIMARY_TEST, "correction": "holm", "corrected_p_values": b.corrected}
    for key in ("subject", "level"):
        if b.by(key):
            out[key] = [_group_json(g) for g in b.by(key)]
    out["skipped"] = b.skipped
    return out


def to_json(c: Comparison) -> dict:
    """The machine-readable report (``--json``); ``groups`` only when the records carry subject or level."""
    out = {
        "baseline": _model_json(c.baseline),
        "tuned": _model_json(c.tuned),
        "difference": {
            "estimate": c.difference,
            "ci95": list(c.difference_ci95) if c.difference_ci95 else None,
            "questions": len(c.ids),
        },
        "tests": {name: _test_json(c.tests[name]) for name in PAIRED_TESTS + INDEPENDENCE_TESTS},
        "primary_test": PRIMARY_TEST,
        "questions": {"improved": c.improved, "regressed": c.regressed, "unchanged": c.unchanged},
        "mismatched_samples": c.mismatched_samples,
        "effect_size": {"cohens_dz": c.power.cohens_dz},
        "power": {
            "alpha": ALPHA,
            "power": POWER,
            "detectable_difference": c.power.detectable_difference,
            "questions_needed": c.power.questions_needed,
        },
        "dropped": {"baseline_only": c.pairing.baseline_only, "tuned_only": c.pairing.tuned_only},
        "unsettled": {
            "baseline": c.unsettled.baseline,
            "tuned": c.unsettled.tuned,
            "difference_range": list(c.unsettled.difference_range),
        },
        "pass_at_k": pass_at_k_json(c.pass_at_k),
        "verdict": verdict(c),
        "verdict_kind": dict(zip(("kind", "borderline"), verdict_kind(c))),
    }
    if c.groups is not None:
        out["groups"] = _groups_json(c.groups)
    return out
