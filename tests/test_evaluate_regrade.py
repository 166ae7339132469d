"""recipes.evaluation.records.regrade on a file of mixed records: what it grades again (older or newer grader
versions, unsettled grades), what it leaves alone and keeps, what it says, and the repair it hands back."""

from __future__ import annotations

import json
import logging

import pytest

from recipes.evaluation.records import read_records, regrade
from rewards.answers import GRADER_VERSION
from tests._evaluate_helpers import lines, timing_out_verifier

META = {"model": "m"}  # make_record's run settings
TYPESET = {"gold": "1000", "completion": "So she has 1 000 beads.\n#### 1 000"}  # right since version 2


def _record(qid: str, **fields) -> dict:
    base = {"id": qid, "sample": 0, "correct": False, "correct_strict": False, "correct_lenient": False}
    return base | {"format_ok": True, "pred": "0"} | TYPESET | fields


def _write(path, records, tail: str = "") -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail)


def test_every_record_another_grader_version_graded_is_graded_again_and_current_ones_kept(tmp_path, caplog):
    current = _record("current", correct=True, pred="1000", grader_version=GRADER_VERSION)
    unversioned = [_record("old-a"), _record("old-b")]  # version 1: written before records carried one
    unsettled = _record("unsettled", unsettled=True, grader_version=GRADER_VERSION)
    out = tmp_path / "base.jsonl"
    _write(
        out, [current, *unversioned, unsettled]
    )  # (a newer version's file is refused: test_evaluate_unsettled)
    records, repair = read_records(out)
    with caplog.at_level(logging.INFO, logger="recipes.evaluate"):
        assert regrade(out, records, repair, "hash") is None
    again = lines(out)
    assert [r["id"] for r in again] == ["current", "old-a", "old-b", "unsettled"]
    assert again[0] == current
    for record in again[1:]:
        assert (record["correct"], record["pred"], record["grader_version"]) == (True, "1000", GRADER_VERSION)
        assert "unsettled" not in record
    assert (
        f"{out}: graded 2 samples again that grader version 1 graded "
        f"(this one is {GRADER_VERSION}); their grades may differ." in caplog.text
    )
    assert f"{out}: graded 1 unsettled samples again: 1 settled, 0 still unsettled." in caplog.text


def test_only_what_was_graded_again_is_reported(tmp_path, caplog):
    older, unsettled = tmp_path / "older.jsonl", tmp_path / "unsettled.jsonl"
    _write(older, [_record("q")])
    _write(unsettled, [_record("q", unsettled=True, grader_version=GRADER_VERSION)])
    with caplog.at_level(logging.INFO, logger="recipes.evaluate"):
        regrade(older, *read_records(older), "hash")
        assert "grader version 1 graded" in caplog.text and "unsettled samples again" not in caplog.text
        caplog.clear()
        regrade(unsettled, *read_records(unsettled), "hash")
        assert "unsettled samples again" in caplog.text and "grader version" not in caplog.text


def test_a_current_file_is_left_untouched_and_its_repair_handed_back(tmp_path, caplog):
    """Nothing to grade again: the file is not rewritten, so its half-written last line is still the caller's to
    drop before appending."""
    out = tmp_path / "base.jsonl"
    _write(
        out, [_record("q", correct=True, pred="1000", grader_version=GRADER_VERSION)], tail='{"id": "r", "sa'
    )
    before = out.read_text()
    records, repair = read_records(out)
    assert repair == "drop"
    with caplog.at_level(logging.INFO):
        assert regrade(out, records, repair, "hash") == "drop"
    assert out.read_text() == before and caplog.text == ""


def test_an_unsettled_lenient_grade_alone_marks_the_lm_eval_grades_unsettled(monkeypatch, tmp_path, caplog):
    """The strict grade settled (the <answer> tag's 3: surely not 1/2) while the lenient one (the boxed 2/4) ran out
    of time: correct_lenient read false for want of a verdict, which unsettled_lm_eval says; a busy re-grade
    counts it still unsettled, a quiet one settles it."""
    from recipes.evaluation.generation import Completion
    from recipes.evaluation.records import make_record

    busy = timing_out_verifier(monkeypatch)
    row = {"id": "q", "question": "Half?", "gold": r"\frac{1}{2}"}
    record = make_record(
        row, 0, Completion(r"<answer>3</answer> Or is it \boxed{\frac{2}{4}}?", 9), "tags", META
    )
    assert (record["correct_strict"], record["correct_lenient"], record["unsettled_lm_eval"]) == (
        False,
        False,
        True,
    )
    # The other way round: the answer grade (boxed 3) settled, the strict one (the tag's 2/4) not.
    strict = make_record(
        row, 1, Completion(r"<answer>\frac{2}{4}</answer> Or is it \boxed{3}?", 9), "tags", META
    )
    assert ("unsettled" in strict, strict["unsettled_lm_eval"]) == (False, True)
    out = tmp_path / "out.jsonl"
    _write(out, [record, strict])
    with caplog.at_level(logging.INFO, logger="recipes.evaluate"):
        regrade(out, *read_records(out), "tags")  # still busy: both stay unsettled, and are counted so
    assert f"{out}: graded 2 unsettled samples again: 0 settled, 2 still unsettled." in caplog.text
    assert [r["unsettled_lm_eval"] for r in lines(out)] == [True, True]
    busy["on"] = False  # a quieter machine
    regrade(out, *read_records(out), "tags")
    again, _ = lines(out)
    assert (again["correct_strict"], again["correct_lenient"], again["correct"]) == (False, True, True)
    assert "unsettled_lm_eval" not in again and "unsettled" not in again


@pytest.mark.parametrize(("style", "strict_and_format"), [("hash", False), ("tags", True)])
def test_the_strict_grade_and_format_ok_follow_the_recipe_style_when_written_and_re_graded(
    tmp_path, style, strict_and_format
):
    """An <answer> tag is the tags style's marker, not the hash style's: under "hash" it is right (correct,
    lenient) but neither strict-match nor well formatted, whether make_record or a re-grade writes the record."""
    from recipes.evaluation.generation import Completion
    from recipes.evaluation.records import make_record

    text = "So 7.\n<answer>7</answer>"
    record = make_record(
        {"id": "q", "question": "?", "gold": "7"}, 0, Completion(text, 5), style, {"model": "m"}
    )
    out = tmp_path / "out.jsonl"
    _write(out, [_record("q", gold="7", completion=text)])
    regrade(out, *read_records(out), style)
    [again] = lines(out)
    for graded in (record, again):
        assert (graded["correct"], graded["correct_lenient"]) == (True, True)
        assert (graded["correct_strict"], graded["format_ok"]) == (strict_and_format, strict_and_format)
