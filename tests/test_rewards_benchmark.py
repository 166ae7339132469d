"""Smoke test of benchmarks/grader_throughput.py on the bundled GSM8K sample (300 rows; no timing assertions).

python -m pytest tests/test_rewards_benchmark.py -q
"""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLES = [
    REPO / "recipes/samples/gsm8k_train_sample.jsonl",
    REPO / "recipes/samples/gsm8k_test_sample.jsonl",
]


def _benchmark():
    # The package's module, not the file: run from its path, the script replaces sys.path[0] (tests/ here).
    from benchmarks import grader_throughput

    return grader_throughput


def test_prints_a_throughput_table(capsys):
    assert _benchmark().main(["--data", *map(str, SAMPLES)]) == 0
    out = capsys.readouterr().out
    assert "Grader throughput on 300 GSM8K solutions" in out
    rows = {
        m[0].strip(): m
        for m in re.findall(r"^(.{58}) +(\d+) +([\d.]+) +([\d,]+) +([\d.]+)%$", out, re.MULTILINE)
    }
    assert len(rows) == 14
    assert all(int(n) == 300 and float(seconds) > 0 for _, n, seconds, _, _ in rows.values())
    shares = {case: float(ok) for case, (*_, ok) in rows.items()}
    for case, share in shares.items():
        if case.startswith(("extract_answer", "is_correct")):
            assert share == (0.0 if case.endswith("no answer") else 100.0), case
    assert shares["reward format (tags, batches of 8)"] == 100.0


def test_limit_and_missing_data(capsys, tmp_path):
    assert _benchmark().main(["--data", str(SAMPLES[1]), "--limit", "20"]) == 0
    assert "Grader throughput on 20 GSM8K solutions" in capsys.readouterr().out
    assert _benchmark().main(["--data", str(tmp_path / "none.jsonl")]) == 2
    assert "No GSM8K data at" in capsys.readouterr().err
