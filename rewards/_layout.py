"""Which parts of a shipped prompt style a completion follows; used by the format reward and ``format_ok``.

Styles:
    ``tags``: ``<reasoning>...</reasoning>`` then ``<answer>...</answer>`` (recipes/_base.yaml's prompt).
    ``hash``: reasoning text, then GSM8K's final line ``#### n``.
    ``boxed``: reasoning text, then one final ``\\boxed{...}`` (MATH's and Qwen2.5-Math's convention).
"""

from __future__ import annotations

import re
from itertools import islice
from typing import NamedTuple

from common.suggestions import did_you_mean
from rewards._parsing import (
    HASH_LINE,
    HEDGED,
    answer_from_snippet,
    boxed_spans,
    is_plain_number,
    latex_from_snippet,
    tail,
)

STYLES = ("tags", "hash", "boxed")
# What a prompt must mention for a model to learn each layout: the format reward cannot be earned otherwise.
STYLE_MARKERS = {"tags": "<answer>", "hash": "####", "boxed": "\\boxed"}
_REASONING_OPEN = re.compile(r"<reasoning>", re.IGNORECASE)
_REASONING_CLOSE = re.compile(r"</reasoning>", re.IGNORECASE)
_ANSWER_OPEN = re.compile(r"<answer>", re.IGNORECASE)
_ANSWER_CLOSE = re.compile(r"</answer>", re.IGNORECASE)
_BOXED_OPEN = re.compile(r"\\(?:boxed|fbox)\s*\{")
# What may close a boxed answer's sentence: math delimiters ($, $$, \] or \)), a period, whitespace.
_MATH_CLOSE = re.compile(r"\\[\])]")
_END_CHARS = " \t\r\n.$"


class FormatParts(NamedTuple):
    """The format checks a completion passes."""

    reasoning: bool  # a non-empty reasoning section before the answer
    answer: bool  # the final answer in the style's marker, and it parses ("17 or 18" does not: a hedge)
    number: bool  # that answer is a plain number (no words, no LaTeX)
    clean_end: bool  # nothing but whitespace after it


def check_style(style: str) -> str:
    """Validate a style name; raises ValueError listing the shipped styles."""
    if style not in STYLES:
        hint = did_you_mean(style, STYLES, quote=True)
        raise ValueError(f"Unknown format style {style!r}.{hint} Available: {', '.join(STYLES)}.")
    return style


def _only(tag: re.Pattern, text: str) -> re.Match | None:
    """The tag's match when it occurs exactly once (scans for two at most, at C speed)."""
    found = list(islice(tag.finditer(text), 2))
    return found[0] if len(found) == 1 else None


def _tags_parts(text: str) -> FormatParts:
    r_open, r_close = _only(_REASONING_OPEN, text), _only(_REASONING_CLOSE, text)
    a_open, a_close = _only(_ANSWER_OPEN, text), _only(_ANSWER_CLOSE, text)
    body = (
        text[a_open.end() : a_close.start()]
        if a_open and a_close and a_open.end() <= a_close.start()
        else None
    )
    answer = body is not None and answer_from_snippet(body) not in (None, HEDGED)
    reasoning = bool(
        r_open
        and r_close
        and text[r_open.end() : r_close.start()].strip()
        and (a_open is None or r_close.end() <= a_open.start())
    )
    return FormatParts(
        reasoning=reasoning,
        answer=answer,
        number=answer and is_plain_number(body),
        clean_end=answer and not text[a_close.end() :].strip(),
    )


def _hash_parts(text: str) -> FormatParts:
    offset, end = tail(text)  # the final line is at the end; a runaway text costs no more than a normal one
    for final in reversed(list(HASH_LINE.finditer(end))[-8:]):  # markdown "#### Step 1" headings are skipped
        if (found := answer_from_snippet(final.group(1), strict=True)) is not None:
            break
    else:
        return FormatParts(False, False, False, False)
    if found == HEDGED:  # "#### 17 or 18": the grader reads no answer, so the format pays none either
        return FormatParts(bool(text[: offset + final.start()].strip()), False, False, False)
    return FormatParts(
        reasoning=bool(text[: offset + final.start()].strip()),
        answer=True,
        number=is_plain_number(final.group(1)),
        clean_end=not end[final.end() :].strip(),
    )


def _boxed_parts(text: str) -> FormatParts:
    offset, end = tail(text)  # as for hash: the answer is at the end, and a runaway text costs no more
    spans = list(islice(boxed_spans(end), 2))  # last first; two are enough to know it is not the only one
    if len(spans) != 1 or latex_from_snippet(spans[0][1]) is None:
        return FormatParts(False, False, False, False)
    start, body = spans[0]
    close = _BOXED_OPEN.match(end, start).end() + len(body)  # the closing brace
    before = text[: offset + start].rstrip(_END_CHARS + "\\[(")  # "so $\\boxed": the $ opens the answer
    return FormatParts(
        reasoning=bool(before),
        answer=True,
        # MATH's answers are LaTeX: \frac{1}{2} must not pay less than 0.5, or the reward teaches decimals.
        number=True,
        clean_end=not _MATH_CLOSE.sub("", end[close + 1 :]).strip(_END_CHARS),
    )


_PARTS = {"tags": _tags_parts, "hash": _hash_parts, "boxed": _boxed_parts}


def format_parts(text: str, style: str) -> FormatParts:
    """The format checks ``text`` passes in ``style``.

    >>> format_parts("<reasoning>3+4</reasoning>\\n<answer>7</answer>", "tags")
    FormatParts(reasoning=True, answer=True, number=True, clean_end=True)
    >>> format_parts("3 + 4 = 7\\n#### 7 apples\\nDone!", "hash")
    FormatParts(reasoning=True, answer=True, number=False, clean_end=False)
    >>> format_parts("So $x = \\\\boxed{\\\\frac{1}{2}}$.", "boxed")
    FormatParts(reasoning=True, answer=True, number=True, clean_end=True)
    """
    return _PARTS[check_style(style)](text)
