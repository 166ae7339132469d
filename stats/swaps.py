"""The swap report (Markdown): questions the fine-tuning fixed, broke, and examples of both right / both wrong.

A model "got a question right" when a strict majority of its samples on it are correct (more than half; with
one sample, that sample). A swap-in is a question the baseline got wrong and the tuned model got right; a
swap-out is the reverse. Swaps are listed largest accuracy change first. Each question shows the question
text, the gold answer and one completion per model: its lowest-numbered sample whose correctness agrees with
that model's majority verdict.
"""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path

from stats._io import MARK, write_text_atomic
from stats.records import ModelRecords

DEFINITION = (
    "A model got a question right when more than half of its samples on that question are correct. "
    "Swap-in: baseline wrong, tuned right. Swap-out: baseline right, tuned wrong. "
    "(The comparison's improved/regressed counts use any change in per-question accuracy instead.)"
)


def _by_question(model: ModelRecords) -> dict[str, list[dict]]:
    grouped: dict[str, list[dict]] = {}
    for rec in model.records:
        grouped.setdefault(rec["id"], []).append(rec)
    return {qid: sorted(recs, key=lambda r: r["sample"]) for qid, recs in grouped.items()}


def majority_right(correct: int, samples: int) -> bool:
    """True when a strict majority of the samples are correct."""
    return 2 * correct > samples


def _fenced(text: str) -> str:
    """A fenced block whose fence is longer than any backtick run inside the text."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def _field(recs: list[dict], key: str) -> str | None:
    return next((str(r[key]) for r in recs if r.get(key) is not None), None)


def _completion(label: str, recs: list[dict], right: bool) -> list[str]:
    rec = next(r for r in recs if r["correct"] == right)
    answered = f", answered {rec['pred']!r}" if rec.get("pred") is not None else ""
    text = rec.get("completion")
    # An unsettled grade (stats.unsettled) is wrong for want of a verdict: a swap may be the grader's timeout.
    verdict = "right" if right else "wrong, grade unsettled" if rec.get("unsettled") else "wrong"
    head = f"**{label}** (sample {rec['sample']}, {verdict}{answered}):"
    return [head, "", _fenced(str(text)) if text is not None else "_(no completion recorded)_", ""]


def _unsettled(recs: list[dict]) -> str:
    n = sum(bool(r.get("unsettled")) for r in recs)
    return f" ({n} unsettled, counted wrong)" if n else ""


def _section(qid: str, base: list[dict], tuned: list[dict]) -> list[str]:
    b_right, t_right = sum(r["correct"] for r in base), sum(r["correct"] for r in tuned)
    question = _field(base + tuned, "question")
    gold = _field(base + tuned, "gold")
    return [
        f"### {qid}: baseline {b_right}/{len(base)}{_unsettled(base)} -> tuned {t_right}/{len(tuned)}{_unsettled(tuned)}",
        "",
        "**Question:**",
        "",
        _fenced(question) if question is not None else "_(no question recorded)_",
        "",
        f"**Gold:** {gold if gold is not None else '_(not recorded)_'}",
        "",
        *_completion("Baseline", base, majority_right(b_right, len(base))),
        *_completion("Tuned", tuned, majority_right(t_right, len(tuned))),
    ]


def build_swaps(baseline: ModelRecords, tuned: ModelRecords, ids: list[str], examples: int = 3) -> str:
    """Build the swap report as Markdown.

    Args:
        baseline: Baseline records.
        tuned: Tuned records.
        ids: The paired question ids.
        examples: How many both-right and both-wrong examples to show (all swaps are always shown).

    Returns:
        The Markdown text.
    """
    base_q, tuned_q = _by_question(baseline), _by_question(tuned)
    groups: dict[str, list[str]] = {"in": [], "out": [], "both_right": [], "both_wrong": []}
    change: dict[str, Fraction] = {}
    for qid in ids:
        (bc, bn), (tc, tn) = baseline.counts[qid], tuned.counts[qid]
        change[qid] = Fraction(tc, tn) - Fraction(bc, bn)
        b, t = majority_right(bc, bn), majority_right(tc, tn)
        groups["both_right" if b and t else "both_wrong" if not (b or t) else "in" if t else "out"].append(
            qid
        )
    groups["in"].sort(key=lambda q: (-change[q], q))
    groups["out"].sort(key=lambda q: (change[q], q))

    lines = [
        f"# Swap report: {tuned.path} (tuned) vs {baseline.path} (baseline)",
        "",
        f"<!-- {MARK}: python -m stats.compare --swaps writes this file again on each run -->",
        "",
        DEFINITION,
        "",
        "| group | questions |",
        "| --- | --- |",
        f"| swap-in (baseline wrong, tuned right) | {len(groups['in'])} |",
        f"| swap-out (baseline right, tuned wrong) | {len(groups['out'])} |",
        f"| both right | {len(groups['both_right'])} |",
        f"| both wrong | {len(groups['both_wrong'])} |",
        "",
    ]
    titles = {
        "in": "Swap-ins: baseline wrong, tuned right",
        "out": "Swap-outs: baseline right, tuned wrong",
        "both_right": f"Both right (up to {examples} examples)",
        "both_wrong": f"Both wrong (up to {examples} examples)",
    }
    for key, title in titles.items():
        chosen = groups[key] if key in ("in", "out") else groups[key][:examples]
        lines += [f"## {title}", ""]
        if not chosen:
            lines += ["_None._", ""]
        for qid in chosen:
            lines += _section(qid, base_q[qid], tuned_q[qid])
    return "\n".join(lines).rstrip() + "\n"


def write_swaps(
    baseline: ModelRecords, tuned: ModelRecords, ids: list[str], path: str | Path, examples: int = 3
) -> None:
    """Write the swap report to ``path`` atomically (see `build_swaps`)."""
    write_text_atomic(path, build_swaps(baseline, tuned, ids, examples))
