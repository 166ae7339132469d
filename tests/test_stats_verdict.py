"""The verdict says what the primary test can and cannot tell: its floor with few changed questions, a p-value
and an interval that disagree, and files whose sample counts differ (a statistician's audit found each misleading)."""

from __future__ import annotations

import json

from _stats_helpers import outcomes_from_counts, run_compare, write_records


def _compare(capsys, tmp_path, base_counts, tuned_counts, base_samples, tuned_samples=None, *args):
    base = write_records(tmp_path / "b.jsonl", outcomes_from_counts(base_counts, base_samples))
    tuned = write_records(
        tmp_path / "t.jsonl", outcomes_from_counts(tuned_counts, tuned_samples or base_samples)
    )
    code, out, _ = run_compare(capsys, base, tuned, *args)
    assert code == 0
    return out


def test_five_changed_questions_are_undecided_not_no_difference(capsys, tmp_path):
    """0/4 -> 3-4/4 on all 5 questions read "no significant difference ... detects about 35.2 points": the exact
    sign-flip test cannot go below 2 / 2^5 = 0.0625, whatever the difference."""
    out = _compare(capsys, tmp_path, [0] * 5, [3, 4, 2, 4, 3], 4)
    verdict = out.strip().splitlines()[-1]
    assert verdict.startswith(
        "Verdict: undecided: the accuracy changed on only 5 of the 5 questions, and with 5 the sign-flip test cannot "
        "go below p = 0.0625, so no difference could be significant at alpha 0.05 (tuned - baseline = +80.0 points"
    )
    assert verdict.endswith("Evaluate more questions.") and "no significant difference" not in verdict
    power = next(line for line in out.splitlines() if line.startswith("Power"))
    assert (
        "with 5 questions = undefined (with 5 questions the sign-flip test cannot go below p = 0.0625)"
        in power
    )
    assert "questions needed to detect the observed +80.0 points = 6" in power  # t alone says 3
    result = json.loads(run_compare(capsys, tmp_path / "b.jsonl", tmp_path / "t.jsonl", "--json")[1])
    assert result["power"]["detectable_difference"] is None and result["power"]["questions_needed"] == 6
    assert result["verdict_kind"] == {"kind": "undecided", "borderline": False}


def test_a_p_value_above_alpha_with_an_interval_excluding_zero_is_called_borderline(capsys, tmp_path):
    """sign-flip p = 0.0625 while the t interval is [+3.5, +46.5]: neither may read as the answer alone."""
    out = _compare(capsys, tmp_path, [3, 0, 3, 2, 1, 0, 3, 0, 2], [4, 2, 2, 3, 3, 0, 3, 2, 4], 4)
    verdict = out.strip().splitlines()[-1]
    assert verdict.startswith(
        "Verdict: no significant difference at alpha 0.05 (tuned - baseline = +25.0 points"
    )
    assert "p = 0.0625 (primary)" in verdict
    assert verdict.endswith(
        "Borderline: the paired t interval excludes 0 but the primary test is above alpha; evaluate more questions "
        "before reading it either way."
    )
    result = json.loads(run_compare(capsys, tmp_path / "b.jsonl", tmp_path / "t.jsonl", "--json")[1])
    assert result["verdict_kind"] == {"kind": "no_significant_difference", "borderline": True}


def test_a_clear_gain_is_not_called_borderline(capsys, tmp_path):
    out = _compare(capsys, tmp_path, [0, 1, 0, 2, 1, 0, 1, 0] * 2, [3, 4, 2, 4, 3, 2, 4, 3] * 2, 4)
    verdict = out.strip().splitlines()[-1]
    assert (
        verdict.startswith("Verdict: the tuned model is better than the baseline by")
        and "orderline" not in verdict
    )


def test_a_gain_with_no_interval_is_not_called_borderline(capsys, tmp_path):
    """Every question 0/1 -> 1/1: the t interval is undefined (no spread), which read as "includes 0"."""
    out = _compare(capsys, tmp_path, [0] * 10, [1] * 10, 1)
    verdict = out.strip().splitlines()[-1]
    assert verdict.startswith("Verdict: the tuned model is better than the baseline by 100.0 points")
    assert "orderline" not in verdict
    result = json.loads(run_compare(capsys, tmp_path / "b.jsonl", tmp_path / "t.jsonl", "--json")[1])
    assert result["verdict_kind"] == {"kind": "better", "borderline": False}


