"""Per-subject and per-level comparisons (stats.groups), their report, JSON and forest plot; uneven samples."""

from __future__ import annotations

import itertools
import json
import logging
import math
import statistics

import pytest
from _stats_helpers import outcomes_from_counts, run_cli, write_records
from scipy import stats as sps

from stats.compare import compare, main
from stats.plots import draw_comparison
from stats.report import format_text, to_json

SAMPLES = 4
# Algebra clearly improves on every question; Geometry moves both ways and nets to zero.
QUESTIONS = {
    "Algebra": ([0, 1, 1, 2, 0, 1, 2, 1, 0, 1], [3, 4, 3, 4, 2, 4, 4, 3, 3, 4]),
    "Geometry": ([2, 1, 3, 2, 1, 2, 3, 1, 2, 2], [2, 2, 2, 3, 1, 1, 3, 2, 1, 2]),
    "Solo": ([0], [4]),
}


def _meta() -> dict[str, dict]:
    """Question id -> subject, level and both models' correct counts; g09's level is unknown."""
    meta = {}
    for subject, (base, tuned) in QUESTIONS.items():
        for i, (b, t) in enumerate(zip(base, tuned)):
            qid = f"{subject[0].lower()}{i:02d}"
            level = None if qid == "g09" else 3 if subject == "Solo" else 1 + i % 3
            meta[qid] = {"subject": subject, "level": level, "base": b, "tuned": t}
    return meta


def _write(path, which: str, meta: dict, *, keys=("subject", "level"), samples: dict | None = None):
    """One line per sample, question by question (line = position + 1), with the chosen optional keys."""
    lines = []
    for qid, m in meta.items():
        for k in range((samples or {}).get(qid, SAMPLES)):
            rec = {"id": qid, "sample": k, "correct": k < m[which], "gold": "1"}
            rec.update({key: m[key] for key in keys})
            lines.append(json.dumps(rec))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def math_files(tmp_path):
    meta = _meta()
    return _write(tmp_path / "base.jsonl", "base", meta), _write(tmp_path / "tuned.jsonl", "tuned", meta)


def _expected(qids: list[str]) -> dict:
    """Difference, t interval and exact sign-flip p computed here, from the counts, without stats code."""
    meta = _meta()
    diffs = [(meta[q]["tuned"] - meta[q]["base"]) / SAMPLES for q in qids]
    n, mean = len(diffs), statistics.fmean(diffs)
    half = sps.t.ppf(0.975, n - 1) * statistics.stdev(diffs) / math.sqrt(n)
    nonzero = [round(d * SAMPLES) for d in diffs if d]
    observed = abs(sum(nonzero))
    flips = [
        abs(sum(s * d for s, d in zip(signs, nonzero)))
        for signs in itertools.product((1, -1), repeat=len(nonzero))
    ]
    p = sum(f >= observed for f in flips) / len(flips)
    return {"difference": mean, "ci95": (mean - half, mean + half), "p": p}


def _holm(pvalues: list[float]) -> list[float]:
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    adjusted, running = [0.0] * len(pvalues), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _forest(fig) -> list:
    """The figure's forest-plot panels (per group): one, or none without groups."""
    return [ax for ax in fig.axes if ax.get_title().startswith("Per group")]


