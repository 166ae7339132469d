"""Counts on the command lines are refused by argparse, naming the option, the value and what was expected."""

from __future__ import annotations

import pytest

from recipes.evaluate import build_parser as evaluate_parser
from stats.compare import build_parser as compare_parser


@pytest.mark.parametrize(
    "parser, argv, said",
    [
        (evaluate_parser, ["arith_tiny", "--out", "x.jsonl", "--samples", "0"],
         "argument --samples: expected a positive integer, got 0"),
        (evaluate_parser, ["arith_tiny", "--out", "x.jsonl", "--batch-size", "8.5"],
         "argument --batch-size: expected a positive integer, got '8.5'"),
        (compare_parser, ["a.jsonl", "b.jsonl", "--seed", "-1"], "argument --seed: expected an integer >= 0, got -1"),
    ],
)  # fmt: skip
def test_a_bad_count_is_refused_with_what_was_expected(parser, argv, said, capsys):
    with pytest.raises(SystemExit) as stopped:
        parser().parse_args(argv)
    assert stopped.value.code == 2
    assert said in capsys.readouterr().err


def test_good_counts_are_read_as_integers():
    args = evaluate_parser().parse_args(["arith_tiny", "--out", "x.jsonl", "--samples", "16"])
    assert args.samples == 16
    assert compare_parser().parse_args(["a.jsonl", "b.jsonl", "--seed", "0"]).seed == 0
