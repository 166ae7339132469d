"""What `python -m stats.compare` writes: the swaps report, and outputs that never replace a file it did not write."""

from __future__ import annotations

import json

import pytest
from _stats_helpers import run_compare, write_records

from stats._io import write_text_atomic
from stats.records import InputError


def test_an_output_never_replaces_an_input_or_a_folder(capsys, tmp_path):
    base = write_records(tmp_path / "base.md", {"q1": [True], "q2": [False]})  # records under an odd name
    tuned = write_records(tmp_path / "tuned.jsonl", {"q1": [True], "q2": [True]})
    before = base.read_bytes()
    code, out, err = run_compare(capsys, base, tuned, "--swaps", base)
    assert code == 2 and f"--swaps {base} is one of the input files" in err and out == ""
    assert base.read_bytes() == before
    (tmp_path / "plots.png").mkdir()
    code, out, err = run_compare(capsys, base, tuned, "--plot", tmp_path / "plots.png")
    assert code == 2 and "is a folder; give a file path" in err and out == ""


@pytest.mark.parametrize("suffix", [".png", ".pdf", ".svg", ".md", ".txt"])
def test_an_output_replaces_only_a_file_this_command_wrote(capsys, tmp_path, suffix):
    base = write_records(tmp_path / "base.jsonl", {"q1": [True], "q2": [False]})
    tuned = write_records(tmp_path / "tuned.jsonl", {"q1": [True], "q2": [True]})
    option = {".md": "--swaps", ".txt": "--report"}.get(suffix, "--plot")
    theirs = tmp_path / f"notes{suffix}"
    theirs.write_text("someone's own file")
    code, out, err = run_compare(capsys, base, tuned, option, theirs)
    assert code == 2 and f"{option} {theirs} exists and was not written by this command" in err and out == ""
    assert theirs.read_text() == "someone's own file"
    ours = tmp_path / f"ours{suffix}"
    assert run_compare(capsys, base, tuned, option, ours)[0] == 0
    assert run_compare(capsys, base, tuned, option, ours)[0] == 0  # its own output, written again
    with pytest.raises(InputError, match="exists and was not written by grpo-recipes' stats"):
        write_text_atomic(theirs, "replaced")  # the writer checks too, for callers that skip the command line
    assert theirs.read_text() == "someone's own file"


def test_the_report_file_holds_the_printed_report(capsys, tmp_path):
    base = write_records(tmp_path / "base.jsonl", {"q1": [True], "q2": [False]})
    tuned = write_records(tmp_path / "tuned.jsonl", {"q1": [True], "q2": [True]})
    code, out, _ = run_compare(capsys, base, tuned, "--report", tmp_path / "comparison.txt")
    written = (tmp_path / "comparison.txt").read_text()
    assert code == 0 and out.startswith("Paired comparison by question")
    assert written == out.rstrip("\n") + "\n\n(grpo-recipes stats: python -m stats.compare)\n"


def test_swaps_report_lists_swaps_and_examples(capsys, tmp_path):
    base_outcomes = {
        "qin": [False, False, False],
        "qout": [True, True, True],
        "qright": [True, True, False],
        "qwrong": [False, False, False],
        "qright2": [True, True, True],
        "qhalf": [True, False],
    }
    tuned_outcomes = {
        "qin": [True, True, False],
        "qout": [False, False, True],
        "qright": [True, True, True],
        "qwrong": [True, False, False],
        "qright2": [True, True, True],
        "qhalf": [True, True],
    }
    base = write_records(tmp_path / "b.jsonl", base_outcomes, model="baseline")
    tuned = write_records(tmp_path / "t.jsonl", tuned_outcomes, model="tuned")
    lines = [json.loads(x) for x in tuned.read_text().splitlines()]
    lines[0]["completion"] = "Let me compute:\n```python\nprint(0)\n```\nThe answer is 0"
    tuned.write_text("".join(json.dumps(x) + "\n" for x in lines))
    swaps = tmp_path / "swaps.md"
    code, _, _ = run_compare(capsys, base, tuned, "--swaps", swaps, "--examples", "1")
    assert code == 0
    text = swaps.read_text()
    assert "| swap-in (baseline wrong, tuned right) | 2 |" in text
    assert "| swap-out (baseline right, tuned wrong) | 1 |" in text
    assert "| both right | 2 |" in text and "| both wrong | 1 |" in text
    assert "more than half of its samples" in text
    ins = text.split("## Swap-ins")[1].split("## Swap-outs")[0]
    # largest accuracy change first (+2/3 before +1/2); 1 of 2 right is no majority, so qhalf is a swap-in
    assert ins.index("### qin: baseline 0/3 -> tuned 2/3") < ins.index("### qhalf: baseline 1/2 -> tuned 2/2")
    assert "Question qin: what is 0?" in ins and "**Gold:** 0" in ins
    assert "**Baseline** (sample 0, wrong, answered '-1')" in ins
    assert "baseline sample 0 of qin: the answer is -1" in ins
    assert "**Tuned** (sample 0, right, answered '0')" in ins
    assert "````text\nLet me compute:\n```python\nprint(0)\n```\nThe answer is 0\n````" in ins
    outs = text.split("## Swap-outs")[1].split("## Both right")[0]
    assert (
        "### qout: baseline 3/3 -> tuned 1/3" in outs and "tuned sample 0 of qout: the answer is -2" in outs
    )
    both_right = text.split("## Both right (up to 1 examples)")[1].split("## Both wrong")[0]
    assert both_right.count("### ") == 1 and "### qright" in both_right
    both_wrong = text.split("## Both wrong (up to 1 examples)")[1]
    assert "### qwrong: baseline 0/3 -> tuned 1/3" in both_wrong
    assert (
        "tuned sample 1 of qwrong: the answer is -4" in both_wrong
    )  # the wrong sample agrees with the verdict
