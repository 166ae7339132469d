"""The comparison's one-line answer: is the tuned model better, worse, or not told apart, by the primary test.

The p-value is the sign-flip test's and the interval the paired t's, so the two can disagree near alpha: the line
then says the evidence is borderline rather than letting either read as the answer. And an exact sign-flip test
has a floor: the two assignments with every sign alike always count, so with m questions whose accuracy changed
p >= 2 / 2^m. With m <= 5 no difference, however large, is significant; the line says so and what to do, instead
of "no significant difference".
"""

from __future__ import annotations

from stats.analysis import PRIMARY_TEST, Comparison
from stats.paired import p_floor
from stats.power import ALPHA


def format_p(p: float | None) -> str:
    """A p-value for people: four decimals, scientific below 0.0001, 'undefined' for None."""
    if p is None:
        return "undefined"
    return f"{p:.1e}" if p < 1e-4 else f"{p:.4f}"


def points(x: float) -> str:
    return f"{100 * x:+.1f}"


def ci_points(ci: tuple[float, float] | None) -> str:
    return "undefined (no spread across questions)" if ci is None else f"[{points(ci[0])}, {points(ci[1])}]"


def verdict(c: Comparison) -> str:
    """One plain-language line naming the primary paired test, with a caveat when some grades were never settled
    (read alone, the verdict must not hide that a busy grader may have decided it)."""
    u = c.unsettled
    if not (u.baseline or u.tuned):
        return _verdict(c)
    low, high = u.difference_range
    return (
        f"{_verdict(c)} Caveat: {u.baseline + u.tuned} samples were never graded (the grader ran out of time) and "
        f"count as wrong; whatever their grades, the difference lies between {points(low)} and {points(high)} "
        "points."
    )


def verdict_kind(c: Comparison) -> tuple[str, bool]:
    """What the verdict says, for machines (``--json``): ``better``, ``worse``, ``no_significant_difference``,
    ``undecided`` (the primary test cannot reach alpha with so few changed questions) or ``nothing_to_test``; and
    whether it is borderline (the p-value and the t interval on either side of alpha)."""
    primary = c.tests[PRIMARY_TEST]
    if primary is None or primary.p_value is None:
        return "nothing_to_test", False
    if p_floor(c.improved + c.regressed) > ALPHA:
        return "undecided", False
    # No interval (every question changed by the same amount): nothing for the p-value to disagree with.
    ci = c.difference_ci95
    excludes_0 = ci is not None and not ci[0] <= 0 <= ci[1]
    if primary.p_value < ALPHA:
        return ("better" if c.difference > 0 else "worse"), ci is not None and not excludes_0
    return "no_significant_difference", excludes_0


def _verdict(c: Comparison) -> str:
    primary = c.tests[PRIMARY_TEST]
    n = len(c.ids)
    kind, borderline = verdict_kind(c)
    if kind == "nothing_to_test":
        return (
            f"Verdict: no difference to test: both models have the same accuracy on each of the {n} questions "
            "(the paired tests are undefined)."
        )
    test = f"sign-flip permutation test on {n} paired questions, p = {format_p(primary.p_value)} (primary)"
    ci = "" if c.difference_ci95 is None else f", 95% CI {ci_points(c.difference_ci95)}"
    changed = c.improved + c.regressed
    if kind == "undecided":
        return (
            f"Verdict: undecided: the accuracy changed on only {changed} of the {n} questions, and with {changed} "
            f"the sign-flip test cannot go below p = {p_floor(changed):.4g}, so no difference could be significant "
            f"at alpha {ALPHA} (tuned - baseline = {points(c.difference)} points{ci}); {test}. Evaluate more "
            "questions."
        )
    if kind in ("better", "worse"):
        caveat = (
            "; borderline: the paired t interval includes 0, so confirm on more questions"
            if borderline
            else ""
        )
        return (
            f"Verdict: the tuned model is {kind} than the baseline by {abs(100 * c.difference):.1f} "
            f"points{ci}; {test}{caveat}."
        )
    power = c.power.detectable_difference
    reach = f"; this design detects about {100 * power:.1f} points at 80% power" if power is not None else ""
    caveat = (
        " Borderline: the paired t interval excludes 0 but the primary test is above alpha; evaluate more questions "
        "before reading it either way."
        if borderline
        else ""
    )
    return (
        f"Verdict: no significant difference at alpha {ALPHA} (tuned - baseline = "
        f"{points(c.difference)} points{ci}); {test}{reach}.{caveat}"
    )
