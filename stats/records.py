"""Load and validate evaluation records (JSONL, one graded sample per line) and pair two models by question.

The record schema (docs/CONTRACTS.md, Evaluation): required ``id`` (str), ``sample`` (int >= 0) and ``correct`` (bool);
optional ``subject`` (non-empty str) and ``level`` (int 1-5, or null when unknown), used by `stats.groups`, and
``unsettled`` (bool: true on a sample the grader never graded, whose ``correct`` is then false; `stats.unsettled`)
are type-checked here; every other key is optional and passed through untouched.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from common.errors import UserError
from common.suggestions import did_you_mean

REQUIRED_KEYS = ("id", "sample", "correct")
_EXAMPLE = '{"id": "gsm8k-test-00042", "sample": 0, "correct": true}'
# Enough to show a pattern without flooding the terminal when a whole file is wrong.
_MAX_ERRORS_SHOWN = 5


class InputError(UserError):
    """A problem with the user's input files or arguments; the message says what and how to fix it."""


@dataclass(frozen=True)
class ModelRecords:
    """The validated records of one model.

    Attributes:
        path: The file the records came from.
        records: Every record in file order (dicts with at least ``id``, ``sample``, ``correct``).
        counts: Question id -> (correct samples, total samples).
        lines: The file line of each record, aligned with ``records`` (for error messages).
    """

    path: Path
    records: list[dict]
    counts: dict[str, tuple[int, int]]
    lines: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Pairing:
    """The questions two models are compared on.

    Attributes:
        ids: Question ids present in both files, sorted.
        baseline_only: Ids dropped because only the baseline file has them (non-empty only with ``intersect``).
        tuned_only: Ids dropped because only the tuned file has them.
    """

    ids: list[str]
    baseline_only: list[str]
    tuned_only: list[str]


def _check_record(obj: object, where: str) -> str | None:
    """Return an error message for one parsed line, or None when it is a valid record."""
    if not isinstance(obj, dict):
        return f"{where}: expected a JSON object such as {_EXAMPLE}, got a JSON {type(obj).__name__}."
    for key in REQUIRED_KEYS:
        if key not in obj:
            hint = did_you_mean(key, obj, quote=True)
            return (
                f"{where}: missing required key '{key}' (required: {', '.join(REQUIRED_KEYS)}; "
                f"found: {', '.join(map(str, obj)) or 'none'}).{hint}"
            )
    if not isinstance(obj["id"], str) or not obj["id"]:
        return f'{where}: "id" must be a non-empty string such as "gsm8k-test-00042", got {obj["id"]!r}.'
    sample = obj["sample"]
    if isinstance(sample, bool) or not isinstance(sample, int) or sample < 0:
        return f'{where}: "sample" must be an integer >= 0 (the sample index 0..k-1), got {sample!r}.'
    if not isinstance(obj["correct"], bool):
        return f'{where}: "correct" must be true or false, got {obj["correct"]!r}.'
    if "subject" in obj and (not isinstance(obj["subject"], str) or not obj["subject"].strip()):
        return (
            f'{where}: "subject" must be a non-empty string such as "Precalculus", got {obj["subject"]!r}. '
            "Leave the key out when the subject is not known."
        )
    unsettled = obj.get("unsettled", False)
    if not isinstance(unsettled, bool) or (unsettled and obj["correct"]):
        return (
            f'{where}: "unsettled" must be true (a sample the grader never graded: "correct" is then false) or '
            f'false, got "unsettled": {json.dumps(unsettled)} with "correct": {json.dumps(obj["correct"])}.'
        )
    level = obj.get("level")
    if level is not None and (isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= 5):
        # MATH's own rows say "Level 3" (and "Level ?"); the record keeps just the number, or null.
        digit = level.strip()[-1:] if isinstance(level, str) else ""
        hint = f' Write {digit} for "{level}".' if digit and digit in "12345" else ""
        return f'{where}: "level" must be an integer 1-5, or null when unknown, got {level!r}.{hint}'
    return None