def test_files_with_other_sample_counts_leave_wilcoxon_out_and_say_why(capsys, tmp_path):
    """1 sample against 16: Wilcoxon read 11-20% false positives at alpha 0.05 in simulation, and most questions
    "changed" with no true difference."""
    base = [1, 0, 0, 1, 0, 0, 0, 1, 0, 0] * 3
    tuned = [8, 3, 5, 12, 2, 0, 4, 9, 1, 6] * 3
    out = _compare(capsys, tmp_path, base, tuned, 1, 16)
    note = next(line for line in out.splitlines() if line.startswith("  Note: the files hold"))
    assert (
        "different numbers of samples on 30 of 30 questions (e.g. 'q00': 1 in the baseline, 16 in the tuned file)"
        in note
    )
    assert "Wilcoxon is left out, the sign-flip p-value is approximate" in note and "same --samples" in note
    wilcoxon = next(line for line in out.splitlines() if line.lstrip().startswith("wilcoxon"))
    assert "undefined: the files hold different samples per question" in wilcoxon
    assert "pass@k: not shown: some paired question has a single sample in one file" in out
    result = json.loads(run_compare(capsys, tmp_path / "b.jsonl", tmp_path / "t.jsonl", "--json")[1])
    assert result["tests"]["wilcoxon"]["p_value"] is None and "30 of 30" in result["mismatched_samples"]
    # The plot's counts said "27 improved" without the caveat the text gives.
    from stats.compare import compare
    from stats.plots import draw_comparison

    titles = [
        ax.get_title() for ax in draw_comparison(compare(tmp_path / "b.jsonl", tmp_path / "t.jsonl")).axes
    ]
    (counts,) = [t for t in titles if t.startswith("Per-question difference")]
    assert "unchanged (misleading: other --samples per file)\nsign_flip p = " in counts
    assert counts.endswith("(approximate)")


def test_equal_sample_counts_keep_wilcoxon_and_say_nothing(capsys, tmp_path):
    out = _compare(capsys, tmp_path, [1, 2, 0, 3, 2, 1, 0, 2], [3, 2, 1, 3, 3, 2, 1, 3], 3)
    assert "Note: the files hold" not in out and "not shown" not in out
    wilcoxon = next(line for line in out.splitlines() if line.lstrip().startswith("wilcoxon"))
    assert "p = " in wilcoxon


def test_one_question_of_many_with_other_counts_keeps_wilcoxon(capsys, tmp_path):
    """15 against 16 samples on 1 of 40 questions (an interrupted file, warned of as uneven) barely matters."""
    out = _compare(capsys, tmp_path, [8] * 40, [9] * 39 + [10], [15] + [16] * 39, 16)
    assert "Note: the files hold" not in out
    wilcoxon = next(line for line in out.splitlines() if line.lstrip().startswith("wilcoxon"))
    assert "p = " in wilcoxon


def test_few_questions_of_coprime_sample_counts_are_enumerated_not_sampled(capsys, tmp_path):
    """61/59/53/47/43 samples (an interrupted evaluation) scaled the differences past the table's budget: Monte
    Carlo read p = 0.0619 under the verdict's own floor of 0.0625."""
    sizes = [61, 59, 53, 47, 43]
    base = write_records(tmp_path / "b.jsonl", outcomes_from_counts([0] * 5, sizes))
    tuned = write_records(tmp_path / "t.jsonl", outcomes_from_counts([n - 1 for n in sizes], sizes))
    out = run_compare(capsys, base, tuned, "--seed", "1")[1]
    sign_flip = next(line for line in out.splitlines() if line.lstrip().startswith("sign_flip"))
    assert (
        "p = 0.0625" in sign_flip
        and "exact over all 2^5 sign assignments of the nonzero differences, listed" in sign_flip
    )
