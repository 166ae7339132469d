"""Grader throughput (completions per second) on GSM8K solutions, in the answer styles models write.

    python benchmarks/grader_throughput.py [--data FILE.jsonl ...] [--limit N]

Default data: $GSM8K_DATA_DIR/{train,test}.jsonl, with GSM8K_DATA_DIR defaulting to
../shared/data/gsm8k beside the repository. Each GSM8K solution is rewritten in each style (its
reasoning, then the gold answer the way Llama 3.1, Qwen 2.5, our tagged prompt or LaTeX would give
it) and graded with ``rewards.answers``; the two rewards are timed on batches of 8. The "ok" column
is a sanity check: the share with an answer found (extract_answer), graded correct (is_correct) or
paid (rewards; the length gate pays nothing to the shortest solutions). It is 100% for every
extract_answer and is_correct row but "no answer".
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

from tqdm import tqdm

from rewards.answers import extract_answer, is_correct
from rewards.correctness import Correctness
from rewards.format import Format

_BATCH = 8


def _default_data() -> list[Path]:
    root = Path(os.environ.get("GSM8K_DATA_DIR", Path(__file__).resolve().parents[2] / "shared/data/gsm8k"))
    return [root / "train.jsonl", root / "test.jsonl"]


def _styles(reasoning: str, gold: str) -> dict[str, str]:
    double = Decimal(gold) * 2
    return {
        "gsm8k solution (#### n)": f"{reasoning}\n#### {gold}",
        "llama 3.1 (final answer is $\\boxed{n}$)": f"{reasoning}\nThe final answer is: $\\boxed{{{gold}}}$",
        "qwen 2.5 (\\(\\boxed{n}\\) in prose)": f"{reasoning}\nSo the answer is \\(\\boxed{{{gold}}}\\) in total.",
        "tags (<answer>n</answer>)": f"<reasoning>\n{reasoning}\n</reasoning>\n<answer>\n{gold}\n</answer>",
        "latex \\frac (math-verify)": f"{reasoning}\n\\boxed{{\\frac{{{double}}}{{2}}}}",
        "no answer": "I am not sure how to solve this one.",
    }


def load_rows(paths: list[Path], limit: int | None) -> list[tuple[str, str]]:
    """``(reasoning, gold)`` per GSM8K row: the solution without its ``####`` line, and the gold number."""
    rows = []
    for path in paths:
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                reasoning, _, gold = json.loads(line)["answer"].rpartition("####")
                rows.append((reasoning.strip(), gold.strip().replace(",", "")))
    return rows[:limit]


def _time(fn: Callable[[], list[bool]]) -> tuple[float, list[bool]]:
    start = time.perf_counter()
    results = fn()
    return time.perf_counter() - start, results


def _reward_cases(rows: list[tuple[str, str]]) -> dict[str, Callable[[], list[bool]]]:
    texts = [_styles(reasoning, gold)["tags (<answer>n</answer>)"] for reasoning, gold in rows]
    golds = [gold for _, gold in rows]
    ids = [[0] * (len(text) // 4) for text in texts]  # ~4 characters per token
    batches = range(0, len(texts), _BATCH)
    correctness, format_reward = Correctness(), Format(style="tags")

    def run(reward: Callable) -> list[bool]:
        paid = []
        for i in batches:
            s = slice(i, i + _BATCH)
            paid += [r > 0 for r in reward(completions=texts[s], completion_ids=ids[s], gold=golds[s])]
        return paid

    return {
        f"reward correctness (tags, batches of {_BATCH})": lambda: run(correctness),
        f"reward format (tags, batches of {_BATCH})": lambda: run(format_reward),
    }


def benchmark(rows: list[tuple[str, str]]) -> list[tuple[str, int, float, float]]:
    """``(case, completions, seconds, share ok)`` for every style and reward (see the module docstring)."""
    styled = [_styles(reasoning, gold) for reasoning, gold in rows]
    cases: dict[str, Callable[[], list[bool]]] = {}
    for style in styled[0]:
        texts = [(s[style], gold) for s, (_, gold) in zip(styled, rows)]
        cases[f"extract_answer: {style}"] = lambda t=texts: [extract_answer(x) is not None for x, _ in t]
        cases[f"is_correct: {style}"] = lambda t=texts: [is_correct(x, g) for x, g in t]
    cases.update(_reward_cases(rows))
    table = []
    for case, fn in tqdm(cases.items(), desc="grading", unit="case", file=sys.stderr):
        seconds, results = _time(fn)
        table.append((case, len(results), seconds, sum(results) / max(len(results), 1)))
    return table


def main(argv: list[str] | None = None) -> int:
    """Print the throughput table; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, nargs="+", default=None, help="GSM8K JSONL files")
    parser.add_argument("--limit", type=int, default=None, help="use only the first N rows")
    args = parser.parse_args(argv)
    paths = args.data or _default_data()
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        print(
            f"No GSM8K data at {', '.join(missing)}. Set GSM8K_DATA_DIR to a folder with train.jsonl and "
            "test.jsonl, or pass --data FILE.jsonl (e.g. --data recipes/samples/gsm8k_test_sample.jsonl).",
            file=sys.stderr,
        )
        return 2
    rows = load_rows(paths, args.limit)
    print(f"Grader throughput on {len(rows)} GSM8K solutions ({', '.join(p.name for p in paths)})\n")
    print(f"{'case':<58} {'completions':>11} {'seconds':>8} {'per second':>11} {'ok':>8}")
    for case, n, seconds, ok in benchmark(rows):
        print(f"{case:<58} {n:>11} {seconds:>8.3f} {n / max(seconds, 1e-9):>11,.0f} {ok:>8.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
