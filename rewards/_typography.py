r"""Typeset spellings of numbers, rewritten to the plain forms the grader reads.

Models trained on typeset text write numbers the way print does, and math-verify misreads each of these:

- Vulgar fractions: ``½`` is ``\frac{1}{2}`` and ``3¼`` (a mixed number) is ``\frac{13}{4}``, as a final
  answer and as the last number; before, ``3¼`` read as 3 and ``½`` as no answer (math-verify keeps it a string).
- Digit groups split by a space (SI style: ``1 000``, or a thin or no-break space): one number when a whole
  answer is written so and every group after the first has exactly three digits, with the same space
  throughout. Elsewhere they are separate numbers: "#### 12 15" is not 1215, and in running text "on day
  3 000 people came" is not a number of 3,000. (math-verify reads ``$1 000$`` as 1 * 000 = 0.) Groups that all
  repeat the first, three digits each, are that number repeated, not one grouped number: "#### 293 293" (and
  "293 293 293") is 293. A model that says its final number twice is far more common than an SI-grouped answer
  whose groups are all alike; a sign or a decimal part ("-293 293", "293 293.5") is no repeat, so those stay one
  grouped number.
- The imaginary unit set apart from its coefficient (``6 - 5 i``, ``6 - 5\,i``, ``5 \cdot i``,
  ``5\mathrm{i}``): math-verify gives an expression with a free-standing ``i`` complex symbols and one with
  ``5i`` real ones, two different ``i``, so ``6 - 5 i`` never equalled a gold ``6-5i``; it drops ``\mathrm{i}``
  (``6-5\mathrm{i}`` equalled 1), and the number reader cut " i" off as a unit word ("5 m"), so ``6 - 5 i``
  equalled 1 too. Written next to its coefficient, as MATH's golds write it, the unit compares alike.
"""

from __future__ import annotations

import re
import unicodedata
from fractions import Fraction

_VULGAR = "½⅓⅔¼¾⅕⅖⅗⅘⅙⅚⅐⅛⅜⅝⅞⅑⅒↉"
_VALUE = {char: Fraction(unicodedata.numeric(char)).limit_denominator(10) for char in _VULGAR}
# Spaces that typeset text puts in numbers: a space, no-break, figure, thin, narrow no-break.
_SPACES = " \u00a0\u2007\u2009\u202f"
# A whole part directly before the fraction, or after one space ("3 ½"), makes a mixed number.
_FRACTION = re.compile(rf"(?:(?<![0-9.,])([0-9]{{1,12}})[{_SPACES}]?)?([{_VULGAR}])")
# A vulgar fraction right after a number: the rest of a mixed number.
VULGAR_AFTER = re.compile(rf"[{_SPACES}]?[{_VULGAR}]")
# A number in groups of three split by one kind of space ("1 000 000", "1\u202f000.5"); a named group, so that
# other patterns can hold it.
GROUPED = rf"[-+]?[0-9]{{1,3}}(?P<space>[{_SPACES}])[0-9]{{3}}(?:(?P=space)[0-9]{{3}})*(?:\.[0-9]+)?"
_GROUPED = re.compile(GROUPED)
# The imaginary unit after a number, a closing brace or parenthesis, set apart by spacing or a product sign.
_SPACED_UNIT = re.compile(r"(?<=[0-9})])(?:\s|~|\\[,:; !]|\\cdot)+(?=i(?![A-Za-z]|\.[A-Za-z]))")
_WRAPPED_UNIT = re.compile(r"\\(?:mathrm|mathit|text|textrm|textit|operatorname)\s*\{\s*i\s*\}")


def _fraction(match: re.Match) -> str:
    value = _VALUE[match.group(2)] + int(match.group(1) or 0)
    return rf"\frac{{{value.numerator}}}{{{value.denominator}}}"


def vulgar_fractions(text: str) -> str:
    r"""Vulgar fractions as ``\frac``: ``½`` to ``\frac{1}{2}``, the mixed number ``3¼`` to ``\frac{13}{4}``.

    >>> vulgar_fractions("3¼ cups, ½ left, ⅔"), vulgar_fractions("-2 ½")
    ('\\frac{13}{4} cups, \\frac{1}{2} left, \\frac{2}{3}', '-\\frac{5}{2}')
    """
    return _FRACTION.sub(_fraction, text)


def repeated_number(answer: str) -> str | None:
    """The number when ``answer`` is one three-digit number written again with the same space ("293 293"), else None.

    >>> [repeated_number(s) for s in ["293 293", "293 293 293", "293 294", "-293 293", "293 293.5", "1 000", "293"]]
    ['293', '293', None, None, None, None, None]
    """
    match = _GROUPED.fullmatch(answer)
    # Every group after the first has three digits and no sign, so groups all alike are three plain digits each.
    groups = set(answer.split(match.group("space"))) if match else set()
    return groups.pop() if len(groups) == 1 else None


def grouped_number(answer: str) -> str | None:
    """``answer`` as one number when it is written in groups of three (a repeated number is that number), else None.

    >>> [grouped_number(s) for s in ["1 000", "-3\u202f000\u202f000.5", "12 15", "1 0000", "1000 000", "1 000\u2009000"]]
    ['1000', '-3000000.5', None, None, None, None]
    >>> grouped_number("293 293"), grouped_number("293 294")
    ('293', '293294')
    """
    match = _GROUPED.fullmatch(answer)
    if match is None:
        return None
    return repeated_number(answer) or answer.replace(match.group("space"), "")


def imaginary_unit(latex: str) -> str:
    r"""The imaginary unit written next to its coefficient: ``6 - 5\,i`` to ``6 - 5i``, ``5\mathrm{i}`` to ``5i``.

    >>> imaginary_unit(r"6 - 5 i"), imaginary_unit(r"\frac{1}{2} \cdot \mathrm{i}"), imaginary_unit("5 in")
    ('6 - 5i', '\\frac{1}{2}i', '5 in')
    """
    return _SPACED_UNIT.sub("", _WRAPPED_UNIT.sub("i", latex))
