"""Low-level text parsing for the grader: cleaning, numbers, ``\\boxed{...}``, answer snippets.

Every function here is linear in its input (no nested quantifiers that can backtrack) and works on
capped inputs, so grading time is bounded whatever a model emits.

Plain numbers are compared as canonical decimal strings ("1,080.50" -> "1080.5"): exact, no float
rounding, and safe on 5,000-digit numbers (Python's ``int()`` refuses strings over 4,300 digits).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from decimal import Decimal

from rewards._typography import GROUPED, grouped_number, imaginary_unit, repeated_number, vulgar_fractions

# Final answers sit at the end of a completion; the tail bounds the work on a runaway 1 MB output.
TAIL_CHARS = 10_000
# An answer snippet (a boxed body, the rest of a "#### " line, ...) longer than this is prose, not an answer.
MAX_SNIPPET_CHARS = 300

_MINUS = str.maketrans({"\u2212": "-", "\u2012": "-", "\u2013": "-", "\ufe63": "-", "\uff0d": "-"})
# LaTeX thousands separators between digits: 1{,}080, 1\,080, 1\!080, 10,\!080.
_LATEX_SEPARATOR = re.compile(r"(?<=[0-9])(?:\{,\}|,?\s*\\[,!]\s*)(?=[0-9])")

_NUMBER_CORE = r"[-+]?(?:(?:[0-9]{1,3}(?:,[0-9]{3})+(?![0-9])|[0-9]+)(?:\.[0-9]+)?|\.[0-9]+)(?:[eE][-+]?[0-9]{1,3}(?![0-9]))?"
# A number not glued to a word or a decimal point on its left ("Step2", "1.2.3").
NUMBER = re.compile(r"(?<![0-9A-Za-z_.])" + _NUMBER_CORE)
# A hedged answer names several values ("17 or 18", "17-19", "18 \\pm 1"): it must not score on any of them.
_PLUS_MINUS = re.compile(r"\\pm|\\mp|±|∓")
_OR = re.compile(r"[0-9]\s*[}(]?\s*(?:\\text\s*\{\s*)?\bor\b\s*\}?\s*\$?-?[0-9]")  # "17 or 18", "17 (or 18)"
# Against one number, two values joined by "or"/"and", "x =" or not, are a hedge too: "x = 6 or x = 5", "2 and 3".
# (Against a LaTeX gold they may be its whole answer: "x = 2 or x = -3" answers "-3, 2"; ``hedges`` keeps _OR.)
_OR_VALUES = re.compile(
    r"[0-9]\s*[}(]?\s*(?:\\text\s*\{\s*)?\b(?:or|and)\b\s*\}?\s*\$?(?:[A-Za-z]\s*=\s*)?-?[0-9]"
)
# A variable given a number as its final value ("x = 1," "x=2}"); one given two different ones ("x=1, x=2") is a
# hedge, while working ("x = 12 - 4, x = 8", "a + b = 7") and a restatement ("a = 3, so a = 3") are not.
_ASSIGNED = re.compile(
    r"(?:^|[,;{}$]|\b(?:or|and)\b)\s*([A-Za-z])\s*=\s*("
    + _NUMBER_CORE
    + r")\s*(?=$|[,;}]|\\text|\b(?:or|and)\b)"
)
_RANGE = re.compile(
    rf"{_NUMBER_CORE}\s*(?:-|–|—|\\ldots|\.\.\.|to\b|\\text\s*\{{\s*to\s*\}})\s*{_NUMBER_CORE}"
)
_SINGLE_LETTER_TAIL = re.compile(r"[0-9]\s*[A-Za-z]$")
# "18 (20 - 2)" or "18 (because 20 - 2 = 18)": a number, a space, then its working in parentheses is that number
# when the working has words or comes to the number; "2 (3 + 4)" is a product and "18 (17-19)" a range.
_NUMBER_ASIDE = re.compile(r"\$?(" + _NUMBER_CORE + r")\s+\(([^()]*)\)\s*\.?")
_ARITHMETIC = re.compile(r"[0-9.\s+*/()-]+")
# "18. Then 4 + 5 = 9.": a snippet whose first sentence is a number alone answers with it.
_SENTENCE_END = re.compile(r"(?<=[0-9A-Za-z)\]}$*_])\.\s+(?=[A-Z])")
HEDGED = "hedged"  # what a snippet holding a hedged answer yields: found, and never equal to a gold answer
_CANONICAL = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")
_PLAIN_SNIPPET = re.compile(r"\s*\\?\$?\s*(?:" + _NUMBER_CORE + "|(?P<grouped>" + GROUPED + r"))\s*\.?\s*")

# "#### 18" (GSM8K's final line); the group is the rest of the line.
HASH_LINE = re.compile(r"####[ \t#]*([^\n]*)")
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_BRACE = re.compile(r"(?<!\\)[{}]")
_TEXT_COMMAND = re.compile(r"\\(?:text|textbf|textrm|mathrm|mathbf|mbox|operatorname)\s*\{([^{}]*)\}")
# Wrappers that never change an answer's value: math delimiters, currency, percent, markdown bold, and the degree
# sign (a unit: "28^\circ" answers "28", as "90" answers a gold "90^\circ").
_DROP = re.compile(
    r"\\left|\\right|\\displaystyle|\\[$%]|\\[()\[\]]|[$%]|\*\*|\^\s*\{?\s*\\circ\s*\}?|°|\\degree\b"
)
# Unit words after a number or a closing brace: "18 dollars", "\frac{1}{2} cup", "3/4 of the cake", "5 cm^2".
# One letter counts as a unit only after a space: "1+2i" and "2k" are values, "5 m" is five metres; squared or
# cubed, only a unit of two letters or more ("3 x^2" is a value).
_UNIT_TAIL = re.compile(
    r"(?<=[0-9}])(?:(?:\s+[A-Za-z]|\s*[A-Za-z]{2})[A-Za-z .'/-]{0,40}|\s*[A-Za-z]{2,}\s*\^\s*\{?[23]\}?)$"
)
_SYMBOLIC = re.compile(r"\\[dt]?frac|\\sqrt|\\pi|[0-9)}]\s*/\s*[0-9({]|\^")
_WORD = re.compile(r"[A-Za-z]{3,}")
# The left side of an equation, not of an assignment: a coefficient times a variable ("5x - 7y + 4 = 0").
_EQUATION = re.compile(r"[0-9][A-Za-z]\b")
_LATEX_COMMAND = re.compile(r"\\(?:begin|end)\s*\{[A-Za-z*]*\}|\\[A-Za-z]+")  # \begin{pmatrix} is markup


def clean(text: str) -> str:
    """Unicode minus signs to ``-``, LaTeX thousands separators to ``,``."""
    return _LATEX_SEPARATOR.sub(",", text.translate(_MINUS))


def tail(text: str) -> tuple[int, str]:
    """The last ``TAIL_CHARS`` of ``text`` and their offset in it."""
    offset = max(len(text) - TAIL_CHARS, 0)
    return offset, text[offset:]


def canonical_number(number: str) -> str:
    """A number as written ("1,080.50", "-0", ".5") to its canonical decimal string.

    >>> [canonical_number(n) for n in ["1,080", "18.0", "-0", ".5", "+007.250", "1.8e1"]]
    ['1080', '18', '0', '0.5', '7.25', '18']
    """
    digits = number.replace(",", "")
    if "e" in digits.lower():  # scientific notation: 1.8e1 -> 18
        digits = format(Decimal(digits), "f")
    sign = "-" if digits.startswith("-") else ""
    whole, _, fraction = digits.lstrip("+-").partition(".")
    whole, fraction = whole.lstrip("0") or "0", fraction.rstrip("0")
    value = whole + ("." + fraction if fraction else "")
    return value if value == "0" else sign + value


def is_canonical_number(answer: str) -> bool:
    """Whether ``answer`` is a plain canonical number (as opposed to a symbolic answer for math-verify)."""
    return _CANONICAL.fullmatch(answer) is not None


def is_plain_number(snippet: str) -> bool:
    """Whether a snippet is just a number: optional ``$``, separators (``1,000``, ``1 000``), sign and final period,
    no words; not a number written twice ("293 293"), which the grader reads but is no plain number."""
    match = _PLAIN_SNIPPET.fullmatch(clean(snippet[:MAX_SNIPPET_CHARS]))
    return match is not None and not (match.group("grouped") and repeated_number(match.group("grouped")))


def _matching_braces(text: str, start: int) -> dict[int, int]:
    """Opening -> closing position of each brace pair from ``start`` on: braces before it cannot change how the later
    ones pair up, and skipping them makes a long LaTeX solution with its box at the end cheap to read."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    for match in _BRACE.finditer(text, start):
        if match.group() == "{":
            stack.append(match.start())
        elif stack:
            pairs[stack.pop()] = match.start()
    return pairs


