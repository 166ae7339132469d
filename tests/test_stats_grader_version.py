"""Two evaluations graded by different grader versions: refused (the same answer can be right by one, wrong by the
other, which would read as the training's effect); a file without a version gets a warning."""

from __future__ import annotations

from _stats_helpers import outcomes_from_counts, run_compare, write_records


def _files(tmp_path, base_version, tuned_version):
    def extra(version):
        return {} if version is None else {"grader_version": version}

    tmp_path.mkdir(exist_ok=True)
    base = write_records(
        tmp_path / "b.jsonl", outcomes_from_counts([1, 2, 0, 3], 3), extra=extra(base_version)
    )
    tuned = write_records(
        tmp_path / "t.jsonl", outcomes_from_counts([2, 2, 1, 3], 3), extra=extra(tuned_version)
    )
    return base, tuned


def test_files_graded_by_different_grader_versions_are_refused_naming_the_older(capsys, tmp_path):
    base, tuned = _files(tmp_path, 1, 2)
    code, out, err = run_compare(capsys, base, tuned)
    assert code == 2 and out == ""
    assert f"{base} and {tuned} were graded by different grader versions (1 vs 2)" in err
    assert (
        "grade it again with this grader, from its saved completions (no model, no generation): python "
        in err
    )
    assert err.rstrip().endswith(f"recipes/regrade.py {base}")
    newer_base, older_tuned = _files(tmp_path / "x", 3, 2)
    # The older, either side.
    assert run_compare(capsys, newer_base, older_tuned)[2].rstrip().endswith(f"regrade.py {older_tuned}")


def test_a_file_without_a_grader_version_is_compared_with_a_warning(capsys, caplog, tmp_path):
    base, tuned = _files(tmp_path, None, 2)
    code, out, _ = run_compare(capsys, base, tuned)
    assert code == 0 and "difference" in out
    assert f"{base} records no grader version" in caplog.text
    caplog.clear()
    assert run_compare(capsys, *_files(tmp_path / "same", 2, 2))[0] == 0
    assert run_compare(capsys, *_files(tmp_path / "none", None, None))[0] == 0
    assert "grader" not in caplog.text


def test_held_out_files_are_told_to_regrade_as_evaluate_py_files_are(capsys, caplog, tmp_path):
    # A run resumed across the upgrade: heldout/step-100.jsonl graded by version 1, step-400.jsonl by this one.
    # evaluate.py refuses to append to a held-out file, and the checkpoint may be gone: regrade.py grades it as is.
    tuned = write_records(
        tmp_path / "step-400.jsonl",
        outcomes_from_counts([2, 2, 1, 3], 3),
        extra={"step": 400, "grader_version": 2},
    )
    older = write_records(
        tmp_path / "step-100.jsonl",
        outcomes_from_counts([1, 2, 0, 3], 3),
        extra={"step": 100, "grader_version": 1},
    )
    err = run_compare(capsys, older, tuned)[2]
    assert "were graded by different grader versions (1 vs 2)" in err
    assert err.rstrip().endswith(f"python recipes/regrade.py {older}")


def test_our_evaluators_file_from_before_grader_versions_is_version_1_and_refused(capsys, caplog, tmp_path):
    # baseline.jsonl evaluated before the upgrade (evaluate.py's records, lm-eval grades and all, no version) against
    # tuned.jsonl evaluated after it: "1 where absent" (docs/CONTRACTS.md), so two graders, refused as 1 vs 2.
    ours = {"correct_strict": False, "correct_lenient": False}
    base = write_records(tmp_path / "b.jsonl", outcomes_from_counts([1, 2, 0, 3], 3), extra=ours)
    tuned = write_records(
        tmp_path / "t.jsonl",
        outcomes_from_counts([2, 2, 1, 3], 3),
        extra={**ours, "grader_version": 2},
    )
    code, out, err = run_compare(capsys, base, tuned)
    assert code == 2 and out == ""
    assert f"{base} and {tuned} were graded by different grader versions (1 vs 2)" in err
    assert err.rstrip().endswith(f"recipes/regrade.py {base}")


def test_a_file_partly_graded_by_an_older_grader_is_the_one_named_for_re_grading(capsys, tmp_path):
    """The tuned file holds versions 1 and 2, the baseline 2 alone: re-grading the baseline would re-grade nothing
    (all its records are current), so the fix names the tuned file, whichever side it is on."""
    import json

    base, tuned = _files(tmp_path, 2, 2)
    records = [json.loads(line) for line in tuned.read_text().splitlines()]
    records[0]["grader_version"] = 1
    tuned.write_text("".join(json.dumps(r) + "\n" for r in records))
    code, _, err = run_compare(capsys, base, tuned)
    assert code == 2 and "were graded by different grader versions (2 vs 1, 2)" in err
    assert err.rstrip().endswith(f"recipes/regrade.py {tuned}")
    assert run_compare(capsys, tuned, base)[2].rstrip().endswith(f"recipes/regrade.py {tuned}")


def test_the_warning_names_the_file_without_a_grader_version_on_either_side(capsys, caplog, tmp_path):
    base, tuned = _files(tmp_path, 2, None)
    assert run_compare(capsys, base, tuned)[0] == 0
    assert f"{tuned} records no grader version" in caplog.text and f"{base} records no" not in caplog.text
    assert "If grpo-recipes wrote it, grade it again with this grader" in caplog.text
    assert f"recipes/regrade.py {tuned}; another tool's file is best evaluated again" in caplog.text