def test_per_subject_and_level_numbers_match_an_independent_computation(capsys, math_files):
    code, out, _ = _run(capsys, *math_files, "--json")
    assert code == 0
    groups = json.loads(out)["groups"]
    meta = _meta()
    by_subject = {g["value"]: g for g in groups["subject"]}
    by_level = {g["value"]: g for g in groups["level"]}
    assert list(by_subject) == ["Algebra", "Geometry", "Solo"] and list(by_level) == [1, 2, 3, None]
    tested = [
        (g, sorted(q for q, m in meta.items() if m[key] == g["value"]))
        for key, table in (("subject", by_subject), ("level", by_level))
        for g in table.values()
        if g["questions"] >= 2
    ]
    for g, qids in tested:
        want = _expected(qids)
        assert g["questions"] == len(qids)
        assert g["difference"]["estimate"] == pytest.approx(want["difference"])
        assert g["difference"]["ci95"] == pytest.approx(want["ci95"])
        assert g["p_value"] == pytest.approx(want["p"])
    holm = _holm([g["p_value"] for g, _ in tested])
    assert [g["p_holm"] for g, _ in tested] == pytest.approx(holm)
    assert groups["correction"] == "holm" and groups["corrected_p_values"] == len(tested) == 5

    algebra, geometry = by_subject["Algebra"], by_subject["Geometry"]
    assert algebra["difference"]["ci95"][0] > 0  # the improving subject's interval excludes 0
    assert algebra["p_holm"] < 0.05
    low, high = geometry["difference"]["ci95"]
    assert low < 0 < high and geometry["difference"]["estimate"] == 0
    assert geometry["p_holm"] == 1.0


def test_groups_too_small_to_test_are_shown_with_n_and_why(capsys, math_files):
    code, out, _ = _run(capsys, *math_files, "--json")
    groups = json.loads(out)["groups"]
    for table, value in (("subject", "Solo"), ("level", None)):
        (small,) = [g for g in groups[table] if g["value"] == value]
        assert small["questions"] == 1 and small["p_value"] is None and small["p_holm"] is None
        assert small["difference"]["ci95"] is None
        assert small["undefined"] == "1 question: too few for an interval or a test (needs at least 2)"
    assert groups["subject"][2]["difference"]["estimate"] == 1.0  # Solo: 0/4 -> 4/4

    code, out, _ = _run(capsys, *math_files)
    assert code == 0
    section = out.split("Per group")[1].split("Why:")[0]
    assert "Holm-adjusted for multiple comparisons over the 5 per-group p-values" in section
    assert "the intervals are not adjusted" in section
    rows = {line.split("  ")[1].strip(): line for line in section.splitlines() if line.startswith("  ")}
    assert rows["Solo"].split()[1] == "1"  # n
    assert rows["Solo"].endswith(
        "no p-value: 1 question: too few for an interval or a test (needs at least 2)"
    )
    assert "level unknown" in rows and rows["level unknown"].split()[2] == "1"
    assert " +62.5 " in rows["Algebra"] and " +0.0 " in rows["Geometry"]
    # 6 questions of Level 2, 5 of them changed: the exact test cannot reach 0.05, and the report says so.
    assert "(5 nonzero differences: p cannot go below 0.0625)" in rows["Level 2"]
    assert out.strip().splitlines()[-1].startswith("Verdict:")  # the overall verdict stays last


def test_the_overall_comparison_is_the_same_with_or_without_subject_and_level(tmp_path, math_files):
    meta = _meta()
    plain = (
        _write(tmp_path / "pb.jsonl", "base", meta, keys=()),
        _write(tmp_path / "pt.jsonl", "tuned", meta, keys=()),
    )
    with_groups, without = compare(*math_files), compare(*plain)
    assert without.groups is None
    grouped_json = to_json(with_groups)
    assert set(grouped_json) - set(to_json(without)) == {"groups"}
    del grouped_json["groups"]
    for side in ("baseline", "tuned"):
        grouped_json[side]["file"] = to_json(without)[side]["file"]
    assert grouped_json == to_json(without)
    assert "Per group" not in format_text(without) and "Holm" not in format_text(without)
    assert not _forest(draw_comparison(without))


def test_gsm8k_records_give_no_group_output(capsys, tmp_path):
    base = write_records(tmp_path / "b.jsonl", outcomes_from_counts([1, 2, 0, 3, 2], 3))
    tuned = write_records(tmp_path / "t.jsonl", outcomes_from_counts([3, 2, 1, 3, 3], 3))
    code, out, err = _run(capsys, base, tuned, "--json")
    assert code == 0 and err == "" and "groups" not in json.loads(out)
    code, out, err = _run(capsys, base, tuned)
    assert code == 0 and err == "" and "Per group" not in out and "Note:" not in out