def boxed_spans(text: str) -> Iterator[tuple[int, str]]:
    """``(start, body)`` of each balanced ``\\boxed{...}``, last first; an unclosed one is skipped."""
    opens = list(_BOXED.finditer(text))
    if not opens:
        return
    pairs = _matching_braces(text, opens[0].start())
    for match in reversed(opens):
        close = pairs.get(match.end() - 1)
        if close is not None:
            yield match.start(), text[match.end() : close]


def _is_working(number: str, aside: str) -> bool:
    """Whether ``aside`` (in parentheses after ``number``) is the working behind it, not a factor or a hedge:
    arithmetic that comes to the number ("20 - 2"), or words with no hedge in them ("because 20 - 2 = 18")."""
    if _ARITHMETIC.fullmatch(aside) and "**" not in aside:  # digits and + - * / only: no power to blow up
        try:
            value = eval(
                compile(ast.parse(aside.strip(), mode="eval"), "<aside>", "eval"), {"__builtins__": {}}
            )
        except (SyntaxError, ZeroDivisionError, TypeError, ValueError):
            return False
        return isinstance(value, (int, float)) and abs(value - float(canonical_number(number))) < 1e-9
    hedge = _PLUS_MINUS.search(aside) or re.search(r"\bor\b|\+/-|\bto\b", aside)
    return not hedge and bool(_WORD.search(aside))


