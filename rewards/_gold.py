"""Gold answers, read once into the form the grader compares completions with (``rewards.answers`` exports them)."""

from __future__ import annotations

import re
from typing import NamedTuple

from rewards._parsing import (
    HEDGED,
    NUMBER,
    answer_from_snippet,
    canonical_number,
    is_canonical_number,
    latex_from_snippet,
)

# "3 1/2": LaTeX juxtaposition, a product, so neither 7/2 nor 3.5 would ever match it.
_MIXED_NUMBER = re.compile(r"-?\d+\s+\d+/\d+")
# Gold values that stand for a missing answer in hand-made data: a data error, not an answer to compare with.
_PLACEHOLDERS = frozenset({"n/a", "na", "none", "null", "nan", "?", "-", "tbd", "unknown"})


class Gold(NamedTuple):
    """A gold answer, read once: how completions are compared with it."""

    answer: str  # a canonical number ("1080") or a LaTeX answer ("\\left( 3, \\frac{\\pi}{2} \\right)")
    latex: bool  # compared whole by math-verify (MATH) rather than as a number (GSM8K)


def read_gold(gold: str | float | Gold) -> Gold:
    r"""A gold answer as the grader compares it.

    A number (``18``, ``1,080``, GSM8K's ``... #### 1,080``, ``5\text{ cm}``, ``90^\circ``) is compared as a
    number, exactly; anything else (``\frac{3}{56}``, ``[-2, 7]``, ``1 \pm \sqrt{19}``,
    ``\text{Evelyn}``) is a LaTeX answer that math-verify compares with the completion's.

    Raises:
        ValueError: The gold holds no answer (a data error, never a model's).
        TypeError: The gold is neither a string nor a number.

    >>> read_gold("She sells 9 * 2 = 18.\n#### 1,080"), read_gold(r"\$18.90")
    (Gold(answer='1080', latex=False), Gold(answer='18.9', latex=False))
    >>> read_gold(r"\left[ -2, 7 \right]"), read_gold(r"6 - 5i")
    (Gold(answer='\\left[ -2, 7 \\right]', latex=True), Gold(answer='6 - 5i', latex=True))
    """
    if isinstance(gold, Gold):
        return gold
    if isinstance(gold, bool) or not isinstance(gold, (str, int, float)):
        raise TypeError(f"gold answer must be a string or a number, got {type(gold).__name__} {gold!r}.")
    text = str(gold)
    if _MIXED_NUMBER.fullmatch(text.strip()):
        whole, numerator, denominator = (int(x) for x in re.findall(r"\d+", text))
        sign = "-" if text.strip().startswith("-") else ""
        raise ValueError(
            f"gold answer {text!r} is a mixed number, which math-verify reads as a product ({sign}{whole} x "
            f"{numerator}/{denominator}); write it as an improper fraction or a decimal: "
            f"{sign}{whole * denominator + numerator}/{denominator}."
        )
    _, marker, after = text.rpartition("####")
    if marker:  # GSM8K's solution form: the number after the last ####, as it always was
        answer = answer_from_snippet(after)
    else:
        number = answer_from_snippet(text, strict=True)
        answer = number if number and is_canonical_number(number) else latex_from_snippet(text, strict=True)
        numbers = NUMBER.findall(text)
        if (
            answer is None and len(numbers) == 1
        ):  # "The answer is 42"; "..., so 7." of three numbers is refused
            answer = canonical_number(numbers[0])
    if answer is None or (answer == HEDGED and marker) or answer.lower() in _PLACEHOLDERS:
        raise ValueError(
            f"gold answer {text[-200:]!r} is not one number or expression; expected a plain answer "
            r"such as '42', a LaTeX answer such as '\frac{3}{4}', or GSM8K's solution form '... #### 42' (a "
            r"sentence: end it with '#### 42'; a text answer: \text{...})."
        )
    return Gold(answer, latex=not is_canonical_number(answer) and not marker)


def gold_answer(gold: str | float) -> str:
    """The normalised gold answer (see ``read_gold``).

    >>> gold_answer("She sells 9 * 2 = 18.\\n#### 1,080"), gold_answer("18.0"), gold_answer(-3)
    ('1080', '18', '-3')
    """
    return read_gold(gold).answer