def load_records(path: str | Path) -> ModelRecords:
    """Read and validate one JSONL file of graded samples.

    Blank lines are skipped. Every other line must be a JSON object with the required keys; a repeated
    ``(id, sample)`` pair is an error because it would count one sample twice.

    Args:
        path: The JSONL file written by ``recipes/evaluate.py``.

    Returns:
        The records and per-question counts.

    Raises:
        InputError: The file is missing, unreadable, empty, or has invalid lines (up to five are named).
    """
    path = Path(path)
    if not path.is_file():
        kind = (
            "is a directory, not a file" if path.is_dir()
            else "is not a regular file (a device or a pipe)" if path.exists()
            else "does not exist"
        )  # fmt: skip
        raise InputError(f"{path} {kind}: expected a JSONL file of graded samples.")
    try:
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: cannot read the file as UTF-8 text ({err}).") from None

    errors: list[str] = []
    records: list[dict] = []
    record_lines: list[int] = []
    first_line: dict[tuple[str, int], int] = {}
    data_row = False  # a line of a data file (question, answer): the file was named by mistake
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path} line {lineno}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            problem = f"{err.msg.removesuffix(' at')} at column {err.colno}"  # not "starting at at column"
            if lineno == len(lines) and not text.endswith("\n"):  # the writer stopped mid-line
                errors.append(
                    f"{where}: the last line is cut off ({problem}): was the evaluation "
                    "stopped while writing? Re-running recipes/evaluate.py with the same arguments repairs the "
                    "line and completes the file."
                )
                continue
            errors.append(f"{where}: not valid JSON ({problem}); expected e.g. {_EXAMPLE}.")
            continue
        problem = _check_record(obj, where)
        if problem:
            errors.append(problem)
            data_row = (
                data_row
                or isinstance(obj, dict)
                and "question" in obj
                and not obj.keys() & set(REQUIRED_KEYS)
            )
            continue
        key = (obj["id"], obj["sample"])
        if key in first_line:
            errors.append(
                f"{where}: duplicate (id, sample) = {key!r}, first seen on line {first_line[key]}. "
                "Each sample of a question must appear once: were two runs concatenated?"
            )
            continue
        first_line[key] = lineno
        records.append(obj)
        record_lines.append(lineno)

    if errors:
        more = len(errors) - _MAX_ERRORS_SHOWN
        shown = errors[:_MAX_ERRORS_SHOWN] + ([f"... and {more} more invalid lines."] if more > 0 else [])
        if data_row:
            shown.append(
                f"{path} holds data rows (question, answer), not graded samples: evaluate a model on that data with "
                "recipes/evaluate.py RECIPE --out FILE (data.source=... to name the data), then compare two such files."
            )
        raise InputError("\n".join(shown))
    if not records:
        raise InputError(f"{path}: no records (the file is empty). Expected one JSON object per line.")

    counts: dict[str, tuple[int, int]] = {}
    for rec in records:
        correct, total = counts.get(rec["id"], (0, 0))
        counts[rec["id"]] = (correct + rec["correct"], total + 1)
    return ModelRecords(path=path, records=records, counts=counts, lines=record_lines)


def _examples(ids: list[str], limit: int = 3) -> str:
    shown = ", ".join(repr(i) for i in ids[:limit])
    return shown + (", ..." if len(ids) > limit else "")


def _normalised(text: str) -> str:
    # recipes.tasks.heldout.normalised's rule (stats imports nothing from recipes): a line break is not a new question.
    return " ".join(text.split())


