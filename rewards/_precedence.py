r"""Locating a completion's final answer: the precedence rules, tried in order on the text's tail.

Final-answer precedence (``DEFAULT_PRECEDENCE``; every grader function takes ``precedence`` to reorder or
drop rules). The first rule that finds an answer wins; within a rule, the last candidate in the text wins:

1. ``boxed``: the last balanced ``\boxed{...}`` (nested braces fine; an unclosed one is skipped).
2. ``hash``: the last ``#### n`` whose rest of line is an answer (markdown headings such as
   ``#### Step 1: ...`` are not answers and are skipped).
3. ``answer_tag``: the last ``<answer>...</answer>``, or an unclosed ``<answer>`` running to the end.
4. ``phrase``: the last "the answer is ..." / "Answer: ..." with an answer on its line (or the next
   non-blank line when its own line is empty).
5. ``last_number``: the last number in the text.

``rewards.answers`` grades the answer found here against the gold answer.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from itertools import islice
from typing import NamedTuple

from common.suggestions import did_you_mean
from rewards._parsing import (
    HASH_LINE,
    HEDGED,
    MAX_SNIPPET_CHARS,
    NUMBER,
    answer_from_snippet,
    boxed_spans,
    canonical_number,
    clean,
    latex_from_snippet,
    tail,
)
from rewards._typography import VULGAR_AFTER

DEFAULT_PRECEDENCE = ("boxed", "hash", "answer_tag", "phrase", "last_number")
# Candidates tried per rule, from the last: bounds the work on texts with thousands of markers.
_MAX_CANDIDATES = 8
_OPEN_TAG = re.compile(r"<answer>", re.IGNORECASE)
_CLOSE_TAG = re.compile(r"</answer>", re.IGNORECASE)
_PHRASE = re.compile(r"\banswer\b[\s*_]{0,4}(?:is\b|:|=)", re.IGNORECASE)


Reader = Callable[..., "str | None"]  # answer_from_snippet (numbers) or latex_from_snippet (LaTeX golds)


class Found(NamedTuple):
    """A final answer located in a completion."""

    answer: str  # canonical number ("1080", "-0.5") or a symbolic string ("\\frac{1}{2}")
    start: int  # index in the text where the answer's marker starts (approximate after cleaning)
    rule: str  # the precedence rule that found it


def _last(matches: Iterator[re.Match]) -> list[re.Match]:
    return list(matches)[::-1][:_MAX_CANDIDATES]


def _from_boxed(text: str, read: Reader) -> tuple[int, str] | None:
    for start, body in islice(boxed_spans(text), _MAX_CANDIDATES):
        # A boxed answer is final even when it is not a number (\boxed{\text{east}}): it never falls through.
        answer = read(body) or latex_from_snippet(body)
        if answer is not None:
            return start, answer
    return None


def _from_hash(text: str, read: Reader) -> tuple[int, str] | None:
    for match in _last(HASH_LINE.finditer(text)):
        answer = read(match.group(1), strict=True)
        if answer is not None:
            return match.start(), answer
    return None


def _from_answer_tag(text: str, read: Reader) -> tuple[int, str] | None:
    for opening in _last(_OPEN_TAG.finditer(text)):
        closing = _CLOSE_TAG.search(text, opening.end())
        body = text[opening.end() : closing.start() if closing else len(text)]
        answer = read(body)
        if answer is not None:
            return opening.start(), answer
    return None


def _from_phrase(text: str, read: Reader) -> tuple[int, str] | None:
    for match in _last(_PHRASE.finditer(text)):
        line, _, after = text[match.end() : match.end() + MAX_SNIPPET_CHARS].partition("\n")
        if not line.strip(" \t*_:"):  # "The answer is:\n\n18"
            line = next((candidate for candidate in after.split("\n") if candidate.strip()), "")
        answer = read(line)
        if answer is not None:
            return match.start(), answer
    return None


def _from_last_number(text: str, read: Reader) -> tuple[int, str] | None:
    last = deque(NUMBER.finditer(text), maxlen=1)
    if not last:
        return None
    number = last[0]
    # "She ate 3¼ pies": with a vulgar fraction after it the number is a mixed number, read whole by a reader of
    # typeset numbers (by lm-eval's reading, 3).
    fraction = VULGAR_AFTER.match(text, number.end())
    mixed = fraction and read(text[number.start() : fraction.end()], strict=True)
    return number.start(), mixed or canonical_number(number.group())


_RULES = {
    "boxed": _from_boxed,
    "hash": _from_hash,
    "answer_tag": _from_answer_tag,
    "phrase": _from_phrase,
    "last_number": _from_last_number,
}


def check_precedence(precedence: Sequence[str]) -> tuple[str, ...]:
    """Validate a precedence list; raises ValueError naming unknown rules and the valid ones.

    >>> check_precedence(["hash", "boxed"])
    ('hash', 'boxed')
    """
    rules = tuple(precedence) if isinstance(precedence, (list, tuple)) else None
    if not rules:
        raise ValueError(
            f"precedence must be a non-empty list of rules from {list(_RULES)}, got {precedence!r}."
        )
    for rule in rules:
        if rule not in _RULES:
            hint = did_you_mean(rule, _RULES, quote=True)
            raise ValueError(f"Unknown precedence rule {rule!r}.{hint} Available: {', '.join(_RULES)}.")
    if len(set(rules)) != len(rules):
        raise ValueError(f"precedence lists a rule twice: {list(rules)}.")
    return rules


def find_answer(
    text: str, precedence: Sequence[str] = DEFAULT_PRECEDENCE, *, latex: bool = False, typeset: bool = True
) -> Found | None:
    r"""Locate the final answer of ``text``: its normalised value, where it starts, which rule found it.

    ``latex=True`` reads the answer as LaTeX for math-verify (for a gold answer such as ``[-2, 7]``)
    instead of normalising it to a number. ``typeset=False`` reads "1 000" as two numbers and "3¼" as 3, as
    lm-eval does (``answer_from_snippet``).

    >>> find_answer("So 9 * 2 = 18.\n#### 18")
    Found(answer='18', start=15, rule='hash')
    >>> find_answer(r"so $x \in \boxed{[-2, 7]}$", latex=True).answer
    '[-2, 7]'
    """
    rules = precedence if precedence is DEFAULT_PRECEDENCE else check_precedence(precedence)
    read = latex_from_snippet if latex else partial(answer_from_snippet, typeset=typeset)
    offset, body = tail(text)
    body = clean(body)
    for rule in rules:
        hit = _RULES[rule](body, read)
        if hit is not None:  # a hedged final answer ("17 or 18") is no answer, not a cue to look elsewhere
            return None if hit[1] == HEDGED else Found(answer=hit[1], start=offset + hit[0], rule=rule)
    return None
