"""Evaluation records on disk: read (refusing foreign files, repairing a crash's half line), check, write, summarise.

One JSONL line per graded sample, its schema in docs/CONTRACTS.md (Evaluation); `recipes/evaluate.py` writes them and
`python -m stats.compare` reads them.

``"unsettled": true`` (written only then) marks a sample whose grade was never decided: the grader ran out of time
comparing its answer with the gold (a busy machine, or an answer too costly to compare), even with longer bounds
(evaluate.py's; held-out evaluation during training keeps the reward's first, since every process of the run waits for
it, and grades again with longer ones within a budget: ``settle_patiently``). Its ``correct`` is false for want of a
verdict, not because the answer was found wrong; stats.compare counts it as wrong and warns. ``correct_strict`` and
``correct_lenient`` are graded the same way and read false when unsettled, which ``"unsettled_lm_eval": true`` marks
(their answer may differ from the grade's). ``"grader_version"`` is the grader's (``rewards.answers.GRADER_VERSION``;
1 where a record has none). Re-running the same evaluate.py command grades again, from their saved completions and
generating nothing, the unsettled samples and those an older grader graded (``regrade``), as recipes/regrade.py does.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

from recipes.atomic import write_text_atomically
from recipes.evaluation.generation import EvaluationError

logger = logging.getLogger("recipes.evaluate")


# Every record has these; a line without them was not written by this evaluator.
RECORD_KEYS = ("id", "sample", "correct")
# Row columns a record keeps when the task has them.
BREAKDOWN_KEYS = ("subject", "level")
OUT_FIX = "Use a new --out file."


def _record(path: Path, lineno: int, line: str, fix: str) -> dict:
    """One parsed line, or EvaluationError naming the line and ending with ``fix``."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as e:
        problem = f"is not valid JSON ({e.msg})"
    else:
        if isinstance(record, dict) and all(key in record for key in RECORD_KEYS):
            return record
        problem = f"is not an evaluation record (a JSON object with {', '.join(RECORD_KEYS)})"
    raise EvaluationError(
        f"{path} line {lineno} {problem}; it was not written by this evaluator, and it is left untouched. {fix}"
    )


def read_records(path: Path, fix: str = OUT_FIX) -> tuple[list[dict], str | None]:
    """Records already in ``path``, and how its end must be repaired before appending.

    ``fix`` ends the error for a file of something else: evaluate.py's own, by default; regrade.py has no --out.

    Reads only: the file is checked whole before anything is written to it. The repair is None, "newline"
    (the last record is complete but unterminated) or "drop" (a half-written last line, a crash mid-write,
    after at least one complete record). A file of anything else is refused, never emptied.
    """
    if path.is_dir():
        raise EvaluationError(
            f"--out {path} is a folder; give a .jsonl file path, e.g. {path / 'base.jsonl'}."
        )
    if not path.exists():
        return [], None
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise EvaluationError(
            f"{path} is not UTF-8 text; it was not written by this evaluator, and it is left untouched. {fix}"
        ) from None
    *lines, last = text.split("\n")  # last is "" when the file ends with a newline
    records = [_record(path, i, line, fix) for i, line in enumerate(lines, start=1) if line.strip()]
    if not last.strip():
        return records, None
    try:
        records.append(_record(path, len(lines) + 1, last, fix))
        return records, "newline"
    except EvaluationError:
        if not records:  # nothing shows this is our file: a half line is only a half line after records
            raise
        return records, "drop"


def repair_end(path: Path, repair: str | None) -> None:
    """Make ``path`` end with a complete line before appending (see ``read_records``)."""
    if repair == "newline":
        with open(path, "a", encoding="utf-8") as handle:
            handle.write("\n")
    elif repair == "drop":
        complete = path.read_text(encoding="utf-8").rpartition("\n")[0]
        write_text_atomically(path, complete + "\n")
        _say_dropped(path)


def _say_dropped(path: Path) -> None:
    logger.warning(
        "%s: dropped an incomplete last line (an interrupted write); evaluate.py redoes its sample on the file.",
        path,
    )


def check_writable(path: Path) -> None:
    """Refuse an --out file that cannot be written, before a model is loaded for it."""
    folder = next(p for p in (path, *path.parents) if p.exists())
    if folder != path and not folder.is_dir():
        raise EvaluationError(f"--out {path}: {folder} is a file, not a folder. Choose another --out path.")
    if not os.access(folder, os.W_OK):
        raise EvaluationError(f"--out {path}: {folder} is not writable. Choose another --out path.")


def append_records(handle, records: list[dict]) -> None:
    """Append whole lines and force them to disk, so a crash leaves complete records only."""
    handle.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    handle.flush()
    os.fsync(handle.fileno())


