"""Compare a baseline and a fine-tuned model on the same questions, paired and clustered by question.

    python -m stats.compare BASELINE.jsonl TUNED.jsonl [--intersect] [--different-decoding] [--json]
        [--plot FILE.png] [--swaps FILE.md] [--report FILE.txt] [--examples 3] [--seed 0] [--resamples 100000]

Input: the JSONL records of ``recipes/evaluate.py`` (one graded sample per line). Records that carry
``subject`` and ``level`` (MATH) also get the comparison per subject and per level. Samples the grader never
settled (``"unsettled": true``) count as wrong, with a warning and the range they leave the difference in.
Exit status 0 on success, 2 on bad input or arguments (with a message, never a traceback), 1 when an output file
cannot be written.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import replace
from pathlib import Path

from common.cli import non_negative, positive
from common.errors import exit_status
from stats._io import IMAGE_SUFFIXES, MARK, check_output_path, write_text_atomic
from stats.analysis import compare_models
from stats.groups import compare_groups, group_labels
from stats.records import InputError, load_records, pair_questions
from stats.report import format_text, to_json
from stats.samples import uneven_samples_warning, unfinished_warning
from stats.settings import check_same_decoding, check_same_grader, same_model_warning
from stats.swaps import write_swaps
from stats.unsettled import unsettled_warning

logger = logging.getLogger("stats.compare")


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
        "--different-decoding",
        action="store_true",
        help="compare files generated with different temperature, top_p, max_new_tokens or system prompt "
        "(refused otherwise)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object instead of the text report"
    )
    parser.add_argument(
        "--plot", metavar="FILE.png", help="write the accuracy and per-question difference plot"
    )
    parser.add_argument("--swaps", metavar="FILE.md", help="write the swap-in / swap-out report (Markdown)")
    parser.add_argument("--report", metavar="FILE.txt", help="also write the text report to this file")
    parser.add_argument(
        "--examples",
        type=non_negative,
        default=3,
        help="both-right / both-wrong examples in --swaps (default 3)",
    )
    parser.add_argument(
        "--seed", type=non_negative, default=0, help="seed of the sign-flip Monte Carlo fallback (default 0)"
    )
    parser.add_argument(
        "--resamples",
        type=positive,
        default=100_000,
        help="random sign assignments when exact enumeration is too large (default 100000)",
    )
    return parser


def compare(
    baseline: str | Path,
    tuned: str | Path,
    *,
    intersect: bool = False,
    different_decoding: bool = False,
    plot: str | Path | None = None,
    swaps: str | Path | None = None,
    report: str | Path | None = None,
    examples: int = 3,
    seed: int = 0,
    resamples: int = 100_000,
):
    """Compare two evaluation files; the Python API under ``python -m stats.compare``.

    Args:
        baseline: JSONL records of the model before fine-tuning.
        tuned: JSONL records of the fine-tuned model, on the same questions.
        intersect: Compare only the questions both files have.
        different_decoding: Compare files generated with different decoding settings or system prompts (a
            warning says so).
        plot: Write the accuracy and per-question difference plot here (.png, .pdf, .svg).
        swaps: Write the swap-in / swap-out Markdown report here.
        report: Write the text report (``format_text``) here (.txt), marked as this command's.
        examples: Both-right / both-wrong examples in the swaps report.
        seed: Seed of the sign-flip Monte Carlo fallback.
        resamples: Random sign assignments when exact enumeration is too large.

    Returns:
        The comparison (``stats.analysis.Comparison``): ``format_text`` and ``to_json`` render it. Its
        ``groups`` holds the per-subject and per-level comparisons when the records carry those keys.
        Questions with fewer samples than others in one file, and samples the grader never settled, are logged
        as warnings ("stats.compare").

    Raises:
        InputError: Bad files or output paths, or a question whose subject or level differs between its
            samples or the two files; found before anything is computed or written.
        OSError: An output file could not be written.
    """
    inputs = (baseline, tuned)
    if Path(baseline).resolve() == Path(tuned).resolve():
        raise InputError(
            f"{baseline} is given as both the baseline and the tuned file: pass two evaluations."
        )
    plot = check_output_path(str(plot), "--plot", IMAGE_SUFFIXES, inputs) if plot else None
    swaps = check_output_path(str(swaps), "--swaps", (".md",), inputs) if swaps else None
    report = check_output_path(str(report), "--report", (".txt",), inputs) if report else None
    baseline_records, tuned_records = load_records(str(baseline)), load_records(str(tuned))
    pairing = pair_questions(baseline_records, tuned_records, intersect=intersect)
    for warning in check_same_decoding(baseline_records, tuned_records, allow_different=different_decoding):
        logger.warning(warning)
    for warning in check_same_grader(baseline_records, tuned_records):
        logger.warning(warning)
    if warning := same_model_warning(baseline_records, tuned_records):
        logger.warning(warning)
    labels, skipped = group_labels(baseline_records, tuned_records, pairing.ids)
    for model in (baseline_records, tuned_records):
        for warning in (unfinished_warning(model), uneven_samples_warning(model, pairing.ids)):
            if warning:
                logger.warning(warning)
    comparison = compare_models(baseline_records, tuned_records, pairing, seed=seed, resamples=resamples)
    if warning := unsettled_warning(comparison):
        logger.warning(warning)
    if labels or skipped:
        breakdown = compare_groups(
            baseline_records, tuned_records, labels, skipped, seed=seed, resamples=resamples
        )
        comparison = replace(comparison, groups=breakdown)
    if plot:
        from stats.plots import plot_comparison  # matplotlib loads only when a plot is asked for

        plot_comparison(comparison, plot)
    if swaps:
        write_swaps(baseline_records, tuned_records, pairing.ids, swaps, examples=examples)
    if report:  # the mark line: a later run may replace this file, and never one it did not write
        write_text_atomic(report, f"{format_text(comparison)}\n\n({MARK}: python -m stats.compare)\n")
    return comparison


def main(argv: list[str] | None = None) -> int:
    """Run the comparison; returns the exit status."""
    args = build_parser().parse_args(argv)
    # Warnings go to stderr, so stdout stays the report (or the JSON) alone.
    logging.basicConfig(format="%(levelname)s: %(message)s", level=logging.WARNING)
    outputs = {"plot": args.plot, "swaps": args.swaps, "report": args.report}
    try:
        comparison = compare(
            args.baseline,
            args.tuned,
            intersect=args.intersect,
            different_decoding=args.different_decoding,
            seed=args.seed,
            resamples=args.resamples,
            examples=args.examples,
            **outputs,
        )
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"error: cannot write output: {err}", file=sys.stderr)
        return 1
    report = (
        json.dumps(to_json(comparison), indent=2, allow_nan=False) if args.json else format_text(comparison)
    )
    # exit_status: a reader that stops early (``| head``) ends the command quietly, not in a traceback.
    return exit_status(lambda: _say(report, outputs))


def _say(report: str, outputs: dict) -> None:
    print(report)
    for path in filter(None, outputs.values()):
        print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
