"""The summary evaluate.py prints of a records file: accuracy, the three-way split, lm-eval's two figures, and the
commands that compare it with the other model's file."""

from __future__ import annotations

import shlex
from pathlib import Path

from common.wording import counted, questions_by_samples


def summary(records: list[dict], questions: int, out: Path, command: list[str] | None = None) -> str:
    """Accuracy, the three-way split, and (given this run's ``command``) the commands that compare this file
    with the other model's."""
    total = len(records)
    correct = sum(r["correct"] for r in records)
    formatted = sum(r["format_ok"] and not r["correct"] for r in records)
    solved = len({r["id"] for r in records if r["correct"]})
    lines = [f"{out}: {questions_by_samples(questions, total // questions)} = {counted(total, 'record')}"]
    for label, count in (
        ("correct", correct),
        ("well-formatted but wrong", formatted),
        ("no well-formed answer", total - correct - formatted),
    ):
        lines.append(f"  {label:<26}{count:>6}/{total}  {100 * count / total:5.1f}%")
    if unsettled := sum(bool(r.get("unsettled")) for r in records):
        lines += [
            f"  {'unsettled, counted wrong':<26}{unsettled:>6}/{total}  {100 * unsettled / total:5.1f}%  "
            + "(the grader ran out of time on them, even when asked again)",
            "    a busy machine? Re-run this command when it is less busy: it grades them again, generating nothing.",
        ]
    lines.append(f"  questions solved at least once {solved}/{questions}")
    if all(r["id"].startswith("gsm8k-") for r in records):
        lines.append("  lm-eval's GSM8K scoring (what published GSM8K numbers use):")
    else:  # the same two extractions; a MATH or user task's published numbers are scored otherwise
        lines.append("  lm-eval's GSM8K extraction rules, for reference (not this task's published scoring):")
    for label, key, how in (
        ("strict-match", "correct_strict", "the answer in the format the prompt asks for"),
        ("flexible-extract", "correct_lenient", "last boxed answer, else last number"),
    ):
        count = sum(r.get(key, False) for r in records)
        lines.append(f"    {label:<24}{count:>6}/{total}  {100 * count / total:5.1f}%  ({how})")
    if command is None:
        return "\n".join(lines)
    other = command[command.index("--out") + 1]
    pair = (str(out), other) if "--adapter" in command else (other, str(out))
    lines += [
        "Evaluate the other model on the same questions with the same decoding, then compare:",
        "  " + shlex.join(command),
        "  " + shlex.join(["python", "-m", "stats.compare", *pair]),
    ]
    return "\n".join(lines)
