"""stats.compare and samples the grader never settled ("unsettled": true): counted wrong as before, but counted,
warned about, and bounded: whatever their grades, the difference lies in the range the report gives."""

from __future__ import annotations

import json

import pytest
from _stats_helpers import run_compare, write_records

BASELINE = {"q0": [True, False], "q1": [False, False], "q2": [True, True], "q3": [False, False]}  # 37.5%
TUNED = {"q0": [True, True], "q1": [True, False], "q2": [True, True], "q3": [False, False]}  # 62.5%


def _mark_unsettled(path, samples: set[tuple[str, int]]):
    records = [json.loads(line) for line in path.read_text().splitlines()]
    for record in records:
        if (record["id"], record["sample"]) in samples:
            record["unsettled"] = True
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_unsettled_samples_are_counted_wrong_warned_about_and_bounded(capsys, caplog, tmp_path):
    base = _mark_unsettled(write_records(tmp_path / "base.jsonl", BASELINE), {("q0", 1), ("q3", 1)})
    tuned = write_records(tmp_path / "tuned.jsonl", TUNED, model="t")
    code, out, _ = run_compare(capsys, base, tuned)
    assert code == 0
    assert "37.5%" in out and "62.5%" in out and "difference +25.0 points" in out  # counted wrong, as before
    assert "UNSETTLED: 2 baseline and 0 tuned samples were never graded" in out
    # Were both baseline samples correct, q0 and q3 would each gain half a question: 25 points of 4 questions.
    assert "the difference lies between +0.0 and +25.0 points" in out
    verdict = out.strip().splitlines()[-1]
    assert verdict.startswith("Verdict: ") and "Caveat: 2 samples were never graded" in verdict
    assert f"{base}: 2 of 8 samples; {tuned}: 0 of 8 samples" in caplog.text
    assert "may be biased" in caplog.text and "grades them again" in caplog.text
    code, out, _ = run_compare(capsys, base, tuned, "--json", "--swaps", tmp_path / "swaps.md")
    assert json.loads(out)["unsettled"] == {"baseline": 2, "tuned": 0, "difference_range": [0.0, 0.25]}
    swaps = (tmp_path / "swaps.md").read_text()  # q0 and q1 are swap-ins; q0's baseline miss may be a timeout
    assert "### q0: baseline 1/2 (1 unsettled, counted wrong) -> tuned 2/2" in swaps
    assert "**Baseline** (sample 1, wrong, grade unsettled, answered '-1')" in swaps
    caplog.clear()
    _mark_unsettled(tuned, {("q1", 1)})
    code, out, _ = run_compare(capsys, base, tuned, "--json")
    assert json.loads(out)["unsettled"]["difference_range"] == [0.0, 0.375]  # the tuned one could gain too


def test_files_without_unsettled_samples_say_nothing_of_them(capsys, caplog, tmp_path):
    base = write_records(tmp_path / "base.jsonl", BASELINE)
    tuned = write_records(tmp_path / "tuned.jsonl", TUNED, model="t")
    code, out, _ = run_compare(capsys, base, tuned)
    assert code == 0 and "UNSETTLED" not in out and "never graded" not in caplog.text
    code, out, _ = run_compare(capsys, base, tuned, "--json")
    assert json.loads(out)["unsettled"] == {"baseline": 0, "tuned": 0, "difference_range": [0.25, 0.25]}


@pytest.mark.parametrize(("unsettled", "correct"), [(True, True), ("yes", False)])
def test_an_unsettled_flag_that_contradicts_its_record_is_refused(capsys, tmp_path, unsettled, correct):
    base = write_records(tmp_path / "base.jsonl", BASELINE)
    tuned = write_records(tmp_path / "tuned.jsonl", TUNED, model="t")
    lines = tuned.read_text().splitlines()
    lines[0] = json.dumps({**json.loads(lines[0]), "correct": correct, "unsettled": unsettled})
    tuned.write_text("\n".join(lines) + "\n")
    code, _, err = run_compare(capsys, base, tuned)
    assert code == 2 and f'{tuned} line 1: "unsettled" must be true' in err


def test_under_intersect_only_the_paired_questions_count(capsys, caplog, tmp_path):
    base = _mark_unsettled(write_records(tmp_path / "base.jsonl", BASELINE), {("q0", 1)})
    extra = {**TUNED, "q9": [False, False]}
    tuned = _mark_unsettled(write_records(tmp_path / "tuned.jsonl", extra, model="t"), {("q9", 0)})
    code, out, _ = run_compare(capsys, base, tuned, "--intersect")
    assert code == 0 and "UNSETTLED: 1 baseline and 0 tuned samples" in out
    assert f"{base}: 1 of 8 samples; {tuned}: 0 of 8 samples" in caplog.text


def test_held_out_files_get_a_fix_that_works_for_them(capsys, caplog, tmp_path):
    """Re-running "the evaluate.py command that wrote" a held-out file (heldout/step-N.jsonl, written by training)
    is no fix: evaluate.py refuses to append to held-out records."""
    base = write_records(tmp_path / "step-0.jsonl", BASELINE, extra={"step": 0})
    tuned = _mark_unsettled(write_records(tmp_path / "step-40.jsonl", TUNED, extra={"step": 40}), {("q1", 1)})
    code, out, _ = run_compare(capsys, base, tuned)
    assert code == 0 and "command that wrote" not in caplog.text and "re-run their" not in out
    for text in (caplog.text, out):
        assert "held-out records (training step 40) are not graded again" in text
        assert "recipes/evaluate.py --split heldout --adapter OUTPUT_DIR/checkpoint-40" in text
