"""Short arithmetic word problems, generated from a seed: the task a tiny model can learn on a CPU.

    data: {task: arithmetic}                                  # in a recipe: rows are generated, no files
    python -m recipes.tasks.arithmetic /tmp/arith             # or write train/heldout/test.jsonl (GSM8K's shape)

Each problem has one or two operations (add or subtract) on small whole numbers, e.g.

    {"question": "Mia has 7 apples. She buys 5 more. How many apples does Mia have now?",
     "answer": "7 + 5 = 12\\n#### 12", "id": "arith-3f2a9c01d4e5"}

graded like GSM8K (the gold is a whole number; the solution ends with ``#### n``). The worked solution is one
``a op b = c`` line per operation, then the ``#### n`` line.

Splits never overlap: a problem belongs to the split its question text hashes to (``split_of``), so the
same text can never land in two splits whatever seeds or sizes are asked for, and rows are deduplicated
within a split. ``id`` is a digest of the question text: stable across runs, seeds and sizes. A recipe gets
``SIZES[split]`` problems of a split, drawn with seed 0, so every run and evaluation sees the same problems.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from pathlib import Path

SPLITS = ("train", "heldout", "test")
SIZES = {"train": 2000, "heldout": 200, "test": 500}  # problems a recipe's split holds
# Share of the problem space (by question-text hash) each split draws from: 80 / 10 / 10 percent.
SPLIT_BUCKETS = {"train": range(80), "heldout": range(80, 90), "test": range(90, 100)}
MAX_NUMBER = 10  # operands are 1..MAX_NUMBER; results stay in 0..3*MAX_NUMBER

NAMES = ["Mia", "Leo", "Ava", "Sam", "Zoe", "Max", "Eli", "Ivy", "Ben", "Lily", "Tom", "Nora", "Owen", "Ruby"]
ITEMS = ["apples", "pencils", "stickers", "marbles", "books", "cookies", "shells", "cards", "coins", "toys"]
# Operation phrasings: (op, sentence template). {n} is the person, {k} the number, {x} the item.
PHRASES = {
    "+": ["{n} buys {k} more.", "{n} finds {k} more.", "{n} gets {k} more.", "A friend gives {n} {k} more."],
    "-": ["{n} gives away {k}.", "{n} loses {k}.", "{n} eats {k}.", "{n} sells {k}."],
}
QUESTIONS = ["How many {x} does {n} have now?", "How many {x} are left?", "How many {x} does {n} have?"]


def split_of(question: str) -> str:
    """The split a question belongs to, from a hash of its text (so no text is ever in two splits)."""
    bucket = int(hashlib.sha256(question.encode()).hexdigest(), 16) % 100
    return next(name for name, share in SPLIT_BUCKETS.items() if bucket in share)


def problem_id(question: str) -> str:
    """A stable id: a digest of the question text."""
    return "arith-" + hashlib.sha256(question.encode()).hexdigest()[:12]


def random_problem(rng: random.Random) -> dict:
    """One problem with one or two operations, results never negative."""
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    value = rng.randint(1, MAX_NUMBER)
    sentences = [f"{name} has {value} {item}."]
    lines = []
    for _ in range(rng.choice((1, 2))):
        op = "-" if value > 1 and rng.random() < 0.5 else "+"
        k = rng.randint(1, min(MAX_NUMBER, value) if op == "-" else MAX_NUMBER)
        result = value + k if op == "+" else value - k
        sentences.append(rng.choice(PHRASES[op]).format(n=name, k=k))
        lines.append(f"{value} {op} {k} = {result}")
        value = result
    sentences.append(rng.choice(QUESTIONS).format(n=name, x=item))
    question = " ".join(sentences)
    return {"question": question, "answer": "\n".join(lines) + f"\n#### {value}", "id": problem_id(question)}


def make_rows(split: str, n: int, seed: int = 0) -> list[dict]:
    """``n`` distinct problems of ``split``, deterministic in ``(split, n, seed)``.

    Problems are drawn from one seeded stream and kept when their text hashes to ``split``; a text already
    kept is skipped.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    rng = random.Random(f"arithmetic:{seed}:{split}")
    rows, seen = [], set()
    for _ in range(n * 200):
        row = random_problem(rng)
        if row["question"] in seen or split_of(row["question"]) != split:
            continue
        seen.add(row["question"])
        rows.append(row)
        if len(rows) == n:
            return rows
    raise RuntimeError(f"could not draw {n} distinct {split} problems; ask for fewer")


def write_split(folder: str | Path, split: str, n: int, seed: int = 0) -> Path:
    """Write ``make_rows(split, n, seed)`` to ``<folder>/<split>.jsonl`` and return the file."""
    path = Path(folder) / f"{split}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(json.dumps(row) + "\n" for row in make_rows(split, n, seed)), encoding="utf-8")
    tmp.replace(path)
    return path


def write_splits(
    folder: str | Path, *, train: int = 2000, heldout: int = 200, test: int = 500, seed: int = 0
):
    """Write all three splits into ``folder``; returns the folder."""
    for split, n in (("train", train), ("heldout", heldout), ("test", test)):
        write_split(folder, split, n, seed)
    return Path(folder)


def rows(data: dict, split: str):
    """The task's rows of ``split`` (``SIZES[split]`` problems; ``data`` is unused: nothing is read)."""
    from datasets import Dataset

    from recipes.tasks.sources import DataError

    if split not in SIZES:
        raise DataError(f"The arithmetic task has splits {', '.join(SPLITS)}; got {split!r}.")
    problems = make_rows(split, SIZES[split])
    return Dataset.from_list(
        [
            {
                "id": p["id"],
                "question": p["question"],
                "solution": p["answer"],
                "gold": p["answer"].split("#### ")[-1],
            }
            for p in problems
        ]
    )


if __name__ == "__main__":
    print(write_splits(sys.argv[1]))
