r"""THE answer grader: the correctness reward and evaluation both grade through this module.

The final answer is located by the precedence rules of ``rewards._precedence`` (``DEFAULT_PRECEDENCE``:
the last ``\boxed{...}``, then the last ``#### n``, then the last ``<answer>...</answer>``, then an "answer
is" / "Answer:" phrase, then the last number; every function takes ``precedence`` to reorder or drop rules).

A hedged final answer ("17 or 18", "17-19", ``18 \pm 1``) is no answer: it scores on none of its values.
Numbers are normalised before comparison: thousands separators (``1,080``, ``1{,}080``, ``1\,080``),
``$``/``\$``, ``%``, unit words ("18 dollars", ``5\text{ cm}^2``), degree signs (``28^\circ``), a trailing
period, unicode minus signs, trailing zeros (``18.0 == 18``), scientific notation (``1.8e1 == 18``), typeset
numbers (``rewards._typography``: a whole answer in space-split groups ``1 000``, vulgar fractions ``3¼``). Plain
numbers compare exactly as canonical decimal strings; anything symbolic (``\frac{1}{2}``, ``\dfrac12``,
``3/4``) goes through math-verify, bounded in time on any thread.

A gold that is not a number (MATH's ``\frac{3}{56}``, ``[-2, 7]``, ``1 \pm \sqrt{19}``,
``\text{Evelyn}``, matrices, polynomials) is a LaTeX gold: the completion's answer is read as LaTeX by the
same rules and math-verify decides equivalence (``rewards._symbolic``: bounded in time on any thread, and
most unequal pairs settled by numeric fingerprints without sympy). Every MATH-500 reference solution grades
correct against its own answer and wrong against every other answer math-verify finds different.

Only the last ``TAIL_CHARS`` characters of a text are read, so grading a runaway 1 MB completion costs
the same as a normal one, and no function here raises on any model output.

A comparison that runs out of time (a busy machine, or an answer too costly to compare) is no match, and
``grade`` marks it unsettled (``Graded.settled``): the reward takes it as wrong at once; evaluation passes
``patient=True`` to have it compared with longer bounds, and records what stays unsettled.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from rewards._gold import Gold, gold_answer, read_gold
from rewards._layout import STYLES, check_style, format_parts
from rewards._parsing import (
    TAIL_CHARS,
    hedges,
    is_canonical_number,
)
from rewards._precedence import DEFAULT_PRECEDENCE, Found, find_answer
from rewards._symbolic import Verdict, judge

__all__ = [
    "GRADER_VERSION",
    "TAIL_CHARS",
    "Gold",
    "Graded",
    "answers_match",
    "extract_answer",
    "format_ok",
    "gold_answer",
    "grade",
    "is_correct",
    "lenient_correct",
    "lm_eval_grades",
    "read_gold",
    "strict_correct",
    "strict_precedence",
]

# Bump when a completion's grade can change (correct, the lm-eval grades, format_ok, pred). Evaluation records carry
# it: stats.compare refuses two files graded by different versions, and re-running an evaluation grades a file
# written by an older one again. 1: files written before records carried it. 2: typeset numbers (1 000, 3¼, 6 - 5 i).
# 3: a number written again ("#### 293 293") is that number, not 293293.
GRADER_VERSION = 3


def extract_answer(
    text: str, precedence: Sequence[str] = DEFAULT_PRECEDENCE, *, gold: str | float | Gold | None = None
) -> str | None:
    r"""The normalised final answer of a completion, or None when it has none.

    Args:
        text: A model completion (any string; never raises).
        precedence: Rule order, see the module docstring.
        gold: The answer as ``grade`` reads it against this gold: a LaTeX or text gold (MATH's, ``Paris``) also
            finds text and symbolic answers, and a hedged one (``1 \pm \sqrt{19}``) where the gold hedges so.
            None: as against a number (GSM8K).

    Returns:
        A canonical number ("1080", "-3", "0.5"), a symbolic answer ("\\frac{1}{2}"), or None.

    >>> extract_answer(r"The final answer is: $\boxed{1{,}080}$")
    '1080'
    >>> extract_answer("<reasoning>3 + 4 = 7</reasoning>\n<answer>$7.00</answer>")
    '7'
    >>> extract_answer("I don't know.") is None
    True
    >>> extract_answer("#### Paris"), extract_answer("#### Paris", gold="Paris")
    (None, 'Paris')
    """
    found = _final_answer(text, _A_NUMBER if gold is None else read_gold(gold), precedence)
    return found.answer if found else None


_A_NUMBER = Gold("0", latex=False)  # what extract_answer reads against without a gold: GSM8K's kind


def _final_answer(text: str, gold: Gold, precedence: Sequence[str], typeset: bool = True) -> Found | None:
    """The completion's final answer as graded against ``gold``; None for none, or for a hedge the gold lacks."""
    found = find_answer(text, precedence, latex=gold.latex, typeset=typeset)
    return None if found is None or (gold.latex and hedges(found.answer) - hedges(gold.answer)) else found


def answers_match(pred: str, gold: str, *, latex: bool = False) -> bool:
    r"""Whether two normalised answers (from ``extract_answer``/``gold_answer``) are equal.

    A number equals only a number or a short expression (``\frac{36}{2}``); ``latex=True`` (a LaTeX gold)
    lets math-verify compare anything.

    >>> answers_match("18", "18"), answers_match(r"\frac{1}{2}", "0.5"), answers_match("18", "1.8")
    (True, True, False)
    """
    return _match(pred, gold, latex, patient=False).match


def _match(pred: str, gold: str, latex: bool, patient: bool) -> Verdict:
    if is_canonical_number(pred) and is_canonical_number(gold):
        return Verdict(pred == gold)
    return judge(gold, pred, cheap_only=not latex, patient=patient)


class Graded(NamedTuple):
    """A completion graded against a gold answer: read its fields by name (``grade(...).correct``), which stays valid
    as fields come, or unpack all three (``found, correct, settled = grade(...)``; before ``settled``, two)."""

    found: Found | None  # the final answer located (None: no answer, or a hedged one)
    correct: bool
    # False: the comparison ran out of time before it was decided, and correct is False for want of a verdict.
    settled: bool = True


def grade(
    text: str,
    gold: str | float | Gold,
    precedence: Sequence[str] = DEFAULT_PRECEDENCE,
    *,
    patient: bool = False,
) -> Graded:
    r"""Locate a completion's final answer and compare it with the gold answer.

    A hedged answer (``x = 1 \pm \sqrt{19}``, "3 or 4") is no answer, unless the gold itself is hedged
    the same way: MATH's ``1 \pm \sqrt{19}`` is one answer naming two values.

    ``patient=True`` (evaluation): the comparison gets longer bounds; what still runs out is ``settled=False``.
    Without it (the reward) a comparison that runs out is a no match, ``settled=False``.

    >>> grade(r"So $r = \boxed{(3, \tfrac{\pi}{2})}$.", r"\left( 3, \frac{\pi}{2} \right)").correct
    True
    >>> grade(r"$x = \boxed{1 \pm \sqrt{19}}$", r"1 \pm \sqrt{19}").correct, grade(r"\boxed{18 \pm 1}", "18").found
    (True, None)
    """
    return _grade(text, read_gold(gold), precedence, patient, typeset=True)


def _grade(text: str, gold: Gold, precedence: Sequence[str], patient: bool, typeset: bool) -> Graded:
    found = _final_answer(text, gold, precedence, typeset)
    if found is None:
        return Graded(None, False)
    verdict = _match(found.answer, gold.answer, gold.latex, patient)
    return Graded(found, verdict.match, verdict.settled)


def is_correct(
    text: str, gold: str | float, precedence: Sequence[str] = DEFAULT_PRECEDENCE, *, patient: bool = False
) -> bool:
    r"""Whether a completion's final answer equals the gold answer.

    Args:
        text: A model completion (any string; never raises on it).
        gold: The gold answer: plain ("1080"), GSM8K's solution form ("... #### 1,080") or LaTeX ("[-2, 7]").
        precedence: Rule order, see the module docstring.
        patient: Compare again with longer bounds what runs out of time (see ``grade``).

    Raises:
        ValueError: The gold holds no answer (see ``read_gold``).

    >>> is_correct(r"Janet makes \(\boxed{18}\) dollars.", "#### 18")
    True
    >>> is_correct("The answer is 18.5", "18"), is_correct(r"\boxed{\text{(C)}}", "C")
    (False, True)
    """
    return grade(text, gold, precedence, patient=patient).correct


def format_ok(text: str, style: str | None = None) -> bool:
    r"""Whether the final answer is given in a shipped prompt style's form, and parses.

    ``tags``: an ``<answer>...</answer>`` block; ``hash``: a ``#### n`` line. ``style=None`` accepts
    either. Evaluation splits samples into correct / well-formatted but wrong / unparseable with it.

    >>> format_ok("<reasoning>3+4</reasoning><answer>7</answer>"), format_ok("so 7", style="hash")
    (True, False)
    """
    styles = STYLES if style is None else (check_style(style),)
    return any(format_parts(text, name).answer for name in styles)


# The rule that reads each prompt style's answer marker.
_STYLE_RULES = {"tags": ("answer_tag",), "hash": ("hash",), "boxed": ("boxed",)}
# lm-eval's GSM8K "flexible-extract", plus a boxed answer: what a reader of the text would take as the answer.
LENIENT_PRECEDENCE = ("boxed", "last_number")


def lm_eval_grades(
    text: str, gold: str | float | Gold, style: str | None = None, *, patient: bool = False
) -> tuple[Graded, Graded]:
    r"""lm-eval's GSM8K grades, ``(strict, lenient)``: see ``strict_correct`` and ``lenient_correct``.

    Normalised as ``grade`` normalises, but numbers are read as lm-eval's regexes read them, so that these stay
    comparable with published figures: "#### 1 000" is 1 (strict) or 000 (flexible), "3¼" is 3.

    >>> [g.correct for g in lm_eval_grades("#### 1 000", "1000", "hash")], grade("#### 1 000", "1000").correct
    ([False, False], True)
    """
    gold = read_gold(gold)
    strict, lenient = (
        _grade(text, gold, rules, patient, typeset=False)
        for rules in (strict_precedence(style), LENIENT_PRECEDENCE)
    )
    return strict, lenient


def strict_correct(text: str, gold: str | float, style: str | None = None, *, patient: bool = False) -> bool:
    r"""Correct in the format the prompt asks for: the answer read only from the style's marker.

    Like lm-eval's GSM8K "strict-match" (see ``lm_eval_grades``). ``style=None`` accepts either shipped marker.

    >>> strict_correct("#### 7", "7", "hash"), strict_correct(r"\boxed{7}", "7", "hash")
    (True, False)
    """
    return _grade(text, read_gold(gold), strict_precedence(style), patient, typeset=False).correct


def strict_precedence(style: str | None = None) -> tuple[str, ...]:
    """The rules ``strict_correct`` reads an answer with: the style's marker (either shipped marker for None)."""
    return sum((_STYLE_RULES[name] for name in (STYLES if style is None else (check_style(style),))), ())


def lenient_correct(text: str, gold: str | float, *, patient: bool = False) -> bool:
    r"""Correct by the last boxed answer, else the last number anywhere (lm-eval's "flexible-extract").

    Numbers read as lm-eval reads them (see ``lm_eval_grades``); ``patient``: see ``grade``.

    >>> lenient_correct("So she pays 7 dollars.", "7"), lenient_correct("7 apples, then 9 pears", "7")
    (True, False)
    """
    return _grade(text, read_gold(gold), LENIENT_PRECEDENCE, patient, typeset=False).correct