def test_forest_panel_is_drawn_and_written(capsys, tmp_path, math_files):
    fig = draw_comparison(compare(*math_files))
    [forest] = _forest(fig)
    labels = [t.get_text() for t in forest.get_yticklabels()]
    assert labels == [
        "Algebra (n=10)",
        "Geometry (n=10)",
        "Solo (n=1)",
        "Level 1 (n=7)",
        "Level 2 (n=6)",
        "Level 3 (n=7)",
        "level unknown (n=1)",
    ]
    assert len(forest.containers) == 5  # an interval for each group of 2+ questions
    # Seven rows, not all with a p-value: "over N groups" read as a count of the rows.
    corrected = compare(*math_files).groups.corrected
    assert 0 < corrected < len(labels)
    assert forest.get_title().endswith(f"Holm-adjusted over the {corrected} groups that have one")
    algebra_bar = forest.containers[0].lines[0].get_xdata()[0]
    assert algebra_bar == pytest.approx(100 * _expected([f"a{i:02d}" for i in range(10)])["difference"])
    assert any(
        line.get_linestyle() == "--"
        and line.get_xdata()[0] == pytest.approx(100 * compare(*math_files).difference)
        for line in forest.lines
    )
    plot = tmp_path / "cmp.png"
    code, _, err = _run(capsys, *math_files, "--plot", plot)
    assert code == 0 and f"wrote {plot}" in err
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["base.jsonl", "cmp.png", "tuned.jsonl"]


def test_an_all_wrong_comparison_draws_a_readable_figure(tmp_path):
    """No difference anywhere: no p-value to adjust, a forest axis a few points wide, notes above 0% points."""
    meta = {qid: {**m, "base": 0, "tuned": 0} for qid, m in _meta().items()}
    fig = draw_comparison(
        compare(_write(tmp_path / "b.jsonl", "base", meta), _write(tmp_path / "t.jsonl", "tuned", meta))
    )
    accuracy, [forest] = fig.axes[0], _forest(fig)
    assert forest.get_title().endswith("no group has a p-value (no difference, or too few questions)")
    low, high = forest.get_xlim()
    assert low <= -5 and high >= 5
    notes = [t for t in accuracy.texts if "0.0%\n[0.0, " in t.get_text()]  # Wilson's interval from 0%
    assert len(notes) == 2 and all(t.xyann[1] > 0 and t.get_va() == "bottom" for t in notes)


def _lines_of(path, qid):
    return [n for n, line in enumerate(path.read_text().splitlines(), 1) if json.loads(line)["id"] == qid]


def test_a_subject_that_changes_between_samples_is_refused(capsys, tmp_path, math_files):
    base, tuned = math_files
    records = [json.loads(line) for line in base.read_text().splitlines()]
    first, second = _lines_of(base, "a03")[:2]
    records[second - 1]["subject"] = "Geometry"
    base.write_text("".join(json.dumps(r) + "\n" for r in records))
    code, out, err = _run(capsys, base, tuned)
    assert code == 2 and out == ""
    assert (
        f"{base} line {second}: question 'a03' has subject 'Geometry', but {base} line {first} gives it "
        "'Algebra'. A question has one subject on every sample" in err
    )


