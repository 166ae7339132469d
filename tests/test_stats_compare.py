"""The `python -m stats.compare` command: report, JSON, plot and input errors."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys

import pytest
from _stats_helpers import REPO, outcomes_from_counts, run_cli, run_compare, write_records

from stats.analysis import compare_models
from stats.plots import draw_comparison
from stats.records import load_records, pair_questions

BASE_73 = [5, 5, 5, 5, 5, 4, 4, 4, 4, 4, 3, 3, 3, 3, 3, 2, 2, 2, 3, 4]
TUNED_92 = [5] * 12 + [4] * 8
TEST_NAMES = {"paired_t", "wilcoxon", "sign_flip", "mcnemar", "two_proportion_z", "welch_t"}


@pytest.fixture
def reference_files(tmp_path):
    base = write_records(tmp_path / "base.jsonl", outcomes_from_counts(BASE_73, 5), model="baseline")
    tuned = write_records(tmp_path / "tuned.jsonl", outcomes_from_counts(TUNED_92, 5), model="tuned")
    return base, tuned


def test_json_output_has_the_documented_shape_and_reference_headline(capsys, reference_files):
    code, out, _ = run_compare(capsys, *reference_files, "--json")
    assert code == 0
    result = json.loads(out)
    for model, correct in (("baseline", 73), ("tuned", 92)):
        assert result[model]["accuracy"] == pytest.approx(correct / 100)
        assert result[model]["questions"] == 20 and result[model]["samples"] == 100
        low, high = result[model]["ci95"]
        assert low < correct / 100 < high
    assert result["difference"]["estimate"] == pytest.approx(0.19) and result["difference"]["questions"] == 20
    assert set(result["tests"]) == TEST_NAMES
    assert result["tests"]["mcnemar"] is None
    for name in TEST_NAMES - {"mcnemar"}:
        assert {"statistic", "p_value"} <= set(result["tests"][name])
        assert 0 < result["tests"][name]["p_value"] < 0.05
    assert round(result["tests"]["two_proportion_z"]["p_value"], 4) == 0.0004
    assert result["questions"] == {"improved": 14, "regressed": 0, "unchanged": 6}
    assert result["primary_test"] == "sign_flip"
    assert result["verdict"].startswith("Verdict: the tuned model is better than the baseline by 19.0 points")


def test_text_report_states_methods_labels_and_verdict(capsys, reference_files):
    code, out, _ = run_compare(capsys, *reference_files)
    assert code == 0
    assert re.search(
        r"baseline\s+73\.0%\s+95% CI \[\d+\.\d%, \d+\.\d%\]\s+\(73/100 samples, 20 questions", out
    )
    assert "Questions: 14 improved, 0 regressed, 6 unchanged" in out
    assert (
        "6 of 20 zero differences dropped (zero_method='wilcox'); exact over all 2^14 sign assignments" in out
    )
    assert re.search(r"sign_flip .*<- PRIMARY", out)
    assert "mcnemar           not applicable" in out
    assert "Independence tests (ASSUME INDEPENDENT SAMPLES" in out
    assert re.search(r"two_proportion_z\s+statistic = 3\.536, p = 0\.0004", out)
    assert re.search(r"smallest detectable difference with 20 questions = \d+\.\d points", out)
    assert re.search(r"questions needed to detect the observed \+19\.0 points = \d+", out)
    assert "Why: the sign-flip permutation test is primary" in out
    assert out.strip().splitlines()[-1].startswith("Verdict: the tuned model is better")


def test_no_difference_prints_undefined_and_exits_zero(capsys, tmp_path):
    outcomes = outcomes_from_counts([1, 2, 0, 3], 3)
    base = write_records(tmp_path / "b.jsonl", outcomes)
    tuned = write_records(tmp_path / "t.jsonl", outcomes)
    code, out, _ = run_compare(capsys, base, tuned)
    assert code == 0
    assert "undefined: all per-question differences are zero" in out
    assert "Verdict: no difference to test" in out
    code, out, _ = run_compare(capsys, base, tuned, "--json")
    result = json.loads(out)
    assert result["tests"]["sign_flip"]["p_value"] is None
    assert result["tests"]["sign_flip"]["undefined"] == "all per-question differences are zero"
    assert result["difference"]["ci95"] is None


def test_uneven_samples_are_reported(capsys, tmp_path):
    base = write_records(tmp_path / "b.jsonl", outcomes_from_counts([1, 2, 0, 3], [3, 5, 4, 5]))
    tuned = write_records(tmp_path / "t.jsonl", outcomes_from_counts([2, 2, 1, 5], 5))
    code, out, _ = run_compare(capsys, base, tuned)
    assert code == 0
    assert "3 to 5 samples per question (2 questions have fewer than 5: 'q00' (3), 'q02' (4))" in out
    assert "(10/20 samples, 4 questions, 5 samples per question)" in out


def test_a_file_holding_fewer_questions_than_its_run_planned_is_warned_about(capsys, caplog, tmp_path):
    """An interrupted evaluation whose finished batches pair up evenly passed for a whole, smaller one."""
    planned = {"planned_questions": 500, "planned_samples": 8}
    base = write_records(tmp_path / "b.jsonl", outcomes_from_counts([1, 2, 0], 8), extra=planned)
    tuned = write_records(
        tmp_path / "t.jsonl", outcomes_from_counts([2, 2, 1], 8), extra={**planned, "planned_questions": 3}
    )
    assert run_compare(capsys, base, tuned)[0] == 0
    assert (
        f"{base} holds 3 of the 500 questions (up to 8 of 8 samples each) its recipes/evaluate.py run"
        in caplog.text
    )
    assert f"{tuned} holds" not in caplog.text  # finished


def test_intersect_reports_what_was_dropped(capsys, tmp_path):
    base = write_records(tmp_path / "b.jsonl", outcomes_from_counts([1, 0, 1, 1], 1))
    tuned = write_records(tmp_path / "t.jsonl", outcomes_from_counts([1, 1, 1], 1))
    code, _, err = run_compare(capsys, base, tuned)
    assert code == 2 and "cover different questions: 1 of 4 differ" in err
    code, out, _ = run_compare(capsys, base, tuned, "--intersect")
    assert code == 0
    assert (
        "--intersect dropped 1 questions: 1 only in the baseline file, 0 only in the tuned file (e.g. 'q03')"
        in out
    )
    code, out, _ = run_compare(capsys, base, tuned, "--intersect", "--json")
    result = json.loads(out)
    assert result["dropped"] == {"baseline_only": ["q03"], "tuned_only": []}
    assert result["difference"]["questions"] == 3
    assert result["tests"]["mcnemar"]["p_value"] == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--plot", "out.txt"], "--plot out.txt: expected a file ending in .png, .pdf, .svg"),
        (["--swaps", "missing_dir/s.md"], "folder missing_dir does not exist"),
    ],
)
def test_bad_output_paths_fail_before_any_work(capsys, reference_files, extra, expected):
    code, out, err = run_compare(capsys, *reference_files, *extra)
    assert code == 2 and expected in err and out == ""


def test_duplicate_sample_is_an_error(capsys, tmp_path, reference_files):
    base, tuned = reference_files
    dup = tmp_path / "dup.jsonl"
    dup.write_text(base.read_text() + base.read_text().splitlines()[0] + "\n")
    code, _, err = run_compare(capsys, dup, tuned)
    assert code == 2
    assert "line 101: duplicate (id, sample) = ('q00', 0), first seen on line 1" in err


@pytest.mark.parametrize(
    ("make_files", "expected"),
    [
        (
            lambda b, t: (b.write_text('{"id": "q00", "sample": 0, "correct": true}\n{oops\n'), b)[1],
            "line 2: not valid JSON",
        ),
        (lambda b, t: b.with_name("nope.jsonl"), "nope.jsonl does not exist"),
    ],
    ids=["malformed-json", "missing-file"],
)
def test_cli_errors_exit_nonzero_without_traceback(reference_files, make_files, expected):
    base, tuned = reference_files
    proc = run_cli("stats.compare", make_files(base, tuned), tuned)
    assert proc.returncode == 2
    assert expected in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_cli_different_question_sets_without_traceback(tmp_path):
    base = write_records(tmp_path / "b.jsonl", outcomes_from_counts([1, 0, 1], 1))
    tuned = write_records(tmp_path / "t.jsonl", outcomes_from_counts([1, 0, 1], 1, prefix="x"))
    proc = run_cli("stats.compare", base, tuned, "--intersect")
    assert (
        proc.returncode == 2 and "no question id in common" in proc.stderr and "Traceback" not in proc.stderr
    )


def test_plot_is_written_and_shows_each_question(capsys, tmp_path, reference_files):
    plot = tmp_path / "cmp.png"
    code, _, err = run_compare(capsys, *reference_files, "--plot", plot)
    assert code == 0 and f"wrote {plot}" in err
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(plot.stat().st_mode) == 0o666 & ~mask  # as open() would make it, not mkstemp's 0600
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "base.jsonl",
        "cmp.png",
        "tuned.jsonl",
    ]  # no temp files

    base, tuned = (load_records(p) for p in reference_files)
    fig = draw_comparison(compare_models(base, tuned, pair_questions(base, tuned)))
    left, right, curve = fig.axes  # five samples per question: pass@k for k = 1, 2, 4, 5
    assert [int(x) for x in curve.lines[0].get_xdata()] == [1, 2, 4, 5]
    assert len(right.containers[0]) == 20  # one bar per question
    assert sorted(round(bar.get_height()) for bar in right.containers[0]) == [0] * 6 + [20] * 9 + [40] * 5
    assert "14 improved, 0 regressed, 6 unchanged" in right.get_title()
    assert [t.get_text() for t in left.get_xticklabels()] == ["baseline\n73/100", "tuned\n92/100"]


def test_the_difference_panel_ticks_whole_questions(tmp_path):
    """Three questions drew ticks at 0.0, 0.5, ... 2.0: half a question."""
    base = load_records(write_records(tmp_path / "b.jsonl", {"q1": [False], "q2": [True], "q3": [False]}))
    tuned = load_records(write_records(tmp_path / "t.jsonl", {"q1": [True], "q2": [True], "q3": [True]}))
    right = draw_comparison(compare_models(base, tuned, pair_questions(base, tuned))).axes[1]
    ticks = [t for t in right.get_xticks() if right.get_xlim()[0] <= t <= right.get_xlim()[1]]
    assert ticks and all(float(t).is_integer() for t in ticks)


def test_stats_imports_neither_torch_nor_transformers_and_comes_from_this_repo():
    code = "import stats, stats.compare, stats.curves, stats.plots, stats.swaps; print(stats.__file__)"
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
    assert {"numpy", "statsmodels.stats.power", "matplotlib"} <= imported  # the parse works
    assert not {m for m in imported if m.split(".")[0] in ("torch", "transformers")}
    assert proc.stdout.strip() == str(REPO / "stats" / "__init__.py")


def test_python_api_returns_the_comparison_the_cli_prints(tmp_path):
    from stats.compare import compare
    from stats.report import to_json

    base = write_records(tmp_path / "base.jsonl", {f"q{i}": [i < 3, i < 2] for i in range(10)})
    tuned = write_records(tmp_path / "tuned.jsonl", {f"q{i}": [i < 9, i < 8] for i in range(10)})
    comparison = compare(base, tuned, swaps=tmp_path / "swaps.md")
    printed = run_cli("stats.compare", base, tuned, "--json")
    assert printed.returncode == 0, printed.stderr
    assert to_json(comparison) == json.loads(printed.stdout)
    assert (tmp_path / "swaps.md").is_file()


def test_different_decoding_is_refused_unless_asked_for_and_then_said(capsys, caplog, tmp_path):
    """Greedy against sampled decoding moves accuracy by itself: not a comparison of two models, unless asked."""
    sampled = {"temperature": 1.0, "top_p": 1.0, "max_new_tokens": 256}
    base = write_records(tmp_path / "b.jsonl", outcomes_from_counts([1, 2, 0, 3], 3), extra=sampled)
    greedy = {**sampled, "temperature": 0.0}
    tuned = write_records(tmp_path / "t.jsonl", outcomes_from_counts([2, 2, 1, 3], 3), extra=greedy)
    code, out, err = run_compare(capsys, base, tuned)
    assert code == 2 and out == ""
    assert f"{base} and {tuned} were generated with different decoding (temperature 1.0 vs 0.0)" in err
    assert "pass --different-decoding to compare them anyway" in err
    code, out, _ = run_compare(capsys, base, tuned, "--different-decoding")
    assert code == 0 and "Verdict" in out
    assert "mixes the training's effect with the decoding's" in caplog.text
    same = write_records(tmp_path / "s.jsonl", outcomes_from_counts([2, 2, 1, 3], 3), extra=sampled)
    assert run_compare(capsys, base, same)[0] == 0


def test_the_same_file_twice_is_refused(capsys, tmp_path):
    base = write_records(tmp_path / "b.jsonl", outcomes_from_counts([1, 2, 0, 3], 3))
    code, _, err = run_compare(capsys, base, tmp_path / "." / "b.jsonl")
    assert code == 2 and "is given as both the baseline and the tuned file" in err


def test_two_evaluations_of_the_same_weights_are_warned_about(capsys, caplog, tmp_path):
    """Two copies of a base evaluation (a tuned one run without --adapter) compared without a word: "no difference"."""
    base = {"adapter_path": None, "adapter_sha": None}
    first = write_records(
        tmp_path / "b.jsonl", outcomes_from_counts([1, 2, 0, 3], 3), model="llama", extra=base
    )
    again = write_records(
        tmp_path / "t.jsonl", outcomes_from_counts([2, 1, 0, 3], 3), model="llama", extra=base
    )
    assert run_compare(capsys, first, again)[0] == 0
    assert (
        f"{first} and {again} both evaluated llama without an adapter: the difference below is sampling noise "
        "alone. Was --adapter left out of the tuned evaluation?" in caplog.text
    )
    caplog.clear()
    tuned = write_records(tmp_path / "a.jsonl", outcomes_from_counts([2, 1, 0, 3], 3), model="llama",
                          extra={"adapter_path": "/runs/a", "adapter_sha": "0123456789abcdef"})  # fmt: skip
    steps = [
        write_records(
            tmp_path / f"step-{n}.jsonl",
            outcomes_from_counts([1, 2, 0, 3], 3),
            model="llama",
            extra={**base, "step": n},
        )
        for n in (0, 40)
    ]  # the held-out records of two training steps: the same model name, other weights
    assert run_compare(capsys, first, tuned)[0] == 0 and run_compare(capsys, *steps)[0] == 0
    assert "both evaluated" not in caplog.text


def test_a_different_system_prompt_is_refused_like_different_decoding(capsys, caplog, tmp_path):
    """The tuned side evaluated with another data.system_prompt: the prompt, not the training, may move accuracy."""
    sampled = {"temperature": 1.0, "top_p": 1.0, "max_new_tokens": 256}
    base = write_records(
        tmp_path / "b.jsonl", outcomes_from_counts([1, 2, 0, 3], 3), extra={**sampled, "prompt_sha": "aaaa"}
    )
    other = {**sampled, "prompt_sha": "bbbb"}
    tuned = write_records(tmp_path / "t.jsonl", outcomes_from_counts([2, 2, 1, 3], 3), extra=other)
    code, out, err = run_compare(capsys, base, tuned)
    assert code == 2 and out == ""
    assert "different system prompts (prompt_sha aaaa vs bbbb: data.system_prompt differs)" in err
    assert "the same data.system_prompt), or pass --different-decoding" in err
    assert run_compare(capsys, base, tuned, "--different-decoding")[0] == 0
    assert "mixes the training's effect with the prompt's" in caplog.text
    # Records written before prompt_sha was recorded still load and compare, unchecked on the prompt.
    old = write_records(tmp_path / "old.jsonl", outcomes_from_counts([2, 2, 1, 3], 3), extra=sampled)
    assert run_compare(capsys, base, old)[0] == 0


def test_defaults_are_three_examples_and_100000_monte_carlo_assignments_from_seed_0(
    capsys, tmp_path, monkeypatch
):
    """The documented defaults (--help, compare()'s signature), both from the command line and from Python."""
    from stats import paired
    from stats.compare import compare

    monkeypatch.setattr(paired, "_EXACT_MAX_CELLS", 1)  # too small to enumerate: the Monte Carlo fallback
    monkeypatch.setattr(paired, "_LISTED_MAX", 0)
    # Five questions both models get right, five both get wrong, three the tuned model gets right.
    base = write_records(tmp_path / "b.jsonl", outcomes_from_counts([2] * 5 + [0] * 8, 2))
    tuned = write_records(tmp_path / "t.jsonl", outcomes_from_counts([2] * 5 + [0] * 5 + [2] * 3, 2))
    swaps = tmp_path / "swaps.md"
    code, out, _ = run_compare(capsys, base, tuned, "--swaps", swaps)
    assert code == 0
    assert "Monte Carlo over 100000 random sign assignments (seed 0)" in out
    assert run_compare(capsys, base, tuned, "--seed", "0", "--resamples", "100000")[1] == out
    text = swaps.read_text()
    for group in ("Both right", "Both wrong"):
        section = text.split(f"## {group} (up to 3 examples)")[1].split("\n## ")[0]
        assert section.count("### q") == 3
    api_swaps = tmp_path / "api.md"
    comparison = compare(base, tuned, swaps=api_swaps)
    assert "Monte Carlo over 100000 random sign assignments (seed 0)" in comparison.tests["sign_flip"].method
    assert api_swaps.read_text() == text


def test_the_python_api_refuses_by_default_what_the_command_line_refuses_without_its_flags(tmp_path):
    """compare() has the command line's defaults: no --intersect, no --different-decoding."""
    from stats.compare import compare
    from stats.records import InputError

    sampled = {"temperature": 1.0, "top_p": 1.0, "max_new_tokens": 256}
    base = write_records(tmp_path / "b.jsonl", outcomes_from_counts([1, 0, 1, 1], 1), extra=sampled)
    fewer = write_records(tmp_path / "f.jsonl", outcomes_from_counts([1, 1, 1], 1), extra=sampled)
    with pytest.raises(InputError, match="cover different questions: 1 of 4 differ"):
        compare(base, fewer)
    assert compare(base, fewer, intersect=True).ids == ["q00", "q01", "q02"]
    greedy = {**sampled, "temperature": 0.0}
    other = write_records(tmp_path / "g.jsonl", outcomes_from_counts([1, 1, 1, 0], 1), extra=greedy)
    with pytest.raises(InputError, match="different decoding"):
        compare(base, other)
    assert compare(base, other, different_decoding=True).ids == ["q00", "q01", "q02", "q03"]


def test_an_output_that_cannot_be_written_exits_1_with_one_line_and_no_report(
    capsys, reference_files, tmp_path
):
    too_long = tmp_path / ("s" * 300 + ".md")  # longer than any file name may be (255 bytes)
    code, out, err = run_compare(capsys, *reference_files, "--swaps", too_long)
    assert code == 1 and out == ""
    assert err.startswith("error: cannot write output: ") and "File name too long" in err
