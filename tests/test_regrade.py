"""recipes/regrade.py: evaluation records graded again with this grader from their saved completions, in evaluate.py's
files and held-out step files alike; a file it cannot grade faithfully, or did not write, is left untouched."""

from __future__ import annotations

import json
import logging

import pytest

from recipes import regrade
from recipes.evaluation.generation import Completion
from recipes.evaluation.out_lock import hold
from recipes.evaluation.records import make_record
from rewards.answers import GRADER_VERSION

# "#### 1 000" was read as 0 by grader version 1 and is 1000 since version 2.
SPACED = "She paid 1 000 dollars.\n#### 1 000"
PLAIN = "So 12 in all.\n#### 12"


def _record(qid: str, text: str, gold: str, style: str | None = "hash", **extra) -> dict:
    row = {"id": qid, "question": "How much?", "gold": gold}
    return make_record(row, 0, Completion(text, 9), style, {"model": "m", "answer_style": style}, **extra)


def _version_1(record: dict) -> dict:
    """As grader version 1 wrote it: no grader_version, no answer_style, and its reading of spaced digits."""
    old = {k: v for k, v in record.items() if k not in ("grader_version", "answer_style")}
    return old | ({"correct": False, "pred": "0"} if record["completion"] == SPACED else {})


def _write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _read(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(autouse=True)
def _info(caplog):
    caplog.set_level(logging.INFO, "recipes.evaluate")  # the command line's level (common.logs)


def _run(capsys, *argv):
    code = regrade.main([str(a) for a in argv])
    return code, capsys.readouterr().err


def test_an_older_graders_file_is_graded_again_with_the_given_style_which_it_then_records(
    tmp_path, capsys, caplog
):
    current = [_record("q1", SPACED, "1000"), _record("q2", PLAIN, "12"), _record("q3", PLAIN, "13")]
    path = _write(tmp_path / "base.jsonl", [_version_1(r) for r in current])
    code, err = _run(capsys, path, "--style", "hash")
    assert code == 0, err
    assert _read(path) == current  # exactly what this grader writes: q1 right now, the others as they were
    assert "graded 3 samples again that grader version 1 graded" in caplog.text
    assert _run(capsys, path)[0] == 0  # its style recorded, no --style needed: and nothing left to do
    assert (
        _read(path) == current
        and "all 3 records graded by this grader and settled; nothing to do" in caplog.text
    )


def test_a_file_that_does_not_say_its_style_needs_style_and_is_left_untouched(tmp_path, capsys):
    path = _write(tmp_path / "base.jsonl", [_version_1(_record("q1", SPACED, "1000"))])
    before = path.read_bytes()
    code, err = _run(capsys, path)
    assert code == 2 and path.read_bytes() == before
    assert f"error: {path}: its records do not say which answer style they were graded in" in err
    assert (
        "Pass --style: the style of the format reward of the recipe" in err and "or any for a recipe" in err
    )


def test_a_style_other_than_the_recorded_one_is_refused(tmp_path, capsys):
    path = _write(tmp_path / "base.jsonl", [{**_record("q1", SPACED, "1000"), "grader_version": 1}])
    before = path.read_bytes()
    code, err = _run(capsys, path, "--style", "tags")
    assert code == 2 and path.read_bytes() == before
    assert "graded in answer style hash, and --style tags would grade their format_ok" in err
    current = _write(
        tmp_path / "current.jsonl", [_record("q1", PLAIN, "12")]
    )  # nothing to grade: refused all the same
    assert _run(capsys, current, "--style", "tags")[0] == 2


def test_held_out_step_records_are_graded_again(tmp_path, capsys):
    current = [_record(f"q{i}", SPACED, "1000", "tags", step=400) for i in range(2)]
    path = _write(
        tmp_path / "step-400.jsonl", [{**r, "grader_version": 1, "correct": False} for r in current]
    )
    assert _run(capsys, path)[0] == 0
    assert _read(path) == current
    assert [r["correct"] for r in _read(path)] == [True, True]


def test_unsettled_grades_are_settled_and_a_current_file_is_not_rewritten(tmp_path, capsys, caplog):
    path = _write(
        tmp_path / "tuned.jsonl", [{**_record("q1", PLAIN, "12"), "correct": False, "unsettled": True}]
    )
    assert _run(capsys, path)[0] == 0
    assert "graded 1 unsettled samples again: 1 settled, 0 still unsettled" in caplog.text
    assert _read(path) == [_record("q1", PLAIN, "12")]
    before = path.stat().st_mtime_ns
    assert _run(capsys, path)[0] == 0
    assert path.stat().st_mtime_ns == before


def test_a_cut_off_last_line_is_said_and_left_for_evaluate_py(tmp_path, capsys, caplog):
    path = tmp_path / "tuned.jsonl"
    whole = json.dumps(_record("q1", PLAIN, "12")) + "\n"
    path.write_text(whole + json.dumps(_record("q2", PLAIN, "12"))[:-20])
    written = path.read_bytes()
    assert _run(capsys, path)[0] == 0
    assert f"{path}: its last line is cut off (an interrupted write)" in caplog.text
    assert "re-run the evaluate.py command that wrote it" in caplog.text and path.read_bytes() == written


@pytest.mark.parametrize(
    "record, why",
    [
        ({"id": "q1", "sample": 0, "correct": True, "gold": "12"}, "lacks completion, format_ok, n_tokens"),
        (
            {"id": "q1", "sample": 0, "correct": True, "grader_version": 1, "completion": "12"},
            "lacks gold, format_ok, n_tokens",
        ),
    ],
)
def test_another_tools_file_is_refused_untouched(tmp_path, capsys, record, why):
    path = _write(tmp_path / "other.jsonl", [record])
    before = path.read_bytes()
    code, err = _run(capsys, path, "--style", "any")
    assert code == 2 and path.read_bytes() == before
    assert f"{path} record 1 {why}: it was not written by recipes/evaluate.py or held-out evaluation" in err


def test_a_newer_graders_file_and_a_file_being_written_are_refused_untouched(tmp_path, capsys):
    newer = _write(
        tmp_path / "newer.jsonl", [{**_record("q1", PLAIN, "12"), "grader_version": GRADER_VERSION + 1}]
    )
    before = newer.read_bytes()
    code, err = _run(capsys, newer)
    assert code == 2 and newer.read_bytes() == before and "newer than this one" in err
    busy = _write(tmp_path / "busy.jsonl", [_version_1(_record("q1", SPACED, "1000"))])
    before = busy.read_bytes()
    with hold(busy):  # an evaluate.py run appending to it
        code, err = _run(capsys, busy, "--style", "hash")
    assert code == 2 and busy.read_bytes() == before and "is being written by another evaluate.py run" in err


def test_a_missing_file_is_named(tmp_path, capsys):
    code, err = _run(capsys, tmp_path / "nope.jsonl")
    assert code == 2 and f"{tmp_path / 'nope.jsonl'}: no such file" in err


def test_a_file_of_several_styles_or_none_is_refused_untouched(tmp_path, capsys):
    mixed = _write(
        tmp_path / "mixed.jsonl",
        [{**_record("q1", PLAIN, "12", "hash"), "grader_version": 1}, _record("q2", PLAIN, "12", None)],
    )
    before = mixed.read_bytes()
    code, err = _run(capsys, mixed)
    assert code == 2 and mixed.read_bytes() == before
    assert f"{mixed} holds records graded in several answer styles (any, hash); left untouched." in err
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert _run(capsys, empty) == (2, f"error: {empty} holds no evaluation records; nothing to grade.\n")
    assert empty.read_text() == ""


@pytest.mark.parametrize("text", ['{"question": "q", "answer": "1"}\n', "id,sample\n"])
def test_a_file_of_something_else_is_refused_with_what_to_name_instead(tmp_path, capsys, text):
    """A data file given by mistake was refused with "Use a new --out file.", an option regrade.py does not have."""
    path = tmp_path / "train.jsonl"
    path.write_text(text)
    code, err = _run(capsys, path)
    assert code == 2 and path.read_text() == text and "--out file" not in err
    assert (
        "left untouched. Name a file recipes/evaluate.py wrote (--out), or a run's OUTPUT_DIR/heldout/step-N"
        in err
    )