def test_a_level_that_differs_between_the_files_is_refused(tmp_path, math_files):
    base, tuned = math_files
    records = [json.loads(line) for line in tuned.read_text().splitlines()]
    for n in _lines_of(tuned, "g04"):
        records[n - 1]["level"] = 5
    tuned.write_text("".join(json.dumps(r) + "\n" for r in records))
    proc = run_cli("stats.compare", base, tuned)
    assert proc.returncode == 2 and proc.stdout == "" and "Traceback" not in proc.stderr
    assert (
        f"Question 'g04' has level 2 in {base} line {_lines_of(base, 'g04')[0]} but 5 in {tuned} line "
        f"{_lines_of(tuned, 'g04')[0]}: the two files disagree" in proc.stderr
    )


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        (
            "level",
            "Level 3",
            "\"level\" must be an integer 1-5, or null when unknown, got 'Level 3'. Write 3 for",
        ),
        ("level", 6, '"level" must be an integer 1-5, or null when unknown, got 6.'),
        ("level", 2.0, '"level" must be an integer 1-5, or null when unknown, got 2.0.'),
        ("subject", "", '"subject" must be a non-empty string such as "Precalculus", got \'\'.'),
    ],
)
def test_wrongly_typed_subject_or_level_names_the_line(capsys, tmp_path, math_files, field, value, expected):
    base, tuned = math_files
    records = [json.loads(line) for line in base.read_text().splitlines()]
    records[6][field] = value
    base.write_text("".join(json.dumps(r) + "\n" for r in records))
    code, _, err = _run(capsys, base, tuned)
    assert code == 2 and f"{base} line 7: {expected}" in err


def test_a_key_missing_from_some_records_skips_that_breakdown_with_a_note(capsys, tmp_path):
    meta = _meta()
    base = _write(tmp_path / "b.jsonl", "base", meta)
    tuned = _write(tmp_path / "t.jsonl", "tuned", meta, keys=("subject",))
    code, out, _ = _run(capsys, base, tuned)
    assert code == 0
    total = len(meta) * SAMPLES
    assert (
        f"Note: no per-level breakdown: 'level' is missing from {total} records of {tuned} (e.g. question "
        "'a00', line 1); the breakdown needs it on every record of both files." in out
    )
    code, out, _ = _run(capsys, base, tuned, "--json")
    groups = json.loads(out)["groups"]
    assert "level" not in groups and [g["value"] for g in groups["subject"]] == [
        "Algebra",
        "Geometry",
        "Solo",
    ]
    assert set(groups["skipped"]) == {"level"}

    bare = _write(
        tmp_path / "bare.jsonl", "tuned", meta, keys=()
    )  # neither key: notes only, no table or panel
    code, out, _ = _run(capsys, base, bare)
    assert code == 0 and "Per group" not in out
    assert "Note: no per-subject breakdown" in out and "Note: no per-level breakdown" in out
    assert not _forest(draw_comparison(compare(base, bare)))


def test_unequal_samples_per_question_warn_with_count_and_example(caplog, tmp_path):
    base = write_records(tmp_path / "b.jsonl", outcomes_from_counts([1, 2, 0, 3], [3, 5, 4, 5]))
    tuned = write_records(tmp_path / "t.jsonl", outcomes_from_counts([2, 2, 1, 5], 5))
    with caplog.at_level(logging.WARNING, logger="stats.compare"):
        compare(base, tuned)
    (warning,) = caplog.records
    assert warning.levelno == logging.WARNING
    assert warning.getMessage().startswith(
        f"{base}: 2 of 4 questions have fewer samples than the others (3 to 5 per question; e.g. 'q00' has 3 of 5)"
    )
    caplog.clear()
    tuned_again = write_records(tmp_path / "t2.jsonl", outcomes_from_counts([2, 2, 2, 5], 5))
    with caplog.at_level(logging.WARNING, logger="stats.compare"):
        compare(tuned, tuned_again)
    assert caplog.records == []  # equal samples: no warning

    proc = run_cli("stats.compare", base, tuned, "--json")
    assert proc.returncode == 0
    assert f"WARNING: {base}: 2 of 4 questions have fewer samples" in proc.stderr
    assert json.loads(proc.stdout)["difference"]["questions"] == 4  # stdout stays the JSON alone