def _number(text: str, typeset: bool) -> str | None:
    """``text`` as a canonical number when it is one number alone ("1,080", or "1 080" when ``typeset``)."""
    if NUMBER.fullmatch(text):
        return canonical_number(text)
    grouped = grouped_number(text) if typeset else None
    return canonical_number(grouped) if grouped else None


def answer_from_snippet(snippet: str, *, strict: bool = False, typeset: bool = True) -> str | None:
    """The answer in a short snippet: a canonical number, a symbolic string for math-verify, or None.

    Args:
        snippet: Text that should hold an answer (a boxed body, an ``<answer>`` body, a "####" line).
        strict: Only accept a snippet that is an answer as a whole (a number with unit words, or a
            symbolic expression); otherwise also take the first number of a sentence.
        typeset: Read typeset numbers (``rewards._typography``): vulgar fractions ("3¼"), and a whole answer
            in digit groups split by spaces ("1 000") as one number. lm-eval's grades do not: its regexes read
            "1" and "000", and "3" of "3¼", and these grades stay comparable with its figures.

    >>> [answer_from_snippet(s) for s in ["$1{,}080.00", "18 dollars.", r"\\dfrac12", "x = -3", "none"]]
    ['1080', '18', '\\\\dfrac12', '-3', None]
    >>> answer_from_snippet("Step 2: add", strict=True) is None
    True
    >>> [answer_from_snippet(s) for s in ["17 or 18", "17-19", r"18 \\pm 1", "1.8e1"]]
    ['hedged', 'hedged', 'hedged', '18']
    """
    text = imaginary_unit(clean(snippet[:MAX_SNIPPET_CHARS]))  # "6 - 5 i" is no 6 - 5 in unit i
    text = vulgar_fractions(text) if typeset else text
    text = next((body for _, body in boxed_spans(text)), text)
    first = _SENTENCE_END.split(text, maxsplit=1)[0]
    bare = _DROP.sub("", first).strip().strip("*_:$").strip()
    if not strict and first != text and (number := _number(bare, typeset)):  # a "####" line is read whole
        return number
    for _ in range(3):  # \text{\textbf{18}}: unwrap a few levels, bounded
        text = _TEXT_COMMAND.sub(r" \1 ", text)
    text = _DROP.sub("", text).strip().strip("*_:").strip()
    if (aside := _NUMBER_ASIDE.fullmatch(text)) and _is_working(aside.group(1), aside.group(2)):
        return canonical_number(aside.group(1))
    # Before "x = 6 or x = 5" is cut to its last value.
    values: dict[str, set[str]] = {}
    for variable, value in _ASSIGNED.findall(text):
        values.setdefault(variable, set()).add(canonical_number(value))
    hedged = _PLUS_MINUS.search(text) or _OR_VALUES.search(text) or any(len(v) > 1 for v in values.values())
    if "=" in text and not _EQUATION.search(text.rsplit("=", 1)[0]):  # "x = 18", not "5x - 7y + 4 = 0"
        text = text.rsplit("=", 1)[1]
    head = _UNIT_TAIL.sub("", text).strip().rstrip(".").strip()
    # "17-19 apples" is a range; "6 - 5i" (a single-letter tail: a variable, the imaginary unit) is a value.
    expression = _SINGLE_LETTER_TAIL.search(text.strip().rstrip("."))
    if hedged or (_RANGE.fullmatch(head) and not expression):
        return HEDGED
    if number := _number(head, typeset):
        return number
    if _SYMBOLIC.search(head) and not _WORD.search(_LATEX_COMMAND.sub("", head)):
        return " ".join(head.split())
    if strict:
        return None
    if head and not _WORD.search(_LATEX_COMMAND.sub("", head)) and head.count("{") == head.count("}"):
        return " ".join(head.split())  # "(3, 4]", "6 - 5i", "p - q": an answer, though not a number
    first = NUMBER.search(text)  # a sentence: "She has 18 apples left"
    return canonical_number(first.group()) if first else None


