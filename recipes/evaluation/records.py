"""Evaluation records on disk: read (dropping a crash's half line), check before appending, write, summarise.

One JSONL line per graded sample, the schema of DESIGN.md section 4; `recipes/evaluate.py` writes them and
`python -m stats.compare` reads them.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
from pathlib import Path

from recipes.atomic import write_text_atomically
from recipes.evaluation.generation import EvaluationError

logger = logging.getLogger("recipes.evaluate")


def read_records(path: Path) -> list[dict]:
    """Records already in ``path``; a half-written last line (a crash mid-write) is dropped from the file."""
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    complete, newline, partial = text.rpartition("\n")
    if partial:
        write_text_atomically(path, complete + newline)
        logger.warning(
            "%s: dropped an incomplete last line (an interrupted write); its sample is redone.", path
        )
    records = []
    for lineno, line in enumerate(complete.splitlines(), start=1):
        try:
            record = json.loads(line) if line.strip() else None
        except json.JSONDecodeError as e:
            raise EvaluationError(
                f"{path} line {lineno} is not valid JSON ({e.msg}); it was not written by this evaluator. "
                "Use a new --out file."
            ) from None
        if record is not None:
            records.append(record)
    return records


def check_resumable(records: list[dict], settings: dict, path: Path) -> None:
    """Refuse to append to a file whose records were made with other settings."""
    for record in records:
        changed = [
            f"{k}: file has {record.get(k)!r}, this run {v!r}"
            for k, v in settings.items()
            if record.get(k) != v
        ]
        if changed:
            raise EvaluationError(
                f"{path} holds records made with other settings; refusing to append ("
                + "; ".join(changed)
                + "). Use a new --out file, or rerun with the file's settings."
            )


def append_records(handle, records: list[dict]) -> None:
    """Append whole lines and force them to disk, so a crash leaves complete records only."""
    handle.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    handle.flush()
    os.fsync(handle.fileno())


def make_record(row: dict, sample: int, completion, style: str | None, settings: dict, **extra) -> dict:
    """One JSONL record (DESIGN.md section 4), graded by the training grader, with the run's settings."""
    from rewards.answers import extract_answer, format_ok, is_correct

    text = completion.text
    return {
        "id": row["id"],
        "sample": sample,
        "correct": is_correct(text, row["gold"]),
        "format_ok": format_ok(text, style),
        "pred": extract_answer(text),
        "gold": row["gold"],
        "n_tokens": completion.n_tokens,
        "question": row["question"],
        "completion": text,
        "model": settings["model"],
        **extra,
        **settings,
    }


def format_style(rewards: list[dict]) -> str | None:
    """The answer style the recipe's format reward pays for (its default: tags); None (either) without one."""
    return next((spec.get("style", "tags") for spec in rewards if spec.get("name") == "format"), None)


def summary(records: list[dict], questions: int, out: Path, command: list[str]) -> str:
    """Accuracy, the three-way split, and the commands that compare this file with the other model's."""
    total = len(records)
    correct = sum(r["correct"] for r in records)
    formatted = sum(r["format_ok"] and not r["correct"] for r in records)
    solved = len({r["id"] for r in records if r["correct"]})
    lines = [f"{out}: {questions} questions x {total // questions} samples = {total} records"]
    for label, count in (
        ("correct", correct),
        ("well-formatted but wrong", formatted),
        ("no well-formed answer", total - correct - formatted),
    ):
        lines.append(f"  {label:<26}{count:>6}/{total}  {100 * count / total:5.1f}%")
    lines.append(f"  questions solved at least once {solved}/{questions}")
    other = command[command.index("--out") + 1]
    pair = (str(out), other) if "--adapter" in command else (other, str(out))
    lines += [
        "Evaluate the other model on the same questions with the same decoding, then compare:",
        "  " + shlex.join(command),
        "  " + shlex.join(["python", "-m", "stats.compare", *pair]),
    ]
    return "\n".join(lines)
