r"""Evaluation and a grader that runs out of time: an unsettled grade is asked again, what stays unsettled is
marked in its record ("unsettled": true) and counted in the summary, and a re-run grades it again from its saved
completion, generating nothing."""

from __future__ import annotations

import json
import re

import pytest
from _rewards_helpers import forget_grader_answers

from recipes.evaluation import generation
from recipes.evaluation.generation import Completion
from recipes.evaluation.records import make_record
from recipes.evaluation.summary import summary
from rewards import _symbolic
from tests._evaluate_helpers import lines, run, timing_out_verifier

MATRIX, OTHER = r"\begin{pmatrix} 2 \\ 9 \end{pmatrix}", r"\begin{pmatrix} 1 \\ 3 \end{pmatrix}"
ANSWER = Completion(rf"So $A = \boxed{{{MATRIX}}}$.", 12)
# A record left unsettled by an earlier run, whose completion settles at once now.
UNSETTLED = {"id": "q", "sample": 0, "correct": False, "unsettled": True, "gold": "7", "completion": "#### 7"}


def _record(gold: str) -> dict:
    row = {"id": f"math-{gold}", "question": "Find A.", "gold": gold}
    return make_record(row, 0, ANSWER, "boxed", {"model": "m"})


def test_an_unsettled_grade_is_asked_again_and_what_stays_unsettled_says_so(busy, monkeypatch):
    record = _record(MATRIX)
    assert (record["correct"], record["unsettled"]) == (False, True)
    assert ("fingerprint", True) in busy["asked"]  # asked patiently
    busy["patient_answers"] = True
    assert _record(MATRIX)["unsettled"]  # a patient failure is not asked again for PATIENT_RETRY_AFTER_S
    monkeypatch.setattr(_symbolic, "PATIENT_RETRY_AFTER_S", 0.0)
    record = _record(MATRIX)
    assert record["correct"] and record["correct_strict"] and "unsettled" not in record
    record = _record(OTHER)
    assert (record["correct"], "unsettled" in record) == (False, False)  # a settled no match


def test_the_summary_counts_unsettled_samples_only_when_there_are_some():
    records = [
        {"id": "q1", "sample": 0, "correct": True, "format_ok": True},
        {"id": "q1", "sample": 1, "correct": False, "format_ok": True, "unsettled": True},
    ]
    text = summary(records, 1, "out.jsonl")
    assert re.search(r"unsettled, counted wrong +1/2 +50.0%", text) and "Re-run this command" in text
    assert "unsettled" not in summary(records[:1], 1, "out.jsonl")


def test_a_rerun_grades_unsettled_samples_again_without_generating(busy, tmp_path, capsys, monkeypatch):
    data = tmp_path / "matrices_test.jsonl"
    rows = [{"problem": f"Find matrix {i}.", "answer": gold, "unique_id": f"test/precalculus/{i}.json"}
            for i, gold in enumerate((MATRIX, OTHER))]  # fmt: skip
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    monkeypatch.setattr(
        generation.HFGenerator, "generate", lambda self, prompts, seeds: [ANSWER] * len(prompts)
    )
    out = tmp_path / "base.jsonl"
    argv = ["math_tiny", f"data.eval_source={data}", "--samples", "2", "--max-new-tokens", "8", "--out", out]
    code, stdout, _ = run(capsys, *argv)
    assert code == 0
    assert [(r["correct"], r.get("unsettled")) for r in lines(out)] == [(False, True)] * 4
    assert re.search(r"unsettled, counted wrong +4/4 +100.0%", stdout)
    # Later, on a quieter machine: the grader answers given time, and no model is loaded for the re-grade.
    forget_grader_answers(monkeypatch)
    busy["patient_answers"] = True
    monkeypatch.setattr(generation, "load_generator", lambda *a, **k: pytest.fail("generated for a re-grade"))
    code, stdout, _ = run(capsys, *argv)
    assert code == 0
    graded = {(r["id"], r["sample"]): (r["correct"], r.get("unsettled")) for r in lines(out)}
    assert sorted(graded.values()) == [(False, None)] * 2 + [(True, None)] * 2
    assert "unsettled, counted wrong" not in stdout and re.search(r"correct +2/4 ", stdout)


def test_an_unsettled_strict_or_lenient_grade_is_marked_and_graded_again(monkeypatch, tmp_path):
    """The answer grade settled (boxed 3: surely not 1/2) while the strict one (the <answer> tag's 2/4) ran out of
    time: correct_strict read false, with nothing in the record to say so, and a re-run never graded it again."""
    from recipes.evaluation.records import read_records, regrade

    busy = timing_out_verifier(monkeypatch)
    row = {"id": "q", "question": "Half?", "gold": r"\frac{1}{2}"}
    text = Completion(r"<answer>\frac{2}{4}</answer> Or is it \boxed{3}?", 9)
    record = make_record(row, 0, text, "tags", {"model": "m"})
    assert (record["correct"], "unsettled" in record, record["correct_strict"]) == (False, False, False)
    assert record["unsettled_lm_eval"] is True
    out = tmp_path / "out.jsonl"
    out.write_text(json.dumps(record) + "\n")
    busy["on"] = False  # a quieter machine
    records, repair = read_records(out)
    regrade(out, records, repair, "tags")
    [again] = lines(out)
    assert again["correct_strict"] is True and "unsettled_lm_eval" not in again and again["correct"] is False


