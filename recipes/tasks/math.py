r"""MATH (Hendrycks et al., 2021): competition problems whose answers are LaTeX, graded on the final ``\boxed{}``.

    data: {task: math, source: EleutherAI/hendrycks_math, config: null, eval_source: HuggingFaceH4/MATH-500}

Training reads the Hub's ``EleutherAI/hendrycks_math`` (seven subject configs, all of them concatenated when
``data.config`` is null, one when it names a subject); evaluation reads ``HuggingFaceH4/MATH-500`` (split
``test``), the 500-problem subset most GRPO papers report, named by ``data.eval_source``. Local JSONL/Parquet
files in either shape work as for GSM8K (one file, a folder of split files, or a Hub-layout folder).

Rows keep ``subject`` (MATH-500's ``subject``, or the original ``type``, e.g. "Precalculus") and ``level`` (1-5;
null for the original's "Level ?"), so evaluation can be read by subject and level.

Gold: the ``answer`` field when the row has one (MATH-500), else the body of the solution's last balanced
``\boxed{...}``, as raw LaTeX (the grader compares it symbolically). A row with neither is dropped with a warning;
more than ``MAX_DROPPED_SHARE`` of such rows means the data is not MATH-shaped, and loading stops.

Ids: ``math-`` + MATH-500's ``unique_id`` without ``.json`` ("math-test/precalculus/807"), else
``math-<split>-<subject slug>-<index within the subject>`` ("math-train-counting_and_probability-0012"): the
same whether the subjects are loaded together or one at a time.
"""

from __future__ import annotations

import logging
import re
from collections import Counter

from common.suggestions import did_you_mean
from recipes.tasks.sources import DataError, checked_gold, checked_question, config_names, read_raw, row_place

logger = logging.getLogger(__name__)

# The subject configs of EleutherAI/hendrycks_math, in the order they are concatenated.
SUBJECTS = (
    "algebra",
    "counting_and_probability",
    "geometry",
    "intermediate_algebra",
    "number_theory",
    "prealgebra",
    "precalculus",
)
# Share of rows without a gold answer that is a quirk of MATH (a 402-problem sample of its train set has one empty
# \boxed{}), not a sign of a wrong file.
MAX_DROPPED_SHARE = 0.01
_LEVEL = re.compile(r"\s*(?:level\s*)?([1-5?])\s*", re.IGNORECASE)


def read_math(source: str, split: str, config: str | None):
    """Raw rows: every subject config concatenated when ``config`` is null and the source has them."""
    from datasets import concatenate_datasets

    names = config_names(source)
    if names is None:  # local data files have no configs
        return read_raw(source, split)
    if config is not None:
        if config not in names:
            hint = did_you_mean(config, names)
            raise DataError(
                f"data.config {config!r} is not a config of {source}.{hint} Available: {', '.join(names)}; "
                "or data.config: null for all subjects."
            )
        return read_raw(source, split, config)
    subjects = [name for name in SUBJECTS if name in names]
    if not subjects and len(names) > 1:
        raise DataError(
            f"{source} has configs {', '.join(names)} and none is a MATH subject; name one with data.config."
        )
    if not subjects:  # one-config datasets such as MATH-500
        return read_raw(source, split, None)
    return concatenate_datasets([read_raw(source, split, name) for name in subjects])


def boxed_gold(solution: str) -> str | None:
    r"""The body of the last balanced ``\boxed{...}`` of a solution, as written; None when there is none or it is empty.

    >>> boxed_gold(r"So $x = \boxed{\frac{1}{2}}$, not \boxed{3")
    '\\frac{1}{2}'
    >>> boxed_gold(r"the answer is $\boxed{}$.") is None
    True
    """
    from rewards._parsing import boxed_spans

    body = next((body for _, body in boxed_spans(solution)), None)
    return body.strip() or None if body is not None else None


def parse_level(value) -> int | None:
    """1-5 from an int or "Level N"; None for "Level ?" or a missing level. DataError for anything else."""
    if value is None or isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 5:
        return value
    match = _LEVEL.fullmatch(value) if isinstance(value, str) else None
    if not match:
        raise DataError(f"level {value!r} is not 1-5 or 'Level N' (N = 1-5, or ?).")
    return None if match.group(1) == "?" else int(match.group(1))


def slug(subject: str | None) -> str:
    """A subject as the Hub config names it: "Counting & Probability" -> "counting_and_probability"."""
    return re.sub(r"[^a-z0-9]+", "_", (subject or "unknown").lower().replace("&", "and")).strip("_")


def rows(data: dict, split: str):
    """MATH rows of ``split`` with ``id``, ``question``, ``solution``, ``gold``, ``subject`` and ``level``."""
    from datasets import Dataset

    source = data["source"]
    raw = read_math(source, split, data.get("config"))
    columns = set(raw.column_names)
    if "problem" not in columns or not columns & {"answer", "solution"}:
        raise DataError(
            f"{source}: MATH rows need a problem field and an answer or solution field; found "
            f"{', '.join(raw.column_names) or 'no columns (an empty file?)'}. For question/answer files use "
            "data.task: jsonl."
        )
    out, missing, per_subject = [], [], {}
    for index, row in enumerate(raw):
        subject = row.get("subject") or row.get("type")
        number = per_subject[slug(subject)] = per_subject.get(slug(subject), -1) + 1
        uid = row.get("unique_id")
        row_id = f"math-{uid.removesuffix('.json')}" if uid else f"math-{split}-{slug(subject)}-{number:04d}"
        answer = row.get("answer")
        gold = str(answer).strip() if answer is not None and str(answer).strip() else None
        solution = row.get("solution") or ""
        field = "answer" if gold else "solution"  # the field the gold came from, named in an error
        gold = gold or boxed_gold(solution)
        if gold is None:
            missing.append((row_id, index))
            continue
        try:
            level = parse_level(row.get("level"))
        except DataError as e:
            raise DataError(f"{row_place(source, split, index)}: {e}") from None
        gold = checked_gold(gold, field, source, split, index)
        out.append(
            {
                "id": row_id,
                "question": checked_question(row["problem"], "problem", source, split, index),
                "solution": solution or gold,
                "gold": gold,
                "subject": subject,
                "level": level,
            }
        )
    check_missing(missing, len(raw), source, split)
    repeated = [i for i, n in Counter(r["id"] for r in out).items() if n > 1]
    if repeated:
        raise DataError(f"{source} ({split}): id {repeated[0]!r} repeats; ids (unique_id) must be unique.")
    return Dataset.from_list(out)


_warned: set[tuple[str, str, str]] = set()


def check_missing(missing: list[tuple[str, int]], total: int, source: str, split: str) -> None:
    """Warn once about rows (id, index) without a gold answer; refuse data where they are more than a quirk."""
    if not missing:
        return
    first = ", ".join(f"{row_id} ({row_place(source, split, index)})" for row_id, index in missing[:3])
    if len(missing) > MAX_DROPPED_SHARE * total:
        raise DataError(
            f"{source} ({split}): {len(missing)} of {total} rows have no gold answer (no answer field and no "
            rf"non-empty \boxed{{...}} in the solution), e.g. {first}. This does not look like MATH data; "
            "check data.source, or use data.task: jsonl for question/answer files."
        )
    if (
        source,
        split,
        first,
    ) in _warned:  # a run reads its training split twice (training, held-out questions)
        return
    _warned.add((source, split, first))
    logger.warning(
        r"%s (%s): dropped %d of %d rows with no gold answer (an empty or missing \boxed{} in the solution): %s.",
        source,
        split,
        len(missing),
        total,
        first,
    )
