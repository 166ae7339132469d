"""Grade evaluation records again with this grader, from their saved completions: no model, no generation.

    python recipes/regrade.py base.jsonl tuned.jsonl
    python recipes/regrade.py outputs/gsm8k_tiny/heldout/step-400.jsonl
    python recipes/regrade.py old.jsonl --style tags

After a grader update (``rewards.answers.GRADER_VERSION``), stats.compare refuses a file graded by the old grader
beside one graded by the new: the same answer can be right by one and wrong by the other. This grades again the
records an older grader graded and those it left unsettled (it ran out of time), in recipes/evaluate.py's files
and in the held-out records of a training step (OUTPUT_DIR/heldout/step-N.jsonl) alike, and rewrites the file
atomically; nothing else in it changes (a training run's history, heldout/history.json, and its best pointer keep
the grades they were made with). Records read their answer style (format_ok and lm-eval's strict grade)
from their ``answer_style``; files written before records carried it need ``--style``: the ``style`` of the
format reward of the recipe they were evaluated with (tags when it names none), or ``any`` for a recipe without
one. Files another tool wrote are refused untouched.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import the project, not the modules beside this file
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from common.errors import exit_status
from common.logs import log_to_stderr
from recipes.evaluation.generation import EvaluationError
from recipes.evaluation.out_lock import hold
from recipes.evaluation.records import read_records, regrade, stale_records
from rewards._layout import STYLES

logger = logging.getLogger("recipes.evaluate")

STYLE_KEY = "answer_style"
# Grading again needs the completion and the gold, and only a file this project wrote may be rewritten: every record
# evaluate.py or held-out evaluation ever wrote has these four, with or without a grader_version.
_NEEDED = ("completion", "gold", "format_ok", "n_tokens")
# The end of the error for a file that is not evaluation records: this command writes no other file to turn to.
NOT_RECORDS = "Name a file recipes/evaluate.py wrote (--out), or a run's OUTPUT_DIR/heldout/step-N.jsonl."
ANY = "any"  # --style for a recipe without a format reward: format_ok takes any style


def answer_style(path: Path, records: list[dict], given: str | None) -> str | None:
    """The answer style ``path``'s records were graded in (None: any), from the records or ``--style``.

    Raises:
        EvaluationError: The records do not say and ``--style`` is missing, or they name several styles, or one
            other than ``--style``.
    """
    recorded = {r[STYLE_KEY] for r in records if STYLE_KEY in r}
    style = None if given == ANY else given
    shown = ", ".join(sorted(s or ANY for s in recorded))
    if len(recorded) > 1:
        raise EvaluationError(
            f"{path} holds records graded in several answer styles ({shown}); left untouched."
        )
    if recorded and given is not None and recorded != {style}:
        raise EvaluationError(
            f"{path}: its records were graded in answer style {shown}, and --style {given} would grade their "
            f"format_ok and strict match otherwise; left untouched. Drop --style."
        )
    if not recorded and given is None:
        raise EvaluationError(
            f"{path}: its records do not say which answer style they were graded in (written before records "
            f"carried {STYLE_KEY}); left untouched. Pass --style: the style of the format reward of the recipe "
            f"they were evaluated with ({', '.join(STYLES)}; tags when it names none), or {ANY} for a recipe "
            "without a format reward."
        )
    return next(iter(recorded)) if recorded else style


def regrade_file(path: Path, style: str | None = None) -> None:
    """Grade ``path``'s stale records again and rewrite it (see the module docstring); ``style`` as ``--style``.

    Raises:
        EvaluationError: The file is missing, another tool's, held by a running evaluate.py, graded by a newer
            grader, or its answer style is unknown; it is left untouched.
    """
    if not path.is_file():
        raise EvaluationError(f"{path}: no such file (a JSONL file of evaluation records).")
    with hold(path):
        records, repair = read_records(path, NOT_RECORDS)
        if not records:
            raise EvaluationError(f"{path} holds no evaluation records; nothing to grade.")
        if foreign := [i for i, r in enumerate(records, start=1) if not all(key in r for key in _NEEDED)]:
            raise EvaluationError(
                f"{path} record {foreign[0]} lacks {', '.join(k for k in _NEEDED if k not in records[foreign[0] - 1])}"
                ": it was not written by recipes/evaluate.py or held-out evaluation, and it is left untouched."
            )
        stale = stale_records(records)
        answers_in = answer_style(path, records, style) if stale or style else None
        for record in records if stale else []:
            record[STYLE_KEY] = answers_in  # known now: the next re-grade needs no --style
        # regrade refuses a newer grader's records first, and rewrites the file only when some are stale.
        regrade(path, records, repair, answers_in)
        if not stale:
            logger.info(
                "%s: all %d records graded by this grader and settled; nothing to do.", path, len(records)
            )
        if not stale and repair == "drop":
            logger.warning(
                "%s: its last line is cut off (an interrupted write), and stats.compare refuses the file; left "
                "as it is: re-run the evaluate.py command that wrote it, which redoes that sample.",
                path,
            )


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+", type=Path, help="JSONL files of evaluation records")
    p.add_argument(
        "--style",
        choices=(*STYLES, ANY),
        help="answer style, for files whose records do not record it (the recipe's format reward style)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the process exit code."""
    args = build_parser().parse_args(argv)
    log_to_stderr()
    return exit_status(lambda: [regrade_file(path, args.style) for path in args.files])


if __name__ == "__main__":
    sys.exit(main())
