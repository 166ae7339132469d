"""Compare a baseline and a fine-tuned model on the same questions, paired and clustered by question.

    python -m stats.compare BASELINE.jsonl TUNED.jsonl [--intersect] [--json] [--plot FILE.png]
        [--swaps FILE.md] [--examples 3] [--seed 0] [--resamples 100000]

Input: the JSONL records of ``recipes/evaluate.py`` (one graded sample per line). Exit status 0 on success,
2 on bad input or arguments (with a message, never a traceback), 1 when an output file cannot be written.
"""

from __future__ import annotations

import argparse
import json
import sys

from stats._io import IMAGE_SUFFIXES, check_output_path
from stats.analysis import compare_models
from stats.records import InputError, load_records, pair_questions
from stats.report import format_text, to_json
from stats.swaps import write_swaps


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    parser = argparse.ArgumentParser(
        prog="python -m stats.compare",
        description="Paired, question-clustered comparison of two models' graded samples (JSONL).",
    )
    parser.add_argument("baseline", help="JSONL records of the model before fine-tuning")
    parser.add_argument("tuned", help="JSONL records of the fine-tuned model")
    parser.add_argument(
        "--intersect",
        action="store_true",
        help="compare only the questions both files have (reports the rest)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object instead of the text report"
    )
    parser.add_argument(
        "--plot", metavar="FILE.png", help="write the accuracy and per-question difference plot"
    )
    parser.add_argument("--swaps", metavar="FILE.md", help="write the swap-in / swap-out report (Markdown)")
    parser.add_argument(
        "--examples",
        type=_non_negative,
        default=3,
        help="both-right / both-wrong examples in --swaps (default 3)",
    )
    parser.add_argument(
        "--seed", type=_non_negative, default=0, help="seed of the sign-flip Monte Carlo fallback (default 0)"
    )
    parser.add_argument(
        "--resamples",
        type=_positive,
        default=100_000,
        help="random sign assignments when exact enumeration is too large (default 100000)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the comparison; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        plot = check_output_path(args.plot, "--plot", IMAGE_SUFFIXES) if args.plot else None
        swaps = check_output_path(args.swaps, "--swaps", (".md",)) if args.swaps else None
        baseline = load_records(args.baseline)
        tuned = load_records(args.tuned)
        pairing = pair_questions(baseline, tuned, intersect=args.intersect)
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    comparison = compare_models(baseline, tuned, pairing, seed=args.seed, resamples=args.resamples)
    print(
        json.dumps(to_json(comparison), indent=2, allow_nan=False) if args.json else format_text(comparison)
    )
    try:
        if plot:
            from stats.plots import plot_comparison  # matplotlib loads only when a plot is asked for

            plot_comparison(comparison, plot)
            print(f"wrote {plot}", file=sys.stderr)
        if swaps:
            write_swaps(baseline, tuned, pairing.ids, swaps, examples=args.examples)
            print(f"wrote {swaps}", file=sys.stderr)
    except OSError as err:
        print(f"error: cannot write output: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