def test_a_second_run_on_the_same_out_file_is_refused_while_the_first_holds_it(tmp_path, capsys):
    """Two runs on one file lost records: the second one's re-grade rewrote it with what it had read, and the first
    one's later appends went to the file that rewrite replaced (see recipes/evaluation/out_lock.py)."""
    from recipes.evaluation.out_lock import hold

    out = tmp_path / "base.jsonl"
    out.write_text(json.dumps(UNSETTLED) + "\n")
    before = out.read_text()
    with hold(out):  # the first run, still going
        code, _, err = run(capsys, "gsm8k_tiny", "--out", out)
        assert code == 2 and f"{out} is being written by another evaluate.py run (pid " in err
        assert out.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["base.jsonl"]  # the lock goes with its run


def test_a_re_grade_that_drops_a_half_written_last_line_says_so(tmp_path, caplog):
    """The re-grade's rewrite dropped a crash's half line without the warning repair_end gives for it."""
    from recipes.evaluation.records import read_records, regrade

    out = tmp_path / "base.jsonl"
    out.write_text(json.dumps(UNSETTLED) + '\n{"id": "q", "sam')
    records, repair = read_records(out)
    with caplog.at_level("WARNING", logger="recipes.evaluate"):
        assert regrade(out, records, repair, None) is None
    assert "dropped an incomplete last line" in caplog.text and len(lines(out)) == 1


def test_an_out_file_where_locks_are_not_supported_is_written_unguarded(tmp_path, monkeypatch):
    """Some FUSE mounts (a Colab Drive folder) refuse flock: the run must not fail for want of a lock."""
    import errno

    from recipes.evaluation import out_lock

    def no_locks(fd, operation):
        raise OSError(errno.ENOSYS, "Function not implemented")

    monkeypatch.setattr(out_lock.fcntl, "flock", no_locks)
    with out_lock.hold(tmp_path / "base.jsonl"):
        pass
    assert not list(tmp_path.iterdir())


def test_records_an_older_grader_graded_are_graded_again_and_current_ones_left_alone(tmp_path, caplog):
    """A release that grades "#### 1 000" as 1000 (before: 0) left files graded by the old grader beside new ones:
    stats.compare refuses the pair, and a re-run of the old file's command grades it again."""
    from recipes.evaluation.records import read_records, regrade
    from rewards.answers import GRADER_VERSION

    old = {"id": "q", "sample": 0, "correct": False, "correct_strict": False, "correct_lenient": False}
    old |= {
        "format_ok": False,
        "pred": "0",
        "gold": "1000",
        "completion": "So she has 1 000 beads.\n#### 1 000",
    }
    out = tmp_path / "base.jsonl"
    out.write_text(json.dumps(old) + "\n")
    records, repair = read_records(out)
    with caplog.at_level("WARNING", logger="recipes.evaluate"):
        assert regrade(out, records, repair, "hash") is None
    [again] = lines(out)
    assert (again["correct"], again["pred"], again["format_ok"]) == (True, "1000", True)
    assert (again["correct_strict"], again["correct_lenient"]) == (False, False)  # lm-eval reads 1 and 000
    assert again["grader_version"] == GRADER_VERSION
    assert (
        f"graded 1 samples again that grader version 1 graded (this one is {GRADER_VERSION})" in caplog.text
    )

    text = out.read_text()
    records, repair = read_records(out)
    assert regrade(out, records, repair, "hash") is repair and out.read_text() == text  # current: untouched


def test_records_a_newer_grader_graded_are_not_graded_again_by_this_older_one(tmp_path):
    """An older checkout (a notebook pinned to an earlier release) re-running the command rewrote a newer grader's
    grades with its own: the file lost them, and then read as graded by the older version."""
    from recipes.evaluation.generation import EvaluationError
    from recipes.evaluation.records import read_records, regrade
    from rewards.answers import GRADER_VERSION

    newer = {**UNSETTLED, "unsettled": False, "correct": True, "grader_version": GRADER_VERSION + 1}
    out = tmp_path / "base.jsonl"
    out.write_text(json.dumps(newer) + "\n")
    text = out.read_text()
    records, repair = read_records(out)
    with pytest.raises(EvaluationError, match=rf"grader version {GRADER_VERSION + 1}.*newer"):
        regrade(out, records, repair, "hash")
    assert out.read_text() == text