# A LaTeX answer's wrappers: math delimiters and markdown bold (``\$`` money signs are left to math-verify).
_LATEX_DROP = re.compile(r"\\displaystyle|(?<!\\)\$|\\[()\[\]]|\*\*")
# Math segments inside prose: "so the answer is $x^2 + 1$, as claimed".
_MATH_SEGMENT = re.compile(r"\$\$?([^$]+)\$\$?|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.DOTALL)
_TEXT_BODY = re.compile(r"\\(?:text|textbf|textrm|mathrm|mathbf|mbox|operatorname)\s*\{[^{}]*\}")
# Unit words after a value: "\frac{1}{2} cup" (two letters at least: "6 - 5i" keeps its i).
_LATEX_UNIT_TAIL = re.compile(r"(?<=[0-9}])\s*[A-Za-z]{2,}[A-Za-z .'/-]{0,40}$")


def _prose_words(text: str) -> int:
    """Words of three letters or more outside ``\\text{...}`` and LaTeX commands."""
    return len(_WORD.findall(_LATEX_COMMAND.sub(" ", _TEXT_BODY.sub(" ", text))))


def hedges(answer: str) -> frozenset[str]:
    """The ways an answer names several values: ``pm`` (``\\pm``, ``\\mp``) and ``or`` ("17 or 18")."""
    return frozenset(name for name, rule in (("pm", _PLUS_MINUS), ("or", _OR)) if rule.search(answer))


def latex_from_snippet(snippet: str, *, strict: bool = False) -> str | None:
    r"""The LaTeX answer in a short snippet, for comparison with a LaTeX gold answer by math-verify.

    Math delimiters, markdown bold, a trailing period and unit words go; the rest is left to math-verify.
    A snippet of prose yields its last math segment; without one, the first number (or None when
    ``strict``).

    >>> [latex_from_snippet(s) for s in [r"$\left( 3, \frac{\pi}{2} \right)$.", r"\text{Evelyn}", r"\frac12 cup"]]
    ['\\left( 3, \\frac{\\pi}{2} \\right)', '\\text{Evelyn}', '\\frac12']
    >>> latex_from_snippet("so the final value is $x^2 + 1$, as claimed"), latex_from_snippet("Step 2: add", strict=True)
    ('x^2 + 1', None)
    """
    text = vulgar_fractions(clean(snippet[:MAX_SNIPPET_CHARS]))
    text = next((body for _, body in boxed_spans(text)), text)
    if _prose_words(text) >= 2:
        segments = [next(filter(None, m.groups())) for m in _MATH_SEGMENT.finditer(text)]
        if segments:
            text = segments[-1]
        elif strict:
            return None
        else:
            first = NUMBER.search(text)
            return canonical_number(first.group()) if first else None
    text = _LATEX_DROP.sub("", text).strip().strip("*_:").strip().rstrip(".,;").strip()
    text = imaginary_unit(_LATEX_UNIT_TAIL.sub("", text).strip())
    return text or None