def _short(text: str, limit: int = 80) -> str:
    text = _normalised(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _renamed(baseline: ModelRecords, tuned: ModelRecords) -> str | None:
    """What to do when files without a shared id hold the same question texts: their ids were made differently."""
    texts = {
        _normalised(r["question"]): r["id"] for r in baseline.records if isinstance(r.get("question"), str)
    }
    pairs = {
        (texts[text], r["id"])
        for r in tuned.records
        if isinstance(r.get("question"), str) and (text := _normalised(r["question"])) in texts
    }
    if not pairs:
        return None
    base_id, tuned_id = min(pairs)
    return (
        f"yet {len({b for b, _ in pairs})} questions are in both under other ids ({base_id!r} in the baseline is "
        f"{tuned_id!r} in the tuned file). Ids of rows without an 'id' field are made from the name data.source "
        "gives (a folder and a file in it make different ids): evaluate both models with the same data.source, or "
        "give the rows an 'id' field."
    )


def _check_same_questions(baseline: ModelRecords, tuned: ModelRecords, ids: list[str]) -> None:
    """Refuse a paired id whose question text or gold answer differs between the files.

    Ids are often row numbers ("<file stem>-test-3"), so two datasets reuse them for different questions, and
    their golds can agree by chance. The question text decides; ``source`` does not (a relative path, a copy in
    another folder or a local mirror of a Hub dataset name the same data), so it is only shown when it differs.
    """
    wanted = set(ids)
    first: dict[str, dict] = {}
    for rec in baseline.records:
        if rec["id"] in wanted:
            first.setdefault(rec["id"], rec)
    for rec in tuned.records:
        qid, base = rec["id"], first.get(rec["id"])
        if base is None:
            continue
        before, after = base.get("question"), rec.get("question")
        if isinstance(before, str) and isinstance(after, str) and _normalised(before) != _normalised(after):
            sources = (base.get("source"), rec.get("source"))
            seen = f" (source {sources[0]} vs {sources[1]})" if sources[0] != sources[1] else ""
            raise InputError(
                f"Question id {qid!r} names different questions: {_short(before)!r} in {baseline.path} but "
                f"{_short(after)!r} in {tuned.path}{seen}. The files were evaluated on different data, so pairing "
                "by id would compare answers to different questions. Evaluate both models on the same data "
                "(data.source / data.eval_source and --split): an id must name the same question in both files."
            )
        if "gold" in rec and "gold" in base and str(rec["gold"]) != str(base["gold"]):
            raise InputError(
                f"Question {qid!r} has gold {base['gold']!r} in {baseline.path} but {rec['gold']!r} in "
                f"{tuned.path}: the two files were graded against different data. Re-run the evaluation "
                "of both models on the same dataset."
            )


def pair_questions(baseline: ModelRecords, tuned: ModelRecords, *, intersect: bool = False) -> Pairing:
    """Match the two models' questions.

    Args:
        baseline: Records of the model before fine-tuning.
        tuned: Records of the fine-tuned model.
        intersect: Compare only the shared questions instead of refusing different question sets.

    Returns:
        The paired ids and, with ``intersect``, the ids that were dropped.

    Raises:
        InputError: The question sets differ (without ``intersect``), share no question, or a shared id has
            another question text or gold answer in the other file.
    """
    base_ids, tuned_ids = set(baseline.counts), set(tuned.counts)
    shared = sorted(base_ids & tuned_ids)
    only_base, only_tuned = sorted(base_ids - tuned_ids), sorted(tuned_ids - base_ids)
    if not shared:
        raise InputError(
            f"{baseline.path} and {tuned.path} have no question id in common "
            f"(e.g. {_examples(sorted(base_ids))} vs {_examples(sorted(tuned_ids))}): "
            + (_renamed(baseline, tuned) or "were they evaluated on the same dataset split?")
        )
    if (only_base or only_tuned) and not intersect:
        raise InputError(
            f"{baseline.path} and {tuned.path} cover different questions: "
            f"{len(only_base) + len(only_tuned)} of {len(base_ids | tuned_ids)} differ "
            f"({len(only_base)} only in the baseline file{': ' + _examples(only_base) if only_base else ''}; "
            f"{len(only_tuned)} only in the tuned file{': ' + _examples(only_tuned) if only_tuned else ''}). "
            f"Evaluate both models on the same questions, or pass --intersect to compare the "
            f"{len(shared)} shared questions."
        )
    _check_same_questions(baseline, tuned, shared)
    return Pairing(ids=shared, baseline_only=only_base, tuned_only=only_tuned)