def make_record(
    row: dict, sample: int, completion, style: str | None, settings: dict, *, patient: bool = True, **extra
) -> dict:
    """One JSONL record (docs/CONTRACTS.md, Evaluation), graded by the training grader, with the run's settings.

    ``patient``: comparisons get longer bounds (evaluate.py).
    Held-out evaluation during training passes False: it grades on the training process, which the other
    processes wait for, so it keeps the reward's bounds, marks what runs out unsettled at once, and grades those
    again with ``settle_patiently``.
    """
    text = completion.text
    return {
        "id": row["id"],
        "sample": sample,
        **_graded_fields(text, row["gold"], style, patient),
        "gold": row["gold"],
        "n_tokens": completion.n_tokens,
        "question": row["question"],
        # Tasks that carry them (MATH) keep subject and level, so accuracy can be read per subject and level.
        **{key: row[key] for key in BREAKDOWN_KEYS if key in row},
        "completion": text,
        "model": settings["model"],
        **extra,
        **settings,
    }


def _graded_fields(text: str, gold, style: str | None, patient: bool) -> dict:
    """A record's grade fields: the grade and lm-eval's strict and lenient ones (``unsettled`` and
    ``unsettled_lm_eval`` only when set), format_ok, pred and the grader's version. Patient: evaluation can wait
    where a reward cannot, so its comparisons get longer bounds, and a busy moment does not leave them unsettled."""
    from rewards.answers import GRADER_VERSION, format_ok, grade, lm_eval_grades

    graded = grade(text, gold, patient=patient)
    strict, lenient = lm_eval_grades(text, gold, style, patient=patient)
    return {
        "correct": graded.correct,
        **({} if graded.settled else {"unsettled": True}),
        "correct_strict": strict.correct,
        "correct_lenient": lenient.correct,
        **({} if strict.settled and lenient.settled else {"unsettled_lm_eval": True}),
        "format_ok": format_ok(text, style),
        "pred": graded.found.answer if graded.found else None,
        "grader_version": GRADER_VERSION,
    }


def _grade_again(record: dict, style: str | None) -> None:
    """Grade a record again from its saved completion, patiently, in place."""
    record.pop("unsettled", None)
    record.pop("unsettled_lm_eval", None)
    record.update(_graded_fields(record["completion"], record["gold"], style, patient=True))


def settle_patiently(records: list[dict], style: str | None, budget_s: float) -> None:
    """Grade again, patiently and in place, the records a reward-bounded grade left unsettled (a busy moment),
    until ``budget_s`` seconds have passed (the last comparison may overrun it by its own bound). Held-out
    evaluation: its first grade keeps the reward's bounds, since every process waits for it, and this second pass
    settles the few that ran out without a minute's wait per answer."""
    deadline = time.monotonic() + budget_s
    for record in records:
        if record.get("unsettled") or record.get("unsettled_lm_eval"):
            if time.monotonic() >= deadline:
                break
            _grade_again(record, style)


def stale_records(records: list[dict]) -> list[dict]:
    """The records ``regrade`` grades again: those an older grader graded or left unsettled."""
    from rewards.answers import GRADER_VERSION

    return [
        r
        for r in records
        if r.get("grader_version", 1) < GRADER_VERSION or r.get("unsettled") or r.get("unsettled_lm_eval")
    ]


def regrade(path: Path, records: list[dict], repair: str | None, style: str | None) -> str | None:
    """Grade again, in place, the records whose grade was left unsettled or given by an older grader (from their
    saved completions), and rewrite ``path`` with them when there are any; returns the repair still to make before
    appending. Raises EvaluationError, touching nothing, when a newer grader graded some."""
    from rewards.answers import GRADER_VERSION

    if newer := sorted({v for r in records if (v := r.get("grader_version", 1)) > GRADER_VERSION}):
        raise EvaluationError(
            f"{path} was graded by grader version {'/'.join(map(str, newer))}, newer than this one "
            f"({GRADER_VERSION}), whose grades would replace its: update grpo-recipes and rerun, or use a new --out file."
        )
    older = [r for r in records if r.get("grader_version", 1) < GRADER_VERSION]
    versions = sorted({r.get("grader_version", 1) for r in older})  # before the re-grade stamps the new one
    unsettled = [r for r in records if r.get("unsettled") or r.get("unsettled_lm_eval")]
    stale = stale_records(records)
    for record in stale:
        _grade_again(record, style)
    if not stale:
        return repair
    write_text_atomically(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    if repair == "drop":
        _say_dropped(path)
    if older:
        logger.warning(
            "%s: graded %d samples again that grader version %s graded (this one is %d); their grades may differ.",
            path, len(older), "/".join(map(str, versions)), GRADER_VERSION,
        )  # fmt: skip
    if unsettled:
        still = sum(bool(r.get("unsettled") or r.get("unsettled_lm_eval")) for r in unsettled)
        logger.info(
            "%s: graded %d unsettled samples again: %d settled, %d still unsettled.",
            path, len(unsettled), len(unsettled) - still, still,
        )  # fmt: skip
    return None  # whole records only now: a half-written last line is gone, and its sample is redone


def format_style(rewards: list[dict]) -> str | None:
    """The answer style the recipe's format reward pays for (its default: tags); None (either) without one."""
    return next((spec.get("style", "tags") for spec in rewards if spec.get("name") == "format"), None)
